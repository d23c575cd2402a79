"""Predict the steps ``pulumi up`` takes to move a stack from one plan to another.

The offline engine has no state, so this module models what the real engine and providers decide
on an update, from two recorded plans (or a ``pulumi stack export`` and a plan):

* identity (the resources are ``components.tools.plan_resources.Res``, read from either document):
  a resource is the same resource when its URN is the same or one of its ``aliases`` is
  the old URN; anything else is a *create* of the new URN and a *delete* of the old one, which the
  engine runs at the very end of the update (both exist in between).
* per matched resource: inputs under ``ignoreChanges`` are not compared; a changed input that the
  provider cannot update in place (``components.tools.replacement``) is a *replace*, anything else an
  *update*; a change of options only (``protect``, aliases) touches the state, not the cloud.
* replacement order: delete-before-replace when the resource asks for it (``deleteBeforeReplace``)
  or when pulumi-kubernetes must (an explicitly named object cannot exist twice); otherwise the
  replacement is created first and the old resource deleted at the end.
* a replaced Kubernetes provider (its cluster was replaced) replaces every object it manages.
* protection: the engine refuses to replace or delete a resource that is protected *in the state*
  (``old.Protect``), whatever the new program says; GKE refuses to delete a cluster whose
  ``deletionProtection`` is on in the state. Each such step is a blocker with the change that must
  land first.
* capacity: TPU chips held after each phase, so the review shows the peak chips and $/h of the
  rollout (delete-before-replace never holds both shapes; create-then-delete holds both).

Pure functions over plain dicts; no Pulumi import.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..catalog import tpu as tpu_catalog
from . import replacement
from .plan_resources import SECRET_SIG_KEY, Res, engine_dependencies

Op = Literal["create", "update", "replace", "delete"]

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
K8S_PROVIDER = replacement.K8S_PROVIDER
GUARDED_TYPES = replacement.CAPACITY_TYPES | replacement.DATA_TYPES
"""Deleting or replacing these loses scarce capacity, the whole environment or data."""


# ---------------------------------------------------------------- diffs


def _is_secret(value: Any) -> bool:
    return value == "[secret]" or (isinstance(value, Mapping) and value.get(SECRET_SIG_KEY) is not None)


def _lookup(inputs: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    value: Any = inputs
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _ignored(path: str, ignore_changes: Iterable[str]) -> bool:
    for ignored in ignore_changes:
        ignored = re.sub(r"\[\d+\]$", "", ignored)
        if path == ignored or path.startswith(f"{ignored}."):
            return True
    return False


def changed_paths(old: Res, new: Res) -> list[str]:
    """Input paths whose values differ (an object added or removed is its own path), with
    ``new.ignore_changes`` left out. When the old side is real state: a value the provider
    defaulted there (``__defaults``) and the program does not set is no change, and a secret
    (ciphertext in the state) is never compared."""
    paths = []
    for path in replacement.input_changes(old.inputs, new.inputs):
        if _ignored(path, new.ignore_changes):
            continue
        (_, a), (in_new, b) = _lookup(old.inputs, path), _lookup(new.inputs, path)
        if _is_secret(a) or _is_secret(b):
            continue
        if not in_new and path in old.defaults:
            continue
        paths.append(path)
    return paths


# ---------------------------------------------------------------- steps


@dataclass(frozen=True)
class Step:
    op: Op
    urn: str
    type: str
    name: str
    paths: tuple[str, ...] = ()
    """Changed input paths (update, replace)."""
    replacing: tuple[str, ...] = ()
    """The changed paths that force the replacement, or a reason (``provider replaced``)."""
    delete_first: bool = False
    """Replace: the old resource is deleted before its replacement is created."""
    old_urn: str | None = None
    """Where the state came from when an alias matched (a rename without a replacement)."""
    protected: bool = False
    """The old resource is protected in the state (deleting or replacing it is refused)."""
    retained: bool = False
    """Delete: ``retainOnDelete`` keeps the cloud resource; only the state entry goes."""

    @property
    def kind(self) -> str:
        return self.type.rsplit(":", 1)[-1]

    def describe(self) -> str:
        what = f"{self.kind} `{self.name}`"
        if self.op == "replace":
            order = "delete, then create" if self.delete_first else "create the new one, delete the old one at the end"
            return f"replace {what} ({order}; forced by {', '.join(self.replacing)})"
        if self.op == "update":
            return f"update {what} in place ({', '.join(self.paths)})"
        if self.op == "delete":
            tail = " (retained in the cloud: only removed from the stack)" if self.retained else " at the end of the update"
            return f"delete {what}{tail}"
        return f"create {what}"


@dataclass(frozen=True)
class Blocker:
    step: Step
    why: str
    fix: str
    engine: bool = True
    """True: the engine or the provider stops the update there. False: the engine would let it
    through, and this project's prod procedure refuses it (protection is lifted on its own first)."""


@dataclass(frozen=True)
class Rollout:
    """TPU chips and their on-demand (or spot) price per hour before, at the peak of, and after the update."""

    chips_before: int
    chips_peak: int
    chips_after: int
    usd_before: float | None
    usd_peak: float | None
    usd_after: float | None
    quota_peak: Mapping[str, int] = field(default_factory=dict)
    """Peak chips per TPU quota (generation and on-demand or preemptible): quota is granted per kind."""


@dataclass
class Prediction:
    steps: list[Step]
    blockers: list[Blocker] = field(default_factory=list)
    rollout: Rollout | None = None
    state_only: list[str] = field(default_factory=list)
    """Resources whose options (e.g. ``protect``) change without touching the cloud."""

    def of(self, op: Op) -> list[Step]:
        return [s for s in self.steps if s.op == op]

    @property
    def refused(self) -> bool:
        return bool(self.blockers)


@dataclass
class _Pair:
    old: Res
    new: Res
    paths: list[str]
    forced: list[str]
    cause: str | None = None
    """URN of the replaced resource this one is replaced with (a dependent), if any."""


def _cascade(pairs: Sequence[_Pair]) -> None:
    """Replacements that follow another: the Kubernetes provider of a replaced cluster (its
    kubeconfig is unknown until the new cluster exists, which DiffConfig treats as a replacement),
    every resource that provider manages, objects and Helm releases alike (the engine replaces a
    resource whose provider is replaced), and the node pools of a replaced cluster (their
    ``cluster`` input is ForceNew). The cluster is replaced delete-first, so everything depending
    on it is deleted before it, even a pool that its own change already replaces (``cause``)."""
    by_urn = {p.new.urn: p for p in pairs}
    changed = True
    while changed:
        changed = False
        replaced = {p.new.urn for p in pairs if p.forced}
        providers = {p.new.name: p.new.urn for p in pairs if p.forced and p.new.type == K8S_PROVIDER}
        for p in pairs:
            if p.cause is not None:
                continue
            clusters = [d for d in p.new.dependencies if d in replaced and by_urn[d].new.type == CLUSTER]
            if p.new.type in (K8S_PROVIDER, NODE_POOL) and clusters:
                reason, cause = f"its cluster `{by_urn[clusters[0]].new.name}` is replaced", clusters[0]
            elif p.new.provider in providers:
                reason, cause = "its Kubernetes provider is replaced (new cluster)", providers[p.new.provider]
            else:
                continue
            p.forced, p.cause = [*p.forced, reason], cause
            changed = True


def topological(resources: Sequence[Res]) -> dict[str, int]:
    """URN -> position in an order where every resource comes after its parent, its dependencies
    and its provider (the order the engine can run creates and updates in; deletes run reversed)."""
    edges = engine_dependencies(resources)
    order: dict[str, int] = {}

    def visit(urn: str, seen: frozenset[str]) -> None:
        if urn not in edges or urn in order or urn in seen:
            return
        for dep in sorted(edges[urn]):
            visit(dep, seen | {urn})
        order[urn] = len(order)

    for urn in sorted(edges):
        visit(urn, frozenset())
    return order


def _urn_parts(urn: str) -> tuple[str, str, str]:
    """(``urn:pulumi:<stack>::<project>``, type chain, name) of an engine URN."""
    stack_project, _, rest = urn.partition("::")
    project, _, rest = rest.partition("::")
    types, _, name = rest.partition("::")
    return f"{stack_project}::{project}", types, name


def with_inherited_aliases(resources: Sequence[Res]) -> list[Res]:
    """Each resource with the aliases the engine derives from its parent's: a child of an aliased
    parent is also known by the URN it had under each of the parent's old URNs, its name's parent
    prefix renamed likewise (Pulumi SDK ``resource.py`` ``inherited_child_alias``). So moving a
    component (a ``HelmController`` adopted under a new parent, say) moves its children with it."""
    by_urn = {r.urn: r for r in resources}
    memo: dict[str, tuple[str, ...]] = {}

    def aliases_of(res: Res) -> tuple[str, ...]:
        if res.urn in memo:
            return memo[res.urn]
        memo[res.urn] = res.aliases  # a cycle cannot recurse forever
        parent = by_urn.get(res.parent)
        inherited: list[str] = []
        if parent is not None:
            parent_name = _urn_parts(parent.urn)[2]
            for parent_alias in aliases_of(parent):
                prefix, types, alias_parent_name = _urn_parts(parent_alias)
                name = res.name
                if name.startswith(parent_name):
                    name = alias_parent_name + name[len(parent_name) :]
                inherited.append(f"{prefix}::{types}${res.type}::{name}")
        memo[res.urn] = tuple(dict.fromkeys([*res.aliases, *inherited]))
        return memo[res.urn]

    return [dataclasses.replace(r, aliases=aliases_of(r)) for r in resources]


def predict(base: Sequence[Res], head: Sequence[Res], *, region: str | None = None) -> Prediction:
    """The steps ``pulumi up`` runs to go from ``base`` (a plan or the state) to ``head``."""
    head = with_inherited_aliases(head)
    old_by_urn = {r.urn: r for r in base}
    matched: dict[str, Res] = {}  # head urn -> old resource
    for new in head:
        if new.urn in old_by_urn:
            matched[new.urn] = old_by_urn[new.urn]
            continue
        hits = [old_by_urn[a] for a in new.aliases if a in old_by_urn]
        if hits:
            matched[new.urn] = hits[0]
    claimed = {old.urn for old in matched.values()}

    pairs = []
    for new in head:
        old = matched.get(new.urn)
        if new.custom and old is not None:
            paths = changed_paths(old, new)
            pairs.append(_Pair(old, new, paths, replacement.replacing_paths(new.type, paths, new.replace_on_changes)))
    _cascade(pairs)

    steps: list[Step] = []
    state_only: list[str] = []
    causes: dict[str, str | None] = {}
    for p in pairs:
        old, new = p.old, p.new
        common = dict(
            urn=new.urn,
            type=new.type,
            name=new.name,
            paths=tuple(p.paths),
            old_urn=old.urn if old.urn != new.urn else None,
            protected=old.protect,
        )
        if p.forced:
            first = new.delete_before_replace or replacement.provider_deletes_first(new.type) or p.cause is not None
            steps.append(Step("replace", replacing=tuple(p.forced), delete_first=first, **common))  # type: ignore[arg-type]
            causes[new.urn] = p.cause
        elif p.paths:
            steps.append(Step("update", **common))  # type: ignore[arg-type]
        elif old.urn != new.urn or (old.protect, old.retain_on_delete) != (new.protect, new.retain_on_delete):
            state_only.append(new.urn)
    for new in head:
        if new.custom and new.urn not in matched:
            steps.append(Step("create", new.urn, new.type, new.name))
    for old in base:
        if old.custom and old.urn not in claimed:
            steps.append(Step("delete", old.urn, old.type, old.name, protected=old.protect, retained=old.retain_on_delete))

    # Creates, updates and replacements in dependency order; deletes last, dependents first.
    ahead, behind = topological(head), topological(base)
    steps.sort(key=lambda s: (1, -behind.get(s.urn, 0)) if s.op == "delete" else (0, ahead.get(s.urn, 0)))
    prediction = Prediction(steps=steps, state_only=state_only)
    new_by_urn = {r.urn: r for r in head}
    prediction.blockers = _blockers(prediction.steps, old_by_urn, matched, new_by_urn, causes)
    prediction.rollout = rollout(base, head, prediction, region=region)
    return prediction


# ---------------------------------------------------------------- protection


def _bucket_key(name: str) -> str:
    """``bucket-<key>-bucket`` (StackBucket's child) -> ``<key>``."""
    match = re.fullmatch(r"bucket-(.+)-bucket", name)
    return match.group(1) if match else name


def _fix(step: Step) -> str:
    if step.type == NODE_POOL:
        return (
            "land `gke-tpu-llm:tpu.allowReplacement: true` with the current shape first and `pulumi up` "
            "(it only lifts protection and adds a label, in place); then land this change; then remove allowReplacement"
        )
    if step.type == CLUSTER:
        return (
            "land `gke-tpu-llm:cluster.allowReplacement: true`, `cluster.deletionProtection: false` and "
            "`tpu.allowReplacement: true` (its pools go with it) with the current settings first and `pulumi up`; "
            "then land this change (to tear the stack down instead, see allowTeardown)"
        )
    if step.type == BUCKET:
        key = _bucket_key(step.name)
        if step.op == "delete":
            return (
                f"keep `gke-tpu-llm:buckets.{key}` (prod buckets are protected and retained); to stop managing it while "
                f"keeping its data: `pulumi state unprotect '{step.urn}'`, then `pulumi up` (retainOnDelete keeps the bucket)"
            )
        return (
            f"revert the change to `gke-tpu-llm:buckets.{key}`: a bucket cannot be renamed or moved in place; put new "
            "data in a bucket under a new key and keep this one"
        )
    return f"land a change that stops protecting `{step.name}` first (`pulumi up`), then this one"


def _blockers(
    steps: Sequence[Step],
    old_by_urn: Mapping[str, Res],
    matched: Mapping[str, Res],
    new_by_urn: Mapping[str, Res],
    causes: Mapping[str, str | None],
) -> list[Blocker]:
    """Where the update stops, as the engine decides it (pulumi/pulumi step_generator.go and
    step.go; see components/tools/replacement.py for the versions read):

    * replace: refused when the resource is protected in the state *and* in the program; a
      dependent deleted first for another resource's delete-before-replace is refused on its
      state flag alone ("as part of replacing");
    * delete (a resource the program no longer registers): refused on the state flag, at the end
      of the update, after everything else ran;
    * GKE: a cluster whose state has ``deletionProtection`` cannot be deleted (or replaced).

    Replacing a protected resource in the same change that lifts its protection gets through the
    engine; this project's prod procedure refuses it anyway (``engine=False``): the allowance lands
    and is applied on its own first, so the destructive step is a separate, visible review."""
    out = []
    for step in steps:
        if step.op not in ("replace", "delete"):
            continue
        old = matched.get(step.urn) if step.op == "replace" else old_by_urn.get(step.urn)
        if old is None:
            continue
        new = new_by_urn.get(step.urn) if step.op == "replace" else None
        cause = causes.get(step.urn)
        what = f"{step.kind} `{step.name}`"
        if step.op == "delete" and old.protect:
            why = f"the engine refuses to delete {what} at the end of the update: it is protected in the stack's state"
            out.append(Blocker(step, why, _fix(step)))
        elif step.op == "replace" and old.protect and cause is not None:
            why = (
                f"the engine refuses to replace {what} as part of replacing `{cause.rsplit('::', 1)[-1]}`: it is "
                "protected in the stack's state"
            )
            out.append(Blocker(step, why, _fix(step)))
        elif step.op == "replace" and old.protect and new is not None and new.protect:
            why = f"the engine refuses to replace {what}: it is protected (in the state and in this change)"
            out.append(Blocker(step, why, _fix(step)))
        elif step.op == "replace" and old.protect:
            why = (
                f"this change lifts the protection of {what} and replaces it in one step; the engine would let it "
                "through, but prod lifts protection in a change of its own first (two reviewed steps)"
            )
            out.append(Blocker(step, why, _fix(step), engine=False))
        if step.type == CLUSTER and old.inputs.get("deletionProtection") is True:
            why = f"GKE refuses to delete cluster `{step.name}`: deletion protection is on in its current state"
            fix = "land `gke-tpu-llm:cluster.deletionProtection: false` first and `pulumi up`; then this change"
            out.append(Blocker(step, why, fix))
    return out


# ---------------------------------------------------------------- TPU capacity during the rollout


_TPU_MACHINES: Mapping[str, tuple[tpu_catalog.TpuGeneration, int]] = {
    gen.machine_type(c): (gen, c) for gen in tpu_catalog.GENERATIONS.values() for _, c in gen.shapes
}


def pool_chips(res: Res) -> int:
    """TPU chips a node pool holds at its maximum size (0 for CPU pools and other resources)."""
    if res.type != NODE_POOL:
        return 0
    node_config = res.inputs.get("nodeConfig") or {}
    found = _TPU_MACHINES.get(str(node_config.get("machineType")))
    if found is None:
        return 0
    autoscaling = res.inputs.get("autoscaling") or {}
    # Autoscaled: the total bound, or the per-zone bound times the pool's zones (a TPU pool has one).
    per_zone = int(autoscaling.get("maxNodeCount") or 0) * len(res.inputs.get("nodeLocations") or [None])
    nodes = autoscaling.get("totalMaxNodeCount") or per_zone or res.inputs.get("nodeCount") or res.inputs.get("initialNodeCount")
    return int(nodes or 0) * found[1]


def pool_capacity(res: Res) -> str:
    """The capacity type (``tpu.capacity[].type``) a node pool's inputs say it obtains its VMs as."""
    node_config = res.inputs.get("nodeConfig") or {}
    if (res.inputs.get("queuedProvisioning") or {}).get("enabled"):
        return "queuedProvisioning"
    if node_config.get("flexStart"):
        return "flexStart"
    if (node_config.get("reservationAffinity") or {}).get("consumeReservationType") == "SPECIFIC_RESERVATION":
        return "reservation"
    return "spot" if node_config.get("spot") else "onDemand"




def pool_quota(res: Res) -> str | None:
    """The TPU quota a pool draws on (``v6e on-demand``, ``v5e preemptible``, ``v6e reserved``), None for CPU pools."""
    node_config = res.inputs.get("nodeConfig") or {}
    found = _TPU_MACHINES.get(str(node_config.get("machineType")))
    if res.type != NODE_POOL or found is None:
        return None
    # The quota kind per capacity type is the pre-flight's; a reservation draws on none: "reserved".
    return f"{found[0].name} {tpu_catalog.QUOTA_KIND_BY_CAPACITY[pool_capacity(res)] or 'reserved'}"


def _by_quota(pools: Iterable[Res]) -> dict[str, int]:
    out: dict[str, int] = {}
    for res in pools:
        kind = pool_quota(res)
        if kind is not None:
            out[kind] = out.get(kind, 0) + pool_chips(res)
    return out


_PRICED: Mapping[str, tpu_catalog.TpuSlice] = {s.machine_type: s for s in tpu_catalog.all_slices()}
"""A catalog slice per TPU machine type: its ``hourly_price`` prices any number of that VM's chips."""


def pool_usd_per_hour(res: Res, region: str | None) -> float | None:
    chips = pool_chips(res)
    if not chips:
        return 0.0
    node_config = res.inputs["nodeConfig"]
    tpu_slice = _PRICED[str(node_config["machineType"])]
    # At the capacity type's rate: spot, flex-start (queued provisioning), or on-demand (a reservation too).
    return tpu_slice.capacity_price(region, pool_capacity(res), chips=chips)


def _sum(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return round(total, 4)


def rollout(base: Sequence[Res], head: Sequence[Res], prediction: Prediction, *, region: str | None) -> Rollout:
    """Chips before, after, and at the peak: every create and update runs before the deletes at the
    end, so the peak holds the new state plus everything deleted only at the end (create-then-delete
    replacements and removed pools); a delete-before-replace never holds both."""
    old_by_urn = {r.urn: r for r in base}
    new_by_urn = {r.urn: r for r in head}
    late: list[Res] = []
    for step in prediction.steps:
        if step.op == "delete" and step.urn in old_by_urn:
            late.append(old_by_urn[step.urn])
        elif step.op == "replace" and not step.delete_first:
            old = old_by_urn.get(step.old_urn or step.urn)
            if old is not None:
                late.append(old)
    before = [r for r in base if r.type == NODE_POOL]
    after = [r for r in new_by_urn.values() if r.type == NODE_POOL]
    peak_set = after + late
    chips_before, chips_after = sum(map(pool_chips, before)), sum(map(pool_chips, after))
    chips_peak = max(chips_before, sum(map(pool_chips, peak_set)))
    usd_before = _sum(pool_usd_per_hour(r, region) for r in before)
    usd_after = _sum(pool_usd_per_hour(r, region) for r in after)
    usd_peak_set = _sum(pool_usd_per_hour(r, region) for r in peak_set)
    usd_peak = None if usd_before is None or usd_peak_set is None else max(usd_before, usd_peak_set)
    quota_before, quota_peak_set = _by_quota(before), _by_quota(peak_set)
    quota = {k: max(quota_before.get(k, 0), quota_peak_set.get(k, 0)) for k in sorted(set(quota_before) | set(quota_peak_set))}
    return Rollout(chips_before, chips_peak, chips_after, usd_before, usd_peak, usd_after, quota)
