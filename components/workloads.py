"""Dispatch a stack's workload kind to the module that deploys it (one entry per kind)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

import pulumi

from components.capacity import StackPlan
from components.config import WorkloadKind
from components.gke import GkeCluster
from components.identity import WorkloadIdentity
from components.storage import StackBucket

WORKLOAD_MODULES: Mapping[WorkloadKind, str] = {
    WorkloadKind.jetstream_pathways: "components.jetstream",
    WorkloadKind.saxml: "components.saxml",
    WorkloadKind.vllm: "components.vllm",
    WorkloadKind.maxtext_ray: "components.maxtext_ray",
}


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
    stack: StackPlan, *, cluster: GkeCluster, identity: WorkloadIdentity, buckets: Mapping[str, StackBucket]
) -> Mapping[str, pulumi.Input[Any]]:
    """Create the workload's components; return the stack outputs it adds (endpoint, commands, …)."""
    module = importlib.import_module(WORKLOAD_MODULES[stack.config.workload.kind])
    deploy: Deploy = module.deploy
    return deploy(stack, cluster=cluster, identity=identity, buckets=buckets)
