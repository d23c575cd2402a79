"""Register a rendered Kubernetes object (a dict) as the matching pulumi_kubernetes resource.

Built-in kinds use their typed resource classes, so the preview shows e.g. ``kubernetes:apps/v1:Deployment``
and the provider's schema checks the fields; custom resources (LWS, JobSet, RayCluster, …) go through
``apiextensions.CustomResource``. The dicts keep Kubernetes' own camelCase keys, which is the wire format.

Objects are registered exactly as rendered: the baseline security context is part of the render
(``components.render.core.with_baseline_security``), so the goldens are what is registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

_TYPED: Mapping[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): k8s.autoscaling.v2.HorizontalPodAutoscaler,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("apiregistration.k8s.io/v1", "APIService"): k8s.apiregistration.v1.APIService,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
}


def snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def create(obj: Mapping[str, Any], resource_name: str, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Create the resource for ``obj``; top-level fields become constructor arguments."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    if (api_version, kind) == ("v1", "Secret"):
        # The typed Secret wraps the whole data map in one secret value, so previews (and the schema
        # check of the offline render) would see an opaque string where a map belongs. The same type
        # token registered directly keeps the keys visible, each value a secret Output, and marks
        # data/stringData as secret outputs exactly as the typed class does.
        secret_opts = pulumi.ResourceOptions(additional_secret_outputs=["data", "stringData"])
        return pulumi.CustomResource(
            "kubernetes:core/v1:Secret", resource_name, dict(obj), opts=pulumi.ResourceOptions.merge(opts, secret_opts)
        )
    fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    cls = _TYPED.get((api_version, kind))
    if cls is not None:
        resource: pulumi.CustomResource = cls(resource_name, opts=opts, **{snake(k): v for k, v in fields.items()})
        return resource
    return k8s.apiextensions.CustomResource(resource_name, api_version=api_version, kind=kind, opts=opts, **fields)
