"""Kubernetes objects of the vLLM workload, as plain dicts (pure functions, no Pulumi).

Facts from the upstream manifests (GoogleCloudPlatform/kubernetes-engine-samples
``ai-ml/llm-serving-tpu/vllm``: ``vllm-llama3-70b.yaml``, ``vllm_pod_monitor.yaml``, ``vllm-hpa.yaml``;
GKE tutorial serve-vllm-tpu) with their known flaws fixed:

* image pinned to a release instead of ``vllm/vllm-tpu:latest``;
* the GCS FUSE file cache is actually enabled with an explicit size (``file-cache:max-size-mb``
  non-zero makes the sidecar mount its cache dir on the ``gke-gcsfuse-cache`` volume, which is
  memory-backed here and sized to hold the cache; an unbounded ``-1`` fills the volume until writes
  fail) and reads of memory-mapped safetensors go through it (``cache-file-for-range-read``);
* startup/readiness/liveness on ``/health`` sized for a 70B first load instead of a 15 s TCP check;
* the XLA compilation cache is per pod (GKE's tutorial warns that two replicas writing
  ``VLLM_XLA_CACHE_PATH`` on the bucket fail with "cannot create directories");
* ``spec.replicas`` is left to the HPA when it exists, so ``pulumi up`` never fights it.

The HPA reads its metric through GKE's AutoscalingMetric or, on older clusters, the Custom Metrics
Stackdriver Adapter, a cluster add-on the kind opts into (``components.workloads.vllm.autoscaling``).

Clients (endpoint command, curl, benchmark) are in ``components.workloads.vllm.clients``; the gateway
front door (``workload.frontDoor.type: gateway``) in ``components.render.gateway``.

On a multi-host slice the server is a LeaderWorkerSet instead (:func:`render_lws`, see its docstring
and README "Multi-host (LWS + Ray)"): one group per slice, group size = hosts.

Every pod template carries the baseline security context (``components.render.core.with_baseline_security``);
the bucket is named by its deterministic ``StackConfig.bucket_name`` (the component depends on it).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ...catalog.tpu import NODEPOOL_LABEL
from ...config.resolve import StackPlan
from ...render import gateway, netpol
from ...render.core import (
    AUTH_ANNOTATION,
    AUTH_PATHS_ANNOTATION,
    INTERNAL_LB_ANNOTATION,
    LWS_EXCLUSIVE,
    OPEN_PATHS_ANNOTATION,
    common_labels,
    tpu_host_resources,
    tpu_toleration,
    with_baseline_security,
)
from . import autoscaling
from .engine import server_image
from .spec import (
    API_KEY_OPEN_PATHS,
    API_KEY_PATHS,
    max_num_seqs,
    pool_nodes,
    settings,
)

PORT = 8000
PORT_NAME = "http"
NAME = "vllm"
LWS_NAME = "vllm-group"
"""The multi-host LeaderWorkerSet: never the API Service's name (LWS owns a headless Service of its own name)."""
CONTAINER = "vllm"
SECRET_NAME = "hf-token"
SECRET_KEY = "token"
API_KEY_SECRET_NAME = "vllm-api-key"
API_KEY_ENV = "VLLM_API_KEY"  # read by vLLM when --api-key is not given (vllm.envs), so no argv

MODEL_VOLUME = "gcs-fuse-csi-ephemeral"
CACHE_VOLUME = "gke-gcsfuse-cache"  # the name the GCS FUSE sidecar looks for (webhook SidecarContainerCacheVolumeName)
XLA_CACHE_PATH = "/xla-cache"
CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
METRICS_INTERVAL = "15s"  # upstream vllm_pod_monitor.yaml
CACHE_VOLUME_HEADROOM = 1.05  # tmpfs a little above the cache size: gcsfuse evicts at the size, not below it
ROLLOUT_SLACK_SECONDS = 1800  # TPU node scale-up and a ~10 GB image pull before the startup budget starts

WORKER = "vllm-worker"
"""Component label of the multi-host LWS workers (Ray workers, no server): selected by no Service
and no PodMonitoring, only by the Ray group's NetworkPolicy."""
LWS_API = "leaderworkerset.x-k8s.io/v1"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""Set by the LWS controller on every pod of a group; "0" is the leader (lws docs, "Labels")."""
"""One LWS group per value of the named node label (lws docs, "Exclusive placement"): a group per slice."""
RAY_PORT = 6379  # Ray GCS port of the head (vllm examples/online_serving/multi-node-serving.sh ray_port)
RAY_JOIN_TIMEOUT_SECONDS = 1800  # workers start before the leader's Ray head; upstream's script waits 300 s
RAY_ENV: tuple[tuple[str, str], ...] = (
    # tpu-inference examples/offload/gke/benchmarks/multi-host/deploy-baseline.yaml (leader and workers):
    # TPU_MULTIHOST_BACKEND's only choice is ray (tpu_inference/envs.py); the Ray health-check and
    # heartbeat knobs are raised so XLA compiles and weight loads of minutes do not mark hosts dead.
    ("TPU_MULTIHOST_BACKEND", "ray"),
    ("RAY_RESERVE_CPU_FOR_RAYLET", "1"),
    ("RAY_health_check_failure_threshold", "100"),
    ("RAY_health_check_timeout_ms", "20000"),
    ("RAY_health_check_period_ms", "10000"),
    ("RAY_num_heartbeats_timeout", "300000"),
    ("RAY_raylet_heartbeat_timeout_milliseconds", "3000000"),
    ("RAY_grpc_keepalive_timeout_ms", "3000000"),
    ("RAY_CGRAPH_get_timeout", "30000"),
    ("RAY_CGRAPH_submit_timeout", "30000"),
)
# The leader: vllm's examples/online_serving/multi-node-serving.sh "leader" (start the Ray head, wait
# until the group's hosts are alive), then the server with the container's args ("$@"), as
# tpu-inference's deploy-baseline.yaml runs it. Inlined rather than calling the script, whose path
# inside the image is not part of any release's contract.
VLLM_CONFIG_ROOT = "/tmp/vllm-config"  # vllm.envs VLLM_CONFIG_ROOT: where the leader writes the list below
RAY_NON_CARRY_OVER = ("VLLM_XLA_CACHE_PATH",)
"""Variables vLLM's Ray executor must not copy from the leader to the workers. It copies every
``VLLM_*`` variable of the driver to each worker (vllm/ray/ray_env.py ``get_env_vars_to_copy``, used
by tpu-inference's ``executors/ray_distributed_executor.py``) except those listed in
``$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json``; copied, the leader's compile-cache directory
would replace each worker's own, and eight hosts would write one directory on the bucket."""
LEADER_SCRIPT = f"""set -eu
mkdir -p "$VLLM_CONFIG_ROOT"
echo '{json.dumps(list(RAY_NON_CARRY_OVER))}' > "$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json"
ray start --head --port={RAY_PORT}
alive() {{
  python3 -c 'import ray; ray.init(address="auto", logging_level="ERROR"); print(sum(n["Alive"] for n in ray.nodes()))'
}}
waited=0
until [ "$(alive)" -ge "$LWS_GROUP_SIZE" ]; do
  [ "$waited" -lt {RAY_JOIN_TIMEOUT_SECONDS} ] || {{ echo "Ray workers missing after {RAY_JOIN_TIMEOUT_SECONDS} s" >&2; exit 1; }}
  sleep 5; waited=$((waited + 5))
done
exec python3 -m vllm.entrypoints.openai.api_server "$@"
"""
# A worker: multi-node-serving.sh "worker" (join the head, retrying while it starts; --block keeps
# the container alive as long as the Ray node is).
WORKER_SCRIPT = f"""set -u
waited=0
until ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}" --block; do
  [ "$waited" -lt {RAY_JOIN_TIMEOUT_SECONDS} ] || {{ echo "no Ray head at $LWS_LEADER_ADDRESS:{RAY_PORT}" >&2; exit 1; }}
  sleep 5; waited=$((waited + 5))
done
"""


def selector_labels(stack: str) -> dict[str, str]:
    """The stable subset of the labels that Service, PodMonitoring and Deployment select on."""
    return {"app.kubernetes.io/instance": stack, "app.kubernetes.io/component": NAME}


def multi_host(plan: StackPlan) -> bool:
    """A multi-host slice: the server is a LeaderWorkerSet (one group per slice) instead of a Deployment."""
    return plan.slice.multi_host


def server_selector(plan: StackPlan) -> dict[str, str]:
    """What the Service selects: the server pods; on a multi-host slice the LWS leaders only (the
    workers run Ray, no server), by the worker-index label LWS gives a group's leader."""
    labels = selector_labels(plan.config.stack)
    return {**labels, WORKER_INDEX_LABEL: "0"} if multi_host(plan) else labels


def deployment_timeout_seconds(plan: StackPlan) -> int:
    """How long a rollout may take: node scale-up and image pull plus the server's startup budget."""
    return settings(plan.config).probes.startup_timeout_seconds + ROLLOUT_SLACK_SECONDS


def rolling_update(plan: StackPlan) -> dict[str, int]:
    """Each replica fills a whole TPU VM. Surge into a spare node only when the pools can always hold
    one more replica than the most that can run; otherwise the surge pod would stay Pending at full
    scale and the rollout would never finish, so replace one replica at a time instead."""
    _, pool_max = pool_nodes(plan.config)
    _, most = replicas(plan)
    if most < pool_max:
        return {"maxSurge": 1, "maxUnavailable": 0}
    return {"maxSurge": 0, "maxUnavailable": 1}


def replicas(plan: StackPlan) -> tuple[int, int]:
    return settings(plan.config).replica_bounds(plan.config)


def model_id(plan: StackPlan) -> str:
    found = settings(plan.config).hf_model(plan.config.workload.model, plan.config.workload.weights)
    if found is None:  # StackConfig rejects this at load time
        raise ValueError(f"no Hugging Face repository for {plan.config.workload.model}")
    return found


def vllm_args(plan: StackPlan) -> list[str]:
    """Server flags in upstream's order; TP (and PP) from the capacity plan, lengths from the workload."""
    config = plan.config
    spec = settings(config)
    parallel = [f"--tensor-parallel-size={plan.flags['tensor_parallel_size']}"]
    if "pipeline_parallel_size" in plan.flags:  # multi-host (one stage per host), or pinned on one host
        # tpu-inference docs/includes/parallelism.md: PP passes single-host and multi-host.
        parallel.append(f"--pipeline-parallel-size={plan.flags['pipeline_parallel_size']}")
    if multi_host(plan):
        # Stages are Ray actors on the group's hosts (vLLM engine arg; TPU_MULTIHOST_BACKEND=ray).
        parallel.append("--distributed-executor-backend=ray")
    args = [
        "--host=0.0.0.0",
        f"--port={PORT}",
        *parallel,
        f"--max-model-len={config.workload.max_target_length}",
        f"--model={model_id(plan)}",
        f"--download-dir={spec.download_dir}",
    ]
    if config.workload.kv_cache == "fp8":
        # vLLM engine arg --kv-cache-dtype (docs.vllm.ai engine args: auto, fp8, fp8_e4m3, fp8_e5m2);
        # Google's TPU vLLM recipes pass this value (AI-Hypercomputer/tpu-recipes inference/*/vLLM).
        args.append("--kv-cache-dtype=fp8")
    if spec.max_num_batched_tokens is not None:
        args.append(f"--max-num-batched-tokens={spec.max_num_batched_tokens}")
    args.append(f"--max-num-seqs={max_num_seqs(config)}")
    # The HBM share vLLM may claim is what the capacity plan leaves beside its reserve (workload.reserveFraction,
    # else the planner's 0.10), so the KV pool the engine allocates is the one the serving model sizes.
    memory = plan.capacity.memory
    args.append(f"--gpu-memory-utilization={round(1 - memory.reserve / memory.hbm, 4):g}")
    return args


def fuse_mount_options(plan: StackPlan) -> str:
    """gcsfuse flags of the model volume: a bounded file cache, used for range reads, filled in parallel."""
    fuse = settings(plan.config).gcs_fuse
    cache_mb = settings(plan.config).file_cache_gi(
        plan.config.workload.model, plan.config.workload.weights, plan.slice.machine_type
    ) * 1024
    return ",".join(
        [
            "implicit-dirs",
            f"file-cache:max-size-mb:{cache_mb}",
            # safetensors are memory-mapped (random reads); without this they bypass the cache.
            "file-cache:cache-file-for-range-read:true",
            "file-cache:enable-parallel-downloads:true",
            f"file-cache:parallel-downloads-per-file:{fuse.parallel_downloads_per_file}",
            "file-cache:max-parallel-downloads:-1",
            f"file-cache:download-chunk-size-mb:{fuse.download_chunk_size_mb}",
        ]
    )


def cache_volume_size(plan: StackPlan) -> str:
    gi = settings(plan.config).file_cache_gi(
        plan.config.workload.model, plan.config.workload.weights, plan.slice.machine_type
    )
    return f"{math.ceil(gi * CACHE_VOLUME_HEADROOM)}Gi"


def pod_annotations(plan: StackPlan) -> dict[str, str]:
    fuse = settings(plan.config).gcs_fuse
    return {
        # Injects the GCS FUSE sidecar (the CSI driver's webhook keys on this annotation).
        "gke-gcsfuse/volumes": "true",
        # Parallel downloads of multi-GB shards are CPU-bound; "0" lifts the 250m default.
        "gke-gcsfuse/cpu-limit": "0",
        # The sidecar writes the RAM cache, and tmpfs pages count against its memory: a limit would OOM it.
        "gke-gcsfuse/memory-limit": "0",
        "gke-gcsfuse/ephemeral-storage-limit": f"{fuse.sidecar_ephemeral_storage_gi}Gi"
        if fuse.sidecar_ephemeral_storage_gi
        else "0",
    }


def _probe(path: str, *, period: int, failures: int, timeout: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def probes(plan: StackPlan) -> dict[str, dict[str, Any]]:
    """vLLM answers /health only once the engine has loaded and compiled: the startup probe carries the
    whole first-load budget; readiness and liveness only start after it succeeds."""
    budget = settings(plan.config).probes.startup_timeout_seconds
    period = 10
    return {
        "startupProbe": _probe("/health", period=period, failures=math.ceil(budget / period), timeout=5),
        "readinessProbe": _probe("/health", period=period, failures=3, timeout=5),
        # A restart costs a full reload, so only a server unhealthy for 2 minutes is restarted.
        "livenessProbe": _probe("/health", period=30, failures=4, timeout=10),
    }


def _secret(name: str, stack: str, namespace: str, value: Any) -> dict[str, Any]:
    """A one-key Opaque Secret (``value`` is a secret Output in Pulumi; offline, a placeholder)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": common_labels(stack, NAME)},
        "type": "Opaque",
        "stringData": {SECRET_KEY: value},
    }


def render_api_key_secret(stack: str, namespace: str, key: Any) -> dict[str, Any]:
    """The endpoint's API key, read by vLLM as ``VLLM_API_KEY``."""
    return _secret(API_KEY_SECRET_NAME, stack, namespace, key)


def render_hf_secret(stack: str, namespace: str, token: Any) -> dict[str, Any]:
    """The Hugging Face token, read by vLLM as ``HF_TOKEN``."""
    return _secret(SECRET_NAME, stack, namespace, token)


def render_deployment(plan: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> dict[str, Any]:
    """The vLLM server: one pod per single-host slice, weights read through the GCS FUSE bucket volume."""
    config = plan.config
    stack = config.stack
    spec = settings(config)
    labels = common_labels(stack, NAME)
    timeout = deployment_timeout_seconds(plan)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": server_image(config),
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": vllm_args(plan),
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "env": [HF_TOKEN_ENV, _env("VLLM_XLA_CACHE_PATH", XLA_CACHE_PATH), *_api_key_env(plan)],
        "resources": tpu_host_resources(plan.slice.tpu_per_host),
        **probes(plan),
        "volumeMounts": [
            {"name": MODEL_VOLUME, "mountPath": spec.download_dir},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "xla-cache", "mountPath": XLA_CACHE_PATH},
        ],
    }
    deployment_spec: dict[str, Any] = {
        "selector": {"matchLabels": selector_labels(stack)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling_update(plan)},
        "progressDeadlineSeconds": timeout,
        "template": {
            "metadata": {"labels": labels, "annotations": pod_annotations(plan)},
            # The compile cache is per pod here (an emptyDir): Deployment pods have no stable name.
            "spec": _pod_spec(plan, service_account, bucket_name, container, {"name": "xla-cache", "emptyDir": {}}),
        },
    }
    if not spec.autoscaling.enabled:
        deployment_spec = {"replicas": replicas(plan)[0], **deployment_spec}
    return with_baseline_security(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": NAME,
                "namespace": namespace,
                "labels": labels,
                # pulumi-kubernetes waits for the rollout; the default 10 minutes is shorter than a 70B load.
                "annotations": {"pulumi.com/timeoutSeconds": str(timeout)},
            },
            "spec": deployment_spec,
        }
    )


def _env(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


HF_TOKEN_ENV = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": SECRET_KEY}}}


def _api_key_env(plan: StackPlan) -> list[dict[str, Any]]:
    """The API key for the server (``VLLM_API_KEY`` from its Secret) when the endpoint authenticates."""
    if settings(plan.config).service.auth != "api-key":
        return []
    return [{"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": API_KEY_SECRET_NAME, "key": SECRET_KEY}}}]


def _pod_spec(
    plan: StackPlan, service_account: str, bucket_name: str, container: dict[str, Any], *extra_volumes: dict[str, Any]
) -> dict[str, Any]:
    """A vLLM pod on a TPU host (Deployment replica, LWS leader or worker): the slice's node selector and
    toleration, the RAM file cache, shared memory, ``extra_volumes``, and the bucket through GCS FUSE."""
    return {
        "serviceAccountName": service_account,
        "nodeSelector": dict(plan.slice.node_selector),
        "tolerations": [tpu_toleration()],
        "containers": [container],
        "volumes": [
            {"name": CACHE_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": cache_volume_size(plan)}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            *extra_volumes,
            {
                "name": MODEL_VOLUME,
                "csi": {
                    "driver": CSI_DRIVER,
                    "volumeAttributes": {"bucketName": bucket_name, "mountOptions": fuse_mount_options(plan)},
                },
            },
        ],
    }


def render_lws(plan: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> dict[str, Any]:
    """The multi-host server: a LeaderWorkerSet with one group per slice, group size = hosts.

    Upstream pattern: tpu-inference ``examples/offload/gke/benchmarks/multi-host/deploy-baseline.yaml``
    and kubernetes-sigs/lws ``docs/examples/vllm/``: the leader starts the Ray head and ``vllm serve``,
    the workers join the head at ``$(LWS_LEADER_ADDRESS)``. Kept from the Deployment: the pinned image,
    the GCS FUSE bucket volume with its RAM file cache, the Hugging Face token and API key Secrets,
    the probes (leader only: only it serves), the TPU toleration and node selector from the slice.
    Changed: the XLA compile cache is persistent on the bucket, one directory per pod
    (``<downloadDir>/xla-cache/<pod>``; LWS pod names are stable across restarts, and no two pods write
    one directory, the failure GKE's tutorial warns about; the leader keeps vLLM's Ray executor from
    handing its directory to the workers, :data:`RAY_NON_CARRY_OVER`).
    """
    config = plan.config
    stack = config.stack
    spec = settings(config)
    tpu = plan.slice
    common_env = [
        # The pod's own name, for its compile-cache directory (stable per LWS pod).
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        _env("VLLM_XLA_CACHE_PATH", f"{spec.download_dir}/xla-cache/$(POD_NAME)"),
        _env("VLLM_CONFIG_ROOT", VLLM_CONFIG_ROOT),
        *(_env(k, v) for k, v in RAY_ENV),
        HF_TOKEN_ENV,
    ]
    resources = tpu_host_resources(plan.slice.tpu_per_host)
    mounts = [{"name": MODEL_VOLUME, "mountPath": spec.download_dir}, {"name": "dshm", "mountPath": "/dev/shm"}]

    leader: dict[str, Any] = {
        "name": CONTAINER,
        "image": server_image(config),
        "command": ["/bin/bash", "-c", LEADER_SCRIPT, "vllm-leader"],
        "args": vllm_args(plan),
        "ports": [
            {"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"},
            {"name": "ray-gcs", "containerPort": RAY_PORT, "protocol": "TCP"},
        ],
        "env": [*common_env, *_api_key_env(plan)],
        "resources": resources,
        **probes(plan),
        "volumeMounts": mounts,
    }
    worker: dict[str, Any] = {
        "name": "ray-worker",
        "image": server_image(config),
        "command": ["/bin/bash", "-c", WORKER_SCRIPT],
        "env": common_env,
        "resources": resources,
        "volumeMounts": mounts,
    }
    leader_labels = {**common_labels(stack, NAME), WORKER_INDEX_LABEL: "0"}
    lws: dict[str, Any] = {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {
            # Not NAME: LWS creates a headless Service named after the LWS (its pods' DNS names, e.g.
            # $LWS_LEADER_ADDRESS) unless one exists, and the API Service is NAME.
            "name": LWS_NAME,
            "namespace": namespace,
            "labels": common_labels(stack, NAME),
            # One group per slice: a group's pods land on one node pool (the slice's hosts).
            "annotations": {LWS_EXCLUSIVE: NODEPOOL_LABEL},
        },
        "spec": {
            "replicas": config.tpu.slices,
            # The leader's server holds Ray actors on every host: a restarted pod leaves the others
            # with a broken pipeline, so the whole group restarts (llm-d's TPU LWS recipes do the same;
            # deploy-baseline.yaml's None suits a benchmark run, not a service).
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": tpu.hosts,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {"labels": leader_labels, "annotations": pod_annotations(plan)},
                    "spec": _pod_spec(plan, service_account, bucket_name, leader),
                },
                "workerTemplate": {
                    "metadata": {"labels": common_labels(stack, WORKER), "annotations": pod_annotations(plan)},
                    "spec": _pod_spec(plan, service_account, bucket_name, worker),
                },
            },
        },
    }
    return with_baseline_security(lws)


def render_server(plan: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> dict[str, Any]:
    """The server object for the slice: a LeaderWorkerSet on a multi-host slice, else the Deployment."""
    render = render_lws if multi_host(plan) else render_deployment
    return render(plan, namespace=namespace, service_account=service_account, bucket_name=bucket_name)


def render_service(plan: StackPlan, *, namespace: str) -> dict[str, Any]:
    stack = plan.config.stack
    service = settings(plan.config).service
    # Pulumi waits for the Service's endpoints, i.e. for a ready vLLM pod: give it the same budget
    # as the Deployment's first load, not the 10-minute default.
    annotations = {"pulumi.com/timeoutSeconds": str(deployment_timeout_seconds(plan))}
    behind_gateway = plan.config.workload.front_door.gateway  # the gateway is the load balancer: ClusterIP
    if service.type == "internal" and not behind_gateway:
        annotations[INTERNAL_LB_ANNOTATION] = "Internal"
    if service.auth != "none":
        annotations[AUTH_ANNOTATION] = service.auth
        annotations[AUTH_PATHS_ANNOTATION] = ",".join(API_KEY_PATHS)
        annotations[OPEN_PATHS_ANNOTATION] = ",".join(API_KEY_OPEN_PATHS)
    metadata: dict[str, Any] = {
        "name": NAME,
        "namespace": namespace,
        "labels": common_labels(stack, NAME),
        "annotations": annotations,
    }
    spec: dict[str, Any] = {
        "type": "ClusterIP" if behind_gateway else "LoadBalancer",
        "selector": server_selector(plan),
        "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
        **({} if behind_gateway else netpol.load_balanced_service_fields(plan.config.cluster.dataplane)),
    }
    if service.source_ranges and not behind_gateway:
        spec["loadBalancerSourceRanges"] = list(service.source_ranges)
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def gateway_backend(plan: StackPlan) -> gateway.Backend:
    """What the gateway front door fronts: the Service's pods (multi-host: the LWS leaders only)."""
    return gateway.Backend(NAME, NAME, server_selector(plan), PORT, PORT_NAME, "/health", model_id(plan))


def render_pod_monitoring(plan: StackPlan, *, namespace: str) -> dict[str, Any]:
    stack = plan.config.stack
    return {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": NAME, "namespace": namespace, "labels": common_labels(stack, NAME)},
        "spec": {
            "selector": {"matchLabels": selector_labels(stack)},
            # By name, so Managed Prometheus also records the container label.
            "endpoints": [{"port": PORT_NAME, "path": "/metrics", "interval": METRICS_INTERVAL}],
        },
    }


def render_hpa(plan: StackPlan, *, namespace: str) -> dict[str, Any]:
    """The HPA; its metric comes through the adapter or an AutoscalingMetric (``autoscaling.render_hpa``)."""
    low, high = replicas(plan)
    labels = common_labels(plan.config.stack, NAME)
    return autoscaling.render_hpa(plan, namespace=namespace, low=low, high=high, labels=labels)


def render_autoscaling_metric(plan: StackPlan, *, namespace: str) -> dict[str, Any]:
    """The AutoscalingMetric the HPA reads with ``via: autoscalingMetric`` (``autoscaling.render_autoscaling_metric``)."""
    labels, selector = common_labels(plan.config.stack, NAME), selector_labels(plan.config.stack)
    return autoscaling.render_autoscaling_metric(plan, namespace=namespace, selector=selector, labels=labels)


# ---------------------------------------------------------------- network flows (components.render.netpol)


def network_intents(plan: StackPlan) -> tuple[netpol.Intent, ...]:
    """Who reaches the vLLM pods, and why (ports come from the Service and the PodMonitoring). Behind the
    gateway the ClusterIP Service admits no client of its own: the gateway's flows replace it."""
    front_door = plan.config.workload.front_door
    gateway_flows = gateway.network_intents(gateway_backend(plan), front_door) if front_door.gateway else ()
    intents: tuple[netpol.Intent, ...] = gateway_flows or (
        netpol.ServiceClients(
            "vllm-api",
            NAME,
            why="clients of the internal load balancer: the Service's source ranges (every address outside the cluster "
            "without them), whose addresses arrive unchanged (externalTrafficPolicy: Local); no pod of the cluster",
        ),
    )
    intents += (netpol.Scrapes("vllm-metrics", NAME, why="Managed Prometheus scrapes /metrics for the HPA's metric"),)
    if multi_host(plan):
        group = netpol.roles(NAME, WORKER)
        intents += (
            netpol.Flow(
                "ray-group",
                to=group,
                ports=netpol.ALL_PORTS,
                sources=(group,),
                why="leader and workers of one LWS group are one Ray cluster: workers join the head's GCS "
                f"({RAY_PORT}), and raylets, object managers and the pipeline stages' actors talk on ports Ray picks at "
                "start (KubeRay's own NetworkPolicy allows every port within a RayCluster for the same reason)",
            ),
        )
    return intents
