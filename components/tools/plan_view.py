"""What ``plan`` prints for a human (and ``estimate`` its serving table): the resource tree with
key inputs and options, the TPU slices, per-chip memory, the planner's choice, predicted serving,
capacity tiers, pre-flight lines, endpoints and costs. ``plan --json`` is ``report.plan_json``.
"""

from __future__ import annotations

import json
from typing import Any

from . import report
from .mockengine import Registration

# Inputs worth showing per resource type in the tree (dotted paths into the wire inputs).
KEY_INPUTS: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": (
        "name",
        "location",
        "releaseChannel.channel",
        "minMasterVersion",
        "workloadIdentityConfig.workloadPool",
        "addonsConfig",
        "deletionProtection",
    ),
    "gcp:container/nodePool:NodePool": (
        "name",
        "nodeConfig.machineType",
        "nodeCount",
        "initialNodeCount",
        "autoscaling",
        "placementPolicy",
        "nodeLocations",
        "nodeConfig.spot",
        "nodeConfig.flexStart",
        "nodeConfig.maxRunDuration",
        "nodeConfig.reservationAffinity",
        "queuedProvisioning.enabled",
        "nodeConfig.labels",
        "nodeConfig.taints",
        "nodeConfig.workloadMetadataConfig.mode",
        "nodeConfig.serviceAccount",
    ),
    "gcp:storage/bucket:Bucket": (
        "name",
        "location",
        "uniformBucketLevelAccess",
        "publicAccessPrevention",
        "forceDestroy",
        "versioning",
    ),
    "gcp:serviceaccount/account:Account": ("accountId",),
    "gcp:serviceaccount/iAMMember:IAMMember": ("role", "member"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", "role", "member"),
    "gcp:projects/iAMMember:IAMMember": ("role", "member"),
    "gcp:artifactregistry/repository:Repository": ("repositoryId", "location", "format"),
}


def _get(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _summary(res: Registration) -> str:
    if res.type.startswith("kubernetes:") and res.custom and "metadata" in res.inputs:
        meta = res.inputs["metadata"]
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
    keys = KEY_INPUTS.get(res.type, ())
    parts = []
    for key in keys:
        value = _get(res.inputs, key)
        if value is not None:
            parts.append(f"{key.split('.')[-1]}={json.dumps(value, separators=(',', ':'))}")
    flags = [name for name in ("protect", "retainOnDelete", "deleteBeforeReplace") if res.options.get(name)]
    if res.options.get("ignoreChanges"):
        flags.append(f"ignoreChanges={','.join(res.options['ignoreChanges'])}")
    if res.options.get("replaceOnChanges"):
        flags.append(f"replaceOnChanges={','.join(res.options['replaceOnChanges'])}")
    if res.options.get("aliases"):
        flags.append(f"aliases={len(res.options['aliases'])}")
    if flags:
        parts.append(f"[{' '.join(flags)}]")
    return " ".join(parts)


def print_plan(result: report.PlanResult) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.tree import Tree

    console = Console(width=200)
    data = report.plan_json(result)
    cfg = result.config
    title = f"[bold]{result.stack}[/] ({cfg.environment.value}) project={cfg.project} region={cfg.region}"
    tree = Tree(title)
    nodes: dict[str, Tree] = {}
    by_parent: dict[str, list[Registration]] = {}
    for res in result.resources:
        by_parent.setdefault(res.parent, []).append(res)
    urns = {r.urn for r in result.resources}

    def add(parent_tree: Tree, res: Registration) -> None:
        # Values such as "…svc.id.goog[ns/ksa]" must not be read as rich markup.
        label = f"[cyan]{escape(res.type)}[/] [bold]{escape(res.name)}[/] {escape(_summary(res))}"
        node = parent_tree.add(label)
        nodes[res.urn] = node
        for child in by_parent.get(res.urn, []):
            add(node, child)

    for res in result.resources:
        if res.parent not in urns:
            add(tree, res)
    console.print(tree)

    table = Table(title="TPU slices")
    for col in ("pool", "generation", "topology", "chips", "hosts", "machine type", "nodes", "HBM (GB)", "zone"):
        table.add_column(col)
    for s in data["slices"]:
        nodes_text = str(s["hosts"]) if s["nodes_min"] == s["nodes_max"] else f"{s['nodes_min']}-{s['nodes_max']}"
        table.add_row(
            s["pool"],
            s["generation"],
            s["topology"],
            str(s["chips"]),
            str(s["hosts"]),
            s["machine_type"],
            nodes_text,
            f"{s['hbm_gb']:.0f}",
            s["zone"],
        )
    console.print(table)
    print_capacity(console, data["capacity"])
    for line in tpu_pods(data["manifests"]):
        console.print(line)
    console.print(escape(cost_line(data["cost_usd_per_hour"])))
    from .plan_training import print_training

    print_training(console, result.stack_plan)  # a training stack: step time, MFU, checkpoints, lost-slice cost
    from .plan_disagg import comparison_lines

    # P/D: the KV hand-off, aggregated vs disaggregated (computed once, for the plan document).
    for line in comparison_lines(data["disaggregation"]):
        console.print(escape(line))
    tiers = data["capacity_tiers"]
    if len(tiers["tiers"]) > 1:  # $/h per capacity tier, first preferred (components/tools/report.py tier_costs)
        print_tiers(console, tiers, _money)
    from .preflight import checklist

    for line in checklist(cfg).lines():  # what must exist in the project for `pulumi up`, per pool
        console.print(escape(line))
    console.print(f"{len(result.resources)} resources, {len(result.manifests)} Kubernetes objects")
    from .endpoints import endpoints
    from .plan_front_door import front_door_lines

    for line in front_door_lines(result):  # the gateway, its pool and the endpoint picker's scorers
        console.print(escape(line))
    from .plan_operations import operations_lines

    for line in operations_lines(data["operations"]):  # cold start where a tier or replicas reach zero; dashboard, alerts
        console.print(escape(line))
    for endpoint in endpoints(result.manifests):
        style = "bold yellow" if endpoint.outside_vpc else "dim"
        prefix = "warning: " if endpoint.outside_vpc else "endpoint: "
        console.print(f"[{style}]{prefix}{escape(endpoint.describe())}[/]")
    # What the stack cannot create yet, and why (maxtext-ray: Ray objects wait for the image's digest).
    for key, value in data["outputs"].items():
        if key.endswith("_waits_for"):
            console.print(f"[bold yellow]waiting: {escape(str(value))}[/]")


TIER_LABELS = {
    "onDemand": "on-demand",
    "spot": "spot",
    "reservation": "reservation",
    "flexStart": "flex-start",
    "queuedProvisioning": "queued provisioning",
}
"""How a ``tpu.capacity[].type`` reads in a price's label."""


def _money(v: float | None) -> str:
    return "n/a" if v is None else f"${v:,.2f}/h"


def _nodes(nodes: int, chips: int) -> str:
    return f"{nodes} node{'' if nodes == 1 else 's'}, {chips} chips"


def cost_line(cost: dict[str, Any]) -> str:
    """The TPU $/h of ``report.cost_per_hour``: the preferred tier's as deployed (every pool at its
    minimum) and, where autoscaling makes it differ, at its maximum, and per node; other tiers are in
    the tier table."""
    tiers = len(cost["by_capacity"]) > 1
    pools, their = ("the pools", "their") if cost["pools"] > 1 else ("the pool", "its")
    # Every $/h says which node count it is for: as deployed (the minimum the pools start at), maximum.
    if cost["nodes_min"] != cost["nodes"]:
        sizes = (
            f"{_money(cost['billed_at_min_nodes'])} as deployed, {pools} at {their} minimum "
            f"({_nodes(cost['nodes_min'], cost['chips_min'])}), up to {_money(cost['billed'])} at {their} maximum "
            f"({_nodes(cost['nodes'], cost['chips'])})"
        )
    else:
        sizes = f"{_money(cost['billed'])} as deployed, {pools} at {their} fixed size ({_nodes(cost['nodes'], cost['chips'])})"
    return (
        f"Cost (TPU chips only, {cost['region']}), {TIER_LABELS.get(cost['capacity'], cost['capacity'])}"
        f"{' (the preferred tier; each tier below)' if tiers else ''}: {sizes}; {_money(cost['per_node'])} per node "
        f"({cost['machine_type']})" + ("" if tiers else f" — {cost['basis']}")  # a tier table lists each source
    )


def print_tiers(console: Any, tiers: dict[str, Any], money: Any) -> None:
    """The capacity tiers as a table (first preferred), each price's source once below it."""
    from rich.markup import escape
    from rich.table import Table

    sources: list[str] = []
    table = Table(title="Capacity tiers (first preferred; later tiers scale from zero)")
    for column in ("tier", "type", "pools", "chips", "$/h when full", "source"):
        table.add_column(column, justify="right" if column in ("chips", "$/h when full") else "left")
    for tier in tiers["tiers"]:
        if tier["basis"] not in sources:
            sources.append(tier["basis"])
        low, high = tier["chips_min"], tier["chips_max"]
        table.add_row(
            str(tier["tier"]),
            tier["type"],
            ", ".join(tier["pools"]),
            f"{low}-{high}" if low != high else str(high),
            money(tier["usd_per_hour_max"]),
            f"[{sources.index(tier['basis']) + 1}]",
        )
    console.print(table)
    console.print(
        f"Maximum if every tier fills ({tiers['chips_if_every_tier_fills']} chips): "
        f"{money(tiers['usd_per_hour_if_every_tier_fills'])}"
    )
    for number, basis in enumerate(sources, 1):
        console.print(escape(f"  [{number}] {basis}"), style="dim")


def print_capacity(console: Any, capacity: dict[str, Any]) -> None:
    """Per-chip memory of the verified (or planner-selected) slice."""
    from rich.table import Table

    mem = capacity["memory"]
    cheapest = "lowest $ per million output tokens that meets the targets" if "serving" in capacity else "cheapest that fits"
    how = f"selected by the planner ({cheapest})" if capacity["selected_by_planner"] else "verified"
    s = capacity["slice"]
    console.print(f"Capacity: {capacity['model']} on {s['key']} ({s['chips']} chips), {how}")
    table = Table(title="Memory per chip")
    table.add_column("item")
    table.add_column("GB", justify="right")
    rows = [
        ("weights", mem["weights_bytes"]),
        ("KV cache", mem["kv_cache_bytes"]),
        ("gradients + optimizer", mem["optimizer_bytes"]),
        ("activations", mem["activation_bytes"]),
        ("reserve", mem["reserve_bytes"]),
        ("total", mem["total_bytes"]),
        ("HBM", mem["hbm_bytes"]),
        ("free (margin)", mem["margin_bytes"]),
    ]
    for name, value in rows:
        if value or name in ("weights", "total", "HBM", "free (margin)"):
            table.add_row(name, f"{value / 1e9:.2f}")
    console.print(table)
    flags = " ".join(f"{k}={json.dumps(v)}" for k, v in capacity["sharding"]["flags"].items())
    console.print(f"Parallelism (derived): {flags}; margin {mem['margin_percent']}% of HBM")
    if "alternatives" in capacity:  # only where the planner chose: pinned stacks print what they did
        print_alternatives(console, capacity["alternatives"], capacity["rejected"], capacity["capacity_type"])
    if "serving" in capacity:  # only stacks with workload.serving
        print_serving(console, capacity["serving"])


def _usd(v: float | None, unit: str) -> str:
    return "n/a" if v is None else f"${v:,.2f}{unit}"


def print_serving(
    console: Any, estimates: list[dict[str, Any]], title: str | None = None, marks: dict[str, str] | None = None
) -> None:
    """Predicted serving performance per slice (components/planner/perf.py), the first row the chosen
    or pinned slice, the others the runners-up; ``marks`` (``estimate``) labels rows by slice key
    instead ("best", "this stack")."""
    from rich.table import Table

    if marks is None:
        marks = {estimates[0]["slice"]: "chosen"} if title is None else {}

    first = estimates[0]
    table = Table(
        title=title
        or f"Predicted serving ({first['input_tokens']} in / {first['output_tokens']} out, concurrency "
        f"{first['requested_concurrency']}; one replica)"
    )
    # One $ per million output tokens column per capacity tier of the stack, preferred first.
    tiers = [TIER_LABELS.get(p["capacity"], p["capacity"]) for p in first["prices"]]
    columns = ("", "slice", "hosts", "seqs (max)", "output tok/s", "TTFT ms", "TPOT ms", f"$/h per replica ({tiers[0]})")
    for col in (*columns, *(f"$/M out ({t})" for t in tiers)):
        table.add_column(col)
    table.add_column("targets")
    for e in estimates:
        label = marks.get(e["slice"], "")
        if e["refused_by_config"]:
            label = ", ".join(x for x in (label, "refused by config") if x)
        table.add_row(
            label,
            e["slice"],
            str(e["hosts"]),
            f"{e['concurrency']} ({e['max_concurrent_sequences']})",
            # Rounded once, here: the JSON carries the model's unrounded values.
            f"{e['output_tokens_per_s']:,.0f}",
            f"{e['ttft_ms']:,.0f}",
            f"{e['tpot_ms']:.1f}",
            _usd(e["usd_per_hour"], ""),
            *(_usd(p["usd_per_million_output_tokens"], "") for p in e["prices"]),
            "met" if e["meets_targets"] else "missed",
        )
    console.print(table)
    console.print(f"note: sequences in flight on {first['slice']} bounded by {first['binding_limit']}")
    # Every distinct basis (a list can mix calibrated and uncalibrated generations), said once each.
    for basis in dict.fromkeys(e["calibration"] for e in estimates):
        console.print(f"note: prediction {basis}")
    for line in serving_notes(estimates):
        console.print(f"note: {line}")


def serving_notes(estimates: list[dict[str, Any]]) -> list[str]:
    """What bounds the predictions (components/planner/perf.py), one line per distinct fact: the
    engine's batch limit capping the requested concurrency (the server is configured that way),
    vLLM's per-step token budget queueing prefill, two slices per disaggregated replica, and the
    slices the stack's own rules refuse."""
    notes: dict[str, None] = {}
    capped = [e for e in estimates if e["concurrency_limited_by"] == "batch_limit"]
    for source in dict.fromkeys(e["batch_limit_source"] for e in capped):
        where = ", ".join(f"{e['slice']} {e['batch_limit']}" for e in capped if e["batch_limit_source"] == source)
        notes[
            f"the requested concurrency exceeds the server's batch limit, {source}: {where} in flight, as the "
            "stack configures the server"
        ] = None
    budget = [e["slice"] for e in estimates if e["step_token_budget_binds"]]
    if budget:
        notes[
            f"{', '.join(budget)}: the scenario needs more tokens per step than --max-num-batched-tokens "
            f"{estimates[0]['step_token_budget']} admits; prompts queue for prefill (TTFT includes it)"
        ] = None
    if any(e["slices_per_replica"] > 1 for e in estimates):
        notes["one replica is a prefill slice plus a decode slice: $ per token uses the price of both"] = None
    refused = [e for e in estimates if e["refused_by_config"]]
    if refused:
        notes[
            f"'refused by config': slices the stack's own rules refuse, estimated as a what-if (each reason: --json "
            f"refused_by_config), e.g. {refused[0]['slice']}: {refused[0]['refused_by_config']}"
        ] = None
    return list(notes)


def tpu_pods(manifests: list[dict[str, Any]]) -> list[str]:
    """One line per workload object whose pods request TPU chips: the derived group size (pods that
    form one slice's process group) and ``google.com/tpu`` per pod, as rendered."""
    from ..catalog.tpu import TPU_RESOURCE
    from ..crds.releases import group_size
    from ..render.core import get_path, pod_template_paths

    lines = []
    for obj in manifests:
        per_pod = sorted(
            {
                int(container.get("resources", {}).get("limits", {}).get(TPU_RESOURCE, 0))
                for path in pod_template_paths(obj)
                for container in get_path(obj, path).get("spec", {}).get("containers", [])
            }
            - {0}
        )
        if not per_pod:
            continue
        spec = obj.get("spec", {})
        group = group_size(obj)
        replicas = spec.get("replicas")
        sizes = (f"group size {group}, " if group else "") + (f"replicas {replicas}, " if replicas is not None else "")
        chips = "/".join(str(n) for n in per_pod)
        lines.append(f"{obj['kind']} {obj['metadata']['name']}: {sizes}{TPU_RESOURCE} {chips} per TPU pod")
    return lines


def print_alternatives(console: Any, alternatives: list[dict[str, Any]], rejected: list[str], capacity: str) -> None:
    """The fitting slices the planner weighed, best first, the chosen one marked, so a reviewer
    sees what the choice was made against; $/h is one whole slice's at the preferred tier (``capacity``)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Slices the planner weighed (cheapest first; unpriced last)")
    price = f"$/h per slice ({TIER_LABELS.get(capacity, capacity)})"
    for col in ("", "generation", "slice", "hosts", "chips", price, "HBM margin"):
        table.add_column(col)
    for a in alternatives:
        price = "unpriced" if a["price_per_hour"] is None else f"${a['price_per_hour']:,.2f}"
        table.add_row(
            "chosen" if a["chosen"] else "",
            a["generation"],
            f"{a['topology']} ({a['machine_type']})",
            str(a["hosts"]),
            str(a["chips"]),
            price,
            f"{a['margin_bytes'] / 1e9:.2f} GB ({a['margin_percent']}%)",
        )
    console.print(table)
    # Slices the config's own rules refuse are grouped by reason and few: they say why a generation is
    # absent from the table (e.g. its GKE floor). The planner's per-slice misfits only counted.
    for reason in (r for r in rejected if "rejected by the config" in r):
        console.print(f"not weighed: {escape(reason)}")
    misfits = sum("rejected by the config" not in r for r in rejected)
    if misfits:
        console.print(f"{misfits} other candidate slice(s) do not fit (plan --json: capacity.rejected)")
