"""The fields of a TPU slice's node pool and of the cluster, decided by pure functions
(components/platform/pool_settings.py, cluster_settings.py): each rule on its own Args, no engine.

The stacks' plans (tests/test_capacity_tiers.py, test_components.py, test_hardening.py) check the
same fields as registered; these tests pin each rule where it is decided.
"""

from __future__ import annotations

from typing import Any

import pulumi_gcp as gcp
import pytest

from components.catalog import tpu as tpu_catalog
from components.config.environments import ALLOW_REPLACE_LABEL
from components.platform import cluster_settings, pool_settings
from components.platform.gke import GkeClusterArgs
from components.platform.identity import NodeServiceAccountArgs
from components.platform.tpu_pool import Autoscaling, TpuSlicePoolArgs

GENERATION = tpu_catalog.GENERATIONS["v6e"]
ZONE = GENERATION.flex_start_zones[0]
"""A zone the catalog lists for the generation's flex-start too, so every capacity type is valid in it."""
SA = "nodes@my-project.iam.gserviceaccount.com"
MULTI_HOST = "4x4"
SINGLE_HOST = "2x2"


def pool(**override: Any) -> TpuSlicePoolArgs:
    values: dict[str, Any] = {
        "cluster": "c",
        "project": "my-project",
        "location": tpu_catalog.zone_region(ZONE),
        "node_service_account": SA,
        "generation": GENERATION.name,
        "topology": MULTI_HOST,
        "zone": ZONE,
    }
    return TpuSlicePoolArgs(**(values | override))


def slice_with(placement: str | None) -> tpu_catalog.TpuSlice:
    return next(s for s in tpu_catalog.all_slices() if s.placement == placement)


# ---------------------------------------------------------------- the cluster a pool joins


def test_a_pool_on_a_cluster_name_takes_everything_from_its_args() -> None:
    target = pool_settings.cluster_target(pool())
    assert (target.project, target.location, target.cluster_name, target.node_service_account) == (
        "my-project",
        tpu_catalog.zone_region(ZONE),
        "c",
        SA,
    )
    assert target.node_grants == ()


# ---------------------------------------------------------------- node bounds and autoscaling


def test_a_held_slice_has_no_bounds_and_no_autoscaling() -> None:
    for args in (pool(), pool(spot=True), pool(reservation="r")):
        assert pool_settings.node_bounds(args) is None
        assert pool_settings.autoscaling(args, None) is None


@pytest.mark.parametrize(
    "override", [{"scale_from_zero": True}, {"flex_start": True}, {"queued_provisioning": True}], ids=lambda o: next(iter(o))
)
def test_a_pool_that_scales_from_zero_is_bounded_per_zone_by_the_slices_hosts(override: dict[str, Any]) -> None:
    args = pool(**override)
    hosts = args.tpu_slice.hosts
    assert hosts > 1  # a multi-host slice scales atomically: 0 or all of its hosts
    bounds = pool_settings.node_bounds(args)
    assert bounds == (0, hosts)
    assert pool_settings.autoscaling(args, bounds) == gcp.container.NodePoolAutoscalingArgs(
        min_node_count=0, max_node_count=hosts, location_policy="ANY"
    )


def test_configured_autoscaling_keeps_its_total_bounds() -> None:
    args = pool(topology=SINGLE_HOST, autoscaling=Autoscaling(min_nodes=1, max_nodes=3))
    bounds = pool_settings.node_bounds(args)
    assert bounds == (1, 3)
    scaling = pool_settings.autoscaling(args, bounds)
    assert scaling == gcp.container.NodePoolAutoscalingArgs(total_min_node_count=1, total_max_node_count=3, location_policy="ANY")


# ---------------------------------------------------------------- reservation affinity and DWS flags


def test_reservation_affinity_names_the_reservation_consumes_none_for_dws_and_is_unset_otherwise() -> None:
    shared = "projects/other-project/reservations/r/reservationBlocks/b"
    assert pool_settings.reservation_affinity(pool(reservation=shared)) == (
        gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key="compute.googleapis.com/reservation-name", values=[shared]
        )
    )
    for dws in (pool(flex_start=True), pool(queued_provisioning=True)):
        assert pool_settings.reservation_affinity(dws) == gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="NO_RESERVATION"
        )
    assert pool_settings.reservation_affinity(pool()) is None
    assert pool_settings.reservation_affinity(pool(spot=True)) is None


def test_dws_flags_of_flex_start_queued_and_other_pools() -> None:
    flex = pool_settings.dws_flags(pool(flex_start=True, max_run_hours=2))
    assert flex == pool_settings.DwsFlags(flex_start=True, max_run_duration="7200s", auto_repair=False, queued_provisioning=None)
    queued = pool_settings.dws_flags(pool(queued_provisioning=True))
    # Unset maxRunHours is sent as GKE's maximum (the field is ForceNew and not read back).
    assert queued.max_run_duration == f"{tpu_catalog.DWS_MAX_RUN_HOURS * 3600}s"
    assert (queued.flex_start, queued.auto_repair) == (True, False)
    assert queued.queued_provisioning == gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
    for held in (pool(), pool(spot=True), pool(reservation="r")):
        assert pool_settings.dws_flags(held) == pool_settings.DwsFlags(None, None, True, None)


# ---------------------------------------------------------------- placement


def test_placement_of_single_host_compact_and_workload_policy_slices() -> None:
    assert pool_settings.placement_policy(slice_with(None), None) is None
    compact = slice_with("COMPACT")
    assert pool_settings.placement_policy(compact, None) == gcp.container.NodePoolPlacementPolicyArgs(
        type="COMPACT", tpu_topology=compact.topology
    )
    placed = slice_with("WORKLOAD_POLICY")
    assert pool_settings.placement_policy(placed, "wp") == gcp.container.NodePoolPlacementPolicyArgs(
        type="", tpu_topology=placed.topology, policy_name="wp"
    )
    with pytest.raises(ValueError, match="workload policy"):
        pool_settings.placement_policy(placed, None)


# ---------------------------------------------------------------- node config


def test_node_config_of_a_queued_pool_with_a_scheme_and_an_allowance() -> None:
    args = pool(
        queued_provisioning=True,
        node_labels={"cloud.google.com/compute-class": "tpu"},
        node_taints=[("cloud.google.com/compute-class", "tpu", "NoSchedule"), ("k", "v", "PreferNoSchedule")],
        labels={"team": "ml"},
        allow_replacement=True,
        threads_per_core=1,
    )
    config = pool_settings.node_config(args, SA)
    assert config.machine_type == args.tpu_slice.machine_type
    assert config.labels == {"cloud.google.com/compute-class": "tpu", tpu_catalog.QUEUED_NODE_LABEL: "true"}
    assert config.taints == [
        gcp.container.NodePoolNodeConfigTaintArgs(key="cloud.google.com/compute-class", value="tpu", effect="NO_SCHEDULE"),
        gcp.container.NodePoolNodeConfigTaintArgs(key="k", value="v", effect="PREFER_NO_SCHEDULE"),
    ]
    assert config.resource_labels == {"team": "ml", ALLOW_REPLACE_LABEL: "true"}
    assert (config.flex_start, config.max_run_duration) == (True, f"{tpu_catalog.DWS_MAX_RUN_HOURS * 3600}s")
    assert config.reservation_affinity == pool_settings.reservation_affinity(args)
    assert config.advanced_machine_features == gcp.container.NodePoolNodeConfigAdvancedMachineFeaturesArgs(threads_per_core=1)
    assert (config.service_account, config.oauth_scopes) == (SA, [cluster_settings.CLOUD_PLATFORM_SCOPE])


def test_node_config_of_a_plain_pool_sends_no_optional_field() -> None:
    config = pool_settings.node_config(pool(), SA)
    assert (config.spot, config.labels, config.taints, config.flex_start, config.max_run_duration) == (None,) * 5
    assert (config.reservation_affinity, config.advanced_machine_features) == (None, None)
    assert config.resource_labels == {}
    assert config.workload_metadata_config == gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
        mode=pool().workload_metadata
    )
    assert pool_settings.node_config(pool(spot=True), SA).spot is True


def test_every_kubernetes_taint_effect_has_its_gke_name() -> None:
    import typing

    from components.platform.tpu_pool import TaintEffect

    assert set(pool_settings.GKE_TAINT_EFFECT) == set(typing.get_args(TaintEffect))


# ---------------------------------------------------------------- the cluster


def cluster(**override: Any) -> GkeClusterArgs:
    return GkeClusterArgs(**({"project": "my-project", "region": tpu_catalog.zone_region(ZONE)} | override))


def test_the_cluster_creates_its_node_account_unless_given_one() -> None:
    made = cluster_settings.node_account(cluster(), "demo")
    assert isinstance(made, NodeServiceAccountArgs)
    assert (made.project, made.account_id) == ("my-project", "demo-nodes")
    assert cluster_settings.node_account(cluster(node_service_account=SA), "demo") == SA


def test_dataplane_v2_is_a_datapath_and_legacy_is_calico_in_two_halves() -> None:
    v2 = cluster(dataplane="v2")
    assert (cluster_settings.datapath_provider(v2), cluster_settings.network_policy(v2)) == ("ADVANCED_DATAPATH", None)
    assert cluster_settings.addons_config(v2).network_policy_config is None
    legacy = cluster(dataplane="legacy")
    assert cluster_settings.datapath_provider(legacy) is None
    assert cluster_settings.network_policy(legacy) == gcp.container.ClusterNetworkPolicyArgs(enabled=True, provider="CALICO")
    assert cluster_settings.addons_config(legacy).network_policy_config == (
        gcp.container.ClusterAddonsConfigNetworkPolicyConfigArgs(disabled=False)
    )


def test_addons_are_enabled_only_when_asked_for() -> None:
    none = cluster_settings.addons_config(cluster())
    assert none.gcs_fuse_csi_driver_config == gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=False)
    assert none.ray_operator_configs is None
    both = cluster_settings.addons_config(cluster(addons={"gcsFuseCsiDriver", "rayOperator"}))
    assert both.gcs_fuse_csi_driver_config == gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)
    assert both.ray_operator_configs == [gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(enabled=True)]


def test_hardening_blocks_are_sent_only_when_set() -> None:
    plain = cluster(private_nodes=False, authorized_networks=None, binary_authorization=False)
    assert cluster_settings.private_cluster_config(plain) is None
    assert cluster_settings.master_authorized_networks(plain) is None
    assert cluster_settings.binary_authorization(plain) is None
    hard = cluster(private_nodes=True, authorized_networks=["10.0.0.0/8", "192.168.0.0/16"], binary_authorization=True)
    assert cluster_settings.private_cluster_config(hard) == gcp.container.ClusterPrivateClusterConfigArgs(
        enable_private_nodes=True, enable_private_endpoint=False
    )
    assert cluster_settings.master_authorized_networks(hard) == gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
        cidr_blocks=[
            gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block="10.0.0.0/8"),
            gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block="192.168.0.0/16"),
        ]
    )
    assert cluster_settings.binary_authorization(hard) == gcp.container.ClusterBinaryAuthorizationArgs(
        evaluation_mode="PROJECT_SINGLETON_POLICY_ENFORCE"
    )


def test_the_system_pool_runs_as_the_node_account_with_shielded_vms() -> None:
    args = cluster(secure_boot=True, labels={"team": "ml"}, allow_replacement=True)
    config = cluster_settings.system_node_config(args, SA)
    assert (config.machine_type, config.disk_size_gb) == (args.system_machine_type, args.system_disk_size_gb)
    assert (config.service_account, config.oauth_scopes) == (SA, [cluster_settings.CLOUD_PLATFORM_SCOPE])
    assert config.shielded_instance_config == cluster_settings.shielding(True)
    assert config.workload_metadata_config == gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA")
    # The allowance label is the cluster's (and the TPU pools'); the system pool has the given labels only.
    assert config.resource_labels == {"team": "ml"}
    assert cluster_settings.resource_labels({"team": "ml"}, True) == {"team": "ml", ALLOW_REPLACE_LABEL: "true"}
    assert cluster_settings.resource_labels({"team": "ml"}, False) == {"team": "ml"}
