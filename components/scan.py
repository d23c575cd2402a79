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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from components.render.core import get_path, pod_template_paths


def pod_templates(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The nested pod templates of a custom resource, each as a standalone ``Pod``."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") in ("Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet"):
        return []  # checkov reads these itself
    pods = []
    for template_path in pod_template_paths(obj):
        template = get_path(obj, template_path)
        path = ".".join(str(p) for p in template_path[1:])
        tmeta = dict(template.get("metadata") or {})
        slug = path.replace(".", "-")
        tmeta["name"] = f"{meta.get('name', 'unnamed')}-{slug}".lower()
        if "namespace" in meta:
            tmeta["namespace"] = meta["namespace"]
        tmeta.setdefault("annotations", {})
        tmeta["annotations"] = {**tmeta["annotations"], "gke-tpu-llm/lifted-from": f"{obj.get('kind')}/{meta.get('name')}:{path}"}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": tmeta, "spec": template.get("spec") or {}})
    return pods


# Checks the workloads fail by design, with the reason (checkov ids). Everything else must pass.
SKIPS: Mapping[str, str] = {
    "CKV_K8S_10": "CPU requests: TPU pods own whole TPU VMs (GKE schedules by google.com/tpu) and CPU servers are tiny; "
    "requests would only cap model loading",
    "CKV_K8S_11": "CPU limits: throttling the host process of a TPU VM slows the accelerator; TPU nodes run one pod each",
    "CKV_K8S_12": "memory requests: as CPU requests; the TPU VM's whole RAM belongs to its single pod",
    "CKV_K8S_13": "memory limits: an OOM kill during a 400 GB checkpoint restore costs 20 minutes of a TPU slice",
    "CKV_K8S_15": "imagePullPolicy Always: images are pinned by tag (policy no-unpinned-images) and are tens of GB; "
    "IfNotPresent avoids re-pulls on restart",
    "CKV_K8S_22": "read-only root filesystem: JAX, vLLM, Ray and Saxml write caches and compilation artefacts "
    "under their image paths",
    "CKV_K8S_23": "non-root: the upstream TPU serving and training images run as root",
    "CKV_K8S_40": "high UID: the upstream TPU serving and training images run as root",
    "CKV_K8S_37": "drop ALL capabilities: the upstream images are not tested without default capabilities; NET_RAW is "
    "dropped everywhere (baseline security)",
    "CKV_K8S_25": "added capabilities: the disaggregated JetStream server needs SYS_PTRACE/NET_ADMIN/SYS_TIME as upstream",
    "CKV_K8S_43": "image digests: images are pinned to released tags (offline, digests cannot be resolved); the policy "
    "pack rejects untagged and :latest images",
    "CKV_K8S_35": "secrets as env vars: vLLM and the checkpoint converter read the token/URL from environment variables",
    "CKV_K8S_38": "service account token: GCS FUSE, Ray and LWS TPU environment injection rely on the pod's KSA",
    "CKV_K8S_8": "liveness probes: batch pods (conversion, publish, Ray jobs) and Pathways/Ray workers have no health endpoint",
    "CKV_K8S_9": "readiness probes: batch pods and Pathways/Ray workers serve no traffic",
    "CKV2_K8S_6": "NetworkPolicy: LWS/Pathways, JobSet and Ray use dynamic peer ports inside the namespace; not modelled yet",
    "CKV2_K8S_5": "upstream Custom Metrics Stackdriver Adapter RBAC (external-metrics-reader) is reproduced as published",
    "CKV_K8S_49": "upstream Custom Metrics Stackdriver Adapter ClusterRole uses wildcards as published",
}


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
