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
* every pool runs as the stack's node service account (``identity.NodeServiceAccount``: GKE's
  minimal node role), never the Compute Engine default, and depends on its grants (created after,
  deleted before them). GCE metadata (``tpu.workloadMetadata: GCE_METADATA``, as the Pathways
  tutorials) exposes that account to pods, so it then also holds the workload's bucket roles.
  The service account is create-only: changing it replaces the pool (README: Node identity).
* stable identity: the Pulumi name and the GKE pool name carry the slice's index only
  (``tpu-slice-0``), never its shape, so a topology or machine-type change is this one resource
  replaced delete-before-replace (a second slice of scarce TPU capacity is rarely available for
  create-before-destroy, and it would bill both slices during the rollout). In prod the pool is
  protected, so a replacement is refused instead of happening silently (README: Changing a slice).
* the shape inputs (``SHAPE_INPUTS``) replace the pool: the provider alone would not replace it
  on a topology change (only adding or removing ``placement_policy`` is ForceNew upstream).
* pools created before stable names (``tpu-v6e-4x4-0``) keep their state and their GKE name:
  every shape-encoded name this index ever had is an alias of the new URNs, and the GKE ``name``
  is ignored (it is create-only, so changing it would replace a live pool); when such a pool is
  replaced for a shape change, the engine creates the replacement under the program's name
  (``tpu-slice-0``), since ignored inputs take the program's value on a replacement.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from components import naming
from components.catalog.tpu import TpuSlice, all_slices
from components.config import StackConfig
from components.gke import CLOUD_PLATFORM_SCOPE

SHAPE_INPUTS = ("placementPolicy", "nodeConfig.machineType", "nodeLocations")
"""NodePool inputs that define the slice itself: a change replaces the pool (``replaceOnChanges``)."""
POOL_RESOURCE_SUFFIX = "-pool"
"""The NodePool child is ``<component name>-pool``."""


def legacy_aliases(index: int) -> list[tuple[str, str]]:
    """(component name, node-pool resource name) of slice ``index`` under every shape-encoded name
    earlier releases used, for every shape in the catalog: whatever shape a stack had when it was
    created, its pool is found again, even if the upgrade and a shape change land together."""
    names = sorted({naming.legacy_node_pool_name(s.key, index) for s in all_slices()})
    return [(name, f"{name}{POOL_RESOURCE_SUFFIX}") for name in names]


def _urn(type_chain: str, name: str) -> str:
    return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_chain}::{name}"


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
        node_service_account: pulumi.Input[str],
        node_grants: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        # Old URNs only exist for pools the root program created (no parent given).
        legacy = legacy_aliases(index) if opts is None or opts.parent is None else []
        component_aliases: list[pulumi.Input[str | pulumi.Alias]] = [_urn(self.TYPE, old) for old, _ in legacy]
        merged = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=component_aliases))
        super().__init__(self.TYPE, name, None, merged)
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
            # The stack's node account; pods act as it only with GCE_METADATA.
            service_account=node_service_account,
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode=tpu.workload_metadata),
            advanced_machine_features=(
                gcp.container.NodePoolNodeConfigAdvancedMachineFeaturesArgs(threads_per_core=tpu.threads_per_core)
                if tpu.threads_per_core is not None
                else None
            ),
            resource_labels=config.labels_for(config.pools_allowed_to_go),
        )
        pool_type = f"{self.TYPE}$gcp:container/nodePool:NodePool"
        pool_aliases: list[pulumi.Input[str | pulumi.Alias]] = [_urn(pool_type, child) for _, child in legacy]
        self.node_pool = gcp.container.NodePool(
            f"{name}{POOL_RESOURCE_SUFFIX}",
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
                # A TPU slice's shape is fixed at creation. The provider would "update" a topology
                # in place (placement_policy.tpu_topology is not ForceNew and never sent: a no-op
                # and a perpetual diff) and would resize machine type and zone on live nodes; for a
                # slice each of these is a new slice, so Pulumi replaces the pool instead.
                replace_on_changes=list(SHAPE_INPUTS),
                # name: set once at creation (see the module docstring); node counts: the autoscaler's.
                ignore_changes=["name", *(["initialNodeCount", "nodeCount"] if autoscaled else [])],
                depends_on=list(node_grants),
                aliases=pool_aliases,
            ),
        )
        self.pool_name = self.node_pool.name
        self.register_outputs({"pool_name": self.pool_name})
