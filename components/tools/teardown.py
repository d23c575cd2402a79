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

The destroy runs in the engine's steps (:func:`deletion_steps`), which components/README-day2.md
("Teardown") describes by resource kind; tests/test_day2.py holds the two to each other.
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
    step: int | None = None
    """The step of the destroy that deletes it (1 first; :func:`deletion_steps`); None when kept."""

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
    edges = plan_resources.engine_dependencies(resources)
    kept: set[str] = set()
    todo = [r.urn for r in resources if r.protect]
    while todo:
        urn = todo.pop()
        if urn in kept or urn not in edges:
            continue
        kept.add(urn)
        todo += edges[urn]
    return kept


def deletion_steps(resources: Sequence[plan_resources.Res], condemned: set[str]) -> dict[str, int]:
    """URN -> the step of the destroy that deletes it, 1 first, for the ``condemned`` resources
    (components included), as the engine schedules deletes (pulumi ``pkg/resource/deploy/
    step_generator.go`` ``ScheduleDeletes``): it peels off, round after round, the resources none of
    whose dependencies (parent, explicit and input dependencies, provider) is still condemned, then
    runs the rounds in reverse, each in parallel and after the one before has finished. So a
    resource goes only after everything that depends on it, in the step its longest chain of
    condemned dependencies puts it in."""
    edges = {urn: deps for urn, deps in plan_resources.engine_dependencies(resources).items() if urn in condemned}
    height: dict[str, int] = {}

    def height_of(urn: str, seen: frozenset[str]) -> int:
        if urn not in height:
            deps = edges[urn] & edges.keys()
            # A cycle cannot happen in an engine's graph; ``seen`` keeps a malformed state from recursing forever.
            height[urn] = 1 + max((height_of(d, seen | {urn}) for d in deps - seen - {urn}), default=-1)
        return height[urn]

    for urn in edges:
        height_of(urn, frozenset())
    top = max(height.values(), default=0)
    return {urn: top - h + 1 for urn, h in height.items()}


def plan_teardown(resources: Sequence[plan_resources.Res]) -> TeardownPlan:
    kept = _kept(resources)
    engine_steps = deletion_steps(resources, {r.urn for r in resources} - kept)
    order = step_model.topological(resources)  # within a step: dependents first, as before
    gone = sorted(
        (r for r in resources if r.custom and r.urn not in kept), key=lambda r: (engine_steps[r.urn], -order.get(r.urn, 0))
    )
    # Numbered over the steps that delete a cloud or Kubernetes object (a component's delete is a no-op).
    number = {step: n for n, step in enumerate(sorted({engine_steps[r.urn] for r in gone}), 1)}
    steps = {r.urn: number[engine_steps[r.urn]] for r in gone}
    destroyed = [Item(r.type, r.name, _physical(r), steps[r.urn]) for r in gone if not r.retain_on_delete]
    released = [Item(r.type, r.name, _physical(r), steps[r.urn]) for r in gone if r.retain_on_delete]
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
    steps = sorted({i.step for i in (*plan.destroyed, *plan.released) if i.step is not None})
    lines.append(
        f"destroyed ({len(plan.destroyed)})"
        + (
            f" in {len(steps)} steps (each starts when the one before has finished; a step's resources go in parallel)"
            if steps
            else ""
        )
        + ":"
    )
    for step in steps:
        here = [i for i in plan.destroyed if i.step == step]
        if here:
            lines.append(f"  step {step}:")
            lines += [f"  - {i}" for i in here]
    if plan.released:
        lines.append(f"removed from the stack, not deleted (retainOnDelete) ({len(plan.released)}):")
        lines += [f"  - {i} (step {i.step})" for i in plan.released]
    lines.append(f"retained in GCP and in the stack ({len(plan.retained)}):")
    lines += [f"  - {i}" for i in plan.retained] or ["  - nothing"]
    return "\n".join(lines) + "\n"
