"""GitHub Actions workflows: actionlint and zizmor clean, and their stack lists match stacks/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import engine

WORKFLOWS = sorted((engine.ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "pr.yml", "deploy.yml"}


def test_workflows_actionlint_clean() -> None:
    proc = subprocess.run(
        [str(BIN / "actionlint"), *map(str, WORKFLOWS)], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflows_zizmor_clean() -> None:
    proc = subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--no-progress", str(engine.ROOT / ".github" / "workflows")],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _load(name: str) -> dict[str, Any]:
    # BaseLoader keeps every scalar a string, so the `on:` key is not read as YAML 1.1's True.
    doc: dict[str, Any] = yaml.load((engine.ROOT / ".github" / "workflows" / name).read_text(), Loader=yaml.BaseLoader)
    return doc


@pytest.mark.parametrize(
    ("workflow", "path"),
    [
        ("pr.yml", ("jobs", "cloud-preview", "strategy", "matrix", "stack")),
        ("deploy.yml", ("on", "workflow_dispatch", "inputs", "stack", "options")),
    ],
)
def test_workflows_stack_lists_match_stacks_dir(workflow: str, path: tuple[str, ...]) -> None:
    node = _load(workflow)
    for key in path:
        node = node[key]
    assert sorted(node) == engine.list_stacks()
