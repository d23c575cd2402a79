"""Pull-request review: compare two sets of offline plans (base and head) and write one comment.

The inputs are the JSON documents ``python -m components plan --all --json`` prints on each commit,
so the comparison needs no cloud credentials and shows the Kubernetes layer too: per changed
stack, resources added / changed / removed (with the changed input paths), TPU slices, the hourly
cost and its delta, warnings for replacements of TPU pools or the cluster, and the manifest diff.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

COMMENT_MARKER = "<!-- gke-tpu-llm:plan-review -->"
"""First line of the comment, so the workflow updates its own comment instead of adding more."""

# Resource types whose deletion or replacement loses scarce capacity or the whole environment.
GUARDED_TYPES = ("gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster")
# Inputs of these types that GKE cannot change in place (ForceNew in the provider schema).
REPLACING_INPUTS = {
    "gcp:container/nodePool:NodePool": (
        "name",
        "nodeConfig.machineType",
        "placementPolicy",
        "nodeLocations",
        "location",
        "cluster",
        "nodeConfig.spot",
        "nodeConfig.reservationAffinity",
        "nodeConfig.diskSizeGb",
        "nodeConfig.advancedMachineFeatures",
        "initialNodeCount",
    ),
    "gcp:container/cluster:Cluster": ("name", "location", "project"),
}
MAX_DIFF_LINES = 400


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    return {prefix: value}


@dataclass
class ResourceChange:
    urn: str
    type: str
    name: str
    changed_paths: list[str] = field(default_factory=list)

    @property
    def replaces(self) -> bool:
        guarded = REPLACING_INPUTS.get(self.type, ())
        return any(p == g or p.startswith(f"{g}.") for p in self.changed_paths for g in guarded)


@dataclass
class StackChange:
    stack: str
    added: list[ResourceChange]
    removed: list[ResourceChange]
    changed: list[ResourceChange]
    cost_base: float | None
    cost_head: float | None
    slices_base: list[dict[str, Any]]
    slices_head: list[dict[str, Any]]
    manifest_diff: str

    @property
    def cost_delta(self) -> float | None:
        if self.cost_base is None or self.cost_head is None:
            return None
        return round(self.cost_head - self.cost_base, 4)

    @property
    def warnings(self) -> list[str]:
        """Guarded resources that this change deletes or replaces."""
        out = []
        for res in self.removed:
            if res.type in GUARDED_TYPES:
                out.append(f"deletes {res.type.rsplit(':', 1)[1]} `{res.name}`")
        for res in self.changed:
            if res.type in GUARDED_TYPES and res.replaces:
                out.append(f"replaces {res.type.rsplit(':', 1)[1]} `{res.name}` ({', '.join(res.changed_paths)})")
        return out


def _by_urn(plan: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    return {r["urn"]: r for r in (plan or {}).get("resources", [])}


def _manifest_text(plan: Mapping[str, Any] | None) -> list[str]:
    docs = (plan or {}).get("manifests", [])
    return yaml.safe_dump_all(docs, sort_keys=True).splitlines(keepends=True) if docs else []


def compare_stack(stack: str, base: Mapping[str, Any] | None, head: Mapping[str, Any] | None) -> StackChange:
    old, new = _by_urn(base), _by_urn(head)
    added = [ResourceChange(u, r["type"], r["name"]) for u, r in sorted(new.items()) if u not in old]
    removed = [ResourceChange(u, r["type"], r["name"]) for u, r in sorted(old.items()) if u not in new]
    changed = []
    for urn in sorted(set(old) & set(new)):
        a = _flatten({"inputs": old[urn]["inputs"], "options": old[urn].get("options", {})})
        b = _flatten({"inputs": new[urn]["inputs"], "options": new[urn].get("options", {})})
        paths = sorted(k.split(".", 1)[1] for k in set(a) | set(b) if a.get(k) != b.get(k))
        if paths:
            changed.append(ResourceChange(urn, new[urn]["type"], new[urn]["name"], paths))
    diff = "".join(difflib.unified_diff(_manifest_text(base), _manifest_text(head), f"base/{stack}", f"head/{stack}"))

    def cost(plan: Mapping[str, Any] | None) -> float | None:
        billed = (plan or {}).get("cost_usd_per_hour", {}).get("billed")
        return None if billed is None else float(billed)

    return StackChange(
        stack=stack,
        added=added,
        removed=removed,
        changed=changed,
        cost_base=cost(base),
        cost_head=cost(head),
        slices_base=list((base or {}).get("slices", [])),
        slices_head=list((head or {}).get("slices", [])),
        manifest_diff=diff,
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


def render_comment(changes: list[StackChange]) -> str:
    lines = [COMMENT_MARKER, "## gke-tpu-llm plan review", ""]
    if not changes:
        lines.append("No stack changes: cloud resources and Kubernetes manifests are identical to the base branch.")
        return "\n".join(lines) + "\n"
    lines += ["| stack | added | changed | removed | slices | cost (billed) | delta |", "|---|---|---|---|---|---|---|"]
    for c in changes:
        delta = c.cost_delta
        delta_text = "n/a" if delta is None else f"{'+' if delta >= 0 else '−'}${abs(delta):,.2f}/h"
        lines.append(
            f"| `{c.stack}` | {len(c.added)} | {len(c.changed)} | {len(c.removed)} | "
            f"{_slices(c.slices_head)} | {_money(c.cost_head)} | {delta_text} |"
        )
    for c in changes:
        lines += ["", f"### `{c.stack}`", ""]
        for warning in c.warnings:
            lines.append(f"> [!WARNING]\n> This change {warning}.")
        if c.slices_base != c.slices_head:
            lines.append(f"- slices: {_slices(c.slices_base)} → {_slices(c.slices_head)}")
        for label, group in (("added", c.added), ("removed", c.removed)):
            for res in group:
                lines.append(f"- {label} `{res.type}` **{res.name}**")
        for res in c.changed:
            marker = " (replacement)" if res.replaces else ""
            lines.append(f"- changed `{res.type}` **{res.name}**{marker}: {', '.join(res.changed_paths)}")
        if c.manifest_diff:
            diff_lines = c.manifest_diff.splitlines()
            cut = diff_lines[:MAX_DIFF_LINES]
            more = len(diff_lines) - len(cut)
            lines += ["", "<details><summary>Kubernetes manifest diff</summary>", "", "```diff", *cut, "```"]
            if more:
                lines.append(f"({more} more lines; run `python -m components render {c.stack}` locally)")
            lines.append("</details>")
    return "\n".join(lines) + "\n"
