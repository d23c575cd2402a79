"""Kubernetes objects of the MaxText-on-Ray training workload, as plain dicts (pure functions).

Facts from the upstream tutorial (GoogleCloudPlatform/kubernetes-engine-samples
``ai-ml/gke-ray/raytrain/maxtext/``: ``ray-cluster.tpu-v6e-16.yaml``, ``maxtext_ray_trainer.py``,
``Dockerfile``; GKE tutorial distributed-training-tpu), with these differences:

* every hardware number is derived: ``numOfHosts`` = hosts of the slice, ``google.com/tpu`` = chips
  per host, node selectors from the slice, and the trainer's Ray ``ScalingConfig`` and MaxText's
  ``ici_*_parallelism`` from the same slice and the capacity plan (upstream types 4, "4", 4x4 and
  4 x 4 by hand in four places);
* the image is the project's own, run by a content-derived tag and the digest its build pushed
  (``image.built``), never ``:latest``; until that build exists the stack renders no Ray objects;
* the job is a declarative ``RayJob`` on the stack's ``RayCluster`` (``clusterSelector``) instead of
  a ``ray job submit`` from a laptop through a port-forward; under queued provisioning the RayJob
  carries the same cluster spec itself (``embeds_cluster``, ``render_ray_job``);
* the head fits the CPU system pool (upstream asks for 8 CPU), TPU workers tolerate the
  ``google.com/tpu`` taint explicitly, and upstream's unused ``gcs-fuse-cache`` volume (a name the
  GCS FUSE sidecar never looks for) is left out.

Every pod template carries the baseline security context (``components.render.core.with_baseline_security``).
"""

from __future__ import annotations

import shlex
from typing import Any

from ...catalog.models import MODELS
from ...catalog.tpu import TPU_RESOURCE, TpuSlice
from ...config import naming
from ...config.gke_rules import QUEUED_PROVISIONING
from ...config.resolve import StackPlan, workload_of
from ...config.stack import StackConfig
from ...render import netpol
from ...render.core import common_labels, override_value, tpu_toleration, with_baseline_security
from .spec import repository_id, settings

CLUSTER_NAME = "maxtext-tpu-cluster"
"""RayCluster name (upstream's); KubeRay names the head Service ``<name>-head-svc``. Only the standalone
cluster has it: a cluster a RayJob creates is named ``<rayjob>-<5 random characters>`` by KubeRay
(ray-project/kuberay ``ray-operator/controllers/ray/utils/util.go`` GenerateRayClusterName) and is
found through the RayJob's ``status.rayClusterName``."""
HEAD_SERVICE = f"{CLUSTER_NAME}-head-svc"
WORKER_GROUP = "tpu-group"
DATA_MOUNT = "/data"
DATA_VOLUME = "gcs-fuse-csi-ephemeral"
CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
# GCS FUSE sidecar injection and its limits ("0" = unlimited), as upstream on head and workers.
GCSFUSE_ANNOTATIONS = {
    "gke-gcsfuse/volumes": "true",
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
}
# implicit-dirs: MaxText and Ray create nested paths without writing directory placeholder objects.
MOUNT_OPTIONS = "implicit-dirs"
HEAD_PORTS = (("gcs-server", 6379), ("dashboard", 8265), ("client", 10001))
DASHBOARD_PORT = 8265

# Paths inside the image (components/workloads/maxtext_ray/image/Dockerfile).
TRAINER = "/app/maxtext_ray_trainer.py"
MAXTEXT_CONFIG = "/app/configs/base.yml"

IMAGE_CONTEXT_IN_REPO = "components/workloads/maxtext_ray/image"
BUILT_KEY = "gke-tpu-llm:workload.maxtextRay.image.built"
"""The stack config key the build command records the pushed image in (``pulumi config set --path``)."""

# KubeRay's default submitter resources (ray-operator common/job.go GetDefaultSubmitterTemplate).
SUBMITTER_RESOURCES = {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
CLUSTER_TTL_SECONDS = 0
"""``ttlSecondsAfterFinished`` of a RayJob that embeds its cluster: how long KubeRay keeps the cluster
after the job ends. It deletes only the RayCluster, never the RayJob ("TTLSecondsAfterFinished is the TTL
to clean up RayCluster", ``ray-operator/apis/ray/v1/rayjob_types.go``; ``handleShutdownAfterJobFinishes``
in ``rayjob_controller.go`` keeps the submitter Job "so that users can still access the driver logs"),
so the object Pulumi created stays and ``pulumi up`` does not recreate and re-run it (the reason the
JetStream converter Job has no TTL). 0 because every further second bills the whole slice, and
nothing is lost: the driver log stays in the submitter Job, checkpoints and metrics in the bucket."""


# ---------------------------------------------------------------- image


def image_tag(config: StackConfig, digest: str | None = None) -> str:
    """The image's tag (``digest``: the build context's digest, default the files in ``image/``)."""
    return settings(config).image.current_tag(digest)


def registry_host(config: StackConfig) -> str:
    return f"{config.region}-docker.pkg.dev"


def image_name(config: StackConfig, digest: str | None = None) -> str:
    """``<region>-docker.pkg.dev/<project>/<repository>/<name>:<tag>``: what the build pushes."""
    image = settings(config).image
    return f"{registry_host(config)}/{config.project}/{repository_id(config)}/{image.name}:{image_tag(config, digest)}"


def training_ready(config: StackConfig) -> bool:
    """Whether the pushed image's digest is recorded (``image.built``), so the Ray objects can run it.

    A build's digest is known only after the build has pushed the image, which needs the repository
    this stack creates: the first ``pulumi up`` creates the repository, ``image_build_command`` builds
    and records ``image.built``, and the next ``up`` creates the RayCluster and RayJob. The config
    rejects a ``built`` whose tag is not the current one (``MaxTextRayImageSpec``)."""
    return settings(config).image.digest is not None


def image_ref(config: StackConfig) -> str:
    """``<image_name>@sha256:<digest>``: what the Ray pods run, by tag and digest (ValueError before the build)."""
    digest = settings(config).image.digest
    if digest is None:
        raise ValueError(f"{config.stack}: the training image has no recorded digest ({BUILT_KEY} is unset)")
    return f"{image_name(config)}@{digest}"


def build_command(config: StackConfig) -> str:
    """The one command (run from the repository root) that builds and pushes the image by Cloud Build,
    then records what it pushed (``<tag>@<digest>``) in the stack's config.

    ``--suppress-logs`` keeps stdout to the finished build, whose ``results.images[0].digest`` is the
    digest Cloud Build pushed (Cloud Build API ``Results.images[]``: ``BuiltImage.digest``); gcloud
    prints the build's log URL on stderr. ``&&``: a failed build records nothing."""
    image = settings(config).image
    substitutions = ",".join(
        (
            f"_IMAGE={image_name(config)}",
            f"_RAY_VERSION={image.ray_version}",
            f"_MAXTEXT_VERSION={image.maxtext_version}",
        )
    )
    build = shlex.join(
        [
            "gcloud",
            "builds",
            "submit",
            IMAGE_CONTEXT_IN_REPO,
            "--project",
            config.project,
            "--config",
            f"{IMAGE_CONTEXT_IN_REPO}/cloudbuild.yaml",
            f"--substitutions={substitutions}",
            "--suppress-logs",
            "--format=value(results.images[0].digest)",
        ]
    )
    record = shlex.join(["pulumi", "config", "set", "--path", BUILT_KEY]) + f' "{image_tag(config)}@$digest"'
    return f"digest=$({build}) && {record}"


# ---------------------------------------------------------------- training run


def ray_accelerator_type(tpu_slice: TpuSlice) -> str:
    """Ray's TPU accelerator type (ray.util.accelerators: TPU-V6E, TPU-V5LITEPOD)."""
    return f"TPU-{tpu_slice.generation.cloud_tpu_prefix.upper()}"


def run_name(stack: StackPlan) -> str:
    """MaxText run_name and RayJob name: configured, or <model>-<length>-<slice> (a DNS-1035 label <= 47)."""
    config = stack.config
    spec = settings(config)
    if spec.run_name is not None:
        return spec.run_name
    return naming.fit(f"{config.workload.model}-{config.workload.max_target_length}-{stack.slice.key}", 47)


def output_dir(stack: StackPlan) -> str:
    """MaxText base_output_directory inside the pods (the bucket is mounted at /data)."""
    return f"{DATA_MOUNT}/{settings(stack.config).output_dir}"


def output_url(stack: StackPlan) -> str:
    """Where this run's checkpoints and logs land in the bucket."""
    config = stack.config
    spec = settings(config)
    return f"gs://{config.bucket_name(spec.bucket)}/{spec.output_dir}/{run_name(stack)}/"


def maxtext_overrides(stack: StackPlan) -> list[str]:
    """MaxText ``key=value`` overrides in the seed's order; parallelism from the plan, extras last."""
    config = stack.config
    workload = config.workload
    spec = settings(config)
    model = MODELS[workload.model].maxtext_name
    derived: list[tuple[str, object]] = [
        ("base_output_directory", output_dir(stack)),
        ("dataset_type", spec.dataset_type),
        # The planner's own workload, so the batch MaxText runs is the batch whose memory was verified.
        ("per_device_batch_size", workload_of(config).per_device_batch_size),
        ("max_target_length", workload.max_target_length),
        ("model_name", model),
        ("steps", spec.steps),
        *stack.flags.items(),
        ("run_name", run_name(stack)),
        *sorted(spec.maxtext_args.items()),
    ]
    return [f"{key}={override_value(value)}" for key, value in derived]


def trainer_argv(stack: StackPlan) -> list[str]:
    """The trainer command: slice shape first (derived from the catalog), then MaxText's config and overrides."""
    tpu_slice = stack.slice
    return [
        "python",
        TRAINER,
        "--num-workers",
        str(tpu_slice.hosts),
        "--topology",
        tpu_slice.topology,
        "--accelerator-type",
        ray_accelerator_type(tpu_slice),
        "--chips-per-worker",
        str(tpu_slice.tpu_per_host),
        "--storage-path",
        f"{output_dir(stack)}/ray-train",
        MAXTEXT_CONFIG,
        *maxtext_overrides(stack),
    ]


def entrypoint(stack: StackPlan) -> str:
    return shlex.join(trainer_argv(stack))


# ---------------------------------------------------------------- objects


def _volumes(bucket: str) -> list[dict[str, Any]]:
    return [
        {
            "name": DATA_VOLUME,
            "csi": {"driver": CSI_DRIVER, "volumeAttributes": {"bucketName": bucket, "mountOptions": MOUNT_OPTIONS}},
        },
        # Ray's object store lives in /dev/shm; the container default (64 MiB) is far too small.
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]


VOLUME_MOUNTS = [{"name": DATA_VOLUME, "mountPath": DATA_MOUNT}, {"name": "dshm", "mountPath": "/dev/shm"}]


def _pod_template(stack: StackPlan, component: str, spec: dict[str, Any]) -> dict[str, Any]:
    config = stack.config
    bucket = config.bucket_name(settings(config).bucket)
    return {
        "metadata": {"labels": common_labels(config.stack, component), "annotations": dict(GCSFUSE_ANNOTATIONS)},
        "spec": {
            "serviceAccountName": config.identity.service_account,
            **spec,
            "volumes": _volumes(bucket),
        },
    }


def embeds_cluster(config: StackConfig) -> bool:
    """The RayJob carries its own cluster (``spec.rayClusterSpec``) instead of using the standalone
    RayCluster: under DWS queued provisioning (the stack's first tier), where Kueue must admit the
    RayJob, not a long-lived cluster (``render_ray_job``)."""
    return config.tpu.tiers[0].type == QUEUED_PROVISIONING


def ray_cluster_spec(stack: StackPlan) -> dict[str, Any]:
    """The cluster's ``spec`` (CPU head, one multi-host TPU worker group): the standalone RayCluster's,
    or the RayJob's ``rayClusterSpec`` (``embeds_cluster``). Without the baseline security, which the
    object that holds it gets (``with_baseline_security`` finds the templates in either kind)."""
    config = stack.config
    spec = settings(config)
    tpu_slice = stack.slice
    image = image_ref(config)
    tpu = str(tpu_slice.tpu_per_host)
    head = {
        "containers": [
            {
                "name": "ray-head",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "ports": [{"name": name, "containerPort": port} for name, port in HEAD_PORTS],
                "resources": {
                    "requests": {"cpu": spec.head.cpu, "memory": spec.head.memory},
                    "limits": {"memory": spec.head.memory},
                },
                "volumeMounts": [dict(m) for m in VOLUME_MOUNTS],
            }
        ],
        # No node selector: without the TPU toleration the head can only land on the CPU system pool.
    }
    worker = {
        "nodeSelector": dict(tpu_slice.node_selector),
        "tolerations": [tpu_toleration()],
        "containers": [
            {
                "name": "ray-worker",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "env": [{"name": "JAX_PLATFORMS", "value": "tpu"}, {"name": "ENABLE_PJRT_COMPATIBILITY", "value": "true"}],
                "resources": {
                    "requests": {"cpu": spec.worker.cpu, "memory": spec.worker.memory, TPU_RESOURCE: tpu},
                    "limits": {"memory": spec.worker.memory, TPU_RESOURCE: tpu},
                },
                "volumeMounts": [dict(m) for m in VOLUME_MOUNTS],
            }
        ],
    }
    slices = config.tpu.slices
    return {
        "rayVersion": spec.image.ray_version,
        "headGroupSpec": {"rayStartParams": {}, "template": _pod_template(stack, "ray-head", head)},
        "workerGroupSpecs": [
            {
                "groupName": WORKER_GROUP,
                # One replica per slice, each a multi-host group that KubeRay scales atomically.
                "replicas": slices,
                "minReplicas": slices,
                "maxReplicas": slices,
                "numOfHosts": tpu_slice.hosts,
                "rayStartParams": {},
                "template": _pod_template(stack, "ray-worker", worker),
            }
        ],
    }


def render_ray_cluster(stack: StackPlan) -> dict[str, Any]:
    """The standalone RayCluster the RayJob submits to (``clusterSelector``); none when the RayJob
    embeds its cluster (``embeds_cluster``)."""
    config = stack.config
    ray_cluster: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": CLUSTER_NAME,
            "namespace": config.namespace,
            "labels": common_labels(config.stack, "ray-cluster"),
        },
        "spec": ray_cluster_spec(stack),
    }
    return with_baseline_security(ray_cluster)


def _cluster_source(stack: StackPlan) -> dict[str, Any]:
    """Where the RayJob runs: on the standalone RayCluster, or on a cluster of its own.

    Under queued provisioning the RayJob embeds the cluster and shuts it down when the job ends, as
    GKE's sample does (GoogleCloudPlatform/kubernetes-engine-samples
    ``ai-ml/gke-ray/tpu/dws/rayjob-tpu-v6e-dws.yaml``, commit aa1e155: a RayJob with ``rayClusterSpec``,
    ``shutdownAfterJobFinishes: true`` and the queue label). A standalone RayCluster would be admitted
    by Kueue once and then outlive the job, its TPU hosts billed until GKE reclaims them at
    ``maxRunHours``; after that KubeRay recreates the workers, which fit only on a queued pool, and
    nothing asks for a new ProvisioningRequest, so they stay Pending. The RayJob is what Kueue
    suspends, admits through the ProvisioningRequest and, when it finishes, releases with its nodes.
    Kueue's RayJob webhook requires exactly this shape of a queued RayJob: ``rayClusterSpec`` and no
    ``clusterSelector`` ("a kueue managed job should not use an existing cluster"), and
    ``shutdownAfterJobFinishes`` ("a kueue managed job should delete the cluster after finishing"),
    kubernetes-sigs/kueue ``pkg/controller/jobs/rayjob/rayjob_webhook.go`` at v0.19.2."""
    if not embeds_cluster(stack.config):
        return {"clusterSelector": {"ray.io/cluster": CLUSTER_NAME}}
    return {
        "rayClusterSpec": ray_cluster_spec(stack),
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": CLUSTER_TTL_SECONDS,
    }


def render_ray_job(stack: StackPlan) -> dict[str, Any]:
    config = stack.config
    labels = common_labels(config.stack, "ray-job")
    ray_job: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": run_name(stack), "namespace": config.namespace, "labels": labels},
        "spec": {
            **_cluster_source(stack),
            "entrypoint": entrypoint(stack),
            # A Kubernetes Job runs `ray job submit` and then follows the logs (kubectl logs job/<name>).
            "submissionMode": "K8sJobMode",
            # Explicit, because KubeRay releases before v1 fell back to rayproject/ray:latest for the
            # submitter of a clusterSelector job; this is the head's image, as current KubeRay does.
            # Kueue admits the submitter with the cluster (its "submitter" pod set, on the system flavor).
            "submitterPodTemplate": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "ray-job-submitter",
                            "image": image_ref(config),
                            "resources": {k: dict(v) for k, v in SUBMITTER_RESOURCES.items()},
                        }
                    ],
                },
            },
        },
    }
    return with_baseline_security(ray_job)


def render_objects(stack: StackPlan) -> list[dict[str, Any]]:
    """Every Ray object of the stack: the RayCluster and the RayJob, or the RayJob alone when it embeds
    its cluster; none before the image's digest is recorded (``training_ready``)."""
    if not training_ready(stack.config):
        return []
    if embeds_cluster(stack.config):
        return [render_ray_job(stack)]
    return [render_ray_cluster(stack), render_ray_job(stack)]


# ---------------------------------------------------------------- user commands


def status_command(stack: StackPlan) -> str:
    return f"kubectl get rayjob {run_name(stack)} -n {stack.config.namespace}"


def logs_command(stack: StackPlan) -> str:
    """The submitter Job (named after the RayJob) follows the Ray job's logs to completion."""
    return f"kubectl logs -f job/{run_name(stack)} -n {stack.config.namespace}"


def dashboard_command(stack: StackPlan) -> str:
    """Port-forward the Ray dashboard. A RayJob's own cluster has a name KubeRay picks, read from the
    RayJob's status when the command runs (run it with ``eval``); it exists only while the job runs."""
    namespace = stack.config.namespace
    ports = f"{DASHBOARD_PORT}:{DASHBOARD_PORT}"
    if not embeds_cluster(stack.config):
        return f"kubectl port-forward svc/{HEAD_SERVICE} {ports} -n {namespace}"
    lookup = shlex.join(["kubectl", "get", "rayjob", run_name(stack), "-n", namespace, "-o", "jsonpath={.status.rayClusterName}"])
    return f'kubectl port-forward "svc/$({lookup})-head-svc" {ports} -n {namespace}'


# ---------------------------------------------------------------- network flows (components.render.netpol)


def network_intents(stack: StackPlan) -> tuple[netpol.Intent, ...]:
    """Who reaches the Ray pods, and why (ports come from the rendered objects, by port name); no flow
    before there are Ray pods (``training_ready``), so the namespace keeps its default deny alone."""
    if not training_ready(stack.config):
        return ()
    cluster = netpol.roles("ray-head", "ray-worker")
    return (
        netpol.Flow(
            "ray-cluster",
            to=cluster,
            ports=netpol.ALL_PORTS,
            sources=(cluster,),
            why="head and workers of one Ray cluster: GCS, raylet, object manager and worker ports Ray picks at "
            "start (KubeRay's own NetworkPolicy allows every port within a RayCluster for the same reason)",
        ),
        netpol.Flow(
            "ray-job-api",
            to=netpol.roles("ray-head"),
            ports=netpol.PortNames(("dashboard",)),
            sources=(netpol.roles("ray-job"), netpol.InNamespace(netpol.KUBE_SYSTEM)),
            why="the job API runs code: only the RayJob's submitter (ray job submit) and KubeRay's RayJob controller "
            "(GetJobInfo; GKE hosts the operator, its traffic comes from kube-system) may call it",
        ),
    )
