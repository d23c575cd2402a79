"""Objects of the Custom Metrics Stackdriver Adapter, as plain dicts (pure functions, no Pulumi).

The upstream ``custom-metrics-stackdriver-adapter/deploy/production/adapter_new_resource_model.yaml``
(GoogleCloudPlatform/k8s-stackdriver) rendered here: same names, RBAC, APIServices and flags, with the
image tag from the stack's settings, pinned by digest when the catalog lists it, and the project's
labels and baseline security. The adapter serves Managed Prometheus metrics to HorizontalPodAutoscalers
(custom and external metrics APIs); the add-on that installs it is
``components.platform.addons.metrics_adapter``. Also here: who reaches it (``network_intents``) and
the checkov checks its upstream objects fail by design (``SCAN_WAIVERS``).
"""

from __future__ import annotations

from typing import Any

from ..catalog.images import pinned
from ..catalog.stackdriver_adapter import ADAPTER_IMAGE, ADAPTER_NAME, ADAPTER_NAMESPACE, UPSTREAM_MANIFEST
from . import netpol
from .core import AUTH_ANNOTATION, common_labels, with_baseline_security

COMPONENT = "metrics-adapter"
"""``app.kubernetes.io/component`` of every adapter object."""
ADAPTER_LABELS = {"run": ADAPTER_NAME, "k8s-app": ADAPTER_NAME}
ADAPTER_AUTH = "kube-apiserver delegation"


def _adapter_subject() -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE}]


def render_objects(stack: str, version: str) -> list[dict[str, Any]]:
    """The adapter that serves Managed Prometheus metrics to the HPA (custom + external metrics APIs)."""
    labels = common_labels(stack, COMPONENT)

    def meta(name: str, namespace: str | None = None, extra: dict[str, str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "labels": {**labels, **(extra or {})}}
        if namespace is not None:
            out["namespace"] = namespace
        return out

    def api_service(group: str, version_: str, priority: int) -> dict[str, Any]:
        return {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": meta(f"{version_}.{group}"),
            "spec": {
                "insecureSkipTLSVerify": True,
                "group": group,
                "groupPriorityMinimum": 100,
                "versionPriority": priority,
                "service": {"name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE},
                "version": version_,
            },
        }

    rbac = "rbac.authorization.k8s.io"
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(ADAPTER_NAMESPACE)},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(ADAPTER_NAME, ADAPTER_NAMESPACE)},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta("custom-metrics:system:auth-delegator"),
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": _adapter_subject(),
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": meta("custom-metrics-auth-reader", "kube-system"),
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "extension-apiserver-authentication-reader"},
            "subjects": _adapter_subject(),
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": meta("custom-metrics-resource-reader"),
            "rules": [{"apiGroups": [""], "resources": ["pods", "nodes", "nodes/stats"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta("custom-metrics-resource-reader"),
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "custom-metrics-resource-reader"},
            "subjects": _adapter_subject(),
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(ADAPTER_NAME, ADAPTER_NAMESPACE, ADAPTER_LABELS),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": dict(ADAPTER_LABELS)},
                "template": {
                    "metadata": {"labels": {**labels, **ADAPTER_LABELS, "kubernetes.io/cluster-service": "true"}},
                    "spec": {
                        "serviceAccountName": ADAPTER_NAME,
                        # The one pod that calls the Kubernetes API (render.core.API_TOKEN): an
                        # aggregated API server reading pods/nodes and delegating authentication.
                        "automountServiceAccountToken": True,
                        "containers": [
                            {
                                "name": "pod-custom-metrics-stackdriver-adapter",
                                # By digest when the catalog lists the tag (components/catalog/images.json).
                                "image": pinned(ADAPTER_IMAGE.repository, version),
                                "imagePullPolicy": "IfNotPresent",  # the tag is pinned; upstream's Always only adds pulls
                                "command": ["/adapter", "--use-new-resource-model=true", "--fallback-for-container-metrics=true"],
                                "resources": {
                                    "limits": {"cpu": "250m", "memory": "400Mi"},
                                    "requests": {"cpu": "250m", "memory": "400Mi"},
                                },
                            }
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                **meta(
                    ADAPTER_NAME,
                    ADAPTER_NAMESPACE,
                    {**ADAPTER_LABELS, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "Adapter"},
                ),
                # Open to any source (its policy: the control plane's address has no selector), but an
                # aggregated API server: every request needs the API server's front-proxy certificate or
                # a token it accepts (TokenReview, SubjectAccessReview; the auth-delegator and
                # auth-reader bindings below).
                "annotations": {AUTH_ANNOTATION: ADAPTER_AUTH},
            },
            "spec": {
                "ports": [{"port": 443, "protocol": "TCP", "targetPort": 443}],
                "selector": dict(ADAPTER_LABELS),
                "type": "ClusterIP",
            },
        },
        api_service("custom.metrics.k8s.io", "v1beta1", 100),
        api_service("custom.metrics.k8s.io", "v1beta2", 200),
        api_service("external.metrics.k8s.io", "v1beta1", 100),
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": meta("external-metrics-reader"),
            "rules": [{"apiGroups": ["external.metrics.k8s.io"], "resources": ["*"], "verbs": ["list", "get", "watch"]}],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta("external-metrics-reader"),
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "external-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler", "namespace": "kube-system"}],
        },
    ]
    return [with_baseline_security(obj) for obj in objects]


# ---------------------------------------------------------------- network flows (components.render.netpol)


def network_intents() -> tuple[netpol.Intent, ...]:
    """Who reaches the Custom Metrics Stackdriver Adapter (namespace custom-metrics), and why."""
    return (
        netpol.ServiceClients(
            "custom-metrics-api",
            ADAPTER_NAME,
            sources=(netpol.ANYWHERE,),
            why="kube-apiserver proxies custom.metrics.k8s.io and external.metrics.k8s.io (the APIServices) to this "
            "Service from the control plane, an address no selector names; requests are authenticated by the API "
            "server (auth-delegator)",
        ),
    )


# ---------------------------------------------------------------- checks failed by design (components.tools.scan)

DEPLOYMENT = f"Deployment/{ADAPTER_NAME}"
_AS_PUBLISHED = (
    f"the Custom Metrics Stackdriver Adapter is reproduced as published upstream (k8s-stackdriver {UPSTREAM_MANIFEST})"
)
_IMAGE_USER = (
    f"runs as its image's user, which the upstream manifest ({UPSTREAM_MANIFEST}) never overrides; not tested under "
    "another UID"
)

SCAN_WAIVERS: dict[str, dict[str, str]] = {
    "CKV_K8S_38": {  # service-account token mounted (components/render/core.py API_TOKEN)
        DEPLOYMENT: "calls the Kubernetes API: an aggregated API server (custom.metrics.k8s.io, external.metrics.k8s.io) "
        "that reads pods and nodes and delegates authentication and authorization to the API server",
    },
    "CKV_K8S_22": {DEPLOYMENT: f"{_AS_PUBLISHED}; not tested on a read-only root"},  # read-only root filesystem
    "CKV_K8S_23": {DEPLOYMENT: _IMAGE_USER},  # runAsNonRoot
    "CKV_K8S_40": {DEPLOYMENT: _IMAGE_USER},  # UID >= 10000
    "CKV_K8S_8": {DEPLOYMENT: f"{_AS_PUBLISHED}, without probes"},  # liveness probe
    "CKV_K8S_9": {DEPLOYMENT: f"{_AS_PUBLISHED}, without probes"},  # readiness probe
    "CKV2_K8S_5": {
        "ClusterRoleBinding/external-metrics-reader": f"{_AS_PUBLISHED}: it lets the HPA controller read external metrics",
    },
    "CKV_K8S_49": {
        "ClusterRole/external-metrics-reader": f"{_AS_PUBLISHED}: the external metrics API's resources are the "
        "metric names, so the rule lists them as *",
    },
}
"""The checkov checks the adapter's objects fail by design, per object (``Kind/name``), each with its reason."""
