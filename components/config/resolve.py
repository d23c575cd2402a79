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

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from pydantic import ValidationError

from .. import planner
from ..catalog import tpu as tpu_catalog
from ..catalog.models import MODELS, ModelArch
from ..workloads.kind import perf_key_violation
from .errors import DEFAULT_NOTE, DERIVED_NOTE, NAMESPACE, ConfigError, Violation, mark_defaults
from .loader import parse_full_config
from .stack import StackConfig
from .tpu_spec import topology_layouts
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
            per_device_batch_size=w.section.per_device_batch(config) or w.per_device_batch_size or 1,
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
        capacities=capacities_of(config),
    )


def capacities_of(config: StackConfig) -> tuple[str, ...]:
    """The stack's capacity types, preferred first (``tpu.capacity``, else the one tier its shorthands
    give): the only prices a plan or an estimate shows, and the first ranks the slices."""
    return tuple(t.type for t in config.tpu.tiers)


def _at_concurrency(
    config: StackConfig, arch: ModelArch, e: planner.ServingEstimate, concurrency: int
) -> planner.ServingEstimate:
    """``e``'s slice and server with ``concurrency`` requests in flight."""
    return planner.estimate(
        arch,
        e.plan,
        replace(e.scenario, concurrency=concurrency),
        server=e.server,
        region=config.region,
        perf_key=perf_key_of(config),
        capacities=capacities_of(config),
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
            capacity=capacities_of(config)[0],
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


_LABELS = {"ttftMs": "TTFT", "tpotMs": "TPOT"}


def _latency(e: planner.ServingEstimate, key: str) -> float:
    return e.ttft_ms if key == "ttftMs" else e.tpot_ms


def _target(scenario: planner.Scenario, key: str) -> float | None:
    return scenario.ttft_ms if key == "ttftMs" else scenario.tpot_ms


def _lower_concurrency(config: StackConfig, arch: ModelArch, e: planner.ServingEstimate, key: str) -> tuple[bool, str]:
    """(True, a fix that lowers the concurrency until ``e``'s slice meets the ``key`` target: the highest
    such concurrency, by bisection, since latency grows with the requests in flight), or (False, the
    fact that even one request misses it there)."""
    target = _target(e.scenario, key)
    assert target is not None  # only asked for a missed target
    one = _latency(_at_concurrency(config, arch, e, 1), key)
    label = _LABELS[key]
    if one > target:
        return False, f"even one request gets {label} {one:.1f} ms on {e.plan.slice.key}"
    low, high, value = 1, max(1, e.concurrency - 1), one
    while low < high:
        mid = (low + high + 1) // 2
        predicted = _latency(_at_concurrency(config, arch, e, mid), key)
        if predicted <= target:
            low, value = mid, predicted
        else:
            high = mid - 1
    return True, f"lower workload.serving.concurrency to {low} ({label} {value:.1f} ms on {e.plan.slice.key})"


def _fixes(key: str, predicted: float, lower: tuple[bool, str]) -> tuple[str, str]:
    """(facts that are not a fix, the fixes) for a missed ``key`` target predicted at ``predicted``."""
    raise_it = f"raise {key} to {math.ceil(predicted)} or more, or unset it"
    is_fix, text = lower
    return ("", f"{text}; or {raise_it}") if is_fix else (f"; {text}", raise_it)


def _per_million(e: planner.ServingEstimate) -> str:
    cost = e.usd_per_million_output_tokens
    tier = e.prices[0].capacity if e.prices else "onDemand"
    return "unpriced" if cost is None else f"${cost:,.2f} per million output tokens ({tier})"


def _missed_on_pinned(config: StackConfig, arch: ModelArch, pinned: planner.ServingEstimate) -> ConfigError:
    """The pinned slice misses a latency target: one violation per missed target with the prediction,
    and the fixes: the cheapest slice of the generation that meets every target (``estimate``'s
    ranking), the highest concurrency at which the pinned slice meets it, or the target relaxed."""
    s, tpu = pinned.scenario, pinned.plan.slice
    estimates, _ = estimate_slices(config, s)
    meeting = [e for e in estimates if e.meets_targets]
    accepted = next((e for e in meeting if e.refused_by_config is None), None)
    if accepted is not None:
        t = accepted.plan.slice
        other = (
            f"pin tpu.topology {t.topology} with tpu.machineType {t.machine_type} ({t.key}, the cheapest "
            f"{t.generation.name} slice that meets every target: TTFT {accepted.ttft_ms:.1f} ms, TPOT "
            f"{accepted.tpot_ms:.1f} ms, {_per_million(accepted)}); or "
        )
        fact = ""
    else:
        other = ""
        fact = (
            f"; {meeting[0].plan.slice.key} meets every target but the config refuses it: {meeting[0].refused_by_config}"
            if meeting
            else f"; no {tpu.generation.name} slice meets every target at concurrency {s.concurrency}"
        )
    violations = []
    for key in ("ttftMs", "tpotMs"):
        target, predicted = _target(s, key), _latency(pinned, key)
        if target is None or predicted <= target:
            continue
        label = _LABELS[key]
        facts, fixes = _fixes(key, predicted, _lower_concurrency(config, arch, pinned, key))
        violations.append(
            Violation(
                f"{NAMESPACE}:workload.serving.{key}",
                target,
                f"is missed on the pinned slice {tpu.key}: predicted {label} {predicted:.1f} ms at concurrency "
                f"{s.concurrency} ({s.input_tokens} in / {s.output_tokens} out){facts}{fact}",
                f"{label} at or above the prediction, a lower concurrency, or a slice that meets every target",
                f"{other}{fixes} (python -m components estimate lists every slice)",
            )
        )
    return ConfigError(violations)


def _missed_targets(config: StackConfig, estimates: tuple[planner.ServingEstimate, ...]) -> ConfigError:
    """No fitting slice meets the scenario's latency targets: name each missed target, the best
    prediction and the fix."""
    spec = serving_scenario(config)
    assert spec is not None  # only called with a scenario
    if not estimates:
        return ConfigError(
            [
                Violation(
                    f"{NAMESPACE}:workload.serving.concurrency",
                    spec.concurrency,
                    f"no fitting slice's KV cache holds one sequence of {spec.input_tokens + spec.output_tokens} tokens",
                    "a shorter scenario",
                    "lower inputTokens/outputTokens or pin a larger topology",
                )
            ]
        )
    best = {key: min(estimates, key=partial(_latency, key=key)) for key in _LABELS}
    ttft_target, tpot_target = spec.ttft_ms, spec.tpot_ms
    if (
        ttft_target is not None
        and tpot_target is not None
        and (best["ttftMs"].ttft_ms <= ttft_target and best["tpotMs"].tpot_ms <= tpot_target)
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
                    f"{NAMESPACE}:workload.serving.{key}",
                    target,
                    problem,
                    "targets at or above a pair one slice achieves, or a lower concurrency",
                    "raise one of the targets, lower workload.serving.concurrency, or unset one "
                    "(python -m components estimate lists every slice)",
                )
                for key, target in (("ttftMs", ttft_target), ("tpotMs", tpot_target))
            ]
        )
    arch = MODELS[config.workload.model]
    violations = []
    for key, e in best.items():  # each target no slice meets is its own violation
        target, predicted = _target(e.scenario, key), _latency(e, key)
        if target is None or predicted <= target:
            continue
        facts, fixes = _fixes(key, predicted, _lower_concurrency(config, arch, e, key))
        violations.append(
            Violation(
                f"{NAMESPACE}:workload.serving.{key}",
                target,
                f"is met by no fitting slice at concurrency {spec.concurrency}: the lowest predicted {_LABELS[key]} "
                f"is {predicted:.1f} ms ({e.plan.slice.key}){facts}",
                "a target at or above the best prediction, or a lower concurrency",
                f"{fixes} (python -m components estimate lists every slice)",
            )
        )
    return ConfigError(violations)


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
    ConfigError otherwise, each problem about a key the stack file does not set marked as a default
    (or, for the slice's keys, as the planner's choice)."""
    try:
        plan = _resolve(config)
        config.workload.section.verify_plan(plan)  # a kind's checks of the resolved slice, before any registration
        return plan
    except ConfigError as error:
        raw = config.model_dump(by_alias=True, exclude_unset=True)  # what the stack file sets
        notes = [DERIVED_NOTE if v.key in _SLICE_KEYS else DEFAULT_NOTE for v in error.violations]
        raise ConfigError([mark_defaults([v], raw, n)[0] for v, n in zip(error.violations, notes, strict=True)]) from None


_SLICE_KEYS = frozenset(f"{NAMESPACE}:tpu.{key}" for key in ("generation", "topology", "machineType"))
"""Keys the planner chooses when unset: a problem about one is about its choice, not a default."""


def _resolve(config: StackConfig) -> StackPlan:
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
                    capacity=capacities_of(config)[0],
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
        verified = planner.verify_slice(arch, workload, tpu.slice, region=config.region, capacity=capacities_of(config)[0])
        if scenario is None:
            return StackPlan(config, verified, selected=False)
        predicted = planner.estimate(
            arch,
            verified,
            scenario,
            server=server_of(config)(tpu.slice),
            region=config.region,
            perf_key=perf_key_of(config),
            capacities=capacities_of(config),
        )
        if not predicted.meets_targets:  # the targets are the stack's own: a slice that misses them is an error
            raise _missed_on_pinned(config, arch, predicted)
        return StackPlan(config, verified, selected=False, serving=(predicted,))
    except planner.PlanError as error:
        raise _cannot_run(config, arch, error) from None


def validated(values: Mapping[str, Any], stack: str, secret_keys: Collection[str] = ()) -> StackConfig:
    """``parse_full_config`` of a stack's full keys; when a derived key (``tpu.machineType``) is all
    that fails, the planner checks the topology it derives from too, so one run names the root cause."""
    try:
        return parse_full_config(values, stack, secret_keys)
    except ConfigError as error:
        raise _root_cause(error, values, stack, secret_keys) from None


def resolve_values(values: Mapping[str, Any], stack: str, secret_keys: Collection[str] = ()) -> StackPlan:
    """:func:`validated`, then :func:`resolve`: a stack file's keys to its verified plan."""
    return resolve(validated(values, stack, secret_keys))


def _root_cause(error: ConfigError, values: Mapping[str, Any], stack: str, secret_keys: Collection[str]) -> ConfigError:
    """``error`` with the planner's verdict on the topology when the machine type alone fails (it only
    picks among the topology's VM layouts: ``tpu_spec.topology_layouts``): each layout is validated and
    resolved in its place, and when none works the planner's problems are reported too, the machine
    type's marked as following from the topology's when the topology is what to change."""
    machine_key, topology_key = f"{NAMESPACE}:tpu.machineType", f"{NAMESPACE}:tpu.topology"
    raw = values.get(f"{NAMESPACE}:tpu")
    layouts = topology_layouts(raw)
    if [v.key for v in error.violations] != [machine_key] or not layouts or not isinstance(raw, Mapping):
        return error
    found: list[Violation] = []
    first: StackConfig | None = None
    for layout in layouts:
        try:
            fixed = {**values, f"{NAMESPACE}:tpu": {**raw, "machineType": layout.machine_type}}
            config = parse_full_config(fixed, stack, secret_keys)
        except ConfigError:
            continue  # this layout breaks another rule (e.g. autoscaling on a multi-host slice)
        try:
            resolve(config)
        except ConfigError as planned:
            found, first = found or planned.violations, first or config
            continue
        return error  # a layout works: the machine type is all there is to fix
    (machine,) = error.violations
    if first is None or not any(v.key == topology_key for v in found):
        return ConfigError([machine, *found])  # the planner's problems are the next round's: report them now
    tpu = first.tpu.slice
    same = [s for s in tpu_catalog.all_slices() if s.generation.name == tpu.generation.name]
    smallest = planner.smallest_fitting_slice(MODELS[first.workload.model], workload_of(first), same, first.region)
    fix = "fix tpu.topology first, then use a machine type of the new topology (or remove machineType where it has one layout)"
    if smallest is not None and smallest.slice.machine_type == machine.value:
        fix = (
            f"fix tpu.topology first: {machine.value} builds {smallest.slice.key}, the smallest slice that fits, so "
            f"it is right once tpu.topology is {smallest.slice.topology}"
        )
    elif smallest is not None:
        fix += f"; {smallest.slice.key}, the smallest slice that fits, is {smallest.slice.machine_type}"
    problem = f"{machine.problem}; this follows from {topology_key}, which no layout of {tpu.topology} fits (above)"
    allowed = f"{machine.allowed} for {tpu.topology}, which does not fit; the machine type of a topology that does"
    return ConfigError([*found, replace(machine, problem=problem, allowed=allowed, fix=fix)])


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
