"""Capacity: turn a validated stack config into a verified slice and the workload's parallelism.

The stack names its model, serving/training settings and, usually, its TPU generation. When it also
pins a topology, the planner verifies that the model fits each slice and reports the margin; when it
does not, the planner picks the cheapest slice of that generation that fits (engines whose profile
says so: single-host only); when the generation is unset too, the cheapest fitting slice of every
generation documented in the stack's zone. The config is completed with the choice, and the ranked
alternatives are kept for the plan report. Either way the parallelism flags the
workload needs come from this plan, never from the stack file, and a workload that cannot work
is a ``ConfigError`` (exit 2, nothing registered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from .. import planner
from ..catalog import tpu as tpu_catalog
from ..catalog.models import MODELS, ModelArch
from ..workloads.kind import perf_key_violation
from .errors import ConfigError, Violation
from .stack import StackConfig
from .workload import serving_scenario


@dataclass(frozen=True)
class StackPlan:
    """A stack whose slice is resolved and verified, with the plan every workload reads from."""

    config: StackConfig
    capacity: planner.Plan
    selected: bool
    """True when the planner chose the topology (the stack left it, and maybe the generation, unset)."""
    ranking: planner.Ranking | None = None
    """When selected: every fitting slice the planner weighed, best (the chosen one) first, and
    why the other candidates were rejected."""
    serving: tuple[planner.ServingEstimate, ...] = ()
    """With a serving scenario (``workload.serving``): the predicted throughput, latency and $ per
    token of the chosen slice first, then (when the planner chose) every other fitting slice."""

    @property
    def slice(self) -> tpu_catalog.TpuSlice:
        return self.config.tpu.slice

    @property
    def flags(self) -> dict[str, Any]:
        """Engine flags from the plan, e.g. ``{"ici_tensor_parallelism": 8, ...}``."""
        return dict(self.capacity.sharding.flags)

    def alternatives(self) -> list[dict[str, Any]]:
        """The fitting slices the planner weighed, best first (empty for a pinned topology);
        ``price_per_hour`` None is a slice the catalog has no price for (ranked last)."""
        if self.ranking is None:
            return []
        chosen = self.capacity.slice.key
        return [
            {
                "generation": p.slice.generation.name,
                "slice": p.slice.key,
                "topology": p.slice.topology,
                "machine_type": p.slice.machine_type,
                "hosts": p.slice.hosts,
                "chips": p.slice.chips,
                "price_per_hour": p.price_per_hour,
                "margin_bytes": p.memory.margin,
                "margin_percent": round(100 * p.memory.margin_fraction, 2),
                "chosen": p.slice.key == chosen,
            }
            for p in self.ranking.fits
        ]

    def to_dict(self) -> dict[str, Any]:
        data = {"selected_by_planner": self.selected, **self.capacity.to_dict()}
        if self.ranking is not None:  # pinned stacks report exactly what they did before
            data["alternatives"] = self.alternatives()
            data["rejected"] = list(self.ranking.rejected)
        if self.serving:  # only stacks with a scenario: the others' plan JSON is unchanged
            data["serving"] = [e.to_dict() for e in self.serving]
        return data


def workload_of(config: StackConfig) -> planner.Workload:
    w, kind = config.workload, config.kind_info
    if kind.mode == "train":
        return planner.TrainingWorkload(
            per_device_batch_size=w.per_device_batch_size or 1,
            max_target_length=w.max_target_length,
            reserve_fraction=w.reserve_fraction,
            parallelism=w.parallelism,
        )
    kv = w.kv_cache or ("int8" if w.weights == "int8" else "bfloat16")
    return planner.ServingWorkload(
        kind.engine,
        max_target_length=w.max_target_length,
        max_prefill_length=w.max_prefill_length,
        per_device_batch_size=w.per_device_batch_size,
        batch_size=w.batch_size,
        weight_dtype=w.weights,
        kv_dtype=kv,
        reserve_fraction=w.reserve_fraction,
        parallelism=w.parallelism,
    )


def scenario_of(config: StackConfig) -> planner.Scenario | None:
    """The planner's scenario for ``workload.serving``; None when unset (or a training kind, which
    the config rejects with a serving scenario)."""
    spec = serving_scenario(config)
    if spec is None or config.kind_info.mode != "serve":
        return None
    return planner.Scenario(spec.input_tokens, spec.output_tokens, spec.concurrency, spec.ttft_ms, spec.tpot_ms)


def perf_key_of(config: StackConfig) -> str:
    """The kind's row of efficiency factors (``WorkloadKindInfo.perf_key``); a ``ConfigError`` naming
    the kind and the key when the calibration table has no such row (``estimate`` and ``plan`` exit 2)."""
    info = config.kind_info
    problem = perf_key_violation(info)
    if problem is not None:
        raise ConfigError([problem])
    if info.perf_key is None:  # a training kind is never estimated (scenario_of is None for it)
        raise TypeError(f"kind {info.kind} trains: it has no serving estimate")
    return info.perf_key


def _rank_by_token_cost(
    config: StackConfig, arch: ModelArch, fits: Iterable[planner.Plan], scenario: planner.Scenario
) -> tuple[tuple[planner.ServingEstimate, ...], tuple[str, ...]]:
    """``planner.rank_by_token_cost`` with the stack's engine, region, perf row and capacity (``plan``'s
    slice choice and ``estimate`` rank the same way)."""
    return planner.rank_by_token_cost(
        arch,
        fits,
        scenario,
        server=server_of(config),
        region=config.region,
        perf_key=perf_key_of(config),
        spot=config.tpu.spot,
    )


def _cannot_run(config: StackConfig, arch: ModelArch, error: planner.PlanError) -> ConfigError:
    """A planner error as the config error naming the key that would fix it (``blamed``)."""
    key, value, fix = blamed(config, error.field)
    problem = f"cannot run {arch.name} ({config.workload.kind}): {error}"
    return ConfigError([Violation(f"gke-tpu-llm:{key}", value, problem, "", fix)])


def server_of(config: StackConfig) -> Callable[[tpu_catalog.TpuSlice], planner.perf.Server]:
    """How the stack's engine runs one replica on a slice (batch limit, token budget, slices per
    replica): the kind's ``WorkloadKindInfo.serving_server``, from the settings its renderer reads too."""
    server = config.kind_info.serving_server
    if server is None:  # a serving kind without one is a programming error, not bad input
        raise TypeError(f"kind {config.workload.kind} declares no serving_server in its WorkloadKindInfo")
    return lambda tpu: server(config, tpu)


def estimate_slices(
    config: StackConfig, scenario: planner.Scenario
) -> tuple[tuple[planner.ServingEstimate, ...], tuple[str, ...]]:
    """What-if (``python -m components estimate``): ``scenario`` on every slice the stack could
    use (its pinned generation, else every generation documented in its zone; single-host only
    where the engine is), best first by :func:`planner.rank_by_token_cost`, and why the others were
    not estimated. Slices the config's own rules refuse are estimated all the same (a what-if),
    marked with the reason (``ServingEstimate.refused_by_config``) and ranked after the others."""
    arch = MODELS[config.workload.model]
    tpu = config.tpu
    generations = (tpu.generation,) if tpu.generation is not None else tpu.zone_generations()
    try:
        ranking = planner.rank_slices(
            arch,
            workload_of(config),
            [s for s in tpu_catalog.all_slices() if s.generation.name in generations],
            region=config.region,
            spot=tpu.spot,
            single_host_only=planner.single_host_only(config.kind_info.engine),
        )
    except planner.PlanError as error:
        raise _cannot_run(config, arch, error) from None
    estimates, unfit = _rank_by_token_cost(config, arch, ranking.fits, scenario)
    refusals = {e.plan.slice.key: _with_slice(config, e.plan.slice) for e in estimates}
    marked = [
        replace(e, refused_by_config=r.removeprefix("rejected by the config: ")) if isinstance(r, str) else e
        for e in estimates
        for r in (refusals[e.plan.slice.key],)
    ]
    # Accepted slices first (the first row is what ``plan`` would choose), each group best first.
    return tuple(sorted(marked, key=lambda e: e.refused_by_config is not None)), (*ranking.rejected, *unfit)


def _missed_targets(config: StackConfig, estimates: tuple[planner.ServingEstimate, ...]) -> ConfigError:
    """No fitting slice meets the scenario's latency targets: name the target, the best prediction
    and the fix."""
    spec = serving_scenario(config)
    assert spec is not None  # only called with a scenario
    if not estimates:
        return ConfigError(
            [
                Violation(
                    "gke-tpu-llm:workload.serving.concurrency",
                    spec.concurrency,
                    f"no fitting slice's KV cache holds one sequence of {spec.input_tokens + spec.output_tokens} tokens",
                    "a shorter scenario",
                    "lower inputTokens/outputTokens or pin a larger topology",
                )
            ]
        )
    best_ttft = min(estimates, key=lambda e: e.ttft_ms)
    best_tpot = min(estimates, key=lambda e: e.tpot_ms)
    value: float | None
    ttft_target, tpot_target = spec.ttft_ms, spec.tpot_ms
    if (
        ttft_target is not None
        and tpot_target is not None
        and (best_ttft.ttft_ms <= ttft_target and best_tpot.tpot_ms <= tpot_target)
    ):
        # Each target alone is met on some slice, both together on none: name both keys and the
        # best pair (the slice closest to both, by its worse ratio to a target).
        pair = min(estimates, key=lambda e: max(e.ttft_ms / ttft_target, e.tpot_ms / tpot_target))
        problem = (
            f"ttftMs {ttft_target:g} and tpotMs {tpot_target:g} are each met by some fitting slice but together by "
            f"none at concurrency {spec.concurrency}: the best pair is TTFT {pair.ttft_ms:.1f} ms with TPOT "
            f"{pair.tpot_ms:.1f} ms ({pair.plan.slice.key})"
        )
        return ConfigError(
            [
                Violation(
                    f"gke-tpu-llm:workload.serving.{key}",
                    target,
                    problem,
                    "targets at or above a pair one slice achieves, or a lower concurrency",
                    "raise one of the targets, lower workload.serving.concurrency, or unset one "
                    "(python -m components estimate lists every slice)",
                )
                for key, target in (("ttftMs", ttft_target), ("tpotMs", tpot_target))
            ]
        )
    if spec.tpot_ms is not None and best_tpot.tpot_ms > spec.tpot_ms:
        key, value = "tpotMs", spec.tpot_ms
        best = f"the lowest predicted TPOT is {best_tpot.tpot_ms:.1f} ms ({best_tpot.plan.slice.key})"
    else:
        key, value = "ttftMs", spec.ttft_ms
        best = f"the lowest predicted TTFT is {best_ttft.ttft_ms:.1f} ms ({best_ttft.plan.slice.key})"
    return ConfigError(
        [
            Violation(
                f"gke-tpu-llm:workload.serving.{key}",
                value,
                f"is met by no fitting slice at concurrency {spec.concurrency}: {best}",
                "a target at or above the best prediction, or a lower concurrency",
                "raise the target, lower workload.serving.concurrency, or unset it "
                "(python -m components estimate lists every slice)",
            )
        ]
    )


def _with_slice(config: StackConfig, chosen: tpu_catalog.TpuSlice) -> StackConfig | str:
    """The same config with ``chosen`` filled in and re-validated, or why the config's own rules
    reject that slice (e.g. the disaggregated JetStream server needs 8-chip slices)."""
    data = config.model_dump(by_alias=True, exclude_unset=True)
    data["tpu"].update(generation=chosen.generation.name, topology=chosen.topology, machineType=chosen.machine_type)
    try:
        return StackConfig.model_validate(data)
    except ValidationError as error:
        problems = [
            # As a Violation reads: "key: value problem" (the value only where the rule gives one).
            ".".join(str(x) for x in (*e["loc"], r.get("path", "")) if x)
            + (f": {r['value']!r} " if r.get("value") is not None else " ")
            + r["problem"]
            for e in error.errors()
            for r in (e.get("ctx") or {}).get("rules", [{"problem": e["msg"]}])
        ]
        return "rejected by the config: " + "; ".join(problems)


def resolve(config: StackConfig) -> StackPlan:
    """Verify (pinned topology) or select (unset topology, and maybe generation) the slice; raise
    ConfigError otherwise."""
    arch = MODELS[config.workload.model]
    tpu = config.tpu
    try:
        single_host_only = planner.single_host_only(config.kind_info.engine)  # the engine profile's rule
        workload = workload_of(config)
        scenario = scenario_of(config)
        if tpu.topology is None:
            # Unset generation: only generations the pool's zone has (a slice elsewhere in the
            # region could not be placed in this zone).
            generations = (tpu.generation,) if tpu.generation is not None else tpu.zone_generations()
            # Only slices the whole config accepts compete on price (e.g. the generation's GKE floor).
            completed: dict[str, StackConfig] = {}
            # Reported beside the planner's rejections (why a generation is absent), one line per
            # reason: a generation's slices usually share it (e.g. its GKE version floor).
            refused_by: dict[str, list[str]] = {}
            for s in tpu_catalog.all_slices():
                if s.generation.name in generations and tpu.machine_type in (None, s.machine_type):
                    c = _with_slice(config, s)
                    if isinstance(c, str):
                        refused_by.setdefault(c, []).append(s.key)
                    else:
                        completed[s.key] = c
            refused = [f"{', '.join(keys)}: {reason}" for reason, keys in refused_by.items()]
            if not completed:
                raise planner.PlanError(
                    f"no slice of {', '.join(generations) or 'any generation'} in {tpu.zone} is accepted by the "
                    "rest of the config: " + ("; ".join(refused) or "no candidate slices"),
                    "slice",
                )
            try:
                ranking = planner.rank_slices(
                    arch,
                    workload,
                    [c.tpu.slice for c in completed.values()],
                    region=config.region,
                    spot=tpu.spot,
                    single_host_only=single_host_only,
                )
            except planner.PlanError as error:
                # Say why the other slices were not even weighed (e.g. a cache setting too large for
                # their hosts): that is often the setting to change.
                if not refused:
                    raise
                raise planner.PlanError(f"{error}; not weighed: {'; '.join(refused)}", error.field) from None
            ranking = replace(ranking, rejected=(*refused, *ranking.rejected))
            estimates: tuple[planner.ServingEstimate, ...] = ()
            if scenario is not None:  # by $ per million output tokens under the latency targets
                estimates, unfit = _rank_by_token_cost(config, arch, ranking.fits, scenario)
                if not estimates or not estimates[0].meets_targets:
                    raise _missed_targets(config, estimates)
                ranking = replace(ranking, fits=tuple(e.plan for e in estimates), rejected=(*ranking.rejected, *unfit))
            return StackPlan(
                completed[ranking.chosen.slice.key], ranking.chosen, selected=True, ranking=ranking, serving=estimates
            )
        if single_host_only and tpu.slice.multi_host:
            raise planner.PlanError(
                f"{config.workload.kind} runs on single-host slices only and {tpu.slice.key} has "
                f"{tpu.slice.hosts} hosts; use a single-host topology (at most 8 chips on one VM)",
                "slice",
            )
        verified = planner.verify_slice(arch, workload, tpu.slice, region=config.region, spot=tpu.spot)
        if scenario is not None:  # a pinned slice is predicted, never refused for missing a target
            return StackPlan(
                config,
                verified,
                selected=False,
                serving=(
                    planner.estimate(
                        arch,
                        verified,
                        scenario,
                        server=server_of(config)(tpu.slice),
                        region=config.region,
                        perf_key=perf_key_of(config),
                    ),
                ),
            )
        return StackPlan(config, verified, selected=False)
    except planner.PlanError as error:
        raise _cannot_run(config, arch, error) from None


# The stack key behind each planner field (PlanError.field), the value to show and the fix.
_FIXES: dict[str, str] = {
    "tpu.topology": "pick a topology that fits (the message names the smallest), or shrink the workload",
    "tpu.generation": "pin a generation with more HBM per chip, or lower the batch or length settings, or use int8 weights",
    "tpu.zone": "change what the message names (e.g. cluster.version), pick a zone with a generation that has more "
    "HBM per chip, or lower the batch or length settings, or use int8 weights",
    "workload.parallelism": "choose degrees whose product is the slice's chips and that divide the model's heads, or "
    "remove workload.parallelism to derive them",
    "workload.perDeviceBatchSize": "lower workload.perDeviceBatchSize (or maxTargetLength) until the cache fits; x chips it "
    "must be a whole batch that splits over the batch axes",
    "workload.batchSize": "lower workload.batchSize (or maxTargetLength) until the cache fits, or use one that splits over "
    "the batch axes",
    "workload.maxTargetLength": "lower workload.maxTargetLength until the cache fits, or pin a larger topology",
    "workload.maxPrefillLength": "keep workload.maxPrefillLength below maxTargetLength",
    "workload.weights": "remove workload.weights: the servable fixes the weight dtype",
    "workload.reserveFraction": "use a fraction in [0, 1)",
    "workload.kind": "use a workload kind the planner knows",
}


def blamed(config: StackConfig, field: planner.PlanField) -> tuple[str, Any, str]:
    """(stack key, its value, fix) for a ``PlanError.field`` (one of ``planner.PLAN_FIELDS``): the
    setting the user must change. Decided from the field and the config only, never the message."""
    w = config.workload
    if field == "parallelism" and w.parallelism is None:
        field = "slice"  # the planner's own meshes failed: the slice cannot split the model
    if field in ("batch", "tokens"):
        if w.per_device_batch_size is not None:
            field = "per_device_batch_size"
        elif w.batch_size is not None:
            field = "batch_size"
        elif field == "tokens":
            field = "max_target_length"
        else:
            field = "parallelism" if w.parallelism is not None else "slice"
    keys: dict[str, tuple[str, Any]] = {
        "parallelism": ("workload.parallelism", w.parallelism),
        "per_device_batch_size": ("workload.perDeviceBatchSize", w.per_device_batch_size),
        "batch_size": ("workload.batchSize", w.batch_size),
        "max_target_length": ("workload.maxTargetLength", w.max_target_length),
        "max_prefill_length": ("workload.maxPrefillLength", w.max_prefill_length),
        "weight_dtype": ("workload.weights", w.weights),
        "reserve_fraction": ("workload.reserveFraction", w.reserve_fraction),
        "engine": ("workload.kind", w.kind),
    }
    if config.tpu.generation is None:
        keys["slice"] = ("tpu.zone", config.tpu.zone)  # no slice of any generation in the zone works
    elif config.tpu.topology is None:
        keys["slice"] = ("tpu.generation", config.tpu.generation)  # no slice of the generation works
    else:
        keys["slice"] = ("tpu.topology", config.tpu.topology)
    key, value = keys[field]  # every planner.PLAN_FIELDS value, batch and tokens resolved above
    return key, value, _FIXES[key]
