"""``MultiTierCheckpointing``: the stack's side of GKE Multi-Tier Checkpointing (MTC), a cluster add-on a
training kind opts into (``multiTierCheckpointing``; the MaxText JobSet kind with
``workload.maxtextJobset.multiTierCheckpointing.enabled``).

GKE's part is the ``HighScaleCheckpointing`` add-on (``components/platform/gke.py`` ADDONS, enabled on the
cluster through ``addons_config.high_scale_checkpointing_config``): a controller, the RAM-disk CSI driver
``multitier-checkpoint.csi.storage.gke.io`` and a replicator DaemonSet. This module registers what that
add-on is configured with (``components/catalog/checkpointing.py`` for every fact and source):

* the backup bucket: hierarchical namespace (GKE: "otherwise backups will fail"), uniform access, public
  access prevented, no object versioning (a hierarchical-namespace bucket does not support it);
* ``roles/storage.objectUser`` on that bucket for the replicator's identity
  (``ns/gke-managed-checkpointing/sa/gke-checkpointing-multitier-node``, as a ``principal://`` of the
  project's Workload Identity pool), the least role that reads, writes and lists objects;
* one cluster-scoped ``CheckpointConfiguration`` (``checkpointing.gke.io/v1``): the bucket, the TPU pools'
  machine type as node selector, the TPU taint toleration, and ``inMemoryVolumeSize``, the RAM disk per host
  the planner sizes from the checkpoint's bytes (``planner.training_perf.ramdisk_quantity``: 2 x the host's
  shard of parameters and Adam moments + 15%, MaxText's MTC sizing rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from ...catalog import checkpointing as mtc
from ...catalog.models import MODELS
from ...config import naming
from ...config.stack import StackConfig
from ...planner import training_perf
from ...render.core import tpu_toleration
from .. import k8s as k8s_objects
from ..gke import GkeCluster
from ..identity import principal_member

NAME = "multiTierCheckpointing"
"""What a kind's ``addons`` function returns to opt into this add-on."""
COMPONENT = "multi-tier-checkpointing"
BUCKET_KEY = mtc.MTC_BACKUP_BUCKET_KEY
CONFIG_NAME = "checkpoint-configuration"
SCAN_WAIVERS: Mapping[str, Mapping[str, str]] = {}


def needed(config: StackConfig) -> bool:
    return NAME in config.addons


def backup_bucket_name(config: StackConfig) -> str:
    return naming.bucket_name(config.project, config.stack, BUCKET_KEY)


def ramdisk(config: StackConfig) -> str:
    """``inMemoryVolumeSize``: the planner's per-host checkpoint bytes through MaxText's MTC sizing rule. DCN
    fsdp (the opting kind's ``dcn_parallelism``) splits a slice's replica further."""
    dcn = getattr(config.workload.section, "dcn_parallelism", None) or {}
    per_host = training_perf.checkpoint_bytes_per_host(MODELS[config.workload.model], config.tpu.slice, int(dcn.get("fsdp", 1)))
    return training_perf.ramdisk_quantity(per_host)


def render_checkpoint_configuration(config: StackConfig) -> dict[str, Any]:
    tpu = config.tpu.slice
    return {
        "apiVersion": mtc.MTC_API,
        "kind": "CheckpointConfiguration",
        "metadata": {"name": naming.fit(f"{config.stack}-{CONFIG_NAME}", 63)},
        "spec": {
            "cloudStorageBucketName": backup_bucket_name(config),
            "nodeSelector": {"node.kubernetes.io/instance-type": tpu.machine_type},
            "tolerations": [tpu_toleration()],
            "inMemoryVolumeSize": ramdisk(config),
        },
    }


class MultiTierCheckpointing(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:multi_tier_checkpointing:MultiTierCheckpointing"

    bucket: gcp.storage.Bucket
    grant: gcp.storage.BucketIAMMember
    configuration: pulumi.CustomResource

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        cluster: GkeCluster,
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.bucket = gcp.storage.Bucket(
            f"{name}-backup",
            name=backup_bucket_name(config),
            project=config.project,
            location=config.region.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True),
            force_destroy=config.policy.force_destroy,
            labels={**config.labels, "purpose": "mtc-backup"},
            # Checkpoints are data: protected and retained in prod, as every stack bucket.
            opts=pulumi.ResourceOptions(
                parent=self, protect=config.policy.protect, retain_on_delete=config.policy.retain_on_delete
            ),
        )
        project = config.project
        number = gcp.organizations.get_project_output(project_id=project).number
        member = number.apply(lambda n: principal_member(str(n), project, mtc.MTC_DAEMON_NAMESPACE, mtc.MTC_DAEMON_KSA))
        self.grant = gcp.storage.BucketIAMMember(
            f"{name}-replicator",
            bucket=self.bucket.name,
            role=mtc.MTC_BUCKET_ROLE,
            member=member,
            # The principal exists once the cluster's Workload Identity pool does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.cluster]),
        )
        self.configuration = k8s_objects.create(
            render_checkpoint_configuration(config),
            f"{name}-configuration",
            # It names the bucket: after it (and its grant), and after the TPU pools it selects.
            pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[self.bucket, self.grant, *after]),
        )
        self.register_outputs({"backup_bucket": self.bucket.name})


def install(
    config: StackConfig,
    *,
    cluster: GkeCluster,
    namespace_ready: Sequence[pulumi.Resource] = (),
    pools: Sequence[pulumi.Resource] = (),
) -> MultiTierCheckpointing:
    """The backup bucket, its grant and the CheckpointConfiguration (after the TPU pools it selects)."""
    return MultiTierCheckpointing(COMPONENT, config, cluster=cluster, after=pools)
