"""Security scan of the rendered manifests with checkov, including the pods checkov cannot see.

checkov's Kubernetes checks read Pods, Deployments, Jobs and the other built-in workload kinds,
but not the pod templates nested in LeaderWorkerSet, JobSet, RayCluster and RayJob objects — which
is where every TPU container of this project runs. ``pod_templates`` lifts each such template out
as a ``Pod`` (named after its owner and path) so that all of checkov's container checks apply to
it too. ``SKIPS`` lists the checks every workload fails on purpose, with a reason true for each of
them; ``SCOPED_SKIPS`` the checks only some fail, each resource (``Kind/name``, globs allowed) with
its own reason. Those are declared where the objects are: each workload kind's
``WorkloadKindInfo.scan_waivers`` (its package's ``__init__``) and each cluster add-on's
``SCAN_WAIVERS`` (``components.platform.addons``); this module only merges them. Everything else
must pass, and a scoped check failing on a resource it does not list is a failure
(tests/test_scan.py, tests/test_least_privilege.py).
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..crds.releases import pod_template_paths as custom_resource_pod_template_paths
from ..program.build import ADDONS
from ..render.core import get_path
from ..workloads.registry import KINDS


def pod_templates(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The nested pod templates of a custom resource, each as a standalone ``Pod`` (``[]`` for the
    built-in kinds: checkov reads those itself)."""
    meta = obj.get("metadata") or {}
    pods = []
    for template_path in custom_resource_pod_template_paths(obj):
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


# Checks every workload fails by design, with a reason that holds for each resource (checkov ids).
SKIPS: Mapping[str, str] = {
    "CKV_K8S_11": "CPU limits: a CPU limit throttles a process (CFS quota) even while the node's CPUs are idle, which "
    "only adds latency to servers and hours to loads; CPU is shared through requests instead (set on the CPU-pool "
    "pods), and the TPU pods and the converter run on nodes no other workload shares",
    "CKV_K8S_15": "imagePullPolicy Always: every image is pinned to a released tag or, for the stack's own image, a "
    "content-derived tag in a repository with immutable tags (the policy pack rejects untagged and :latest), so "
    "Always would only re-check the same manifest; IfNotPresent restarts pods without a registry round trip "
    "(minutes for the multi-GB TPU images)",
    "CKV_K8S_37": "drop ALL capabilities: each container runs as its image's user and no image documents the "
    "capabilities it needs, so only NET_RAW is dropped (the GKE Autopilot baseline, components/render/core.py); "
    "no container adds any (CKV_K8S_25 passes everywhere)",
    "CKV_K8S_43": "image digests: images are pinned to released tags (offline, digests cannot be resolved); the policy "
    "pack rejects untagged and :latest images",
}


def merged_waivers(tables: Iterable[tuple[str, Mapping[str, Mapping[str, str]]]]) -> Mapping[str, Mapping[str, str]]:
    """One ``check -> {Kind/name: reason}`` table from ``(owner, table)`` pairs. A check an owner lists
    that ``SKIPS`` already skips everywhere, or a resource two owners both waive for one check, is a
    ValueError naming them (each waiver has one home)."""
    merged: dict[str, dict[str, str]] = {}
    owners: dict[tuple[str, str], str] = {}
    for owner, table in tables:
        for check, resources in table.items():
            if check in SKIPS:
                raise ValueError(f"{owner}: {check} is skipped for every resource already (SKIPS in components/tools/scan.py)")
            for pattern, reason in resources.items():
                first = owners.setdefault((check, pattern), owner)
                if first != owner:
                    raise ValueError(f"{check} {pattern}: waived by both {first} and {owner}")
                merged.setdefault(check, {})[pattern] = reason
    return merged


SCOPED_SKIPS: Mapping[str, Mapping[str, str]] = merged_waivers(
    [
        *((f"workload kind {info.kind}", info.scan_waivers) for info in KINDS),
        *((f"add-on {addon.NAME}", addon.SCAN_WAIVERS) for addon in ADDONS),
    ]
)
"""Checks some resources fail by design: check -> {``Kind/name`` (glob): why this resource fails it}."""


def resource_key(checkov_resource: str) -> str:
    """``Kind/name`` of a checkov resource id (``Kind.namespace.name``), the key of ``SCOPED_SKIPS``."""
    kind, _, rest = checkov_resource.partition(".")
    _, _, name = rest.partition(".")
    return f"{kind}/{name}"


def scoped_reason(check_id: str, key: str) -> str | None:
    """Why ``key`` (``Kind/name``) fails ``check_id`` by design, or None when it must not fail it."""
    for pattern, reason in (SCOPED_SKIPS.get(check_id) or {}).items():
        if fnmatch.fnmatchcase(key, pattern):
            return reason
    return None


def scanned_objects(manifests: Iterable[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(Kind/name, object)`` of what checkov checks: every manifest and every lifted pod template."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for obj in manifests:
        for doc in [obj, *pod_templates(obj)]:
            out.append((f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}", doc))
    return out


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


def run_checkov(checkov: Path, directory: Path, *, scoped: bool = True) -> list[dict[str, Any]]:
    """Failed checks as checkov reports them (``--skip-download``: offline, no platform calls), less
    the ``SKIPS`` and, with ``scoped``, the failures ``SCOPED_SKIPS`` lists for their resource."""
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
    failed = [failed for r in reports for failed in r.get("results", {}).get("failed_checks", [])]
    if not scoped:
        return failed
    return [f for f in failed if scoped_reason(f["check_id"], resource_key(f["resource"])) is None]
