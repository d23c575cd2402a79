"""JetStream + MaxText + Pathways on a LeaderWorkerSet, its Service and the checkpoint conversion Job.

Pure functions: a ``StackPlan`` and plain names in, Kubernetes objects (dicts) out. Bucket names
are the deterministic ``StackConfig.bucket_name`` (the name each bucket is created with), so every
path is a plain string; the component keeps the dependency on the buckets explicit. Every pod
template carries the baseline security context (``components.render.core.with_baseline_security``).

Every hardware number is derived from the plan, never configured:

* group size = slices x hosts + 1 (the leader: Pathways resource manager, IFRT proxy, JetStream
  and its HTTP front end, no TPU chips of its own);
* disaggregated: one LWS sub-group per slice (``subGroupSize`` = hosts per slice; the leader is the
  extra pod of sub-group 0) with sub-group-exclusive placement per node pool;
  interleaved: the whole group exclusive to one node pool;
* ``--instance_type`` = the slice's Pathways name (``tpuv6e:4x4``), ``--instance_count`` = slices;
* workers request ``google.com/tpu`` = chips per host; node selectors from the catalog;
* MaxText ``ici_*`` flags from the capacity plan (per slice).

Upstream (seeds 000 and 003; GoogleCloudPlatform/kubernetes-engine-samples
``ai-ml/llm-serving-tpus-jetstream/pathways/``, commit 06e7ed12) is followed container by container
and argument by argument; deliberate differences are marked "improvement" below and listed in the
README.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...catalog.tpu import NODEPOOL_LABEL
from ...config.resolve import StackPlan
from ...render import netpol
from ...render.core import (
    LWS_EXCLUSIVE,
    LWS_SUBGROUP_EXCLUSIVE,
    common_labels,
    tpu_host_resources,
    tpu_toleration,
    with_baseline_security,
)
from .checkpoint import (
    SKIP_AWAIT,
    checkpoint_marker,
    checkpoint_path,
    gcs,
    render_conversion_job,
    render_meta_url_secret,
)
from .spec import (
    GRPC_PORT,
    HTTP_PORT,
    PROXY_PORT,
    RM_PORT,
    WORKER_PORT,
    JetstreamSpec,
    per_device_batch_size,
    settings,
)

LWS_NAME = "jetstream-pathways"
SERVICE_NAME = "jetstream-svc"
# LWS placement annotations (kubernetes-sigs/lws api/leaderworkerset/v1 ExclusiveKeyAnnotationKey,
# SubGroupExclusiveKeyAnnotationKey): one group (or one sub-group) per node pool, i.e. per slice.


# Proxy XLA flags of the disaggregated seed (003, in order), tuned there for Llama 2 70B on v6e.
DISAGGREGATED_PROXY_XLA_FLAGS: tuple[str, ...] = (
    "--xla_jf_auto_cross_replica_sharding=false",
    "--xla_tpu_enable_windowed_einsum_for_reduce_scatter=false",
    "--xla_tpu_enable_windowed_einsum_for_all_gather=false",
    "--xla_tpu_prefer_latch_optimized_rhs_layouts=true",
    "--xla_tpu_enable_experimental_fusion_cost_model=false",
    "--xla_tpu_dot_dot_fusion_duplicated=false",
    "--xla_tpu_dot_dot_fusion=true",
    "--xla_jf_conv_input_fusion=true",
    "--xla_jf_conv_output_fusion=true",
    "--xla_tpu_rwb_fusion=false",
    "--xla_tpu_copy_fusion_pad_unpad_ratio=0",
    "--xla_tpu_licm_size_inflation_ratio=1",
    "--xla_tpu_copy_elision_analysis_allowance=150000",
    "--xla_tpu_copy_insertion_use_region_analysis_limit=10000",
    "--xla_tpu_order_dot_after_layout=true",
    "--xla_jf_rematerialization_percent_shared_memory_limit=100",
    "--xla_tpu_use_repeated_instance_for_preferred_prefetch_time=true",
    "--xla_tpu_enforce_prefetch_fifo_order=false",
    "--xla_tpu_prefetch_interval_picker_size_override=6000000",
    "--xla_tpu_async_copy_bandwidth_scaling_factor=1",
    "--xla_tpu_nd_short_transfer_max_chunks=-1",
    "--xla_tpu_enable_aggressive_broadcast_priority_update=true",
    "--xla_tpu_alternate_memory_benefit_scaling_factor_for_large_buffers=SQRT",
    "--xla_tpu_memory_bound_loop_optimizer_options=enabled:true",
    "--xla_tpu_enable_copy_fusion=true",
    "--xla_tpu_enable_cross_program_prefetch_freeing=false",
    "--xla_tpu_enable_dot_strength_reduction=true",
    "--xla_tpu_layout_use_dot_grouping=false",
    "--xla_tpu_msa_inefficient_use_to_copy_ratio=0.5",
    "--xla_tpu_reduce_loop_fusion_dup_with_unfusable_user=false",
    "--xla_tpu_vector_load_fusion_window=1024",
    "--xla_tpu_vector_store_fusion_window=256",
    "--xla_jf_conv_reshape_fusion=false",
    "--xla_tpu_input_conv_multi_users=false",
    "--xla_tpu_enable_multi_level_input_dot_dot_fusion=false",
    "--xla_tpu_enable_multi_level_output_dot_dot_fusion=false",
    "--xla_tpu_dot_dot_fusion_separable_convs_only=false",
    "--xla_tpu_enable_multi_level_nested_loop_fusion=true",
    "--xla_tpu_nested_dot_fusion=true",
    "--xla_tpu_enable_multi_level_nested_dot_fusion=false",
    "--xla_jf_enable_multi_output_fusion=true",
    "--xla_tpu_use_lp_llo_scheduler_for_dot_dot_fusions=false",
    "--xla_tpu_enable_flash_attention=true",
)

STARTUP_PERIOD_SECONDS = 10
HEALTH_PERIOD_SECONDS = 60  # as both seeds: one /healthcheck a minute once started


@dataclass(frozen=True)
class Layout:
    """The LWS shape, derived from the slice and the slice count."""

    mode: str
    slices: int
    hosts: int
    size: int
    """Pods per group: every host of every slice plus the leader."""
    sub_group_size: int | None
    """Pods per sub-group (= hosts per slice) in the disaggregated form; None when interleaved."""
    instance_type: str
    instance_count: int
    tpu_per_host: int
    node_selector: Mapping[str, str]


def spec_of(stack: StackPlan) -> JetstreamSpec:
    return settings(stack.config)


def layout(stack: StackPlan) -> Layout:
    tpu_slice = stack.slice
    slices = stack.config.tpu.slices
    mode = spec_of(stack).mode
    return Layout(
        mode=mode,
        slices=slices,
        hosts=tpu_slice.hosts,
        size=slices * tpu_slice.hosts + 1,
        sub_group_size=tpu_slice.hosts if mode == "disaggregated" else None,
        instance_type=tpu_slice.pathways_instance_type,
        instance_count=slices,
        tpu_per_host=tpu_slice.tpu_per_host,
        node_selector=dict(tpu_slice.node_selector),
    )


def _number(value: float) -> str:
    """MaxText reads 6 and 6.0 alike; print integral values without a decimal point, as the seeds."""
    return f"{value:g}"


def server_args(stack: StackPlan, checkpoint: str) -> list[str]:
    """``jax-tpu`` arguments: MaxText config file, then ``key=value`` overrides in the seed's order."""
    config = stack.config
    workload = config.workload
    spec = spec_of(stack)
    profile = spec.model_profile(workload.model)
    if profile is None:  # stack_rules reports it; unreachable for a validated stack
        raise ValueError(f"no JetStream profile for {workload.model}")
    int8 = workload.weights == "int8"
    kv_int8 = (workload.kv_cache or workload.weights) == "int8"
    flags = stack.flags
    ici = [f"{key}={flags[key]}" for key in ("ici_fsdp_parallelism", "ici_autoregressive_parallelism", "ici_tensor_parallelism")]
    batch = f"per_device_batch_size={_number(per_device_batch_size(config))}"
    lengths = [
        f"max_prefill_predict_length={workload.max_prefill_length}",
        f"max_target_length={workload.max_target_length}",
    ]
    tokenizer = [f"tokenizer_path={profile.tokenizer_path}"] if profile.tokenizer_path else []
    load = f"load_parameters_path={checkpoint}"
    quantization = ["quantization=int8"] if int8 else []
    if spec.mode == "interleaved":
        # Order of seed 000 (405B, 4x4).
        return [
            profile.maxtext_config,
            *tokenizer,
            f"model_name={workload.model}",
            load,
            *lengths,
            "async_checkpointing=false",
            "steps=1",
            *ici,
            "scan_layers=false",
            "weight_dtype=bfloat16",
            batch,
            "enable_single_controller=true",
            *quantization,
            f"quantize_kvcache={str(kv_int8).lower()}",
            f"checkpoint_is_quantized={str(int8).lower()}",
            "enable_model_warmup=true",
        ]
    # Order of seed 003 (70B, 2 x 2x4). improvement: the disaggregated server's chip count and the
    # tensor parallelism are derived (the seed hard-codes _8 and ici_tensor_parallelism=-1).
    return [
        profile.maxtext_config,
        *tokenizer,
        load,
        *lengths,
        f"model_name={workload.model}",
        *ici,
        "scan_layers=false",
        "weight_dtype=bfloat16",
        batch,
        f"checkpoint_is_quantized={str(int8).lower()}",
        *quantization,
        f"quantize_kvcache={str(kv_int8).lower()}",
        "compute_axis_order=0,2,1,3",
        "ar_cache_axis_order=0,2,1,3",
        "stack_prefill_result_cache=True",
        f"inference_server=ExperimentalMaxtextDisaggregatedServer_{stack.slice.chips}",
        "inference_benchmark_test=True",
        "enable_model_warmup=True",
    ]


def _http_probe(period: int, failure_threshold: int) -> dict[str, Any]:
    # Port 8000 is jetstream-http's; its /healthcheck reflects the JetStream server behind it.
    return {
        "httpGet": {"path": "/healthcheck", "port": HTTP_PORT, "scheme": "HTTP"},
        "periodSeconds": period,
        "failureThreshold": failure_threshold,
    }


def _leader_selector(stack: StackPlan) -> dict[str, str]:
    return {
        "app.kubernetes.io/instance": stack.config.stack,
        "app.kubernetes.io/component": "jetstream-leader",
    }


def _wait_for_checkpoint(spec: JetstreamSpec, marker: str) -> dict[str, Any]:
    """Init container: block until the checkpoint's commit marker exists, so the server never starts
    on a half-written (or not yet converted) checkpoint and crash-loops through restores."""
    # Only "not found" means "keep waiting"; any other failure (403: the identity cannot read the
    # bucket) ends the init container with the error, instead of waiting forever.
    script = (
        "while true; do\n"
        '  if out=$(gcloud storage objects describe "$CHECKPOINT_MARKER" --format="value(name)" 2>&1); then\n'
        '    echo "checkpoint committed: $CHECKPOINT_MARKER"; exit 0\n'
        "  fi\n"
        '  case "$out" in\n'
        '    *404*|*NotFound*|*"not found"*|*"No URLs matched"*)\n'
        '      echo "waiting for $CHECKPOINT_MARKER (checkpoint conversion still running or not started)"; sleep 60 ;;\n'
        '    *) echo "cannot read $CHECKPOINT_MARKER: $out" >&2; exit 1 ;;\n'
        "  esac\n"
        "done\n"
    )
    return {
        "name": "wait-for-checkpoint",
        "image": spec.wait_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", script],
        "env": [{"name": "CHECKPOINT_MARKER", "value": marker}],
    }


def _tpu_pod_spec(stack: StackPlan, service_account: str) -> dict[str, Any]:
    return {
        "serviceAccountName": service_account,
        "nodeSelector": dict(layout(stack).node_selector),
        "tolerations": [tpu_toleration()],
    }


def render_lws(
    stack: StackPlan,
    *,
    namespace: str,
    service_account: str,
    checkpoint_bucket: str,
    scratch_bucket: str,
) -> dict[str, Any]:
    """The serving LeaderWorkerSet: leader (Pathways RM, IFRT proxy, JetStream) and TPU workers."""
    spec = spec_of(stack)
    shape = layout(stack)
    stack_name = stack.config.stack
    scratch = gcs(scratch_bucket)
    checkpoint = checkpoint_path(stack, checkpoint_bucket)
    leader_address = f"$(LWS_LEADER_ADDRESS):{RM_PORT}"
    proxy_flags = DISAGGREGATED_PROXY_XLA_FLAGS if shape.mode == "disaggregated" else ()
    image_pull = "IfNotPresent"  # improvement: tags are pinned, so a restart need not hit the registry

    jax_tpu: dict[str, Any] = {
        "name": "jax-tpu",
        "image": spec.jetstream_image,
        "imagePullPolicy": image_pull,
        "args": server_args(stack, checkpoint),
        "env": [{"name": "LOG_LEVEL", "value": "INFO"}],
        "ports": [{"containerPort": GRPC_PORT}],
        # improvement: probe every 10 s within a restore budget instead of every second for ~3 h.
        "startupProbe": _http_probe(STARTUP_PERIOD_SECONDS, math.ceil(spec.startup_budget_seconds / STARTUP_PERIOD_SECONDS)),
        "livenessProbe": _http_probe(HEALTH_PERIOD_SECONDS, spec.health_failure_threshold),
        "readinessProbe": _http_probe(HEALTH_PERIOD_SECONDS, spec.health_failure_threshold),
    }
    # improvement: no added capabilities. Seed 003 (and the GKE tutorial's copy of it) adds
    # SYS_PTRACE, NET_ADMIN and SYS_TIME to the disaggregated jax-tpu without a word on why, and the
    # same container runs without them in the interleaved seed 000. jax-tpu holds no TPU (the
    # workers do); it serves gRPC and talks to the Pathways proxy over the pod network, which needs
    # none of them: SYS_PTRACE is for debuggers and profilers attaching to other processes,
    # NET_ADMIN for changing interfaces, routes and firewall rules, SYS_TIME for setting the clock.

    leader_containers: list[dict[str, Any]] = [
        {
            "name": "pathways-proxy",
            "image": spec.proxy_image,
            "imagePullPolicy": image_pull,
            # improvement: seed 000 leaves the proxy's args empty; these are the Pathways doc's three,
            # with our own scratch bucket instead of the public staging bucket seed 003 hard-codes.
            "args": [
                f"--resource_manager_address={leader_address}",
                f"--server_port={PROXY_PORT}",
                f"--gcs_scratch_location={scratch}",
                *proxy_flags,
            ],
            "ports": [{"containerPort": PROXY_PORT}],
        },
        {
            "name": "pathways-rm",
            "image": spec.server_image,
            "imagePullPolicy": image_pull,
            "args": [
                f"--server_port={RM_PORT}",
                f"--gcs_scratch_location={scratch}",
                "--node_type=resource_manager",
                f"--instance_count={shape.instance_count}",
                f"--instance_type={shape.instance_type}",
            ],
            "env": [
                {"name": "HOST_ADDRESS", "value": "$(LWS_LEADER_ADDRESS)"},
                {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
            ],
            "ports": [{"containerPort": RM_PORT}],
        },
        jax_tpu,
        {
            "name": "jetstream-http",
            "image": spec.http_image,
            "imagePullPolicy": image_pull,
            "ports": [{"containerPort": HTTP_PORT}],
        },
    ]
    worker_container = {
        "name": "worker",
        "image": spec.server_image,
        "imagePullPolicy": image_pull,
        "args": [
            f"--server_port={WORKER_PORT}",
            f"--resource_manager_address={leader_address}",
            f"--gcs_scratch_location={scratch}",
        ],
        "ports": [{"containerPort": WORKER_PORT}],
        # improvement: requests as well as limits (the seeds set limits only; equal either way).
        "resources": tpu_host_resources(shape.tpu_per_host),
    }
    template: dict[str, Any] = {
        # Pathways needs the whole group back after any pod restart (the seed's default, made explicit).
        "restartPolicy": "RecreateGroupOnPodRestart",
        "size": shape.size,
        "leaderTemplate": {
            "metadata": {"labels": {**common_labels(stack_name, "jetstream-leader"), **_leader_selector(stack)}},
            "spec": {
                **_tpu_pod_spec(stack, service_account),
                "initContainers": [_wait_for_checkpoint(spec, checkpoint_marker(stack, checkpoint_bucket))],
                "containers": leader_containers,
            },
        },
        "workerTemplate": {
            "metadata": {"labels": common_labels(stack_name, "pathways-worker")},
            "spec": {**_tpu_pod_spec(stack, service_account), "containers": [worker_container]},
        },
    }
    if shape.sub_group_size is not None:
        template["subGroupPolicy"] = {"subGroupSize": shape.sub_group_size}
    annotation = LWS_SUBGROUP_EXCLUSIVE if shape.sub_group_size is not None else LWS_EXCLUSIVE
    lws: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": LWS_NAME,
            "namespace": namespace,
            "labels": common_labels(stack_name, "jetstream"),
            "annotations": {annotation: NODEPOOL_LABEL},
        },
        "spec": {
            "replicas": 1,
            # Workers start with the leader: the leader becomes ready only once the workers serve.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": template,
        },
    }
    return with_baseline_security(lws)


def render_service(stack: StackPlan, *, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": SERVICE_NAME,
            "namespace": namespace,
            "labels": common_labels(stack.config.stack, "jetstream"),
            "annotations": dict(SKIP_AWAIT),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": _leader_selector(stack),
            "ports": [{"name": "jetstream-http", "protocol": "TCP", "port": HTTP_PORT, "targetPort": HTTP_PORT}],
        },
    }


def port_forward_command(namespace: str) -> str:
    return f"kubectl port-forward svc/{SERVICE_NAME} {HTTP_PORT}:{HTTP_PORT} -n {namespace}"


def curl_example() -> str:
    body = '{"prompt": "What are the top 5 programming languages", "max_tokens": 200}'
    return f"curl -s -X POST localhost:{HTTP_PORT}/generate -H 'Content-Type: application/json' -d '{body}'"


def server_logs_command(namespace: str) -> str:
    # LWS names the leader pod <lws>-<group index>; group 0 is the only group (replicas: 1).
    return f"kubectl logs -f {LWS_NAME}-0 -c jax-tpu -n {namespace}"


def manifests(
    stack: StackPlan,
    *,
    namespace: str,
    service_account: str,
    checkpoint_bucket: str,
    scratch_bucket: str,
    converter_pool: str | None = None,
    meta_url: Any = None,
) -> Sequence[dict[str, Any]]:
    """Every object the workload renders (tests and validation use this; the component registers each)."""
    objs = [
        render_lws(
            stack,
            namespace=namespace,
            service_account=service_account,
            checkpoint_bucket=checkpoint_bucket,
            scratch_bucket=scratch_bucket,
        ),
        render_service(stack, namespace=namespace),
    ]
    if converter_pool is not None:
        objs += [
            render_meta_url_secret(stack, namespace=namespace, url=meta_url),
            render_conversion_job(
                stack,
                namespace=namespace,
                service_account=service_account,
                checkpoint_bucket=checkpoint_bucket,
                node_pool=converter_pool,
            ),
        ]
    return objs


# ---------------------------------------------------------------- network flows (components.render.netpol)


def network_intents(stack: StackPlan) -> tuple[netpol.Intent, ...]:
    """Who reaches the JetStream/Pathways pods, and why (ports come from the rendered objects)."""
    group = netpol.roles("jetstream-leader", "pathways-worker")
    return (
        netpol.Flow(
            "pathways-group",
            to=group,
            ports=netpol.ALL_PORTS,
            sources=(group,),
            why="one LWS group is one Pathways program: workers register with the resource manager on the leader "
            "(--resource_manager_address), the resource manager and IFRT proxy drive the workers' --server_port, and "
            "Pathways and the TPU runtime open ports no container declares (upstream pathways-job declares 29005, "
            "29006, 8471 and 8080 for a worker started with --server_port=29005 only)",
        ),
        netpol.ServiceClients(
            "jetstream-http",
            SERVICE_NAME,
            why="clients of the ClusterIP Service (pods of this namespace; kubectl port-forward needs no rule)",
        ),
    )
