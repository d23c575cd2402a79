"""Pull-request review: what ``pulumi up`` will do to each stack, from two sets of offline plans.

The inputs are the JSON documents ``python -m components plan --all --json`` prints on each commit
(or, for one stack, ``pulumi stack export`` as the base: its real state). For every changed stack
the comment says, in order, the steps the engine will run (``components.tools.steps``: update in place,
replace and in which order, create, delete), the TPU chips and $/h before, at the peak of and after
the rollout, the stack's environment, every protected resource that blocks the update with the
change that must land first, warnings for TPU pools, clusters and buckets that are replaced or
deleted, and the Kubernetes manifest diff. A change the engine would refuse half-way is *refused*
here: ``review`` exits 2 (after writing the comment) so the pull request cannot go green.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..config.isolation import Tenancy, conflicts
from . import plan_resources
from . import steps as step_model
from .endpoints import warnings as endpoint_warnings

COMMENT_MARKER = "<!-- gke-tpu-llm:plan-review -->"
"""First line of the comment, so the workflow updates its own comment instead of adding more."""
GUARDED_TYPES = step_model.GUARDED_TYPES
MAX_DIFF_LINES = 400
# An in-place update of the cluster's network policy (enabling Calico) makes GKE recreate every node:
# "a rolling update of all cluster nodes, similar to performing a cluster upgrade" (GKE, quoted by the
# CIS GKE Benchmark v1.5.0).
REFUSED_EXIT = 2


@dataclass
class StackChange:
    stack: str
    environment: str
    prediction: step_model.Prediction
    cost_base: float | None
    cost_head: float | None
    slices_base: list[dict[str, Any]]
    slices_head: list[dict[str, Any]]
    manifest_diff: str
    base_is_state: bool = False
    head_manifests: list[dict[str, Any]] = field(default_factory=list)
    tiers_base: dict[str, Any] = field(default_factory=dict)
    """The base plan's ``capacity_tiers`` ($/h per capacity tier; empty for a state export or a new stack)."""
    tiers_head: dict[str, Any] = field(default_factory=dict)

    @property
    def added(self) -> list[step_model.Step]:
        return self.prediction.of("create")

    @property
    def removed(self) -> list[step_model.Step]:
        return self.prediction.of("delete")

    @property
    def changed(self) -> list[step_model.Step]:
        return [s for s in self.prediction.steps if s.op in ("update", "replace")]

    @property
    def replaced(self) -> list[step_model.Step]:
        return self.prediction.of("replace")

    @property
    def refused(self) -> bool:
        return self.prediction.refused

    @property
    def exposed(self) -> list[str]:
        """Endpoints of the head reachable from outside the VPC, and who can reach them."""
        return endpoint_warnings(self.head_manifests)

    @property
    def cost_delta(self) -> float | None:
        if self.cost_base is None or self.cost_head is None:
            return None
        return round(self.cost_head - self.cost_base, 4)

    @property
    def warnings(self) -> list[str]:
        """TPU pools, clusters and buckets that this change deletes or replaces."""
        out = []
        for step in self.prediction.steps:
            if step.type not in GUARDED_TYPES:
                continue
            if step.op == "delete":
                kept = " (retained in GCP, removed from the stack)" if step.retained else ""
                out.append(f"deletes {step.kind} `{step.name}`{kept}")
            elif step.op == "replace":
                order = "deleted first" if step.delete_first else "new one created first, old one deleted at the end"
                data = "; its objects are lost unless copied first" if step.type == step_model.BUCKET else ""
                out.append(f"replaces {step.kind} `{step.name}` ({', '.join(step.replacing)}; {order}{data})")
            elif step.op == "update" and step.type == step_model.CLUSTER:
                prefixes = ("networkPolicy.", "addonsConfig.networkPolicyConfig")
                recreating = [p for p in step.paths if p == "networkPolicy" or p.startswith(prefixes)]
                if recreating:
                    out.append(
                        f"updates Cluster `{step.name}` in place, and GKE then recreates every node of the cluster, "
                        f"TPU slices included, like a node upgrade ({', '.join(recreating)})"
                    )
        return out


def _manifest_text(plan: Mapping[str, Any] | None) -> list[str]:
    docs = (plan or {}).get("manifests", [])
    return yaml.safe_dump_all(docs, sort_keys=True).splitlines(keepends=True) if docs else []


def _cost(plan: Mapping[str, Any] | None) -> float | None:
    billed = (plan or {}).get("cost_usd_per_hour", {}).get("billed")
    return None if billed is None else float(billed)


def compare_stack(stack: str, base: Mapping[str, Any] | None, head: Mapping[str, Any] | None) -> StackChange:
    """``base`` is the base commit's plan of the stack, its ``pulumi stack export``, or None (new stack)."""
    base_is_state = base is not None and plan_resources.is_state_export(base)
    old = plan_resources.from_state(base) if base is not None and base_is_state else plan_resources.from_plan(base)
    region = (head or {}).get("region") or (None if base_is_state else (base or {}).get("region"))
    prediction = step_model.predict(old, plan_resources.from_plan(head), region=region)
    plan_base = None if base_is_state else base
    diff = "".join(difflib.unified_diff(_manifest_text(plan_base), _manifest_text(head), f"base/{stack}", f"head/{stack}"))
    environment = str((head or {}).get("environment") or (plan_base or {}).get("environment") or "unknown")
    return StackChange(
        stack=stack,
        environment=environment,
        prediction=prediction,
        cost_base=_cost(plan_base),
        cost_head=_cost(head),
        slices_base=list((plan_base or {}).get("slices", [])),
        slices_head=list((head or {}).get("slices", [])),
        manifest_diff="" if base_is_state else diff,
        base_is_state=base_is_state,
        head_manifests=list((head or {}).get("manifests", [])),
        tiers_base=dict((plan_base or {}).get("capacity_tiers") or {}),
        tiers_head=dict((head or {}).get("capacity_tiers") or {}),
    )


def compare(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[StackChange]:
    """Stacks whose plan differs between base and head (new and removed stacks included)."""
    out = []
    for stack in sorted(set(base) | set(head)):
        if base.get(stack) != head.get(stack):
            out.append(compare_stack(stack, base.get(stack), head.get(stack)))
    return out


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}/h"


def _slices(slices: list[dict[str, Any]]) -> str:
    if not slices:
        return "none"
    s = slices[0]
    return f"{len(slices)} × {s['generation']} {s['topology']} ({s['machine_type']} × {s['hosts']}, {s['chips']} chips)"


def _tiers(tiers: Mapping[str, Any]) -> str:
    """Capacity tiers at full size, first preferred, and the maximum if every tier fills."""
    listed = tiers.get("tiers") or []
    if not listed:
        return "none"
    text = " → ".join(f"{t['type']} {_money(t['usd_per_hour_max'])}" for t in listed)
    return f"{text} (every tier full: {_money(tiers.get('usd_per_hour_if_every_tier_fills'))})"


def _steps_section(c: StackChange) -> list[str]:
    p = c.prediction
    lines = [f"**What `pulumi up` will do** ({'against the stack state' if c.base_is_state else 'from the base plan'}):", ""]
    ordered = [s for s in p.steps if s.op != "delete"]
    late = [s for s in p.steps if s.op == "delete"]
    for i, step in enumerate(ordered, 1):
        renamed = f" (state moved from `{step.old_urn.rsplit('::', 1)[-1]}` by an alias)" if step.old_urn else ""
        lines.append(f"{i}. {step.describe()}{renamed}")
    for step in late:
        lines.append(f"- at the end: {step.describe()}")
    if not p.steps:
        lines.append("- no cloud or cluster change")
    if p.state_only:
        names = ", ".join(f"`{u.rsplit('::', 1)[-1]}`" for u in p.state_only)
        lines.append(f"- state only (no cloud call): protection, retention or aliases of {names}")
    r = p.rollout
    if r is not None and (r.chips_before or r.chips_after):
        lines += [
            "",
            f"**TPU capacity during the rollout:** {r.chips_before} chips ({_money(r.usd_before)}) → peak "
            f"{r.chips_peak} chips ({_money(r.usd_peak)}) → {r.chips_after} chips ({_money(r.usd_after)}); "
            f"TPU quota needed at the peak: {', '.join(f'{n} {kind} chips' for kind, n in r.quota_peak.items())}.",
        ]
    return lines


def _refusal(c: StackChange) -> list[str]:
    blockers = c.prediction.blockers
    engine = [b for b in blockers if b.engine]
    head = (
        f"`pulumi up` would stop half-way on this {c.environment} stack ({len(engine)} step(s) the engine or GKE refuses)"
        if engine
        else f"this {c.environment} change replaces protected resources in the same change that lifts their protection"
    )
    lines = ["> [!CAUTION]", f"> **Refused.** {head}."]
    for b in blockers:
        lines += [f"> - {b.why}.", f">   **Land first:** {b.fix}."]
    if any(b.step.type != step_model.BUCKET for b in blockers):
        lines.append(
            "> Split the change: the step that lifts protection, alone (review, merge, `pulumi up`), then the change itself."
        )
    return lines


def exposed_endpoints(head: Mapping[str, Any]) -> list[str]:
    """Every endpoint of every head stack reachable from outside the VPC (changed or not)."""
    return [
        f"`{stack}`: {line}"
        for stack, plan in sorted(head.items())
        if isinstance(plan, Mapping)
        for line in endpoint_warnings(plan.get("manifests", []))
    ]


def isolation_problems(head: Mapping[str, Any]) -> list[str]:
    """The head plans' stacks checked against each other (``components.config.isolation``): a name or
    Workload Identity namespace two stacks share, or a prod project a non-prod stack uses. Plans
    without a ``tenancy`` entry (``pulumi stack export`` bases, older plans) are not compared."""
    tenancies = [
        Tenancy.from_dict(plan["tenancy"], source=f"plan of {name}")
        for name, plan in head.items()
        if isinstance(plan, Mapping) and isinstance(plan.get("tenancy"), Mapping)
    ]
    return [f"{t.stack}: {v}" for t in tenancies for v in conflicts(t, tenancies)]


def render_comment(changes: list[StackChange], head: Mapping[str, Any] | None = None) -> str:
    lines = [COMMENT_MARKER, "## gke-tpu-llm plan review", ""]
    shared = isolation_problems(head or {})
    if shared:
        lines += [
            "> [!CAUTION]",
            "> **Refused: stacks that are not isolated from each other** (nothing may be applied until each is fixed):",
            *(f"> - {problem}" for problem in shared),
            "",
        ]
    exposed = exposed_endpoints(head or {})
    if exposed:
        lines += ["> [!WARNING]", "> Endpoints reachable from outside the VPC:", *(f"> - {e}" for e in exposed), ""]
    if not changes:
        lines.append("No stack changes: cloud resources and Kubernetes manifests are identical to the base branch.")
        return "\n".join(lines) + "\n"
    lines += [
        "| stack | env | create | update | replace | delete | peak TPU chips | slices | cost (billed) | delta | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in changes:
        delta = c.cost_delta
        delta_text = "n/a" if delta is None else f"{'+' if delta >= 0 else '−'}${abs(delta):,.2f}/h"
        r = c.prediction.rollout
        peak = "n/a" if r is None else f"{r.chips_peak} ({_money(r.usd_peak)})"
        p = c.prediction
        verdict = "**refused**" if c.refused else "ok"
        lines.append(
            f"| `{c.stack}` | {c.environment} | {len(p.of('create'))} | {len(p.of('update'))} | {len(p.of('replace'))} | "
            f"{len(p.of('delete'))} | {peak} | {_slices(c.slices_head)} | {_money(c.cost_head)} | {delta_text} | {verdict} |"
        )
    for c in changes:
        lines += ["", f"### `{c.stack}` ({c.environment})", ""]
        if c.refused:
            lines += [*_refusal(c), ""]
        for warning in c.warnings:
            lines.append(f"> [!WARNING]\n> This change {warning}.")
        for endpoint in c.exposed:
            lines.append(f"> [!WARNING]\n> Endpoint: {endpoint}.")
        if c.slices_base != c.slices_head:
            lines.append(f"- slices: {_slices(c.slices_base)} → {_slices(c.slices_head)}")
        if c.tiers_base and c.tiers_base.get("tiers") != c.tiers_head.get("tiers"):
            lines.append(f"- capacity tiers ($/h at full size): {_tiers(c.tiers_base)} ⇒ {_tiers(c.tiers_head)}")
        lines += ["", *_steps_section(c)]
        if c.manifest_diff:
            diff_lines = c.manifest_diff.splitlines()
            cut = diff_lines[:MAX_DIFF_LINES]
            more = len(diff_lines) - len(cut)
            lines += ["", "<details><summary>Kubernetes manifest diff</summary>", "", "```diff", *cut, "```"]
            if more:
                lines.append(f"({more} more lines; run `python -m components render {c.stack}` locally)")
            lines.append("</details>")
    return "\n".join(lines) + "\n"


class DocumentError(ValueError):
    """A review or teardown input that is not a plan or a state export; the message names the file."""


def _check_resources(resources: Any, where: str, required: tuple[str, ...]) -> None:
    if not isinstance(resources, list) or not all(
        isinstance(r, Mapping) and all(isinstance(r.get(k), str) for k in required) for r in resources
    ):
        raise DocumentError(f"{where}: `resources` must be a list of objects with {', '.join(required)}")


def _failed(document: Mapping[str, Any]) -> str:
    """The message of a ``--json`` error object (``{"error": {...}}``, what ``plan`` prints for a stack
    it cannot plan); empty for anything else."""
    error = document.get("error")
    # A stack named "error" in `plan --all --json` maps to a plan (with resources), not to this.
    if "resources" in document or not isinstance(error, Mapping) or "resources" in error or "kind" not in error:
        return ""
    return str(error.get("message") or error["kind"])


def load_side(
    document: Mapping[str, Any], stack: str | None = None, *, path: str = "", state_only: bool = False
) -> dict[str, Any]:
    """``plan --all --json`` as is; a single ``plan STACK --json`` or a ``pulumi stack export`` keyed by
    its stack (``stack`` names the stack of an export). Checks the shape, so a wrong file is a
    ``DocumentError`` naming it, never a traceback."""
    where = path or "input"
    if plan_resources.is_state_export(document):
        if not stack:
            raise DocumentError(f"{where}: a `pulumi stack export` needs --stack NAME (the stack it was exported from)")
        _check_resources(document["deployment"].get("resources") or [], where, ("urn", "type"))
        return {stack: dict(document)}
    if state_only:
        raise DocumentError(f"{where}: expected a `pulumi stack export` document (with a `deployment` object)")
    if _failed(document):
        raise DocumentError(f"{where}: the plan failed, so there is nothing to review: {_failed(document)}")
    plans = {str(document["stack"]): document} if "resources" in document and "stack" in document else document
    for name, plan in plans.items():
        if not isinstance(plan, Mapping):
            raise DocumentError(f"{where}: `{name}` is not a plan (`python -m components plan --all --json` output)")
        if _failed(plan):
            raise DocumentError(f"{where}: `{name}` could not be planned, so nothing can be reviewed: {_failed(plan)}")
        _check_resources(plan.get("resources", []), f"{where}: {name}", ("urn", "type", "name"))
    return {str(k): dict(v) for k, v in plans.items()}
