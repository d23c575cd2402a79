"""``Observability``: the stack's Cloud Monitoring dashboard and alert policies, a cluster-level add-on
every stack gets unless ``gke-tpu-llm:observability.enabled`` is false.

The queries, panels and thresholds are pure data from ``components.render.dashboards`` (derived from
the stack's spec and the catalog's prices); this module registers them: one ``gcp.monitoring.Dashboard``
and one ``gcp.monitoring.AlertPolicy`` per alert, each a PromQL condition. Both types get server-side
ids and carry the stack's name in their display names, so they claim no physical name. Both are updated
in place (terraform-provider-google-beta: only ``project`` is ForceNew; ``components.tools.replacement``).
Collection needs nothing more: GKE's TPU metrics ride on the cluster's SYSTEM_COMPONENTS monitoring and
the engines' on the workload's PodMonitoring (``components.platform.cluster_settings.monitoring_config``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from ...config.stack import StackConfig
from ...render import dashboards
from ..gke import GkeCluster

NAME = "observability"
COMPONENT = "observability"
SCAN_WAIVERS: dict[str, dict[str, str]] = {}
"""No Kubernetes object: nothing for checkov."""


def needed(config: StackConfig) -> bool:
    return config.observability.enabled


class Observability(pulumi.ComponentResource):
    """The stack's dashboard and alert policies."""

    TYPE = "gke-tpu-llm:observability:Observability"

    dashboard: gcp.monitoring.Dashboard
    policies: dict[str, gcp.monitoring.AlertPolicy]

    def __init__(self, name: str, config: StackConfig, cluster: GkeCluster, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=[cluster.cluster])
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard", project=config.project, dashboard_json=dashboards.dashboard_json(config), opts=child
        )
        channels = list(config.observability.notification_channels)
        self.policies = {}
        for alert in dashboards.alerts(config):
            self.policies[alert.key] = gcp.monitoring.AlertPolicy(
                f"{name}-alert-{alert.key}",
                project=config.project,
                display_name=alert.display_name,
                combiner="OR",
                severity=alert.severity,
                notification_channels=channels,
                user_labels={**config.labels, dashboards.ALERT_LABEL: alert.key},
                documentation=gcp.monitoring.AlertPolicyDocumentationArgs(content=alert.documentation, mime_type="text/markdown"),
                conditions=[
                    gcp.monitoring.AlertPolicyConditionArgs(
                        display_name=alert.display_name,
                        condition_prometheus_query_language=gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                            query=alert.query,
                            duration=alert.duration,
                            evaluation_interval="60s",
                            # The engine's series appear only after its first scrape; `pulumi up` comes before.
                            disable_metric_validation=True,
                        ),
                    )
                ],
                opts=child,
            )
        self.register_outputs({"dashboard": self.dashboard.id})


def install(
    config: StackConfig,
    *,
    cluster: GkeCluster,
    namespace_ready: Sequence[pulumi.Resource] = (),
    pools: Sequence[pulumi.Resource] = (),
) -> Observability:
    return Observability(COMPONENT, config, cluster)
