"""The package's import graph: one way, no cycles (read from the source, nothing imported).

An edge A -> B is any ``import B`` / ``from B import x`` in A, at module level or inside a function
(a deferred import is still a dependency), except under ``if TYPE_CHECKING:`` (annotations only).
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.
Importing a module does not add an edge to its parent package (as in grimp/import-linter).

Cycles are checked between modules, not packages: a workload kind's package deliberately spans
layers (its ``spec`` sits below ``components.config.stack``, which lists the kinds; its ``render``
and ``component`` sit above it), so ``components.config`` and ``components.workloads`` import each
other as packages while every module-level chain runs one way.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "components"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (n for child in node.orelse for n in _imports_in(child))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    elif isinstance(node, ast.If) and _is_type_checking(node):
        for branch in node.orelse:
            yield from _imports_in(branch)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _imports_in(child)


@functools.cache
def import_graph() -> nx.DiGraph[str]:
    modules = _modules()
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph.add_edge(name, target)
    return graph


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    # A known one-way chain, so an empty or broken graph cannot pass the cycle test vacuously.
    assert graph.has_edge("components.config.stack", "components.workloads.registry")
    assert graph.has_edge("components.workloads.registry", "components.workloads.vllm")
    assert graph.number_of_edges() > 100


def test_no_import_cycle_in_components() -> None:
    cycles = list(nx.simple_cycles(import_graph()))
    shortest = sorted(cycles, key=len)[:5]
    assert not cycles, f"{len(cycles)} import cycle(s), e.g.: " + "; ".join(" -> ".join([*c, c[0]]) for c in shortest)


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("components.catalog", "components.config"),
        ("components.catalog", "components.planner"),
        ("components.planner", "components.config"),
        ("components.config", "components.render"),
        ("components.render", "components.platform"),
    ],
)
def test_layers_import_one_way(lower: str, upper: str) -> None:
    """Import layers, bottom up: catalog <- planner <- config <- render <- platform (the data flows
    catalog -> config -> planner -> render; config imports the planner only for its engine table and
    to resolve a stack's capacity, ``config.resolve``)."""
    graph = import_graph()
    lows = [n for n in graph if _within(n, lower)]
    ups = {n for n in graph if _within(n, upper)}
    reached = {m for n in lows for m in nx.descendants(graph, n)} & ups
    assert not reached, f"{lower} reaches {sorted(reached)}"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# What each folder of components/ may not import (directly): the folders name their audiences.
FOLDER_RULES: dict[str, tuple[str, ...]] = {
    # Facts as data: nothing above them.
    "components.catalog": (
        "components.config",
        "components.planner",
        "components.render",
        "components.platform",
        "components.program",
        "components.tools",
        "components.workloads",
    ),
    "components.planner": (
        "components.config",
        "components.render",
        "components.platform",
        "components.program",
        "components.tools",
        "components.workloads",
    ),
    "components.config": ("components.render", "components.platform", "components.program", "components.tools"),
    # Pure renderers: dicts in, dicts out; the components register them.
    "components.render": ("components.platform", "components.program", "components.tools"),
    # The library: a user's own program imports it with no stack config, workload kind or tool.
    "components.platform": (
        "components.program",
        "components.tools",
        "components.workloads",
        "components.config.stack",
        "components.config.loader",
        "components.config.resolve",
        "components.config.stack_files",
    ),
    # What `pulumi up` runs never needs the offline tools.
    "components.program": ("components.tools",),
    "components.workloads": ("components.tools", "components.program"),
}
# A cluster-level add-on is a function of a stack's settings, so it may read the stack config; the
# rest of platform/ stays free of it.
FOLDER_EXCEPTIONS: dict[str, tuple[str, ...]] = {"components.platform.addons": ("components.config.stack",)}


@pytest.mark.parametrize("folder", sorted(FOLDER_RULES))
def test_folder_imports_only_what_its_audience_allows(folder: str) -> None:
    graph = import_graph()
    bad = []
    for module in (n for n in graph if _within(n, folder)):
        allowed = next((ok for pkg, ok in FOLDER_EXCEPTIONS.items() if _within(module, pkg)), ())
        for target in graph.successors(module):
            banned = [b for b in FOLDER_RULES[folder] if _within(target, b)]
            if banned and not any(_within(target, a) for a in allowed):
                bad.append(f"{module} -> {target}")
    assert not bad, f"{folder} imports what its folder may not: {bad}"


# A workload kind's package has the same shape as every other kind's (components/README: "Workload
# kinds are packages"), so these names repeat by design; every other module name appears once.
KIND_MODULES = {"spec", "render", "component"}


def test_every_module_name_appears_once() -> None:
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        if path.stem in ("__init__", "__main__") or path.stem in KIND_MODULES:
            continue
        seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not twice, f"module names used more than once: {twice}"


def test_folders_exist_with_their_audiences() -> None:
    """The folders the README names; an empty or missing one would pass the rules vacuously."""
    graph = import_graph()
    for folder in ("components.platform", "components.platform.addons", "components.program", "components.tools"):
        assert any(_within(n, folder) and n != folder for n in graph), folder
