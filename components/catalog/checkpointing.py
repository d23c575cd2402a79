"""Training facts as data: GKE Multi-Tier Checkpointing (MTC), the throughputs a checkpoint is restored
at, and the model-FLOPs utilisation a MaxText training step is assumed to reach.

Data only (no Pulumi, no planner import). Every number carries its source, or says ASSUMED and why.
The planner's training figures (``components/planner/training_perf.py``) read them.
"""

from __future__ import annotations

SRC_GKE_MTC = (
    "GKE docs 'Train large-scale machine learning models on GKE with Multi-Tier Checkpointing' "
    "https://cloud.google.com/kubernetes-engine/docs/how-to/machine-learning/training/multi-tier-checkpointing "
    "(read 2026-11): 'requires GKE cluster version 1.32.4-gke.1415000 or later'; 'Autopilot clusters aren't "
    "supported'; the backup bucket needs hierarchical namespace ('otherwise backups will fail')"
)
SRC_MAXTEXT_MTC = (
    "AI-Hypercomputer/maxtext docs/guides/checkpointing_solutions/multi_tier_checkpointing.md (commit 0a3a447): "
    "flags enable_multi_tier_checkpointing, local_checkpoint_directory, local_checkpoint_period, "
    "multi_tier_checkpointing_backup_interval_minutes; assumptions 'Multi-Slice Workload', 'Orbax', "
    "'Supported TPU types: v4, v5e, v5p, v6e'; sizing 'Total Checkpoint Size ~ Number of Parameters x 12 bytes', "
    "'Required Ramdisk Size per Pod ~ 2 x (Total Checkpoint Size / Number of Hosts in the Slice)', "
    "'add a 10-15% buffer'; the GKE checkpointing daemon's identity ns/gke-managed-checkpointing/"
    "sa/gke-checkpointing-multitier-node needs roles/storage.objectUser on the backup bucket"
)
SRC_XPK_MTC = (
    "AI-Hypercomputer/xpk get_volumes() (workload pod volumes, mtc_enabled): the ramdisk volume is a CSI volume of "
    "driver multitier-checkpoint.csi.storage.gke.io; GoogleCloudPlatform/ml-auto-solutions dags (MTC tests): "
    "CheckpointConfiguration checkpointing.gke.io/v1 with cloudStorageBucketName, nodeSelector on "
    "node.kubernetes.io/instance-type, tolerations (google.com/tpu) and inMemoryVolumeSize"
)

MTC_MIN_GKE_VERSION = "1.32.4-gke.1415000"
"""Oldest GKE version with Multi-Tier Checkpointing (:data:`SRC_GKE_MTC`)."""
MTC_GENERATIONS: tuple[str, ...] = ("v4", "v5e", "v5p", "v6e")
"""TPU generations MaxText's multi-tier checkpointing supports (:data:`SRC_MAXTEXT_MTC`); tpu7x is not listed."""
MTC_CSI_DRIVER = "multitier-checkpoint.csi.storage.gke.io"
"""The CSI driver of the in-memory (ramdisk) checkpoint volume (:data:`SRC_XPK_MTC`)."""
MTC_API = "checkpointing.gke.io/v1"
"""API of ``CheckpointConfiguration``, the cluster-scoped object that sizes the ramdisk per node and names the
backup bucket (:data:`SRC_XPK_MTC`)."""
MTC_DAEMON_NAMESPACE = "gke-managed-checkpointing"
MTC_DAEMON_KSA = "gke-checkpointing-multitier-node"
"""The GKE replicator's Kubernetes identity, granted the backup bucket (:data:`SRC_MAXTEXT_MTC`)."""
MTC_BUCKET_ROLE = "roles/storage.objectUser"

OPTIMIZER_BYTES_PER_PARAM = 8
"""AdamW's two float32 moments (mu, nu) per parameter, saved with the parameters in MaxText's Orbax
TrainState checkpoint; gradients are not saved. With float32 master weights this is MaxText's 12 bytes
per parameter rule of thumb (:data:`SRC_MAXTEXT_MTC`)."""
RAMDISK_COPIES = 2
"""A ramdisk holds two checkpoints of its host's shard: the one being written and the newest complete one
(:data:`SRC_MAXTEXT_MTC`: 'Required Ramdisk Size per Pod ~ 2 x ...')."""
RAMDISK_BUFFER = 0.15
"""Headroom on the ramdisk: the top of MaxText's '10-15% buffer' (:data:`SRC_MAXTEXT_MTC`)."""

LOCAL_RESTORE_BYTES_PER_S = 10 * 10**9
"""Restore from the host's own ramdisk (tmpfs read, then host-to-HBM over PCIe), bytes/s per host.
ASSUMED: 10 GB/s, a third of one PCIe Gen4 x16 direction (~32 GB/s): several devices share the host's
links and Orbax deserialises while it copies. No published per-generation figure was found."""
# A restore from a peer: the MTC replicator copies a lost host's shard from the replica slice into the new
# host's ramdisk over the data-centre network, at the TPU catalog row's DCN bandwidth per host
# (``TpuSlice.dcn_bandwidth_per_host``), and Orbax restores it from there at the local rate above.
GCS_RESTORE_BYTES_PER_S = 1 * 10**9
"""Restore from the Cloud Storage backup, bytes/s per host. ASSUMED: 1 GB/s, the order of one VM's
parallel-read throughput from a regional bucket (far below its NIC: per-object latency and TensorStore
chunking dominate); every host reads its own shard at once."""
RESTART_OVERHEAD_S = 300.0
"""Pod rescheduling on the replacement slice, JAX start-up and XLA compilation before the first step
after a restart, seconds. ASSUMED: 5 minutes, the same for every tier (it is not a restore cost)."""

MFU_ASSUMED = 0.5033
"""Model-FLOPs utilisation of a MaxText training step's compute. ASSUMED from :data:`SRC_MAXTEXT_TIERING`
(Trillium Llama 3.1 70B, 256 chips, 50.33% MFU), used for every generation and model: the step-time
prediction is that compute plus an unoverlapped cross-slice gradient all-reduce over DCN
(``components/planner/training_perf.py``). tpu-recipes' single-slice Llama 3.1 8B on v6e-8 logs
413 TFLOP/s/device (45% of 918), the same order."""


MTC_BACKUP_BUCKET_KEY = "mtc-backup"
"""The backup bucket's key in its derived name (``config.naming.bucket_name``): a name the stack claims,
so no ``gke-tpu-llm:buckets`` key may take it while multi-tier checkpointing is on."""
