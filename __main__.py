"""gke-tpu-llm: one stack = one GKE cluster, its TPU slices, buckets, identity and workload.

Everything numeric (node counts, TPU requests, selectors) comes from the catalog through the
validated config; this file only wires components in dependency order and exports what a user
needs next. The same file runs under real ``pulumi up`` and under ``python -m components plan``.
"""

import pulumi

from components.config.errors import ConfigError
from components.config.resolve import resolve
from components.program.build import build_addons, build_platform
from components.program.runtime import load_stack_config
from components.workloads.deploy import deploy_workload

try:
    stack = resolve(load_stack_config())  # verified slice + the workload's parallelism
except ConfigError as error:
    # A clean, complete report and nothing registered.
    raise pulumi.RunError(str(error)) from None
config = stack.config

platform = build_platform(config)  # cluster -> buckets -> identity -> TPU pools
cluster, buckets, identity = platform.cluster, platform.buckets, platform.identity
addons = build_addons(config, platform)  # the cluster add-ons the settings need (capacity scheduling, metrics adapter)
workload_outputs = deploy_workload(stack, cluster=cluster, identity=identity, buckets=buckets, addons=addons)

pulumi.export("cluster_name", cluster.cluster_name)
pulumi.export("get_credentials_command", cluster.get_credentials_command)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("tpu_pools", [pool.pool_name for pool in platform.pools])
pulumi.export("buckets", {key: bucket.url for key, bucket in buckets.items()})
pulumi.export("namespace", identity.namespace)
pulumi.export("service_account", identity.service_account_name)
pulumi.export("capacity", stack.capacity.memory.to_dict() | {"flags": stack.flags})
for key, value in workload_outputs.items():
    pulumi.export(key, value)
