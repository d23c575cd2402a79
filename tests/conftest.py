"""Shared fixtures: the project root on sys.path, and the offline plans a test run shares.

The suite runs on every core (pytest-xdist, ``-n auto`` in pyproject.toml), one process per worker.
A plan (a committed stack's, or any stack file's through :func:`planned_file`) is computed once per
run: the first worker that needs it runs the engine and pickles the result into a directory the
controller made for the run; the others wait on that plan's lock and load it. A shared plan is made
by the real engine against the committed ``stacks/``, even when the test that asked first patched them.
Tests share the results, so a test that changes one must copy it first; the session's end checks
that none was changed (a changed plan would make outcomes depend on which tests ran before).
"""

from __future__ import annotations

import contextlib
import copy
import copyreg
import dataclasses
import gc
import hashlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

# Each process of the run holds the SDKs, jax and the shared plans: millions of objects that live for
# the whole run, which the default thresholds (700, 10, 10) made full collections walk dozens of times
# per worker (~8 s of a 45 s worker on 2 cores). Rarer young collections: same peak memory.
gc.set_threshold(20_000, 20, 10)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from components.config import stack_files as stacks  # noqa: E402
from components.config.loader import parse_stack_config, required_secrets  # noqa: E402
from components.config.stack import StackConfig  # noqa: E402
from components.tools import mockengine, report  # noqa: E402

STACKS = stacks.list_stacks()


# ---------------------------------------------------------------- plans shared by the run

_PLAN_DIR_KEY = "gke_tpu_llm_plan_dir"
"""The controller hands each worker the run's plan directory under this key of ``workerinput``."""

_plan_dir: Path | None = None
"""Where this run's workers share plans; None in a run without workers (every plan is in memory)."""

_shared: dict[str, tuple[report.PlanResult, bytes]] = {}
"""Each shared plan this process holds, with its pickle, to check at the end that no test changed it."""

_computing: set[str] = set()


def _mapping_proxy(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(items)


class _PlanPickler(pickle.Pickler):
    """The catalog's read-only tables (``MappingProxyType``) are not picklable: written as the dict they
    wrap and read back as a new read-only view of it (plans compare equal either side)."""

    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[MappingProxyType] = lambda proxy: (_mapping_proxy, (dict(proxy),))


def _pickled(result: report.PlanResult) -> bytes:
    out = io.BytesIO()
    _PlanPickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(result)
    return out.getvalue()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (POSIX ``flock``; the lock goes with the process if it dies)."""
    import fcntl

    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _shared_plan(name: str, compute: Callable[[], report.PlanResult]) -> report.PlanResult:
    """``compute()`` once per run: by the first worker that asks, loaded from its pickle by the others."""
    # A plan asked for while it is being computed would wait on its own lock for ever: fail instead.
    assert name not in _computing, f"the shared plan {name} was asked for while it was being computed"
    _computing.add(name)
    try:
        return _load_or_compute(name, compute)
    finally:
        _computing.discard(name)


def _load_or_compute(name: str, compute: Callable[[], report.PlanResult]) -> report.PlanResult:
    if _plan_dir is None or os.name != "posix":
        result = compute()
        _shared[name] = (result, _pickled(result))
        return result
    path = _plan_dir / f"{name}.pickle"
    with _locked(_plan_dir / f"{name}.lock"):
        if path.exists():
            data = path.read_bytes()
            result = pickle.loads(data)
        else:
            result = compute()
            data = _pickled(result)
            path.with_suffix(".tmp").write_bytes(data)
            path.with_suffix(".tmp").replace(path)
    _shared[name] = (result, data)
    return result


COMMITTED_STACKS = stacks.STACKS_DIR
"""``stacks/`` as committed (a test may point ``stacks.STACKS_DIR`` at copies it changes)."""

_PLAN = report.plan
_ENGINE = mockengine.run_program
"""The real ones, whatever a test (or :func:`shared_engine`) has patched them with."""


@contextlib.contextmanager
def _as_committed() -> Iterator[None]:
    """Plan with the real engine against the committed ``stacks/`` (the isolation check reads the
    other stack files), so a shared plan does not depend on which test asked for it first."""
    patched = stacks.STACKS_DIR, mockengine.run_program
    stacks.STACKS_DIR, mockengine.run_program = COMMITTED_STACKS, _ENGINE
    try:
        yield
    finally:
        stacks.STACKS_DIR, mockengine.run_program = patched


def _content_key(stack_file: stacks.StackFile) -> str:
    content = [stack_file.stack, stack_file.values, stack_file.secret_keys, stack_file.placeholders]
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()
    return f"{stack_file.stack}-{digest[:16]}"


def planned_file(stack_file: stacks.StackFile) -> report.PlanResult:
    """The plan of ``stack_file``, shared by the run: every test (on any worker) that plans the same
    content, a committed stack or the same variant of one, gets the one engine run. Only for stack
    files planned as the repository stands: the key is the file's content, so a test that patches
    the catalog, the environment or the program must run ``report.plan`` itself."""
    key = _content_key(stack_file)
    if key in _shared:
        return _shared[key][0]

    def compute() -> report.PlanResult:
        with _as_committed():
            return _PLAN(stack_file)

    return _shared_plan(key, compute)


@cache
def planned(stack: str) -> report.PlanResult:
    """The committed stack's plan: plans are deterministic, so each stack runs once per test run."""
    return planned_file(stacks.read_stack_file(COMMITTED_STACKS / stacks.stack_path(stack).name))


BUILD_DIGEST = "sha256:" + "5" * 64
"""The digest a finished training-image build records in ``workload.maxtextRay.image.built`` (a test
input: no image has it)."""


@cache
def planned_built(stack: str) -> report.PlanResult:
    """The stack as it plans once what it waits for exists: a maxtext-ray stack with its image build
    recorded, so its RayCluster/RayJob render (the committed stacks record none: their images exist in
    no registry, components/workloads/maxtext_ray/README.md); any other stack as committed."""
    result = planned(stack)
    if "training_waits_for" not in result.outputs:
        return result
    from components.workloads.maxtext_ray import render as maxtext_render

    parsed = stacks.read_stack_file(COMMITTED_STACKS / stacks.stack_path(stack).name)
    workload = copy.deepcopy(parsed.values["gke-tpu-llm:workload"])
    workload["maxtextRay"].setdefault("image", {})["built"] = f"{maxtext_render.image_tag(result.config)}@{BUILD_DIGEST}"
    return planned_file(dataclasses.replace(parsed, values={**parsed.values, "gke-tpu-llm:workload": workload}))


@pytest.fixture(params=STACKS)
def stack_plan(request: pytest.FixtureRequest) -> report.PlanResult:
    return planned(request.param)


@pytest.fixture
def shared_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline engine (``mockengine.run_program`` of the root program) answering from the run's
    shared plans (:func:`planned_file`): for tests of what the CLI does with plans (``plan --all``,
    ``teardown``, the text view) where nothing but stack files changed. ``report.plan`` still
    validates and checks isolation before it asks the engine."""
    real = mockengine.run_program

    def run_program(
        stack_file: stacks.StackFile, program: Path = mockengine.PROGRAM, *, records: list[mockengine.Registration] | None = None
    ) -> tuple[list[mockengine.Registration], dict[str, Any]]:
        if program != mockengine.PROGRAM or records is not None:
            return real(stack_file, program, records=records)
        shared = planned_file(stack_file)
        print(shared.log, end="")  # what the program printed, as an engine run shows it
        copied: report.PlanResult = pickle.loads(_shared[_content_key(stack_file)][1])  # callers may change theirs
        return copied.resources, copied.outputs

    monkeypatch.setattr(mockengine, "run_program", run_program)


@pytest.fixture(scope="session", autouse=True)
def _shared_plans_stay_unchanged() -> Iterator[None]:
    """Fail the run (an error at the last test's teardown) when a test changed a shared plan."""
    yield
    changed = sorted(name for name, (result, data) in _shared.items() if pickle.loads(data) != result)
    assert not changed, (
        f"a test changed the shared plan of {', '.join(changed)} (tests/conftest.py: planned, planned_built, planned_file): "
        "copy a plan (copy.deepcopy) before changing it"
    )


BASE: dict[str, Any] = {
    "gcp:project": "test-project-123",
    "gcp:region": "us-east5",
    "tpu": {"generation": "v6e", "topology": "4x4", "zone": "us-east5-b"},
    # The 405B seed's serving settings and buckets, so the JetStream rules hold for the base.
    "buckets": {"checkpoints": {"purpose": "ckpt", "holdsCheckpoints": True}, "pathways": {"purpose": "pathways-scratch"}},
    "identity": {"bucketRoles": {"checkpoints": "roles/storage.objectUser", "pathways": "roles/storage.objectUser"}},
    "workload": {
        "kind": "jetstream-pathways",
        "model": "llama3.1-405b",
        "weights": "int8",
        "maxTargetLength": 2048,
        "maxPrefillLength": 1024,
        "perDeviceBatchSize": 6,
    },
}


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` into ``base``; a None value deletes the key."""
    out = dict(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def make_config(stack: str = "test", *, with_secrets: bool = True, **override: Any) -> StackConfig:
    """A validated config from BASE + overrides; required secrets are supplied as secret placeholders
    unless ``with_secrets`` is False."""
    base = BASE
    kind = (override.get("workload") or {}).get("kind")
    if kind not in (None, BASE["workload"]["kind"]):
        # Another workload kind: start from its own settings, not the 405B JetStream ones.
        base = {k: v for k, v in BASE.items() if k not in ("workload", "buckets", "identity")}
        base["workload"] = {"maxTargetLength": BASE["workload"]["maxTargetLength"]}
        if kind == "vllm":  # vLLM caches the weights it downloads in a bucket it must be able to write
            base["buckets"] = {"models": {"purpose": "hf-weights-cache"}}
            base["identity"] = {"bucketRoles": {"models": "roles/storage.objectUser"}}
    values = merged(base, override)
    secret_keys: list[str] = []
    if with_secrets:
        for key in required_secrets(values["workload"]):
            values.setdefault(key, "[secret]")
            secret_keys.append(f"gke-tpu-llm:{key}")
    return parse_stack_config(values, stack, secret_keys)


def run_cli_process(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``python -m components ARGS`` in a fresh interpreter from the repository root, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "components", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=check
    )


# ---------------------------------------------------------------- the run's plan directory (pytest-xdist)


def pytest_configure(config: pytest.Config) -> None:
    global _plan_dir
    workerinput = getattr(config, "workerinput", None)  # set on a pytest-xdist worker only
    if workerinput is not None and workerinput.get(_PLAN_DIR_KEY):
        _plan_dir = Path(workerinput[_PLAN_DIR_KEY])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """On the controller, before each worker starts: one plan directory for the run, named to each
    worker (the pytest-xdist hook made for passing data to workers, ``workerinput``)."""
    config = node.config
    if not hasattr(config, "_gke_tpu_llm_plan_dir"):
        config._gke_tpu_llm_plan_dir = tempfile.mkdtemp(prefix="gke-tpu-llm-plans-")
    node.workerinput[_PLAN_DIR_KEY] = config._gke_tpu_llm_plan_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    plan_dir = getattr(config, "_gke_tpu_llm_plan_dir", None)
    if plan_dir is not None:
        shutil.rmtree(plan_dir, ignore_errors=True)
