"""What a ``TpuSlicePool``'s GKE node pool is sent, as pure functions of its Args and catalog slice.

``TpuSlicePool`` registers the resources; these functions decide their fields (node bounds,
autoscaling, reservation affinity, the Dynamic Workload Scheduler flags, placement and the node
config), so each rule is tested on its own without an engine (tests/test_pool_settings.py). Their
sources are cited at each field; the rules themselves are listed in components/platform/tpu_pool.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp

from ..catalog import tpu as tpu_catalog
from .cluster_settings import CLOUD_PLATFORM_SCOPE, resource_labels
from .gke import GkeCluster

if TYPE_CHECKING:
    # Annotations only: tpu_pool.py imports this module to build its pool.
    from .tpu_pool import TpuSlicePoolArgs

GKE_TAINT_EFFECT: Mapping[str, str] = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}
"""Kubernetes effect -> GKE's ``node_config.taint.effect`` enum (container/node_config.go taint schema:
NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)."""


@dataclass(frozen=True)
class ClusterTarget:
    """The cluster a pool joins and what its nodes run as."""

    project: str
    location: str
    cluster_name: pulumi.Input[str]
    node_service_account: pulumi.Input[str]
    node_grants: tuple[pulumi.Resource, ...]
    """The node account's grants: the pool is created after them and deleted before them."""


def cluster_target(args: TpuSlicePoolArgs) -> ClusterTarget:
    """From the GkeCluster, where the Args do not set a value (the stack program passes project and
    location), or from the Args alone with a cluster name."""
    cluster = args.cluster
    if isinstance(cluster, GkeCluster):
        return ClusterTarget(
            project=args.project or cluster.project,
            location=args.location or cluster.location,
            cluster_name=cluster.cluster_name,
            node_service_account=(
                cluster.node_service_account if args.node_service_account is None else args.node_service_account
            ),
            node_grants=tuple(cluster.node_grants),
        )
    # TpuSlicePoolArgs requires all three with a cluster name.
    assert args.project is not None
    assert args.location is not None
    assert args.node_service_account is not None
    return ClusterTarget(args.project, args.location, cluster, args.node_service_account, ())


def node_bounds(args: TpuSlicePoolArgs) -> tuple[int, int] | None:
    """(total min, total max) nodes when the autoscaler owns the count; None: a held slice."""
    if args.autoscaling is not None:
        return (args.autoscaling.min_nodes, args.autoscaling.max_nodes)
    if args.scales_from_zero:
        # Flex-start and queued pools start empty and may not have a static node count
        # (cluster-toolkit gke-node-pool/main.tf:400-401 "autoscaling_total_min_nodes should be 0 when
        # enable_queued_provisioning is true", :420-421 flex-start "does not work with static_node_count";
        # xpk src/xpk/core/nodepool.py: --num-nodes=0 for flex-start). Up to the slice's hosts: a
        # multi-host slice is scaled atomically, all of its VMs or none (GKE "About TPUs in GKE").
        return (0, args.tpu_slice.hosts)
    return None


def autoscaling(args: TpuSlicePoolArgs, bounds: tuple[int, int] | None) -> gcp.container.NodePoolAutoscalingArgs | None:
    """The pool's autoscaling block for ``bounds`` (``node_bounds``); None for a held slice."""
    if bounds is None:
        return None
    if args.autoscaling is None:
        # A pool that scales from zero is bounded per zone (min/max_node_count; one zone here, so
        # the same numbers): the provider always sends the per-zone fields (0 when unset,
        # resource_container_node_pool.go ForceSendFields), and GKE checks a TPU slice's per-zone
        # maximum ("Maximum node count 0 is not a valid size of TPU pod slice", vllm-project/ci-infra
        # #545; cluster-toolkit gke-node-pool/main.tf: per-zone limits "are required to workaround a
        # Terraform provider bug when using TPU Flex Start"; xpk passes --max-nodes). A configured
        # tpu.autoscaling keeps the total bounds it always had.
        return gcp.container.NodePoolAutoscalingArgs(min_node_count=bounds[0], max_node_count=bounds[1], location_policy="ANY")
    return gcp.container.NodePoolAutoscalingArgs(
        total_min_node_count=bounds[0],
        total_max_node_count=bounds[1],
        # ANY: take capacity wherever it is (one zone here), the TPU-friendly policy; DWS pools
        # require it (xpk capacity.py flex-start: --location-policy=ANY; cluster-toolkit
        # gke-node-pool/main.tf sets location_policy "ANY" on every autoscaled pool).
        location_policy="ANY",
    )


def reservation_affinity(args: TpuSlicePoolArgs) -> gcp.container.NodePoolNodeConfigReservationAffinityArgs | None:
    """Which reservation the nodes consume: the named one, none for DWS capacity, GKE's default otherwise."""
    if args.reservation:
        # A specific reservation: its name, a shared one's projects/P/reservations/R, or either with
        # /reservationBlocks/B[/reservationSubBlocks/S] as the value (the forms xpk passes to gcloud's
        # --reservation, AI-Hypercomputer/xpk src/xpk/core/capacity.py and nodepool_test.py).
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION",
            key="compute.googleapis.com/reservation-name",
            values=[args.reservation],
        )
    if args.capacity in tpu_catalog.DWS_CAPACITY_TYPES:
        # DWS capacity consumes no reservation (cluster-toolkit gke-node-pool/main.tf:396-397 and :424-425
        # require NO_RESERVATION for queued provisioning and flex-start; xpk: --reservation-affinity=none).
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
    return None


@dataclass(frozen=True)
class DwsFlags:
    """The fields GKE requires of a Dynamic Workload Scheduler pool (flex-start or queued provisioning)."""

    flex_start: bool | None
    """``node_config.flex_start``: True on a DWS pool, unset otherwise."""
    max_run_duration: str | None
    """``node_config.max_run_duration`` (``"<seconds>s"``) on a DWS pool, unset otherwise."""
    auto_repair: bool
    """``management.auto_repair``: off on a DWS pool."""
    queued_provisioning: gcp.container.NodePoolQueuedProvisioningArgs | None
    """``queued_provisioning`` of a queued pool, unset otherwise."""


def dws_flags(args: TpuSlicePoolArgs) -> DwsFlags:
    dws = args.capacity in tpu_catalog.DWS_CAPACITY_TYPES
    return DwsFlags(
        # node_config.flex_start: flex-start VMs; queued provisioning is "flex-start with queued
        # provisioning" and takes the flag too (GKE provisioningrequest: "you have to add the --flex-start
        # and --enable-queued-provisioning flags when you create the node pool").
        flex_start=True if dws else None,
        # node_config.max_run_duration: "The runtime of each node in the node pool in seconds, terminated
        # by 's'. Example: \"3600s\"" (terraform-provider-google-beta container/node_config.go:1487).
        # Always sent on a DWS pool, GKE's 7-day maximum when unset: the field is ForceNew and not read
        # back as computed, so a default GKE filled in would otherwise differ from the program's null.
        max_run_duration=f"{(args.max_run_hours or tpu_catalog.DWS_MAX_RUN_HOURS) * 3600}s" if dws else None,
        # Flex-start (and so queued) pools need auto-repair off (cluster-toolkit gke-node-pool/main.tf:416-417
        # "enable_flex_start needs node auto_repair set to false"; xpk: --no-enable-autorepair).
        auto_repair=not dws,
        # queued_provisioning.enabled: "nodes in this node pool are obtainable solely through the
        # ProvisioningRequest API" (container/resource_container_node_pool.go:409-419).
        queued_provisioning=gcp.container.NodePoolQueuedProvisioningArgs(enabled=True) if args.queued_provisioning else None,
    )


def placement_policy(
    tpu_slice: tpu_catalog.TpuSlice, workload_policy_name: pulumi.Input[str] | None
) -> gcp.container.NodePoolPlacementPolicyArgs | None:
    """How GKE places a multi-host slice's VMs (None for a single-host pool: GKE rejects ``tpu_topology`` there).

    ``workload_policy_name`` is the name of the slice's workload policy, which a ``WORKLOAD_POLICY``
    generation (tpu7x) needs and the pool creates."""
    if tpu_slice.placement == "WORKLOAD_POLICY":
        if workload_policy_name is None:
            raise ValueError(f"{tpu_slice.key} is placed by a workload policy: pass its name")
        # No COMPACT type: GKE refuses a compact placement policy for tpu7x; the provider sends
        # "" as no type (resource_container_node_pool.go expandNodePool).
        return gcp.container.NodePoolPlacementPolicyArgs(
            type="", tpu_topology=tpu_slice.topology, policy_name=workload_policy_name
        )
    if tpu_slice.multi_host:
        return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=tpu_slice.topology)
    return None


def node_config(args: TpuSlicePoolArgs, service_account: pulumi.Input[str]) -> gcp.container.NodePoolNodeConfigArgs:
    """The nodes of the slice: machine type, capacity (Spot, reservation, DWS), labels and taints, the
    node service account and its metadata mode."""
    dws = dws_flags(args)
    labels = {**args.node_labels, **({tpu_catalog.QUEUED_NODE_LABEL: "true"} if args.queued_provisioning else {})}
    return gcp.container.NodePoolNodeConfigArgs(
        machine_type=args.tpu_slice.machine_type,
        disk_size_gb=args.disk_size_gb,
        spot=args.spot or None,
        reservation_affinity=reservation_affinity(args),
        flex_start=dws.flex_start,
        max_run_duration=dws.max_run_duration,
        labels=labels or None,
        taints=[
            gcp.container.NodePoolNodeConfigTaintArgs(key=key, value=value, effect=GKE_TAINT_EFFECT[effect])
            for key, value, effect in args.node_taints
        ]
        or None,
        oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        # The cluster's node account; pods act as it only with GCE_METADATA.
        service_account=service_account,
        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode=args.workload_metadata),
        advanced_machine_features=(
            gcp.container.NodePoolNodeConfigAdvancedMachineFeaturesArgs(threads_per_core=args.threads_per_core)
            if args.threads_per_core is not None
            else None
        ),
        resource_labels=resource_labels(args.labels, args.allow_replacement),
    )
