"""MaxText training with Ray Train on KubeRay: the image repository, the RayCluster and the RayJob.

Two components:

* ``TrainingImageRepository`` — the Artifact Registry repository (docker, in the stack's region,
  immutable tags) that holds the training image, and read access on it for the nodes. The image
  itself is built by one command the stack outputs (``image_build_command``: Cloud Build with
  ``components/images/maxtext_ray/cloudbuild.yaml``); the objects reference it by a tag derived
  from the image's pins and build-context digest, so a tag always names one image content and an
  edit to the Dockerfile or the trainer shows up in ``pulumi preview`` as a new tag to build.
  Nodes pull with their node service account (the pools set none, so it is the Compute Engine
  default service account). That account used to get roles/editor automatically, but projects
  created under the ``iam.automaticIamGrantsForDefaultServiceAccounts`` constraint (enforced by
  default for new organizations since 2024) give it nothing, so the stack grants
  ``roles/artifactregistry.reader`` on this repository only.
* ``RayTraining`` — the ``RayCluster`` (CPU head, one TPU worker group per slice) and the
  ``RayJob`` that runs the trainer on it. KubeRay comes from the GKE Ray operator add-on that
  ``GkeCluster`` enables for this workload kind (no Helm controller). Both objects are replaced,
  not patched, when their spec changes: KubeRay does not roll existing Ray pods on a template
  change and does not re-run a finished RayJob, so an in-place update would silently keep the old
  image or arguments. Changing the run name (or any MaxText argument) therefore starts a new run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components import k8s as k8s_objects
from components.capacity import StackPlan
from components.config import StackConfig
from components.gke import GkeCluster
from components.identity import WorkloadIdentity
from components.render import maxtext_ray as render
from components.storage import StackBucket

READER_ROLE = "roles/artifactregistry.reader"


def node_service_account(project_number: str) -> str:
    """The Compute Engine default service account, which GKE nodes use when a pool names none."""
    return f"serviceAccount:{project_number}-compute@developer.gserviceaccount.com"


class TrainingImageRepository(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:maxtext_ray:TrainingImageRepository"

    repository: gcp.artifactregistry.Repository
    image: str
    build_command: str

    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-repo",
            repository_id=render.repository_id(config),
            project=config.project,
            location=config.region,
            format="DOCKER",
            description=f"{config.stack}: Ray + MaxText training images",
            # A tag names one build: pushing a changed image under an existing tag fails.
            docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
            labels=config.labels,
            opts=pulumi.ResourceOptions(parent=self, protect=config.policy.protect),
        )
        number = gcp.organizations.get_project_output(project_id=config.project).number
        self.node_reader = gcp.artifactregistry.RepositoryIamMember(
            f"{name}-node-reader",
            project=config.project,
            location=config.region,
            repository=self.repository.repository_id,
            role=READER_ROLE,
            member=number.apply(lambda n: node_service_account(str(n))),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.image = render.image_ref(config)
        self.build_command = render.build_command(config)
        self.register_outputs({"image": self.image, "build_command": self.build_command})


class RayTraining(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:maxtext_ray:RayTraining"

    ray_cluster: pulumi.CustomResource
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
        self.ray_cluster = k8s_objects.create(
            render.render_ray_cluster(stack),
            f"{name}-cluster",
            # The pods mount the bucket as the KSA and pull the image through the node grant.
            pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                depends_on=list(depends_on),
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        self.ray_job = k8s_objects.create(
            render.render_ray_job(stack),
            f"{name}-job",
            pulumi.ResourceOptions(
                parent=self,
                provider=cluster.provider,
                depends_on=[self.ray_cluster],
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        self.register_outputs({"ray_cluster": render.CLUSTER_NAME, "ray_job": render.run_name(stack)})


def deploy(
    stack: StackPlan, *, cluster: GkeCluster, identity: WorkloadIdentity, buckets: Mapping[str, StackBucket]
) -> Mapping[str, Any]:
    """Create the image repository and the Ray training objects; return the commands a user runs next."""
    config = stack.config
    image = TrainingImageRepository("training-image", config)
    bucket = buckets[config.workload.maxtext_ray.bucket]
    RayTraining("maxtext-ray", stack, cluster=cluster, depends_on=[identity, bucket, image])
    return {
        "training_image": image.image,
        "image_build_command": image.build_command,
        "ray_cluster": f"{identity.namespace}/{render.CLUSTER_NAME}",
        "rayjob": f"{identity.namespace}/{render.run_name(stack)}",
        "rayjob_status_command": render.status_command(stack),
        "rayjob_logs_command": render.logs_command(stack),
        "ray_dashboard_command": render.dashboard_command(stack),
        "training_output": render.output_url(stack),
    }
