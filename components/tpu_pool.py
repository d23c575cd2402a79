"""``TpuSlicePool``: one GKE node pool per TPU slice, shaped entirely by the catalog.

Rules (from GKE's TPU docs, xpk and cluster-toolkit):
* node count = hosts of the slice; machine type from the catalog layout.
* multi-host slices get ``placement_policy {type: COMPACT, tpu_topology}``; single-host pools get
  no placement policy, because GKE rejects ``tpu_topology`` on single-host pools.
* one zone (``node_locations``): a slice is one physical block and COMPACT needs a single zone.
* no taint is added: GKE taints TPU nodes with ``google.com/tpu`` itself; workloads tolerate it.
* autoscaling only for single-host pools, as *total* min/max; the node count is then owned by the
  autoscaler, so we set ``initial_node_count`` once and ignore it afterwards (no perpetual diff,
  and no replacement: ``initial_node_count`` is create-only).
* GCE metadata (``tpu.workloadMetadata: GCE_METADATA``, as the Pathways tutorials) exposes the
  node's service account to pods, so such pools run as the stack's dedicated node GSA
  (``components.identity``: bucket roles + the minimal node role), never the Compute Engine default.
* deterministic names and delete-before-replace, because a second slice of scarce TPU capacity is
  rarely available for create-before-destroy; in prod the pool is protected, so a replacement
  fails instead of happening silently.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from components.catalog.tpu import TpuSlice
from components.config import StackConfig
from components.gke import CLOUD_PLATFORM_SCOPE


class TpuSlicePool(pulumi.ComponentResource):
    """The node pool of one TPU slice."""

    TYPE = "gke-tpu-llm:tpu:TpuSlicePool"

    pool_name: pulumi.Output[str]
    node_pool: gcp.container.NodePool

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        index: int,
        cluster_name: pulumi.Input[str],
        node_service_account: pulumi.Input[str] | None = None,
        node_grants: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        tpu = config.tpu
        tpu_slice: TpuSlice = tpu.slice
        autoscaled = tpu.autoscaling is not None

        reservation = (
            gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key="compute.googleapis.com/reservation-name",
                values=[tpu.reservation],
            )
            if tpu.reservation
            else None
        )
        node_config = gcp.container.NodePoolNodeConfigArgs(
            machine_type=tpu_slice.machine_type,
            disk_size_gb=tpu.disk_size_gb,
            spot=tpu.spot or None,
            reservation_affinity=reservation,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            # Set only for GCE_METADATA pools (WorkloadIdentity's node account); else the default.
            service_account=node_service_account,
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode=tpu.workload_metadata),
            advanced_machine_features=(
                gcp.container.NodePoolNodeConfigAdvancedMachineFeaturesArgs(threads_per_core=tpu.threads_per_core)
                if tpu.threads_per_core is not None
                else None
            ),
            resource_labels=config.labels_for(tpu.allow_replacement),
        )
        self.node_pool = gcp.container.NodePool(
            f"{name}-pool",
            name=config.pool_names()[index],
            project=config.project,
            cluster=cluster_name,
            location=config.cluster_location,
            node_locations=[tpu.zone],
            node_count=None if autoscaled else tpu_slice.hosts,
            initial_node_count=tpu.autoscaling.min_nodes if tpu.autoscaling else None,
            autoscaling=(
                gcp.container.NodePoolAutoscalingArgs(
                    total_min_node_count=tpu.autoscaling.min_nodes,
                    total_max_node_count=tpu.autoscaling.max_nodes,
                    # ANY: take capacity wherever it is (one zone here), the TPU-friendly policy.
                    location_policy="ANY",
                )
                if tpu.autoscaling
                else None
            ),
            placement_policy=(
                gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=tpu_slice.topology)
                if tpu_slice.multi_host
                else None
            ),
            node_config=node_config,
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=config.pools_protected,
                delete_before_replace=True,
                ignore_changes=["initialNodeCount", "nodeCount"] if autoscaled else None,
                depends_on=list(node_grants),
            ),
        )
        self.pool_name = self.node_pool.name
        self.register_outputs({"pool_name": self.pool_name})
