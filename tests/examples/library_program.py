"""A Pulumi program of one's own: a GKE cluster and two TPU slice pools, no stack config.

No workload, bucket or secret: the components take their own typed Args. Run it as the
``__main__.py`` of any Pulumi Python project whose virtualenv has the library installed
(``pip install <this repository>``; then ``pulumi preview``). ``tests/test_install.py`` runs it that
way under Pulumi's mocks, from outside the repository; ``tests/test_library.py`` runs it in place.
"""

import pulumi
from gke_tpu_llm import GkeCluster, GkeClusterArgs, TpuSlicePool, TpuSlicePoolArgs

# A regional Standard cluster with the stack files' defaults: REGULAR channel, Dataplane V2, a CPU
# system pool, Workload Identity, and its own least-privilege node service account.
cluster = GkeCluster("demo", GkeClusterArgs(project="my-project", region="us-east5"))

# v6e 2x4 has two VM layouts: one 8-chip VM (single host, serving) or two 4-chip VMs; choose one.
single = TpuSlicePool(
    "serve",
    TpuSlicePoolArgs(cluster=cluster, generation="v6e", topology="2x4", machine_type="ct6e-standard-8t", zone="us-east5-b"),
)
# v5e 4x8: 32 chips on eight 4-chip VMs, one atomic multi-host slice (COMPACT placement).
multi = TpuSlicePool("train", TpuSlicePoolArgs(cluster=cluster, generation="v5e", topology="4x8", zone="us-east5-a"))

pulumi.export("cluster_name", cluster.cluster_name)
pulumi.export("get_credentials_command", cluster.get_credentials_command)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("tpu_pools", [single.pool_name, multi.pool_name])
pulumi.export("node_selectors", {"serve": single.tpu_slice.node_selector, "train": multi.tpu_slice.node_selector})
