"""``MetricsAdapter``: the Custom Metrics Stackdriver Adapter, a cluster add-on that serves Managed
Prometheus metrics to HorizontalPodAutoscalers (custom and external metrics APIs).

A stack gets it when its workload kind opts into ``metricsAdapter`` with its settings
(``WorkloadKindInfo.addons``: vLLM with ``workload.vllm.autoscaling.enabled``); the program installs it
before the workload (``components.program.build.ADDONS``), and the workload's HPA depends on it. The
objects are the upstream install rendered by :mod:`components.render.custom_metrics`; this module
registers them, their NetworkPolicies, and ``roles/monitoring.viewer`` for the adapter's KSA. That
role is project-level by nature (Cloud Monitoring has no finer resource); it is granted to the KSA's
own ``principal://`` identity, so no Google service account or key exists. The namespace and KSA are
fixed upstream (``components.catalog.stackdriver_adapter``), so one project holds one such stack (the
kind's isolation claim).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from ...catalog.stackdriver_adapter import ADAPTER_NAME, ADAPTER_NAMESPACE
from ...config.stack import StackConfig
from ...render import custom_metrics as render
from .. import k8s as k8s_objects
from ..gke import GkeCluster
from ..identity import principal_member
from ..network_policies import network_policies

NAME = "metricsAdapter"
"""What a kind's ``addons`` function returns to opt into this add-on."""
COMPONENT = "metrics-adapter"
"""Pulumi name of the component (and prefix of its policies' component)."""
MONITORING_VIEWER = "roles/monitoring.viewer"
VERSION_SETTING = "metrics_adapter_version"
"""The field of the opting kind's settings section that holds the adapter's image tag (vLLM:
``workload.vllm.metricsAdapterVersion``)."""
SCAN_WAIVERS = render.SCAN_WAIVERS


@dataclass(frozen=True)
class MetricsAdapterArgs:
    """Inputs of :class:`MetricsAdapter`."""

    project: str
    """GCP project whose Cloud Monitoring the adapter reads (and which grants it the viewer role)."""
    stack: str
    """Stack name, for the objects' labels."""
    version: str
    """Adapter image tag; pinned by digest when the image catalog lists it."""
    cluster: GkeCluster


def needed(config: StackConfig) -> bool:
    """The stack's kind opts into the adapter with its settings."""
    return NAME in config.addons


def version(config: StackConfig) -> str:
    """The image tag the opting kind's settings give (:data:`VERSION_SETTING`)."""
    value = getattr(config.workload.section, VERSION_SETTING, None)
    if not isinstance(value, str):  # a kind opting in must carry the setting (tests/test_addons.py)
        raise TypeError(f"kind {config.workload.kind} opts into {NAME} but its settings have no {VERSION_SETTING}")
    return value


class MetricsAdapter(pulumi.ComponentResource):
    """Custom Metrics Stackdriver Adapter: serves Managed Prometheus metrics to HPAs."""

    # The type token of the vLLM kind, which registered the adapter first: a new token would move
    # every autoscaled stack's URNs.
    TYPE = "gke-tpu-llm:vllm:MetricsAdapter"

    resources: list[pulumi.CustomResource]
    member: pulumi.Output[str]
    iam: gcp.projects.IAMMember

    def __init__(self, name: str, args: MetricsAdapterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        cluster = args.cluster
        namespace, *rest = render.render_objects(args.stack, args.version)
        ns = k8s_objects.create(namespace, f"{name}-ns", pulumi.ResourceOptions(parent=self, provider=cluster.provider))
        self.resources = [ns]
        for obj in rest:
            meta = obj["metadata"]
            suffix = f"{obj['kind'].lower()}-{meta['name'].replace(':', '-').replace('.', '-')}"
            self.resources.append(
                k8s_objects.create(
                    obj, f"{name}-{suffix}", pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[ns])
                )
            )
        project = args.project
        number = gcp.organizations.get_project_output(project_id=project).number
        self.member = number.apply(lambda n: principal_member(str(n), project, ADAPTER_NAMESPACE, ADAPTER_NAME))
        self.iam = gcp.projects.IAMMember(
            f"{name}-monitoring-viewer",
            project=project,
            role=MONITORING_VIEWER,
            member=self.member,
            # The principal exists once the cluster's Workload Identity pool does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.cluster]),
        )
        self.register_outputs({"member": self.member, "image_version": args.version})


def install(
    config: StackConfig,
    *,
    cluster: GkeCluster,
    namespace_ready: Sequence[pulumi.Resource] = (),
    pools: Sequence[pulumi.Resource] = (),
) -> MetricsAdapter:
    """The adapter of ``config`` and the NetworkPolicies of its namespace (default-deny plus the API
    server's flow, ``render.custom_metrics.network_intents``)."""
    args = MetricsAdapterArgs(project=config.project, stack=config.stack, version=version(config), cluster=cluster)
    adapter = MetricsAdapter(COMPONENT, args)
    network_policies(
        f"{COMPONENT}-network-policies",
        render.render_objects(config.stack, args.version),
        render.network_intents(),
        namespace=ADAPTER_NAMESPACE,
        stack=config.stack,
        cluster=cluster,
        depends_on=[adapter],
    )
    return adapter
