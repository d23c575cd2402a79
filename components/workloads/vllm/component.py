"""vLLM on a TPU slice: the server (``VllmServer``).

``deploy`` is the workload entry point (``components.workloads``). The objects come from the pure
renderers in ``components.workloads.vllm.render``; this component only registers them in dependency order:
the Hugging Face token Secret (from the secret config ``gke-tpu-llm:hfToken``, so state and previews
hold it encrypted / as a placeholder), the Deployment (single-host slice) or, on a multi-host slice,
the LWS controller (pinned Helm release) and the LeaderWorkerSet (Ray head + ``vllm serve`` on the
leader) reading weights through the GCS FUSE bucket volume, the LoadBalancer Service, the
PodMonitoring and, with autoscaling, the HorizontalPodAutoscaler. The HPA reads its metric through
GKE's AutoscalingMetric (``via: autoscalingMetric``, registered here) or the Custom Metrics Stackdriver
Adapter, a cluster add-on the kind opts into (``components.platform.addons.metrics_adapter``, installed
by the program before the workload); ``components.workloads.vllm.autoscaling`` decides which.

With ``workload.frontDoor.type: gateway`` the Service is ClusterIP and ``InferenceGateway`` registers
the GKE Inference Gateway in front of it (``components.render.gateway``): a component of its own, so
moving a stack between the two front doors adds or removes only it (and flips the Service's type).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from ...config.front_door import IAP_SECRETS
from ...config.resolve import StackPlan
from ...platform import k8s as k8s_objects
from ...platform.addons import metrics_adapter
from ...platform.addons.controllers import HelmController
from ...platform.addons.inference_gateway import NAME as INFERENCE_GATEWAY
from ...platform.gke import GkeCluster
from ...platform.identity import WorkloadIdentity
from ...platform.network_policies import network_policies
from ...platform.storage import StackBucket
from ...render import gateway
from . import autoscaling, clients, disagg_render
from . import render as render
from .spec import API_KEY_SECRET, settings


class VllmServer(pulumi.ComponentResource):
    """The vLLM Deployment (or LWS controller + LeaderWorkerSet), its Secrets, Service, PodMonitoring and HPA."""

    TYPE = "gke-tpu-llm:vllm:VllmServer"

    service: pulumi.CustomResource
    deployment: pulumi.CustomResource
    endpoint: pulumi.Output[str]
    objects: list[dict[str, Any]]
    """The server objects as rendered (workloads, Service, PodMonitorings): what the NetworkPolicies derive from."""
    shapes: Any
    """The module that renders this server's shape: ``disagg_render`` for a prefill/decode split, else ``render``."""

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        identity: WorkloadIdentity,
        bucket: StackBucket,
        hf_token: pulumi.Output[str],
        adapter: pulumi.Resource | None,
        api_key: pulumi.Output[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        config = stack.config
        namespace = identity.namespace

        def k8s_opts(depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
            # The namespace and KSA come from the identity component.
            return pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[identity, *depends_on])

        secrets = [k8s_objects.create(render.render_hf_secret(config.stack, namespace, hf_token), f"{name}-hf-token", k8s_opts())]
        if api_key is not None:
            key_secret = render.render_api_key_secret(config.stack, namespace, api_key)
            secrets.append(k8s_objects.create(key_secret, f"{name}-api-key", k8s_opts()))
        server_deps: list[pulumi.Resource] = [*secrets, bucket]  # the pods mount the bucket by name
        self.controller: HelmController | None = None
        if "lws" in config.addons:  # a multi-host slice (spec.addons): the server is a LeaderWorkerSet
            # The LeaderWorkerSet CRD and its webhook come first (as for the JetStream kind). The
            # release is cluster-wide, so it adopts the JetStream kind's when a stack moves from
            # JetStream to vLLM (the controller table's ``adopts``): a second one created beside it
            # would fail, and deleting the old one at the end would remove the controller this LWS needs.
            self.controller = HelmController(
                "lws",
                controller="lws",
                version=config.controllers.lws_version,
                provider=cluster.provider,
                opts=pulumi.ResourceOptions(parent=self),
            )
            server_deps.append(self.controller.release)
        bucket_name = config.bucket_name(settings(config).bucket)
        identity_args = {"service_account": identity.service_account_name, "bucket_name": bucket_name}
        if disagg_render.is_disaggregated(stack):
            # Prefill and decode Deployments, each on its pool; the Service selects the decode pods' sidecars.
            self.shapes = disagg_render
            servers = disagg_render.render_servers(stack, namespace=namespace, **identity_args)
            self.deployment, *_ = [
                k8s_objects.create(obj, obj['metadata']['name'], k8s_opts(server_deps)) for obj in servers
            ]
            service = disagg_render.render_service(stack, namespace=namespace)
            monitorings = disagg_render.render_pod_monitorings(stack, namespace=namespace)
        else:
            self.shapes = render
            servers = [render.render_server(stack, namespace=namespace, **identity_args)]
            self.deployment = k8s_objects.create(
                servers[0], f"{name}-lws" if render.multi_host(stack) else f"{name}-deployment", k8s_opts(server_deps)
            )
            service = render.render_service(stack, namespace=namespace)
            monitorings = [render.render_pod_monitoring(stack, namespace=namespace)]
        self.objects = [*servers, service, *monitorings]
        self.service = k8s_objects.create(service, f"{name}-service", k8s_opts())
        for monitoring in monitorings:
            suffix = monitoring["metadata"]["name"].removeprefix(render.NAME)  # "" keeps the aggregated stacks' name
            k8s_objects.create(monitoring, f"{name}{suffix}-podmonitoring", k8s_opts())
        if autoscaling.autoscaled(config):
            if adapter is not None:  # the HPA reads its metric through the adapter's APIService
                metric_deps: list[pulumi.Resource] = [adapter]
            else:
                # GKE's AutoscalingMetric, after the cluster's HPA performance profile (an in-place cluster update).
                # Switching from the adapter, the HPA is updated to it here, and the adapter's objects and project
                # grant are deleted only at the end of the update, after the HPA has switched.
                metric = render.render_autoscaling_metric(stack, namespace=namespace)
                metric_deps = [k8s_objects.create(metric, f"{name}-autoscalingmetric", k8s_opts([cluster.cluster]))]
            hpa = render.render_hpa(stack, namespace=namespace)
            k8s_objects.create(hpa, f"{name}-hpa", k8s_opts([self.deployment, cluster.cluster, *metric_deps]))
        status: pulumi.Output[Any] = self.service.status  # type: ignore[attr-defined]
        self.endpoint = status.apply(_endpoint_url)
        self.register_outputs({"endpoint": self.endpoint})


class InferenceGateway(pulumi.ComponentResource):
    """The gateway front door of the vLLM servers: endpoint picker, InferencePool, policies, Gateway, route
    (and the body-based router when enabled), in the apply order ``gateway.render_front_door`` gives."""

    TYPE = "gke-tpu-llm:vllm:InferenceGateway"

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        identity: WorkloadIdentity,
        server: VllmServer,
        platform: pulumi.Resource | None = None,
        iap_client_id: pulumi.Output[str] | None = None,
        iap_client_secret: pulumi.Output[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        namespace = identity.namespace
        front_door = stack.config.workload.front_door
        self.backend = backend = server.shapes.gateway_backend(stack)
        timeout, self.timeout_reason = gateway.stack_backend_timeout(stack)
        self.objects = objects = gateway.render_front_door(
            backend,
            front_door,
            timeout,
            namespace=namespace,
            stack=stack.config.stack,
            iap_client_id=iap_client_id,
            iap_client_secret=iap_client_secret,
        )
        created: list[pulumi.Resource] = []
        # The platform's gateway pieces (proxy-only subnet, certificate) exist before the Gateway names them,
        # and on the move back the Gateway (its load balancer) goes before the subnet.
        platform_deps = [platform] if platform is not None else []
        for obj in objects:
            # Each after the ones before it (the picker before the pool that names it, the pool before its
            # policies and route), and all after the servers and the namespace.
            after = [identity, server, *platform_deps, *created]
            opts_k8s = pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=after)
            label = f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}"
            created.append(k8s_objects.create(obj, label, opts_k8s))
        self.endpoint_command = clients.gateway_endpoint_command(backend, namespace)
        self.curl = clients.gateway_curl(stack, backend, namespace)
        self.register_outputs({"endpoint_command": self.endpoint_command, "curl": self.curl})


def _endpoint_url(status: Any) -> str:
    """``http://<ip>:8000`` once the load balancer has an address (pulumi up waits for it)."""

    def field(obj: Any, snake: str, camel: str) -> Any:
        # SDK output types are dicts keyed in snake_case; plain provider data is camelCase.
        if isinstance(obj, Mapping):
            return obj[snake] if snake in obj else obj.get(camel)
        return getattr(obj, snake, None)

    ingress = field(field(status, "load_balancer", "loadBalancer"), "ingress", "ingress") or []
    addresses = [field(i, "ip", "ip") or field(i, "hostname", "hostname") for i in ingress]
    address = next((a for a in addresses if a), None)
    return f"http://{address}:{render.PORT}" if address else "pending: the load balancer has no address yet"


def deploy(
    stack: StackPlan,
    *,
    cluster: GkeCluster,
    identity: WorkloadIdentity,
    buckets: Mapping[str, StackBucket],
    addons: Mapping[str, pulumi.Resource] | None = None,
) -> Mapping[str, Any]:
    """Create the vLLM components; return the endpoint, the command to find it and a curl example.
    ``addons``: the cluster add-ons the program installed (the HPA depends on ``metricsAdapter``)."""
    config = stack.config
    # Presence and secrecy are checked at config load (VllmSpec.required_secrets).
    hf_token = pulumi.Config("gke-tpu-llm").require_secret("hfToken")
    auth = settings(config).service.auth
    api_key = pulumi.Config("gke-tpu-llm").require_secret(API_KEY_SECRET) if auth == "api-key" else None
    front_door = config.workload.front_door
    # The public gateway's OAuth client (presence and secrecy checked at config load, FrontDoorSpec.required_secrets).
    iap = [pulumi.Config("gke-tpu-llm").require_secret(key) for key in IAP_SECRETS] if front_door.public else [None, None]
    adapter = (addons or {}).get(metrics_adapter.NAME)
    if metrics_adapter.needed(config) and adapter is None:  # the program installs it (program.build.ADDONS)
        raise ValueError(f"vLLM autoscaling needs the {metrics_adapter.NAME} add-on installed before the workload")
    server = VllmServer(
        "vllm",
        stack,
        cluster=cluster,
        identity=identity,
        bucket=buckets[settings(config).bucket],
        hf_token=hf_token,
        adapter=adapter,
        api_key=api_key,
    )
    namespace = identity.namespace
    # Default-deny ingress per namespace plus the flows the workload declares (render.*network_intents),
    # derived from the objects the components rendered.
    objects = list(server.objects)
    outputs: dict[str, Any] = {}
    if front_door.gateway:
        front = InferenceGateway(
            "vllm-gateway",
            stack,
            cluster=cluster,
            identity=identity,
            server=server,
            platform=(addons or {}).get(INFERENCE_GATEWAY),
            iap_client_id=iap[0],
            iap_client_secret=iap[1],
        )
        objects += front.objects  # the picker's pods and PodMonitoring, which its flows name
        # Behind the gateway the Service has no address of its own: the endpoint is the gateway's.
        outputs = {
            "vllm_gateway": f"{namespace}/{front.backend.gateway}",
            "vllm_endpoint": f"https://{front_door.hostname}" if front_door.public else "what vllm_endpoint_command prints",
            "vllm_endpoint_command": front.endpoint_command,
            "vllm_curl": front.curl,
            "vllm_gateway_backend_timeout": front.timeout_reason,
            # In-cluster address of the ClusterIP Service (the benchmark Job's target), an Output of the
            # Service so that what runs after the server (the benchmark) waits for it.
            "vllm_in_cluster_url": server.service.id.apply(
                lambda _: f"http://{render.NAME}.{namespace}.svc.cluster.local:{render.PORT}"
            ),
        }
    network_policies(
        "network-policies",
        objects,
        server.shapes.network_intents(stack),
        namespace=namespace,
        stack=config.stack,
        cluster=cluster,
        depends_on=[identity],
    )
    return {
        "vllm_service": f"{namespace}/{render.NAME}",
        "vllm_model": render.model_id(stack),
        "vllm_endpoint": server.endpoint,
        "vllm_endpoint_command": clients.endpoint_command(namespace),
        "vllm_curl": clients.curl_example(stack, namespace),
        **outputs,
        # Multi-host: what the LeaderWorkerSet was derived to (group size = hosts, TPU chips per pod, PP x TP).
        **(
            {
                "vllm_lws_group_size": stack.slice.hosts,
                "vllm_tpu_per_pod": stack.slice.tpu_per_host,
                "vllm_parallelism": dict(stack.flags),
            }
            if render.multi_host(stack)
            else {}
        ),
    }
