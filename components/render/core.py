"""Core objects every stack renders: namespace, ServiceAccount, shared labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PART_OF = "gke-tpu-llm"
WI_ANNOTATION = "iam.gke.io/gcp-service-account"


def common_labels(stack: str, component: str) -> dict[str, str]:
    """Recommended Kubernetes labels; ``instance`` = stack so one selector finds a stack's objects."""
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/instance": stack,
        "app.kubernetes.io/component": component,
    }


def render_namespace(name: str, *, stack: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": common_labels(stack, "namespace")},
    }


def render_service_account(
    name: str,
    namespace: str,
    *,
    stack: str,
    gsa_email: Any | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A KSA; with ``gsa_email`` it carries the Workload Identity annotation that binds it to the GSA.

    Token automount stays on: TPU workloads (JAX, Ray, Pathways) call the Kubernetes API for peer
    discovery only through injected env vars, but the GCS FUSE sidecar and Ray need the token.
    """
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": common_labels(stack, "identity")}
    merged = dict(annotations or {})
    if gsa_email is not None:
        merged[WI_ANNOTATION] = gsa_email
    if merged:
        meta["annotations"] = merged
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
