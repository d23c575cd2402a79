"""A user's own stack file in stacks/ is a stack like the examples (the README quickstart's step 2).

In a copy of the repository (the real stacks/ is left alone) two stack files are added as users add
them: a dev copy of ``llama-70b`` in a project of its own without goldens, and a prod copy in a prod
project with its hfToken set the way ``pulumi config set --secret`` writes it (ciphertext and the
passphrase provider's ``encryptionsalt``) and its goldens rendered by ``python -m components render``.
Then every test that runs over the stacks in stacks/ runs there, under this interpreter (the
project's .venv): all pass, and each user stack's own parametrized tests ran and passed.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCE = "llama-70b"
DEV, PROD = "acme-llama-dev", "acme-llama-prod"
"""Neither name holds the other, so a test id names one of them only."""

# One autoscaled vLLM stack per project and no dev stack in a prod project
# (components/config/isolation.py): each copy lives in a project of its own.
PROJECTS = {DEV: "acme-ml-4821", PROD: "acme-ml-prod-4821"}
ENCRYPTION_SALT = "encryptionsalt: v1:Tq0N1qJzDFs=:v1:Tf8b/0Dm8IEbs5oM:qzHlVt6ZXR6e06W3gUvnQWVb3m3c8A==\n"
"""A top-level key of a stack file under the passphrase secrets provider (Pulumi's stack settings file)."""
HF_TOKEN = "  gke-tpu-llm:hfToken:\n    secure: v1:hZ2TfNi1kYzJmIeN:1qjzK3eFaVTyWFdnYlPAn0lgQ2wC4J5x0vq8vJ2YJq0WQXmtXwY=\n"
"""What `pulumi config set --secret gke-tpu-llm:hfToken hf_...` writes: ciphertext, never the token."""

STACK_LIST = {"STACKS", "stack_plan", "list_stacks"}
"""How a test reads the stacks in stacks/ (tests/conftest.py, components.config.stack_files)."""
SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", "node_modules"}

# Tests every stack gets, which must have run and passed for each user stack.
EVERY_STACK = [
    "tests/test_stacks.py::test_stacks_file_name_is_a_stack_name",
    "tests/test_stacks.py::test_stack_platform_basics",
    "tests/test_stacks.py::test_stack_tpu_pools_are_placed_as_their_slices",
    "tests/test_stacks.py::test_stack_outputs_hide_the_kubeconfig",
    "tests/test_manifests.py::test_manifests_validate_strictly",
    "tests/test_workflows.py::test_workflows_deploy_accepts_the_stack",
]
GOLDENS = "tests/test_manifests.py::test_manifests_golden_matches_fresh_render"


def _repository_files() -> list[Path]:
    """The repository's files: tracked and new ones git does not ignore (a file being added is part of
    the tree under test), or, outside a git checkout, everything but caches and virtualenvs."""
    proc = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=False
    )
    if proc.returncode == 0:
        return [ROOT / name for name in proc.stdout.decode().split("\0") if name and (ROOT / name).is_file()]
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        out += [Path(folder) / f for f in files]
    return out


def _reads_stacks(node: ast.AST, names: set[str]) -> bool:
    for sub in ast.walk(node):
        name = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else None
        if name in names or (isinstance(sub, ast.arg) and sub.arg in names):
            return True
        if isinstance(sub, ast.Constant) and sub.value == "--all":
            return True
    return False


def stack_tests(path: Path) -> list[str]:
    """The tests of ``path`` that run over the stack files: parametrized by them (or by a module-level
    list made from them), taking the ``stack_plan`` fixture, or reading the stack list (or running a
    command on ``--all`` stacks) in their body."""
    tree = ast.parse(path.read_text())
    names = set(STACK_LIST)
    for node in tree.body:  # e.g. ONE_TIER = [s for s in STACKS if ...]
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _reads_stacks(node.value, names):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and _reads_stacks(node, names)
    ]


def _user_stack(source: str, project: str, *, prod: bool) -> str:
    """The source stack file as a user's copy: their project, and for prod the environment and a
    secret set with `pulumi config set --secret`."""
    text = source.replace("  gcp:project: your-project-id\n", f"  gcp:project: {project}\n")
    assert text != source, f"stacks/Pulumi.{SOURCE}.yaml no longer sets gcp:project: your-project-id"
    if not prod:
        return text
    prod_text = text.replace("  gke-tpu-llm:environment: dev\n", "  gke-tpu-llm:environment: prod\n")
    assert prod_text != text, f"stacks/Pulumi.{SOURCE}.yaml no longer sets gke-tpu-llm:environment: dev"
    return ENCRYPTION_SALT + prod_text.rstrip("\n") + "\n" + HF_TOKEN


def _outcomes(report: str, stack: str) -> dict[str, str]:
    """Test id -> outcome (PASSED, FAILED, ERROR, ...) of each test parametrized with ``stack``, from
    pytest's `-rA` summary lines (`PASSED path::name[params]`; a skip shows its location instead)."""
    out: dict[str, str] = {}
    for line in report.splitlines():
        match = re.match(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+?\[(.*)\])", line)
        if match and re.search(rf"(?:^|-){re.escape(stack)}(?:-|$)", match.group(3)):
            out[match.group(2)] = match.group(1)
    return out


@pytest.mark.slow
def test_own_stacks_are_stacks_to_the_tests_and_workflows(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for path in _repository_files():
        target = copy / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    source = (copy / "stacks" / f"Pulumi.{SOURCE}.yaml").read_text()
    for stack, project in PROJECTS.items():
        (copy / "stacks" / f"Pulumi.{stack}.yaml").write_text(_user_stack(source, project, prod=stack == PROD))
    # A run of its own: not this run's worker variables, options or import path.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # The README's step: the user renders the goldens they commit beside their stack file.
    render = subprocess.run(
        [sys.executable, "-m", "components", "render", PROD], cwd=copy, env=env, capture_output=True, text=True, timeout=300
    )
    assert render.returncode == 0, render.stderr
    assert sorted((copy / "manifests" / PROD).glob("*.yaml")), render.stdout
    assert not (copy / "manifests" / DEV).exists()

    tests = [
        f"tests/{path.name}::{name}"
        for path in sorted((copy / "tests").glob("test_*.py"))
        if path.name != Path(__file__).name
        for name in stack_tests(path)
    ]
    assert {*EVERY_STACK, GOLDENS} <= set(tests)
    # Not the examples' own parametrized cases: the suite runs them, and a user stack that clashed with
    # one would fail its own plan and the tests over every stack, which run here.
    examples = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (copy / "stacks").glob("Pulumi.*.yaml"))
    not_examples = " and ".join(f"not [{stack}]" for stack in examples if stack not in PROJECTS)
    # One process (-n 0): this test runs inside a suite already on every core, where workers of its
    # own would only add their imports (~115 tests, about 20 s on one core).
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-m", "not slow", "-n", "0"]
    command += ["-k", not_examples, *tests]
    proc = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=1200)
    summary = proc.stdout[-20_000:]
    assert proc.returncode == 0, summary + proc.stderr[-5_000:]

    for stack in (DEV, PROD):
        outcomes = _outcomes(proc.stdout, stack)
        missing = [test for test in EVERY_STACK if outcomes.get(f"{test}[{stack}]") != "PASSED"]
        assert not missing, f"{stack}: {missing} did not run and pass:\n{summary}"
        assert {test: outcome for test, outcome in outcomes.items() if outcome != "PASSED"} == {}
    # Goldens are compared once committed (PROD's, rendered above); DEV has none: skipped, not failed.
    assert _outcomes(proc.stdout, PROD).get(f"{GOLDENS}[{PROD}]") == "PASSED"
    assert f"{GOLDENS}[{DEV}]" not in _outcomes(proc.stdout, DEV)
    assert re.search(rf"^SKIPPED \[1\] tests/test_manifests\.py:\d+: no manifests/{DEV}/", proc.stdout, re.M), summary
