"""Kubernetes manifests from recorded registrations: the objects as registered, and their YAML
files (``python -m components render`` writes the committed goldens under ``manifests/``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..config.stack_files import ROOT

if TYPE_CHECKING:
    from .mockengine import Registration

MANIFESTS_DIR = ROOT / "manifests"

# Objects others depend on come first, so `kubectl apply -f DIR` works in one pass.
_KIND_ORDER = ("Namespace", "ServiceAccount", "Secret", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "RoleBinding")


def manifests_of(resources: list[Registration]) -> list[dict[str, Any]]:
    """Kubernetes objects as registered (provider resources excluded), in apply-friendly order."""
    objs: list[dict[str, Any]] = []
    for res in resources:
        if not res.type.startswith("kubernetes:") or res.type.startswith("pulumi:providers:") or not res.custom:
            continue
        if res.type.startswith("kubernetes:helm.sh/"):
            continue  # a Helm release (controller install) is not an object manifest
        inputs = dict(res.inputs)
        if inputs.get("kind") == "CustomResourceDefinition":
            continue  # vendored upstream CRDs (components/crds): huge data; the plan's resources show changes
        obj = {"apiVersion": inputs.pop("apiVersion"), "kind": inputs.pop("kind")}
        obj.update(inputs)
        objs.append(obj)

    def order(obj: dict[str, Any]) -> tuple[int, str, str]:
        kind = obj["kind"]
        rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
        meta = obj.get("metadata", {})
        return rank, kind, f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    return sorted(objs, key=order)


def manifest_files(manifests: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(file name, YAML text) per object; names are deterministic so diffs are per object."""
    for i, obj in enumerate(manifests):
        meta = obj.get("metadata", {})
        ns = meta.get("namespace")
        # File names stay portable: ':' (as in RBAC names like system:auth-delegator) becomes '-'.
        stem = re.sub(r"[^A-Za-z0-9._-]", "-", f"{(ns + '-') if ns else ''}{meta.get('name', 'unnamed')}")
        base = f"{i:02d}-{obj['kind'].lower()}-{stem}.yaml"
        yield base, yaml.safe_dump(obj, sort_keys=True, default_flow_style=False)


def write_manifests(stack: str, manifests: list[dict[str, Any]], out_dir: Path | None = None) -> list[Path]:
    """Write one YAML file per object to ``out_dir`` (default ``manifests/<stack>/``) and delete the
    files of objects that no longer exist."""
    target = out_dir or (MANIFESTS_DIR / stack)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, text in manifest_files(manifests):
        path = target / name
        path.write_text(text)
        written.append(path)
    for stale in set(target.glob("*.yaml")) - set(written):
        stale.unlink()
    return written
