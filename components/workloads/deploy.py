"""Dispatch a stack's workload kind to the deploy function its registry entry names."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pulumi

from components.config.resolve import StackPlan
from components.config.workload import serving_scenario
from components.platform.addons.capacity_scheduling import CapacityScheduling, CapacitySchedulingArgs, needed
from components.platform.gke import GkeCluster
from components.platform.identity import WorkloadIdentity
from components.platform.storage import StackBucket
from components.workloads.serving_benchmark import ServingBenchmark, ServingBenchmarkArgs


class Deploy(Protocol):
    def __call__(
        self,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        identity: WorkloadIdentity,
        buckets: Mapping[str, StackBucket],
    ) -> Mapping[str, Any]: ...


def deploy_workload(
    stack: StackPlan,
    *,
    cluster: GkeCluster,
    identity: WorkloadIdentity,
    buckets: Mapping[str, StackBucket],
    pools: Sequence[pulumi.Resource] = (),
) -> Mapping[str, pulumi.Input[Any]]:
    """Create the workload's components; return the stack outputs it adds (endpoint, commands, …)."""
    module_name, _, function = stack.config.kind_info.deploy.partition(":")
    deploy: Deploy = getattr(importlib.import_module(module_name), function)
    if needed(stack.config):
        # Capacity tiers (tpu.capacity): the ComputeClass or Kueue queue first; every workload object
        # registered after attach() gets the selectors/queue label it needs and depends on them
        # (components/platform/addons/capacity_scheduling.py). One tier: nothing, so the plan is unchanged.
        CapacityScheduling(
            "capacity-scheduling",
            CapacitySchedulingArgs(config=stack.config, provider=cluster.provider, namespace_ready=[identity], pools=pools),
        ).attach()
    outputs = deploy(stack, cluster=cluster, identity=identity, buckets=buckets)
    scenario = serving_scenario(stack.config)
    if scenario is None or not scenario.benchmark:
        return outputs
    # workload.serving.benchmark: the engine's own client against the server, after it (the kind's
    # Outputs carry the server's resources); components/workloads/serving_benchmark.py.
    benchmark = ServingBenchmark(
        "benchmark",
        ServingBenchmarkArgs(
            stack=stack,
            cluster=cluster,
            namespace=identity.namespace,
            server_service_account=identity.service_account_name,
            buckets=buckets,
            namespace_from=[identity],
            after=[v for v in outputs.values() if isinstance(v, pulumi.Output)],
        ),
    )
    return {
        **outputs,
        "benchmark_results": benchmark.results,
        "benchmark_logs_command": benchmark.logs_command,
        "benchmark_job_urn": benchmark.job.urn,
    }
