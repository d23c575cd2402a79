"""Physical names and the GCP/Kubernetes limits they must meet. Pure functions.

Names are deterministic (same stack, same names) so previews are stable and a reviewer can predict
them. Where a limit forces truncation, a short hash of the full name keeps names unique.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

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


RESOURCE_POLICY_NAME_MAX = 63


def workload_policy_name(cluster: str, pool: str, topology: str) -> str:
    """``<cluster>-<pool>-<topology>``, RFC 1035, ≤ 63 characters: Compute resource policies are
    unique per project and region, so the cluster (unique per project and location) is part of the
    name; the topology too, so a topology change creates the new policy before the old one goes."""
    return fit(f"{cluster}-{pool}-{topology}", RESOURCE_POLICY_NAME_MAX)


SYSTEM_POOL = "system"
"""The stack's CPU node pool (``GkeCluster.system_pool``): the pods that need no chip are pinned to it
(Saxml's admin server, the in-cluster benchmark, Kueue's system flavor)."""

TIER_POOL_SUFFIX = {
    "onDemand": "ondemand",
    "spot": "spot",
    "reservation": "reservation",
    "flexStart": "flex",
    "queuedProvisioning": "queued",
}
"""Pool-name suffix per capacity type (``tpu.capacity[].type``) of a fallback tier after the first."""


def node_pool_name(index: int, tier_index: int = 0, tier_type: str = "onDemand") -> str:
    """``tpu-slice-0``: the slice's index only. A name that encoded the shape (generation, topology)
    turned a topology change into a second pool created beside the first (double the chips, quota
    and bill during the rollout); with a stable name the one pool is replaced delete-before-replace.

    The first capacity tier keeps that name, so adding fallback tiers to a stack leaves its pool in
    place; a later tier is ``tpu-slice-0-<type>`` (``tpu-slice-0-flex``), named by its capacity type
    rather than its position, so inserting or removing another tier does not rename it."""
    if tier_index == 0:
        return f"tpu-slice-{index}"
    return f"tpu-slice-{index}-{TIER_POOL_SUFFIX[tier_type]}"


def legacy_node_pool_name(slice_key: str, index: int) -> str:
    """The name releases before stable pool names gave slice ``index`` of shape ``slice_key``
    (``tpu-v6e-4x4-0``); pools created then keep it (see ``TpuSlicePool``'s aliases)."""
    return fit(f"tpu-{slice_key}-{index}", GKE_NAME_MAX)


def bucket_name(project: str, stack: str, key: str) -> str:
    """Globally unique bucket name ``<project>-<stack>-<key>`` (≤ 63, never 'goog' first, never
    'google' or a look-alike).

    Buckets are named as they always were ('goog' -> 'g00g') wherever that name is valid, so no
    existing bucket is renamed. Only names that were invalid before (GCS forbids 'google' and
    close misspellings such as the 'g00gle' the old mapping produced) are mapped anew:
    'google' and its look-alikes -> 'ggl' first."""
    legacy = fit(f"{project}-{stack}-{key}".replace("goog", "g00g"), BUCKET_NAME_MAX)
    if not bucket_name_problems(legacy):
        return legacy
    return fit(_GOOGLE_LIKE.sub("ggl", _slug(f"{project}-{stack}-{key}")).replace("goog", "g00g"), BUCKET_NAME_MAX)


def service_account_id(stack: str, role: str) -> str:
    """Google service-account id (6-30 characters, starts with a letter)."""
    name = _slug(f"{stack}-{role}")
    if not name[:1].isalpha():
        name = f"sa-{name}"
    name = fit(name, GSA_ID_MAX)
    return name if len(name) >= GSA_ID_MIN else f"{name}-{_digest(name, GSA_ID_MIN)}"


def label_value(text: str) -> str:
    """GCP label values: lowercase letters, digits, '-' and '_', ≤ 63."""
    return fit(text, LABEL_VALUE_MAX)


def dns_label(text: str) -> str:
    """A Kubernetes namespace/ServiceAccount name (RFC 1123 label, ≤ 63)."""
    name = fit(text, 63).strip("-")
    return name if name and name[0].isalnum() else f"ns-{name}".strip("-")


# ---- display names (IAM limits them to 100 UTF-8 bytes) ----

DISPLAY_NAME_MAX_BYTES = 100


def fit_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (ending in '…' when cut)."""
    if len(text.encode()) <= limit:
        return text
    out = text
    while len((out + "…").encode()) > limit:
        out = out[:-1]
    return out.rstrip() + "…"


def workload_gsa_display_name(stack: str, namespace: str, ksa: str) -> str:
    """Display name of the workloads' Google service account (identity.mode gsa)."""
    return fit_bytes(f"{stack} workloads ({namespace}/{ksa})", DISPLAY_NAME_MAX_BYTES)


def node_gsa_display_name(stack: str, *, pods_act_as_it: bool = False) -> str:
    """Display name of the nodes' Google service account (every node pool of the stack); with GCE
    metadata TPU pools, their pods act as it, which the name says."""
    suffix = " (GCE metadata: TPU pods act as this account)" if pods_act_as_it else ""
    return fit_bytes(f"{stack} GKE nodes{suffix}", DISPLAY_NAME_MAX_BYTES)


# ---- validators: pure functions returning the rules a physical name breaks ([] = valid) ----

_GOOGLE_LIKE = re.compile(r"g[o0]{2}g[l1]e")
"""'google' and the close misspellings GCS rejects in bucket names ('g00gle', 'goog1e', ...)."""
_BUCKET_CHARS = re.compile(r"^[a-z0-9](?:[-_a-z0-9]*[a-z0-9])?$")
GSA_ID_PATTERN = r"^[a-z](?:[-a-z0-9]*[a-z0-9])?$"
LABEL_VALUE_PATTERN = r"^[-_a-z0-9]*$"
STACK_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,100}$"
"""Pulumi stack names (the part after an org/project prefix)."""

RESERVED_NAMESPACE_PREFIXES = ("kube-", "gke-", "gmp-")
"""Kubernetes' own (kube-system, kube-public, kube-node-lease) and GKE-managed namespaces
(gke-managed-*, gke-gmp-system; gmp-system and gmp-public of Managed Prometheus)."""
RESERVED_NAMESPACES = frozenset({"lws-system", "jobset-system", "custom-metrics", "kueue-system"})
"""Namespaces the stack's own controllers create: LeaderWorkerSet and JobSet (components/
controllers.py), Kueue for queued provisioning, and the Custom Metrics Stackdriver Adapter
(components/workloads/vllm/render.py)."""


def bucket_name_problems(name: str) -> list[str]:
    """GCS bucket naming rules (names without dots)."""
    out: list[str] = []
    if not 3 <= len(name) <= BUCKET_NAME_MAX:
        out.append(f"has {len(name)} characters (GCS allows 3-{BUCKET_NAME_MAX})")
    if not _BUCKET_CHARS.match(name):
        out.append("may hold only lowercase letters, digits, '-' and '_', starting and ending with a letter or digit")
    if name.startswith("goog"):
        out.append("starts with 'goog', which GCS forbids")
    if _GOOGLE_LIKE.search(name):
        out.append("contains 'google' or a close misspelling of it, which GCS forbids")
    return out


def service_account_id_problems(account_id: str) -> list[str]:
    out: list[str] = []
    if not GSA_ID_MIN <= len(account_id) <= GSA_ID_MAX:
        out.append(f"has {len(account_id)} characters (IAM allows {GSA_ID_MIN}-{GSA_ID_MAX})")
    if not re.match(GSA_ID_PATTERN, account_id):
        out.append("must start with a letter and hold only lowercase letters, digits and '-'")
    return out


def display_name_problems(display_name: str) -> list[str]:
    size = len(display_name.encode())
    return [f"is {size} bytes (IAM allows {DISPLAY_NAME_MAX_BYTES})"] if size > DISPLAY_NAME_MAX_BYTES else []


def gke_name_problems(name: str) -> list[str]:
    if re.match(GKE_NAME_PATTERN, name):
        return []
    return [f"is not a GKE name (a letter first, then lowercase letters, digits or '-', at most {GKE_NAME_MAX})"]


def label_value_problems(value: str) -> list[str]:
    out: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        out.append(f"has {len(value)} characters (labels allow {LABEL_VALUE_MAX})")
    if not re.match(LABEL_VALUE_PATTERN, value):
        out.append("may hold only lowercase letters, digits, '-' and '_'")
    return out


def namespace_problems(namespace: str) -> list[str]:
    """A namespace the stack creates: an RFC 1123 label that no one else owns."""
    if not re.match(DNS_LABEL_PATTERN, namespace):
        return ["is not an RFC 1123 label (lowercase letters, digits and '-', at most 63, alphanumeric at both ends)"]
    if namespace.startswith(RESERVED_NAMESPACE_PREFIXES) or namespace in RESERVED_NAMESPACES:
        return ["is reserved: Kubernetes, GKE or one of the stack's controllers owns it (creating it fails with AlreadyExists)"]
    return []


def service_account_name_problems(name: str) -> list[str]:
    """The Kubernetes ServiceAccount the stack creates in its namespace."""
    if not re.match(DNS_LABEL_PATTERN, name):
        return ["is not an RFC 1123 label"]
    if name == "default":
        return ["is the ServiceAccount Kubernetes creates in every namespace (creating it fails with AlreadyExists)"]
    return []


def stack_name_problems(stack: str) -> list[str]:
    if re.match(STACK_NAME_PATTERN, stack):
        return []
    return ["is not a Pulumi stack name (1-100 letters, digits, '_', '.' or '-')"]


def collisions(names: Mapping[str, str]) -> dict[str, list[str]]:
    """Physical name -> the keys (in order) that map to it, for every name claimed more than once."""
    by_name: dict[str, list[str]] = {}
    for key, name in names.items():
        by_name.setdefault(name, []).append(key)
    return {name: keys for name, keys in by_name.items() if len(keys) > 1}
