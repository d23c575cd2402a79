"""Kubernetes objects of a disaggregated vLLM stack (``workload.vllm.disaggregation``), as plain dicts.

Two Deployments, each pinned to its role's TPU pool (``disagg.pool_name``):

* ``vllm-prefill`` (component ``vllm-prefill``, ``llm-d.ai/role: prefill``): vLLM on :8000 with the
  KV connector as ``kv_producer``; it listens for the decode servers on ``TPU_KV_TRANSFER_PORT`` and
  ``TPU_SIDE_CHANNEL_PORT`` (set here to tpu-inference's defaults 9100 and 9600, read by
  ``tpu_inference/distributed/utils.py`` ``get_kv_transfer_port``/``get_side_channel_port``) and
  serves the bulk copies on 8 more sockets bound to port 0, so the kernel picks them from its
  ephemeral range (tpu-inference 0.32.0 ``tpu_connector.py``, ``format_host_port(host_ip, 0)``).
* ``vllm-decode`` (component ``vllm-decode``, ``llm-d.ai/role: decode``): llm-d's routing sidecar on
  :8000 (the port the InferencePool targets) in front of vLLM on :8200 (``kv_consumer``). The sidecar
  reads the prefill pod the endpoint picker chose from the request's ``x-prefiller-host-port`` header,
  sends the prompt there first, then lets the local vLLM pull the KV cache and decode.

Both are selected by the InferencePool (``llm-d.ai/inference-serving: "true"``): the picker scores
both roles and its role filters keep each profile to its own. The Service ``vllm`` (ClusterIP, the
benchmark's in-cluster target) selects the decode pods, whose sidecar serves a request without a
prefill header itself. Who reaches what: :func:`network_intents`.
"""

from __future__ import annotations

import json
from typing import Any

from ...catalog.images import image
from ...catalog.tpu import NODEPOOL_LABEL
from ...config.resolve import StackPlan
from ...render import gateway, netpol
from ...render.core import common_labels, tpu_host_resources, with_baseline_security
from ...render.gateway_picker import ROLE_LABEL
from . import render as base
from .disagg import ROLES, Role, connector, pool_name, spec_of
from .engine import server_image
from .spec import settings

SERVING_LABEL = "llm-d.ai/inference-serving"
"""What the InferencePool selects: the serving pods of both roles (llm-d's guides use the same label)."""
ENGINE_PORT, ENGINE_PORT_NAME = 8200, "engine"
"""The decode vLLM's own port behind the sidecar (the sidecar's default ``--model-server-port``)."""
KV_TRANSFER_PORT, KV_SIDE_CHANNEL_PORT = 9100, 9600
KV_PORT_NAMES = ("kv-transfer", "kv-side-channel")
EPHEMERAL_PORTS = (32768, 60999)
"""Linux's default ``net.ipv4.ip_local_port_range``: where the prefill server's port-0 transfer sockets land."""
SIDECAR_IMAGE = "llm-d-router-disagg-sidecar"
SIDECAR_USER = 65532  # USER of llm-d-router's Dockerfile.sidecar (distroless nonroot)
KV_ROLES: dict[Role, str] = {"prefill": "kv_producer", "decode": "kv_consumer"}


def component(role: Role) -> str:
    """The role's ``app.kubernetes.io/component`` (and Deployment name)."""
    return f"{base.NAME}-{role}"


def is_disaggregated(plan: StackPlan) -> bool:
    return spec_of(plan.config) is not None


def kv_transfer_config(plan: StackPlan, role: Role) -> str:
    """vLLM's ``--kv-transfer-config``: the catalog's connector for the model's attention type, this
    role's direction and the pod's address (``$(POD_IP)``, as llm-d's v6e overlay passes ``kv_ip``)."""
    chosen = connector(plan.config)
    fields = {
        "kv_connector": chosen.name,
        "kv_connector_module_path": chosen.module,
        "kv_role": KV_ROLES[role],
        "kv_ip": "$(POD_IP)",
    }
    return json.dumps(fields, separators=(",", ":"))


def role_args(plan: StackPlan, role: Role) -> list[str]:
    """The aggregated server's flags, on the role's port, plus the KV connector's."""
    port = base.PORT if role == "prefill" else ENGINE_PORT
    args = [f"--port={port}" if a == f"--port={base.PORT}" else a for a in base.vllm_args(plan)]
    return [*args, *connector(plan.config).extra_args, "--kv-transfer-config", kv_transfer_config(plan, role)]


def _labels(plan: StackPlan, role: Role) -> dict[str, str]:
    return {**common_labels(plan.config.stack, component(role)), ROLE_LABEL: role, SERVING_LABEL: "true"}


def selector_labels(plan: StackPlan, role: Role) -> dict[str, str]:
    return {"app.kubernetes.io/instance": plan.config.stack, "app.kubernetes.io/component": component(role)}


def _engine_probes(plan: StackPlan, port_name: str) -> dict[str, dict[str, Any]]:
    probes = base.probes(plan)
    return {k: {**v, "httpGet": {**v["httpGet"], "port": port_name}} for k, v in probes.items()}


def _sidecar() -> dict[str, Any]:
    """llm-d-router v0.10.0 ``pd-sidecar``: :8000 to the local vLLM on :8200, in plain HTTP (its
    ``--secure-proxy`` defaults to a self-signed TLS listener, which the gateway's HTTP pool and health
    checks would not speak)."""
    return {
        "name": "routing-sidecar",
        "image": image(SIDECAR_IMAGE).ref,
        "imagePullPolicy": "IfNotPresent",
        "args": [f"--port={base.PORT}", f"--model-server-port={ENGINE_PORT}", "--secure-proxy=false"],
        "ports": [{"name": base.PORT_NAME, "containerPort": base.PORT, "protocol": "TCP"}],
        # The sidecar answers /health itself (always OK), so an HTTP probe would prove nothing: a TCP probe
        # checks that it listens; the pod's readiness for traffic is the vLLM container's own probe.
        "readinessProbe": {"tcpSocket": {"port": base.PORT_NAME}, "periodSeconds": 10},
        "livenessProbe": {"tcpSocket": {"port": base.PORT_NAME}, "periodSeconds": 20, "failureThreshold": 3},
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": SIDECAR_USER,
            "runAsGroup": SIDECAR_USER,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def render_role(plan: StackPlan, role: Role, *, namespace: str, service_account: str, bucket_name: str) -> dict[str, Any]:
    """One role's Deployment on its pool (``cloud.google.com/gke-nodepool``), one server per TPU VM."""
    config = plan.config
    spec = settings(config)
    engine_port = base.PORT_NAME if role == "prefill" else ENGINE_PORT_NAME
    ports = [{"name": engine_port, "containerPort": base.PORT if role == "prefill" else ENGINE_PORT, "protocol": "TCP"}]
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},  # before the args that name it
        base.HF_TOKEN_ENV,
        {"name": "VLLM_XLA_CACHE_PATH", "value": base.XLA_CACHE_PATH},
    ]
    if role == "prefill":
        ports += [
            {"name": KV_PORT_NAMES[0], "containerPort": KV_TRANSFER_PORT, "protocol": "TCP"},
            {"name": KV_PORT_NAMES[1], "containerPort": KV_SIDE_CHANNEL_PORT, "protocol": "TCP"},
        ]
        env += [
            {"name": "TPU_KV_TRANSFER_PORT", "value": str(KV_TRANSFER_PORT)},
            {"name": "TPU_SIDE_CHANNEL_PORT", "value": str(KV_SIDE_CHANNEL_PORT)},
        ]
    server: dict[str, Any] = {
        "name": base.CONTAINER,
        "image": server_image(config),
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": role_args(plan, role),
        "ports": ports,
        "env": env,
        "resources": tpu_host_resources(plan.slice.tpu_per_host),
        # The sidecar answers /health itself: the decode pod is ready when its vLLM is.
        **_engine_probes(plan, engine_port),
        "volumeMounts": [
            {"name": base.MODEL_VOLUME, "mountPath": spec.download_dir},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "xla-cache", "mountPath": base.XLA_CACHE_PATH},
        ],
    }
    pod = base._pod_spec(plan, service_account, bucket_name, server, {"name": "xla-cache", "emptyDir": {}})
    pod["nodeSelector"] = {**pod["nodeSelector"], NODEPOOL_LABEL: pool_name(role)}
    if role == "decode":
        pod["containers"] = [_sidecar(), *pod["containers"]]
    replicas = getattr(spec_of(config), role).replicas
    timeout = base.deployment_timeout_seconds(plan)
    return with_baseline_security(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": component(role),
                "namespace": namespace,
                "labels": common_labels(config.stack, component(role)),
                "annotations": {"pulumi.com/timeoutSeconds": str(timeout)},
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": selector_labels(plan, role)},
                # Each replica fills a TPU VM of a pool sized to the replicas: replace one at a time.
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                "progressDeadlineSeconds": timeout,
                "template": {"metadata": {"labels": _labels(plan, role), "annotations": base.pod_annotations(plan)}, "spec": pod},
            },
        }
    )


def render_servers(plan: StackPlan, *, namespace: str, service_account: str, bucket_name: str) -> list[dict[str, Any]]:
    return [
        render_role(plan, role, namespace=namespace, service_account=service_account, bucket_name=bucket_name) for role in ROLES
    ]


def render_service(plan: StackPlan, *, namespace: str) -> dict[str, Any]:
    """The aggregated stack's Service, selecting the decode pods (their sidecar) instead."""
    service = base.render_service(plan, namespace=namespace)
    return {**service, "spec": {**service["spec"], "selector": selector_labels(plan, "decode")}}


def render_pod_monitorings(plan: StackPlan, *, namespace: str) -> list[dict[str, Any]]:
    """Each role's vLLM ``/metrics`` (decode: the engine's own port, not the sidecar's)."""
    out = []
    for role in ROLES:
        port = base.PORT_NAME if role == "prefill" else ENGINE_PORT_NAME
        out.append(
            {
                "apiVersion": "monitoring.googleapis.com/v1",
                "kind": "PodMonitoring",
                "metadata": {
                    "name": component(role),
                    "namespace": namespace,
                    "labels": common_labels(plan.config.stack, component(role)),
                },
                "spec": {
                    "selector": {"matchLabels": selector_labels(plan, role)},
                    "endpoints": [{"port": port, "path": "/metrics", "interval": base.METRICS_INTERVAL}],
                },
            }
        )
    return out


def gateway_backend(plan: StackPlan) -> gateway.Backend:
    """The pool of both roles; requests land on the decode pods' sidecars, prefill pods serve the picker's prefills."""
    selector = {"app.kubernetes.io/instance": plan.config.stack, SERVING_LABEL: "true"}
    return gateway.Backend(
        base.NAME,
        component("decode"),
        selector,
        base.PORT,
        base.PORT_NAME,
        "/health",
        base.model_id(plan),
        other_roles=(component("prefill"),),
        disaggregated=True,
    )


def network_intents(plan: StackPlan) -> tuple[netpol.Intent, ...]:
    """The gateway's flows to both roles, the scrapes, and decode -> prefill: the sidecar's prefill request
    (:8000) and the KV connector (9100, 9600 and the kernel's ephemeral range for its transfer sockets)."""
    intents = gateway.network_intents(gateway_backend(plan), plan.config.workload.front_door)
    intents += tuple(
        netpol.Scrapes(
            f"{component(role)}-metrics", component(role), why=f"Managed Prometheus scrapes the {role} vLLM's /metrics"
        )
        for role in ROLES
    )
    low, high = EPHEMERAL_PORTS
    intents += (
        netpol.Flow(
            "vllm-kv-transfer",
            to=netpol.roles(component("prefill")),
            ports=netpol.PortNamesAndRange(("http", *KV_PORT_NAMES), low, high),
            sources=(netpol.roles(component("decode")),),
            why="only the decode servers reach the prefill servers: the routing sidecar posts the prompt to :8000, and "
            f"the KV connector pulls the cache from {KV_TRANSFER_PORT} (control), {KV_SIDE_CHANNEL_PORT} (side channel) "
            f"and 8 transfer sockets bound to port 0 (the kernel's ephemeral range, {low}-{high} by default), which no "
            "container port can name",
        ),
    )
    return intents
