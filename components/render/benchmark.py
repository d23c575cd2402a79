"""The benchmark Job of a serving stack (``workload.serving.benchmark: true``), as plain dicts.

After ``up``, the engine's own benchmark client runs once against the deployed server with the
stack's scenario (input/output tokens, concurrency) and writes to the stack's bucket, under
``benchmarks/<stack>/<job uid>/``:

* ``client.json`` — the client's own result file (vLLM: ``vllm bench serve --save-result``);
* ``scenario.json`` — the scenario, the slice, the server flags, the image and, when the planner
  predicted them, the predicted figures (what the measurement is compared against);
* ``engine-version.txt`` — the engine version the image actually reports.

What is engine-specific (image, client argv, secrets it reads, the server's Service and health
path) comes from the kind's render module as a :class:`BenchmarkClient`; everything else is here:

* runs on the CPU system pool only (``nodeSelector`` on the pool, no TPU toleration: TPU nodes carry
  the ``google.com/tpu`` NoSchedule taint), so it never takes a TPU host;
* an init container polls the server's health endpoint through its Service, bounded by the server's
  own startup budget, so the client starts against a ready server;
* its own KubernetesServiceAccount (``<server>-benchmark``), whose only Google access is a
  conditional object role on the ``benchmarks/<stack>/`` prefix of the bucket
  (``components.workloads.serving_benchmark``), mounted with GCS FUSE restricted to that prefix (``only-dir``);
* non-root (65534), read-only root filesystem, no capabilities, no Kubernetes API token; caches and
  scratch on ``emptyDir`` volumes;
* no ``ttlSecondsAfterFinished``: a Job the cluster garbage-collects is re-created, and so re-run, by
  the next ``pulumi up --refresh`` (components/workloads/jetstream/render.py keeps its Job for the
  same reason). Re-running is explicit: ``pulumi up --replace <the Job's URN>``.

Pure functions; no Pulumi import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..catalog.tpu import NODEPOOL_LABEL
from ..config import naming
from ..config.resolve import StackPlan
from ..config.workload import ServingSpec
from . import netpol
from .core import common_labels, render_service_account, with_baseline_security

ROLE = "benchmark"
"""``app.kubernetes.io/component`` of the benchmark pod (the NetworkPolicy's source)."""
RESULTS_MOUNT = "/results"
RESULTS_VOLUME = "benchmark-results"
SCRATCH_MOUNT = "/scratch"
CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
RUN_AS = 65534
"""``nobody``: the client needs no privilege, and the bucket mount is owned by this UID (uid/gid mount options)."""
CLIENT_RESULT_FILE = "client.json"
SCENARIO_FILE = "scenario.json"
VERSION_FILE = "engine-version.txt"
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
"""Set by the Job controller on every pod of a Job (Kubernetes 1.27+, "Well-Known Labels": batch.kubernetes.io/controller-uid)."""
READY_POLL_SECONDS = 10
READY_REQUEST_TIMEOUT_SECONDS = 5
"""Timeout of one health request; counted against the startup budget like the polls' sleeps."""
BACKOFF_LIMIT = 1
"""One retry: a lost pod (node drain) is retried; a second failure is a real problem to read in the logs,
not to repeat against the server."""
PROMPTS_PER_SLOT = 10
"""Requests per concurrency slot: each slot serves ten requests, so the steady state dominates the
first wave's prefill burst and the last wave's drain."""
MIN_PROMPTS = 200
"""At least this many requests, so percentiles (p99) rest on more than a handful of samples."""


@dataclass(frozen=True)
class BenchmarkClient:
    """What a serving kind supplies for its benchmark: the engine's own client and the server it targets."""

    engine: str
    """Engine name written with the results (``vllm``)."""
    image: str
    """Image the client runs from: the server's own pinned image, so client and server are one release."""
    args: tuple[str, ...]
    """The client's argv. May use ``$(RESULT_DIR)``, ``$(CLIENT_RESULT_FILE)`` (expanded by the kubelet)."""
    version_command: str
    """A shell command that prints the engine version the image carries."""
    service: str
    """Name of the server's Service in the workload namespace."""
    port: int
    """The Service port the client calls."""
    port_name: str
    """Name of the server's container port behind it (the NetworkPolicy opens this port only)."""
    health_path: str
    """HTTP path that answers 200 once the server serves."""
    server_role: str
    """``app.kubernetes.io/component`` of the server pods (the NetworkPolicy's target)."""
    ready_timeout_seconds: int
    """How long the init container waits for the server: its own startup budget."""
    bucket: str
    """Key (under ``gke-tpu-llm:buckets``) of the stack's bucket the results go to."""
    server_objects: tuple[Mapping[str, Any], ...]
    """The server's rendered objects (its pod templates and ports), which the NetworkPolicy is compiled against."""
    secret_env: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Environment variables the client reads secrets from -> (Secret name, key). The Secrets are
    mounted as files and exported by the container's script, so no secret is in the pod spec's
    environment (checkov CKV_K8S_35) or on a command line."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Engine facts recorded in ``scenario.json`` (model, server flags)."""


def job_name(client: BenchmarkClient) -> str:
    """Deterministic: one benchmark Job per serving stack, named after its server."""
    return f"{client.service}-benchmark"


def service_account_name(client: BenchmarkClient) -> str:
    return f"{client.service}-benchmark"


def results_prefix(stack: str) -> str:
    """Object prefix of the stack's results in its bucket (each run is a ``<job uid>/`` below it)."""
    return f"benchmarks/{stack}/"


def num_prompts(scenario: ServingSpec) -> int:
    """Requests one run sends: ``PROMPTS_PER_SLOT`` per concurrency slot, at least ``MIN_PROMPTS``."""
    return max(scenario.concurrency * PROMPTS_PER_SLOT, MIN_PROMPTS)


def server_url(service: str, port: int, namespace: str) -> str:
    """A server through its Service's cluster DNS name (in-cluster: no load balancer in the path)."""
    return f"http://{service}.{namespace}.svc.cluster.local:{port}"


PREDICTED_KEYS = (
    "output_tokens_per_s",
    "ttft_ms",
    "tpot_ms",
    "hbm_floor_ms",
    "concurrency",
    "max_concurrent_sequences",
    "concurrency_limited_by",
    "step_token_budget_binds",
    "usd_per_million_output_tokens",
    "calibrated",
)
"""The planner's figures recorded beside a measurement (``components.planner.perf.ServingEstimate.to_dict``)."""


def predicted_figures(plan: StackPlan) -> dict[str, Any] | None:
    """The planner's prediction for the deployed slice and scenario (``StackPlan.serving``), or None."""
    for estimate in plan.serving:
        if estimate.plan.slice == plan.slice:
            figures = estimate.to_dict()
            return {key: figures[key] for key in PREDICTED_KEYS}
    return None


def scenario_record(plan: StackPlan, scenario: ServingSpec, client: BenchmarkClient) -> dict[str, Any]:
    """What ``scenario.json`` holds: enough to turn the measurement into a calibration entry."""
    tpu = plan.slice
    return {
        "stack": plan.config.stack,
        "engine": client.engine,
        "image": client.image,
        "model": plan.config.workload.model,
        "slice": {
            "key": tpu.key,
            "generation": tpu.generation.name,
            "topology": tpu.topology,
            "machineType": tpu.machine_type,
            "chips": tpu.chips,
            "hosts": tpu.hosts,
            "slices": plan.config.tpu.slices,
        },
        "scenario": scenario.model_dump(by_alias=True, exclude={"benchmark"}),
        "numPrompts": num_prompts(scenario),
        "predicted": predicted_figures(plan),
        **dict(client.extra),
    }


def _wait_script(client: BenchmarkClient, namespace: str) -> str:
    """Poll the health endpoint with the image's own Python (no extra image), bounded by the
    server's startup budget: a monotonic deadline ends the wait (each poll's request timeout counts
    against it, so the attempts alone are only an upper bound), and the exit message reports the
    seconds actually waited."""
    budget = client.ready_timeout_seconds
    attempts = max(1, -(-budget // READY_POLL_SECONDS))
    timeout = min(READY_REQUEST_TIMEOUT_SECONDS, READY_POLL_SECONDS)
    url = f"{server_url(client.service, client.port, namespace)}{client.health_path}"
    return (
        "import sys, time, urllib.request\n"
        "start = time.monotonic()\n"
        f"for attempt in range({attempts}):\n"
        "    try:\n"
        f"        with urllib.request.urlopen({url!r}, timeout={timeout}) as response:\n"
        "            if response.status == 200:\n"
        "                sys.exit(0)\n"
        "    except OSError as error:\n"
        "        print(f'server not ready ({error})', flush=True)\n"
        f"    if time.monotonic() - start + {READY_POLL_SECONDS} > {budget}:\n"
        "        break\n"
        f"    time.sleep({READY_POLL_SECONDS})\n"
        f"sys.exit(f'server not ready after {{time.monotonic() - start:.0f}} s (startup budget {budget} s)')\n"
    )


SECRETS_MOUNT = "/secrets"
SECRET_FILE_MODE = 0o440
"""Readable by the pod's group (``fsGroup``) only."""

RUN_SCRIPT = f"""set -eu
mkdir -p "$RESULT_DIR"
printf '%s\\n' "$BENCHMARK_SCENARIO" > "$RESULT_DIR/{SCENARIO_FILE}"
sh -c "$VERSION_COMMAND" > "$RESULT_DIR/{VERSION_FILE}"
for file in {SECRETS_MOUNT}/*; do
  if [ -f "$file/value" ]; then export "$(basename "$file")=$(cat "$file/value")"; fi
done
exec "$@"
"""
"""The container's script: scenario and version first (so a failed run still says what it was), then the client."""


def _secret_volume(env: str) -> str:
    return f"secret-{env.lower().replace('_', '-')}"


def _env(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


def render_job(
    plan: StackPlan,
    scenario: ServingSpec,
    client: BenchmarkClient,
    *,
    namespace: str,
    bucket_name: str,
) -> dict[str, Any]:
    """The benchmark Job (see the module docstring)."""
    stack = plan.config.stack
    labels = common_labels(stack, ROLE)
    resources = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}
    security = {"runAsNonRoot": True, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    scratch = {"name": "scratch", "mountPath": SCRATCH_MOUNT}
    home_env = [
        # The root filesystem is read-only: home, caches and the tokenizer download go to the scratch volume.
        _env("HOME", SCRATCH_MOUNT),
        _env("XDG_CACHE_HOME", f"{SCRATCH_MOUNT}/.cache"),
        _env("HF_HOME", f"{SCRATCH_MOUNT}/huggingface"),
        _env("TMPDIR", SCRATCH_MOUNT),
    ]
    wait = {
        "name": "wait-for-server",
        "image": client.image,
        "command": ["python3", "-c", _wait_script(client, namespace)],
        "env": home_env,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": dict(security),
        "volumeMounts": [scratch],
    }
    container = {
        "name": ROLE,
        "image": client.image,
        "command": ["/bin/sh", "-c", RUN_SCRIPT, ROLE],
        "args": list(client.args),
        "env": [
            # The run's directory: the Job's uid, from the label the Job controller sets on its pods.
            {"name": "RUN_ID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_UID_LABEL}']"}}},
            _env("RESULT_DIR", f"{RESULTS_MOUNT}/$(RUN_ID)"),
            _env("CLIENT_RESULT_FILE", CLIENT_RESULT_FILE),
            _env("BENCHMARK_SCENARIO", json.dumps(scenario_record(plan, scenario, client), sort_keys=True)),
            _env("VERSION_COMMAND", client.version_command),
            *home_env,
        ],
        "resources": resources,
        "securityContext": dict(security),
        "volumeMounts": [
            scratch,
            {"name": RESULTS_VOLUME, "mountPath": RESULTS_MOUNT},
            *(
                {"name": _secret_volume(env), "mountPath": f"{SECRETS_MOUNT}/{env}", "readOnly": True}
                for env in sorted(client.secret_env)
            ),
        ],
    }
    mount_options = ",".join(
        [
            f"only-dir={results_prefix(stack).rstrip('/')}",  # the mount sees the stack's results prefix only
            f"uid={RUN_AS}",
            f"gid={RUN_AS}",
            # No hierarchical-namespace probe at mount: it lists the whole bucket, which the prefix
            # condition does not allow (the stack's buckets are flat, so nothing is lost). Options of the
            # form key=value reach gcsfuse as --key=value (gcs-fuse-csi-driver
            # pkg/sidecar_mounter/sidecar_mounter_config.go prepareMountArgs).
            "enable-hns=false",
        ]
    )
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(client),
            "namespace": namespace,
            "labels": labels,
            # pulumi up does not wait for (or fail on) the run: the benchmark is a measurement, not part
            # of the deployment; `kubectl wait` follows it (the vLLM kind's README, "Benchmark after up").
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "template": {
                "metadata": {
                    "labels": labels,
                    # The GCS FUSE CSI driver's webhook injects its sidecar on this annotation.
                    "annotations": {"gke-gcsfuse/volumes": "true"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": service_account_name(client),
                    "nodeSelector": {NODEPOOL_LABEL: naming.SYSTEM_POOL},
                    "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS},
                    "initContainers": [wait],
                    "containers": [container],
                    "volumes": [
                        {"name": "scratch", "emptyDir": {"sizeLimit": "4Gi"}},
                        {
                            "name": RESULTS_VOLUME,
                            "csi": {
                                "driver": CSI_DRIVER,
                                "volumeAttributes": {"bucketName": bucket_name, "mountOptions": mount_options},
                            },
                        },
                        *(
                            {
                                "name": _secret_volume(env),
                                "secret": {
                                    "secretName": secret,
                                    "items": [{"key": key, "path": "value"}],
                                    "defaultMode": SECRET_FILE_MODE,
                                },
                            }
                            for env, (secret, key) in sorted(client.secret_env.items())
                        ),
                    ],
                },
            },
        },
    }
    return with_baseline_security(job)


def render_benchmark_service_account(client: BenchmarkClient, namespace: str, *, stack: str) -> dict[str, Any]:
    """The benchmark's own KSA (no Google service account: its bucket role names the KSA's principal)."""
    return render_service_account(service_account_name(client), namespace, stack=stack)


def network_intents(client: BenchmarkClient) -> tuple[netpol.Intent, ...]:
    """The one flow the benchmark adds: its pod reaches the server's serving port (nothing else, and
    nothing reaches the benchmark pod: the namespace's default deny covers it). By its labels: the
    load balancer's policy admits addresses outside the cluster only, never a pod
    (``components.render.netpol``)."""
    return (
        netpol.Flow(
            "benchmark",
            to=netpol.roles(client.server_role),
            ports=netpol.PortNames((client.port_name,)),
            sources=(netpol.roles(ROLE),),
            why=f"the benchmark Job's client calls the server's {client.port_name} port with the stack's scenario",
        ),
    )


def render_network_policies(
    job: Mapping[str, Any], client: BenchmarkClient, *, namespace: str, stack: str
) -> list[dict[str, Any]]:
    """The benchmark's allow policy, compiled against the server's rendered pods and the Job's (the
    namespace's default deny already exists: the kind registers it)."""
    policies = netpol.render_network_policies(
        [*client.server_objects, job], network_intents(client), namespace=namespace, stack=stack
    )
    return [p for p in policies if p["metadata"]["name"] != netpol.DEFAULT_DENY]


def iam_condition(bucket_name: str, stack: str) -> dict[str, str]:
    """The condition on the benchmark's bucket role: objects under its prefix, and listing that prefix.

    Cloud Storage IAM Conditions (cloud.google.com/storage/docs/access-control/iam#conditions):
    ``resource.name`` of an object is ``projects/_/buckets/<bucket>/objects/<name>``; a list request
    is checked against the bucket, with the requested prefix in the API attribute
    ``storage.googleapis.com/objectListPrefix``.
    """
    prefix = results_prefix(stack)
    return {
        "title": "benchmark results only",
        "description": f"objects under {prefix} of this bucket",
        "expression": (
            f'resource.name.startsWith("projects/_/buckets/{bucket_name}/objects/{prefix}") || '
            f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{prefix}")'
        ),
    }
