"""Settings of the JetStream + MaxText + Pathways serving on LeaderWorkerSet workload (``gke-tpu-llm:workload.jetstream``).

Hardware numbers are not here: the LeaderWorkerSet size (slices x hosts + 1 leader), the sub-group
size (hosts per slice), ``--instance_type`` / ``--instance_count``, ``google.com/tpu``, the node
selectors and the MaxText ``ici_*`` flags all come from the catalog slice, ``tpu.slices`` and the
capacity plan. Lengths, batch and dtypes come from ``gke-tpu-llm:workload``. What remains are the
serving mode, the pinned images, probe budgets, the bucket keys and the checkpoint conversion.

Upstream facts (GoogleCloudPlatform/kubernetes-engine-samples
``ai-ml/llm-serving-tpus-jetstream/pathways/``, commit 06e7ed12, 2025-05-07; checkpoint converter
from ai-on-gke/tutorials-and-examples ``inference-servers/checkpoints``, commit 106695c6):
images ``pathways/proxy_server:jax-0.5.3``, ``pathways/server:jax-0.5.3``,
``inference/jetstream-pathways:v0.2.0``, ``inference/jetstream-http:v0.2.3``,
``inference/inference-checkpoint:v0.2.5``; ports RM 38677, proxy 38681, worker 38679, JetStream
gRPC 9000, HTTP 8000.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ...catalog import gce
from ...catalog.images import image
from ...config.base import BucketNeed, PinnedImage, Spec, machine_type_rules
from ...config.errors import raise_rules, rule
from ...config.workload import KIND_DESCRIPTION, WorkloadBase, workload_as
from ...planner.perf import Server

if TYPE_CHECKING:
    from ...catalog.tpu import TpuSlice
    from ...config.stack import StackConfig

# Default images, by tag and digest (components/catalog/images.json).
CONVERTER_IMAGE = image("inference-checkpoint")
PROXY_IMAGE = image("pathways-proxy")
SERVER_IMAGE = image("pathways-server")
JETSTREAM_IMAGE = image("jetstream-pathways")
HTTP_IMAGE = image("jetstream-http")
WAIT_IMAGE = image("google-cloud-cli-slim")

# Pathways and JetStream ports are fixed by the images (upstream port map), not configurable.
RM_PORT = 38677
PROXY_PORT = 38681
WORKER_PORT = 38679
GRPC_PORT = 9000
HTTP_PORT = 8000

# ``inference_server=ExperimentalMaxtextDisaggregatedServer_<chips>`` names the chips of one prefill
# or decode slice. The only variant any public manifest uses with jetstream-pathways:v0.2.0 is 8
# (two v6e 2x4 slices), so other slice sizes are rejected rather than guessed.
DISAGGREGATED_SERVER_CHIPS = frozenset({8})

@dataclass(frozen=True)
class JetstreamModel:
    """How JetStream/MaxText serves a catalog model and how the converter produces its checkpoint."""

    maxtext_config: str
    """MaxText config file inside the jetstream-pathways image (first, positional server argument)."""
    tokenizer_path: str | None
    """``tokenizer_path=`` override; None when the config file names the tokenizer itself."""
    converter_model_name: str
    """Converter ``--model_name`` (Meta model family)."""
    meta_model_id: str
    """Converter ``--model_path``: the Meta download id (``llama model list``)."""
    checkpoint_directory: str
    """Converter output directory inside the checkpoint bucket; the int8 checkpoint is ``<dir>/int8``."""


# Source: seeds 000 (405B: the v5e inference config baked into the image names the tiktoken
# tokenizer) and 003 (70B: base.yml + tokenizer.llama2), and the GKE tutorial's converter arguments.
MODELS: MappingProxyType[str, JetstreamModel] = MappingProxyType(
    {
        "llama3.1-405b": JetstreamModel(
            maxtext_config="MaxText/configs/v5e/inference/llama3_405b_v5e-64.yml",
            tokenizer_path=None,
            converter_model_name="llama-3.1",
            meta_model_id="Llama3.1-405B-Instruct:bf16-mp16",
            checkpoint_directory="maxtext/llama-3.1-405b",
        ),
        "llama2-70b": JetstreamModel(
            maxtext_config="MaxText/configs/base.yml",
            tokenizer_path="assets/tokenizer.llama2",
            converter_model_name="llama-2",
            meta_model_id="Llama-2-70b-chat",
            checkpoint_directory="maxtext/llama-2-70b",
        ),
    }
)


class CheckpointConversionSpec(Spec):
    """The Job that turns the Meta checkpoint into MaxText's unscanned (and int8) layout in our bucket."""

    enabled: bool = Field(
        False,
        description="Run the conversion Job (and its CPU node pool) in the stack. Off by default because it "
        "runs for hours on a large-memory VM and is needed once per bucket. When on, the Job reads Meta's signed "
        "download URL from the secret gke-tpu-llm:metaCheckpointUrl, which is then required.",
    )
    image: PinnedImage = Field(
        CONVERTER_IMAGE.ref,
        description=f"Converter image. Defaults to {CONVERTER_IMAGE.tag}, the newest tag in any public source, because "
        "its long flags (--meta_url, --quantize_type) are the ones the tutorial documents.",
    )
    meta_model_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="Meta download id (--model_path). Unset uses the seed's id for the model "
        "(Llama3.1-405B-Instruct:bf16-mp16, Llama-2-70b-chat).",
    )
    machine_type: str = Field(
        "m1-ultramem-160",
        pattern=r"^[a-z0-9]+-[a-z0-9]+-\d+$",
        description="Machine type of the converter's node pool (scaled 0..1, so billed only while the Job runs). "
        "Defaults to m1-ultramem-160 (3.8 TB RAM) because upstream converts 405B on it (about 2 TB RAM needed).",
    )
    disk_size_gb: Annotated[int, Field(ge=500, le=65536)] = Field(
        3000,
        description="Boot disk of the converter node in GB. Defaults to 3000 because upstream uses it: the Meta "
        "download and the intermediate bf16 checkpoints are staged on local disk.",
    )
    zone: str | None = Field(
        None,
        description="Zone of the converter pool. Unset uses tpu.zone because the bucket is regional and the zone "
        "is known to be in the region; set it to a zone of the region that offers the machine type.",
    )
    deadline_hours: Annotated[int, Field(ge=1, le=72)] = Field(
        24,
        description="activeDeadlineSeconds of the Job in hours. Defaults to 24 because 405B takes 9-10 hours "
        "upstream, and a hung download on a large VM should not run unbounded.",
    )
    allow_undocumented: bool = Field(
        False,
        description="Accept a machineType or zone the Compute Engine catalog (components/catalog/gce.py) does not "
        "list. Off by default because a wrong one fails only when GKE creates the pool; turn on when Google adds "
        "one before the catalog does.",
    )

    @model_validator(mode="after")
    def _catalog(self) -> CheckpointConversionSpec:
        if not self.allow_undocumented:
            raise_rules(machine_type_rules(self.machine_type, "allowUndocumented"))
        return self


class JetstreamSpec(Spec):
    """JetStream + MaxText + Pathways serving on LeaderWorkerSet."""

    mode: Literal["interleaved", "disaggregated"] = Field(
        "interleaved",
        description="interleaved: one slice does prefill and decode (needs tpu.slices = 1); disaggregated: "
        "prefill on one slice and decode on another (needs tpu.slices = 2, one LWS sub-group per slice). "
        "Defaults to interleaved because it is the single-slice form of the 405B seed.",
    )
    proxy_image: PinnedImage = Field(
        PROXY_IMAGE.ref,
        description=f"Pathways IFRT proxy image. Defaults to {PROXY_IMAGE.tag} because jetstream-pathways:"
        f"{JETSTREAM_IMAGE.tag} was built and tested upstream against it (a newer Pathways JAX is not guaranteed to work).",
    )
    server_image: PinnedImage = Field(
        SERVER_IMAGE.ref,
        description=f"Pathways resource-manager and worker image. Defaults to {SERVER_IMAGE.tag}, for the same pairing.",
    )
    jetstream_image: PinnedImage = Field(
        JETSTREAM_IMAGE.ref,
        description=f"JetStream + MaxText server image. Defaults to {JETSTREAM_IMAGE.tag}, the newest tag published "
        "(JetStream is archived), which both seeds use.",
    )
    http_image: PinnedImage = Field(
        HTTP_IMAGE.ref,
        description="JetStream HTTP front end (/generate, /healthcheck on 8000). Defaults to "
        f"{HTTP_IMAGE.tag}, as both seeds.",
    )
    wait_image: PinnedImage = Field(
        WAIT_IMAGE.ref,
        description="Image of the leader's init container that waits for the checkpoint's commit marker. Defaults "
        f"to google-cloud-cli {WAIT_IMAGE.tag} by digest because it only needs `gcloud storage`.",
    )
    checkpoint_bucket: str = Field(
        "checkpoints",
        pattern=r"^[a-z0-9-]+$",
        description="Bucket key (gke-tpu-llm:buckets) holding the MaxText checkpoint. Defaults to 'checkpoints' "
        "because the JetStream stacks name their checkpoint bucket so.",
    )
    scratch_bucket: str = Field(
        "pathways",
        pattern=r"^[a-z0-9-]+$",
        description="Bucket key for Pathways' --gcs_scratch_location. Defaults to 'pathways' because the stack "
        "owns its scratch bucket (never the public staging bucket one seed uses).",
    )
    checkpoint_directory: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$",
        description="Directory in the checkpoint bucket the converter writes and the server loads (int8: "
        "<dir>/int8; bf16: <dir>/bf16/unscanned/checkpoints/0/items). Unset uses maxtext/<model> as upstream.",
    )
    startup_budget_seconds: Annotated[int, Field(ge=300, le=14400)] = Field(
        3600,
        description="How long the server may take to restore the checkpoint and warm up before the startup probe "
        "restarts it. Defaults to 3600 because a 405B restore takes 10-20 minutes and warm-up compiles every "
        "prefill length; restarting a slow but healthy start costs the whole restore again.",
    )
    health_failure_threshold: Annotated[int, Field(ge=1, le=1000)] = Field(
        10,
        description="Consecutive failed /healthcheck probes (one a minute) before liveness restarts the server or "
        "readiness drops it from the Service. Defaults to 10 as the 405B seed; the disaggregated seed uses 100.",
    )
    conversion: CheckpointConversionSpec = Field(
        default_factory=CheckpointConversionSpec,
        description="Checkpoint conversion Job (Meta checkpoint -> MaxText layout in the checkpoint bucket).",
    )

    def model_profile(self, model: str) -> JetstreamModel | None:
        return MODELS.get(model)

    def checkpoint_dir(self, model: str) -> str:
        """Directory inside the checkpoint bucket (``maxtext/llama-3.1-405b``)."""
        if self.checkpoint_directory:
            return self.checkpoint_directory
        profile = MODELS.get(model)
        return profile.checkpoint_directory if profile else f"maxtext/{model}"

    def required_secrets(self) -> tuple[str, ...]:
        # Meta's signed URL is read only by the conversion Job.
        return ("metaCheckpointUrl",) if self.conversion.enabled else ()

    def bucket_needs(self, config: StackConfig) -> tuple[BucketNeed, ...]:
        # The converter writes the checkpoint, Pathways its scratch files.
        return tuple(
            BucketNeed(
                bucket,
                "roles/storage.objectUser",
                f"does not let the workload write {key} (the converter writes the checkpoint, Pathways its scratch files)",
                named_by=f"workload.jetstream.{key}",
            )
            for key, bucket in (("checkpointBucket", self.checkpoint_bucket), ("scratchBucket", self.scratch_bucket))
        )

    def stack_rules(self, config: StackConfig) -> list[dict[str, Any]]:
        """Rules across the stack (paths relative to ``gke-tpu-llm:``): mode vs slices, bucket keys, model."""
        rules: list[dict[str, Any]] = []
        slices = config.tpu.slices
        if self.mode == "interleaved" and slices != 1:
            rules.append(
                rule(
                    "workload.jetstream.mode",
                    self.mode,
                    f"runs on one slice but tpu.slices is {slices}",
                    "interleaved with tpu.slices: 1, or disaggregated with tpu.slices: 2",
                    "set tpu.slices: 1 (a larger topology adds capacity), or mode: disaggregated with 2 slices",
                )
            )
        if self.mode == "disaggregated":
            if slices != 2:
                rules.append(
                    rule(
                        "workload.jetstream.mode",
                        self.mode,
                        f"needs exactly 2 slices (prefill + decode) but tpu.slices is {slices}",
                        "tpu.slices: 2",
                        "set tpu.slices: 2 or mode: interleaved",
                    )
                )
            if config.tpu.topology is not None:
                chips = config.tpu.slice.chips
                if chips not in DISAGGREGATED_SERVER_CHIPS:
                    rules.append(
                        rule(
                            "tpu.topology",
                            config.tpu.topology,
                            f"has {chips} chips per slice; the disaggregated JetStream server "
                            f"(ExperimentalMaxtextDisaggregatedServer_<chips>) is known only for "
                            f"{', '.join(str(c) for c in sorted(DISAGGREGATED_SERVER_CHIPS))}-chip slices",
                            "a topology with "
                            + " or ".join(str(c) for c in sorted(DISAGGREGATED_SERVER_CHIPS))
                            + " chips (v6e 2x4)",
                            "use 2x4 slices, or mode: interleaved on one larger slice",
                        )
                    )
        zone = self.conversion.zone
        if self.conversion.enabled and zone is not None:
            in_region = gce.zones_of(config.region)
            if zone.rsplit("-", 1)[0] != config.region:
                rules.append(
                    rule(
                        "workload.jetstream.conversion.zone",
                        zone,
                        f"is not in gcp:region {config.region} (a node pool's zones must be in the cluster's region)",
                        f"a zone of {config.region}" + (f": {', '.join(in_region)}" if in_region else ""),
                        "pick a zone of the region that offers the converter's machine type, or unset it",
                    )
                )
            elif in_region and zone not in in_region and not self.conversion.allow_undocumented:
                rules.append(
                    rule(
                        "workload.jetstream.conversion.zone",
                        zone,
                        f"is not a zone of {config.region} in the Compute Engine catalog",
                        ", ".join(in_region),
                        "pick a listed zone, or set conversion.allowUndocumented: true if Google lists it now",
                    )
                )
        if self.checkpoint_bucket == self.scratch_bucket:
            rules.append(
                rule(
                    "workload.jetstream.scratchBucket",
                    self.scratch_bucket,
                    "is the checkpoint bucket; Pathways scratch files would share a versioned checkpoint bucket",
                    "a bucket key other than checkpointBucket",
                    "add a separate scratch bucket (purpose: pathways-scratch)",
                )
            )
        if config.workload.model not in MODELS:
            rules.append(
                rule(
                    "workload.model",
                    config.workload.model,
                    "has no JetStream/MaxText serving profile (config file, tokenizer, converter ids)",
                    ", ".join(MODELS),
                    "use a listed model or add its profile to components/workloads/jetstream/spec.py",
                )
            )
        if config.workload.max_prefill_length is None:
            rules.append(
                rule(
                    "workload.maxPrefillLength",
                    None,
                    "is required for JetStream (MaxText max_prefill_predict_length)",
                    f"1..{config.workload.max_target_length - 1}",
                    "set workload.maxPrefillLength (the seeds use 1024)",
                )
            )
        if config.workload.per_device_batch_size is None:
            rules.append(
                rule(
                    "workload.perDeviceBatchSize",
                    None,
                    "is required for JetStream (MaxText per_device_batch_size)",
                    "a positive number",
                    "set workload.perDeviceBatchSize (the seeds use 6 for 405B, 27 for 70B)",
                )
            )
        from ...config.front_door import refuse_gateway

        # The endpoint picker reads vLLM, SGLang, trtllm-serve and Triton gauges only (llm-d-router v0.10.0
        # pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go) and parses OpenAI request bodies.
        return rules + refuse_gateway(
            config,
            "JetStream's HTTP server answers /generate with its own request body, not the OpenAI API the endpoint "
            "picker parses for prefix scoring, and its jetstream_* metrics are none of the engines' whose queue and "
            "KV-cache gauges the picker reads (vLLM, SGLang, trtllm-serve, Triton), so every scorer would see nothing",
        )


class JetstreamWorkload(WorkloadBase):
    """``gke-tpu-llm:workload`` with ``kind: jetstream-pathways``."""

    kind: Literal["jetstream-pathways"] = Field(description=KIND_DESCRIPTION)
    jetstream: JetstreamSpec = Field(default_factory=JetstreamSpec, description="Settings when kind is jetstream-pathways.")


def settings(config: StackConfig) -> JetstreamSpec:
    """This kind's settings section of ``config`` (TypeError for a stack of another kind)."""
    return workload_as(config.workload, JetstreamWorkload).jetstream


def per_device_batch_size(config: StackConfig) -> float:
    """MaxText ``per_device_batch_size`` of the server: ``workload.perDeviceBatchSize`` (required
    by this kind's rules; 1 only for a config those rules have not checked)."""
    return config.workload.per_device_batch_size or 1


def decode_slots(config: StackConfig, tpu: TpuSlice) -> int:
    """Sequences one JetStream server decodes at once on (decode) slice ``tpu``: MaxText's decode
    batch is ``per_device_batch_size`` x JAX devices (``jax_devices_per_chip`` per chip)."""
    return max(1, int(per_device_batch_size(config) * tpu.chips * tpu.generation.jax_devices_per_chip))


def serving_server(config: StackConfig, tpu: TpuSlice) -> Server:
    """How JetStream runs one replica on ``tpu``: its decode slots bound the batch; disaggregated,
    a replica is a prefill slice and a decode slice of ``tpu``'s type."""
    return Server(
        batch_limit=decode_slots(config, tpu),
        batch_limit_source="JetStream decode slots (workload.perDeviceBatchSize x devices)",
        disaggregated=settings(config).mode == "disaggregated",
    )
