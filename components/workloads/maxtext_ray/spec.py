"""Settings of the MaxText training with Ray Train on KubeRay workload (``gke-tpu-llm:workload.maxtextRay``).

Hardware numbers are not here: the worker group's ``numOfHosts`` and ``google.com/tpu``, the node
selectors, the Ray Train ``ScalingConfig`` and the MaxText ``ici_*`` parallelism all come from the
slice and the capacity plan. What is here is what a user may reasonably choose: the pinned image
contents (Ray release, MaxText release) and where the image lives, the training run (steps, data,
where outputs go, extra MaxText overrides) and the CPU/memory of the Ray pods.

Rules that need the rest of the stack (the bucket key, its role, the slice count, the model) are in
:meth:`MaxTextRaySpec.stack_rules`.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ...catalog.models import MODELS
from ...config import naming
from ...config.base import BucketNeed, Spec
from ...config.errors import raise_rules, rule
from ...config.front_door import refuse_gateway
from ...config.isolation import Claim
from ...config.workload import KIND_DESCRIPTION, WorkloadBase, maxtext_arg_rules, workload_as

if TYPE_CHECKING:
    from ...config.stack import StackConfig

QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
"""A Kubernetes resource quantity such as ``2``, ``500m``, ``8Gi`` or ``200G``."""
TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
"""A Docker tag (the OCI distribution spec's grammar)."""
RUN_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,45}[a-z0-9])?$"
"""The run name is also the RayJob's name: a DNS-1035 label of at most 47 characters (KubeRay's
MaxRayJobNameLength), which also makes it a safe MaxText run_name and GCS path segment."""
BUILT_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}@sha256:[a-f0-9]{64}$"
"""``<tag>@sha256:<digest>``: what the build pushed (``MaxTextRayImageSpec.built``)."""

IMAGE_CONTEXT = Path(__file__).resolve().parent / "image"
IMAGE_FILES = ("Dockerfile", "requirements.txt", "maxtext_ray_trainer.py")
"""The files the image is built from; their digest is part of the derived tag."""


@cache
def context_digest(context: Path = IMAGE_CONTEXT) -> str:
    """SHA-256 over the build context's files (name and bytes), so the tag changes with any of them."""
    digest = hashlib.sha256()
    for name in IMAGE_FILES:
        digest.update(name.encode() + b"\0" + (context / name).read_bytes() + b"\0")
    return digest.hexdigest()

# MaxText keys the stack derives (from the workload, the plan or this spec); setting them in
# maxtextArgs would configure the same fact twice.
DERIVED_MAXTEXT_KEYS = frozenset(
    {
        "base_output_directory",
        "dataset_type",
        "per_device_batch_size",
        "max_target_length",
        "model_name",
        "steps",
        "run_name",
    }
)
WRITE_ROLES = ("roles/storage.objectUser", "roles/storage.objectAdmin")
"""Bucket roles that let the trainer write checkpoints and logs under /data."""


class MaxTextRayImageSpec(Spec):
    repository: str | None = Field(
        None,
        pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="Artifact Registry repository id (docker format, in gcp:region) the stack creates for the "
        "training image. Unset derives it from the stack name because one stack owns its images.",
    )
    name: str = Field(
        "ray-maxtext",
        pattern=r"^[a-z0-9]+([._-][a-z0-9]+)*$",
        description="Image name in the repository. Defaults to ray-maxtext, the tutorial's name.",
    )
    tag: str | None = Field(
        None,
        pattern=TAG_PATTERN,
        description="Image tag the RayCluster and RayJob run. Unset derives ray<rayVersion>-maxtext<maxtextVersion>-"
        "<digest of the build context>, because then a tag names exactly one image content: editing the "
        "Dockerfile or trainer changes the tag, and the stack's build command, instead of reusing a stale image. "
        "Never 'latest'.",
    )
    built: str | None = Field(
        None,
        pattern=BUILT_PATTERN,
        description="The image the build pushed, as <tag>@sha256:<digest>; image_build_command records it here "
        "(pulumi config set) once Cloud Build has pushed the image. The RayCluster and RayJob run "
        "<repository>/<name>:<tag>@sha256:<digest>, so the stack creates them only once this is set, and refuses a "
        "value whose tag is no longer the image's tag (a changed Dockerfile, trainer or pin derives a new tag: "
        "rebuild). Unset: the stack creates the image repository and its read grant only, and its outputs say what "
        "to run, because a build's digest exists only after the build.",
    )
    ray_version: str = Field(
        "2.49.1",
        pattern=r"^\d+\.\d+\.\d+$",
        description="Ray release: the image's base (rayproject/ray:<version>-py312) and the RayCluster's rayVersion. "
        "Defaults to 2.49.1 because the tutorial's JaxTrainer (ray.train.v2.jax) run was validated on it.",
    )
    maxtext_version: str = Field(
        "0.1.0",
        pattern=r"^\d+\.\d+\.\d+$",
        description="MaxText release installed from PyPI (maxtext==<version>, dependencies at their lowest allowed "
        "versions). Defaults to 0.1.0, the last release before the 0.2.0 restructure, because it has the layout "
        "the trainer and the tutorial use (MaxText.train.main, MaxText/configs/base.yml, install_maxtext_github_deps).",
    )

    @model_validator(mode="after")
    def _not_latest(self) -> MaxTextRayImageSpec:
        if self.tag is not None and self.tag.lower() == "latest":
            raise_rules(
                [
                    rule(
                        "tag",
                        self.tag,
                        "is a floating tag",
                        "a tag that names one build",
                        "remove the key to derive the tag from the image contents",
                    )
                ]
            )
        return self

    @model_validator(mode="after")
    def _built_is_this_tag(self) -> MaxTextRayImageSpec:
        # A digest recorded for an older tag would run the old image under the new tag's name.
        tag = self.current_tag()
        if self.built is not None and self.built.partition("@")[0] != tag:
            raise_rules(
                [
                    rule(
                        "built",
                        self.built,
                        f"was pushed as tag {self.built.partition('@')[0]}, but the image is now tag {tag} (its build "
                        "context or pins changed)",
                        f"{tag}@sha256:<digest of that build>",
                        "run image_build_command (it builds the new tag and records it here), or revert the change",
                    )
                ]
            )
        return self

    def current_tag(self, context: str | None = None) -> str:
        """The tag the image is built and run as: configured, or ray<ray>-maxtext<maxtext>-<12 hex of the
        build context's digest> (``context``: that digest, default the files in ``image/``)."""
        if self.tag is not None:
            return self.tag
        return f"ray{self.ray_version}-maxtext{self.maxtext_version}-{(context or context_digest())[:12]}"

    @property
    def digest(self) -> str | None:
        """The pushed image's digest (``sha256:...``), once ``built`` records it."""
        return self.built.partition("@")[2] if self.built is not None else None


class RayHeadSpec(Spec):
    cpu: str = Field(
        "2",
        pattern=QUANTITY_PATTERN,
        description="CPU request of the Ray head (on the CPU system pool). Defaults to 2 because the head must fit "
        "an e2-standard-4 system node beside kube-system, the GCS FUSE sidecar and the job submitter; upstream's "
        "8 CPU head would stay Pending there.",
    )
    memory: str = Field(
        "8Gi",
        pattern=QUANTITY_PATTERN,
        description="Memory request and limit of the Ray head. Defaults to 8Gi for the same reason (upstream: 16Gi).",
    )


class RayWorkerSpec(Spec):
    cpu: str = Field(
        "8",
        pattern=QUANTITY_PATTERN,
        description="CPU request of each TPU worker pod (google.com/tpu is derived). Defaults to 8, upstream's value.",
    )
    memory: str = Field(
        "200G",
        pattern=QUANTITY_PATTERN,
        description="Memory request and limit of each TPU worker pod. Defaults to 200G, upstream's value, well "
        "within a ct6e-standard-4t host.",
    )


class MaxTextRaySpec(Spec):
    """MaxText training with Ray Train on KubeRay."""

    image: MaxTextRayImageSpec = Field(
        default_factory=MaxTextRayImageSpec, description="The training image (Ray + MaxText + the trainer)."
    )
    steps: Annotated[int, Field(ge=1, le=10_000_000)] = Field(
        100,
        description="MaxText training steps. Defaults to 100, the seed's run. At most 10,000,000 (beyond any run "
        "length a slice finishes; a larger value is a typo).",
    )
    dataset_type: Literal["synthetic", "hf", "grain", "tfds"] = Field(
        "synthetic",
        description="MaxText dataset_type. Defaults to synthetic, the seed's, because it needs no data or "
        "tokenizer download; the others need their dataset keys in maxtextArgs.",
    )
    bucket: str = Field(
        "checkpoints",
        description="Key of the stack bucket mounted at /data through GCS FUSE; MaxText writes checkpoints and "
        "logs there. Defaults to checkpoints; the workload identity needs objectUser or objectAdmin on it.",
    )
    output_dir: str = Field(
        "maxtext",
        pattern=r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*$",
        description="Directory under the bucket for MaxText's base_output_directory (/data/<outputDir>); each run "
        "writes to <outputDir>/<runName>/. Defaults to maxtext so the bucket can hold other data too.",
    )
    run_name: str | None = Field(
        None,
        pattern=RUN_NAME_PATTERN,
        description="MaxText run_name and the RayJob's name. Unset derives <model>-<maxTargetLength>-<slice>, e.g. "
        "llama3-8b-4096-v6e-4x4. MaxText resumes from the latest checkpoint of a run name, so change it for a "
        "fresh run.",
    )
    maxtext_args: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Extra MaxText key=value overrides appended after the derived ones (e.g. checkpoint_period). "
        "Keys the stack derives (model, lengths, batch, steps, run, output, dataset type, ici_*/dcn_* "
        "parallelism) are rejected because they are configured elsewhere.",
    )
    head: RayHeadSpec = Field(default_factory=RayHeadSpec, description="The Ray head pod (CPU only).")
    worker: RayWorkerSpec = Field(default_factory=RayWorkerSpec, description="The Ray TPU worker pods.")

    @model_validator(mode="after")
    def _args(self) -> MaxTextRaySpec:
        rules = maxtext_arg_rules(
            "maxtextArgs",
            self.maxtext_args,
            DERIVED_MAXTEXT_KEYS,
            derived_fix="set it through its own key (workload.*, workload.maxtextRay.*) instead",
            parallelism_fix="set gke-tpu-llm:workload.parallelism (e.g. {fsdp: 4, tensor: 4}) instead",
        )
        raise_rules(rules)
        return self

    def claims(self, config: StackConfig) -> tuple[Claim, ...]:
        # Repositories are unique per project and location; the stack creates and deletes its own.
        scope = f"project {config.project}, region {config.region}"
        return (Claim("Artifact Registry repository", scope, repository_id(config), "workload.maxtextRay.image.repository"),)

    def bucket_needs(self, config: StackConfig) -> tuple[BucketNeed, ...]:
        return (
            BucketNeed(
                self.bucket,
                WRITE_ROLES[0],
                "does not let the trainer write checkpoints to the bucket mounted at /data",
                named_by="workload.maxtextRay.bucket",
            ),
        )

    def stack_rules(self, config: StackConfig) -> list[dict[str, Any]]:
        """Rules across the stack (paths relative to ``gke-tpu-llm:``)."""
        rules: list[dict[str, Any]] = refuse_gateway(config, "MaxText on Ray trains; it serves no requests")
        if config.tpu.slices != 1:
            rules.append(
                rule(
                    "tpu.slices",
                    config.tpu.slices,
                    "is more than one slice; the trainer runs Ray Train's JaxTrainer on one slice (no DCN/"
                    "multislice settings are derived)",
                    "1",
                    "use one larger slice (a bigger topology)",
                )
            )
        if config.workload.serving is not None:
            rules.append(
                rule(
                    "workload.serving",
                    config.workload.serving.model_dump(by_alias=True, exclude_none=True),
                    "is a serving scenario, and maxtext-ray trains",
                    "unset (serving kinds only: vllm, jetstream, saxml)",
                    "remove workload.serving",
                )
            )
        if MODELS[config.workload.model].maxtext_name is None:
            rules.append(
                rule(
                    "workload.model",
                    config.workload.model,
                    "has no MaxText model config",
                    ", ".join(k for k, m in MODELS.items() if m.maxtext_name),
                    "train a model MaxText ships a config for",
                )
            )
        return rules


class MaxTextRayWorkload(WorkloadBase):
    """``gke-tpu-llm:workload`` with ``kind: maxtext-ray``."""

    kind: Literal["maxtext-ray"] = Field(description=KIND_DESCRIPTION)
    maxtext_ray: MaxTextRaySpec = Field(default_factory=MaxTextRaySpec, description="Settings when kind is maxtext-ray.")


def settings(config: StackConfig) -> MaxTextRaySpec:
    """This kind's settings section of ``config`` (TypeError for a stack of another kind)."""
    return workload_as(config.workload, MaxTextRayWorkload).maxtext_ray


def repository_id(config: StackConfig) -> str:
    """Artifact Registry repository id: configured, or the stack name (letter first, at most 63)."""
    configured = settings(config).image.repository
    if configured is not None:
        return configured
    name = naming.fit(config.stack, 63)
    return name if name[:1].isalpha() else naming.fit(f"r-{name}", 63)
