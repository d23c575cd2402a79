"""Physical names and the GCP/Kubernetes limits they must meet. Pure functions.

Names are deterministic (same stack, same names) so previews are stable and a reviewer can predict
them. Where a limit forces truncation, a short hash of the full name keeps names unique.
"""

from __future__ import annotations

import hashlib
import re

GKE_NAME_PATTERN = r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$"
"""GKE cluster and node-pool names: lowercase, start with a letter, at most 40 characters."""
DNS_LABEL_PATTERN = r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$"
"""Kubernetes namespace / ServiceAccount names (RFC 1123 label)."""
PROJECT_ID_PATTERN = r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$"
"""GCP project ids: 6-30 characters."""

GKE_NAME_MAX = 40
BUCKET_NAME_MAX = 63
GSA_ID_MIN, GSA_ID_MAX = 6, 30
LABEL_VALUE_MAX = 63


def _digest(text: str, n: int = 6) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _slug(text: str) -> str:
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def fit(name: str, limit: int) -> str:
    """Truncate ``name`` to ``limit`` characters, ending in a hash of the full name when cut."""
    name = _slug(name)
    if len(name) <= limit:
        return name
    digest = _digest(name)
    return f"{name[: limit - len(digest) - 1].rstrip('-')}-{digest}"


def gke_name(stack: str) -> str:
    """Cluster name from the stack name: must start with a letter, ≤ 40 characters."""
    name = _slug(stack)
    if not name or not name[0].isalpha():
        name = f"c-{name}"
    return fit(name, GKE_NAME_MAX)


def node_pool_name(slice_key: str, index: int) -> str:
    """``tpu-v6e-4x4-0``: generation and topology in the name, so a topology change shows as a new pool."""
    return fit(f"tpu-{slice_key}-{index}", GKE_NAME_MAX)


def bucket_name(project: str, stack: str, key: str) -> str:
    """Globally unique bucket name ``<project>-<stack>-<key>`` (≤ 63, no 'goog')."""
    return fit(f"{project}-{stack}-{key}".replace("goog", "g00g"), BUCKET_NAME_MAX)


def service_account_id(stack: str, role: str) -> str:
    """Google service-account id (6-30 characters, starts with a letter)."""
    name = _slug(f"{stack}-{role}")
    if not name[0].isalpha():
        name = f"sa-{name}"
    name = fit(name, GSA_ID_MAX)
    return name if len(name) >= GSA_ID_MIN else f"{name}-{_digest(name, GSA_ID_MIN)}"


def label_value(text: str) -> str:
    """GCP label values: lowercase letters, digits, '-' and '_', ≤ 63."""
    return fit(text, LABEL_VALUE_MAX)


def dns_label(text: str) -> str:
    """A Kubernetes namespace/ServiceAccount name (RFC 1123 label, ≤ 63)."""
    name = fit(text, 63).strip("-")
    return name if name and name[0].isalnum() else f"ns-{name}"
