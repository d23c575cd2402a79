"""Offline CLI: ``python -m components plan|render|review|teardown|estimate|preflight|roles|docs`` (see
components/README-offline.md; ``preflight`` is the one command that calls Google Cloud).

Runs the real Pulumi program under the mock engine (``components.tools.report`` plans a stack read by
``components.config.stack_files`` and run by ``components.tools.mockengine``). A bad config exits 2 with the full
report on stderr; nothing is registered.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.workload import MAX_CONCURRENCY, MAX_TARGET_LENGTH
from components.tools import manifests, report
from components.tools.mockengine import Registration

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
    cost = data["cost_usd_per_hour"]

    def money(v: float | None) -> str:
        return "n/a" if v is None else f"${v:,.2f}/h"

    console.print(
        f"Cost ({cost['chips']} chips, {cost['region']}): on-demand {money(cost['on_demand'])}, "
        f"spot {money(cost['spot'])}; billed {money(cost['billed'])} — {cost['basis']}"
    )
    tiers = data["capacity_tiers"]
    if len(tiers["tiers"]) > 1:  # $/h per capacity tier, first preferred (components/tools/report.py tier_costs)
        print_tiers(console, tiers, money)
    from components.tools.preflight import checklist

    for line in checklist(cfg).lines():  # what must exist in the project for `pulumi up`, per pool
        console.print(escape(line))
    console.print(f"{len(result.resources)} resources, {len(result.manifests)} Kubernetes objects")
    from components.tools.endpoints import endpoints

    for endpoint in endpoints(result.manifests):
        style = "bold yellow" if endpoint.outside_vpc else "dim"
        prefix = "warning: " if endpoint.outside_vpc else "endpoint: "
        console.print(f"[{style}]{prefix}{escape(endpoint.describe())}[/]")
    # What the stack cannot create yet, and why (maxtext-ray: Ray objects wait for the image's digest).
    for key, value in data["outputs"].items():
        if key.endswith("_waits_for"):
            console.print(f"[bold yellow]waiting: {escape(str(value))}[/]")


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
        print_alternatives(console, capacity["alternatives"], capacity["rejected"])
    if "serving" in capacity:  # only stacks with workload.serving
        print_serving(console, capacity["serving"])


def _usd(v: float | None, unit: str) -> str:
    return "n/a" if v is None else f"${v:,.2f}{unit}"


def print_serving(console: Any, estimates: list[dict[str, Any]], title: str | None = None) -> None:
    """Predicted serving performance per slice (components/planner/perf.py), the first row the chosen
    or pinned slice, the others the runners-up."""
    from rich.table import Table

    first = estimates[0]
    table = Table(
        title=title
        or f"Predicted serving ({first['input_tokens']} in / {first['output_tokens']} out, concurrency "
        f"{first['requested_concurrency']}; one replica)"
    )
    for col in ("", "slice", "hosts", "seqs (max)", "output tok/s", "TTFT ms", "TPOT ms", "$/M out (on-demand)",
                "spot", "flex-start", "targets"):
        table.add_column(col)
    for i, e in enumerate(estimates):
        table.add_row(
            "chosen" if i == 0 and title is None else "refused by config" if e["refused_by_config"] else "",
            e["slice"],
            str(e["hosts"]),
            f"{e['concurrency']} ({e['max_concurrent_sequences']})",
            f"{e['output_tokens_per_s']:,.0f}",
            f"{e['ttft_ms']:,.0f}",
            f"{e['tpot_ms']:.1f}",
            _usd(e["usd_per_million_output_tokens"], ""),
            _usd(e["usd_per_million_output_tokens_spot"], ""),
            _usd(e["usd_per_million_output_tokens_flex_start"], ""),
            "met" if e["meets_targets"] else "missed",
        )
    console.print(table)
    if not first["calibrated"]:
        console.print("note: this engine's efficiency factors are vLLM's (no published result of its own to calibrate on)")
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
    from components.catalog.tpu import TPU_RESOURCE
    from components.crds.releases import group_size
    from components.render.core import get_path, pod_template_paths

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


def print_alternatives(console: Any, alternatives: list[dict[str, Any]], rejected: list[str]) -> None:
    """The fitting slices the planner weighed, best first, the chosen one marked, so a reviewer
    sees what the choice was made against."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Slices the planner weighed (cheapest first; unpriced last)")
    for col in ("", "generation", "slice", "hosts", "chips", "$/h", "HBM margin"):
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


def _read_stack_file(path: Path) -> stacks.StackFile:
    """The stack file at ``path``; a file that is not one (missing, binary, malformed YAML, wrong
    shape) exits 2 with the report, like any other config problem."""
    try:
        return stacks.read_stack_file(path)
    except ConfigError as error:
        print(f"{path}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _stack_file(args: argparse.Namespace) -> stacks.StackFile:
    if args.config and args.stack:
        # Which one would run is not obvious to the reader of the command: refuse rather than pick.
        print(f"give a STACK name or --config FILE, not both (got {args.stack!r} and --config {args.config})", file=sys.stderr)
        raise SystemExit(2)
    if args.config:
        return _read_stack_file(Path(args.config))
    if not args.stack:
        print("give a STACK name or --config FILE", file=sys.stderr)
        raise SystemExit(2)
    path = stacks.stack_path(args.stack)
    if not path.is_file():
        print(f"no stack file {path}; stacks: {', '.join(stacks.list_stacks())}", file=sys.stderr)
        raise SystemExit(2)
    return _read_stack_file(path)


def _bounded_int(flag: str, most: int) -> Any:
    """argparse type: an integer in 1..``most`` (argparse exits 2 with the message otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes a whole number, not {text!r}") from None
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"{flag} {value} is outside 1..{most}")
        return value

    return parse


def _estimate(args: argparse.Namespace) -> int:
    """``estimate``: the stack's serving scenario (flags override ``workload.serving``) on every
    slice it could use, best first (lowest $ per million output tokens that meets the targets)."""
    from components import planner
    from components.config import resolve as capacity
    from components.config.workload import serving_scenario

    stack_file = _stack_file(args)
    try:
        config = stacks.config_of(stack_file).config
    except ConfigError as error:
        print(f"{stack_file.path}: {error}", file=sys.stderr)
        return 2
    if config.kind_info.mode != "serve":
        print(f"estimate: {config.workload.kind} trains; estimate needs a serving kind (vllm, jetstream, saxml)", file=sys.stderr)
        return 2
    spec = serving_scenario(config)
    given: dict[str, int | None] = {
        "--input-tokens": args.input_tokens if args.input_tokens is not None else spec.input_tokens if spec else None,
        "--output-tokens": args.output_tokens if args.output_tokens is not None else spec.output_tokens if spec else None,
        "--concurrency": args.concurrency if args.concurrency is not None else spec.concurrency if spec else None,
    }
    missing = [flag for flag, value in given.items() if value is None]
    if missing:
        print(f"estimate: give {', '.join(missing)} (the stack sets no gke-tpu-llm:workload.serving)", file=sys.stderr)
        return 2
    input_tokens, output_tokens, concurrency = (int(v or 0) for v in given.values())
    if input_tokens + output_tokens > config.workload.max_target_length:
        print(
            f"estimate: --input-tokens {input_tokens} + --output-tokens {output_tokens} exceeds the stack's "
            f"workload.maxTargetLength ({config.workload.max_target_length}); shorten the scenario or raise maxTargetLength",
            file=sys.stderr,
        )
        return 2
    scenario = planner.Scenario(
        input_tokens, output_tokens, concurrency, spec.ttft_ms if spec else None, spec.tpot_ms if spec else None
    )
    try:
        estimates, rejected = capacity.estimate_slices(config, scenario)
    except ConfigError as error:
        print(f"{stack_file.path}: {error}", file=sys.stderr)
        return 2
    rows = [e.to_dict() for e in estimates]
    if args.json:
        out = {
            "stack": stack_file.stack,
            "model": config.workload.model,
            "kind": config.workload.kind,
            "region": config.region,
            "scenario": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "concurrency": concurrency,
                "ttft_ms": scenario.ttft_ms,
                "tpot_ms": scenario.tpot_ms,
            },
            "slices": rows,
            "rejected": list(rejected),
        }
        print(json.dumps(out, separators=(",", ":")))
        return 0
    from rich.console import Console

    console = Console(width=200)
    if not rows:
        console.print(f"no slice holds one sequence of {input_tokens + output_tokens} tokens: " + "; ".join(rejected))
        return 0
    print_serving(
        console,
        rows,
        title=f"{config.workload.model} ({config.workload.kind}), {input_tokens} in / {output_tokens} out, concurrency "
        f"{concurrency}, {config.region}: best $ per million output tokens first",
    )
    return 0


def _json_document(path: str) -> dict[str, Any]:
    """A JSON object from ``path``; anything else is a ``DocumentError`` naming the file."""
    from components.tools.review import DocumentError

    try:
        document = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DocumentError(f"{path}: cannot read a JSON document ({error})") from None
    if not isinstance(document, dict):
        raise DocumentError(f"{path}: expected a JSON object (a plan or a `pulumi stack export`), got {type(document).__name__}")
    return document


def _review(base_path: str, head_path: str, stack: str | None) -> int:
    from components.tools.review import REFUSED_EXIT, DocumentError, compare, isolation_problems, load_side, render_comment

    try:
        base = load_side(_json_document(base_path), stack, path=base_path)
        head = load_side(_json_document(head_path), None, path=head_path)
        if stack is not None and stack not in head:
            raise DocumentError(f"{head_path}: has no plan of stack {stack!r} (it has: {', '.join(sorted(head)) or 'none'})")
        try:
            changes = compare(base, head)
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            # A hand-edited or foreign file that passed the shape check: say so, never a traceback.
            raise DocumentError(f"{base_path} / {head_path}: not plans this command understands ({error!r})") from None
    except DocumentError as error:
        print(f"review: {error}", file=sys.stderr)
        return 2
    print(render_comment(changes, head), end="")
    refused = [c.stack for c in changes if c.refused]
    shared = isolation_problems(head)
    if shared:
        print("refused: stacks not isolated from each other:\n" + "\n".join(f"  - {p}" for p in shared), file=sys.stderr)
        return REFUSED_EXIT
    if refused:
        print(f"refused: {', '.join(refused)} (see the comment for what must land first)", file=sys.stderr)
        return REFUSED_EXIT
    return 0


def _teardown_state(state_path: str, stack: str | None) -> int:
    from components.tools.review import DocumentError, load_side
    from components.tools.steps import from_state
    from components.tools.teardown import plan_teardown, render

    try:
        (export,) = load_side(_json_document(state_path), stack or "the stack", path=state_path, state_only=True).values()
        teardown = plan_teardown(from_state(export))
    except DocumentError as error:
        print(f"teardown: {error}", file=sys.stderr)
        return 2
    print(render(stack or "the stack", "from its state", teardown), end="")
    return 2 if teardown.blockers else 0


def _roles(args: argparse.Namespace) -> int:
    """``roles``: the deployer's minimal IAM permissions and predefined roles for one stack, derived
    from the resource types its plan registers (``components.tools.roles``)."""
    from components.tools.roles import RolesError, custom_role_yaml, deployer_roles, render

    stack_file = _stack_file(args)
    try:
        result = report.plan(stack_file)
    except ConfigError as error:
        print(f"{stack_file.path}: {error}", file=sys.stderr)
        return 2
    cfg = result.config
    try:
        roles = deployer_roles(
            result.stack, cfg.environment.value, cfg.project, [r.to_dict() for r in result.resources]
        )
    except RolesError as error:
        print(f"roles: {result.stack}: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(roles.to_dict(), separators=(",", ":")))
    elif args.format == "custom-role":
        print(custom_role_yaml(roles), end="")
    else:
        print(render(roles), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    commands = (
        ("plan", "show what the stack would create"),
        ("render", "write the Kubernetes manifests"),
        ("teardown", "what `pulumi destroy --exclude-protected` removes and retains (exit 2 while prod is protected)"),
    )

    def stack_command(name: str, help_text: str) -> argparse.ArgumentParser:
        """A subcommand of one stack: by name, or ``--config FILE``."""
        p = sub.add_parser(name, help=help_text)
        p.add_argument("stack", nargs="?", help="stack name (stacks/Pulumi.<stack>.yaml)")
        p.add_argument("--config", metavar="FILE", help="this stack file instead of a named stack")
        return p

    for name, help_text in commands:
        p = stack_command(name, help_text)
        p.add_argument("--all", action="store_true", help="every stack in stacks/")
        if name == "plan":
            p.add_argument("--json", action="store_true", help="print one JSON object (with --all: one per stack)")
        elif name == "render":
            p.add_argument("--out", metavar="DIR", help="output directory (default manifests/STACK/)")
        else:
            p.add_argument(
                "--state", metavar="FILE", help="list what a real stack still holds (`pulumi stack export` after the destroy)"
            )
    est = stack_command(
        "estimate",
        "predicted output tokens/s, TTFT, TPOT and $ per million output tokens of a serving scenario on every "
        "slice the stack could use (flags override workload.serving)",
    )
    est.add_argument("--input-tokens", type=_bounded_int("--input-tokens", MAX_TARGET_LENGTH), metavar="N")
    est.add_argument("--output-tokens", type=_bounded_int("--output-tokens", MAX_TARGET_LENGTH), metavar="N")
    est.add_argument("--concurrency", type=_bounded_int("--concurrency", MAX_CONCURRENCY), metavar="N")
    est.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("docs", help="regenerate the configuration reference, stacks/CONFIGURATION.md")
    check = stack_command(
        "preflight",
        "check the stack's TPU quota, reservations and zone in its project with your application-default "
        "credentials (exit 1 names each missing item, 3 when the check cannot run)",
    )
    check.add_argument("--json", action="store_true", help="print the results as one JSON object")
    roles = stack_command(
        "roles",
        "the deployer's minimal IAM permissions and predefined roles, derived from the resource types the stack registers",
    )
    roles_output = roles.add_mutually_exclusive_group()
    roles_output.add_argument("--json", action="store_true", help="print one JSON object")
    roles_output.add_argument(
        "--format",
        choices=("text", "custom-role"),
        default="text",
        help="custom-role: a YAML file for `gcloud iam roles create ROLE_ID --project PROJECT --file FILE`",
    )
    review = sub.add_parser(
        "review", help="what `pulumi up` will do, from two `plan --json` files (exit 2 when the engine would refuse it)"
    )
    review.add_argument("base", help="plans of the base commit (`plan --all --json`), or `pulumi stack export` of one stack")
    review.add_argument("head", help="plans of the head commit (`plan --all --json` or `plan STACK --json`)")
    review.add_argument("--stack", help="the stack a `pulumi stack export` base belongs to")
    args = parser.parse_args(argv)
    if args.command == "preflight":
        from components.tools.preflight_online import command

        return command(_stack_file(args), as_json=args.json)
    if args.command == "review":
        return _review(args.base, args.head, args.stack)
    if args.command == "estimate":
        return _estimate(args)
    if args.command == "roles":
        return _roles(args)
    if args.command == "teardown" and args.state:
        return _teardown_state(args.state, args.stack)
    if args.command == "docs":
        from components.tools.docs import write_reference

        print(f"wrote the configuration reference to {write_reference()}")
        return 0

    stack_files = (
        [_read_stack_file(stacks.stack_path(s)) for s in stacks.list_stacks()]
        if getattr(args, "all", False)
        else [_stack_file(args)]
    )
    all_plans: dict[str, Any] = {}
    status = 0
    for stack_file in stack_files:
        for key in stack_file.placeholders:
            print(
                f"note: {key} is not in {stack_file.path.name}; previewing with a placeholder "
                f"(pulumi up requires: pulumi config set --secret {key} <value>)",
                file=sys.stderr,
            )
        try:
            result = report.plan(stack_file)
        except ConfigError as error:
            print(f"{stack_file.path}: {error}", file=sys.stderr)
            if getattr(args, "all", False):
                status = 2  # every stack's problems in one run (two stacks sharing a name both say so)
                continue
            return 2
        if args.command == "teardown":
            from components.tools.teardown import plan_teardown_of, render

            teardown = plan_teardown_of(report.plan_json(result))
            print(render(result.stack, result.config.environment.value, teardown), end="")
            if teardown.blockers:
                status = 2  # every stack is still shown
        elif args.command == "plan":
            if args.json and args.all:
                all_plans[result.stack] = report.plan_json(result)
            elif args.json:
                # Compact: json's C encoder only runs without indent, and a 405B plan is ~2 MB
                # (pipe to `jq .` to read it).
                print(json.dumps(report.plan_json(result), separators=(",", ":")))
            else:
                print_plan(result)
        else:
            out = Path(args.out) if args.out and not args.all else None
            written = manifests.write_manifests(result.stack, result.manifests, out)
            where = out or manifests.MANIFESTS_DIR / result.stack
            print(f"{result.stack}: wrote {len(written)} manifest(s) to {where}")
    if all_plans:
        print(json.dumps(all_plans, separators=(",", ":")))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
