"""The offline plan of a stack and its report: validate the stack file, run the program under the
mock engine, and describe the result (``python -m components plan STACK [--json]``): slices,
TPU cost per hour, capacity, resources, manifests, endpoints and stack outputs."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Any

from ..catalog import tpu as tpu_catalog
from ..config.isolation import tenancy
from ..config.resolve import StackPlan
from ..config.stack import StackConfig
from ..config.stack_files import StackFile, check_isolation, config_of
from . import mockengine, preflight
from .endpoints import endpoints
from .manifests import manifests_of
from .mockengine import Registration


@dataclass
class PlanResult:
    stack: str
    stack_plan: StackPlan
    resources: list[Registration]
    outputs: dict[str, Any]
    log: str = ""
    """What the program printed (kept off the CLI's stdout, which may be JSON)."""
    manifests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def config(self) -> StackConfig:
        return self.stack_plan.config


def plan(stack_file: StackFile) -> PlanResult:
    """Validate, then run the program offline. Raises ConfigError before running on a bad config
    (``stack_files.config_of``: a wrong machine type comes with the planner's verdict on its topology)."""
    stack_plan = config_of(stack_file)
    check_isolation(stack_plan.config)
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        resources, outputs = mockengine.run_program(stack_file)
    return PlanResult(
        stack=stack_file.stack,
        stack_plan=stack_plan,
        resources=resources,
        outputs=outputs,
        log=log.getvalue(),
        manifests=manifests_of(resources),
    )


def slice_plan(config: StackConfig) -> list[dict[str, Any]]:
    """One entry per TPU pool (slice and capacity tier): the slice's shape, node counts and placement."""
    tpu = config.tpu
    s = tpu.slice
    tiers = tpu.tiers
    return [
        {
            "pool": pool,
            "generation": s.generation.name,
            "accelerator_type": s.accelerator_type,
            "topology": s.topology,
            "machine_type": s.machine_type,
            "chips": s.chips,
            "hosts": s.hosts,
            "chips_per_host": s.chips_per_host,
            "multi_host": s.multi_host,
            "nodes_min": tpu.tier_nodes(tier)[0],
            "nodes_max": tpu.tier_nodes(tier)[1],
            "hbm_gb": s.hbm_bytes / 1e9,
            "zone": tpu.zone,
            "spot": tiers[tier].type == "spot",
            "node_selector": s.node_selector,
        }
        for _, tier, pool in config.tier_pools()
    ]


def cost_per_hour(config: StackConfig) -> dict[str, Any]:
    """TPU cost per hour at the stack's capacity tiers only (``tpu.capacity``, default on-demand): a
    stack is not shown a spot or flex-start price it does not pay. ``billed`` is the preferred (first)
    tier's for every pool at its maximum size (the worst case a reviewer pays for), ``by_capacity``
    each tier's at that size, ``per_node`` one VM's at the preferred tier.

    Only TPU chips are priced: they dominate the bill (a v6e 4x4 is ~$43/h) and are the figures the
    catalog sources; the system pool, control-plane fee, load balancers and storage are not included.
    Prices come from the catalog's one price function, as the planner's do.
    """
    tpu = config.tpu
    s = tpu.slice
    nodes_max, nodes_min = tpu.nodes_max * tpu.slices, tpu.tier_nodes(0)[0] * tpu.slices
    first = tpu.tiers[0].type  # what the stack is billed for: its preferred tier (capacity_tiers has them all)

    def price(capacity: str, chips: int) -> float | None:
        return s.capacity_price(config.region, capacity, chips=chips)

    return {
        "capacity": first,
        "billed": price(first, nodes_max * s.chips_per_host),
        "billed_at_min_nodes": price(first, nodes_min * s.chips_per_host),
        "per_node": price(first, s.chips_per_host),
        "by_capacity": {t.type: price(t.type, nodes_max * s.chips_per_host) for t in tpu.tiers},
        "nodes": nodes_max,
        "nodes_min": nodes_min,
        "chips": nodes_max * s.chips_per_host,
        "chips_min": nodes_min * s.chips_per_host,
        "pools": tpu.slices,
        "machine_type": s.machine_type,
        "region": config.region,
        "basis": _price_basis(first),
    }


def _price_basis(capacity: str) -> str:
    """Where the catalog's rate for ``capacity`` comes from, and when it was read."""
    if capacity in tpu_catalog.DWS_CAPACITY_TYPES:
        return f"{tpu_catalog.SRC_FLEX_START_PRICE}; as of {tpu_catalog.FLEX_START_PRICE_AS_OF}"
    if capacity == "reservation":
        return f"{tpu_catalog.SRC_RESERVATION_PRICE}; on-demand rate: {tpu_catalog.PRICE_SOURCE}; as of {tpu_catalog.PRICE_AS_OF}"
    return f"{tpu_catalog.PRICE_SOURCE}; as of {tpu_catalog.PRICE_AS_OF}"


def tier_costs(config: StackConfig) -> dict[str, Any]:
    """TPU $/h per capacity tier (tier order, first preferred): its pools, chips at their minimum and
    maximum size and the catalog rate of its capacity type with source and date (None where the
    catalog has no such price, never guessed), and the maximum if every tier fills at once (the
    scheduler only falls back when a tier before is full, so that is the bound, not the usual bill)."""
    tpu = config.tpu
    s = tpu.slice
    tiers: list[dict[str, Any]] = []
    maxima: list[float | None] = []
    for t, spec in enumerate(tpu.tiers):
        low, high = tpu.tier_nodes(t)
        chips_min, chips_max = (n * s.chips_per_host * tpu.slices for n in (low, high))
        tiers.append(
            {
                "tier": t,
                "type": spec.type,
                "reservation": spec.reservation,
                "max_run_hours": spec.max_run_hours,
                "pools": config.pools_of_tier(t),
                "chips_min": chips_min,
                "chips_max": chips_max,
                "usd_per_hour_min": s.capacity_price(config.region, spec.type, chips=chips_min),
                "usd_per_hour_max": s.capacity_price(config.region, spec.type, chips=chips_max),
                "basis": _price_basis(spec.type),
            }
        )
        maxima.append(tiers[-1]["usd_per_hour_max"])
    known = [m for m in maxima if m is not None]
    return {
        "region": config.region,
        "tiers": tiers,
        "chips_if_every_tier_fills": sum(int(tier["chips_max"]) for tier in tiers),
        "usd_per_hour_if_every_tier_fills": round(sum(known), 4) if len(known) == len(maxima) else None,
    }


def plan_json(result: PlanResult) -> dict[str, Any]:
    """The plan as one JSON object (``plan --json``; ``review`` compares two of them)."""
    # Here, not at the top: the program's wiring loads every Pulumi SDK, which the plan that made
    # ``result`` has loaded already, and which the CLI's other commands never need.
    from ..program.build import gke_addons
    from . import plan_disagg, plan_operations, plan_training

    cfg = result.config
    return {
        "stack": result.stack,
        "environment": cfg.environment.value,
        "project": cfg.project,
        "region": cfg.region,
        "cluster": {"name": cfg.cluster_name, "location": cfg.cluster_location, "addons": sorted(gke_addons(cfg))},
        # What the stack owns (names, Workload Identity namespaces) and where: review checks the
        # stacks of a plan document against each other (components.config.isolation).
        "tenancy": tenancy(cfg).to_dict(),
        "slices": slice_plan(cfg),
        "cost_usd_per_hour": cost_per_hour(cfg),
        "capacity_tiers": tier_costs(cfg),
        "capacity": result.stack_plan.to_dict(),
        # What must exist in the project for `pulumi up` (quota, reservations, flex-start zone), per pool.
        "preflight": preflight.checklist(cfg).to_dict(),
        "resources": [r.to_dict() for r in result.resources],
        "manifests": result.manifests,
        "endpoints": [e.to_dict() for e in endpoints(result.manifests)],
        "outputs": result.outputs,
        "operations": plan_operations.operations(result.stack_plan),  # cold start, autoscaling path, dashboard/alerts
        "training": plan_training.training_json(result.stack_plan),  # step time, MFU, checkpoints (training kinds)
        "disaggregation": plan_disagg.disagg_json(result.stack_plan),  # P/D: KV hand-off, aggregated vs disaggregated
    }
