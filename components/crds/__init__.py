"""The CustomResourceDefinitions of each supported controller release, vendored from upstream.

``components/crds/<controller>/<version>/*.json.gz`` are the ``charts/<chart>/crds/`` files of the
release tag (what ``helm install`` of that chart version would create), one CRD per file, as
gzip-compressed minified JSON; ``SOURCE.json`` beside them records repository, tag, commit, upstream
path, git blob and license (table in ``README.md``). They serve two purposes:

* ``components.controllers.HelmController`` registers them as Pulumi resources for the configured
  version (the chart's own ``crds/`` are skipped: Helm installs those once and never upgrades them),
  so a version bump changes the CRDs in the plan and in the cluster;
* ``components.validate`` validates our custom resources against the configured version's schema.

The supported versions of a controller are exactly the directories present (``versions``);
``components.config.ControllersSpec`` rejects any other. This module is deliberately light (no
Pulumi import) because the config and the validator use it.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CRD_DIR", "REPOSITORIES", "crds", "schema", "versions"]

CRD_DIR = Path(__file__).parent

#: controller -> (upstream GitHub repository, chart CRD directory in it).
REPOSITORIES: Mapping[str, tuple[str, str]] = {
    "lws": ("kubernetes-sigs/lws", "charts/lws/crds"),
    "jobset": ("kubernetes-sigs/jobset", "charts/jobset/crds"),
}

_VERSION_RE = re.compile(r"\d+\.\d+\.\d+")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@functools.cache
def versions(controller: str) -> tuple[str, ...]:
    """Vendored releases of ``controller`` (``0.10.0`` style, no ``v``), oldest first."""
    if controller not in REPOSITORIES:
        raise KeyError(f"unknown controller {controller!r}; known: {', '.join(REPOSITORIES)}")
    base = CRD_DIR / controller
    found = [p.name for p in base.iterdir() if p.is_dir() and _VERSION_RE.fullmatch(p.name) and any(p.glob("*.json.gz"))]
    return tuple(sorted(found, key=_version_key))


@functools.cache
def _texts(controller: str, version: str) -> tuple[str, ...]:
    if version not in versions(controller):
        raise KeyError(
            f"no vendored CRDs for {controller} {version!r}; vendored: {', '.join(versions(controller))} "
            f"(components/crds/README.md explains how to add a release)"
        )
    files = sorted((CRD_DIR / controller / version).glob("*.json.gz"))
    return tuple(gzip.decompress(f.read_bytes()).decode("utf-8") for f in files)


def crds(controller: str, version: str) -> list[dict[str, Any]]:
    """The release's CRD objects (fresh copies, safe to mutate), sorted by ``metadata.name``."""
    objs = [json.loads(text) for text in _texts(controller, version)]
    return sorted(objs, key=lambda crd: str(crd["metadata"]["name"]))


def schema(controller: str, version: str, api_version: str, kind: str) -> dict[str, Any]:
    """``openAPIV3Schema`` of ``kind`` at ``api_version`` (``<group>/<version>``) in the release's CRDs."""
    group, _, served = api_version.rpartition("/")
    for crd in crds(controller, version):
        spec: Mapping[str, Any] = crd["spec"]
        if spec["group"] != group or spec["names"]["kind"] != kind:
            continue
        for crd_version in spec["versions"]:
            if crd_version["name"] == served:
                return dict(crd_version["schema"]["openAPIV3Schema"])
    raise KeyError(f"{controller} {version} has no CRD serving {api_version} {kind}")
