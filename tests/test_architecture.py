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
        ("components.render", "components.platform.gke"),
    ],
)
def test_layers_import_one_way(lower: str, upper: str) -> None:
    """Import layers, bottom up: catalog <- planner <- config <- render <- components (the data flows
    catalog -> config -> planner -> render; config imports the planner only for its engine table)."""
    graph = import_graph()
    lows = [n for n in graph if n == lower or n.startswith(lower + ".")]
    ups = {n for n in graph if n == upper or n.startswith(upper + ".")}
    reached = {m for n in lows for m in nx.descendants(graph, n)} & ups
    assert not reached, f"{lower} reaches {sorted(reached)}"
