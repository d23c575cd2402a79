"""MaxText training with Ray Train on KubeRay: the image repository, the RayCluster and the RayJob.

Two components:

* ``TrainingImageRepository`` — the Artifact Registry repository (docker, in the stack's region,
  immutable tags) that holds the training image, and read access on it for the nodes. The image
  itself is built by one command the stack outputs (``image_build_command``: Cloud Build with
  ``components/workloads/maxtext_ray/image/cloudbuild.yaml``), which then records what it pushed,
  ``<tag>@sha256:<digest>``, as ``workload.maxtextRay.image.built``. The objects run the image by
  that tag and digest; the tag is derived from the image's pins and build-context digest, so an edit
  to the Dockerfile or the trainer derives a new tag, which the config refuses to pair with the old
  digest until the new build is recorded. A digest exists only after its build, and the build needs
  this repository: until ``built`` is set the stack creates the repository and its grant only, and
  its ``training_waits_for`` output says what to run (``RayTraining`` is not created).
  Nodes pull with their node service account: the stack's own (``identity.NodeServiceAccount``;
  the Ray head and the job submitter run on the system pool, the workers on the TPU pool, and
  every pool runs as it), whose only project role is GKE's minimal node role, so the stack grants
  it ``roles/artifactregistry.reader`` on this repository only.
* ``RayTraining`` — the ``RayCluster`` (CPU head, one TPU worker group per slice) and the
  ``RayJob`` that runs the trainer on it. KubeRay comes from the GKE Ray operator add-on that
  ``GkeCluster`` enables for this workload kind (no Helm controller). Both objects are replaced,
  not patched, when their spec changes: KubeRay does not roll existing Ray pods on a template
  change and does not re-run a finished RayJob, so an in-place update would silently keep the old
  image or arguments. Changing the run name (or any MaxText argument) therefore starts a new run.
  Under queued provisioning there is no standalone RayCluster: the RayJob embeds the cluster spec,
  Kueue admits it through a ProvisioningRequest, and KubeRay deletes the cluster (and so frees the
  queued TPU nodes) when the job ends (``render.embeds_cluster``, ``render._cluster_source``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from ...config.resolve import StackPlan
from ...config.stack import StackConfig
from ...platform import k8s as k8s_objects
from ...platform.gke import GkeCluster
from ...platform.identity import WorkloadIdentity
from ...platform.network_policies import network_policies
from ...platform.storage import StackBucket
from . import render as render
from .spec import repository_id, settings

READER_ROLE = "roles/artifactregistry.reader"


class TrainingImageRepository(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:maxtext_ray:TrainingImageRepository"

    repository: gcp.artifactregistry.Repository
    image: str
    build_command: str

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        node_service_account: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-repo",
            repository_id=repository_id(config),
            project=config.project,
            location=config.region,
            format="DOCKER",
            description=f"{config.stack}: Ray + MaxText training images",
            # A tag names one build: pushing a changed image under an existing tag fails.
            docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
            labels=config.labels,
            opts=pulumi.ResourceOptions(parent=self, protect=config.policy.protect),
        )
        # Every pool that runs a pod of this workload (system: head, submitter; TPU: workers) pulls as it.
        self.node_reader = gcp.artifactregistry.RepositoryIamMember(
            f"{name}-node-reader",
            project=config.project,
            location=config.region,
            repository=self.repository.repository_id,
            role=READER_ROLE,
            member=pulumi.Output.from_input(node_service_account).apply(lambda email: f"serviceAccount:{email}"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # By tag and digest once the build is recorded; before that, the name the build will push.
        self.image = render.image_ref(config) if render.training_ready(config) else render.image_name(config)
        self.build_command = render.build_command(config)
        self.register_outputs({"image": self.image, "build_command": self.build_command})


class RayTraining(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:maxtext_ray:RayTraining"

    ray_cluster: pulumi.CustomResource | None
    """The standalone RayCluster; None when the RayJob embeds its cluster (queued provisioning)."""
    ray_job: pulumi.CustomResource

    def __init__(
        self,
        name: str,
        stack: StackPlan,
        *,
        cluster: GkeCluster,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        # The pods mount the bucket as the KSA and pull the image through the node grant: whichever
        # object creates them waits for those.
        job_after: list[pulumi.Resource] = list(depends_on)
        self.ray_cluster = None
        if not render.embeds_cluster(stack.config):
            self.ray_cluster = k8s_objects.create(
                render.render_ray_cluster(stack),
                f"{name}-cluster",
                pulumi.ResourceOptions(
                    parent=self,
                    provider=cluster.provider,
                    depends_on=list(depends_on),
                    replace_on_changes=["spec"],
                    delete_before_replace=True,
                ),
            )
            job_after = [self.ray_cluster]
        self.ray_job = k8s_objects.create(
            render.render_ray_job(stack),
            f"{name}-job",
            pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                depends_on=job_after,
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        outputs = {"ray_job": render.run_name(stack)}
        if self.ray_cluster is not None:
            outputs = {"ray_cluster": render.CLUSTER_NAME, **outputs}
        self.register_outputs(outputs)


def deploy(
    stack: StackPlan,
    *,
    cluster: GkeCluster,
    identity: WorkloadIdentity,
    buckets: Mapping[str, StackBucket],
    addons: Mapping[str, pulumi.Resource] | None = None,  # the cluster add-ons installed: none is this kind's
) -> Mapping[str, Any]:
    """Create the image repository and, once its build is recorded, the Ray training objects; return the
    commands a user runs next."""
    config = stack.config
    image = TrainingImageRepository("training-image", config, node_service_account=cluster.node_service_account)
    bucket = buckets[settings(config).bucket]
    if render.training_ready(config):
        RayTraining("maxtext-ray", stack, cluster=cluster, depends_on=[identity, bucket, image])
    # Default-deny ingress for the namespace plus the flows the workload declares (render.network_intents).
    network_policies(
        "network-policies",
        render.render_objects(stack),
        render.network_intents(stack),
        namespace=config.namespace,
        stack=config.stack,
        cluster=cluster,
        depends_on=[identity],
    )
    # A RayJob's own cluster has no fixed name (KubeRay picks it): no ray_cluster output then; the
    # status command shows it ("ray cluster name" column) and the dashboard command looks it up.
    if not render.training_ready(config):
        return {
            "training_image": image.image,
            "image_build_command": image.build_command,
            "training_waits_for": f"the training image's digest, known once it is built: run image_build_command (it "
            f"records {render.BUILT_KEY}), commit the stack file, and the next pulumi up creates the RayCluster and "
            "RayJob",
        }
    cluster_output = {} if render.embeds_cluster(config) else {"ray_cluster": f"{identity.namespace}/{render.CLUSTER_NAME}"}
    return {
        "training_image": image.image,
        "image_build_command": image.build_command,
        **cluster_output,
        "rayjob": f"{identity.namespace}/{render.run_name(stack)}",
        "rayjob_status_command": render.status_command(stack),
        "rayjob_logs_command": render.logs_command(stack),
        "ray_dashboard_command": render.dashboard_command(stack),
        "training_output": render.output_url(stack),
    }
