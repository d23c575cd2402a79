"""Settings of the vLLM serving workload (``gke-tpu-llm:workload.vllm``): a Deployment on single-host
TPU slices, a LeaderWorkerSet (Ray head + ``vllm serve`` on the leader) on multi-host slices.

Hardware numbers are not here: tensor and pipeline parallelism come from the capacity plan,
``google.com/tpu``, node selectors and the LWS group size (hosts per slice) from the slice, replica
bounds default to the TPU pools' node bounds (one replica per single-host node, one LWS group per
multi-host slice). What is here is what a user may reasonably choose: the pinned image,
where weights are cached, how the GCS FUSE file cache is sized, how the server is exposed and which
vLLM metric drives the HorizontalPodAutoscaler.

Rules that need the rest of the stack (pool size, model, host memory) are in
:meth:`VllmSpec.stack_rules`, which ``StackConfig`` runs at load time so a bad combination exits 2
before anything is registered.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ...catalog import engine_releases as engines
from ...catalog.models import MODELS
from ...catalog.stackdriver_adapter import ADAPTER_IMAGE, ADAPTER_NAMESPACE
from ...catalog.tpu import host_memory_gb_of
from ...config.base import BucketNeed, Cidr, PinnedImage, Spec
from ...config.errors import raise_rules, rule
from ...config.gke_rules import load_balancer_dataplane_rules
from ...config.isolation import Claim, identity_namespace_claim
from ...config.workload import KIND_DESCRIPTION, WorkloadBase, workload_as
from ...planner.perf import Server
from .disagg import VllmDisaggregationSpec

if TYPE_CHECKING:
    from ...catalog.tpu import TpuSlice
    from ...config.stack import StackConfig

ENGINE_DEFAULT = engines.newest_passing("vllm-tpu")
"""The newest vLLM TPU release of the engine catalog (a stack's own default may be older: ``engine.engine_version``)."""

# Hugging Face repositories of the catalog models vLLM downloads (the seed serves the base
# meta-llama/Llama-3.1-70B; upstream manifest kubernetes-engine-samples vllm-llama3-70b.yaml).
HF_MODELS: dict[str, str] = {
    "llama3.1-70b": "meta-llama/Llama-3.1-70B",
    "llama3.1-405b": "meta-llama/Llama-3.1-405B",
    "llama3-8b": "meta-llama/Meta-Llama-3-8B",
    "llama2-70b": "meta-llama/Llama-2-70b-hf",
}

# FP8 checkpoints served when workload.weights is fp8. The architecture is the catalog model's, so
# the dtype stays a workload setting (as int8 is for MaxText) and only the repository changes here.
# The llm-compressor (compressed-tensors) checkpoint, not Meta's meta-llama/Llama-3.1-405B-Instruct-FP8:
# Meta's uses fbgemm_fp8, which tpu-inference does not load (its quantization methods are fp8,
# compressed-tensors, awq and mxfp4: vllm-project/tpu-inference tpu_inference/layers/common/quant_methods.py).
# vLLM reads the scheme from the checkpoint's config.json quantization_config, so no --quantization flag.
# Only an Instruct FP8 checkpoint is published; the layout the planner assumes is
# components.planner.params.FP8_CHECKPOINT_FORMAT.
HF_FP8_MODELS: dict[str, str] = {
    "llama3.1-405b": "neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8-dynamic",
}

CACHE_HOST_MEMORY_SHARE = 0.5
"""The RAM file cache may take at most half the host: vLLM itself stages weights in host memory."""


def max_file_cache_gi(machine_type: str | None) -> int | None:
    """The largest RAM file cache a ``machine_type`` host allows (None: no TPU machine type), from the
    host RAM its catalog generation records (``TpuGeneration.host_memory_gb``)."""
    host_gb = host_memory_gb_of(machine_type)
    return None if host_gb is None else int(host_gb * 1e9 * CACHE_HOST_MEMORY_SHARE // 2**30)

# vLLM exposes these gauges; the HPA reads them through GKE's AutoscalingMetric or Managed Prometheus + the
# Stackdriver adapter (components/workloads/vllm/autoscaling.py).
# kv_cache_usage_perc replaced gpu_cache_usage_perc (deprecated in vllm-project/vllm#18354, no longer
# emitted by default in current releases), which GKE's tutorial still names for latency-sensitive use.
METRICS = ("num_requests_waiting", "kv_cache_usage_perc")
DEFAULT_TARGETS: dict[str, float] = {
    # Upstream vllm-hpa.yaml main: averageValue 10 (raised from 1 on 2024-12-12).
    "num_requests_waiting": 10,
    # KV-cache use is a 0..1 fraction; 0.7 leaves room for the minutes a new replica takes to load.
    "kv_cache_usage_perc": 0.7,
}

API_KEY_SECRET = "vllmApiKey"
API_KEY_PATHS = ("/v1", "/v2", "/inference")
"""The only path prefixes vLLM's API key guards: ``GUARDED_PREFIX`` of its ``AuthenticationMiddleware``
(``vllm/entrypoints/serve/utils/server_utils.py`` at v0.27.1, quoted in vllm-project/vllm#58144;
vLLM's security guide, "API Key Authentication Limitations")."""
API_KEY_OPEN_PATHS = ("/invocations", "/pooling", "/classify", "/score", "/rerank", "/tokenize", "/metrics", "/health")
"""Paths the same server answers without the key (the security guide's list; ``/invocations`` runs the
same completions as ``/v1``): the plan's endpoint line names them beside the key."""
_GUARDED = f"{', '.join(API_KEY_PATHS[:-1])} and {API_KEY_PATHS[-1]}"
"""Secret config key of the API key clients send as ``Authorization: Bearer <key>``."""


class VllmServiceSpec(Spec):
    type: Literal["external", "internal"] = Field(
        "internal",
        description="Load balancer of the Service on port 8000. Only 'internal' (a VPC-internal passthrough load "
        "balancer) is accepted: 'external' (a public IP, as the seed) is refused because vLLM's API key does not "
        "cover every inference path (/invocations answers without it), so a public vLLM would be unauthenticated.",
    )
    source_ranges: list[Cidr] = Field(
        [],  # pydantic copies the default per instance
        description="CIDRs inside the VPC allowed to reach the internal load balancer (Service "
        "loadBalancerSourceRanges). Empty: the whole VPC.",
    )
    auth: Literal["none", "api-key"] = Field(
        "none",
        description="Client authentication, in depth behind the internal load balancer. 'api-key': vLLM requires "
        f"`Authorization: Bearer <key>` on {_GUARDED} (the key is the secret config gke-tpu-llm:{API_KEY_SECRET}, "
        "handed to vLLM as VLLM_API_KEY from a Kubernetes Secret, never on the command line; other paths such as "
        "/invocations, /health and /metrics stay open, see type). Defaults to none because the endpoint is "
        "reachable only from the VPC.",
    )

    @model_validator(mode="after")
    def _exposure(self) -> VllmServiceSpec:
        rules: list[dict[str, Any]] = []
        if self.type == "external":
            rules.append(
                rule(
                    "type",
                    "external",
                    "would put vLLM outside the VPC, and nothing this stack can set authenticates all of it: vLLM's "
                    f"API key guards only {_GUARDED}, while /invocations (the same completions), /pooling, "
                    "/score, /tokenize and more answer without it (docs.vllm.ai security guide, 'API key "
                    "authentication limitations'; vllm-project/vllm#58144 on v0.27)",
                    "internal",
                    "keep type: internal (reach it from the VPC or with kubectl port-forward); to serve clients "
                    "outside the VPC, use the public gateway (workload.frontDoor: {type: gateway, exposure: public}: "
                    "HTTPS behind Identity-Aware Proxy)",
                )
            )
        raise_rules(rules)
        return self


class VllmGcsFuseSpec(Spec):
    file_cache_gi: Annotated[int, Field(ge=1, le=12_000)] | None = Field(
        None,
        description="Size of the GCS FUSE file cache in GiB, held in RAM (a memory-backed gke-gcsfuse-cache "
        "volume). Unset derives it from the model: its safetensors (bf16, or FP8 with weights: fp8) plus 10%, "
        "because a cache smaller than the checkpoint re-downloads shards on every load and an unbounded one (-1) "
        "fills the volume until writes fail; capped at half the host's RAM, which vLLM needs to stage weights (a "
        "405B checkpoint is larger than that on a 4-chip v6e host: the rest is read from GCS on each load). At "
        "most 12000 GiB (no TPU host has more RAM).",
    )
    parallel_downloads_per_file: Annotated[int, Field(ge=1, le=1000)] = Field(
        100,
        description="Concurrent GCS range reads per file on a cache miss (file-cache:parallel-downloads-per-file). "
        "Defaults to 100 because upstream's manifest uses it for multi-GB safetensors shards. At most 1000 "
        "(each download holds a chunk in memory; more only queues at GCS).",
    )
    download_chunk_size_mb: Annotated[int, Field(ge=1, le=1024)] = Field(
        10,
        description="Size of each parallel read in MB (file-cache:download-chunk-size-mb). Defaults to 10 "
        "because upstream's manifest uses it. At most 1024 (a chunk is held in memory).",
    )
    sidecar_ephemeral_storage_gi: Annotated[int, Field(ge=0, le=4000)] = Field(
        50,
        description="Ephemeral-storage limit of the GCS FUSE sidecar in GiB (gke-gcsfuse/ephemeral-storage-limit; "
        "0 = unlimited). Defaults to 50 because the cache is in RAM and the disk only stages writes of the first "
        "download (Hugging Face fetches up to 8 shards of about 5 GB at once) on the TPU VM's 100 GB boot disk. "
        "At most 4000, the largest TPU boot disk (tpu.diskSizeGb).",
    )


class VllmProbesSpec(Spec):
    startup_timeout_seconds: Annotated[int, Field(ge=60, le=14400)] = Field(
        3600,
        description="How long the server may take to answer /health after the container starts before it is "
        "restarted. Defaults to 3600 because a 70B first load downloads ~141 GB from Hugging Face through GCS "
        "FUSE and compiles XLA programs; upstream's single TCP readiness check after 15 s says nothing about that, "
        "and a liveness probe without a startup budget would restart the load over and over.",
    )


class VllmAutoscalingSpec(Spec):
    enabled: bool = Field(
        True,
        description="Scale replicas with a HorizontalPodAutoscaler on a vLLM metric. Defaults to on, as the seed; "
        "off runs minReplicas replicas.",
    )
    metric: Literal["num_requests_waiting", "kv_cache_usage_perc"] = Field(
        "num_requests_waiting",
        description="vLLM gauge the HPA averages per pod: num_requests_waiting (queue depth; throughput, the "
        "seed's choice) or kv_cache_usage_perc (KV-cache fill; scales before requests queue, for "
        "latency-sensitive serving). Defaults to num_requests_waiting because GKE recommends it for throughput.",
    )
    target: Annotated[float, Field(gt=0, le=10_000)] | None = Field(
        None,
        description="Average value per pod the HPA keeps the metric at. Unset: 10 waiting requests (upstream) or "
        "0.7 KV-cache fill, because a new TPU replica takes minutes to load and must be started before the "
        "cache is full.",
    )
    via: Literal["autoscalingMetric", "adapter"] | None = Field(
        None,
        description="How the HPA gets its metric: autoscalingMetric (GKE's AutoscalingMetric, autoscaling.gke.io; no "
        "adapter, APIService, cluster role or project-wide roles/monitoring.viewer grant, so several autoscaled stacks "
        "may share a project; needs cluster.version >= 1.37.0-gke.3100000 and sets the cluster's HPA performance "
        "profile) or adapter (the Custom Metrics Stackdriver Adapter; any version, one such stack per project). "
        "Unset: autoscalingMetric when cluster.version is pinned at or above that floor, else adapter, because an "
        "unset version (the release channel's default) is not known offline and the adapter works on every version.",
    )
    source: Literal["server", "endpointPicker"] = Field(
        "server",
        description="Where the metric is read: server (vLLM's gauge, per pod) or endpointPicker (the gateway's pool "
        "gauges, llm_d_epp_average_queue_size or llm_d_epp_average_kv_cache_utilization, as an External metric; needs "
        "workload.frontDoor.type: gateway and via: autoscalingMetric). Defaults to server. endpointPicker is the "
        "signal that exists at zero replicas (the picker keeps running), so minReplicas: 0 needs it.",
    )
    min_replicas: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        None,
        description="Fewest replicas. Unset: the pools' minimum nodes (at least 1), because each replica needs a "
        "whole single-host node. 0 (scale to zero) only with source: endpointPicker, capacity tiers that all scale "
        "from zero and cluster.version >= 1.37; plan prints the cold start it costs.",
    )
    max_replicas: Annotated[int, Field(ge=1, le=1000)] | None = Field(
        None,
        description="Most replicas. Unset: the pools' maximum nodes; set, it may not exceed them, because a "
        "replica beyond the pool's capacity would stay Pending forever.",
    )
    scale_down_stabilization_seconds: Annotated[int, Field(ge=0, le=3600)] = Field(
        600,
        description="HPA scale-down stabilization window. Defaults to 600 because a removed replica frees a TPU "
        "node that takes many minutes to get back and reload; flapping costs more than an idle replica.",
    )

    @model_validator(mode="after")
    def _target_range(self) -> VllmAutoscalingSpec:
        rules = []
        if self.metric == "kv_cache_usage_perc" and self.target is not None and self.target > 1:
            rules.append(
                rule(
                    "target",
                    self.target,
                    "is above 1 for kv_cache_usage_perc (a 0..1 fraction)",
                    "0 < target <= 1",
                    "use a fraction such as 0.7",
                )
            )
        if self.min_replicas is not None and self.max_replicas is not None and self.min_replicas > self.max_replicas:
            rules.append(
                rule(
                    "minReplicas",
                    self.min_replicas,
                    f"is above maxReplicas ({self.max_replicas})",
                    f"1..{self.max_replicas}",
                    "lower minReplicas or raise maxReplicas",
                )
            )
        raise_rules(rules)
        return self

    @property
    def resolved_target(self) -> float:
        return self.target if self.target is not None else DEFAULT_TARGETS[self.metric]


class VllmSpec(Spec):
    """vLLM serving on a single-host (Deployment) or multi-host (LeaderWorkerSet + Ray) TPU slice."""

    image: PinnedImage | None = Field(
        None,
        description="vLLM TPU server image, pinned to a released tag or digest (a custom build). Unset: the image of "
        "the engine release (workload.vllm.engineVersion) from the engine catalog, by tag and digest where "
        "components/catalog/images.json has one, because upstream's manifest uses the floating :latest and a restart "
        "could change the server.",
    )
    engine_version: str | None = Field(
        None,
        pattern=r"^\d+\.\d+\.\d+$",
        description="vLLM TPU (tpu-inference) release to run, a version the engine catalog lists "
        "(components/catalog/engine_releases.json). Unset: the release a pinned image names by tag, else the newest listed "
        f"release in which nothing this stack selects is broken ({ENGINE_DEFAULT.version} today). A release in which a "
        "selected feature is broken (e.g. the TPUConnectorHMA KV connector in 0.27.0-0.29.0) is refused with the "
        "release that fixes it.",
    )
    model_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$",
        description="Hugging Face repository vLLM serves (--model). Unset maps the catalog model (llama3.1-70b -> "
        "meta-llama/Llama-3.1-70B, the seed's) because the catalog key is the one place the model is named.",
    )
    download_dir: str = Field(
        "/data",
        pattern=r"^/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$",
        description="Mount path of the GCS FUSE bucket volume, used as vLLM's --download-dir so downloaded "
        "weights land in the bucket and later loads read them from the RAM cache. Defaults to /data, as upstream.",
    )
    max_num_batched_tokens: Annotated[int, Field(ge=1, le=1_048_576)] | None = Field(
        512,
        description="vLLM --max-num-batched-tokens (tokens per scheduler step). Defaults to 512, upstream's TPU "
        "tuning; unset leaves vLLM's default. --max-num-seqs comes from workload.batchSize (else upstream's 128).",
    )
    bucket: str = Field(
        "models",
        description="Key of the stack bucket (gke-tpu-llm:buckets) mounted at downloadDir through GCS FUSE; vLLM "
        "downloads the weights into it and later loads read them from it. Defaults to models; the workload identity "
        "needs objectUser or objectAdmin on it.",
    )
    service: VllmServiceSpec = Field(default_factory=VllmServiceSpec, description="How the server is exposed.")
    gcs_fuse: VllmGcsFuseSpec = Field(default_factory=VllmGcsFuseSpec, description="The GCS FUSE weights cache.")
    probes: VllmProbesSpec = Field(default_factory=VllmProbesSpec, description="Health probes.")
    autoscaling: VllmAutoscalingSpec = Field(
        default_factory=VllmAutoscalingSpec, description="Replica autoscaling on a vLLM metric."
    )
    disaggregation: VllmDisaggregationSpec | None = Field(
        None,
        description="Prefill/decode disaggregation: prefill servers on the first TPU pool, decode servers on the second "
        "(tpu.slices: 2, single-host slices), the KV cache handed over by tpu-inference's KV connector for the model's "
        "attention type, and the gateway's endpoint picker choosing both (needs workload.frontDoor.type: gateway). "
        "Unset: every server prefills and decodes.",
    )
    allow_untested_parallelism: bool = Field(
        False,
        description="Accept a pinned workload.parallelism that tpu-inference does not test on a multi-host slice "
        "(tensor parallelism across hosts; its support matrix, docs/includes/parallelism.md, lists only multi-host "
        "pipeline parallelism as passing). Defaults to false, so such a layout is refused with the reason.",
    )
    metrics_adapter_version: str = Field(
        ADAPTER_IMAGE.tag,
        pattern=r"^v\d+\.\d+\.\d+(-gke\.\d+)?$",
        description=f"Custom Metrics Stackdriver Adapter image tag ({ADAPTER_IMAGE.repository}), installed only "
        f"with autoscaling; a tag the image catalog lists is pinned by its digest too. Defaults to {ADAPTER_IMAGE.tag}, "
        "the release the upstream production manifest pins (GoogleCloudPlatform/k8s-stackdriver#1245).",
    )

    # ---- derived values (read by the renderer and by the rules below) ----

    def hf_model(self, model: str, weights: str | None = None) -> str | None:
        """The repository vLLM serves: ``modelId``, else the model's FP8 checkpoint when ``weights``
        is fp8, else its bf16 one."""
        return self.model_id or (HF_FP8_MODELS if weights == "fp8" else HF_MODELS).get(model)

    def file_cache_gi(self, model: str, weights: str | None = None, machine_type: str | None = None) -> int:
        """GiB of RAM file cache: configured, or the model's checkpoint plus 10% (bf16 safetensors, 2 bytes
        per parameter; fp8, 1 byte: the bf16 embeddings and scales it also holds fit in the 10%), at most
        the share of the ``machine_type`` host's RAM the cache may take.

        Capped rather than sized per pipeline stage: on a multi-host slice every host still reads the
        whole checkpoint (vLLM's safetensors iterator reads every tensor of every file, and a stage
        keeps only its layers'), so a cache below the checkpoint only serves part of a restart from
        RAM; the rest is read from GCS as on a first load."""
        if self.gcs_fuse.file_cache_gi is not None:
            return self.gcs_fuse.file_cache_gi
        checkpoint = (MODELS[model].published_params or 0) * (1 if weights == "fp8" else 2)
        derived = max(1, math.ceil(checkpoint * 1.1 / 2**30))
        host_cap = max_file_cache_gi(machine_type)
        return derived if host_cap is None else min(derived, host_cap)

    def replica_bounds(self, config: StackConfig) -> tuple[int, int]:
        """(min, max) replicas: configured, or the pools' node bounds (one replica per node)."""
        pool_min, pool_max = pool_nodes(config)
        auto = self.autoscaling
        low = auto.min_replicas if auto.min_replicas is not None else max(1, pool_min)
        high = auto.max_replicas if auto.max_replicas is not None else pool_max
        return low, high

    def required_secrets(self) -> tuple[str, ...]:
        # vLLM downloads gated Llama weights from Hugging Face on first start; the API key only when
        # the endpoint authenticates its clients.
        return ("hfToken", *((API_KEY_SECRET,) if self.service.auth == "api-key" else ()))

    def claims(self, config: StackConfig) -> tuple[Claim, ...]:
        # The adapter's KSA holds roles/monitoring.viewer on the project: a second stack installing it
        # in the same project would share (and on destroy remove) that grant. AutoscalingMetric has none.
        from .autoscaling import via

        if not self.autoscaling.enabled or via(config) != "adapter":
            return ()
        fix = (
            "the adapter's namespace and KSA are fixed upstream, so one autoscaled vLLM stack per project: give one "
            "stack another gcp:project, or set workload.vllm.autoscaling.enabled: false in one, or move both to "
            "workload.vllm.autoscaling.via: autoscalingMetric (GKE 1.37.0-gke.3100000+), which needs no adapter"
        )
        return (identity_namespace_claim(config.project, ADAPTER_NAMESPACE, "workload.vllm.autoscaling.enabled", True, fix),)

    def bucket_needs(self, config: StackConfig) -> tuple[BucketNeed, ...]:
        return (
            BucketNeed(
                self.bucket,
                "roles/storage.objectUser",
                f"does not let vLLM write the weights it downloads into the bucket mounted at {self.download_dir}",
                named_by="workload.vllm.bucket",
            ),
        )

    def stack_rules(self, config: StackConfig) -> list[dict[str, Any]]:
        """Rules across the stack (paths relative to ``gke-tpu-llm:``); run by ``StackConfig._cross_rules``."""
        from .disagg import rules as disaggregation_rules
        from .engine import rules as engine_rules

        rules: list[dict[str, Any]] = engine_rules(config) + disaggregation_rules(config)
        workload = config.workload
        _, pool_max = pool_nodes(config)
        low, high = self.replica_bounds(config)
        where = "tpu.autoscaling.maxNodes" if config.tpu.autoscaling else "tpu.slices"
        multi_host = is_multi_host(config)
        if multi_host:
            rules += self._multi_host_rules(config)
        else:
            from .autoscaling import rules as autoscaling_rules

            rules += autoscaling_rules(config)
        for key, value in (("maxReplicas", high), ("minReplicas", low)):
            if not multi_host and value > pool_max:
                rules.append(
                    rule(
                        f"workload.vllm.autoscaling.{key}",
                        value,
                        f"is more replicas than the TPU pools can host ({pool_max} node(s), one single-host "
                        f"replica each, from {where})",
                        f"1..{pool_max}",
                        f"lower workload.vllm.autoscaling.{key} or raise {where}",
                    )
                )
        if self.hf_model(workload.model, workload.weights) is None:
            fp8 = workload.weights == "fp8"
            known = HF_FP8_MODELS if fp8 else HF_MODELS
            rules.append(
                rule(
                    "workload.vllm.modelId",
                    None,
                    f"is required: no Hugging Face {'FP8 ' if fp8 else ''}repository is known for {workload.model}",
                    ", ".join(f"{k} -> {v}" for k, v in known.items()),
                    f"set workload.vllm.modelId to the {'FP8 ' if fp8 else ''}repository vLLM should serve",
                )
            )
        for key, dtype in (("workload.weights", workload.weights), ("workload.kvCache", workload.kv_cache)):
            if dtype == "int8":
                rules.append(
                    rule(
                        key,
                        dtype,
                        "is not supported by the vLLM deployment (it serves the bf16 or FP8 checkpoint as published)",
                        "bfloat16 or fp8 (or unset)",
                        f"remove {key} or use a MaxText-based workload for int8",
                    )
                )
        machine = config.tpu.machine_type or (config.tpu.slice.machine_type if config.tpu.topology else None)
        host_gb = host_memory_gb_of(machine)
        cache_gi = self.file_cache_gi(workload.model, workload.weights, machine)
        allowed = max_file_cache_gi(machine)
        if allowed is not None and cache_gi > allowed:
            rules.append(
                rule(
                    "workload.vllm.gcsFuse.fileCacheGi",
                    cache_gi,
                    f"GiB of RAM cache exceeds half the {host_gb} GB of a {machine} host",
                    f"1..{allowed}",
                    "set a smaller workload.vllm.gcsFuse.fileCacheGi or use a larger machine type",
                )
            )
        # The Service is an internal LoadBalancer whose NetworkPolicy names its clients by address.
        rules += load_balancer_dataplane_rules("cluster.dataplane", config.cluster.dataplane)
        if config.workload.front_door.gateway and self.service.source_ranges:
            rules.append(
                rule(
                    "workload.vllm.service.sourceRanges",
                    list(self.service.source_ranges),
                    "has no load balancer to apply to: behind the gateway the Service is ClusterIP and only the "
                    "gateway's proxies reach the servers",
                    "unset with workload.frontDoor.type: gateway",
                    "remove workload.vllm.service.sourceRanges (the internal gateway admits the VPC; the public one, IAP users)",
                )
            )
        return rules

    def _multi_host_rules(self, config: StackConfig) -> list[dict[str, Any]]:
        """A multi-host slice runs one LeaderWorkerSet group per slice: no HPA, and a pinned
        parallelism must be the tested one (or explicitly accepted)."""
        from ...planner.engines import untested_multi_host
        from ...planner.mesh import resolve_explicit
        from ...planner.plan_errors import PlanError

        rules: list[dict[str, Any]] = []
        tpu = config.tpu.slice
        if self.autoscaling.enabled:
            rules.append(
                rule(
                    "workload.vllm.autoscaling.enabled",
                    True,
                    f"scales single-host replicas; on {tpu.key} ({tpu.hosts} hosts) a replica is a whole "
                    "LeaderWorkerSet group on a whole slice, which this HPA does not manage",
                    "false",
                    "set workload.vllm.autoscaling.enabled: false (replicas = tpu.slices)",
                )
            )
        pinned = config.workload.parallelism
        if pinned is None:
            return rules
        try:
            axes = resolve_explicit(("pipeline", "tensor"), pinned, tpu)
        except PlanError:
            return rules  # the capacity plan reports a malformed mesh with its own fix
        reason = untested_multi_host("vllm", axes, tpu)
        if reason is not None and not self.allow_untested_parallelism:
            rules.append(
                rule(
                    "workload.parallelism",
                    pinned,
                    f"is untested: {reason}",
                    f"pipeline: {tpu.hosts}, tensor: {tpu.chips_per_host}",
                    "remove workload.parallelism to derive the tested layout, or set "
                    "workload.vllm.allowUntestedParallelism: true to run it anyway",
                )
            )
        return rules


def is_multi_host(config: StackConfig) -> bool:
    """Whether the stack's slice (pinned, or already resolved by capacity) spans several hosts."""
    return config.tpu.pinned_multi_host


def pool_nodes(config: StackConfig) -> tuple[int, int]:
    """(min, max) nodes over all TPU pools, from the catalog slice (or the autoscaling bounds)."""
    tpu = config.tpu
    if tpu.autoscaling is None and tpu.topology is None:
        # Not chosen yet: one node per slice until capacity picks it (and the rules run again).
        return tpu.slices, tpu.slices
    return tpu.nodes_min * tpu.slices, tpu.nodes_max * tpu.slices


class VllmWorkload(WorkloadBase):
    """``gke-tpu-llm:workload`` with ``kind: vllm``."""

    kind: Literal["vllm"] = Field(description=KIND_DESCRIPTION)
    vllm: VllmSpec = Field(default_factory=VllmSpec, description="Settings when kind is vllm.")


def settings(config: StackConfig) -> VllmSpec:
    """This kind's settings section of ``config`` (TypeError for a stack of another kind)."""
    return workload_as(config.workload, VllmWorkload).vllm


UPSTREAM_MAX_NUM_SEQS = 128  # upstream vllm-llama3-70b.yaml, used when workload.batchSize is unset


def max_num_seqs(config: StackConfig) -> int:
    """vLLM ``--max-num-seqs``: ``workload.batchSize``, else upstream's 128 (the renderer's flag and
    the serving model's batch limit)."""
    return config.workload.batch_size or UPSTREAM_MAX_NUM_SEQS


def addons(config: StackConfig) -> frozenset[str]:
    """What the cluster needs for these settings (``WorkloadKindInfo.addons``): the GCS FUSE CSI driver
    (weights are read from the bucket), the Custom Metrics Stackdriver Adapter when the HPA reads its
    metric through it (``components.platform.addons.metrics_adapter``) or else GKE's HPA performance
    profile (``AutoscalingMetric``, ``components.workloads.vllm.autoscaling``) and, on a multi-host slice, the LWS
    controller (the server is a LeaderWorkerSet; a stack whose slice is not chosen yet has none)."""
    from .autoscaling import via

    wanted = {"gcsFuseCsiDriver"}
    if settings(config).autoscaling.enabled and not config.tpu.pinned_multi_host:
        # The adapter, or GKE's AutoscalingMetric with the cluster's HPA performance profile.
        wanted.add("metricsAdapter" if via(config) == "adapter" else "hpaPerformanceProfile")
    if config.tpu.pinned_multi_host:
        wanted.add("lws")
    return frozenset(wanted)


def serving_server(config: StackConfig, tpu: TpuSlice) -> Server:
    """How vLLM runs one replica on ``tpu`` (any slice: vLLM's limits are per server, not per chip)."""
    source = "workload.batchSize" if config.workload.batch_size else "upstream default"
    return Server(
        batch_limit=max_num_seqs(config),
        batch_limit_source=f"vLLM --max-num-seqs ({source})",
        step_token_budget=settings(config).max_num_batched_tokens,
        disaggregated=settings(config).disaggregation is not None,  # a replica: one prefill + one decode slice
    )
