"""``MaxTextJobsetTraining``: MaxText training on JobSet across the stack's TPU slices.

Children: the JobSet controller (``HelmController``, pinned and vendored like the Saxml kind's), then the
training JobSet after it, the workload identity and the bucket. The JobSet is replaced, not patched, when
its spec changes: the JobSet webhook rejects changes to ``replicatedJobs``, and a new run name or argument
is a new run (the same run name resumes from its checkpoints). Multi-Tier Checkpointing's cluster side (the
GKE add-on, the ``CheckpointConfiguration`` and the backup bucket) is the ``multiTierCheckpointing`` add-on
(``components/platform/addons/multi_tier_checkpointing.py``), which the JobSet waits for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from ...config.resolve import StackPlan
from ...platform import k8s as k8s_objects
from ...platform.addons.controllers import HelmController
from ...platform.gke import GkeCluster
from ...platform.identity import WorkloadIdentity
from ...platform.network_policies import network_policies
from ...platform.storage import StackBucket
from . import render as render
from .spec import run_name, settings


class MaxTextJobsetTraining(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:maxtext_jobset:MaxTextJobsetTraining"

    controller: HelmController
    jobset: pulumi.CustomResource

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        after: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        config = stack.config
        self.controller = HelmController(
            f"{name}-jobset-controller",
            controller="jobset",
            version=config.controllers.jobset_version,
            provider=cluster.provider,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.jobset = k8s_objects.create(
            render.render_jobset(stack),
            f"{name}-jobset",
            pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                depends_on=[self.controller.release, *after],
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        self.register_outputs({"jobset": run_name(config)})


def deploy(
    stack: StackPlan,
    *,
    cluster: GkeCluster,
    identity: WorkloadIdentity,
    buckets: Mapping[str, StackBucket],
    addons: Mapping[str, pulumi.Resource] | None = None,
) -> Mapping[str, Any]:
    """Create the training JobSet (after the bucket, the identity and any checkpointing add-on)."""
    config = stack.config
    after: list[pulumi.Resource] = [identity, buckets[settings(config).bucket], *(addons or {}).values()]
    MaxTextJobsetTraining("maxtext-jobset", stack, cluster=cluster, after=after)
    network_policies(
        "network-policies",
        render.render_objects(stack),
        render.network_intents(stack),
        namespace=config.namespace,
        stack=config.stack,
        cluster=cluster,
        depends_on=[identity],
    )
    return {
        "jobset": f"{identity.namespace}/{run_name(config)}",
        "jobset_status_command": render.status_command(stack),
        "training_logs_command": render.logs_command(stack),
        "training_output": render.output_url(stack),
    }
