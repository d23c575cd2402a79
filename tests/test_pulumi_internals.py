"""The private Pulumi SDK symbols we depend on still exist and look as they did, and only
``components/program/pulumi_internals.py`` touches them.

After an SDK upgrade a failure here names the symbol and what we use it for; fix the wrapper in
``components/program/pulumi_internals.py`` (and its entry in ``SYMBOLS``), then bump ``VERIFIED_WITH``.
"""

from __future__ import annotations

import ast
import contextvars
import importlib
import importlib.metadata
import inspect
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.program import pulumi_internals
from components.program.pulumi_internals import SYMBOLS, SdkSymbol

ROOT = Path(__file__).resolve().parent.parent
INTERNALS = ROOT / "components" / "program" / "pulumi_internals.py"


def test_installed_sdk_is_the_verified_version() -> None:
    installed = importlib.metadata.version("pulumi")
    assert installed == pulumi_internals.VERIFIED_WITH, (
        f"pulumi SDK {installed} is installed but components/program/pulumi_internals.py was verified against "
        f"{pulumi_internals.VERIFIED_WITH}: when every other test in this file passes, set VERIFIED_WITH = {installed!r}"
    )


# ---------------------------------------------------------------- each symbol


def _resolve(symbol: SdkSymbol) -> tuple[Any, Any]:
    """(owner, object): the class or module holding the symbol, and the symbol itself (None for an
    instance attribute, which only exists on instances)."""
    module_name, _, attr_path = symbol.path.partition(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = attr_path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    if symbol.kind == "attribute":
        return owner, None
    return owner, getattr(owner, name)


def _parameters(func: Any) -> set[str]:
    return set(inspect.signature(func).parameters)


def _problem(symbol: SdkSymbol) -> str | None:
    """What no longer holds for ``symbol`` in the installed SDK, or None."""
    try:
        owner, obj = _resolve(symbol)
    except (ImportError, AttributeError) as error:
        return f"is gone ({error})"
    name = symbol.path.rpartition(".")[2].rpartition(":")[2]
    wanted = set(symbol.members)
    kind = symbol.kind
    if kind == "attribute":
        source = inspect.getsource(owner.__init__)
        return None if f"self.{name} =" in source else f"{owner.__name__}.__init__ no longer sets self.{name}"
    if kind == "string":
        return None if isinstance(obj, str) and obj else f"is {obj!r}, not a non-empty string"
    if kind == "context variable":
        return None if isinstance(obj, contextvars.ContextVar) else f"is a {type(obj).__name__}, not a ContextVar"
    if kind == "message":
        descriptor = getattr(obj, "DESCRIPTOR", None)
        if descriptor is None:
            return "is not a protobuf message"
        missing = wanted - set(descriptor.fields_by_name)
        return f"has no field(s) {sorted(missing)}" if missing else None
    if kind == "class":
        if not inspect.isclass(obj):
            return f"is a {type(obj).__name__}, not a class"
        missing = wanted - _parameters(obj.__init__)
        return f"__init__ takes no {sorted(missing)}" if missing else None
    if kind in ("function", "method", "coroutine function"):
        if not callable(obj):
            return f"is a {type(obj).__name__}, not callable"
        if (kind == "coroutine function") != inspect.iscoroutinefunction(obj):
            return "is no longer a coroutine function" if kind == "coroutine function" else "became a coroutine function"
        missing = wanted - _parameters(obj)
        return f"takes no parameter(s) {sorted(missing)}" if missing else None
    return f"has an unknown kind {kind!r} in SYMBOLS"


@pytest.mark.parametrize("symbol", SYMBOLS, ids=[s.path for s in SYMBOLS])
def test_sdk_symbol_is_as_verified(symbol: SdkSymbol) -> None:
    problem = _problem(symbol)
    assert problem is None, (
        f"pulumi SDK {importlib.metadata.version('pulumi')}: {symbol.path} ({symbol.kind}, "
        f"{'private' if symbol.private else 'public'}) {problem}. We use it to {symbol.use}; "
        f"it was verified against pulumi {pulumi_internals.VERIFIED_WITH}. Fix components/program/pulumi_internals.py."
    )


def test_request_flags_read_with_has_field_are_optional_fields() -> None:
    # HasField raises on a field without presence: these two must stay `optional bool`.
    from pulumi.runtime.proto import resource_pb2

    fields = resource_pb2.RegisterResourceRequest.DESCRIPTOR.fields_by_name
    for name in ("protect", "retainOnDelete"):
        assert fields[name].has_presence, f"RegisterResourceRequest.{name} lost its presence (HasField)"


def test_wrappers_run_a_program_and_record_it() -> None:
    """The wrappers end to end: config in, a registration with its options recorded, outputs out."""
    seen: list[tuple[pulumi_internals.RegisterRequest, str]] = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
            return {}, []

    def program() -> None:
        assert pulumi_internals.raw_config()["demo:size"] == "3"
        assert "demo:token" in pulumi_internals.config_secret_keys()
        opts = pulumi.ResourceOptions(protect=True, ignore_changes=["size"], aliases=["urn:pulumi:s::p::test:index:Thing::old"])
        thing = pulumi.CustomResource("test:index:Thing", "thing", {"size": 3, "token": pulumi.Output.secret("t")}, opts)
        pulumi.export("plain", {"n": 1})
        pulumi.export("hidden", pulumi.Output.secret("s"))
        pulumi.export("ref", thing.urn)

    pulumi_internals.set_config({"demo:size": "3", "demo:token": "t"}, ["demo:token"])
    pulumi_internals.reset_options()
    pulumi_internals.install_mocks(Mocks(), project="p", stack="s", on_register=lambda r, urn: seen.append((r, urn)))
    pulumi_internals.run_program(program)
    outputs = pulumi_internals.stack_outputs()

    ((request, urn),) = seen
    assert (request.type, request.name, request.custom) == ("test:index:Thing", "thing", True)
    assert urn.endswith("test:index:Thing::thing")
    assert (request.protect, request.retain_on_delete, request.delete_before_replace) == (True, False, False)
    assert request.ignore_changes == ("size",)
    assert request.alias_urns == ("urn:pulumi:s::p::test:index:Thing::old",)
    wire = pulumi_internals.wire()
    assert request.inputs["size"] == 3
    assert request.inputs["token"][wire.sig_key] == wire.secret_sig
    assert outputs["plain"] == pulumi_internals.StackOutput(value={"n": 1}, secret=False)
    assert outputs["hidden"].secret
    assert outputs["ref"].value == urn


# ---------------------------------------------------------------- nobody else touches them


def _is_pulumi(module: str) -> bool:
    top = module.partition(".")[0]
    return top == "pulumi" or top.startswith("pulumi_")


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _dotted(node: ast.expr) -> tuple[str, list[str]] | None:
    """``a.b.c`` -> ("a", ["b", "c"]); None for anything not rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id, parts[::-1]) if isinstance(node, ast.Name) else None


def sdk_uses(source: str) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every use of a private ``pulumi*`` name or of ``pulumi.runtime``
    beyond :data:`PUBLIC_RUNTIME_NAMES`: imports, and attribute chains on names bound to pulumi
    modules or objects."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> what it is in the SDK

    def offending(dotted: str) -> bool:
        if not _is_pulumi(dotted):
            return False
        parts = dotted.split(".")
        if any(_private(p) for p in parts):
            return True
        if parts[:2] == ["pulumi", "runtime"]:
            return len(parts) == 2 or parts[2] not in pulumi_internals.PUBLIC_RUNTIME_NAMES
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_pulumi(alias.name):
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        top = alias.name.partition(".")[0]
                        bound[top] = top
                    if offending(alias.name):
                        yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _is_pulumi(node.module):
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                bound[alias.asname or alias.name] = dotted
                if offending(dotted):
                    yield node.lineno, dotted
    # Only whole chains (``a.b._c``, not also ``a.b``): skip attributes that are part of a longer one.
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _dotted(node)
            if chain is not None and chain[0] in bound:
                dotted = ".".join([bound[chain[0]], *chain[1]])
                if offending(dotted):
                    yield node.lineno, dotted


def test_the_check_finds_private_sdk_use() -> None:
    source = textwrap.dedent(
        """
        import pulumi
        import pulumi.runtime.settings
        from pulumi.runtime import config as cfg
        from pulumi._utils import lazy_import
        import pulumi_gcp as gcp

        class M(pulumi.runtime.Mocks): ...
        pulumi.runtime.set_mocks(M())
        cfg.CONFIG.get()
        pulumi.Output._from_input_shallow(1)
        gcp.container._inputs.ClusterArgs
        pulumi.Output.from_input(1)
        """
    )
    found = {dotted for _, dotted in sdk_uses(source)}
    assert found == {
        "pulumi.runtime.settings",
        "pulumi.runtime.config",
        "pulumi.runtime.config.CONFIG.get",
        "pulumi._utils.lazy_import",
        "pulumi.runtime.set_mocks",
        "pulumi.Output._from_input_shallow",
        "pulumi_gcp.container._inputs.ClusterArgs",
    }


def test_only_pulumi_internals_touches_private_sdk_symbols() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {dotted}"
        for path in sorted((ROOT / "components").rglob("*.py"))
        if path != INTERNALS
        for line, dotted in sdk_uses(path.read_text())
    ]
    assert offenders == [], (
        "private Pulumi SDK use outside components/program/pulumi_internals.py (add a wrapper there; from "
        f"pulumi.runtime only {sorted(pulumi_internals.PUBLIC_RUNTIME_NAMES)} are public API):\n" + "\n".join(offenders)
    )


def test_pulumi_internals_lists_what_it_uses() -> None:
    """Every private or pulumi.runtime name the module uses is an entry of SYMBOLS, and every entry
    is still used, so the table is the truth."""
    listed = {s.path.replace(":", ".") for s in SYMBOLS}
    modules = {s.path.partition(":")[0] for s in SYMBOLS}
    used = {dotted for _, dotted in sdk_uses(INTERNALS.read_text())}
    # Importing a listed symbol's module (`from pulumi.runtime import rpc`) is how it is reached.
    unlisted = {d for d in used if d not in listed and d not in modules and not any(d.startswith(f"{x}.") for x in listed)}
    assert unlisted == set(), f"used in pulumi_internals.py but not in SYMBOLS: {sorted(unlisted)}"
    source = INTERNALS.read_text()
    code = source[source.index("# ---------------------------------------------------------------- wire format") :]
    unused = [s.path for s in SYMBOLS if s.path.rpartition(".")[2].rpartition(":")[2] not in code]
    assert unused == [], f"listed in SYMBOLS but no longer used by the wrappers: {unused}"
