"""Settings of the Saxml admin server, JobSet model servers and HTTP server workload (``gke-tpu-llm:workload.saxml``).

Hardware numbers are not here: JobSet replicas (= ``tpu.slices``), parallelism/completions (= hosts
per slice), ``google.com/tpu`` (= chips per host), the node selectors and the publish replica count
all come from the catalog slice and the stack's slice count. The servable (model path) comes from
the model catalog, whose memory the planner verified. What remains are the images, the cell, the
ports and the exposure and publish choices.

Upstream facts (GoogleCloudPlatform/kubernetes-engine-samples ``ai-ml/llm-multihost-tpus-saxml``,
commit c6f85f55, 2023-11-28): images ``sax-admin-server:v1.1.0``, ``sax-model-server:v1.1.0``,
``sax-http:v1.0.0``; cell ``/sax/test``; admin port 10000, model-server port 10001; JobSet
``failurePolicy.maxRestarts: 4``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ...catalog.images import image
from ...config.base import BucketNeed, Cidr, PinnedImage, Spec
from ...config.errors import raise_rules, rule
from ...config.gke_rules import load_balancer_dataplane_rules
from ...config.workload import KIND_DESCRIPTION, WorkloadBase, workload_as
from ...planner.perf import Server

if TYPE_CHECKING:
    from ...catalog.tpu import TpuSlice
    from ...config.stack import StackConfig

# Default images, by tag and digest (components/catalog/images.json).
ADMIN_SERVER_IMAGE = image("sax-admin-server")
MODEL_SERVER_IMAGE = image("sax-model-server")
HTTP_SERVER_IMAGE = image("sax-http")
PUBLISH_IMAGE = image("curl")

# Ports the model-server pods already use: 8471 TPU runtime (megascale/slice builder, declared by
# the seed), 8476 the JAX distributed coordinator on worker 0.
RESERVED_TPU_PORTS = frozenset({8471, 8476})


class SaxmlPublishSpec(Spec):
    """The model the stack publishes to the cell once the servers are up (a Kubernetes Job)."""

    enabled: bool = Field(
        True,
        description="Publish the model as part of the stack (an idempotent Job that waits for the HTTP server). "
        "Defaults to on because a Saxml cell without a published model serves nothing; turn off to publish by hand.",
    )
    model: str = Field(
        "spmd",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Model name inside the cell; the published id is <cell>/<model>. Defaults to 'spmd' because the "
        "seed publishes /sax/test/spmd.",
    )
    checkpoint: str = Field(
        "None",
        pattern=r"^[^\s\"'\\]+$",
        description="Checkpoint path passed to publish (no spaces or quotes). Defaults to the string 'None' because "
        "the test servable (test_mode) ignores it and initialises random weights.",
    )
    timeout_seconds: Annotated[int, Field(ge=60, le=7200)] = Field(
        900,
        description="Deadline of the publish Job (activeDeadlineSeconds). Defaults to 900 because publishing waits "
        "only for the HTTP and admin servers, which start in minutes; model loading (about 10 min) happens after.",
    )
    image: PinnedImage = Field(
        PUBLISH_IMAGE.ref,
        description="Image of the publish Job (needs sh and curl >= 7.76 for --fail-with-body). Defaults to "
        f"{PUBLISH_IMAGE.repository}:{PUBLISH_IMAGE.tag} by digest because it is small.",
    )


BUCKET_KEY = "sax"
"""The bucket (``gke-tpu-llm:buckets.sax``) that holds the admin server's cell state."""
WRITE_ROLES = ("roles/storage.objectUser", "roles/storage.objectAdmin")


class SaxmlSpec(Spec):
    """Saxml admin server, JobSet model servers and HTTP server."""

    cell: str = Field(
        "/sax/test",
        pattern=r"^/sax/[A-Za-z0-9_-]+$",
        description="Saxml cell (/sax/<name>) the admin server owns and the model servers join. Defaults to "
        "/sax/test because the seed and the images' defaults use it.",
    )
    admin_server_image: PinnedImage = Field(
        ADMIN_SERVER_IMAGE.ref,
        description=f"Admin server image. Defaults to the multi-host sample's {ADMIN_SERVER_IMAGE.tag} because that "
        "pairing with the model server was tested upstream on v5e 4x8.",
    )
    model_server_image: PinnedImage = Field(
        MODEL_SERVER_IMAGE.ref,
        description=f"Model server image. Defaults to the multi-host sample's {MODEL_SERVER_IMAGE.tag} because that is "
        "the version tested upstream with LmCloudSpmd175B32Test on v5e.",
    )
    http_server_image: PinnedImage = Field(
        HTTP_SERVER_IMAGE.ref,
        description=f"HTTP server image. Defaults to the multi-host sample's {HTTP_SERVER_IMAGE.tag} (one minor behind "
        "the servers, as upstream) because its request format is the one the publish Job and the README use.",
    )
    admin_port: Annotated[int, Field(ge=1024, le=65535)] = Field(
        10000,
        description="Admin server gRPC port (the image's PORT). Defaults to 10000 because the image does; clients "
        "find the admin through the cell's location file in the bucket, not through a Service.",
    )
    model_server_port: Annotated[int, Field(ge=1024, le=65535)] = Field(
        10001, description="Model server gRPC port (--port). Defaults to 10001 because the seed uses it."
    )
    platform_chip: str | None = Field(
        None,
        pattern=r"^[a-z0-9]+$",
        description="Model server --platform_chip. Unset derives tpu<generation> (tpuv5e on v5e, as upstream).",
    )
    model_server_privileged: bool = Field(
        False,
        description="Run the model servers privileged, as the 2023 sample does. Off by default because GKE 1.28+ "
        "exposes TPUs to unprivileged containers; turn on only for an older cluster.",
    )
    max_restarts: Annotated[int, Field(ge=0, le=100)] = Field(
        4, description="JobSet failurePolicy.maxRestarts. Defaults to 4 because the seed uses it."
    )
    internal_load_balancer: bool = Field(
        True,
        description="Put the HTTP server's LoadBalancer on an internal (VPC-only) address. Always on: the Saxml "
        "HTTP server has no authentication and exposes publish/unpublish/generate, and a model endpoint outside "
        "the VPC needs both source ranges and authentication; reach it from the VPC or with kubectl port-forward.",
    )
    load_balancer_source_ranges: list[Cidr] = Field(
        [],
        description="CIDRs inside the VPC allowed to reach the internal LoadBalancer (loadBalancerSourceRanges). "
        "Empty allows the whole VPC.",
    )
    publish: SaxmlPublishSpec = Field(
        default_factory=SaxmlPublishSpec, description="Declarative publish of the model into the cell."
    )

    def stack_rules(self, config: Any) -> list[dict[str, Any]]:
        """Rules across the stack: the HTTP server's internal LoadBalancer names its clients by address
        in its NetworkPolicy, which needs GKE Dataplane V2. No gateway: the endpoint picker reads vLLM,
        SGLang, trtllm-serve and Triton gauges only (llm-d-router v0.10.0 metrics/factories.go)."""
        from ...config.front_door import refuse_gateway

        return load_balancer_dataplane_rules("cluster.dataplane", config.cluster.dataplane) + refuse_gateway(
            config,
            "the sax-http server answers /generate with Saxml's own request body (no OpenAI API for the endpoint "
            "picker to parse) and exports no queue or KV-cache metrics, so the picker's scorers would see nothing; "
            "it also has no authentication of its own",
        )

    def bucket_needs(self, config: Any) -> tuple[BucketNeed, ...]:
        """The admin server keeps its state in the `sax` bucket and must be able to write it: it
        creates, overwrites and deletes objects under sax-root, which roles/storage.objectUser allows
        (storage.objects.create/get/list/update/delete). objectAdmin adds only object IAM policies
        and retention overrides, which nothing here uses (every stack bucket has uniform access)."""
        return (
            BucketNeed(
                BUCKET_KEY,
                WRITE_ROLES[0],
                "does not let the admin server write its state",
                purpose="the Saxml admin server's state",
                label="saxml-admin-state",
            ),
        )

    @model_validator(mode="after")
    def _rules(self) -> SaxmlSpec:
        rules = []
        if not self.internal_load_balancer:
            rules.append(
                rule(
                    "internalLoadBalancer",
                    False,
                    "would put the Saxml HTTP server (publish/unpublish/generate) outside the VPC, and it has no "
                    "authentication (an external model endpoint needs source ranges and authentication)",
                    "true",
                    "remove the key; reach the server from the VPC (loadBalancerSourceRanges narrows it) or with "
                    "kubectl port-forward",
                )
            )
        if self.admin_port == self.model_server_port:
            rules.append(rule("modelServerPort", self.model_server_port, "equals adminPort", "another port", "change it"))
        if self.model_server_port in RESERVED_TPU_PORTS:
            rules.append(
                rule(
                    "modelServerPort",
                    self.model_server_port,
                    "is used by the TPU runtime or the JAX coordinator on the same pod",
                    f"a port other than {', '.join(map(str, sorted(RESERVED_TPU_PORTS)))}",
                    "change it",
                )
            )
        raise_rules(rules)
        return self


class SaxmlWorkload(WorkloadBase):
    """``gke-tpu-llm:workload`` with ``kind: saxml``."""

    kind: Literal["saxml"] = Field(description=KIND_DESCRIPTION)
    saxml: SaxmlSpec = Field(default_factory=SaxmlSpec, description="Settings when kind is saxml.")


def settings(config: StackConfig) -> SaxmlSpec:
    """This kind's settings section of ``config`` (TypeError for a stack of another kind)."""
    return workload_as(config.workload, SaxmlWorkload).saxml


def serving_server(config: StackConfig, tpu: TpuSlice) -> Server:
    """How a Saxml model server runs one replica: the servable's batch bounds it. The servable
    class fixes its batch (the renderer passes none); the stack declares it as
    ``workload.batchSize``, the batch the planner sizes the KV cache for (unset: 1, as the planner)."""
    return Server(
        batch_limit=config.workload.batch_size or 1,
        batch_limit_source="Saxml servable batch (workload.batchSize)",
    )
