"""Teardown: what ``pulumi destroy --exclude-protected`` removes from a stack and what it keeps.

A prod stack protects its cluster, TPU pools and buckets. The teardown path that finishes without
state surgery is two reviewed steps (components/README-day2.md: Tearing down prod):

1. land ``gke-tpu-llm:allowTeardown: true`` and ``pulumi up``: the cluster and the TPU pools lose
   Pulumi protection and GKE deletion protection, in place; the buckets stay protected;
2. ``pulumi destroy --exclude-protected``: the engine destroys every resource except the protected
   ones and everything they depend on (their parents and providers), so the buckets, their
   components and the stack stay; the workflow lists them from the state afterwards.

``plan_teardown`` predicts step 2 on an offline plan or on the real state (``pulumi stack export``):
it refuses while step 1 is missing (a protected cluster or pool would make the destroy stop short),
and after the destroy, on the state, it lists what stayed. Pure functions; no Pulumi import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import plan_resources
from . import steps as step_model

PROTECT_TYPES_NEEDING_RELEASE = (step_model.CLUSTER, step_model.NODE_POOL)
"""Protected resources that a teardown must remove, so step 1 must have lifted their protection."""


@dataclass(frozen=True)
class Item:
    type: str
    name: str
    """Pulumi resource name."""
    physical: str | None
    """Cloud or Kubernetes name (bucket, cluster, pool, object) when the inputs give one."""

    def __str__(self) -> str:
        kind = self.type.rsplit(":", 1)[-1]
        also = f" ({self.name})" if self.physical and self.physical != self.name else ""
        return f"{kind} {self.physical or self.name}{also}"


@dataclass(frozen=True)
class TeardownPlan:
    destroyed: list[Item]
    retained: list[Item]
    """Kept in the cloud and in the stack (protected, or a dependency of a protected resource)."""
    blockers: list[str]
    """Protected resources a teardown must remove: land ``allowTeardown`` first."""
    released: list[Item] = field(default_factory=list)
    """Removed from the stack but not deleted (``retainOnDelete``, e.g. the controllers' CRDs)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "destroyed": [vars(i) for i in self.destroyed],
            "released": [vars(i) for i in self.released],
            "retained": [vars(i) for i in self.retained],
            "blockers": list(self.blockers),
        }


def _physical(res: plan_resources.Res) -> str | None:
    meta = res.inputs.get("metadata")
    if isinstance(meta, Mapping) and meta.get("name"):
        ns = meta.get("namespace")
        return f"{ns}/{meta['name']}" if ns else str(meta["name"])
    for key in ("name", "accountId", "repositoryId"):
        value = res.inputs.get(key)
        if isinstance(value, str):
            return value
    return None


def _kept(resources: Sequence[plan_resources.Res]) -> set[str]:
    """Protected resources and, transitively, what they depend on: parents, explicit and input
    dependencies, and their provider (the engine keeps all of them under ``--exclude-protected``)."""
    by_urn = {r.urn: r for r in resources}
    by_name = {r.name: r.urn for r in resources if r.type.startswith("pulumi:providers:")}
    kept: set[str] = set()
    todo = [r.urn for r in resources if r.protect]
    while todo:
        urn = todo.pop()
        if urn in kept or urn not in by_urn:
            continue
        kept.add(urn)
        res = by_urn[urn]
        todo += [res.parent, *res.dependencies]
        if res.provider in by_name:
            todo.append(by_name[res.provider])
    return kept


def plan_teardown(resources: Sequence[plan_resources.Res]) -> TeardownPlan:
    kept = _kept(resources)
    order = step_model.topological(resources)  # the engine deletes dependents first
    gone = sorted((r for r in resources if r.custom and r.urn not in kept), key=lambda r: -order.get(r.urn, 0))
    destroyed = [Item(r.type, r.name, _physical(r)) for r in gone if not r.retain_on_delete]
    released = [Item(r.type, r.name, _physical(r)) for r in gone if r.retain_on_delete]
    retained = [Item(r.type, r.name, _physical(r)) for r in resources if r.custom and r.urn in kept]
    blockers = [
        f"{r.type.rsplit(':', 1)[-1]} `{_physical(r) or r.name}` is protected"
        for r in resources
        if r.protect and r.type in PROTECT_TYPES_NEEDING_RELEASE
    ]
    blockers += [
        f"Cluster `{_physical(r) or r.name}` has GKE deletion protection on"
        for r in resources
        if r.type == step_model.CLUSTER and r.inputs.get("deletionProtection") is True and not r.protect
    ]
    return TeardownPlan(destroyed, retained, blockers, released)


def plan_teardown_of(plan: Mapping[str, Any]) -> TeardownPlan:
    """The teardown of an offline ``plan STACK --json`` document."""
    return plan_teardown(plan_resources.from_plan(plan))


def render(stack: str, environment: str, plan: TeardownPlan) -> str:
    lines = [f"teardown of {stack} ({environment}) with `pulumi destroy --exclude-protected`:"]
    if plan.blockers:
        lines.append("refused: the teardown would stop at protected resources it must remove:")
        lines += [f"  - {b}" for b in plan.blockers]
        lines.append(
            "land `gke-tpu-llm:allowTeardown: true` in a reviewed change and run `pulumi up` first (it lifts "
            "protection from the cluster and TPU pools and GKE deletion protection, in place; buckets stay protected); "
            "remove it again before the stack is ever brought back up"
        )
        return "\n".join(lines) + "\n"
    lines.append(f"destroyed ({len(plan.destroyed)}):")
    lines += [f"  - {i}" for i in plan.destroyed]
    if plan.released:
        lines.append(f"removed from the stack, not deleted (retainOnDelete) ({len(plan.released)}):")
        lines += [f"  - {i}" for i in plan.released]
    lines.append(f"retained in GCP and in the stack ({len(plan.retained)}):")
    lines += [f"  - {i}" for i in plan.retained] or ["  - nothing"]
    return "\n".join(lines) + "\n"
