"""vLLM on a TPU slice: the server (``VllmServer``) and its metrics adapter (``MetricsAdapter``).

``deploy`` is the workload entry point (``components.workloads``). The objects come from the pure
renderers in ``components.workloads.vllm.render``; these components only register them in dependency order:

* ``VllmServer`` — the Hugging Face token Secret (from the secret config ``gke-tpu-llm:hfToken``, so
  state and previews hold it encrypted / as a placeholder), the Deployment (single-host slice) or,
  on a multi-host slice, the LWS controller (pinned Helm release) and the LeaderWorkerSet (Ray head +
  ``vllm serve`` on the leader) reading weights through the GCS FUSE bucket volume, the LoadBalancer
  Service, the PodMonitoring and, with autoscaling, the HorizontalPodAutoscaler.
* ``MetricsAdapter`` — the Custom Metrics Stackdriver Adapter (rendered, pinned image) plus
  ``roles/monitoring.viewer`` for its KSA. That role is project-level by nature (Cloud Monitoring
  has no finer resource); it is granted to the adapter KSA's own ``principal://`` identity, so no
  Google service account or key exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.config.resolve import StackPlan
from components.platform import k8s as k8s_objects
from components.platform.addons.controllers import HelmController
from components.platform.gke import GkeCluster
from components.platform.identity import WorkloadIdentity, principal_member, stack_urn
from components.platform.network_policies import network_policies
from components.platform.storage import StackBucket
from components.workloads.vllm import render as render
from components.workloads.vllm.spec import ADAPTER_NAME, ADAPTER_NAMESPACE, API_KEY_SECRET, settings

MONITORING_VIEWER = "roles/monitoring.viewer"
JETSTREAM_CONTROLLER = f"gke-tpu-llm:jetstream:JetstreamServer${HelmController.TYPE}"
"""Type chain of the JetStream kind's LWS controller (``JetstreamServer`` > ``HelmController "lws"``,
components/workloads/jetstream/component.py), which a stack moved to vLLM adopts (named, not
imported, so one kind does not load another)."""


class MetricsAdapter(pulumi.ComponentResource):
    """Custom Metrics Stackdriver Adapter: serves Managed Prometheus metrics to HPAs."""

    TYPE = "gke-tpu-llm:vllm:MetricsAdapter"

    resources: list[pulumi.CustomResource]

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        config = stack.config
        objects = render.render_metrics_adapter(config.stack, settings(config).metrics_adapter_version)
        namespace, rest = objects[0], objects[1:]
        ns = k8s_objects.create(namespace, f"{name}-ns", pulumi.ResourceOptions(parent=self, provider=cluster.provider))
        self.resources = [ns]
        for obj in rest:
            meta = obj["metadata"]
            suffix = f"{obj['kind'].lower()}-{meta['name'].replace(':', '-').replace('.', '-')}"
            self.resources.append(
                k8s_objects.create(
                    obj, f"{name}-{suffix}", pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[ns])
                )
            )
        number = gcp.organizations.get_project_output(project_id=config.project).number
        self.member = number.apply(
            lambda n: principal_member(str(n), config.project, ADAPTER_NAMESPACE, ADAPTER_NAME)
        )
        self.iam = gcp.projects.IAMMember(
            f"{name}-monitoring-viewer",
            project=config.project,
            role=MONITORING_VIEWER,
            member=self.member,
            # The principal exists once the cluster's Workload Identity pool does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.cluster]),
        )
        self.register_outputs({"member": self.member, "image_version": settings(config).metrics_adapter_version})


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
        adapter: MetricsAdapter | None,
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
        if render.multi_host(stack):
            # The LeaderWorkerSet CRD and its webhook come first (as for the JetStream kind). The alias
            # adopts the JetStream kind's controller when a stack moves from JetStream to vLLM: the
            # Helm release is cluster-wide ("lws"), so a second one created beside it would fail,
            # and deleting the old one at the end would remove the controller this LWS needs.
            self.controller = HelmController(
                "lws",
                controller="lws",
                version=config.controllers.lws_version,
                provider=cluster.provider,
                opts=pulumi.ResourceOptions(parent=self, aliases=[stack_urn(JETSTREAM_CONTROLLER, "lws")]),
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
    stack: StackPlan, *, cluster: GkeCluster, identity: WorkloadIdentity, buckets: Mapping[str, StackBucket]
) -> Mapping[str, Any]:
    """Create the vLLM components; return the endpoint, the command to find it and a curl example."""
    config = stack.config
    # Presence and secrecy are checked at config load (VllmSpec.required_secrets).
    hf_token = pulumi.Config("gke-tpu-llm").require_secret("hfToken")
    auth = settings(config).service.auth
    api_key = pulumi.Config("gke-tpu-llm").require_secret(API_KEY_SECRET) if auth == "api-key" else None
    adapter = MetricsAdapter("metrics-adapter", stack, cluster=cluster) if settings(config).autoscaling.enabled else None
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
    if adapter is not None:
        network_policies(
            "metrics-adapter-network-policies",
            render.render_metrics_adapter(config.stack, settings(config).metrics_adapter_version),
            render.adapter_network_intents(),
            namespace=ADAPTER_NAMESPACE,
            stack=config.stack,
            cluster=cluster,
            depends_on=[adapter],
        )
    return {
        "vllm_service": f"{namespace}/{render.NAME}",
        "vllm_model": render.model_id(stack),
        "vllm_endpoint": server.endpoint,
        "vllm_endpoint_command": render.endpoint_command(namespace),
        "vllm_curl": render.curl_example(stack, namespace),
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
