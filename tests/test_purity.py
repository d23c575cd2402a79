"""Pure means pure: specs, renderers, config, catalog and planner import no Pulumi SDK, and the
renderers' objects are complete — the baseline security context is part of the render, so what the
goldens show is what is registered.

Imports
-------

Read from the source with ``ast``; nothing is imported. A module of the pure set (``PURE``) must not
import ``pulumi`` or a ``pulumi_*`` SDK anywhere — at module level or inside a function — except
under ``if TYPE_CHECKING:`` (annotations only). The same holds for every module of the package that
importing it loads: its module-level ``components.*`` imports, transitively, and the packages above
each loaded module (importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first).
Function-level ``components.*`` imports are not followed: they load nothing on import, and
Pulumi-side code is reached from the program, never from these layers.

Baseline security
-----------------
``components.platform.k8s.create`` registers objects as they are; every pod template of every object a
committed stack registers must already carry ``with_baseline_security``, and every registered
workload kind must have a committed stack, so a new kind cannot skip the check.

Bucket names
------------
Renderers take a bucket's deterministic name (``StackConfig.bucket_name``) rather than the
bucket's output, which used to carry the dependency; the components list the bucket in
``depends_on`` instead, so every object that names a bucket is still created after it.
"""

from __future__ import annotations

import ast
import functools
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.render.core import get_path, pod_template_paths, with_baseline_security
from components.workloads.registry import KINDS
from tests.conftest import STACKS, planned_built

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "components"

PURE: dict[str, tuple[str, ...]] = {
    "workload specs": ("components/workloads/*/spec.py",),
    "workload renderers": ("components/workloads/*/render.py", "components/workloads/vllm/clients.py"),
    "shared renderers": ("components/render/*.py",),
    "config": ("components/config/**/*.py",),
    "catalog": ("components/catalog/**/*.py",),
    "planner": ("components/planner/**/*.py",),
    "pre-flight": ("components/tools/preflight.py",),
}
"""The pure set, by group: each group must match at least one file, so a move cannot empty it."""

SDK_PREFIX = "pulumi"
DYNAMIC_IMPORTS = frozenset({"import_module", "__import__"})


def is_sdk(module: str) -> bool:
    """``pulumi``, ``pulumi.runtime``, ``pulumi_gcp``, ``pulumi_kubernetes.core.v1``, …"""
    top = module.split(".")[0]
    return top == SDK_PREFIX or top.startswith(f"{SDK_PREFIX}_")


@dataclass(frozen=True)
class SdkImport:
    sdk: str
    line: int
    module_level: bool


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    """Relative to the directory that holds the package."""
    is_package: bool
    sdk_imports: tuple[SdkImport, ...]
    """Every import of a Pulumi SDK in the file, outside ``if TYPE_CHECKING:``."""
    imports: tuple[str, ...]
    """Module-level ``components.*`` imports (absolute names; unresolved names kept as written)."""


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, *, module_level: bool = True) -> Iterator[tuple[ast.AST, bool]]:
    """Every node under ``node`` with whether it runs on import (not inside a function), skipping
    the body of ``if TYPE_CHECKING:`` (its ``else`` runs)."""
    for child in ast.iter_child_nodes(node):
        if _is_type_checking(child):
            assert isinstance(child, ast.If)
            for branch in child.orelse:
                yield branch, module_level
                yield from _walk(branch, module_level=module_level)
            continue
        yield child, module_level
        # A class body runs on import; a function body (or a lambda) only when called.
        inner = module_level and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _walk(child, module_level=inner)


def _absolute(node: ast.ImportFrom, package: str) -> str:
    base = node.module or ""
    if not node.level:
        return base
    parts = package.split(".")
    anchor = parts[: len(parts) - node.level + 1]
    return ".".join([*anchor, *([base] if base else [])])


def parse_module(name: str, root: Path, path: Path, known: frozenset[str]) -> Module:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    sdk: list[SdkImport] = []
    imports: list[str] = []
    for node, module_level in _walk(ast.parse((root / path).read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            # ``from pkg import name`` loads ``pkg.name`` when that is a module, else only ``pkg``.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            arg = node.args[0] if node.args else None
            if called in DYNAMIC_IMPORTS and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                targets = [arg.value]
        line = getattr(node, "lineno", 0)
        for target in targets:
            if is_sdk(target):
                sdk.append(SdkImport(target, line, module_level))
            elif module_level and isinstance(node, ast.Import | ast.ImportFrom) and target.split(".")[0] == PACKAGE:
                imports.append(target)
    return Module(name, path, is_package, tuple(sdk), tuple(dict.fromkeys(imports)))


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse_package(root: Path, package: str = PACKAGE) -> dict[str, Module]:
    paths = {module_name(p, root): p.relative_to(root) for p in sorted((root / package).rglob("*.py"))}
    known = frozenset(paths)
    return {name: parse_module(name, root, path, known) for name, path in paths.items()}


def loads(module: Module, modules: dict[str, Module]) -> list[tuple[str, str]]:
    """What importing ``module`` runs first or next, each with how: its parent package, then its
    module-level imports (each also running the packages above it, which are then followed)."""
    out: list[tuple[str, str]] = []
    parent = module.name.rpartition(".")[0]
    if parent in modules:
        out.append((parent, "package of"))
    for target in module.imports:
        # ``import a.b.c`` of a name that is no module (a typo, a removed module) fails on its own
        # elsewhere; here the nearest existing package is what would load.
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target:
            out.append((target, "imports"))
    return out


def violations(start: str, modules: dict[str, Module]) -> list[str]:
    """Every SDK import ``start`` reaches, each with the chain of modules that leads to it."""
    chains: dict[str, list[str]] = {start: [start]}
    queue = deque([start])
    found: list[str] = []
    while queue:
        name = queue.popleft()
        module = modules[name]
        for sdk in module.sdk_imports:
            where = "at module level" if sdk.module_level else "inside a function"
            chain = " ".join(chains[name])
            found.append(f"{chain}: imports {sdk.sdk} {where} ({module.path}:{sdk.line})")
        for target, how in loads(module, modules):
            if target not in chains:
                chains[target] = [*chains[name], f"--{how}-->", target]
                queue.append(target)
    return found


@functools.cache
def package_modules() -> dict[str, Module]:
    return parse_package(ROOT)


def pure_modules() -> dict[str, list[str]]:
    """Module names of each group of ``PURE``."""
    return {
        group: sorted({module_name(p, ROOT) for pattern in patterns for p in ROOT.glob(pattern)})
        for group, patterns in PURE.items()
    }


PURE_MODULES = sorted({name for names in pure_modules().values() for name in names})


@pytest.mark.parametrize("group", PURE)
def test_every_group_of_the_pure_set_names_modules(group: str) -> None:
    assert pure_modules()[group], f"{group}: {PURE[group]} match no file; update PURE after a move"


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_loads_no_pulumi_sdk(module: str) -> None:
    found = violations(module, package_modules())
    assert not found, f"{module} must not load a Pulumi SDK (tests/test_purity.py):\n  " + "\n  ".join(found)


def test_the_check_follows_chains_and_skips_what_does_not_run(tmp_path: Path) -> None:
    """The walker itself, on a small package: what it must report and what it must leave alone."""
    files = {
        "components/__init__.py": "",
        "components/pure/__init__.py": "from . import shape\n",
        "components/pure/shape.py": (
            "from typing import TYPE_CHECKING\n"
            "from components import helper\n"
            "from components.other import thing\n"
            "if TYPE_CHECKING:\n"
            "    import pulumi\n"
            "else:\n"
            "    import json\n"
            "def later():\n"
            "    from components import deploy\n"
            "    return deploy\n"
        ),
        "components/helper.py": "import components.deep.leaf\n",
        "components/deep/__init__.py": "import pulumi_gcp as gcp\n",
        "components/deep/leaf.py": "X = 1\n",
        "components/other.py": "class A:\n    import pulumi_kubernetes\n",
        "components/deploy.py": "import pulumi\n",
        "components/lazy.py": "def f():\n    import importlib\n    return importlib.import_module('pulumi')\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = parse_package(tmp_path)
    # deploy (a function-level import) is not followed; TYPE_CHECKING is skipped; a class body runs;
    # importing a module runs the packages above it.
    assert sorted(violations("components.pure.shape", modules)) == [
        "components.pure.shape --imports--> components.helper --imports--> components.deep.leaf --package of--> "
        "components.deep: imports pulumi_gcp at module level (components/deep/__init__.py:1)",
        "components.pure.shape --imports--> components.other: imports pulumi_kubernetes at module level (components/other.py:2)",
    ]
    assert violations("components.deploy", modules) == [
        "components.deploy: imports pulumi at module level (components/deploy.py:1)"
    ]
    assert violations("components.lazy", modules) == ["components.lazy: imports pulumi inside a function (components/lazy.py:3)"]
    assert violations("components.deep.leaf", modules) == [
        "components.deep.leaf --package of--> components.deep: imports pulumi_gcp at module level (components/deep/__init__.py:1)"
    ]


# ---------------------------------------------------------------- baseline security in the render


def test_every_registered_workload_kind_has_a_committed_stack() -> None:
    covered = {planned_built(stack).config.workload.kind for stack in STACKS}
    missing = sorted(info.kind for info in KINDS if info.kind not in covered)
    assert not missing, f"no stack under stacks/ deploys {missing}: add one, so its objects are checked and golden"


@pytest.mark.parametrize("stack", STACKS)
def test_every_registered_pod_template_carries_the_baseline_from_its_renderer(stack: str) -> None:
    """Registration adds nothing, so a template without the baseline comes from a renderer that
    forgot ``with_baseline_security``; applying it again must change nothing."""
    templated = [obj for obj in planned_built(stack).manifests if pod_template_paths(obj)]
    assert templated  # every stack runs pods
    for obj in templated:
        secured = with_baseline_security(obj)
        lacking = [path for path in pod_template_paths(obj) if get_path(secured, path) != get_path(obj, path)]
        name = f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        assert not lacking, (
            f"{stack}: {name} lacks the baseline security context at {lacking}; its renderer must return "
            "with_baseline_security(obj) (components.render.core)"
        )


# ---------------------------------------------------------------- bucket names: plain, dependency explicit


@pytest.mark.parametrize("stack", STACKS)
def test_every_kubernetes_object_that_names_a_bucket_depends_on_it(stack: str) -> None:
    resources = planned_built(stack).resources
    buckets = {r.inputs["name"]: r.urn for r in resources if r.type == "gcp:storage/bucket:Bucket"}
    assert buckets  # every stack has one
    naming = [
        (r, name) for r in resources if r.type.startswith("kubernetes:") for name in buckets if name in json.dumps(r.inputs)
    ]
    assert naming  # every workload's pods use a bucket
    missing = [f"{r.name} names {name}" for r, name in naming if buckets[name] not in r.dependencies]
    assert not missing, f"{stack}: objects that name a bucket must list it in depends_on: {missing}"
