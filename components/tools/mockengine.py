"""Run a Pulumi program under Pulumi's mock engine and record every registration.

No cloud credentials, no Pulumi CLI: config is handed to the runtime, and every resource
registration is recorded as the engine would receive it (type, name, parent, dependencies,
options, inputs in wire names). Mocks return realistic computed outputs (cluster endpoint,
service-account email, bucket URL) so dependent values resolve. :func:`run_program` runs the root
``__main__.py`` with a stack file's config; :func:`record` runs any program function (the library
example and tests use it). The SDK internals this needs live in :mod:`components.program.pulumi_internals`.

Conventions of the recording:
* Numbers arrive as floats on the wire; integral floats are turned back into ints.
* Secret values are replaced by ``SECRET_PLACEHOLDER``; they never reach plans or manifests.
* URNs are the ones the real engine gives (see :func:`components.tools.plan_resources.canonical_urns`).
"""

from __future__ import annotations

import atexit
import functools
import json
import runpy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.stack_files import ROOT, SECRET_PLACEHOLDER, StackFile
from ..program import pulumi_internals

if TYPE_CHECKING:
    import pulumi

PROGRAM = ROOT / "__main__.py"
PROJECT = "gke-tpu-llm"

UNKNOWN_PLACEHOLDER = "[unknown]"
MOCK_PROJECT_NUMBER = "123456789012"


@dataclass
class Registration:
    """One registered resource, as the engine received it."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    dependencies: list[str]
    provider: str | None
    """Name of the explicit provider resource, or None for the default provider."""
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


def _clean(value: Any) -> Any:
    """Wire value -> plain JSON: floats that are integers become ints, secrets and unknowns masked."""
    wire = pulumi_internals.wire()

    def clean(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            sig = value.get(wire.sig_key)
            if sig == wire.secret_sig:
                return SECRET_PLACEHOLDER
            if sig == wire.resource_sig:
                return value.get("urn")
            return {k: clean(v) for k, v in value.items()}
        if value == wire.unknown:
            return UNKNOWN_PLACEHOLDER
        return value

    return clean(value)


def _registration(request: pulumi_internals.RegisterRequest, urn: str) -> Registration:
    options = {
        "protect": request.protect,
        "retainOnDelete": request.retain_on_delete,
        "deleteBeforeReplace": request.delete_before_replace,
        "ignoreChanges": list(request.ignore_changes),
        "replaceOnChanges": list(request.replace_on_changes),
        "additionalSecretOutputs": list(request.additional_secret_outputs),
        # Earlier URNs of this resource: the engine moves their state here instead of creating a
        # new resource and deleting the old one.
        "aliases": sorted(set(request.alias_urns)),
    }
    return Registration(
        urn=urn,
        type=request.type,
        name=request.name,
        parent=request.parent,
        custom=request.custom,
        dependencies=sorted(set(request.dependencies)),
        provider=request.provider.split("::")[-2] if request.provider else None,
        options=options,
        inputs=_clean(request.inputs),
    )


def _mock_outputs(typ: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
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


def _make_mocks(project: str) -> pulumi.runtime.Mocks:
    """Providers' answers: inputs echoed back with the computed outputs the program reads.
    (Defined here so that importing this module does not import ``pulumi``.)"""
    import pulumi

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
            return f"{args.name}-id", _mock_outputs(args.typ, dict(args.inputs), project)

        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
            if args.token == "gcp:organizations/getProject:getProject":
                return {"number": MOCK_PROJECT_NUMBER, "projectId": args.args.get("projectId", project)}, []
            raise NotImplementedError(f"offline engine has no mock for {args.token}")

    return Mocks()


def record(
    func: Callable[[], Any],
    *,
    stack: str,
    project: str,
    config: Mapping[str, Any] | None = None,
    secret_keys: Sequence[str] = (),
    records: list[Registration] | None = None,
) -> tuple[list[Registration], dict[str, Any]]:
    """Run ``func`` (a Pulumi program) under mocks; return the registrations and the stack outputs.

    ``config`` maps full keys (``gke-tpu-llm:tpu``) to values; structured values are passed as JSON
    text, as the Pulumi CLI does. Exceptions from the program (e.g. ``pulumi.RunError`` for a bad
    config) propagate after the runtime has drained; pass ``records`` (a list registrations are
    appended to as they happen) to see what was registered before the failure.
    """
    _release_worker_loops_at_exit()
    recorded: list[Registration] = [] if records is None else records
    wire = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (config or {}).items()}
    pulumi_internals.set_config(wire, list(secret_keys))
    pulumi_internals.reset_options()
    pulumi_internals.install_mocks(
        _make_mocks(project),
        project=PROJECT,
        stack=stack,
        on_register=lambda request, urn: recorded.append(_registration(request, urn)),
    )
    pulumi_internals.run_program(func)
    outputs = {
        key: SECRET_PLACEHOLDER if out.secret else _clean(out.value)
        for key, out in pulumi_internals.stack_outputs().items()
    }
    _engine_urns(recorded)
    recorded.sort(key=lambda r: r.urn)
    return recorded, outputs


def _engine_urns(records: list[Registration]) -> None:
    """Give each record the URN the real engine would (the full parent type chain, no stack type),
    so plans compare with aliases and with ``pulumi stack export`` (see ``plan_resources.canonical_urns``)."""
    from .plan_resources import canonical_urns

    urns = canonical_urns([{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent} for r in records])
    for r in records:
        r.urn = urns[r.urn]
        r.parent = urns.get(r.parent, r.parent)
        r.dependencies = sorted({urns.get(d, d) for d in r.dependencies})


@functools.cache
def _release_worker_loops_at_exit() -> None:
    """Register :func:`_release_worker_loops` once, on the first run (no run, no loops to close)."""
    atexit.register(_release_worker_loops)


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


def run_program(
    stack_file: StackFile, program: Path = PROGRAM, *, records: list[Registration] | None = None
) -> tuple[list[Registration], dict[str, Any]]:
    """Run the root ``__main__.py`` (or ``program``) with the stack file's config (see :func:`record`)."""
    return record(
        lambda: runpy.run_path(str(program), run_name="__main__"),
        stack=stack_file.stack,
        project=str(stack_file.values.get("gcp:project", "project")),
        config=stack_file.values,
        secret_keys=stack_file.secret_keys,
        records=records,
    )
