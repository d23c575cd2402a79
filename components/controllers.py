"""``HelmController``: a pinned upstream controller (LWS, JobSet) installed as a Helm release.

Why a Helm release (``kubernetes:helm.sh/v3:Release``) rather than ``yaml/v2`` or ``helm.v4.Chart``:
the release previews while the cluster does not exist yet (pulumi-kubernetes#1794, fixed by #1886),
whereas ``helm.v4.Chart`` fails to parse an unknown kubeconfig at preview (#3027) and ``yaml/v2``
cannot tell whether a kind is namespaced when its CRD arrives in the same run (#3176). The chart is
taken from the project's OCI registry at the configured version, so an upgrade is one reviewed
change of ``gke-tpu-llm:controllers``. Custom resources of the controller must depend on this
component's ``release`` so they are created after the CRDs and the webhook.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class ControllerChart:
    """Where an upstream controller's chart lives and the namespace it is installed into."""

    chart: str
    namespace: str
    source: str


CHARTS: Mapping[str, ControllerChart] = {
    "lws": ControllerChart(
        chart="oci://registry.k8s.io/lws/charts/lws",
        namespace="lws-system",
        source="kubernetes-sigs/lws charts/lws (chart version = release version)",
    ),
    "jobset": ControllerChart(
        chart="oci://registry.k8s.io/jobset/charts/jobset",
        namespace="jobset-system",
        source="kubernetes-sigs/jobset charts/jobset (chart version = release version)",
    ),
}


class HelmController(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:controllers:HelmController"

    release: k8s.helm.v3.Release
    status: pulumi.Output[Any]

    def __init__(
        self,
        name: str,
        *,
        controller: str,
        version: str,
        provider: k8s.Provider,
        values: Mapping[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        chart = CHARTS[controller]
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=controller,
            chart=chart.chart,
            version=version,
            namespace=chart.namespace,
            create_namespace=True,
            values=dict(values or {}),
            # Wait for the controller's Deployment (and so its webhook) before dependents apply.
            skip_await=False,
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self.status = self.release.status
        self.register_outputs({"status": self.status})
