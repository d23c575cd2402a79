"""Shared fixtures: the project root on sys.path, and one offline plan per stack per session."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from components.config import stack_files as stacks  # noqa: E402
from components.config.loader import parse_stack_config, required_secrets  # noqa: E402
from components.config.stack import StackConfig  # noqa: E402
from components.tools import report  # noqa: E402

STACKS = stacks.list_stacks()


@cache
def planned(stack: str) -> report.PlanResult:
    """Plans are deterministic, so each stack runs once per test session."""
    return report.plan(stacks.read_stack_file(stacks.stack_path(stack)))


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

    parsed = stacks.read_stack_file(stacks.stack_path(stack))
    workload = copy.deepcopy(parsed.values["gke-tpu-llm:workload"])
    workload["maxtextRay"].setdefault("image", {})["built"] = f"{maxtext_render.image_tag(result.config)}@{BUILD_DIGEST}"
    return report.plan(dataclasses.replace(parsed, values={**parsed.values, "gke-tpu-llm:workload": workload}))


@pytest.fixture(params=STACKS)
def stack_plan(request: pytest.FixtureRequest) -> report.PlanResult:
    return planned(request.param)


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


def pytest_configure(config: pytest.Config) -> None:
    # pulumi_gcp warns about its own deprecated aliases on import; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:pulumi_gcp")
    # Tests that take seconds (XLA cross-checks, subprocess CLIs, checkov): `pytest -m "not slow"`
    # gives the quick loop; CI runs everything.
    config.addinivalue_line("markers", "slow: takes seconds; deselect with -m 'not slow' for a quick loop")
