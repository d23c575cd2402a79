"""Offline engine: run the real Pulumi program (root ``__main__.py``) under Pulumi's mock engine.

No cloud credentials, no Pulumi CLI: the stack file is read, its config handed to the runtime, and
every resource registration is recorded as the engine would receive it (type, name, parent,
dependencies, options, inputs in wire names). Mocks return realistic computed outputs (cluster
endpoint, service-account email, bucket URL) so dependent values resolve.

Conventions of the recording:
* Numbers arrive as floats on the wire; integral floats are turned back into ints.
* Secret values are replaced by ``SECRET_PLACEHOLDER``; they never reach plans or manifests.
* Kubernetes resources are rebuilt into manifests (``apiVersion``, ``kind``, ``metadata``, ...).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import re
import runpy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components import stackfile
from components.capacity import StackPlan, resolve
from components.catalog import tpu as tpu_catalog
from components.config import NAMESPACE, StackConfig, parse_full_config, required_secrets
from components.endpoints import endpoints

ROOT = Path(__file__).resolve().parent.parent
STACKS_DIR = ROOT / "stacks"
MANIFESTS_DIR = ROOT / "manifests"
PROGRAM = ROOT / "__main__.py"
PROJECT = "gke-tpu-llm"

SECRET_PLACEHOLDER = "[secret]"
UNKNOWN_PLACEHOLDER = "[unknown]"
MOCK_PROJECT_NUMBER = "123456789012"

# Wire-format sentinels of the Pulumi RPC protocol.
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


# ---------------------------------------------------------------- stack files


@dataclass(frozen=True)
class StackFile:
    stack: str
    path: Path
    values: dict[str, Any]
    """Full keys (``gke-tpu-llm:tpu``, ``gcp:project``) to decoded values; secrets as placeholders."""
    secret_keys: tuple[str, ...]
    placeholders: tuple[str, ...] = ()
    """Required secrets the file does not hold, filled with placeholders for the offline preview."""


def stack_path(stack: str) -> Path:
    return STACKS_DIR / f"Pulumi.{stack}.yaml"


def list_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def read_stack_file(path: Path, stack: str | None = None, *, fill_secrets: bool = True) -> StackFile:
    """Read ``Pulumi.<stack>.yaml``. Encrypted values (``secure:``) cannot be decrypted offline and
    become placeholders marked secret, exactly as the program would see an unknown secret.

    A committed stack file cannot hold a user's token, so with ``fill_secrets`` the secrets the
    workload requires but the file lacks are filled with placeholders too (and listed in
    ``placeholders``); ``pulumi up`` has no such fallback and stops with a config error."""
    raw = stackfile.config_section(stackfile.load(path))  # ConfigError for anything that is not a stack file
    values: dict[str, Any] = {}
    secrets: list[str] = []
    for key, value in raw.items():
        if isinstance(value, Mapping) and set(value) == {"secure"}:
            values[key] = SECRET_PLACEHOLDER
            secrets.append(key)
        else:
            values[key] = value
    placeholders: list[str] = []
    if fill_secrets:
        for key in required_secrets(values.get(f"{NAMESPACE}:workload")):
            full = f"{NAMESPACE}:{key}"
            if full not in values:
                values[full] = SECRET_PLACEHOLDER
                secrets.append(full)
                placeholders.append(full)
    name = stack or (path.name[len("Pulumi.") : -len(".yaml")] if path.name.startswith("Pulumi.") else path.stem)
    return StackFile(stack=name, path=path, values=values, secret_keys=tuple(secrets), placeholders=tuple(placeholders))


def config_of(stack_file: StackFile) -> StackPlan:
    """Validate a stack file and resolve its capacity without running anything (raises ConfigError).

    Every key is seen, as under ``pulumi up``: one under a namespace the program does not read is a
    problem, not silently dropped."""
    return resolve(parse_full_config(stack_file.values, stack_file.stack, stack_file.secret_keys))


# ---------------------------------------------------------------- recording


def _clean(value: Any) -> Any:
    """Wire value -> plain JSON: floats that are integers become ints, secrets and unknowns masked."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SECRET_SIG:
            return SECRET_PLACEHOLDER
        if sig == _RESOURCE_SIG:
            return value.get("urn")
        return {k: _clean(v) for k, v in value.items()}
    if value == _UNKNOWN:
        return UNKNOWN_PLACEHOLDER
    return value


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    dependencies: list[str]
    provider: str | None
    options: dict[str, Any]
    inputs: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "custom": self.custom,
            "dependencies": self.dependencies,
            "provider": self.provider,
            "options": self.options,
            "inputs": self.inputs,
        }


def _mock_outputs(typ: str, name: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
    """Computed outputs a real provider would return, so Outputs that depend on them resolve."""
    out = dict(inputs)
    if typ == "gcp:container/cluster:Cluster":
        out.setdefault("endpoint", "203.0.113.10")  # TEST-NET-3: clearly not a real address
        out.setdefault("masterAuth", {"clusterCaCertificate": "TU9DSy1DQQ=="})
    elif typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs['accountId']}@{inputs.get('project', project)}.iam.gserviceaccount.com"
        out.update(email=email, name=f"projects/{inputs.get('project', project)}/serviceAccounts/{email}")
    elif typ == "gcp:storage/bucket:Bucket":
        out.setdefault("url", f"gs://{inputs['name']}")
    return out


def _make_mocks(project: str) -> Any:
    import pulumi

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
            return f"{args.name}-id", _mock_outputs(args.typ, args.name, dict(args.inputs), project)

        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
            if args.token == "gcp:organizations/getProject:getProject":
                return {"number": MOCK_PROJECT_NUMBER, "projectId": args.args.get("projectId", project)}, []
            raise NotImplementedError(f"offline engine has no mock for {args.token}")

    return Mocks()


def _make_monitor(mocks: Any, records: list[Registration]) -> Any:
    from google.protobuf import json_format
    from pulumi.runtime.mocks import MockMonitor

    class RecordingMonitor(MockMonitor):
        def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
            response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
            if request.type != "pulumi:pulumi:Stack":
                raw = json_format.MessageToDict(request.object, preserving_proto_field_name=True)
                options = {
                    "protect": bool(request.protect) if request.HasField("protect") else False,
                    "retainOnDelete": bool(request.retainOnDelete) if request.HasField("retainOnDelete") else False,
                    "deleteBeforeReplace": bool(request.deleteBeforeReplace),
                    "ignoreChanges": list(request.ignoreChanges),
                    "replaceOnChanges": list(request.replaceOnChanges),
                    "additionalSecretOutputs": list(request.additionalSecretOutputs),
                    # Earlier URNs of this resource: the engine moves their state here instead of
                    # creating a new resource and deleting the old one.
                    "aliases": sorted(
                        {a.urn for a in request.aliases if a.urn} | set(getattr(request, "aliasURNs", []))
                    ),
                }
                records.append(
                    Registration(
                        urn=response.urn,
                        type=request.type,
                        name=request.name,
                        parent=request.parent,
                        custom=bool(request.custom),
                        dependencies=sorted(set(request.dependencies)),
                        provider=request.provider.split("::")[-2] if request.provider else None,
                        options=options,
                        inputs=_clean(raw),
                    )
                )
            return response

    return RecordingMonitor(mocks)


@dataclass
class PlanResult:
    stack: str
    stack_plan: StackPlan
    resources: list[Registration]
    outputs: dict[str, Any]
    log: str = ""
    manifests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def config(self) -> StackConfig:
        return self.stack_plan.config


def record(
    func: Callable[[], Any],
    *,
    stack: str,
    project: str,
    config: Mapping[str, Any] | None = None,
    secret_keys: Sequence[str] = (),
) -> tuple[list[Registration], dict[str, Any]]:
    """Run ``func`` (a Pulumi program) under mocks; return the registrations and the stack outputs.

    ``config`` maps full keys (``gke-tpu-llm:tpu``) to values; structured values are passed as JSON
    text, as the Pulumi CLI does. Exceptions from the program (e.g. ``pulumi.RunError`` for a bad
    config) propagate after the runtime has drained, so callers can check nothing was registered.
    """
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    records: list[Registration] = []
    wire = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (config or {}).items()}
    runtime_config.set_all_config(wire, list(secret_keys))
    settings.reset_options()
    mocks = _make_mocks(project)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=_make_monitor(mocks, records))
    _sync_await(run_pulumi_func(func))
    root = settings.get_root_resource()
    outputs: dict[str, Any] = {}
    for key, value in getattr(root, "outputs", {}).items():
        out = pulumi.Output.from_input(value)
        resolved = _sync_await(out.future())
        outputs[key] = SECRET_PLACEHOLDER if _sync_await(out.is_secret()) else _clean(resolved)
    _engine_urns(records)
    records.sort(key=lambda r: r.urn)
    return records, outputs


def _engine_urns(records: list[Registration]) -> None:
    """Give each record the URN the real engine would (the full parent type chain, no stack type),
    so plans compare with aliases and with ``pulumi stack export`` (see ``steps.canonical_urns``)."""
    from components.steps import canonical_urns

    urns = canonical_urns([{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent} for r in records])
    for r in records:
        r.urn = urns[r.urn]
        r.parent = urns.get(r.parent, r.parent)
        r.dependencies = sorted({urns.get(d, d) for d in r.dependencies})


@atexit.register
def _release_worker_loops() -> None:
    """At exit, close the idle event loops the mock monitor made in its RPC worker threads, while
    their file descriptors are still valid; otherwise interpreter shutdown may print a spurious
    'Exception ignored ... Invalid file descriptor' from a loop's finaliser. (Not after each run:
    the worker threads and their loops are reused by the next run in the same process.)"""
    import asyncio
    import gc

    loop = asyncio.get_event_loop()
    for obj in gc.get_objects():
        if isinstance(obj, asyncio.AbstractEventLoop) and obj is not loop and not obj.is_running() and not obj.is_closed():
            obj.close()


def run_program(stack_file: StackFile, program: Path = PROGRAM) -> tuple[list[Registration], dict[str, Any]]:
    """Run the root ``__main__.py`` with the stack file's config."""
    return record(
        lambda: runpy.run_path(str(program), run_name="__main__"),
        stack=stack_file.stack,
        project=str(stack_file.values.get("gcp:project", "project")),
        config=stack_file.values,
        secret_keys=stack_file.secret_keys,
    )


# ---------------------------------------------------------------- manifests and plan


_KIND_ORDER = ("Namespace", "ServiceAccount", "Secret", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "RoleBinding")


def manifests_of(resources: list[Registration]) -> list[dict[str, Any]]:
    """Kubernetes objects as registered (provider resources excluded), in apply-friendly order."""
    objs: list[dict[str, Any]] = []
    for res in resources:
        if not res.type.startswith("kubernetes:") or res.type.startswith("pulumi:providers:") or not res.custom:
            continue
        if res.type.startswith("kubernetes:helm.sh/"):
            continue  # a Helm release (controller install) is not an object manifest
        inputs = dict(res.inputs)
        if inputs.get("kind") == "CustomResourceDefinition":
            continue  # vendored upstream CRDs (components/crds): huge data; the plan's resources show changes
        obj = {"apiVersion": inputs.pop("apiVersion"), "kind": inputs.pop("kind")}
        obj.update(inputs)
        objs.append(obj)

    def order(obj: dict[str, Any]) -> tuple[int, str, str]:
        kind = obj["kind"]
        rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
        meta = obj.get("metadata", {})
        return rank, kind, f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    return sorted(objs, key=order)


def slice_plan(config: StackConfig) -> list[dict[str, Any]]:
    tpu = config.tpu
    s = tpu.slice
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
            "nodes_min": tpu.nodes_min,
            "nodes_max": tpu.nodes_max,
            "hbm_gb": s.hbm_bytes / 1e9,
            "zone": tpu.zone,
            "spot": tpu.spot,
            "node_selector": s.node_selector,
        }
        for pool in config.pool_names()
    ]


def cost_per_hour(config: StackConfig) -> dict[str, Any]:
    """TPU cost per hour at the pools' maximum size (the worst case a reviewer pays for).

    Only TPU chips are priced: they dominate the bill (a v6e 4x4 is ~$43/h) and are the figures the
    catalog sources; the system pool, control-plane fee, load balancers and storage are not included.
    """
    tpu = config.tpu
    s = tpu.slice
    price = s.price(config.region)
    chips_max = tpu.nodes_max * s.chips_per_host * tpu.slices
    chips_min = tpu.nodes_min * s.chips_per_host * tpu.slices

    def total(p: float | None, chips: int) -> float | None:
        return None if p is None else round(p * chips, 4)

    on_demand = total(price.on_demand if price else None, chips_max)
    spot = total(price.spot if price else None, chips_max)
    return {
        "on_demand": on_demand,
        "spot": spot,
        "billed": spot if tpu.spot else on_demand,
        "billed_at_min_nodes": total((price.spot if tpu.spot else price.on_demand) if price else None, chips_min),
        "chips": chips_max,
        "region": config.region,
        "basis": f"TPU chips only; {tpu_catalog.PRICE_SOURCE}; as of {tpu_catalog.PRICE_AS_OF}",
    }


def plan(stack_file: StackFile) -> PlanResult:
    """Validate, then run the program offline. Raises ConfigError before running on a bad config."""
    stack_plan = config_of(stack_file)
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        resources, outputs = run_program(stack_file)
    return PlanResult(
        stack=stack_file.stack,
        stack_plan=stack_plan,
        resources=resources,
        outputs=outputs,
        log=log.getvalue(),
        manifests=manifests_of(resources),
    )


def plan_json(result: PlanResult) -> dict[str, Any]:
    cfg = result.config
    return {
        "stack": result.stack,
        "environment": cfg.environment.value,
        "project": cfg.project,
        "region": cfg.region,
        "cluster": {"name": cfg.cluster_name, "location": cfg.cluster_location, "addons": sorted(cfg.addons)},
        "slices": slice_plan(cfg),
        "cost_usd_per_hour": cost_per_hour(cfg),
        "capacity": result.stack_plan.to_dict(),
        "resources": [r.to_dict() for r in result.resources],
        "manifests": result.manifests,
        "endpoints": [e.to_dict() for e in endpoints(result.manifests)],
        "outputs": result.outputs,
    }


def manifest_files(manifests: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(file name, YAML text) per object; names are deterministic so diffs are per object."""
    for i, obj in enumerate(manifests):
        meta = obj.get("metadata", {})
        ns = meta.get("namespace")
        # File names stay portable: ':' (as in RBAC names like system:auth-delegator) becomes '-'.
        stem = re.sub(r"[^A-Za-z0-9._-]", "-", f"{(ns + '-') if ns else ''}{meta.get('name', 'unnamed')}")
        base = f"{i:02d}-{obj['kind'].lower()}-{stem}.yaml"
        yield base, yaml.safe_dump(obj, sort_keys=True, default_flow_style=False)


def write_manifests(stack: str, manifests: list[dict[str, Any]], out_dir: Path | None = None) -> list[Path]:
    target = out_dir or (MANIFESTS_DIR / stack)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, text in manifest_files(manifests):
        path = target / name
        path.write_text(text)
        written.append(path)
    for stale in set(target.glob("*.yaml")) - set(written):
        stale.unlink()
    return written
