"""What ``plan`` and ``estimate`` say about prefill/decode disaggregation (``components.planner.
kv_handoff``): the KV hand-off per request (bytes, path, bandwidth, ms, share of TTFT) and the
stack's scenario served aggregated (the same slices as independent replicas) against disaggregated
(one P/D replica). Stacks whose replica is not a prefill plus a decode slice get nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..catalog.models import MODELS
from ..config.resolve import StackPlan, perf_key_of
from ..config.stack import StackConfig
from ..planner import ServingEstimate
from ..planner.kv_handoff import compare


def comparison_json(config: StackConfig, disaggregated: ServingEstimate) -> dict[str, Any] | None:
    """The comparison for one estimate of the stack's scenario; None unless it is of a P/D replica."""
    if not disaggregated.server.disaggregated:
        return None
    return compare(
        MODELS[config.workload.model],
        disaggregated,
        region=config.region,
        perf_key=perf_key_of(config),
        # Each role on its own node pool (one slice each): the hand-off leaves the slice.
        separate_pools=config.tpu.slices > 1,
    ).to_dict()


def disagg_json(stack_plan: StackPlan) -> dict[str, Any] | None:
    """``plan --json``'s ``disaggregation``: the comparison on the stack's own slice (the first
    serving estimate); None for a stack without a scenario or not disaggregated."""
    if not stack_plan.serving:
        return None
    return comparison_json(stack_plan.config, stack_plan.serving[0])


def estimate_json(config: StackConfig, estimates: Sequence[ServingEstimate], own: str | None) -> dict[str, Any] | None:
    """``estimate``'s comparison: on the stack's own slice (``cli_estimate.stack_slice``), with the
    scenario the command estimated (its flags may override ``workload.serving``)."""
    mine = next((e for e in estimates if e.plan.slice.key == own), None)
    return None if mine is None else comparison_json(config, mine)


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"


def _per_million(prices: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"{p['capacity']} "
        + ("n/a" if p["usd_per_million_output_tokens"] is None else f"${p['usd_per_million_output_tokens']:,.2f}")
        for p in prices
    )


def comparison_lines(data: dict[str, Any] | None) -> list[str]:
    """The comparison (``comparison_json``) as text, one fact a line; empty for None."""
    if data is None:
        return []
    h = data["kv_handoff"]
    link = {"dcn": "the data-centre network (prefill and decode on separate node pools)", "ici": "ICI (within the slice)"}
    wire = (
        ""
        if h["wire_bytes_per_request"] == h["bytes_per_request"]
        else f" ({_size(h['wire_bytes_per_request'])} sent as the chips hold it: int8 scales, replicated KV heads)"
    )
    lines = [
        f"KV hand-off per request: {h['input_tokens']} input tokens x {_size(h['bytes_per_token'])} = "
        f"{_size(h['bytes_per_request'])}{wire} over {link[h['link']]}",
        f"  at {h['bandwidth_bytes_per_s'] / 1e9:,.2f} GB/s ({h['bandwidth_basis']}) + {1e6 * h['latency_s']:g} us "
        f"per transfer (ASSUMED): {h['ms_per_request']:,.1f} ms per request, {100 * h['share_of_ttft']:.1f}% of the "
        "disaggregated TTFT (which includes it)",
    ]
    a, d = data["aggregated"], data["disaggregated"]
    lines.append(f"aggregated vs disaggregated on {d['slices']} x {data['slice']} (the stack's scenario):")
    for row, what in (
        (a, f"{a['replicas']} aggregated replicas, {' + '.join(map(str, a['concurrency_per_replica']))} in flight"),
        (d, f"1 P/D replica (prefill slice + decode slice), {d['concurrency_per_replica'][0]} in flight"),
    ):
        lines.append(
            f"  {row['mode']}: {what}: {row['output_tokens_per_s']:,.0f} output tok/s, TTFT {row['ttft_ms']:,.0f} ms, "
            f"TPOT {row['tpot_ms']:.1f} ms; $/M out: {_per_million(row['prices'])}"
        )
    cost_a, cost_d = (r["prices"][0]["usd_per_million_output_tokens"] if r["prices"] else None for r in (a, d))
    if cost_a is not None and cost_d is not None:
        tier = a["prices"][0]["capacity"]
        cheaper, ratio = ("aggregated", cost_d / cost_a) if cost_a < cost_d else ("disaggregated", cost_a / cost_d)
        lines.append(f"  cheaper per output token ({tier}): {cheaper}, by {ratio:.2f}x")
    return lines

