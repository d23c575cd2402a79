"""The platform layer every stack has: cluster, one node pool per TPU slice, buckets, identity.

The stack program's one mapping from ``StackConfig`` to the components' Args (``cluster_args``,
``bucket_args``, ``identity_args``, ``pool_args``); the components themselves know nothing of the
stack config, so a program of one's own uses them directly (``components.GkeCluster`` ...).
``build_platform`` builds the layer in dependency order (node service account and cluster →
buckets → identity → TPU pools), so the program (``__main__.py``) and the tests that deploy a
workload on top of it share the same wiring. ``build_addons`` then installs the cluster add-ons the
stack's settings need (:data:`ADDONS`), generically, before the workload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import pulumi

from ..config import naming
from ..config.naming import node_gsa_display_name
from ..config.stack import StackConfig
from ..crds.releases import CONTROLLERS
from ..platform.addons import (
    Addon,
    capacity_scheduling,
    inference_gateway,
    metrics_adapter,
    multi_tier_checkpointing,
    observability,
)
from ..platform.gke import ADDONS as GKE_ADDONS
from ..platform.gke import GkeCluster, GkeClusterArgs
from ..platform.identity import (
    WORKLOAD_COMPONENT,
    NodeServiceAccountArgs,
    WorkloadIdentity,
    WorkloadIdentityArgs,
    node_service_account_id,
)
from ..platform.storage import StackBucket, StackBucketArgs
from ..platform.tpu_pool import Autoscaling, TpuSlicePool, TpuSlicePoolArgs
from ..render.tiers import pool_scheduling

ADDONS: tuple[Addon, ...] = (capacity_scheduling, metrics_adapter, inference_gateway, multi_tier_checkpointing, observability)
"""The add-on modules the program wires, in order (``components.platform.addons``). Capacity
scheduling comes first: it attaches to every Kubernetes object registered after it."""


def unknown_addons(config: StackConfig) -> str | None:
    """Why the stack's add-ons (``StackConfig.addons``) name something nothing installs, naming the
    kind and every table a name may come from; None when each is known. Its kind's ``addons``
    function would otherwise opt into nothing, silently."""
    known = {
        "GKE add-ons (components/platform/gke.py ADDONS)": frozenset(GKE_ADDONS),
        "controllers (components/crds/releases.py CONTROLLERS)": frozenset(CONTROLLERS),
        "add-on modules (components/program/build.py ADDONS)": frozenset(addon.NAME for addon in ADDONS),
    }
    unknown = sorted(config.addons - frozenset().union(*known.values()))
    if not unknown:
        return None
    tables = "; ".join(f"{table}: {', '.join(sorted(names))}" for table, names in known.items())
    return f"kind {config.workload.kind} opts into add-ons nothing installs: {', '.join(unknown)}. Known: {tables}"


def gke_addons(config: StackConfig) -> frozenset[str]:
    """The GKE add-ons among what the stack's kind opts into (``StackConfig.addons``); the rest are
    controllers and :data:`ADDONS`, registered in the cluster."""
    return config.addons & frozenset(GKE_ADDONS)


@dataclass(frozen=True)
class Platform:
    cluster: GkeCluster
    pools: list[TpuSlicePool]
    buckets: dict[str, StackBucket]
    identity: WorkloadIdentity


def cluster_args(config: StackConfig) -> GkeClusterArgs:
    """The stack's cluster: its settings, the environment's protection, and the workload kind's add-ons."""
    spec, hardening, system = config.cluster, config.cluster.hardening, config.cluster.system_pool
    return GkeClusterArgs(
        project=config.project,
        region=config.region,
        allow_undocumented_region=config.tpu.allow_undocumented_zone,
        cluster_name=config.cluster_name,
        location_type=spec.location_type,
        # A zonal cluster lives in the TPU zone.
        zone=config.tpu.zone if spec.location_type == "zonal" else None,
        release_channel=spec.release_channel,
        version=spec.version,
        deletion_protection=config.deletion_protection,
        protect=config.policy.protect,
        allow_replacement=config.cluster_allowed_to_go,
        dataplane=spec.dataplane,
        system_machine_type=system.machine_type,
        system_allow_undocumented_machine_type=system.allow_undocumented_machine_type,
        system_nodes_per_zone=system.nodes_per_zone,
        system_disk_size_gb=system.disk_size_gb,
        shielded_nodes=hardening.shielded_nodes,
        secure_boot=hardening.secure_boot,
        private_nodes=hardening.private_nodes,
        authorized_networks=hardening.authorized_networks,
        binary_authorization=hardening.binary_authorization,
        addons=gke_addons(config),
        # GKE's Gateway controller (and HTTP load balancing) for a gateway front door; updated in place.
        gateway_api=config.workload.front_door.gateway,
        labels=config.labels,
        # Every stack's nodes run as <stack>-tpu-nodes, the account GCE_METADATA stacks had first.
        node_service_account=NodeServiceAccountArgs(
            project=config.project,
            account_id=node_service_account_id(config.stack),
            display_name=node_gsa_display_name(config.stack, pods_act_as_it=config.tpu.workload_metadata == "GCE_METADATA"),
            legacy_aliases=True,
        ),
    )


def bucket_args(config: StackConfig, key: str) -> StackBucketArgs:
    """Bucket ``key`` of the stack, named ``<project>-<stack>-<key>``, with the environment's retention."""
    spec = config.buckets[key]
    return StackBucketArgs(
        project=config.project,
        region=config.region,
        allow_undocumented_region=config.tpu.allow_undocumented_zone,
        purpose=spec.purpose,
        bucket_name=config.bucket_name(key),
        holds_checkpoints=spec.holds_checkpoints,
        storage_class=spec.storage_class,
        force_destroy=config.bucket_force_destroy(key),
        protect=config.policy.protect,
        retain_on_delete=config.policy.retain_on_delete,
        labels=config.labels,
    )


def identity_args(
    config: StackConfig, cluster: GkeCluster, buckets: Mapping[str, StackBucket | pulumi.Input[str]]
) -> WorkloadIdentityArgs:
    """The workload's namespace and ServiceAccount and their bucket roles."""
    spec = config.identity
    return WorkloadIdentityArgs(
        cluster=cluster,
        namespace=config.namespace,
        service_account=spec.service_account,
        mode=spec.mode,
        bucket_roles=spec.bucket_roles,
        buckets=buckets,
        workload_metadata=config.tpu.workload_metadata,
        stack=config.stack,
    )


def pool_args(
    config: StackConfig,
    index: int,
    *,
    tier: int = 0,
    cluster: GkeCluster | pulumi.Input[str],
    node_service_account: pulumi.Input[str] | None = None,
    depends_on: Sequence[pulumi.Resource] = (),
) -> TpuSlicePoolArgs:
    """The pool of slice ``index`` in capacity tier ``tier`` (``naming.node_pool_name``: the first tier is
    ``tpu-slice-<index>``, keeping the names earlier releases gave it).

    Node counts (``TpuSpec.tier_holds``): a stack's one tier, or a reservation first tier, holds the slice
    as before (a fixed node count, or ``tpu.autoscaling``); every other pool scales from zero (a
    multi-host slice 0 <-> all hosts, atomically; single-host 0 .. ``tpu.autoscaling.maxNodes``), so it
    is created and billed only when pods cannot be placed on the tiers before it."""
    tpu = config.tpu
    spec = tpu.tiers[tier]
    low, high = tpu.tier_nodes(tier)
    # A fallback ladder's pools are the manually created pools of its ComputeClass (label + taint).
    scheduling = pool_scheduling(config, tier)
    return TpuSlicePoolArgs(
        cluster=cluster,
        generation=tpu.slice.generation.name,
        # The resolved slice: the capacity planner may have chosen the topology.
        topology=tpu.slice.topology,
        machine_type=tpu.slice.machine_type,
        zone=tpu.zone,
        allow_undocumented_zone=tpu.allow_undocumented_zone,
        spot=spec.type == "spot",
        reservation=spec.reservation if spec.type == "reservation" else None,
        flex_start=spec.type == "flexStart",
        queued_provisioning=spec.type == "queuedProvisioning",
        max_run_hours=spec.max_run_hours,
        node_labels=scheduling.labels,
        node_taints=[(t.key, t.value, t.kubernetes_effect) for t in scheduling.taints],
        # The node bounds are TpuSpec.tier_nodes (what the plan reports): a configured tpu.autoscaling
        # with them, else a fixed slice or, scaling from zero, the slice's hosts.
        scale_from_zero=tpu.autoscaling is None and not tpu.tier_holds(tier),
        autoscaling=Autoscaling(min_nodes=low, max_nodes=high) if tpu.autoscaling else None,
        workload_metadata=tpu.workload_metadata,
        threads_per_core=tpu.threads_per_core,
        disk_size_gb=tpu.disk_size_gb,
        allow_replacement=config.pools_allowed_to_go,
        protect=config.policy.protect,
        labels=config.labels,
        pool_name=naming.node_pool_name(index, tier, spec.type),
        project=config.project,
        location=config.cluster_location,
        node_service_account=node_service_account,
        depends_on=depends_on,
        # Only a slice's first pool ever had a shape-encoded name.
        legacy_alias_index=index if tier == 0 else None,
    )


def build_platform(config: StackConfig) -> Platform:
    cluster = GkeCluster(config.cluster_name, cluster_args(config))
    buckets = {key: StackBucket(f"bucket-{key}", bucket_args(config, key)) for key in config.buckets}
    identity = WorkloadIdentity(WORKLOAD_COMPONENT, identity_args(config, cluster, buckets))
    # Pools come last: they run as the cluster's node account and need its role (and, with GCE
    # metadata, the identity's bucket grants to that account) before their nodes start.
    pools = [
        TpuSlicePool(pool, pool_args(config, i, tier=t, cluster=cluster, depends_on=identity.node_grants))
        for i, t, pool in config.tier_pools()
    ]
    return Platform(cluster, pools, buckets, identity)


def build_addons(config: StackConfig, platform: Platform) -> Mapping[str, pulumi.ComponentResource]:
    """Install every add-on of :data:`ADDONS` the stack needs; return their components by name (what
    the workload's ``deploy`` may depend on, e.g. the HPA on ``metricsAdapter``)."""
    problem = unknown_addons(config)
    if problem is not None:  # a kind package's mistake (tests/test_addons.py), never dropped silently
        raise ValueError(problem)
    installed = {
        addon.NAME: addon.install(config, cluster=platform.cluster, namespace_ready=[platform.identity], pools=platform.pools)
        for addon in ADDONS
        if addon.needed(config)
    }
    return MappingProxyType(installed)
