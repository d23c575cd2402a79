"""What a ``GkeCluster``'s cluster and CPU system pool are sent, as pure functions of its Args.

``GkeCluster`` registers the resources; these functions decide their fields (the node service
account, add-ons, dataplane, hardening, the system pool's nodes), so each rule is tested on its own
without an engine (tests/test_pool_settings.py). ``TpuSlicePool``'s fields are in
``components.platform.pool_settings``, which shares the scope and the labels here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp

from ..config import naming
from ..config.environments import ALLOW_REPLACE_LABEL
from .identity import NodeServiceAccountArgs

if TYPE_CHECKING:
    # Annotations only: gke.py imports this module to build its cluster.
    from ..config.stack import StackConfig
    from .gke import GkeClusterArgs

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
"""The OAuth scope of every node: access is decided by IAM roles, not by scopes."""


def resource_labels(labels: Mapping[str, str], allow_replacement: bool) -> dict[str, str]:
    """GCP labels of a cluster or pool: the given ones, plus the allowance label the policy pack reads
    when the resource may be replaced."""
    return {**labels, **({ALLOW_REPLACE_LABEL: "true"} if allow_replacement else {})}


def shielding(secure_boot: bool) -> gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs:
    """Shielded VM settings of a CPU pool (``secure_boot`` is create-only upstream)."""
    return gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
        enable_secure_boot=secure_boot, enable_integrity_monitoring=True
    )


def cpu_shielding(config: StackConfig) -> gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs:
    """Shielded VM settings of a stack's CPU pools (``cluster.hardening.secureBoot``)."""
    return shielding(config.cluster.hardening.secure_boot)


def node_account(args: GkeClusterArgs, cluster_name: str) -> NodeServiceAccountArgs | pulumi.Input[str]:
    """The account every node pool runs as, never the Compute Engine default one: the given email or
    Args, else a new account ``<cluster name>-nodes``."""
    if args.node_service_account is not None:
        return args.node_service_account
    return NodeServiceAccountArgs(
        project=args.project,
        account_id=naming.service_account_id(cluster_name, "nodes"),
        display_name=naming.node_gsa_display_name(cluster_name),
    )


def uses_calico(args: GkeClusterArgs) -> bool:
    """NetworkPolicy enforcement by Calico (``dataplane: legacy``) rather than Dataplane V2."""
    return args.dataplane == "legacy"


def addons_config(args: GkeClusterArgs) -> gcp.container.ClusterAddonsConfigArgs:
    return gcp.container.ClusterAddonsConfigArgs(
        gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
            enabled="gcsFuseCsiDriver" in args.addons
        ),
        ray_operator_configs=(
            [gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(enabled=True)] if "rayOperator" in args.addons else None
        ),
        # Multi-Tier Checkpointing (GKE docs "Train ... with Multi-Tier Checkpointing": --addons=HighScaleCheckpointing);
        # stated only where a kind opts in, so other clusters' plans stay as they were.
        high_scale_checkpointing_config=(
            gcp.container.ClusterAddonsConfigHighScaleCheckpointingConfigArgs(enabled=True)
            if "highScaleCheckpointing" in args.addons
            else None
        ),
        # GKE's Gateway controller needs HTTP load balancing (GKE "Deploying Gateways", requirements). It is
        # on by default (Optional+Computed, resource_container_cluster.go:359), so it is stated only where a
        # gateway relies on it: other stacks' plans stay as they were.
        http_load_balancing=(
            gcp.container.ClusterAddonsConfigHttpLoadBalancingArgs(disabled=False) if args.gateway_api else None
        ),
        # Calico's control-plane half: the provider sends addons_config before network_policy in one
        # update (resource_container_cluster.go:4158, :4768), as GKE requires.
        network_policy_config=(
            gcp.container.ClusterAddonsConfigNetworkPolicyConfigArgs(disabled=False) if uses_calico(args) else None
        ),
    )


def gateway_api_config(args: GkeClusterArgs) -> gcp.container.ClusterGatewayApiConfigArgs | None:
    """GKE's Gateway API controller on its standard channel when the stack serves through a gateway.
    Unset otherwise: the field is Optional+Computed upstream (terraform-provider-google-beta
    container/resource_container_cluster.go:2774, no ForceNew), so a cluster without it keeps what it
    has and one that gets it is updated in place (``DesiredGatewayApiConfig``, :5469)."""
    if not args.gateway_api:
        return None
    return gcp.container.ClusterGatewayApiConfigArgs(channel="CHANNEL_STANDARD")


def datapath_provider(args: GkeClusterArgs) -> str | None:
    # NetworkPolicy enforcement (config.ClusterSpec.dataplane). Dataplane V2 is chosen at creation
    # only (datapath_provider is ForceNew: components/tools/replacement.py); Calico is enabled in place
    # (SetNetworkPolicy), after which GKE recreates every node once.
    return "ADVANCED_DATAPATH" if args.dataplane == "v2" else None


def network_policy(args: GkeClusterArgs) -> gcp.container.ClusterNetworkPolicyArgs | None:
    return gcp.container.ClusterNetworkPolicyArgs(enabled=True, provider="CALICO") if uses_calico(args) else None


def monitoring_config() -> gcp.container.ClusterMonitoringConfigArgs:
    # Managed Prometheus on: PodMonitoring resources (vLLM metrics) need its collectors.
    return gcp.container.ClusterMonitoringConfigArgs(
        enable_components=["SYSTEM_COMPONENTS"],
        managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
    )


def pod_autoscaling(args: GkeClusterArgs) -> gcp.container.ClusterPodAutoscalingArgs | None:
    """The HPA performance profile where a workload autoscales through GKE's AutoscalingMetric (GKE "Autoscale
    workloads using metrics": custom Pod metrics need it). Unset otherwise: pod_autoscaling is Optional+Computed
    with no ForceNew upstream (terraform-provider-google-beta container/resource_container_cluster.go:1922), so
    a cluster without it keeps GKE's value, and one that gets it is updated in place (UpdateClusterRequest
    DesiredPodAutoscaling, :5192)."""
    if "hpaPerformanceProfile" not in args.addons:
        return None
    return gcp.container.ClusterPodAutoscalingArgs(hpa_profile="PERFORMANCE")


# Hardening (config.ClusterHardeningSpec): each setting is updated in place on a live cluster.


def private_cluster_config(args: GkeClusterArgs) -> gcp.container.ClusterPrivateClusterConfigArgs | None:
    if not args.private_nodes:
        return None
    return gcp.container.ClusterPrivateClusterConfigArgs(enable_private_nodes=True, enable_private_endpoint=False)


def master_authorized_networks(args: GkeClusterArgs) -> gcp.container.ClusterMasterAuthorizedNetworksConfigArgs | None:
    if not args.authorized_networks:
        return None
    return gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
        cidr_blocks=[
            gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=cidr) for cidr in args.authorized_networks
        ]
    )


def binary_authorization(args: GkeClusterArgs) -> gcp.container.ClusterBinaryAuthorizationArgs | None:
    if not args.binary_authorization:
        return None
    return gcp.container.ClusterBinaryAuthorizationArgs(evaluation_mode="PROJECT_SINGLETON_POLICY_ENFORCE")


def system_node_config(args: GkeClusterArgs, service_account: pulumi.Input[str]) -> gcp.container.NodePoolNodeConfigArgs:
    """The CPU system pool's nodes (kube-system and the controllers)."""
    return gcp.container.NodePoolNodeConfigArgs(
        machine_type=args.system_machine_type,
        disk_size_gb=args.system_disk_size_gb,
        oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        # The cluster's node account (identity.NodeServiceAccount), not the Compute Engine default.
        service_account=service_account,
        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        shielded_instance_config=shielding(args.secure_boot),
        resource_labels=dict(args.labels),
    )
