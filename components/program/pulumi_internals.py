"""The one module that touches private or undocumented parts of the Pulumi Python SDK.

The offline engine (:mod:`components.tools.mockengine`) runs the real program under Pulumi's mock
engine and records every registration as the engine would receive it; the config loader reads
every namespace of the running program's config. Neither is possible through the SDK's
documented API alone, so each SDK symbol they need is listed in :data:`SYMBOLS` (what it is, what
we use it for) and used only through the thin typed wrappers below.

* :data:`VERIFIED_WITH` is the SDK version every entry was checked against (``requirements.txt``
  pins it). ``tests/test_pulumi_internals.py`` checks each entry against the installed SDK (it
  exists, is still the same kind of thing, takes the same parameters / has the same fields) and
  fails naming the symbol when an upgrade removes or changes one; a passing run on a new version
  is the cue to bump :data:`VERIFIED_WITH`.
* Everywhere else under ``components/`` may use, from ``pulumi.runtime``, only
  :data:`PUBLIC_RUNTIME_NAMES` (the documented unit-testing API), and no ``pulumi`` name that
  starts with ``_``; an AST test in the same file enforces it.

``pulumi`` is imported inside the wrappers, never at module level, so importing this module (the
config loader does) costs nothing and needs no engine.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    import pulumi

T = TypeVar("T")

VERIFIED_WITH = "3.272.0"
"""The pulumi SDK version every entry of :data:`SYMBOLS` was verified against."""

PUBLIC_RUNTIME_NAMES = frozenset({"Mocks", "MockResourceArgs", "MockCallArgs", "register_stack_transformation"})
"""The ``pulumi.runtime`` names other modules may use directly: the documented unit-testing API
(subclass ``Mocks``; its methods receive ``MockResourceArgs`` / ``MockCallArgs``) and stack
transformations (Pulumi docs, "Resource options: transformations": ``pulumi.runtime.
register_stack_transformation``), which ``components.platform.addons.capacity_scheduling`` uses because they run in the SDK
itself, the same under the mock engine as under ``pulumi up`` (the newer ``register_resource_transform``
runs in the engine, which the mock does not have)."""

Kind = Literal["function", "coroutine function", "method", "class", "context variable", "string", "message", "attribute"]


@dataclass(frozen=True)
class SdkSymbol:
    """One SDK symbol we depend on beyond the documented API."""

    path: str
    """Module path, then the attribute path inside the module (``pulumi.runtime.stack:Stack.outputs``)."""
    kind: Kind
    use: str
    """What we use it for."""
    members: tuple[str, ...] = ()
    """Parameters we pass (function, method), or fields we read (protobuf message)."""
    private: bool = True
    """False for names exported by ``pulumi.runtime`` whose behaviour we still rely on in an
    undocumented way (e.g. ``set_mocks(monitor=...)``)."""


# The RegisterResourceRequest fields the recorder reads (the engine's view of one registration).
_REQUEST_FIELDS = (
    "type",
    "name",
    "parent",
    "custom",
    "object",
    "dependencies",
    "provider",
    "protect",
    "retainOnDelete",
    "deleteBeforeReplace",
    "ignoreChanges",
    "replaceOnChanges",
    "additionalSecretOutputs",
    "aliases",
    "aliasURNs",
)

SYMBOLS: tuple[SdkSymbol, ...] = (
    SdkSymbol(
        "pulumi.runtime.sync_await:_sync_await",
        "function",
        "run the program and resolve stack outputs to completion from synchronous code",
        ("awaitable",),
    ),
    SdkSymbol(
        "pulumi.runtime.stack:run_pulumi_func",
        "coroutine function",
        "run the program as `pulumi up` does: wait for every RPC, re-raise the program's error after the drain",
        ("func",),
    ),
    SdkSymbol(
        "pulumi.runtime.stack:Stack.outputs",
        "attribute",
        "the root stack's exported values, read after the run",
    ),
    SdkSymbol(
        "pulumi.output:Output.future",
        "coroutine function",
        "an exported Output's resolved value",
        ("self", "with_unknowns"),
    ),
    SdkSymbol(
        "pulumi.output:Output.is_secret",
        "coroutine function",
        "whether an exported Output is secret (then it is masked)",
        ("self",),
    ),
    SdkSymbol(
        "pulumi.runtime.mocks:MockMonitor",
        "class",
        "base of the recording monitor (the mock engine's resource monitor)",
        ("mocks",),
    ),
    SdkSymbol(
        "pulumi.runtime.mocks:MockMonitor.RegisterResource",
        "method",
        "overridden to record each registration request before the mock answers it",
        ("self", "request"),
    ),
    SdkSymbol(
        "pulumi.runtime.proto.resource_pb2:RegisterResourceRequest",
        "message",
        "the registration request the recorder reads (fields listed)",
        _REQUEST_FIELDS,
    ),
    SdkSymbol(
        "pulumi.runtime.rpc:_special_sig_key",
        "string",
        "wire-format key marking a special value (secret, resource reference) in registered inputs",
    ),
    SdkSymbol("pulumi.runtime.rpc:_special_secret_sig", "string", "wire-format signature of a secret value"),
    SdkSymbol("pulumi.runtime.rpc:_special_resource_sig", "string", "wire-format signature of a resource reference"),
    SdkSymbol("pulumi.runtime.rpc:UNKNOWN", "string", "wire-format sentinel of a value unknown at preview"),
    SdkSymbol(
        "pulumi.runtime.config:CONFIG",
        "context variable",
        "every config key of the running program (all namespaces), to report keys no one reads",
    ),
    SdkSymbol(
        "pulumi.runtime.config:_SECRET_KEYS",
        "context variable",
        "the config keys marked secret when config is set in-process (the mock run)",
    ),
    SdkSymbol(
        "pulumi.runtime:set_all_config",
        "function",
        "hand the stack file's config to the runtime, as the CLI does",
        ("config", "secret_keys"),
        private=False,
    ),
    SdkSymbol(
        "pulumi.runtime.config:get_config_env",
        "function",
        "config passed by the CLI in PULUMI_CONFIG",
        private=False,
    ),
    SdkSymbol(
        "pulumi.runtime.config:get_config_secret_keys_env",
        "function",
        "secret keys passed by the CLI in PULUMI_CONFIG_SECRET_KEYS",
        private=False,
    ),
    SdkSymbol(
        "pulumi.runtime:reset_options",
        "function",
        "forget the previous run's settings and root stack before the next run in the same process",
        private=False,
    ),
    SdkSymbol(
        "pulumi.runtime:get_root_resource",
        "function",
        "the root stack resource, whose outputs are the stack outputs",
        private=False,
    ),
    SdkSymbol(
        "pulumi.runtime:set_mocks",
        "function",
        "install the mocks with our recording monitor (the `monitor` parameter is undocumented)",
        ("mocks", "project", "stack", "preview", "monitor"),
        private=False,
    ),
)


# ---------------------------------------------------------------- wire format


@dataclass(frozen=True)
class Wire:
    """Sentinels of the wire format of registered inputs (the engine's RPC protocol)."""

    sig_key: str
    """The key whose value marks a special object: ``{sig_key: <signature>, ...}``."""
    secret_sig: str
    """Signature of a secret: ``{sig_key: secret_sig, "value": ...}``."""
    resource_sig: str
    """Signature of a reference to another resource: ``{sig_key: resource_sig, "urn": ...}``."""
    unknown: str
    """The string standing for a value not known until the resource exists."""


@functools.cache
def wire() -> Wire:
    """The SDK's own wire sentinels (never copies: they follow an upgrade)."""
    from pulumi.runtime import rpc

    return Wire(
        sig_key=rpc._special_sig_key,
        secret_sig=rpc._special_secret_sig,
        resource_sig=rpc._special_resource_sig,
        unknown=rpc.UNKNOWN,
    )


# ---------------------------------------------------------------- registrations


@dataclass(frozen=True)
class RegisterRequest:
    """One resource registration as the engine receives it (the fields we read of the protobuf
    ``RegisterResourceRequest``), in plain Python."""

    type: str
    name: str
    parent: str
    custom: bool
    dependencies: tuple[str, ...]
    provider: str
    """Provider reference ``<provider urn>::<provider id>``, or empty for the default provider."""
    protect: bool
    retain_on_delete: bool
    delete_before_replace: bool
    ignore_changes: tuple[str, ...]
    replace_on_changes: tuple[str, ...]
    additional_secret_outputs: tuple[str, ...]
    alias_urns: tuple[str, ...]
    """Earlier URNs given as aliases (both the alias specs that carry a URN and the older
    ``aliasURNs`` field)."""
    inputs: dict[str, Any]
    """Inputs in wire form (JSON, with the sentinels of :func:`wire` for specials)."""


def _register_request(request: Any) -> RegisterRequest:
    from google.protobuf import json_format

    return RegisterRequest(
        type=request.type,
        name=request.name,
        parent=request.parent,
        custom=bool(request.custom),
        dependencies=tuple(request.dependencies),
        provider=request.provider,
        # Optional fields: unset means the default (False), as the engine reads them.
        protect=bool(request.protect) if request.HasField("protect") else False,
        retain_on_delete=bool(request.retainOnDelete) if request.HasField("retainOnDelete") else False,
        delete_before_replace=bool(request.deleteBeforeReplace),
        ignore_changes=tuple(request.ignoreChanges),
        replace_on_changes=tuple(request.replaceOnChanges),
        additional_secret_outputs=tuple(request.additionalSecretOutputs),
        alias_urns=(*(a.urn for a in request.aliases if a.urn), *request.aliasURNs),
        inputs=json_format.MessageToDict(request.object, preserving_proto_field_name=True),
    )


OnRegister = Callable[[RegisterRequest, str], None]
"""Called with each registration (the root stack excepted) and the URN the mock engine gave it."""


@functools.cache
def _recording_monitor_class() -> type[Any]:
    from pulumi.runtime.mocks import MockMonitor

    class RecordingMonitor(MockMonitor):
        """The mock engine's monitor, reporting each registration after answering it."""

        def __init__(self, mocks: pulumi.runtime.Mocks, on_register: OnRegister) -> None:
            super().__init__(mocks)
            self.on_register = on_register

        def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
            response = super().RegisterResource(request)  # type: ignore[no-untyped-call]  # SDK method is untyped
            if request.type != "pulumi:pulumi:Stack":
                self.on_register(_register_request(request), response.urn)
            return response

    return RecordingMonitor


# ---------------------------------------------------------------- running a program


def set_config(config: Mapping[str, str], secret_keys: Sequence[str]) -> None:
    """Replace the runtime's config (full keys to wire text) and its secret keys."""
    from pulumi import runtime

    runtime.set_all_config(dict(config), list(secret_keys))


def reset_options() -> None:
    """Forget the settings and root stack of a previous run in this process."""
    from pulumi import runtime

    runtime.reset_options()


def install_mocks(mocks: pulumi.runtime.Mocks, *, project: str, stack: str, on_register: OnRegister) -> None:
    """Run the next program against ``mocks`` (not a preview), reporting each registration."""
    from pulumi import runtime

    monitor = _recording_monitor_class()(mocks, on_register)
    runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)


def sync_await(awaitable: Awaitable[T]) -> T:
    """Wait for ``awaitable`` on the runtime's event loop from synchronous code."""
    from pulumi.runtime.sync_await import _sync_await

    return _sync_await(awaitable)


def run_program(func: Callable[[], object]) -> None:
    """Run a Pulumi program to completion as ``pulumi up`` runs it: every registration drained;
    an exception from the program propagates only after that."""
    from pulumi.runtime.stack import run_pulumi_func

    sync_await(run_pulumi_func(func))  # type: ignore[arg-type]  # func's result is ignored unless awaitable


@dataclass(frozen=True)
class StackOutput:
    """One exported value of the last run, resolved."""

    value: Any
    secret: bool


def stack_outputs() -> dict[str, StackOutput]:
    """The stack outputs (``pulumi.export``) of the last run, in export order."""
    import pulumi
    from pulumi import runtime

    root = runtime.get_root_resource()
    outputs: dict[str, StackOutput] = {}
    for key, value in getattr(root, "outputs", {}).items():
        out = pulumi.Output.from_input(value)
        outputs[key] = StackOutput(value=sync_await(out.future()), secret=sync_await(out.is_secret()))
    return outputs


# ---------------------------------------------------------------- the running program's config


def config_secret_keys() -> set[str]:
    """Config keys marked secret: from the CLI's environment, and from in-process config (mock runs)."""
    from pulumi.runtime import config as runtime_config

    return set(runtime_config.get_config_secret_keys_env()) | set(runtime_config._SECRET_KEYS.get())


def raw_config() -> dict[str, Any]:
    """Every config key of the running program (full keys, all namespaces), values as the runtime
    holds them (structured values as JSON text); in-process config wins over the CLI's environment."""
    from pulumi.runtime import config as runtime_config

    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
