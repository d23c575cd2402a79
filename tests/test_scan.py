"""checkov over every stack's manifests, with the pod templates nested in custom resources lifted out."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from components.config import stack_files as stacks
from components.render.core import pod_template_paths
from components.tools.scan import SCOPED_SKIPS, SKIPS, pod_templates, resource_key, run_checkov, scan_inputs, scoped_reason
from tests.conftest import STACKS, planned_built

CHECKOV = stacks.ROOT / ".venv" / "scan" / "bin" / "checkov"


def test_scan_lifts_pod_templates_from_custom_resources() -> None:
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "srv", "namespace": "llm"},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 5,
                "leaderTemplate": {"spec": {"containers": [{"name": "l", "image": "a:1"}]}},
                "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "b:1"}]}},
            }
        },
    }
    pods = pod_templates(lws)
    assert [p["metadata"]["name"] for p in pods] == [
        "srv-leaderworkertemplate-leadertemplate",
        "srv-leaderworkertemplate-workertemplate",
    ]
    assert all(p["kind"] == "Pod" and p["metadata"]["namespace"] == "llm" for p in pods)
    assert pods[1]["spec"]["containers"][0]["image"] == "b:1"
    jobset = {
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [{"name": "r", "template": {"spec": {"template": {"spec": {"containers": []}}}}}]},
    }
    assert [p["metadata"]["name"] for p in pod_templates(jobset)] == ["js-replicatedjobs-0-template-spec-template"]
    ray = {
        "kind": "RayJob",
        "metadata": {"name": "rj"},
        "spec": {
            "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {}}}, "workerGroupSpecs": [{"template": {"spec": {}}}]}
        },
    }
    assert len(pod_templates(ray)) == 2


def _template_shaped(value: Any, path: tuple[str | int, ...] = ()) -> set[tuple[str | int, ...]]:
    """Paths to every mapping shaped like a pod template (``spec.containers`` a list), found by walking."""
    found: set[tuple[str | int, ...]] = set()
    if isinstance(value, Mapping):
        spec = value.get("spec")
        if isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
            found.add(path)
        for key, sub in value.items():
            found |= _template_shaped(sub, (*path, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            found |= _template_shaped(sub, (*path, index))
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_scan_pod_template_paths_know_every_rendered_pod_template(stack: str) -> None:
    # A kind with pod templates that the table (components/crds/releases.py) does not know, or
    # knows at the wrong paths, would escape the baseline security, the scan and the network policies.
    for obj in planned_built(stack).manifests:  # a training stack's objects once its image is built
        paths = pod_template_paths(obj)
        assert len(paths) == len(set(paths))
        assert set(paths) == _template_shaped(obj), f"{obj['kind']}/{obj['metadata']['name']}"


def test_scan_every_skip_has_a_reason() -> None:
    assert all(check.startswith("CKV") and len(reason) > 20 for check, reason in SKIPS.items())
    assert all(check.startswith("CKV") and resources for check, resources in SCOPED_SKIPS.items())
    assert resource_key("Pod.llama-405b.jetstream-pathways-leaderworkertemplate-workertemplate") == (
        "Pod/jetstream-pathways-leaderworkertemplate-workertemplate"
    )
    assert resource_key("ClusterRole.default.external-metrics-reader") == "ClusterRole/external-metrics-reader"


@pytest.mark.skipif(
    not CHECKOV.exists() and not os.environ.get("CI"), reason="checkov is installed by `bash .ci/setup` into .venv/scan"
)
@pytest.mark.slow
def test_scan_checkov_clean_except_listed_skips(tmp_path: Path) -> None:
    files = scan_inputs({s: planned_built(s).manifests for s in STACKS}, tmp_path)  # training: once built
    assert files
    failed = run_checkov(CHECKOV, tmp_path, scoped=False)
    # A scoped check may fail only on the resources it lists (each with its own reason) ...
    uncovered = sorted(
        {(f["check_id"], f["resource"]) for f in failed if scoped_reason(f["check_id"], resource_key(f["resource"])) is None}
    )
    assert uncovered == [], "\n".join(f"{c} {r}" for c, r in uncovered)
    # ... and every resource it lists does fail it: a listed resource that passes is a stale reason.
    hits = {(f["check_id"], resource_key(f["resource"])) for f in failed}
    stale = [
        f"{check} {pattern}"
        for check, resources in SCOPED_SKIPS.items()
        for pattern in resources
        if not any(c == check and fnmatch.fnmatchcase(key, pattern) for c, key in hits)
    ]
    assert stale == [], "\n".join(stale)


@pytest.mark.parametrize("stack", STACKS)
def test_scan_every_registered_pod_template_has_the_baseline_security(stack: str) -> None:
    from components.render.core import get_path

    templates = [get_path(obj, path) for obj in planned_built(stack).manifests for path in pod_template_paths(obj)]
    assert templates  # every stack runs pods
    for template in templates:
        assert template["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in template["spec"]["containers"] + template["spec"].get("initContainers", []):
            ctx = container["securityContext"]
            assert "NET_RAW" in ctx["capabilities"]["drop"] or "ALL" in ctx["capabilities"]["drop"]
            assert ctx.get("privileged") or ctx["allowPrivilegeEscalation"] is False
