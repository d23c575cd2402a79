"""MaxText training on JobSet across several slices (issue 29): the multislice mesh against XLA on a fake
CPU mesh, the JobSet against the vendored JobSet CRD, exclusive placement per slice pool, the Multi-Tier
Checkpointing RAM disk from the planner's bytes, the training figures, and bad combinations refused
through the real CLI (exit 2 naming the key)."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.catalog import checkpointing as mtc
from components.catalog.models import MODELS
from components.config import stack_files as stacks
from components.config.resolve import StackPlan, resolve_values
from components.planner import multislice, param_count, training_perf
from components.platform.addons import multi_tier_checkpointing as mtc_addon
from components.tools import plan_training
from components.tools.validate import validate_object
from components.workloads.maxtext_jobset import render
from components.workloads.maxtext_jobset import spec as jobset_spec
from tests.conftest import ROOT, run_cli_process

STACK = "llama3-8b-train-multislice"
STACK_FILE = ROOT / "stacks" / f"Pulumi.{STACK}.yaml"


def stack_values() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(STACK_FILE.read_text())["config"]
    return raw


def plan_of(values: dict[str, Any]) -> StackPlan:
    return resolve_values(values, STACK, [])


@pytest.fixture(scope="module")
def committed() -> StackPlan:
    return plan_of(stack_values())


def test_the_committed_stack_reads_as_the_helper_reads_it() -> None:
    assert stacks.read_stack_file(STACK_FILE).values == stack_values()


# ---------------------------------------------------------------- the mesh across slices


def test_mesh_puts_ici_in_the_slice_and_dcn_across_slices(committed: StackPlan) -> None:
    _, mesh = jobset_spec.multislice_plan(committed)
    assert mesh.slices == 2
    assert mesh.chips_per_slice == 16
    assert dict(mesh.ici) == {"fsdp": 4, "tensor": 4}
    assert dict(mesh.dcn) == {"data": 2, "fsdp": 1}
    assert mesh.hybrid == {"data": 2, "fsdp": 4, "tensor": 4}
    assert math.prod(mesh.hybrid.values()) == mesh.devices == 32
    assert mesh.global_batch == 32
    assert mesh.per_device_batch == 1
    args = render.command(committed)
    dcn = ("dcn_data_parallelism=2", "dcn_fsdp_parallelism=1")
    for flag in (*dcn, "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4", "num_slices=2"):
        assert flag in args


_XLA_CHECK = """
import json
from components.catalog.models import MODELS
from components.planner import multislice, plan, TrainingWorkload
from components.catalog.tpu import find_slice
arch = MODELS["llama3-8b"]
tpu = find_slice("v6e", "4x4")
out = {}
for label, slices, dcn in (("data", 2, None), ("fsdp", 2, {"fsdp": 2})):
    slice_plan = plan(arch, tpu, TrainingWorkload(per_device_batch_size=1, max_target_length=4096))
    mesh = multislice.derive(slice_plan, slices, dcn, 32)
    xla = multislice.xla_per_device_bytes(arch, mesh)
    out[label] = {"xla": xla, "planner": multislice.per_device_bytes(arch, mesh), "slice_weights": slice_plan.memory.weights,
                  "hybrid": mesh.hybrid}
print(json.dumps(out))
"""


@pytest.mark.slow  # a fresh interpreter with 32 fake devices compiling two programs
def test_multislice_mesh_matches_xla_on_a_fake_cpu_mesh() -> None:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=32",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    run = subprocess.run([sys.executable, "-c", _XLA_CHECK], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for label, r in results.items():
        xla = r["xla"]
        assert xla["devices"] == 32, label
        assert math.prod(xla["mesh_shape"].values()) == 32, label
        assert xla["mesh_shape"] == r["hybrid"], label
        # XLA's bytes per device for the laid-out parameters are the planner's, plus the output tuple's
        # table of buffer pointers (8 bytes per array).
        assert 0 <= xla["output_bytes_per_device"] - r["planner"] <= 1024, label
        # The global batch of 32 splits over data x fsdp (2 x 4, or 1 x 8): 4 sequences per batch shard,
        # replicated over tensor.
        assert xla["batch_shard"] == [32 // (r["hybrid"]["data"] * r["hybrid"]["fsdp"]), 1] == [4, 1], label
    # DCN data replicates a slice's parameters; DCN fsdp halves them (the slice plan is then an upper bound).
    assert results["data"]["planner"] == results["data"]["slice_weights"]
    # (Norm scales, which fsdp does not split, keep it a little above half.)
    assert results["data"]["planner"] / 2 < results["fsdp"]["planner"] < 0.51 * results["data"]["planner"]


def test_one_slice_has_no_dcn_axis_and_the_batch_must_split() -> None:
    arch = MODELS["llama3-8b"]
    from components.catalog.tpu import find_slice
    from components.planner import PlanError, TrainingWorkload, plan

    tpu = find_slice("v6e", "4x4")
    assert tpu is not None
    slice_plan = plan(arch, tpu, TrainingWorkload(per_device_batch_size=1, max_target_length=4096))
    with pytest.raises(PlanError, match="needs several slices") as error:
        multislice.derive(slice_plan, 1, {"data": 2}, 16)
    assert error.value.field == "parallelism"
    with pytest.raises(PlanError, match="does not split over data x fsdp") as error:
        multislice.derive(slice_plan, 2, None, 33)
    assert error.value.field == "batch"


# ---------------------------------------------------------------- the JobSet


def test_jobset_validates_strictly_against_the_vendored_crd(committed: StackPlan) -> None:
    jobset = render.render_jobset(committed)
    assert validate_object(jobset, controller_versions=committed.config.controllers.by_controller) == []
    broken = copy.deepcopy(jobset)
    broken["spec"]["replicatedJobs"][0]["replicaz"] = 2  # a typo: the strict schema must refuse it
    assert validate_object(broken, controller_versions=committed.config.controllers.by_controller)


def test_exclusive_placement_and_one_pool_per_slice(committed: StackPlan) -> None:
    config = committed.config
    jobset = render.render_jobset(committed)
    assert jobset["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == "cloud.google.com/gke-nodepool"
    (job,) = jobset["spec"]["replicatedJobs"]
    pools = config.pools_of_tier(0)
    assert pools == ["tpu-slice-0", "tpu-slice-1"]
    assert job["replicas"] == len(pools) == config.tpu.slices
    spec = job["template"]["spec"]
    assert spec["parallelism"] == spec["completions"] == committed.slice.hosts == 4
    pod = spec["template"]["spec"]
    # Every slice pool carries these labels; the exclusive annotation gives each Job a pool of its own.
    assert pod["nodeSelector"] == dict(committed.slice.node_selector)
    assert pod["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 10}


def test_multi_tier_checkpointing_mounts_the_ramdisk_and_sets_the_flags(committed: StackPlan) -> None:
    pod = render.render_jobset(committed)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": render.RAMDISK_VOLUME, "csi": {"driver": mtc.MTC_CSI_DRIVER}}]
    args = render.command(committed)
    for flag in (
        "enable_multi_tier_checkpointing=true",
        f"local_checkpoint_directory={render.RAMDISK_MOUNT}",
        "local_checkpoint_period=10",
        "multi_tier_checkpointing_backup_interval_minutes=30",
        "checkpoint_period=100",
    ):
        assert flag in args
    assert committed.config.addons >= {"jobset", "highScaleCheckpointing", "gcsFuseCsiDriver", "multiTierCheckpointing"}


def test_ramdisk_follows_the_stated_formula_from_the_planners_bytes(committed: StackPlan) -> None:
    arch = MODELS["llama3-8b"]
    # Orbax TrainState: float32 parameters + Adam mu, nu = 12 bytes per parameter (MaxText's rule).
    checkpoint = param_count(arch) * 12
    assert training_perf.checkpoint_bytes(arch) == checkpoint
    per_host = math.ceil(checkpoint / committed.slice.hosts)
    expected_gib = math.ceil(2 * per_host * 1.15 / 2**30)
    cpc = mtc_addon.render_checkpoint_configuration(committed.config)
    assert cpc["spec"]["inMemoryVolumeSize"] == f"{expected_gib}Gi"
    assert cpc["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ct6e-standard-4t"}
    assert cpc["spec"]["cloudStorageBucketName"] == mtc_addon.backup_bucket_name(committed.config)
    # A larger slice holds a smaller shard per host: the RAM disk shrinks with the hosts.
    assert training_perf.ramdisk_bytes(per_host // 2) < training_perf.ramdisk_bytes(per_host)


def test_plan_prints_the_training_figures(committed: StackPlan) -> None:
    e = plan_training.training_estimate(committed)
    assert e is not None
    assert e.tokens_per_step == 32 * 4096
    assert e.step_s == pytest.approx(e.compute_s + e.dcn_s)
    assert 0 < e.mfu < mtc.MFU_ASSUMED  # the unoverlapped DCN term lowers it below the compute MFU
    assert e.lost_slice_restore_tier == "peer"
    assert e.lost_slice_s == pytest.approx(10 * e.step_s + e.restore_s["peer"] + mtc.RESTART_OVERHEAD_S)
    # A peer restore crosses DCN at the slice's catalog bandwidth per host (like the gradient all-reduce)
    # into the new host's ramdisk, then restores from there: never faster than a local restore.
    dcn = e.checkpoint_bytes_per_host / committed.slice.dcn_bandwidth_per_host
    assert e.restore_s["peer"] == pytest.approx(dcn + e.restore_s["local"])
    assert e.restore_s["local"] < e.restore_s["peer"] < e.restore_s["gcs"]
    (on_demand,) = e.prices
    one_slice = committed.slice.capacity_price("us-east5", "onDemand")
    assert one_slice is not None
    assert on_demand.usd_per_hour == pytest.approx(2 * one_slice)
    text = "\n".join(plan_training.plan_lines(committed))
    for part in ("Step time", "predicted MFU", "Checkpoint", "Restore per host", "Lost slice", "per billion tokens"):
        assert part in text
    rows = plan_training.estimate_rows(committed, (1, 2, 4))
    assert [r["slices"] for r in rows] == [1, 2, 4]
    assert rows[0]["tokens_per_s_per_chip"] > rows[1]["tokens_per_s_per_chip"]  # one slice: no DCN term


# ---------------------------------------------------------------- bad combinations through the real CLI


def _cli_refuses(tmp_path: Path, values: dict[str, Any], key: str) -> None:
    path = tmp_path / f"Pulumi.{STACK}.yaml"
    path.write_text(yaml.safe_dump({"config": values}))
    proc = run_cli_process("plan", "--config", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert key in proc.stderr, proc.stderr


def _with(**workload: Any) -> dict[str, Any]:
    values = copy.deepcopy(stack_values())
    values["gke-tpu-llm:workload"]["maxtextJobset"].update(workload)
    return values


def test_one_slice_with_dcn_parallelism_exits_2(tmp_path: Path) -> None:
    values = _with(dcnParallelism={"data": 2}, multiTierCheckpointing={"enabled": False})
    values["gke-tpu-llm:tpu"]["slices"] = 1
    _cli_refuses(tmp_path, values, "gke-tpu-llm:workload.maxtextJobset.dcnParallelism")


def test_checkpointing_on_an_unsupported_cluster_exits_2(tmp_path: Path) -> None:
    values = _with()
    values["gke-tpu-llm:cluster"]["version"] = "1.31.5-gke.1000000"
    _cli_refuses(tmp_path, values, "gke-tpu-llm:cluster.version")


def test_checkpointing_on_one_slice_exits_2(tmp_path: Path) -> None:
    values = _with(globalBatchSize=16)
    values["gke-tpu-llm:tpu"]["slices"] = 1
    _cli_refuses(tmp_path, values, "gke-tpu-llm:workload.maxtextJobset.multiTierCheckpointing.enabled")


def test_slices_that_do_not_divide_the_batch_exit_2(tmp_path: Path) -> None:
    _cli_refuses(tmp_path, _with(globalBatchSize=33), "gke-tpu-llm:workload.maxtextJobset.globalBatchSize")


def test_maxtext_args_the_stack_derives_are_refused_each_with_its_fix() -> None:
    """The MaxText kinds share one maxtextArgs check: a derived key, an ici_*/dcn_* degree and a key MaxText
    cannot have each get their own problem and fix."""
    from components.config.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        resolve_values(_with(maxtextArgs={"steps": 5, "dcn_data_parallelism": 2, "Bad-Key": 1}), STACK)
    text = str(info.value)
    assert "maxtextJobset.maxtextArgs.steps: 5 is derived by the stack" in text
    assert "maxtextJobset.maxtextArgs.dcn_data_parallelism: 2 is parallelism" in text
    assert "workload.maxtextJobset.dcnParallelism" in text
    assert "maxtextJobset.maxtextArgs.Bad-Key" in text
    assert "is not a MaxText config key" in text
    resolve_values(_with(maxtextArgs={"log_period": 50}), STACK)  # any other MaxText key passes


def test_an_unset_topology_exits_2_not_a_traceback(tmp_path: Path) -> None:
    """The global batch and the DCN x ICI mesh are derived from one pinned slice shape."""
    values = _with()
    values["gke-tpu-llm:tpu"].pop("topology")
    values["gke-tpu-llm:tpu"].pop("machineType", None)
    _cli_refuses(tmp_path, values, "gke-tpu-llm:tpu.topology: None is required by maxtext-jobset")


def test_the_program_refuses_a_mesh_problem_before_registering(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mesh checks run when the stack resolves (``verify_plan``), not first in the renderer after the platform
    has registered: resolve itself raises."""
    from components.config.errors import ConfigError

    calls: list[str] = []
    real = jobset_spec.multislice_plan

    def recorded(plan: StackPlan) -> Any:
        calls.append(plan.config.stack)
        return real(plan)

    monkeypatch.setattr(jobset_spec, "multislice_plan", recorded)
    resolve_values(stack_values(), STACK)
    assert calls == [STACK]
    with pytest.raises(ConfigError, match="globalBatchSize"):
        resolve_values(_with(globalBatchSize=33), STACK)
