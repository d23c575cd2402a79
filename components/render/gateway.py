"""The GKE Inference Gateway front door of a serving stack (``workload.frontDoor.type: gateway``), as
plain dicts (pure functions, no Pulumi).

What a request crosses: the ``Gateway`` (a regional Envoy-based Application Load Balancer: internal
``gke-l7-rilb`` on HTTP :80, or public ``gke-l7-regional-external-managed`` on HTTPS :443 only, behind
Identity-Aware Proxy), the ``HTTPRoute`` to the ``InferencePool``, whose endpoint picker (EPP, an Envoy
``ext_proc`` service) picks the model-server pod by queue depth, KV-cache use and cached prefixes,
then that pod. Optionally a body-based router copies the request body's ``model`` into the
``X-Gateway-Model-Name`` header the route matches, so several models can share one gateway.

The objects mirror llm-d/llm-d-router v0.10.0's ``llm-d-router-gateway`` chart with ``provider.name:
gke`` (:data:`EPP_CHART`; templates ``config/charts/routerlib/templates/{_inferencepool,_config,
_deployment,_service,_rbac}.yaml`` and ``llm-d-router-gateway/templates/{gke,httproute,rbac}.yaml``),
with deliberate differences, each said where it is made: the pinned image instead of ``:main``, the
security baseline, resources that fit the system pool, the backend timeout derived from the scenario
instead of a fixed 300 s, and an explicit picker. Body-based routing mirrors GAIE v1.5.0's
``config/charts/body-based-routing`` (its last release before BBR moved to
llm-d/llm-d-inference-payload-processor).
Who may reach what: :func:`network_intents` (compiled by ``components.render.netpol``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..catalog.images import image
from ..config.front_door import GATEWAY_CLASS, HEALTH_CHECK_RANGES, FrontDoorSpec, backend_timeout
from . import netpol
from .core import common_labels, with_baseline_security
from .gateway_picker import endpoint_picker_config

if TYPE_CHECKING:
    from ..config.resolve import StackPlan


@dataclass(frozen=True)
class UpstreamChart:
    """The Helm chart a set of rendered objects mirrors (not installed), and its image's row in images.json."""

    chart: str
    version: str
    image: str


EPP_CHART = UpstreamChart("oci://ghcr.io/llm-d/charts/llm-d-router-gateway", "v0.10.0", "llm-d-router-endpoint-picker")
"""llm-d-router v0.10.0 (71f4f0999f95b96c49a9d0c4afbd18dfdb943c26): the EPP's home since GAIE v1.6.0."""
BBR_CHART = UpstreamChart(
    "oci://registry.k8s.io/gateway-api-inference-extension/charts/body-based-routing", "v1.5.0", "gaie-body-based-router"
)
"""GAIE v1.5.0 (df9f8909fe06fe2dfd4a6fc0bd0c01a0acabf849) ``config/charts/body-based-routing``."""

GATEWAY_API, GKE_NETWORKING_API = "gateway.networking.k8s.io/v1", "networking.gke.io/v1"
INFERENCE_GROUP = "inference.networking.k8s.io"
INFERENCE_API = f"{INFERENCE_GROUP}/v1"
EPP_EXT_PROC_PORT = 9002  # Envoy ext_proc (gRPC); the InferencePool's endpointPickerRef port
EPP_HEALTH_PORT = 9003  # gRPC health; GKE health-checks the EPP backend here by default (chart gke.yaml comment)
EPP_METRICS_PORT = 9090
EPP_USER = 65532  # USER of llm-d-router's Dockerfile.epp (distroless nonroot)
BBR_NAME, BBR_PORT, BBR_HEALTH_PORT = "body-based-router", 9004, 9005
MODEL_HEADER = "X-Gateway-Model-Name"
"""The header the body-based router writes from the body's ``model`` (GKE "Configure body-based routing")."""



@dataclass(frozen=True)
class Backend:
    """The model servers the gateway fronts, as the kind renders them."""

    name: str
    """Base of every object name (``vllm`` -> Gateway ``vllm-gateway``, pool ``vllm``, EPP ``vllm-epp``)."""
    role: str
    """``app.kubernetes.io/component`` of the serving pods (multi-host: the leaders')."""
    selector: Mapping[str, str]
    """Labels that select exactly the serving pods (multi-host: the leaders only)."""
    port: int
    port_name: str
    health_path: str
    model: str
    """The served model's name (the OpenAI ``model`` of a request): what body-based routing matches."""
    other_roles: tuple[str, ...] = ()
    """Further components the pool selects (disaggregated vLLM: the prefill pods beside the decode ones)."""
    disaggregated: bool = False
    """The picker chooses a prefill and a decode pod (``gateway_picker.endpoint_picker_config``)."""

    @property
    def gateway(self) -> str:
        return f"{self.name}-gateway"

    @property
    def epp(self) -> str:
        return f"{self.name}-epp"

    @property
    def iap_secret(self) -> str:
        return f"{self.name}-iap-client"


def certificate_name(stack: str) -> str:
    """The regional Certificate Manager certificate the public listener serves (created by the platform,
    Google-managed with a DNS authorization for ``frontDoor.hostname``)."""
    return f"{stack}-gateway"


def stack_backend_timeout(plan: StackPlan) -> tuple[int, str]:
    """:func:`backend_timeout` of a resolved stack: its scenario and the chosen slice's prediction."""
    workload = plan.config.workload
    scenario, estimate = workload.serving, (plan.serving[0] if plan.serving else None)
    return backend_timeout(
        workload.front_door,
        output_tokens=scenario.output_tokens if scenario else None,
        ttft_ms=estimate.ttft_ms if estimate else None,
        tpot_ms=estimate.tpot_ms if estimate else None,
        max_target_length=workload.max_target_length,
    )


# ---------------------------------------------------------------- Gateway, route, pool, policies


def _meta(name: str, namespace: str, stack: str, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": common_labels(stack, component)}


def render_gateway(backend: Backend, front_door: FrontDoorSpec, *, namespace: str, stack: str) -> dict[str, Any]:
    """Internal: one HTTP :80 listener. Public: one HTTPS :443 listener only, terminating TLS with the
    regional Certificate Manager certificate (GKE "Secure a Gateway": a regional Gateway names it in the
    listener's ``tls.options`` ``networking.gke.io/cert-manager-certs``; certificate maps are for the
    global class), so no request reaches the route in clear text."""
    if front_door.public:
        listener: dict[str, Any] = {
            "name": "https",
            "protocol": "HTTPS",
            "port": 443,
            "hostname": front_door.hostname,
            "tls": {"mode": "Terminate", "options": {"networking.gke.io/cert-manager-certs": certificate_name(stack)}},
        }
    else:
        listener = {"name": "http", "protocol": "HTTP", "port": 80}
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": _meta(backend.gateway, namespace, stack, "gateway"),
        "spec": {"gatewayClassName": GATEWAY_CLASS[front_door.exposure], "listeners": [listener]},
    }


def render_http_route(backend: Backend, front_door: FrontDoorSpec, *, namespace: str, stack: str) -> dict[str, Any]:
    """Every path to the pool (with body-based routing: only requests whose ``model`` is the served one).
    No ``timeouts``: on GKE the backend timeout is the GCPBackendPolicy's (the chart omits them for gke)."""
    match: dict[str, Any] = {"path": {"type": "PathPrefix", "value": "/"}}
    if front_door.body_based_routing:
        match["headers"] = [{"type": "Exact", "name": MODEL_HEADER, "value": backend.model}]
    spec: dict[str, Any] = {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": backend.gateway}],
        "rules": [
            {
                "matches": [match],
                "backendRefs": [{"group": INFERENCE_GROUP, "kind": "InferencePool", "name": backend.name}],
            }
        ],
    }
    if front_door.public:
        spec["hostnames"] = [front_door.hostname]
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": _meta(backend.name, namespace, stack, "gateway"),
            "spec": spec}


def render_inference_pool(backend: Backend, *, namespace: str, stack: str) -> dict[str, Any]:
    """The serving pods (multi-host: the LWS leaders, by ``backend.selector``) as one pool. FailOpen as
    both upstream charts set it: with the picker down the gateway still balances over the pool."""
    return {
        "apiVersion": INFERENCE_API,
        "kind": "InferencePool",
        "metadata": _meta(backend.name, namespace, stack, "gateway"),
        "spec": {
            "selector": {"matchLabels": dict(backend.selector)},
            "targetPorts": [{"number": backend.port}],
            "appProtocol": "http",
            "endpointPickerRef": {"name": backend.epp, "port": {"number": EPP_EXT_PROC_PORT}, "failureMode": "FailOpen"},
        },
    }


def _pool_ref(backend: Backend) -> dict[str, str]:  # the policies' single targetRef
    return {"group": INFERENCE_GROUP, "kind": "InferencePool", "name": backend.name}


def render_health_check_policy(backend: Backend, *, namespace: str, stack: str) -> dict[str, Any]:
    """The load balancer's health check of the pool: the server's own ``/health`` on its port, every 2 s
    with a 2 s timeout (the chart's values, faster than GKE's 5 s to switch over during EPP rollouts)."""
    return {
        "apiVersion": GKE_NETWORKING_API,
        "kind": "HealthCheckPolicy",
        "metadata": _meta(backend.name, namespace, stack, "gateway"),
        "spec": {
            "targetRef": _pool_ref(backend),
            "default": {
                "timeoutSec": 2,
                "checkIntervalSec": 2,
                "config": {"type": "HTTP", "httpHealthCheck": {"requestPath": backend.health_path, "port": backend.port}},
            },
        },
    }


def render_backend_policy(
    backend: Backend, front_door: FrontDoorSpec, timeout_sec: int, *, namespace: str, stack: str, iap_client_id: Any = None
) -> dict[str, Any]:
    """The pool's backend service: the derived timeout, request logging (the chart's), and on the public
    form Identity-Aware Proxy with the stack's OAuth client (``iap.clientID`` and the Secret holding the
    client secret: GKE's GCPBackendPolicy CRD, "If true, the ClientID and Oauth2ClientSecret fields must be
    non-empty"). One policy per target: IAP goes into the same policy as the timeout."""
    default: dict[str, Any] = {"timeoutSec": timeout_sec, "logging": {"enabled": True}}
    if front_door.public:
        default["iap"] = {"enabled": True, "clientID": iap_client_id, "oauth2ClientSecret": {"name": backend.iap_secret}}
    return {
        "apiVersion": GKE_NETWORKING_API,
        "kind": "GCPBackendPolicy",
        "metadata": _meta(backend.name, namespace, stack, "gateway"),
        "spec": {"targetRef": _pool_ref(backend), "default": default},
    }


IAP_SECRET_KEY = "secret"  # the key GKE's IAP-for-Gateway samples use (not confirmed from the page itself)


def render_iap_secret(backend: Backend, *, namespace: str, stack: str, client_secret: Any) -> dict[str, Any]:
    """The IAP OAuth client secret (``client_secret`` is a secret Output in Pulumi; offline, a placeholder)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(backend.iap_secret, namespace, stack, "gateway"),
        "type": "Opaque",
        "stringData": {IAP_SECRET_KEY: client_secret},
    }


# ---------------------------------------------------------------- the endpoint picker


EPP_CONFIG_FILE = "default-plugins.yaml"


def _grpc_probe(port: int, **timing: int) -> dict[str, Any]:
    return {"grpc": {"port": port, "service": "inference-extension"}, **timing}


def _restricted(container: dict[str, Any], user: int) -> dict[str, Any]:
    """A static Go binary's container: non-root by number, no capabilities, a read-only root."""
    return {
        **container,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": user,
            "runAsGroup": user,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _identity(name: str, namespace: str, stack: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ServiceAccount, Role (``rules``) and RoleBinding of a pod that reads the Kubernetes API."""
    meta = _meta(name, namespace, stack, name)
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": False},
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
        },
    ]


def _deployment(name: str, namespace: str, stack: str, container: dict[str, Any], **pod: Any) -> dict[str, Any]:
    """One replica of a CPU pod that keeps its API token (it watches the API), with the security baseline."""
    spec = {"serviceAccountName": name, "automountServiceAccountToken": True, "containers": [_restricted(container, EPP_USER)]}
    return with_baseline_security(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(name, namespace, stack, name),
            "spec": {
                "replicas": 1,
                **pod.pop("deployment", {}),
                "selector": {"matchLabels": _pick(stack, name)},
                "template": {"metadata": {"labels": common_labels(stack, name)}, "spec": {**spec, **pod}},
            },
        }
    )


def _pick(stack: str, name: str) -> dict[str, str]:  # the stable labels a Deployment and its Service select
    return {"app.kubernetes.io/instance": stack, "app.kubernetes.io/component": name}


def render_epp(backend: Backend, *, namespace: str, stack: str) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding, ConfigMap, Deployment, Service and PodMonitoring of the picker.

    From the chart: one replica with ``Recreate`` (the prefix-cache scorer's index is per process, so
    two active pickers would each see half the prefixes), its args, ports, gRPC probes and 130 s grace.
    Differences: the pinned image (:data:`EPP_CHART`) instead of ``main`` with ``pullPolicy: Always``;
    requests of 1 CPU and 2 GiB (memory limit 4 GiB) instead of 8 CPU and 8 GiB, because the picker runs
    on the system pool (e2-standard-4 by default) and scores a handful of TPU replicas, not a GPU fleet;
    ``--metrics-endpoint-auth=false`` because its NetworkPolicy admits only Managed Prometheus to
    :data:`EPP_METRICS_PORT` (the chart's auth would need a cluster-wide TokenReview role). One Role
    (the chart has two) covering pods and the pool it watches, and the InferenceObjectives it reads
    when present. The pod keeps its API token: it watches pods and the pool."""
    name = backend.epp
    pick = _pick(stack, name)
    config = _meta(name, namespace, stack, name)
    container = {
        "name": "epp",
        "image": image(EPP_CHART.image).ref,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "--pool-name", backend.name,
            "--pool-namespace", namespace,
            "--pool-group", INFERENCE_GROUP,
            "--zap-encoder", "json",
            "--config-file", f"/config/{EPP_CONFIG_FILE}",
            "--grpc-health-port", str(EPP_HEALTH_PORT),
            "--tracing=false",
            "--metrics-endpoint-auth=false",
        ],
        "ports": [
            {"name": "grpc", "containerPort": EPP_EXT_PROC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": _grpc_probe(EPP_HEALTH_PORT, initialDelaySeconds=5, periodSeconds=10),
        "readinessProbe": _grpc_probe(EPP_HEALTH_PORT, periodSeconds=2),
        "env": [
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
        "volumeMounts": [{"name": "plugins-config-volume", "mountPath": "/config", "readOnly": True}],
    }
    deployment = _deployment(
        name,
        namespace,
        stack,
        container,
        deployment={"strategy": {"type": "Recreate"}},
        terminationGracePeriodSeconds=130,
        volumes=[{"name": "plugins-config-volume", "configMap": {"name": name}}],
    )
    read = ["get", "watch", "list"]
    objectives = ["inferenceobjectives", "inferencemodelrewrites"]
    return [
        *_identity(
            name,
            namespace,
            stack,
            [
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                {"apiGroups": [INFERENCE_GROUP], "resources": ["inferencepools"], "verbs": read},
                {"apiGroups": ["llm-d.ai", "inference.networking.x-k8s.io"], "resources": objectives, "verbs": read},
            ],
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": config,
            # JSON is YAML: the EPP reads the file with a YAML loader, and the renderers need no YAML library.
            "data": {EPP_CONFIG_FILE: json.dumps(endpoint_picker_config(backend.disaggregated), indent=2) + "\n"},
        },
        deployment,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": config,
            "spec": {
                "type": "ClusterIP",
                "selector": pick,
                "ports": [
                    {"name": "grpc-ext-proc", "port": EPP_EXT_PROC_PORT, "targetPort": "grpc", "protocol": "TCP",
                     "appProtocol": "kubernetes.io/h2c"},
                    {"name": "http-metrics", "port": EPP_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
                ],
            },
        },
        {
            "apiVersion": "monitoring.googleapis.com/v1",
            "kind": "PodMonitoring",
            "metadata": config,
            "spec": {
                "selector": {"matchLabels": pick},
                "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
            },
        },
    ]


def render_body_based_router(backend: Backend, *, namespace: str, stack: str) -> list[dict[str, Any]]:
    """The body-based router (GAIE v1.5.0 chart, GKE provider): ServiceAccount, Role (configmaps, which
    its base-model mapper reads), RoleBinding, Deployment, Service, the GCPRoutingExtension that calls it
    for every request of the Gateway, and the HealthCheckPolicy of its gRPC health port."""
    name = BBR_NAME
    config = _meta(name, namespace, stack, name)
    extractor = json.dumps({"fieldName": "model", "headerName": MODEL_HEADER}, separators=(",", ":"))
    container = {
        "name": "bbr",
        "image": image(BBR_CHART.image).ref,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "--streaming",
            "--v", "3",
            "--plugin", f"body-field-to-header:model-extractor:{extractor}",
            "--plugin", "base-model-to-header:base-model-mapper",
            "--tracing=false",
        ],
        "ports": [
            {"name": "grpc", "containerPort": BBR_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": BBR_HEALTH_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": {"grpc": {"port": BBR_HEALTH_PORT}, "initialDelaySeconds": 5, "periodSeconds": 10},
        "readinessProbe": {"grpc": {"port": BBR_HEALTH_PORT}, "periodSeconds": 2},
        # Not in the chart: small fixed requests so it schedules beside the system pods it shares nodes with.
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
    }
    return [
        *_identity(name, namespace, stack, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]),
        _deployment(name, namespace, stack, container),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": config,
            "spec": {
                "type": "ClusterIP",
                "selector": _pick(stack, name),
                "ports": [{"name": "grpc", "port": BBR_PORT, "targetPort": "grpc", "protocol": "TCP", "appProtocol": "HTTP2"}],
            },
        },
        {
            "apiVersion": GKE_NETWORKING_API,
            "kind": "GCPRoutingExtension",
            "metadata": config,
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": backend.gateway}],
                "extensionChains": [
                    {
                        "name": "chain1",
                        "extensions": [
                            {
                                "name": "ext1",
                                # The chart's placeholder authority: the :authority of the callout, which BBR ignores.
                                "authority": "myext.com",
                                "timeout": "1s",
                                "supportedEvents": ["RequestHeaders", "RequestBody", "RequestTrailers"],
                                "requestBodySendMode": "FullDuplexStreamed",
                                "backendRef": {"group": "", "kind": "Service", "name": name, "port": BBR_PORT},
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": GKE_NETWORKING_API,
            "kind": "HealthCheckPolicy",
            "metadata": config,
            "spec": {
                "targetRef": {"group": "", "kind": "Service", "name": name},
                "default": {
                    "logConfig": {"enabled": True},
                    "config": {
                        "type": "GRPC",
                        "grpcHealthCheck": {"portSpecification": "USE_FIXED_PORT", "port": BBR_HEALTH_PORT},
                    },
                },
            },
        },
    ]


def render_front_door(
    backend: Backend,
    front_door: FrontDoorSpec,
    timeout_sec: int,
    *,
    namespace: str,
    stack: str,
    iap_client_id: Any = None,
    iap_client_secret: Any = None,
) -> list[dict[str, Any]]:
    """Every object of the gateway front door, in apply order (the pool and its picker before the route
    that names them; the IAP Secret before the policy that names it). ``iap_client_*`` are the public
    form's OAuth client (secret Outputs in Pulumi; placeholders offline); ignored when internal."""
    objects: list[dict[str, Any]] = [
        *render_epp(backend, namespace=namespace, stack=stack),
        render_inference_pool(backend, namespace=namespace, stack=stack),
        render_health_check_policy(backend, namespace=namespace, stack=stack),
    ]
    if front_door.public:
        if iap_client_id is None or iap_client_secret is None:
            raise ValueError("the public gateway needs the IAP OAuth client (iapClientId, iapClientSecret)")
        objects.append(render_iap_secret(backend, namespace=namespace, stack=stack, client_secret=iap_client_secret))
    objects += [
        render_backend_policy(backend, front_door, timeout_sec, namespace=namespace, stack=stack, iap_client_id=iap_client_id),
        render_gateway(backend, front_door, namespace=namespace, stack=stack),
        render_http_route(backend, front_door, namespace=namespace, stack=stack),
    ]
    if front_door.body_based_routing:
        objects += render_body_based_router(backend, namespace=namespace, stack=stack)
    return objects


def network_intents(backend: Backend, front_door: FrontDoorSpec) -> tuple[netpol.Intent, ...]:
    """Who reaches the servers and the picker behind the gateway: the proxies (Envoy-based load balancers
    reach backends from the proxy-only subnet: Cloud Load Balancing "Load balancing firewall rules") and
    Google's health checks reach the serving port and the picker's ext_proc port; the picker reaches the
    serving port (it scrapes ``/metrics`` there); Managed Prometheus scrapes the picker. Nothing else in
    the cluster or the VPC reaches the serving port through these."""
    if front_door.proxy_subnet is None:  # FrontDoorSpec refuses a gateway without one
        raise ValueError("a gateway front door needs workload.frontDoor.proxySubnet")
    proxies = netpol.IpBlock(front_door.proxy_subnet.cidr)
    checks = tuple(netpol.IpBlock(cidr) for cidr in HEALTH_CHECK_RANGES)
    picker = netpol.roles(backend.epp)
    intents: tuple[netpol.Intent, ...] = (
        netpol.Flow(
            f"{backend.name}-gateway",
            to=netpol.roles(backend.role, *backend.other_roles),
            ports=netpol.PortNames((backend.port_name,)),
            sources=(proxies, *checks, picker),
            why="the gateway's Envoy proxies (the region's proxy-only subnet) forward the picked requests, Google's "
            "health checks probe /health, and the endpoint picker scrapes /metrics (queue, KV cache) on the serving port",
        ),
        netpol.Flow(
            f"{backend.epp}-ext-proc",
            to=picker,
            ports=netpol.PortNames(("grpc",)),
            sources=(proxies, *checks),
            why="the gateway's proxies call the endpoint picker (Envoy ext_proc) for every request",
        ),
        netpol.Flow(
            f"{backend.epp}-health",
            to=picker,
            ports=netpol.PortNames(("grpc-health",)),
            sources=checks,
            why="Google's health checks probe the endpoint picker's gRPC health port (GKE's default for the EPP backend)",
        ),
        netpol.Scrapes(f"{backend.epp}-metrics", backend.epp, why="Managed Prometheus scrapes the endpoint picker's metrics"),
    )
    if front_door.body_based_routing:
        router = netpol.roles(BBR_NAME)
        intents += (
            netpol.Flow(
                BBR_NAME,
                to=router,
                ports=netpol.PortNames(("grpc",)),
                sources=(proxies, *checks),
                why="the gateway's proxies call the body-based router (routing extension) with each request's body",
            ),
            netpol.Flow(
                f"{BBR_NAME}-health",
                to=router,
                ports=netpol.PortNames(("grpc-health",)),
                sources=checks,
                why="Google's health checks probe the body-based router's gRPC health port (its HealthCheckPolicy)",
            ),
        )
    return intents
