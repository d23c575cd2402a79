"""Security scan of the rendered manifests with checkov, including the pods checkov cannot see.

checkov's Kubernetes checks read Pods, Deployments, Jobs and the other built-in workload kinds,
but not the pod templates nested in LeaderWorkerSet, JobSet, RayCluster and RayJob objects — which
is where every TPU container of this project runs. ``pod_templates`` lifts each such template out
as a ``Pod`` (named after its owner and path) so that all of checkov's container checks apply to
it too. ``SKIPS`` lists the checks the workloads fail on purpose, each with its reason; everything
else must pass (see tests/test_scan.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

# (apiVersion prefix, kind) -> functions yielding (path, pod template) pairs.
_TEMPLATE_PATHS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "LeaderWorkerSet": (("spec", "leaderWorkerTemplate", "leaderTemplate"), ("spec", "leaderWorkerTemplate", "workerTemplate")),
    "RayCluster": (("spec", "headGroupSpec", "template"),),
}


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _templates(obj: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    for path in _TEMPLATE_PATHS.get(str(kind), ()):
        template = _dig(obj, path)
        if isinstance(template, Mapping):
            yield ".".join(path[1:]), template
    if kind == "JobSet":
        for i, rjob in enumerate(spec.get("replicatedJobs", [])):
            template = _dig(rjob, ("template", "spec", "template"))
            if isinstance(template, Mapping):
                yield f"replicatedJobs[{i}]", template
    if kind in ("RayCluster", "RayJob"):
        cluster = spec if kind == "RayCluster" else spec.get("rayClusterSpec") or {}
        prefix = "" if kind == "RayCluster" else "rayClusterSpec."
        if kind == "RayJob" and isinstance(_dig(cluster, ("headGroupSpec", "template")), Mapping):
            yield f"{prefix}headGroupSpec", cluster["headGroupSpec"]["template"]
        for i, group in enumerate(cluster.get("workerGroupSpecs", [])):
            if isinstance(group.get("template"), Mapping):
                yield f"{prefix}workerGroupSpecs[{i}]", group["template"]
        submitter = _dig(spec, ("submitterPodTemplate",))
        if kind == "RayJob" and isinstance(submitter, Mapping):
            yield "submitterPodTemplate", submitter


def pod_templates(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The nested pod templates of a custom resource, each as a standalone ``Pod``."""
    meta = obj.get("metadata") or {}
    pods = []
    for path, template in _templates(obj):
        tmeta = dict(template.get("metadata") or {})
        slug = path.replace(".", "-").replace("[", "-").replace("]", "")
        tmeta["name"] = f"{meta.get('name', 'unnamed')}-{slug}".lower()
        if "namespace" in meta:
            tmeta["namespace"] = meta["namespace"]
        tmeta.setdefault("annotations", {})
        tmeta["annotations"] = {**tmeta["annotations"], "gke-tpu-llm/lifted-from": f"{obj.get('kind')}/{meta.get('name')}:{path}"}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": tmeta, "spec": template.get("spec") or {}})
    return pods


# Checks the workloads fail by design, with the reason (checkov ids).
SKIPS: Mapping[str, str] = {}


def scan_inputs(manifests: Mapping[str, list[dict[str, Any]]], out_dir: Path) -> list[Path]:
    """Write every stack's manifests plus the lifted pods to ``out_dir`` (one file per object)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stack, objs in manifests.items():
        for i, obj in enumerate(objs):
            for j, doc in enumerate([obj, *pod_templates(obj)]):
                path = out_dir / f"{stack}-{i:02d}-{j:02d}.yaml"
                path.write_text(yaml.safe_dump(doc, sort_keys=True))
                written.append(path)
    return written


def run_checkov(checkov: Path, directory: Path) -> list[dict[str, Any]]:
    """Failed checks as checkov reports them (``--skip-download``: offline, no platform calls)."""
    cmd = [
        str(checkov),
        "--directory",
        str(directory),
        "--framework",
        "kubernetes",
        "--output",
        "json",
        "--quiet",
        "--skip-download",
        "--compact",
    ]
    if SKIPS:
        cmd += ["--skip-check", ",".join(sorted(SKIPS))]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout or "{}")
    reports = report if isinstance(report, list) else [report]
    return [failed for r in reports for failed in r.get("results", {}).get("failed_checks", [])]
