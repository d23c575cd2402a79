"""Kubernetes objects of MaxText training on JobSet across several slices, as plain dicts (pure functions).

Shape from xpk's and GKE's multislice JobSets (AI-Hypercomputer/xpk ``workload create``: one replicated
Job with ``replicas`` = slices, ``parallelism`` = ``completions`` = hosts per slice, ``backoffLimit: 0``,
the ``alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool`` annotation so each
slice's Job takes one node pool alone; GKE "Deploy TPU Multislice in GKE"), and the command of MaxText's
guides (``python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml key=value ...``,
``docs/guides/checkpointing_solutions/multi_tier_checkpointing.md``). Differences:

* every hardware number is derived: replicas from ``tpu.slices``, hosts and chips from the slice,
  ``ici_*`` from the planner's slice mesh and ``dcn_*`` from the multislice mesh
  (``components/planner/multislice.py``), checked on the whole run's devices before anything renders;
* the image is MaxText's release image pinned by digest from the image catalog, never ``:latest``;
* outputs go to ``gs://`` directly through Workload Identity (the pods' KSA, least role objectUser on the
  one bucket), no FUSE mount;
* recovery: ``failurePolicy.maxRestarts`` restarts the whole set when any slice's Job fails (JobSet's
  default action, RestartJobSet: one multislice program spans every slice, so a lone restarted slice
  could not rejoin it); MaxText then resumes from the newest checkpoint of the run name (the RAM tier or
  its peer copy under Multi-Tier Checkpointing, else the bucket);
* with Multi-Tier Checkpointing every pod mounts the MTC CSI ramdisk at ``/local`` and MaxText gets the
  flags that use it (``catalog/checkpointing.py``).
"""

from __future__ import annotations

import shlex
from typing import Any

from ...catalog import checkpointing as mtc
from ...catalog import images
from ...catalog.models import MODELS
from ...catalog.tpu import NODEPOOL_LABEL
from ...config.resolve import StackPlan
from ...render import netpol
from ...render.core import (
    JOBSET_EXCLUSIVE,
    common_labels,
    override_value,
    slice_replicated_job,
    tpu_host_resources,
    tpu_toleration,
    with_baseline_security,
)
from .spec import IMAGE_NAME, multislice_plan, run_name, settings

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
REPLICATED_JOB = "slice"
CONTAINER = "maxtext"
COMPONENT = "maxtext-trainer"
TRAIN_MODULE = "maxtext.trainers.pre_train.train"
BASE_CONFIG = "src/maxtext/configs/base.yml"
RAMDISK_MOUNT = "/local"
RAMDISK_VOLUME = "mtc-ramdisk"
# TPU runtime and the multislice (megascale) coordinator ports xpk declares on its TPU containers.
PORTS = (("tpu-runtime", 8471), ("megascale", 8080))


def image_ref(stack: StackPlan) -> str:
    return images.image(IMAGE_NAME, settings(stack.config).image_tag).ref


def output_root(stack: StackPlan) -> str:
    config = stack.config
    spec = settings(config)
    return f"gs://{config.bucket_name(spec.bucket)}/{spec.output_dir}"


def output_url(stack: StackPlan) -> str:
    return f"{output_root(stack)}/{run_name(stack.config)}/"


def maxtext_overrides(stack: StackPlan) -> list[str]:
    """``key=value`` overrides: the run, the batch and the meshes from the planner, checkpointing, extras last."""
    config = stack.config
    spec = settings(config)
    slice_plan, mesh = multislice_plan(stack)
    derived: list[tuple[str, object]] = [
        ("run_name", run_name(config)),
        ("base_output_directory", output_root(stack)),
        ("model_name", MODELS[config.workload.model].maxtext_name),
        ("dataset_type", spec.dataset_type),
        *((("dataset_path", spec.dataset_path),) if spec.dataset_path else ()),
        ("per_device_batch_size", mesh.per_device_batch),
        ("max_target_length", config.workload.max_target_length),
        ("steps", spec.steps),
        ("num_slices", config.tpu.slices),
        *sorted(slice_plan.sharding.flags.items()),
        *sorted(mesh.flags().items()),
        ("enable_checkpointing", True),
        ("checkpoint_period", spec.checkpoint_period),
    ]
    tiers = spec.multi_tier_checkpointing
    if tiers.enabled:
        derived += [
            ("enable_multi_tier_checkpointing", True),
            ("local_checkpoint_directory", RAMDISK_MOUNT),
            ("local_checkpoint_period", tiers.local_checkpoint_period),
            ("multi_tier_checkpointing_backup_interval_minutes", tiers.backup_interval_minutes),
        ]
    derived += sorted(spec.maxtext_args.items())
    return [f"{key}={override_value(value)}" for key, value in derived]


def command(stack: StackPlan) -> list[str]:
    return ["python3", "-m", TRAIN_MODULE, BASE_CONFIG, *maxtext_overrides(stack)]


def render_jobset(stack: StackPlan) -> dict[str, Any]:
    """One JobSet: a replicated Job per slice (replicas = slices), one pod per TPU host, exclusive per pool."""
    config = stack.config
    spec = settings(config)
    tpu = stack.slice
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image_ref(stack),
        "command": command(stack),
        "ports": [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in PORTS],
        "resources": tpu_host_resources(tpu.tpu_per_host),
    }
    pod: dict[str, Any] = {
        "serviceAccountName": config.identity.service_account,
        "restartPolicy": "Never",
        "nodeSelector": dict(tpu.node_selector),
        "tolerations": [tpu_toleration()],
        "containers": [container],
    }
    if spec.multi_tier_checkpointing.enabled:
        container["volumeMounts"] = [{"name": RAMDISK_VOLUME, "mountPath": RAMDISK_MOUNT}]
        pod["volumes"] = [{"name": RAMDISK_VOLUME, "csi": {"driver": mtc.MTC_CSI_DRIVER}}]
    jobset: dict[str, Any] = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "name": run_name(config),
            "namespace": config.namespace,
            "labels": common_labels(config.stack, COMPONENT),
            "annotations": {JOBSET_EXCLUSIVE: NODEPOOL_LABEL},
        },
        "spec": {
            # Any slice's failure restarts every slice (RestartJobSet): they run one program.
            "failurePolicy": {"maxRestarts": spec.max_restarts},
            # Stable pod hostnames for the JAX coordinator (JobSet's headless Service).
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                slice_replicated_job(
                    REPLICATED_JOB,
                    slices=config.tpu.slices,
                    hosts=tpu.hosts,
                    pod_template={"metadata": {"labels": common_labels(config.stack, COMPONENT)}, "spec": pod},
                )
            ],
        },
    }
    return with_baseline_security(jobset)


def render_objects(stack: StackPlan) -> list[dict[str, Any]]:
    return [render_jobset(stack)]


def network_intents(stack: StackPlan) -> tuple[netpol.Intent, ...]:
    trainers = netpol.roles(COMPONENT)
    return (
        netpol.Flow(
            "maxtext-hosts",
            to=trainers,
            ports=netpol.ALL_PORTS,
            sources=(trainers,),
            why="the hosts of every slice form one JAX program: the coordinator, the TPU runtime and the "
            "multislice (megascale) transfers over DCN use ports the runtime picks",
        ),
    )


def logs_command(stack: StackPlan) -> str:
    """The first host of the first slice logs MaxText's step times."""
    name = run_name(stack.config)
    return shlex.join(["kubectl", "logs", "-f", "-n", stack.config.namespace, f"job/{name}-{REPLICATED_JOB}-0", "-c", CONTAINER])


def status_command(stack: StackPlan) -> str:
    return f"kubectl get jobset {run_name(stack.config)} -n {stack.config.namespace}"
