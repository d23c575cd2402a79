"""Settings of MaxText training on JobSet across several slices (``gke-tpu-llm:workload.maxtextJobset``).

Hardware numbers are not here: the JobSet's replicas (= ``tpu.slices``), hosts per Job, chips per pod, node
selectors, ``ici_*`` (the planner's slice mesh) and ``dcn_*`` (``components/planner/multislice.py``) are
derived. What is here is what a team chooses: the pinned MaxText image, the run (steps, data, where it
writes), the global batch, the DCN split, checkpointing (period; GKE Multi-Tier Checkpointing) and how
often the JobSet restarts after a lost slice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from ...catalog import checkpointing as mtc
from ...catalog import images
from ...catalog.models import MODELS
from ...config import naming
from ...config.base import BucketNeed, Spec
from ...config.errors import NAMESPACE, ConfigError, Violation, rule
from ...config.front_door import refuse_gateway
from ...config.gke_rules import pinned_at_least
from ...config.isolation import Claim, identity_namespace_claim
from ...config.workload import KIND_DESCRIPTION, WorkloadBase, maxtext_arg_rules, workload_as

if TYPE_CHECKING:
    from ...config.resolve import StackPlan
    from ...config.stack import StackConfig
    from ...planner import Plan
    from ...planner.multislice import MultisliceMesh

IMAGE_NAME = "maxtext-tpu-pre-training"
"""Row of the image catalog (``components/catalog/images.json``): MaxText's release pre-training image, the
one its multi-tier checkpointing guide runs (``us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_pre_training``)."""
DERIVED_MAXTEXT_KEYS = frozenset(
    {
        "base_output_directory",
        "dataset_type",
        "dataset_path",
        "per_device_batch_size",
        "max_target_length",
        "model_name",
        "steps",
        "run_name",
        "num_slices",
        "enable_checkpointing",
        "checkpoint_period",
        "enable_multi_tier_checkpointing",
        "local_checkpoint_directory",
        "local_checkpoint_period",
        "multi_tier_checkpointing_backup_interval_minutes",
    }
)
"""MaxText keys the stack derives; ``ici_*``/``dcn_*`` are refused by prefix (the planner's)."""
WRITE_ROLES = ("roles/storage.objectUser", "roles/storage.objectAdmin")
SECTION = "workload.maxtextJobset"


class MultiTierCheckpointingSpec(Spec):
    enabled: bool = Field(
        False,
        description="GKE Multi-Tier Checkpointing: checkpoints to a RAM disk on every host (the "
        "HighScaleCheckpointing add-on's CSI driver), replicated to a peer slice and backed up to a bucket with "
        "hierarchical namespace the stack creates. Off by default because it needs GKE >= "
        f"{mtc.MTC_MIN_GKE_VERSION}, a generation MaxText supports it on ({', '.join(mtc.MTC_GENERATIONS)}) and "
        "two or more slices.",
    )
    local_checkpoint_period: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        10,
        description="Steps between RAM-disk checkpoints (MaxText local_checkpoint_period). Defaults to 10, the "
        "MaxText guide's example.",
    )
    backup_interval_minutes: Annotated[int, Field(ge=1, le=10_080)] = Field(
        30,
        description="Minutes between backups of the newest RAM-disk checkpoint to the bucket (MaxText "
        "multi_tier_checkpointing_backup_interval_minutes). Defaults to 30, the MaxText guide's example.",
    )


class MaxTextJobsetSpec(Spec):
    image_tag: str = Field(
        "0.2.4",
        description=f"Tag of MaxText's pre-training image, pinned by digest in the image catalog ({IMAGE_NAME}). "
        "Defaults to 0.2.4, the release MaxText's multi-tier checkpointing guide runs.",
    )
    bucket: str = Field(
        "checkpoints",
        description="Bucket key for datasets, checkpoints and logs (gs://<bucket>/<outputDir>/<run name>/), written "
        "through Workload Identity; the identity needs roles/storage.objectUser on it.",
    )
    output_dir: str = Field("maxtext", pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", description="Prefix in the bucket.")
    run_name: str | None = Field(
        None,
        pattern=r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$",
        description="MaxText run_name and the JobSet's name (DNS-1035, at most 32 so the JobSet's pod names fit). "
        "Unset: <model>-<slices>x<slice>. A new name starts a new run; the same name resumes from its checkpoints.",
    )
    steps: Annotated[int, Field(ge=1, le=10_000_000)] = Field(100, description="Training steps. Defaults to 100.")
    dataset_type: Literal["synthetic", "tfds", "hf", "grain"] = Field(
        "synthetic", description="MaxText dataset_type. Defaults to synthetic, which needs no data."
    )
    dataset_path: str | None = Field(
        None,
        pattern=r"^gs://[a-z0-9][-a-z0-9_.]{1,220}(/.*)?$",
        description="MaxText dataset_path (gs://...), for tfds/grain data. Unset for synthetic and hf.",
    )
    global_batch_size: Annotated[int, Field(ge=1, le=1_048_576)] | None = Field(
        None,
        description="Sequences per step over every slice (MaxText global_batch_size_to_train_on); must split over "
        "the slices and the data/fsdp axes. Unset: workload.perDeviceBatchSize x chips x slices.",
    )
    dcn_parallelism: dict[str, int] | None = Field(
        None,
        description="Degrees across slices by axis (data, fsdp; MaxText dcn_*_parallelism), multiplying to "
        "tpu.slices. Unset: every slice on data (dcn_data_parallelism = slices), MaxText's multislice default.",
    )
    checkpoint_period: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        100, description="Steps between checkpoints to the bucket (MaxText checkpoint_period). Defaults to 100."
    )
    multi_tier_checkpointing: MultiTierCheckpointingSpec = Field(
        default_factory=MultiTierCheckpointingSpec, description="GKE Multi-Tier Checkpointing."
    )
    max_restarts: Annotated[int, Field(ge=0, le=1000)] = Field(
        10,
        description="JobSet failurePolicy.maxRestarts: how many times a failed slice (a lost host, a preemption) "
        "restarts the whole set, which resumes from the newest checkpoint. Defaults to 10.",
    )
    maxtext_args: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Extra MaxText key=value overrides (not the derived keys nor ici_*/dcn_*)."
    )

    def bucket_needs(self, config: StackConfig) -> tuple[BucketNeed, ...]:
        return (
            BucketNeed(
                self.bucket,
                WRITE_ROLES[0],
                "does not let the trainer write checkpoints and logs",
                named_by=f"{SECTION}.bucket",
            ),
        )

    def stack_rules(self, config: StackConfig) -> list[dict[str, Any]]:
        """Rules across the stack (paths relative to ``gke-tpu-llm:``)."""
        rules: list[dict[str, Any]] = refuse_gateway(config, "MaxText on JobSet trains; it serves no requests")
        w, slices = config.workload, config.tpu.slices
        if config.tpu.topology is None:
            rules.append(
                rule(
                    "tpu.topology",
                    None,
                    "is required by maxtext-jobset: the global batch and the DCN x ICI mesh are derived from one "
                    "pinned slice shape",
                    "a topology of tpu.generation (stacks/CONFIGURATION.md)",
                    "set tpu.topology (and tpu.machineType where the topology has several VM layouts)",
                )
            )
        if w.serving is not None:
            rules.append(
                rule("workload.serving", "set", "is a serving scenario, and maxtext-jobset trains", "unset", "remove it")
            )
        if MODELS[w.model].maxtext_name is None:
            trained = ", ".join(k for k, m in MODELS.items() if m.maxtext_name)
            rules.append(rule("workload.model", w.model, "has no MaxText model config", trained, "train a model MaxText ships"))
        if images.pin_of(images.image(IMAGE_NAME).repository, self.image_tag) is None:
            tags = sorted(p.tag for p in images.IMAGES if p.name == IMAGE_NAME)
            rules.append(
                rule(f"{SECTION}.imageTag", self.image_tag, "is not in the image catalog", ", ".join(tags), "use a catalog tag")
            )
        rules += maxtext_arg_rules(
            f"{SECTION}.maxtextArgs",
            self.maxtext_args,
            DERIVED_MAXTEXT_KEYS,
            derived_fix=f"remove it (set the stack key that derives it: workload.*, {SECTION}.*)",
            parallelism_fix=f"set {SECTION}.dcnParallelism (across slices) or gke-tpu-llm:workload.parallelism instead",
        )
        dcn = self.dcn_parallelism or {}
        product = 1
        for size in dcn.values():
            product *= size
        if slices == 1 and product > 1:
            rules.append(
                rule(
                    f"{SECTION}.dcnParallelism",
                    dict(dcn),
                    "splits work across slices, and tpu.slices is 1",
                    "unset, or degrees of 1",
                    "raise tpu.slices to the DCN product, or remove dcnParallelism",
                )
            )
        elif dcn and (set(dcn) - {"data", "fsdp"} or product != slices or min(dcn.values()) < 1):
            rules.append(
                rule(
                    f"{SECTION}.dcnParallelism",
                    dict(dcn),
                    f"must be data/fsdp degrees multiplying to tpu.slices ({slices})",
                    f"e.g. {{data: {slices}}}",
                    "fix the degrees or tpu.slices",
                )
            )
        if self.global_batch_size is not None:
            if w.per_device_batch_size is not None:
                rules.append(
                    rule(
                        f"{SECTION}.globalBatchSize",
                        self.global_batch_size,
                        "is set with workload.perDeviceBatchSize",
                        "one of the two",
                        "remove one",
                    )
                )
            if self.global_batch_size % slices:
                rules.append(
                    rule(
                        f"{SECTION}.globalBatchSize",
                        self.global_batch_size,
                        f"does not split over the {slices} slices (each slice trains on an equal share)",
                        f"a multiple of {slices}",
                        "change the batch or tpu.slices",
                    )
                )
        if self.dataset_type in ("tfds", "grain") and self.dataset_path is None:
            rules.append(
                rule(f"{SECTION}.datasetPath", None, f"is required by datasetType {self.dataset_type}", "gs://...", "set it")
            )
        rules += self._mtc_rules(config)
        return rules

    def verify_plan(self, plan: StackPlan) -> None:
        # The multislice mesh and the multi-tier checkpointing RAM disk need the resolved slice: checked at
        # resolve, so `pulumi up` refuses before registering anything (the renderer would be too late).
        multislice_plan(plan)

    def per_device_batch(self, config: StackConfig) -> float | None:
        # The global batch over every chip of every slice: what one device holds in a step.
        return global_batch(config) / (config.tpu.slice.chips * config.tpu.slices)

    def claims(self, config: StackConfig) -> tuple[Claim, ...]:
        # The multi-tier checkpointing backup bucket (components/platform/addons/multi_tier_checkpointing.py).
        if not self.multi_tier_checkpointing.enabled:
            return ()
        name = naming.bucket_name(config.project, config.stack, mtc.MTC_BACKUP_BUCKET_KEY)
        key = f"{SECTION}.multiTierCheckpointing.enabled"
        # GKE's replicator runs as one fixed KSA per cluster, the same principal in every cluster of the
        # project: a second stack's grant would give this cluster's replicator that stack's checkpoints.
        fix = (
            "GKE's replicator identity is fixed, so one multi-tier checkpointing stack per project: "
            "give one another gcp:project"
        )
        return (
            Claim("bucket", "global", name, key, True, default="the project and the stack name"),
            identity_namespace_claim(config.project, mtc.MTC_DAEMON_NAMESPACE, key, True, fix),
        )

    def _mtc_rules(self, config: StackConfig) -> list[dict[str, Any]]:
        """GKE and MaxText's documented limits of Multi-Tier Checkpointing (catalog/checkpointing.py)."""
        if not self.multi_tier_checkpointing.enabled:
            return []
        key, rules = f"{SECTION}.multiTierCheckpointing.enabled", []
        if mtc.MTC_BACKUP_BUCKET_KEY in config.buckets:
            rules.append(
                rule(
                    f"buckets.{mtc.MTC_BACKUP_BUCKET_KEY}",
                    mtc.MTC_BACKUP_BUCKET_KEY,
                    "is the name multi-tier checkpointing gives its backup bucket",
                    "another bucket key",
                    "rename the bucket key",
                )
            )
        generation, version = config.tpu.generation, config.cluster.version
        if generation is not None and generation not in mtc.MTC_GENERATIONS:
            rules.append(
                rule(
                    key,
                    True,
                    f"is not supported on {generation} (MaxText's multi-tier checkpointing supports "
                    f"{', '.join(mtc.MTC_GENERATIONS)})",
                    "false",
                    "turn it off or train on a supported generation",
                )
            )
        if version is not None and not pinned_at_least(version, mtc.MTC_MIN_GKE_VERSION):
            rules.append(
                rule(
                    "cluster.version",
                    version,
                    "is below GKE's floor for Multi-Tier Checkpointing",
                    f">= {mtc.MTC_MIN_GKE_VERSION}",
                    f"set cluster.version to {mtc.MTC_MIN_GKE_VERSION} or newer",
                )
            )
        if config.tpu.slices < 2:
            rules.append(
                rule(
                    key,
                    True,
                    "needs a multislice run (MaxText: 'the training job must be a multi-slice environment'); tpu.slices is 1",
                    "false",
                    "raise tpu.slices to 2 or more, or turn it off",
                )
            )
        if self.multi_tier_checkpointing.local_checkpoint_period > self.checkpoint_period:
            rules.append(
                rule(
                    f"{SECTION}.multiTierCheckpointing.localCheckpointPeriod",
                    self.multi_tier_checkpointing.local_checkpoint_period,
                    f"is longer than checkpointPeriod ({self.checkpoint_period}): the RAM tier would be the slower one",
                    f"1..{self.checkpoint_period}",
                    "lower it",
                )
            )
        return rules


class MaxTextJobsetWorkload(WorkloadBase):
    """``gke-tpu-llm:workload`` with ``kind: maxtext-jobset``."""

    kind: Literal["maxtext-jobset"] = Field(description=KIND_DESCRIPTION)
    maxtext_jobset: MaxTextJobsetSpec = Field(
        default_factory=MaxTextJobsetSpec, description="Settings when kind is maxtext-jobset."
    )


def settings(config: StackConfig) -> MaxTextJobsetSpec:
    """This kind's settings section (TypeError for a stack of another kind)."""
    return workload_as(config.workload, MaxTextJobsetWorkload).maxtext_jobset


def global_batch(config: StackConfig) -> int:
    """Sequences per step over every slice: configured, or perDeviceBatchSize (default 1) x chips x slices
    (MaxText's per-device semantics); a fractional product rounds down."""
    spec = settings(config)
    if spec.global_batch_size is not None:
        return spec.global_batch_size
    chips = config.tpu.slice.chips * config.tpu.slices
    return int((config.workload.per_device_batch_size or 1) * chips)


def run_name(config: StackConfig) -> str:
    configured = settings(config).run_name
    if configured is not None:
        return configured
    return naming.fit(f"{config.workload.model}-{config.tpu.slices}x{config.tpu.slice.key}".replace(".", "-"), 32)


def multislice_plan(stack: StackPlan) -> tuple[Plan, MultisliceMesh]:
    """The slice's plan at the run's per-device batch and the hybrid mesh over every slice, verified; a
    ``ConfigError`` naming the key to change otherwise (exit 2 from the CLI). Run by ``verify_plan`` when
    the stack resolves, and by the renderer for the mesh."""
    # Imported when used: the planner (jax) is not needed to read or validate a stack file.
    from ...planner import PlanError, multislice, training_perf

    config = stack.config
    spec = settings(config)
    arch = MODELS[config.workload.model]
    total = global_batch(config)
    # The slice was planned at the run's per-device batch (``spec.per_device_batch``, config.resolve).
    slice_plan = stack.capacity
    try:
        mesh = multislice.derive(slice_plan, config.tpu.slices, spec.dcn_parallelism, total)
    except PlanError as error:
        key, value = {
            "parallelism": (f"{SECTION}.dcnParallelism", spec.dcn_parallelism),
            "batch": (f"{SECTION}.globalBatchSize", total),
            "per_device_batch_size": (f"{SECTION}.globalBatchSize", total),
        }.get(error.field, ("tpu.topology", config.tpu.topology))
        raise ConfigError(
            [Violation(f"{NAMESPACE}:{key}", value, f"cannot train {arch.name}: {error}", "", "change it")]
        ) from None
    if spec.multi_tier_checkpointing.enabled:
        per_host = training_perf.checkpoint_bytes_per_host(arch, stack.slice, mesh.dcn.get("fsdp", 1))
        ram = stack.slice.generation.host_memory_gb.get(stack.slice.tpu_per_host)
        need = training_perf.ramdisk_bytes(per_host)
        if ram is not None and need > ram * 10**9:
            raise ConfigError(
                [
                    Violation(
                        f"{NAMESPACE}:{SECTION}.multiTierCheckpointing.enabled",
                        True,
                        f"needs a {need / 2**30:.0f} GiB RAM disk per host (2 x {per_host / 1e9:.1f} GB shard + 15%), "
                        f"more than the {ram} GB of a {stack.slice.machine_type} host",
                        "false",
                        "use a slice with more hosts, DCN fsdp, or turn it off",
                    )
                ]
            )
    return slice_plan, mesh
