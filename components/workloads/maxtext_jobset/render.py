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

from ... import planner
from ...catalog import checkpointing as mtc
from ...catalog import images
from ...catalog.models import MODELS
from ...catalog.tpu import TPU_RESOURCE
from ...config.errors import NAMESPACE, ConfigError, Violation
from ...config.resolve import StackPlan
from ...planner import multislice, training_perf
from ...render import netpol
from ...render.core import common_labels, override_value, with_baseline_security
from .spec import IMAGE_NAME, SECTION, global_batch, run_name, settings

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
REPLICATED_JOB = "slice"
CONTAINER = "maxtext"
COMPONENT = "maxtext-trainer"
TRAIN_MODULE = "maxtext.trainers.pre_train.train"
BASE_CONFIG = "src/maxtext/configs/base.yml"
RAMDISK_MOUNT = "/local"
RAMDISK_VOLUME = "mtc-ramdisk"
TPU_TOLERATION = {"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
# TPU runtime and the multislice (megascale) coordinator ports xpk declares on its TPU containers.
PORTS = (("tpu-runtime", 8471), ("megascale", 8080))


def multislice_plan(stack: StackPlan) -> tuple[planner.Plan, multislice.MultisliceMesh]:
    """The slice's plan at the run's per-device batch and the hybrid mesh over every slice, verified; a
    ``ConfigError`` naming the key to change otherwise (exit 2 from the CLI)."""
    config = stack.config
    spec = settings(config)
    arch = MODELS[config.workload.model]
    total = global_batch(config)
    per_device = total / (stack.slice.chips * config.tpu.slices)
    try:
        slice_plan = stack.capacity
        if slice_plan.global_batch != per_device * stack.slice.chips:
            workload = planner.TrainingWorkload(
                per_device_batch_size=per_device,
                max_target_length=config.workload.max_target_length,
                reserve_fraction=config.workload.reserve_fraction,
                parallelism=config.workload.parallelism,
            )
            slice_plan = planner.verify_slice(arch, workload, stack.slice)
        mesh = multislice.derive(slice_plan, config.tpu.slices, spec.dcn_parallelism, total)
    except planner.PlanError as error:
        key, value = {
            "parallelism": (f"{SECTION}.dcnParallelism", spec.dcn_parallelism),
            "batch": (f"{SECTION}.globalBatchSize", total),
            "per_device_batch_size": (f"{SECTION}.globalBatchSize", total),
        }.get(error.field, ("tpu.topology", config.tpu.topology))
        raise ConfigError(
            [Violation(f"{NAMESPACE}:{key}", value, f"cannot train {arch.name}: {error}", "", "change it")]
        ) from None
    if spec.multi_tier_checkpointing.enabled:
        per_host = training_perf.checkpoint_bytes_per_host(arch, stack.slice, mesh.dcn.get("fsdp", 1))
        ram = stack.slice.generation.host_memory_gb.get(stack.slice.tpu_per_host)
        need = training_perf.ramdisk_bytes(per_host)
        if ram is not None and need > ram * 10**9:
            raise ConfigError(
                [
                    Violation(
                        f"{NAMESPACE}:{SECTION}.multiTierCheckpointing.enabled",
                        True,
                        f"needs a {need / 2**30:.0f} GiB RAM disk per host (2 x {per_host / 1e9:.1f} GB shard + 15%), "
                        f"more than the {ram} GB of a {stack.slice.machine_type} host",
                        "false",
                        "use a slice with more hosts, DCN fsdp, or turn it off",
                    )
                ]
            )
    return slice_plan, mesh


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
    chips = str(tpu.tpu_per_host)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image_ref(stack),
        "command": command(stack),
        "ports": [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in PORTS],
        "resources": {"requests": {TPU_RESOURCE: chips}, "limits": {TPU_RESOURCE: chips}},
    }
    pod: dict[str, Any] = {
        "serviceAccountName": config.identity.service_account,
        "restartPolicy": "Never",
        "nodeSelector": dict(tpu.node_selector),
        "tolerations": [dict(TPU_TOLERATION)],
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
            "annotations": {EXCLUSIVE_TOPOLOGY: NODE_POOL_LABEL},
        },
        "spec": {
            # Any slice's failure restarts every slice (RestartJobSet): they run one program.
            "failurePolicy": {"maxRestarts": spec.max_restarts},
            # Stable pod hostnames for the JAX coordinator (JobSet's headless Service).
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": config.tpu.slices,
                    "template": {
                        "spec": {
                            "parallelism": tpu.hosts,
                            "completions": tpu.hosts,
                            # One failed host breaks the slice's program: fail its Job at once.
                            "backoffLimit": 0,
                            "completionMode": "Indexed",
                            "template": {"metadata": {"labels": common_labels(config.stack, COMPONENT)}, "spec": pod},
                        }
                    },
                }
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


def ramdisk_quantity(stack: StackPlan) -> str:
    """The MTC ramdisk per host (``CheckpointConfiguration.spec.inMemoryVolumeSize``) from the planner's bytes."""
    _, mesh = multislice_plan(stack)
    arch = MODELS[stack.config.workload.model]
    return training_perf.ramdisk_quantity(training_perf.checkpoint_bytes_per_host(arch, stack.slice, mesh.dcn.get("fsdp", 1)))
