"""JetStream + MaxText + Pathways serving on LeaderWorkerSet (workload kind ``jetstream-pathways``).

Components:
* ``JetstreamServer`` — the LWS controller (pinned Helm release), the LeaderWorkerSet and its
  ClusterIP Service. The LWS depends on the controller release (CRD and webhook first) and on the
  workload's ServiceAccount.
* ``CheckpointConversion`` (when ``workload.jetstream.conversion.enabled``) — a CPU node pool
  scaled 0..1 for the converter, the Secret holding Meta's download URL and the conversion Job.

Ordering between conversion and serving is data, not Pulumi waiting: the Job runs for hours, so
Pulumi does not await it (``pulumi.com/skipAwait``); the LWS leader's init container waits for the
converted checkpoint's commit marker in the bucket, and only then starts the server.

The renderers (``components.workloads.jetstream.render`` and ``checkpoint``) hold every field; this module only registers them.
They take the buckets' deterministic names (``StackConfig.bucket_name``), so each object that embeds
a bucket name lists that bucket in ``depends_on``: the engine still creates the bucket first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_gcp as gcp

from ...config.errors import NAMESPACE
from ...config.resolve import StackPlan
from ...platform import k8s as k8s_objects
from ...platform.addons.controllers import HelmController
from ...platform.cluster_settings import CLOUD_PLATFORM_SCOPE, cpu_shielding
from ...platform.gke import GkeCluster
from ...platform.identity import WorkloadIdentity
from ...platform.network_policies import network_policies
from ...platform.storage import StackBucket
from . import checkpoint
from . import render as render
from .spec import settings

META_URL_SECRET_KEY = "metaCheckpointUrl"
CONVERTER_POOL = "ckpt-convert"
"""Deterministic name of the converter's CPU node pool (the Job selects it by this name)."""


class CheckpointConversion(pulumi.ComponentResource):
    """Meta checkpoint -> MaxText (unscanned, optionally int8) in the checkpoint bucket."""

    TYPE = "gke-tpu-llm:jetstream:CheckpointConversion"

    pool_name: pulumi.Output[str]
    output_path: str

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        identity: WorkloadIdentity,
        checkpoint_bucket: StackBucket,
        meta_url: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        config = stack.config
        spec = settings(config)
        conversion = spec.conversion
        bucket_name = config.bucket_name(spec.checkpoint_bucket)  # = checkpoint_bucket's name
        # A CPU pool sized for the converter (about 2 TB RAM for 405B), scaled from zero: the
        # autoscaler adds the node for the pending Job pod and removes it after the Job ends, so
        # the large VM is billed only while converting. The taint keeps every other pod off it.
        pool = gcp.container.NodePool(
            f"{name}-pool",
            name=CONVERTER_POOL,
            project=config.project,
            cluster=cluster.cluster_name,
            location=config.cluster_location,
            node_locations=[conversion.zone or config.tpu.zone],
            initial_node_count=0,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=0, total_max_node_count=1, location_policy="ANY"
            ),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=conversion.machine_type,
                disk_size_gb=conversion.disk_size_gb,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                # The stack's node account (never the Compute Engine default); the Job itself reaches
                # the bucket as the workload's KSA through Workload Identity.
                service_account=cluster.node_service_account,
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                shielded_instance_config=cpu_shielding(config),
                taints=[
                    gcp.container.NodePoolNodeConfigTaintArgs(
                        key=checkpoint.CONVERTER_TAINT_KEY, value="true", effect="NO_SCHEDULE"
                    )
                ],
                resource_labels=config.labels,
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            opts=pulumi.ResourceOptions(
                parent=self,
                # The autoscaler owns the node count; a fixed pool name needs delete-before-replace.
                # Not protected even in prod: it holds no data and scales to zero, and turning the
                # conversion off must be able to remove it.
                ignore_changes=["initialNodeCount", "nodeCount"],
                delete_before_replace=True,
                # Created after (and deleted before) the node account's role.
                depends_on=cluster.node_grants,
            ),
        )
        self.pool_name = pool.name
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        secret = k8s_objects.create(
            checkpoint.render_meta_url_secret(stack, namespace=identity.namespace, url=meta_url),
            f"{name}-meta-url",
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[identity.service_account])),
        )
        k8s_objects.create(
            checkpoint.render_conversion_job(
                stack,
                namespace=identity.namespace,
                service_account=identity.service_account_name,
                checkpoint_bucket=bucket_name,
                node_pool=CONVERTER_POOL,  # = pool's name
            ),
            f"{name}-job",
            pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[secret, pool, identity.service_account, checkpoint_bucket])
            ),
        )
        self.output_path = checkpoint.checkpoint_path(stack, bucket_name)
        self.register_outputs({"pool_name": self.pool_name, "output_path": self.output_path})


LWS_IMMUTABLE = "spec.leaderWorkerTemplate.subGroupPolicy"
"""LeaderWorkerSet field the LWS admission webhook keeps immutable (see ``JetstreamServer``)."""


class JetstreamServer(pulumi.ComponentResource):
    """LWS controller + the JetStream/Pathways LeaderWorkerSet + its ClusterIP Service."""

    TYPE = "gke-tpu-llm:jetstream:JetstreamServer"

    service_name: str
    checkpoint_path: str

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        identity: WorkloadIdentity,
        buckets: Mapping[str, StackBucket],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        spec = settings(stack.config)
        self.controller = HelmController(
            "lws",
            controller="lws",
            version=stack.config.controllers.lws_version,
            provider=cluster.provider,
            opts=pulumi.ResourceOptions(parent=self),
        )
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        checkpoint_bucket = stack.config.bucket_name(spec.checkpoint_bucket)
        k8s_objects.create(
            render.render_lws(
                stack,
                namespace=identity.namespace,
                service_account=identity.service_account_name,
                checkpoint_bucket=checkpoint_bucket,
                scratch_bucket=stack.config.bucket_name(spec.scratch_bucket),
            ),
            f"{name}-lws",
            pulumi.ResourceOptions.merge(
                k8s_opts,
                pulumi.ResourceOptions(
                    depends_on=[
                        self.controller.release,
                        identity.service_account,
                        # The pods read and write both buckets by the names embedded above.
                        buckets[spec.checkpoint_bucket],
                        buckets[spec.scratch_bucket],
                    ],
                    # The LWS webhook refuses to change, add or remove subGroupPolicy on a live
                    # LeaderWorkerSet (lws v0.10.0 pkg/webhooks/leaderworkerset_webhook.go
                    # ValidateUpdate); a disaggregated slice-shape change must recreate it instead of
                    # failing the update half-way, after the pools were already replaced.
                    replace_on_changes=[LWS_IMMUTABLE],
                ),
            ),
        )
        k8s_objects.create(
            render.render_service(stack, namespace=identity.namespace),
            f"{name}-svc",
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[identity.service_account])),
        )
        self.service_name = render.SERVICE_NAME
        self.checkpoint_path = checkpoint.checkpoint_path(stack, checkpoint_bucket)
        self.register_outputs({"service_name": self.service_name, "checkpoint_path": self.checkpoint_path})


def deploy(
    stack: StackPlan,
    *,
    cluster: GkeCluster,
    identity: WorkloadIdentity,
    buckets: Mapping[str, StackBucket],
    addons: Mapping[str, pulumi.Resource] | None = None,  # the cluster add-ons installed: none is this kind's
) -> Mapping[str, Any]:
    """Create the serving (and, when enabled, the conversion) components; return the stack outputs."""
    spec = settings(stack.config)
    namespace = identity.namespace
    outputs: dict[str, Any] = {}
    if spec.conversion.enabled:
        # Secret config key (never plaintext); parse_stack_config already checked presence and secrecy.
        meta_url = pulumi.Config(NAMESPACE).require_secret(META_URL_SECRET_KEY)
        CheckpointConversion(
            "checkpoint-conversion",
            stack,
            cluster=cluster,
            identity=identity,
            checkpoint_bucket=buckets[spec.checkpoint_bucket],
            meta_url=meta_url,
        )
        outputs["jetstream_conversion_logs_command"] = checkpoint.conversion_logs_command(namespace)
    server = JetstreamServer("jetstream", stack, cluster=cluster, identity=identity, buckets=buckets)
    # Default-deny ingress for the namespace plus the flows the workload declares (render.network_intents).
    objects = render.manifests(
        stack,
        namespace=namespace,
        service_account=identity.service_account_name,
        checkpoint_bucket=stack.config.bucket_name(spec.checkpoint_bucket),
        scratch_bucket=stack.config.bucket_name(spec.scratch_bucket),
        converter_pool=CONVERTER_POOL if spec.conversion.enabled else None,
    )
    network_policies(
        "network-policies",
        objects,
        render.network_intents(stack),
        namespace=namespace,
        stack=stack.config.stack,
        cluster=cluster,
        depends_on=[identity],
    )
    outputs.update(
        {
            "jetstream_service": f"{namespace}/{server.service_name}",
            "jetstream_port_forward_command": render.port_forward_command(namespace),
            "jetstream_curl": render.curl_example(),
            "jetstream_logs_command": render.server_logs_command(namespace),
            "jetstream_checkpoint_path": server.checkpoint_path,
        }
    )
    return outputs
