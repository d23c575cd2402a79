"""Choosing a slice: the cheapest that fits (``select_slice``; every fitting slice ranked, with
the reasons the others were rejected: ``rank_slices``), the smallest that fits
(``smallest_fitting_slice``), or a pinned slice verified with a fix when it does not
(``verify_slice``). Prices are the catalog slice's at the stack's preferred capacity tier
(``TpuSlice.capacity_price``: on-demand unless the caller names another ``tpu.capacity[].type``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..catalog.models import ModelArch
from ..catalog.tpu import TpuSlice, all_slices
from .fit import plan
from .inputs import Workload
from .perf import Scenario, Server, ServingEstimate, estimate, rank_key
from .plan_errors import PlanError, PlanField
from .results import GB, MemoryPlan, Plan


def _rank_key(p: Plan) -> tuple[bool, float, int, int, str]:
    # Cheapest first; uncatalogued prices last; then fewer VMs (simpler pools), fewer chips.
    cost = p.price_per_hour
    return (cost is None, cost if cost is not None else 0.0, p.slice.hosts, p.slice.chips, p.slice.key)


def _fitting(
    arch: ModelArch,
    workload: Workload,
    candidates: Iterable[TpuSlice],
    region: str | None,
    capacity: str,
    min_margin_fraction: float = 0.0,
) -> tuple[list[Plan], list[str], set[PlanField]]:
    """(fitting plans, one reason per rejected slice, the ``PlanError.field`` of each rejection)."""
    fits: list[Plan] = []
    rejected: list[str] = []
    fields: set[PlanField] = set()
    for tpu in candidates:
        try:
            p = plan(arch, tpu, workload, region=region, capacity=capacity)
        except PlanError as exc:
            rejected.append(f"{tpu.key}: {exc}")
            fields.add(exc.field)
            continue
        if p.memory.margin_fraction >= min_margin_fraction and p.fits:
            fits.append(p)
        else:
            rejected.append(f"{tpu.key}: needs {p.memory.total / GB:.2f} GB of {p.memory.hbm / GB:.1f} GB per chip")
            fields.add(_overflow_field(p.memory))
    return fits, rejected, fields


def _overflow_field(m: MemoryPlan) -> PlanField:
    """What to shrink when a plan overflows HBM: the tokens in flight (batch x length: KV cache,
    activations) when they outweigh the model's own state, else the slice is too small."""
    return "tokens" if m.kv_cache + m.activations > m.weights + m.optimizer else "slice"


@dataclass(frozen=True)
class Ranking:
    """Every candidate slice's outcome: the fitting plans best first (``fits[0]`` is the choice)
    and one reason per rejected slice."""

    fits: tuple[Plan, ...]
    rejected: tuple[str, ...]

    @property
    def chosen(self) -> Plan:
        return self.fits[0]


def rank_slices(
    arch: ModelArch,
    workload: Workload,
    candidates: Iterable[TpuSlice] | None = None,
    *,
    region: str,
    capacity: str = "onDemand",
    generations: Iterable[str] | None = None,
    single_host_only: bool = False,
    min_margin_fraction: float = 0.0,
) -> Ranking:
    """Every slice ``arch`` fits on, cheapest (chips x price per chip-hour of ``capacity`` in
    ``region``) first.

    Slices without a price of ``capacity`` in ``region`` stay eligible
    but rank after every priced slice. Without ``generations`` or ``candidates``, only generations
    documented in ``region`` are considered. Raises PlanError when no candidate fits.
    """
    allowed = set(generations) if generations is not None else None
    pool = [
        s
        for s in (all_slices() if candidates is None else candidates)
        if (allowed is None or s.generation.name in allowed)
        and not (single_host_only and s.multi_host)
        # Across generations, only those GKE documents in the region: a generation the region does
        # not have is no alternative (a pinned generation keeps its own zone rules).
        and (allowed is not None or candidates is not None or region in s.generation.regions())
    ]
    if not pool:
        raise PlanError(
            f"no candidate slices for {arch.name} (generations={sorted(allowed or [])}, single_host_only={single_host_only})"
        )
    fits, rejected, fields = _fitting(arch, workload, pool, region, capacity, min_margin_fraction)
    if not fits:
        raise PlanError(
            f"no candidate slice fits {arch.name} ({workload.engine} {workload.mode}); "
            f"{len(pool)} considered: " + "; ".join(rejected),
            fields.pop() if len(fields) == 1 else "slice",
        )
    return Ranking(tuple(sorted(fits, key=_rank_key)), tuple(rejected))


def select_slice(
    arch: ModelArch,
    workload: Workload,
    candidates: Iterable[TpuSlice] | None = None,
    *,
    region: str,
    capacity: str = "onDemand",
    generations: Iterable[str] | None = None,
    single_host_only: bool = False,
    min_margin_fraction: float = 0.0,
) -> Plan:
    """The cheapest slice that ``arch`` fits on: the first of ``rank_slices`` (same arguments)."""
    return rank_slices(
        arch,
        workload,
        candidates,
        region=region,
        capacity=capacity,
        generations=generations,
        single_host_only=single_host_only,
        min_margin_fraction=min_margin_fraction,
    ).chosen


def rank_by_token_cost(
    arch: ModelArch,
    plans: Iterable[Plan],
    scenario: Scenario,
    *,
    server: Callable[[TpuSlice], Server],
    region: str | None,
    perf_key: str,
    capacities: Sequence[str] = ("onDemand",),
) -> tuple[tuple[ServingEstimate, ...], tuple[str, ...]]:
    """(serving estimates of the fitting ``plans``, best first; one reason per plan that holds no
    sequence of the scenario). ``server`` gives the engine's batch limit and slices per replica on
    a slice (the stack's settings), ``perf_key`` its row of efficiency factors (the kind's). Best:
    meets the scenario's TTFT/TPOT targets, then the lowest $
    per million output tokens at the first of ``capacities`` (the stack's tiers, preferred first: each
    estimate prices them all; unpriced last), then the highest throughput.
    Per replica: $ per token does not depend on the replica count, so replicas stay as configured."""
    estimates: list[ServingEstimate] = []
    rejected: list[str] = []
    for p in plans:
        try:
            estimates.append(
                estimate(arch, p, scenario, server=server(p.slice), region=region, perf_key=perf_key, capacities=capacities)
            )
        except PlanError as exc:
            rejected.append(str(exc))
    return tuple(sorted(estimates, key=rank_key)), tuple(rejected)


def smallest_fitting_slice(
    arch: ModelArch, workload: Workload, candidates: Iterable[TpuSlice] | None = None, region: str | None = None
) -> Plan | None:
    """The fitting slice with the fewest chips (then cheapest), or None."""
    fits, _, _ = _fitting(arch, workload, all_slices() if candidates is None else candidates, region, "onDemand")
    if not fits:
        return None
    return min(fits, key=lambda p: (p.slice.chips, *_rank_key(p)))


def verify_slice(
    arch: ModelArch,
    workload: Workload,
    tpu: TpuSlice,
    *,
    region: str | None = None,
    capacity: str = "onDemand",
    alternatives: Iterable[TpuSlice] | None = None,
) -> Plan:
    """The plan for a pinned slice, or a PlanError naming the need, the HBM and a slice that fits.

    ``alternatives`` (default: the catalog) is searched for the smallest fitting slice, same
    generation first.
    """

    def fitting() -> Plan | None:
        pool = list(all_slices() if alternatives is None else alternatives)
        same = [s for s in pool if s.generation.name == tpu.generation.name]
        return smallest_fitting_slice(arch, workload, same, region) or smallest_fitting_slice(arch, workload, pool, region)

    def suggestion(best: Plan | None) -> str:
        if best is None:
            return "no catalog slice fits this workload"
        return f"smallest slice that fits: {best.slice.key} ({best.slice.chips} chips, {best.memory.total / GB:.2f} GB per chip)"

    try:
        p = plan(arch, tpu, workload, region=region, capacity=capacity)
    except PlanError as exc:
        raise PlanError(f"{exc}; {suggestion(fitting())}", exc.field) from None
    if not p.fits:
        m = p.memory
        best = fitting()
        raise PlanError(
            f"{arch.name} needs {m.total / GB:.2f} GB per chip on {tpu.key} ({m.summary()}) but a "
            f"{tpu.generation.name} chip has {m.hbm / GB:.1f} GB HBM; {suggestion(best)}",
            # Another slice holds it: the topology is what to change. None does: shrink the workload.
            "slice" if best is not None else _overflow_field(m),
        )
    return p
