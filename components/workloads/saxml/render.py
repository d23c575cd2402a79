"""Saxml on multi-host TPU slices: admin server, JobSet model servers, HTTP server, publish Job.

Pure functions over a ``StackPlan``; every hardware number comes from ``stack.slice`` (hosts, chips
per host, node selector), ``stack.config.tpu.slices`` (model-server replicas = publish replicas) and
``stack.flags["saxml_mesh"]`` (devices one model server spans).

Upstream: GoogleCloudPlatform/kubernetes-engine-samples ``ai-ml/llm-multihost-tpus-saxml``
(``sax-admin-server.yaml``, ``sax-model-server-set.yaml``, ``sax-http.yaml``, commit c6f85f55,
2023-11-28) and google/saxml ``saxml/tools/docker/Dockerfile.admin`` (the admin image reads
``SAX_CELL``, ``PORT``, ``GSBUCKET`` and keeps its state under ``gs://$GSBUCKET/sax-root``).
Deliberate differences from the sample, each for a reason given where it is rendered:

* model servers use pod networking, not ``hostNetwork`` (Workload Identity does not serve
  host-network pods, so they would run as the node's service account instead of the KSA whose
  access is scoped to the bucket); nothing privileged unless asked for;
* ``MEGASCALE_NUM_SLICES`` is set to the slices one model server spans (1), not ``""``;
* a failed model-server Job is recreated alone (JobSet ``RestartJob``), not the whole set;
* the HTTP LoadBalancer is internal by default; the model is published by a Job, not by hand.

The bucket name is the deterministic ``StackConfig.bucket_name`` (a plain string; the component
keeps the dependency on the bucket explicit), and every pod template carries the baseline security
context (``components.render.core.with_baseline_security``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...catalog.models import MODELS
from ...catalog.tpu import NODEPOOL_LABEL
from ...config import naming
from ...config.resolve import StackPlan
from ...policy.checks import PRIVILEGED_TPU_ANNOTATION, PRIVILEGED_TPU_REASON
from ...render import netpol
from ...render.core import (
    INTERNAL_LB_ANNOTATION,
    JOBSET_EXCLUSIVE,
    common_labels,
    slice_replicated_job,
    tpu_host_resources,
    tpu_toleration,
    with_baseline_security,
)
from .spec import settings

JOBSET_API = "jobset.x-k8s.io/v1alpha2"

ADMIN_NAME = "sax-admin-server"
MODEL_SERVER_SET_NAME = "sax-model-server-set"
MODEL_SERVER_JOB_NAME = "sax-model-server"
HTTP_NAME = "sax-http"
HTTP_SERVICE_NAME = "sax-http-lb"
PUBLISH_NAME = "sax-publish"

# The sax-http image serves on 8888 hard-coded (``HTTPServer(('0.0.0.0', 8888), ...)``), so the port is a fact.
HTTP_PORT = 8888
# TPU runtime port the seed declares on the model servers (megascale/slice builder).
TPU_RUNTIME_PORT = 8471
# The admin image appends this to gs://$GSBUCKET; the model and HTTP servers get the same root as SAX_ROOT.
SAX_ROOT_DIR = "sax-root"


# Python module of each Saxml servable class in the model catalog (google/saxml
# saxml/server/pax/lm/params/lm_cloud.py); the class itself comes from the catalog.
SERVABLE_MODULES: Mapping[str, str] = {
    "LmCloudSpmd175B32Test": "saxml.server.pax.lm.params.lm_cloud",
}

# First JobSet release whose API has the RestartJob failure-policy action (its CRD, vendored in
# components/crds/jobset, lists it); older controllers get the default RestartJobSet behaviour.
RESTART_JOB_SINCE = (0, 12, 0)


# Small CPU servers: requests let the scheduler place them; no CPU limit (throttling a Go/Python
# control-plane server only adds latency), memory left unlimited because usage is not documented.
CPU_SERVER_REQUESTS = {"cpu": "250m", "memory": "512Mi"}


# ---------------------------------------------------------------- derived values


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def model_id(stack: StackPlan) -> str:
    """The published model id, ``<cell>/<model>`` (e.g. ``/sax/test/spmd``)."""
    spec = settings(stack.config)
    return f"{spec.cell}/{spec.publish.model}"


def model_path(stack: StackPlan) -> str:
    """The servable the planner verified, as Saxml's dotted model path."""
    arch = MODELS[stack.config.workload.model]
    servable = arch.saxml_servable
    if servable is None or servable not in SERVABLE_MODULES:
        raise ValueError(
            f"{arch.name} has no Saxml servable module in components/workloads/saxml/render.py SERVABLE_MODULES "
            f"(servable {servable!r}); add the module of its params class"
        )
    return f"{SERVABLE_MODULES[servable]}.{servable}"


def publish_replicas(stack: StackPlan) -> int:
    """Model-server replicas the model is published with: one per slice."""
    return stack.config.tpu.slices


def slices_per_model_server(stack: StackPlan) -> int:
    """Slices one model server spans: the servable's mesh devices over the chips of one slice.

    The planner only accepts a Saxml mesh whose product equals the slice's chips, so this is 1: each
    model server is a single-slice program and the slices are independent replicas, not one
    multislice job. The seed's ``MEGASCALE_NUM_SLICES: ""`` meant exactly that ("GKE is not running
    multi-slice training"); an empty value is not a number, so the value is written out.
    """
    mesh = stack.flags["saxml_mesh"]
    devices = math.prod(int(d) for d in mesh)
    chips = stack.slice.chips
    if devices % chips:
        raise ValueError(f"Saxml mesh {mesh} ({devices} devices) is not a whole number of {stack.slice.key} slices")
    return devices // chips


def platform_chip(stack: StackPlan) -> str:
    spec = settings(stack.config)
    return spec.platform_chip or f"tpu{stack.slice.generation.name}"


def sax_root(bucket_name: str) -> str:
    """``gs://<bucket>/sax-root``: the cell's state, where the admin image keeps it (``GSBUCKET``)."""
    return f"gs://{bucket_name}/{SAX_ROOT_DIR}"


def http_address(namespace: str) -> str:
    """In-cluster address of the HTTP server (the LoadBalancer Service also has a cluster IP)."""
    return f"{HTTP_SERVICE_NAME}.{namespace}.svc.cluster.local:{HTTP_PORT}"


def _selector(stack: StackPlan, component: str) -> dict[str, str]:
    labels = common_labels(stack.config.stack, component)
    return {k: labels[k] for k in ("app.kubernetes.io/instance", "app.kubernetes.io/component")}


def _meta(stack: StackPlan, name: str, namespace: str, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": common_labels(stack.config.stack, component)}


def _no_escalation() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False}


# ---------------------------------------------------------------- objects


def _cpu_server(
    stack: StackPlan, name: str, *, namespace: str, service_account: str, container: dict[str, Any]
) -> dict[str, Any]:
    """A one-replica Deployment of a Saxml CPU server (admin or HTTP) on the system pool."""
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(stack, name, namespace, name),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": _selector(stack, name)},
            "template": {
                "metadata": {"labels": common_labels(stack.config.stack, name)},
                "spec": {
                    "serviceAccountName": service_account,
                    "nodeSelector": {NODEPOOL_LABEL: naming.SYSTEM_POOL},
                    "containers": [
                        {
                            "name": name,
                            **container,
                            "resources": {"requests": dict(CPU_SERVER_REQUESTS)},
                            # The sample runs the admin privileged; CPU servers that talk gRPC, HTTP
                            # and GCS need nothing.
                            "securityContext": _no_escalation(),
                        }
                    ],
                },
            },
        },
    }
    return with_baseline_security(deployment)


def render_admin_server(stack: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> dict[str, Any]:
    """Admin server Deployment: one replica on the CPU system pool, state in the stack's bucket."""
    spec = settings(stack.config)
    deployment = _cpu_server(
        stack,
        ADMIN_NAME,
        namespace=namespace,
        service_account=service_account,
        container={
            "image": spec.admin_server_image,
            "env": [
                {"name": "GSBUCKET", "value": bucket_name},
                {"name": "SAX_CELL", "value": spec.cell},
                {"name": "PORT", "value": str(spec.admin_port)},
            ],
            "ports": [{"name": "admin", "containerPort": spec.admin_port, "protocol": "TCP"}],
            "readinessProbe": {"tcpSocket": {"port": spec.admin_port}, "periodSeconds": 10, "failureThreshold": 3},
        },
    )
    # Two admin servers of one cell must never overlap: the old one stops before the new starts.
    deployment["spec"]["strategy"] = {"type": "Recreate"}
    return deployment


def _model_server_pod_metadata(stack: StackPlan, component: str, *, privileged: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": common_labels(stack.config.stack, component)}
    if privileged:
        # The policy pack refuses privileged pods, except TPU containers of a pod that says why.
        metadata["annotations"] = {PRIVILEGED_TPU_ANNOTATION: PRIVILEGED_TPU_REASON}
    return metadata


def render_model_servers(stack: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> dict[str, Any]:
    """One JobSet: a replicated Job per slice (one Saxml model server each), one pod per TPU host."""
    spec = settings(stack.config)
    tpu = stack.slice
    component = MODEL_SERVER_JOB_NAME
    failure_policy: dict[str, Any] = {"maxRestarts": spec.max_restarts}
    if version_tuple(stack.config.controllers.jobset_version) >= RESTART_JOB_SINCE:
        # Slices are independent replicas: recreate only the failed slice's Job, so the other
        # replicas keep serving (the default restarts every Job of the set).
        failure_policy["rules"] = [
            {"name": "restartFailedModelServer", "action": "RestartJob", "targetReplicatedJobs": [MODEL_SERVER_JOB_NAME]}
        ]
    security: dict[str, Any] = {"privileged": True} if spec.model_server_privileged else _no_escalation()
    container = {
        "name": MODEL_SERVER_JOB_NAME,
        "image": spec.model_server_image,
        "args": [
            f"--port={spec.model_server_port}",
            f"--sax_cell={spec.cell}",
            f"--platform_chip={platform_chip(stack)}",
        ],
        "env": [
            {"name": "SAX_ROOT", "value": sax_root(bucket_name)},
            {"name": "MEGASCALE_NUM_SLICES", "value": str(slices_per_model_server(stack))},
        ],
        "ports": [
            {"name": "model-server", "containerPort": spec.model_server_port, "protocol": "TCP"},
            {"name": "tpu-runtime", "containerPort": TPU_RUNTIME_PORT, "protocol": "TCP"},
        ],
        "resources": tpu_host_resources(tpu.tpu_per_host),
        "securityContext": security,
    }
    jobset: dict[str, Any] = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            **_meta(stack, MODEL_SERVER_SET_NAME, namespace, component),
            "annotations": {JOBSET_EXCLUSIVE: NODEPOOL_LABEL},
        },
        "spec": {
            "failurePolicy": failure_policy,
            "replicatedJobs": [
                slice_replicated_job(
                    MODEL_SERVER_JOB_NAME,
                    slices=stack.config.tpu.slices,
                    hosts=tpu.hosts,
                    pod_template={
                        "metadata": _model_server_pod_metadata(stack, component, privileged=spec.model_server_privileged),
                        "spec": {
                            "serviceAccountName": service_account,
                            "restartPolicy": "Never",
                            "nodeSelector": dict(tpu.node_selector),
                            "tolerations": [tpu_toleration()],
                            "containers": [container],
                        },
                    },
                )
            ],
        },
    }
    return with_baseline_security(jobset)


def render_http_server(stack: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> dict[str, Any]:
    """HTTP server Deployment (finds the admin through SAX_ROOT) on the CPU system pool."""
    spec = settings(stack.config)
    return _cpu_server(
        stack,
        HTTP_NAME,
        namespace=namespace,
        service_account=service_account,
        container={
            "image": spec.http_server_image,
            "env": [{"name": "SAX_ROOT", "value": sax_root(bucket_name)}],
            "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
            # GET / answers without touching the cell, so readiness means "serving HTTP".
            "readinessProbe": {"httpGet": {"path": "/", "port": HTTP_PORT}, "periodSeconds": 10, "failureThreshold": 3},
        },
    )


def render_http_service(stack: StackPlan, *, namespace: str) -> dict[str, Any]:
    """LoadBalancer Service on 8888; internal (VPC-only) unless the stack opts out."""
    spec = settings(stack.config)
    meta = _meta(stack, HTTP_SERVICE_NAME, namespace, HTTP_NAME)
    if spec.internal_load_balancer:
        meta["annotations"] = {INTERNAL_LB_ANNOTATION: "Internal"}
    service_spec: dict[str, Any] = {
        "type": "LoadBalancer",
        "selector": _selector(stack, HTTP_NAME),
        "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP"}],
        **netpol.load_balanced_service_fields(stack.config.cluster.dataplane),
    }
    if spec.load_balancer_source_ranges:
        service_spec["loadBalancerSourceRanges"] = list(spec.load_balancer_source_ranges)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": service_spec}


# Idempotent publish (POSIX sh + curl). listcell first: published as wanted -> done; same model
# path and checkpoint but other replicas -> update; another model path or checkpoint -> exit 3
# (never unpublish on the user's behalf). Not listed -> publish; "already exists" (a race) or an
# unreachable admin (still starting) -> retry until the Job's deadline. Exact request shapes of
# the sax-http server: listcell takes exactly {model}, publish/update exactly four keys.
PUBLISH_SCRIPT = r"""set -u
base="http://${SAX_HTTP_ADDRESS}"
id="{\"model\": \"${SAX_MODEL}\"}"
spec="{\"model\": \"${SAX_MODEL}\", \"model_path\": \"${SAX_MODEL_PATH}\","
spec="${spec} \"checkpoint\": \"${SAX_CHECKPOINT}\", \"replicas\": ${SAX_REPLICAS}}"
req() { curl -sS --fail-with-body --max-time 120 -X "$1" -H 'Content-Type: application/json' --data "$3" "${base}$2" 2>&1; }
conflict() {
  echo "${SAX_MODEL} is published with another model path or checkpoint: $1"
  echo "unpublish it first (stack output saxml_unpublish_command), then run pulumi up again"
  exit 3
}
until curl -sS -f -o /dev/null --max-time 10 "${base}/"; do echo "waiting for ${base}"; sleep 5; done
while :; do
  if listing=$(req GET /listcell "$id"); then
    flat=$(printf '%s' "$listing" | tr -d ' \r\n')
    case "$flat" in *"\"model_path\":\"${SAX_MODEL_PATH}\""*) ;; *) conflict "$listing" ;; esac
    case "$flat" in *"\"checkpoint\":\"${SAX_CHECKPOINT}\""*) ;; *) conflict "$listing" ;; esac
    case "$flat" in
      *"\"max_replicas\":${SAX_REPLICAS},"* | *"\"max_replicas\":${SAX_REPLICAS}}"*)
        echo "already published as wanted: ${listing}"
        exit 0 ;;
    esac
    if out=$(req PUT /update "$spec"); then echo "updated: ${out}"; exit 0; fi
    echo "update failed, retrying: ${out}"
  elif out=$(req POST /publish "$spec"); then
    echo "published: ${out}"
    exit 0
  else
    echo "not published yet, retrying: ${out}"
  fi
  sleep 10
done
"""

PUBLISH_CONFLICT_EXIT = 3


def render_publish_job(stack: StackPlan, *, namespace: str) -> dict[str, Any]:
    """Job that publishes the model once the HTTP server answers; idempotent, so reruns are safe."""
    spec = settings(stack.config)
    publish = spec.publish
    component = PUBLISH_NAME
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(stack, PUBLISH_NAME, namespace, component),
        "spec": {
            "activeDeadlineSeconds": publish.timeout_seconds,
            # Transient pod loss is retried; a conflicting publication is not (exit 3 fails the Job).
            "backoffLimit": 2,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": PUBLISH_NAME,
                            "operator": "In",
                            "values": [PUBLISH_CONFLICT_EXIT],
                        },
                    }
                ]
            },
            "template": {
                "metadata": {"labels": common_labels(stack.config.stack, component)},
                "spec": {
                    "restartPolicy": "Never",
                    # Talks only to the HTTP server; no Google or Kubernetes API access needed.
                    "automountServiceAccountToken": False,
                    "nodeSelector": {NODEPOOL_LABEL: naming.SYSTEM_POOL},
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65534,
                        "runAsGroup": 65534,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": PUBLISH_NAME,
                            "image": publish.image,
                            "command": ["/bin/sh", "-c"],
                            "args": [PUBLISH_SCRIPT],
                            "env": [
                                {"name": "SAX_HTTP_ADDRESS", "value": http_address(namespace)},
                                {"name": "SAX_MODEL", "value": model_id(stack)},
                                {"name": "SAX_MODEL_PATH", "value": model_path(stack)},
                                {"name": "SAX_CHECKPOINT", "value": publish.checkpoint},
                                {"name": "SAX_REPLICAS", "value": str(publish_replicas(stack))},
                            ],
                            # sh + curl on small JSON bodies; the limit bounds a runaway loop (checkov CKV_K8S_13).
                            "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                },
            },
        },
    }
    return with_baseline_security(job)


@dataclass(frozen=True)
class SaxmlObjects:
    admin_server: dict[str, Any]
    model_servers: dict[str, Any]
    http_server: dict[str, Any]
    http_service: dict[str, Any]
    publish_job: dict[str, Any] | None

    def all(self) -> list[dict[str, Any]]:
        objs = [self.admin_server, self.model_servers, self.http_server, self.http_service]
        return objs + ([self.publish_job] if self.publish_job is not None else [])


def render_saxml(stack: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> SaxmlObjects:
    """Every Saxml object of the stack."""
    ns, ksa = namespace, service_account
    publish = settings(stack.config).publish
    return SaxmlObjects(
        admin_server=render_admin_server(stack, namespace=ns, service_account=ksa, bucket_name=bucket_name),
        model_servers=render_model_servers(stack, namespace=ns, service_account=ksa, bucket_name=bucket_name),
        http_server=render_http_server(stack, namespace=ns, service_account=ksa, bucket_name=bucket_name),
        http_service=render_http_service(stack, namespace=namespace),
        publish_job=render_publish_job(stack, namespace=namespace) if publish.enabled else None,
    )


# ---------------------------------------------------------------- network flows (components.render.netpol)


def network_intents(stack: StackPlan) -> tuple[netpol.Intent, ...]:
    """Who reaches the Saxml pods, and why (ports come from the rendered objects, by port name)."""
    intents: list[netpol.Intent] = [
        netpol.Flow(
            "sax-admin",
            to=netpol.roles(ADMIN_NAME),
            ports=netpol.PortNames(("admin",)),
            sources=(netpol.roles(MODEL_SERVER_JOB_NAME, HTTP_NAME),),
            why="model servers join the cell at the admin server; the HTTP server's Sax client looks models up and "
            "publishes through it (both find its address in the cell's location file under SAX_ROOT)",
        ),
        netpol.Flow(
            "sax-model-server",
            to=netpol.roles(MODEL_SERVER_JOB_NAME),
            ports=netpol.PortNames(("model-server",)),
            sources=(netpol.roles(ADMIN_NAME, HTTP_NAME),),
            why="the admin server loads published models onto the model servers; the HTTP server's Sax client sends "
            "requests straight to them",
        ),
        netpol.Flow(
            "sax-model-server-peers",
            to=netpol.roles(MODEL_SERVER_JOB_NAME),
            ports=netpol.ALL_PORTS,
            sources=(netpol.roles(MODEL_SERVER_JOB_NAME),),
            why="the hosts of a slice run one SPMD program: the TPU runtime (8471), the JAX coordinator on worker 0 "
            "(8476) and ports the runtime picks itself",
        ),
        netpol.ServiceClients(
            "sax-http",
            HTTP_SERVICE_NAME,
            why="clients of the internal load balancer: the Service's source ranges (every address outside the cluster "
            "without them), whose addresses arrive unchanged (externalTrafficPolicy: Local); in-cluster callers by label",
        ),
    ]
    if settings(stack.config).publish.enabled:
        intents.append(
            netpol.Flow(
                "sax-publish",
                to=netpol.roles(HTTP_NAME),
                ports=netpol.PortNames(("http",)),
                sources=(netpol.roles(PUBLISH_NAME),),
                why="the publish Job calls the HTTP server (SAX_HTTP_ADDRESS) to publish the model",
            )
        )
    return tuple(intents)
