"""``plan`` and ``estimate`` for a multislice training stack (kind ``maxtext-jobset``): the hybrid mesh,
step time and MFU, checkpoint size and restore time per tier, $ per training hour and per lost slice per
capacity tier (``components/planner/training_perf.py`` states every formula and assumption), and, for
``estimate``, tokens/s per chip and $ per billion training tokens at candidate slice counts.

Other kinds print nothing here (``training_estimate`` returns None for them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..catalog.models import MODELS
from ..config.resolve import StackPlan, capacities_of
from ..planner import multislice, training_perf
from ..workloads.maxtext_jobset.spec import MaxTextJobsetWorkload, multislice_plan, settings

CANDIDATE_SLICES: tuple[int, ...] = (1, 2, 4, 8, 16)
"""Slice counts ``estimate`` weighs (powers of two: MaxText's DCN data split of a power-of-two batch)."""


def _is_multislice_training(stack: StackPlan) -> bool:
    return isinstance(stack.config.workload, MaxTextJobsetWorkload)


def training_estimate(stack: StackPlan, slices: int | None = None) -> training_perf.TrainingEstimate | None:
    """The stack's training figures (at ``slices`` slices with the same per-device batch, for ``estimate``);
    None for a stack of another kind. ConfigError (exit 2) where the mesh or batch does not work."""
    if not _is_multislice_training(stack):
        return None
    config = stack.config
    spec = settings(config)
    slice_plan, mesh = multislice_plan(stack)
    if slices is not None and slices != mesh.slices:
        batch = round(mesh.per_device_batch * stack.slice.chips * slices)
        mesh = multislice.derive(slice_plan, slices, None, batch)
    tiers = spec.multi_tier_checkpointing
    return training_perf.estimate(
        MODELS[config.workload.model],
        stack.slice,
        mesh,
        seq=config.workload.max_target_length,
        region=config.region,
        capacities=capacities_of(config),
        checkpoint_period=spec.checkpoint_period,
        local_checkpoint_period=tiers.local_checkpoint_period if tiers.enabled and mesh.slices > 1 else None,
    )


def _gb(v: float) -> str:
    return f"{v / 1e9:,.1f} GB"


def _usd(v: float | None) -> str:
    return "n/a (no catalog price)" if v is None else f"${v:,.2f}"


def plan_lines(stack: StackPlan) -> list[str]:
    """What ``plan`` prints for a multislice training stack; empty for other kinds."""
    e = training_estimate(stack)
    if e is None:
        return []
    _, mesh = multislice_plan(stack)
    lines = [
        f"Multislice mesh: {e.slices} x {e.slice_key} = {e.devices} devices; ICI {multislice_text(mesh.ici)} within a "
        f"slice, DCN {multislice_text(mesh.dcn)} across slices (hybrid {multislice_text(mesh.hybrid)}); global batch "
        f"{e.global_batch} x {e.seq} tokens",
        f"Step time {e.step_s:.2f} s (compute {e.compute_s:.2f} s at {e.assumptions['mfu_of_compute']:.1%} MFU of "
        f"{e.assumptions['peak_bf16_flops_per_chip'] / 1e12:.0f} TFLOP/s per chip + DCN gradient all-reduce "
        f"{e.dcn_s:.2f} s); predicted MFU {e.mfu:.1%}; {e.tokens_per_s_per_chip:,.0f} tokens/s per chip "
        f"({e.flops_per_step / e.tokens_per_step / 1e9:.1f} GFLOP per token: 6N + 12LHDhT)",
        f"Checkpoint {_gb(e.checkpoint_bytes)} (parameters + Adam moments), {_gb(e.checkpoint_bytes_per_host)} per host"
        + (f"; RAM disk per host {e.ramdisk_bytes_per_host / 2**30:.0f} GiB (2 x shard + 15%)" if e.multi_tier else ""),
        "Restore per host: "
        + ", ".join(f"{tier} {seconds:,.0f} s" for tier, seconds in e.restore_s.items())
        + f" (+{e.assumptions['restart_overhead_seconds']:.0f} s restart)",
        f"Lost slice: recompute up to {e.checkpoint_period_steps} steps ({e.lost_slice_recompute_s:,.0f} s) + restore "
        f"from {e.lost_slice_restore_tier} + restart = {e.lost_slice_s / 60:,.1f} min of all {e.slices} slices",
    ]
    for price in e.prices:
        lines.append(
            f"  {price.capacity}: {_usd(price.usd_per_hour)}/training hour, {_usd(e.lost_slice_cost(price))} per lost slice, "
            f"{_usd(e.per_billion_tokens(price))} per billion tokens"
        )
    lines.append("note: assumptions and sources in components/catalog/checkpointing.py and components/planner/training_perf.py")
    return lines


def multislice_text(axes: Any) -> str:
    return " x ".join(f"{k}={v}" for k, v in dict(axes).items())


def training_json(stack: StackPlan) -> dict[str, Any] | None:
    """``plan --json``'s ``training``: the figures ``plan`` prints, None for a stack of another kind."""
    estimate = training_estimate(stack)
    return None if estimate is None else estimate.to_dict()


def print_training(console: Any, stack: StackPlan) -> None:
    """``plan``'s hook (components/tools/plan_view.py)."""
    from rich.markup import escape

    for line in plan_lines(stack):
        console.print(escape(line))


def estimate_rows(stack: StackPlan, counts: Sequence[int] = CANDIDATE_SLICES) -> list[dict[str, Any]]:
    """``estimate`` for a training stack: per candidate slice count (same slice, same per-device batch),
    tokens/s per chip and $ per billion training tokens per capacity tier. Empty for other kinds."""
    rows: list[dict[str, Any]] = []
    if not _is_multislice_training(stack):
        return rows
    for count in counts:
        e = training_estimate(stack, count)
        if e is None:
            continue
        rows.append(
            {
                "slices": count,
                "devices": e.devices,
                "global_batch": e.global_batch,
                "step_seconds": round(e.step_s, 3),
                "mfu": round(e.mfu, 4),
                "tokens_per_s_per_chip": round(e.tokens_per_s_per_chip, 1),
                "usd_per_billion_tokens": {p.capacity: e.per_billion_tokens(p) for p in e.prices},
                "usd_per_training_hour": {p.capacity: p.usd_per_hour for p in e.prices},
            }
        )
    return rows
