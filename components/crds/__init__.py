"""The CustomResourceDefinitions of each supported controller release, vendored from upstream.

``components/crds/<controller>/<version>/*.json.gz`` are the ``charts/<chart>/crds/`` files of the
release tag (what ``helm install`` of that chart version would create; for Kueue, whose chart
renders its CRDs from ``templates/crd``, those templates rendered for release ``kueue``), one CRD
per file, as gzip-compressed minified JSON; ``SOURCE.json`` beside them records repository, tag,
commit, upstream path, git blob and license (table in ``README.md``). They serve two purposes:

* ``components.platform.addons.controllers.HelmController`` registers them as Pulumi resources for the configured
  version (the chart's own ``crds/`` are skipped: Helm installs those once and never upgrades them),
  so a version bump changes the CRDs in the plan and in the cluster; except for a chart whose CRDs
  are templates (Kueue), which the Helm release itself applies and upgrades;
* ``components.tools.validate`` validates our custom resources against the configured version's schema.

Which controllers there are, their upstream repositories and vendored releases, and the kinds they
serve are declared once in :mod:`components.crds.releases` (re-exported here). The supported
versions of a controller are its declared ``versions``, which are exactly the directories present
(tests/test_controllers.py); ``components.config.platform.ControllersSpec`` rejects any other. This
module is deliberately light (no Pulumi import) because the config and the validator use it.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .releases import CONTROLLERS, CUSTOM_RESOURCES, MANAGED

__all__ = ["CONTROLLERS", "CRD_DIR", "CUSTOM_RESOURCES", "MANAGED", "crds", "schema", "versions"]

CRD_DIR = Path(__file__).parent


def versions(controller: str) -> tuple[str, ...]:
    """Vendored releases of ``controller`` (``0.10.0`` style, no ``v``), oldest first."""
    if controller not in CONTROLLERS:
        raise KeyError(f"unknown controller {controller!r}; known: {', '.join(CONTROLLERS)}")
    return CONTROLLERS[controller].versions


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
