"""Workload kind ``maxtext-jobset``: MaxText training on JobSet across several TPU slices (multislice),
with optional GKE Multi-Tier Checkpointing.

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from xpk and the MaxText guides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kind import WorkloadKindInfo, image_user_reason, tpu_host_reason
from .spec import MaxTextJobsetWorkload, settings

if TYPE_CHECKING:
    from ...config.stack import StackConfig

TRAINER = "Pod/*-replicatedjobs-*-template-spec-template"  # the JobSet's lifted pod template
_USER = {TRAINER: image_user_reason("MaxText's tpu_pre_training image, as its guides run it")}
_NO_PROBE = {
    TRAINER: "a batch training pod serves nothing; a failed host fails its slice's Job and the JobSet restarts "
    "every slice from the newest checkpoint (failurePolicy.maxRestarts)"
}


def addons(config: StackConfig) -> frozenset[str]:
    """The JobSet controller always; Multi-Tier Checkpointing's GKE add-ons and the stack's add-on module
    (CheckpointConfiguration, backup bucket) when it is enabled. GKE requires the GCS FUSE CSI driver with it."""
    needed = {"jobset"}
    if settings(config).multi_tier_checkpointing.enabled:
        needed |= {"highScaleCheckpointing", "gcsFuseCsiDriver", "multiTierCheckpointing"}
    return frozenset(needed)


KIND = WorkloadKindInfo(
    workload=MaxTextJobsetWorkload,
    engine="maxtext",
    mode="train",
    perf_key=None,  # training: its figures come from components/planner/training_perf.py
    deploy=f"{__name__}.component:deploy",
    summary="MaxText training on JobSet across several TPU slices, with Multi-Tier Checkpointing",
    addons=addons,
    scan_waivers={
        "CKV_K8S_10": {TRAINER: tpu_host_reason("each MaxText host process", "CPU")},
        "CKV_K8S_12": {TRAINER: tpu_host_reason("each MaxText host process", "memory")},
        "CKV_K8S_13": {
            TRAINER: "a trainer owns its TPU VM's RAM (input pipeline, checkpoint staging); an OOM kill "
            "fails the slice's Job and restarts the run from its newest checkpoint"
        },
        "CKV_K8S_22": {TRAINER: "JAX, the TPU runtime and the compilation cache write under /tmp"},
        "CKV_K8S_23": _USER,
        "CKV_K8S_40": _USER,
        "CKV_K8S_8": _NO_PROBE,
        "CKV_K8S_9": _NO_PROBE,
    },
)
