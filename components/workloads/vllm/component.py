"""vLLM on a TPU slice: the server (``VllmServer``).

``deploy`` is the workload entry point (``components.workloads``). The objects come from the pure
renderers in ``components.workloads.vllm.render``; this component only registers them in dependency order:
the Hugging Face token Secret (from the secret config ``gke-tpu-llm:hfToken``, so state and previews
hold it encrypted / as a placeholder), the Deployment (single-host slice) or, on a multi-host slice,
the LWS controller (pinned Helm release) and the LeaderWorkerSet (Ray head + ``vllm serve`` on the
leader) reading weights through the GCS FUSE bucket volume, the LoadBalancer Service, the
PodMonitoring and, with autoscaling, the HorizontalPodAutoscaler. The HPA reads its metric through
the Custom Metrics Stackdriver Adapter, a cluster add-on the kind opts into with autoscaling
(``components.platform.addons.metrics_adapter``, installed by the program before the workload).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from ...config.resolve import StackPlan
from ...platform import k8s as k8s_objects
from ...platform.addons import metrics_adapter
from ...platform.addons.controllers import HelmController
from ...platform.gke import GkeCluster
from ...platform.identity import WorkloadIdentity
from ...platform.network_policies import network_policies
from ...platform.storage import StackBucket
from . import clients
from . import render as render
from .spec import API_KEY_SECRET, settings


class VllmServer(pulumi.ComponentResource):
    """The vLLM Deployment (or LWS controller + LeaderWorkerSet), its Secrets, Service, PodMonitoring and HPA."""

    TYPE = "gke-tpu-llm:vllm:VllmServer"

    service: pulumi.CustomResource
    deployment: pulumi.CustomResource
    endpoint: pulumi.Output[str]

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
        self.deployment = k8s_objects.create(
            render.render_server(
                stack,
                namespace=namespace,
                service_account=identity.service_account_name,
                bucket_name=config.bucket_name(settings(config).bucket),  # = bucket's name
            ),
            f"{name}-lws" if render.multi_host(stack) else f"{name}-deployment",
            k8s_opts(server_deps),
        )
        self.service = k8s_objects.create(render.render_service(stack, namespace=namespace), f"{name}-service", k8s_opts())
        k8s_objects.create(render.render_pod_monitoring(stack, namespace=namespace), f"{name}-podmonitoring", k8s_opts())
        if adapter is not None:
            # The HPA reads its metric through the adapter's APIService.
            k8s_objects.create(render.render_hpa(stack, namespace=namespace), f"{name}-hpa", k8s_opts([self.deployment, adapter]))
        status: pulumi.Output[Any] = self.service.status  # type: ignore[attr-defined]
        self.endpoint = status.apply(_endpoint_url)
        self.register_outputs({"endpoint": self.endpoint})


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
    # Default-deny ingress per namespace plus the flows the workload declares (render.*network_intents).
    bucket_name = config.bucket_name(settings(config).bucket)
    objects = [
        render.render_server(stack, namespace=namespace, service_account=identity.service_account_name, bucket_name=bucket_name),
        render.render_service(stack, namespace=namespace),
        render.render_pod_monitoring(stack, namespace=namespace),
    ]
    network_policies(
        "network-policies",
        objects,
        render.network_intents(stack),
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
