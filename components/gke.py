"""``GkeCluster``: a Standard GKE cluster ready for TPU slices.

Owns the cluster, its CPU system pool, the service account every node pool of the stack runs as
(``identity.NodeServiceAccount``), and a Kubernetes provider built from the cluster's endpoint
and CA. Does not own TPU pools (``TpuSlicePool``) or anything inside the cluster.

Choices, and why:
* The default pool is removed and a small CPU system pool added, because every Standard cluster
  needs a non-TPU pool for kube-system and controllers, and the default pool cannot be managed
  without perpetual diffs.
* Workload Identity is always on (``<project>.svc.id.goog``) so pods never need key files.
* Add-ons (GCS FUSE CSI, Ray operator) are enabled only when the stack's workload needs them.
* The kubeconfig uses ``gke-gcloud-auth-plugin`` (no static credentials) and is a secret output.
  While the cluster does not exist yet its endpoint is unknown, so the Kubernetes provider is
  unknown too and pulumi-kubernetes previews the in-cluster objects without contacting a server.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.config import StackConfig
from components.identity import NodeServiceAccount

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates through gcloud's GKE auth plugin (nothing secret stored)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate}}
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [
                {
                    "name": name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "gke-gcloud-auth-plugin",
                            "provideClusterInfo": True,
                            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
                        }
                    },
                }
            ],
        },
        indent=1,
    )


def cpu_shielding(config: StackConfig) -> gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs:
    """Shielded VM settings of the CPU pools (``cluster.hardening.secureBoot``; create-only upstream)."""
    return gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
        enable_secure_boot=config.cluster.hardening.secure_boot, enable_integrity_monitoring=True
    )


class GkeCluster(pulumi.ComponentResource):
    """Standard GKE cluster + CPU system pool + a Kubernetes provider for it."""

    TYPE = "gke-tpu-llm:gke:GkeCluster"

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    cluster: gcp.container.Cluster
    get_credentials_command: pulumi.Output[str]

    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        addons = config.addons
        spec = config.cluster
        calico = spec.dataplane == "legacy"
        # Every node pool of the stack runs as this account, never the Compute Engine default one.
        self.nodes = NodeServiceAccount(f"{name}-nodes", config, opts=pulumi.ResourceOptions(parent=self))
        self.node_service_account = self.nodes.email
        self.node_grants = self.nodes.grants

        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=config.cluster_name,
            project=config.project,
            # A zonal cluster lives in the TPU zone; a regional one spreads the system pool.
            location=config.cluster_location,
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=config.deletion_protection,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=spec.release_channel),
            min_master_version=spec.version,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{config.project}.svc.id.goog"
            ),
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                    enabled="gcsFuseCsiDriver" in addons
                ),
                ray_operator_configs=(
                    [gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(enabled=True)] if "rayOperator" in addons else None
                ),
                # Calico's control-plane half: the provider sends addons_config before network_policy in one
                # update (resource_container_cluster.go:4158, :4768), as GKE requires.
                network_policy_config=(
                    gcp.container.ClusterAddonsConfigNetworkPolicyConfigArgs(disabled=False) if calico else None
                ),
            ),
            # NetworkPolicy enforcement (config.ClusterSpec.dataplane). Dataplane V2 is chosen at creation
            # only (datapath_provider is ForceNew: components/replacement.py); Calico is enabled in place
            # (SetNetworkPolicy), after which GKE recreates every node once.
            datapath_provider="ADVANCED_DATAPATH" if spec.dataplane == "v2" else None,
            network_policy=gcp.container.ClusterNetworkPolicyArgs(enabled=True, provider="CALICO") if calico else None,
            # Managed Prometheus on: PodMonitoring resources (vLLM metrics) need its collectors.
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=["SYSTEM_COMPONENTS"],
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
            ),
            # Hardening (config.ClusterHardeningSpec): each setting is updated in place on a live cluster.
            enable_shielded_nodes=spec.hardening.shielded_nodes,
            private_cluster_config=(
                gcp.container.ClusterPrivateClusterConfigArgs(enable_private_nodes=True, enable_private_endpoint=False)
                if spec.hardening.private_nodes
                else None
            ),
            master_authorized_networks_config=(
                gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                    cidr_blocks=[
                        gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=cidr)
                        for cidr in spec.hardening.authorized_networks
                    ]
                )
                if spec.hardening.authorized_networks
                else None
            ),
            binary_authorization=(
                gcp.container.ClusterBinaryAuthorizationArgs(evaluation_mode="PROJECT_SINGLETON_POLICY_ENFORCE")
                if spec.hardening.binary_authorization
                else None
            ),
            resource_labels=config.labels_for(config.cluster_allowed_to_go),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=config.cluster_protected,
                # The cluster has an explicit name, so a replacement created first would collide
                # with the old cluster: delete it first (only ever reached after a reviewed change).
                delete_before_replace=True,
                # The removed default pool's node_config and count are create-only inputs;
                # ignoring them avoids the well-known perpetual diff / replacement.
                ignore_changes=["nodeConfig", "initialNodeCount"],
            ),
        )

        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            name="system",
            project=config.project,
            cluster=self.cluster.name,
            location=config.cluster_location,
            node_count=spec.system_pool.nodes_per_zone,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=spec.system_pool.machine_type,
                disk_size_gb=spec.system_pool.disk_size_gb,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                # The stack's node account (identity.NodeServiceAccount), not the Compute Engine default.
                service_account=self.node_service_account,
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                shielded_instance_config=cpu_shielding(config),
                resource_labels=config.labels,
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            opts=pulumi.ResourceOptions(
                parent=self,
                # Created after (and deleted before) the node account's role: nodes that start without
                # it cannot write logs or metrics.
                depends_on=self.node_grants,
                # The pool has a fixed name, so a replacement created first would collide with the old
                # pool ("system" already exists). Its create-only inputs (service account, scopes,
                # name) are rarely changed, and then the old pool must go first: kube-system and the
                # controllers are rescheduled once the new pool's nodes are up (a few minutes).
                delete_before_replace=True,
            ),
        )

        self.cluster_name = self.cluster.name
        self.endpoint = self.cluster.endpoint
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate).apply(
                lambda args: kubeconfig(str(args[0]), str(args[1]), str(args[2] or ""))
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # No permanent deleteUnreachable: with it, a `pulumi refresh` while the API server is
            # briefly unreachable silently drops every in-cluster object from state; its maintainers
            # advise it only as a one-off (pulumi/pulumi-kubernetes#2489). If the cluster is already
            # gone, run `PULUMI_K8S_DELETE_UNREACHABLE=true pulumi destroy` once (the provider reads
            # the variable itself, provider.go Configure). Do not set it for `up`/`preview`: the SDK
            # would copy it into this provider's stored inputs. Nor pass `False` here: an explicit
            # value overrides the variable.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool]),
        )
        self.get_credentials_command = pulumi.Output.concat(
            "gcloud container clusters get-credentials ",
            self.cluster.name,
            " --location ",
            config.cluster_location,
            " --project ",
            config.project,
        )
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "endpoint": self.endpoint,
                "kubeconfig": self.kubeconfig,
                "get_credentials_command": self.get_credentials_command,
            }
        )
