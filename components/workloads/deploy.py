"""Dispatch a stack's workload kind to the deploy function its registry entry names."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

import pulumi

from ..config.resolve import StackPlan
from ..config.workload import serving_scenario
from ..platform.gke import GkeCluster
from ..platform.identity import WorkloadIdentity
from ..platform.storage import StackBucket
from .serving_benchmark import ServingBenchmark, ServingBenchmarkArgs


class Deploy(Protocol):
    def __call__(
        self,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        identity: WorkloadIdentity,
        buckets: Mapping[str, StackBucket],
        addons: Mapping[str, pulumi.Resource] | None = None,
    ) -> Mapping[str, Any]: ...


def deploy_workload(
    stack: StackPlan,
    *,
    cluster: GkeCluster,
    identity: WorkloadIdentity,
    buckets: Mapping[str, StackBucket],
    addons: Mapping[str, pulumi.Resource] | None = None,
) -> Mapping[str, pulumi.Input[Any]]:
    """Create the workload's components; return the stack outputs it adds (endpoint, commands, …).
    ``addons``: the cluster add-ons the program installed first (``components.program.build.build_addons``:
    capacity scheduling, the metrics adapter), by name, for the kind to depend on."""
    module_name, _, function = stack.config.kind_info.deploy.partition(":")
    deploy: Deploy = getattr(importlib.import_module(module_name), function)
    outputs = deploy(stack, cluster=cluster, identity=identity, buckets=buckets, addons=addons)
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
