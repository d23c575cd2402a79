"""The platform layer every stack has: cluster, one node pool per TPU slice, buckets, identity.

One function builds it in dependency order (node service account and cluster → buckets →
identity → TPU pools), so the program (``__main__.py``) and the tests that deploy a workload on
top of it share the same wiring.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config import StackConfig
from components.gke import GkeCluster
from components.identity import WorkloadIdentity
from components.storage import StackBucket
from components.tpu_pool import TpuSlicePool


@dataclass(frozen=True)
class Platform:
    cluster: GkeCluster
    pools: list[TpuSlicePool]
    buckets: dict[str, StackBucket]
    identity: WorkloadIdentity


def build_platform(config: StackConfig) -> Platform:
    cluster = GkeCluster(config.cluster_name, config)
    buckets = {key: StackBucket(f"bucket-{key}", config, key=key) for key in config.buckets}
    identity = WorkloadIdentity(
        "workload",
        config,
        provider=cluster.provider,
        bucket_names={key: bucket.bucket_name for key, bucket in buckets.items()},
        cluster=cluster.cluster,
        node_service_account=cluster.node_service_account,
    )
    # Pools come last: they run as the cluster's node account and need its role (and, with GCE
    # metadata, the identity's bucket grants to that account) before their nodes start.
    pools = [
        TpuSlicePool(
            pool,
            config,
            index=i,
            cluster_name=cluster.cluster_name,
            node_service_account=cluster.node_service_account,
            node_grants=[*cluster.node_grants, *identity.node_grants],
        )
        for i, pool in enumerate(config.pool_names())
    ]
    return Platform(cluster, pools, buckets, identity)
