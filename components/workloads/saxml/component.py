"""``SaxmlServing``: Saxml on the stack's TPU slices, with the model published as part of the stack.

Children, in dependency order: the JobSet controller (``HelmController``), the admin server
Deployment, the model-server JobSet (after the controller's release), the HTTP server Deployment
and its LoadBalancer Service, and the publish Job (after all of them). Objects come from the pure
renderers in ``components.workloads.saxml.render``, which take the bucket's deterministic name
(``StackConfig.bucket_name``); the servers that embed it list the bucket in ``depends_on``.

Teardown: ``pulumi destroy`` removes the servers with the cluster; the cell's state lives in the
``sax`` bucket (deleted with it in dev, retained in prod, where the next admin server would find
the model still published). To unpublish without a teardown, run the ``saxml_unpublish_command``
output, and set ``workload.saxml.publish.enabled: false`` so the next ``pulumi up`` does not
publish it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from ...config.resolve import StackPlan
from ...platform import k8s as k8s_objects
from ...platform.addons.controllers import HelmController
from ...platform.gke import GkeCluster
from ...platform.identity import WorkloadIdentity
from ...platform.network_policies import network_policies
from ...platform.storage import StackBucket
from . import render as render
from .spec import BUCKET_KEY, settings

# Bucket key of the Saxml admin state in the stack file (``gke-tpu-llm:buckets.sax``).
# The admin server creates and overwrites its state objects; both roles allow that on the bucket only.


class SaxmlServing(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:saxml:SaxmlServing"

    controller: HelmController
    admin_server: pulumi.CustomResource
    model_servers: pulumi.CustomResource
    http_server: pulumi.CustomResource
    http_service: k8s.core.v1.Service
    publish_job: pulumi.CustomResource | None
    endpoint: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        identity: WorkloadIdentity,
        bucket: StackBucket,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        config = stack.config
        objs = render.render_saxml(
            stack,
            namespace=identity.namespace,
            service_account=identity.service_account_name,
            bucket_name=config.bucket_name(BUCKET_KEY),  # = bucket's name
        )

        def k8s_opts(**kwargs: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=cluster.provider, **kwargs)

        self.controller = HelmController(
            f"{name}-jobset",
            controller="jobset",
            version=config.controllers.jobset_version,
            provider=cluster.provider,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Pods need the namespace, the KSA, its bucket grant and the bucket (named in their env) before they start.
        self.admin_server = k8s_objects.create(objs.admin_server, f"{name}-admin", k8s_opts(depends_on=[identity, bucket]))
        self.model_servers = k8s_objects.create(
            objs.model_servers,
            f"{name}-model-servers",
            k8s_opts(
                depends_on=[self.controller.release, identity, bucket],
                # The JobSet webhook rejects changes to replicatedJobs, so a new slice count or
                # image replaces the set; the fixed name needs the old one gone first.
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        self.http_server = k8s_objects.create(objs.http_server, f"{name}-http", k8s_opts(depends_on=[identity, bucket]))
        self.http_service = cast(
            k8s.core.v1.Service, k8s_objects.create(objs.http_service, f"{name}-http-lb", k8s_opts(depends_on=[identity]))
        )

        self.publish_job = None
        if objs.publish_job is not None:
            timeout = settings(config).publish.timeout_seconds
            self.publish_job = k8s_objects.create(
                objs.publish_job,
                f"{name}-publish",
                k8s_opts(
                    depends_on=[self.admin_server, self.http_server, self.http_service, self.model_servers],
                    # A Job's template is immutable: new publish settings rerun it under the same name.
                    delete_before_replace=True,
                    # Pulumi waits for the Job to succeed; allow its whole deadline plus pod start.
                    custom_timeouts=pulumi.CustomTimeouts(create=f"{timeout // 60 + 5}m", update=f"{timeout // 60 + 5}m"),
                ),
            )

        self.endpoint = self.http_service.status.apply(_load_balancer_endpoint)
        self.register_outputs(
            {
                "endpoint": self.endpoint,
                "model": render.model_id(stack),
                "publish_replicas": render.publish_replicas(stack),
            }
        )


def _load_balancer_endpoint(status: Any) -> str:
    """``http://<ip>:8888`` once the load balancer has an address."""
    lb = getattr(status, "load_balancer", None) if status is not None else None
    for ingress in getattr(lb, "ingress", None) or []:
        address = getattr(ingress, "ip", None) or getattr(ingress, "hostname", None)
        if address:
            return f"http://{address}:{render.HTTP_PORT}"
    return "pending: the load balancer has no address yet (see saxml_endpoint_command)"


def outputs(stack: StackPlan, serving: SaxmlServing, namespace: str) -> dict[str, Any]:
    """Stack outputs: where the HTTP server is, and the listcell/generate/unpublish calls."""
    model = render.model_id(stack)
    svc = render.HTTP_SERVICE_NAME
    port = render.HTTP_PORT
    internal = settings(stack.config).internal_load_balancer
    # SAX_HTTP: the LB address (from the VPC when internal) or localhost:8888 with the port-forward.
    target = f"http://${{SAX_HTTP:-localhost:{port}}}"
    json_header = "-H 'Content-Type: application/json'"
    out: dict[str, Any] = {
        "saxml_endpoint": serving.endpoint,
        "saxml_endpoint_note": (
            f"{namespace}/{svc} is an {'internal (VPC-only)' if internal else 'external'} LoadBalancer on port {port}; "
            f"set SAX_HTTP=<address>:{port} to use it, or run saxml_port_forward_command and keep the default "
            f"localhost:{port}"
        ),
        "saxml_endpoint_command": (f"kubectl -n {namespace} get svc {svc} -o jsonpath='{{.status.loadBalancer.ingress[0].ip}}'"),
        "saxml_port_forward_command": f"kubectl -n {namespace} port-forward svc/{svc} {port}:{port}",
        "saxml_model": model,
        "saxml_listcell_command": (f'curl -sS -X GET {json_header} --data \'{{"model": "{model}"}}\' {target}/listcell'),
        "saxml_generate_command": (
            f"curl -sS -X POST {json_header} "
            f'--data \'{{"model": "{model}", "query": "How many days are in a week?"}}\' {target}/generate'
        ),
        "saxml_unpublish_command": (f'curl -sS -X POST {json_header} --data \'{{"model": "{model}"}}\' {target}/unpublish'),
        "saxml_model_server_logs_command": (
            f"kubectl -n {namespace} logs -f job/{render.MODEL_SERVER_SET_NAME}-{render.MODEL_SERVER_JOB_NAME}-0"
        ),
    }
    if serving.publish_job is not None:
        out["saxml_publish_logs_command"] = f"kubectl -n {namespace} logs job/{render.PUBLISH_NAME}"
    else:
        out["saxml_publish_command"] = (
            f'curl -sS -X POST {json_header} --data \'{{"model": "{model}", "model_path": '
            f'"{render.model_path(stack)}", "checkpoint": "{settings(stack.config).publish.checkpoint}", '
            f'"replicas": {render.publish_replicas(stack)}}}\' {target}/publish'
        )
    return out


def deploy(
    stack: StackPlan,
    *,
    cluster: GkeCluster,
    identity: WorkloadIdentity,
    buckets: Mapping[str, StackBucket],
    addons: Mapping[str, pulumi.Resource] | None = None,  # the cluster add-ons installed: none is this kind's
) -> Mapping[str, Any]:
    """Create the Saxml serving component; return the stack outputs it adds."""
    # The bucket and its write role are checked at config load (SaxmlSpec.stack_rules).
    serving = SaxmlServing("saxml", stack, cluster=cluster, identity=identity, bucket=buckets[BUCKET_KEY])
    # Default-deny ingress for the namespace plus the flows the workload declares (render.network_intents).
    objects = render.render_saxml(
        stack,
        namespace=identity.namespace,
        service_account=identity.service_account_name,
        bucket_name=stack.config.bucket_name(BUCKET_KEY),
    ).all()
    network_policies(
        "network-policies",
        objects,
        render.network_intents(stack),
        namespace=identity.namespace,
        stack=stack.config.stack,
        cluster=cluster,
        depends_on=[identity],
    )
    return outputs(stack, serving, identity.namespace)
