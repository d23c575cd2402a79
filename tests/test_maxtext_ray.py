"""MaxText training on KubeRay: the trainer (without Ray, MaxText or TPUs), the rendered RayCluster and
RayJob, the spec's rules, the components under mocks and the issue's acceptance checks on the stack."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import re
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.resolve import StackPlan, resolve
from components.program.build import build_platform
from components.render import tiers as capacity
from components.tools import mockengine, report
from components.tools.cli import main as cli
from components.tools.validate import validate_all
from components.workloads.maxtext_ray import component as component
from components.workloads.maxtext_ray import render as render
from components.workloads.maxtext_ray import spec as spec
from tests.conftest import BUILD_DIGEST, make_config, planned, planned_built

STACK = "llama3-8b-train"
TRAINER_PATH = spec.IMAGE_CONTEXT / "maxtext_ray_trainer.py"

TRAIN: dict[str, Any] = {
    "workload": {"kind": "maxtext-ray", "model": "llama3-8b", "maxTargetLength": 4096, "perDeviceBatchSize": 1},
    "buckets": {"checkpoints": {"purpose": "train-output", "holdsCheckpoints": True}},
    "identity": {"serviceAccount": "maxtext-trainer", "bucketRoles": {"checkpoints": "roles/storage.objectUser"}},
}


def train_plan(*, built: bool = True, **override: Any) -> StackPlan:
    """A training stack; ``built``: with its image's build recorded (``image.built``), so it has Ray objects."""
    merged = {key: value for key, value in TRAIN.items()}
    for key, value in override.items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    plan = resolve(make_config(**merged))
    if not built:
        return plan
    workload = copy.deepcopy(merged["workload"])
    image = workload.setdefault("maxtextRay", {}).setdefault("image", {})
    image["built"] = f"{render.image_tag(plan.config)}@{BUILD_DIGEST}"
    return resolve(make_config(**{**merged, "workload": workload}))


def load_trainer() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("maxtext_ray_trainer", TRAINER_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def trainer() -> types.ModuleType:
    return load_trainer()


SLICE_ARGS = ["--num-workers", "4", "--topology", "4x4", "--accelerator-type", "TPU-V6E", "--chips-per-worker", "4"]
CONFIG = "/app/configs/base.yml"


# ---------------------------------------------------------------- trainer (pure parts, no Ray)


def test_trainer_imports_without_ray_or_maxtext(trainer: types.ModuleType) -> None:
    assert "ray" not in sys.modules
    assert "MaxText" not in sys.modules
    assert trainer.WORKER_ENV["JAX_PLATFORMS"] == "tpu"
    assert "XLA_FLAGS" not in trainer.WORKER_ENV  # upstream's HLO dump is a debugging aid, left out


def test_trainer_parse_args_splits_slice_flags_from_maxtext_argv(trainer: types.ModuleType) -> None:
    args = trainer.parse_args(
        [
            *SLICE_ARGS,
            "--storage-path",
            "/data/x",
            CONFIG,
            "steps=100",
            "ici_fsdp_parallelism=4",
            "ici_tensor_parallelism=4",
            "run_name=r1",
        ]
    )
    assert (args.num_workers, args.chips_per_worker, args.chips, args.run_name) == (4, 4, 16, "r1")
    assert args.maxtext_argv() == [
        "MaxText.train",
        CONFIG,
        "steps=100",
        "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4",
        "run_name=r1",
    ]
    assert trainer.scaling_config_kwargs(args) == {
        "use_tpu": True,
        "num_workers": 4,
        "topology": "4x4",
        "accelerator_type": "TPU-V6E",
        "resources_per_worker": {"TPU": 4},
        "placement_strategy": "SPREAD",
    }
    run = trainer.run_config_kwargs(args)
    assert run["name"] == "r1"
    assert run["storage_path"] == "/data/x"
    assert run["worker_runtime_env"]["env_vars"]["ENABLE_PJRT_COMPATIBILITY"] == "true"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["ici_fsdp_parallelism=2", "ici_tensor_parallelism=4"], "= 8 devices, but the slice has 16 chips"),
        (["ici_tensor_parallelism=3"], "multiply to 3, which does not divide the slice's 16 chips"),
        (["ici_fsdp_parallelism=-1", "ici_tensor_parallelism=-1"], "at most one axis may be -1"),
        (["ici_tensor_parallelism=0"], "must be >= 1 or -1"),
        (["ici_tensor_parallelism=four"], "is not an integer"),
    ],
)
def test_trainer_rejects_parallelism_that_does_not_cover_the_slice(
    trainer: types.ModuleType, overrides: list[str], message: str
) -> None:
    with pytest.raises(trainer.UsageError, match=message):
        trainer.parse_args([*SLICE_ARGS, CONFIG, *overrides])


def test_trainer_fills_the_auto_axis_like_maxtext(trainer: types.ModuleType) -> None:
    # fsdp defaults to -1 in MaxText's base.yml: tensor=4 alone leaves fsdp=4 on 16 chips.
    assert trainer.check_parallelism([("ici_tensor_parallelism", "4")], 16) == {
        "ici_fsdp_parallelism": 4,
        "ici_tensor_parallelism": 4,
    }
    assert trainer.check_parallelism([], 16) == {"ici_fsdp_parallelism": 16}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-workers", "2", "--topology", "4x4", "--accelerator-type", "TPU-V6E", "--chips-per-worker", "4"], "has 16 chips"),
        (["--num-workers", "4", "--topology", "4x4x", "--accelerator-type", "TPU-V6E", "--chips-per-worker", "4"], "topology"),
        (["--num-workers", "4", "--topology", "4x4", "--accelerator-type", "v6e", "--chips-per-worker", "4"], "accelerator"),
    ],
)
def test_trainer_rejects_a_slice_description_that_is_not_one_slice(
    trainer: types.ModuleType, argv: list[str], message: str
) -> None:
    with pytest.raises(trainer.UsageError, match=message):
        trainer.parse_args([*argv, CONFIG])


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ([CONFIG, "steps=1", "steps=2"], "given twice"),
        ([CONFIG, "Steps=1"], "not key=value"),
        ([CONFIG, "steps"], "not key=value"),
        (["configs/base.yml"], "absolute path"),
    ],
)
def test_trainer_rejects_bad_maxtext_arguments(trainer: types.ModuleType, tail: list[str], message: str) -> None:
    with pytest.raises(trainer.UsageError, match=message):
        trainer.parse_args([*SLICE_ARGS, *tail])


def test_trainer_argparse_errors_exit_2(trainer: types.ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        trainer.parse_args(["--num-workers", "0", CONFIG])
    assert info.value.code == 2
    assert "--num-workers" in capsys.readouterr().err


class FakeRay:
    """Records what the trainer asks of ray / ray.train.v2 (the real ones are not in the test venv)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        fake = self

        class ScalingConfig:
            def __init__(self, **kwargs: Any) -> None:
                self.kwargs = kwargs

        class RunConfig:
            def __init__(self, **kwargs: Any) -> None:
                self.kwargs = kwargs

        class JaxTrainer:
            def __init__(self, **kwargs: Any) -> None:
                fake.calls.append(("JaxTrainer", kwargs))
                self.kwargs = kwargs

            def fit(self) -> None:
                # Ray would run the per-worker function on every TPU host; run it once here.
                fake.calls.append(("fit", None))
                self.kwargs["train_loop_per_worker"](self.kwargs["train_loop_config"])

        self.ray = types.ModuleType("ray")
        self.ray.shutdown = lambda: fake.calls.append(("shutdown", None))  # type: ignore[attr-defined]
        self.config = types.ModuleType("ray.train.v2.api.config")
        self.config.ScalingConfig = ScalingConfig  # type: ignore[attr-defined]
        self.config.RunConfig = RunConfig  # type: ignore[attr-defined]
        self.jax = types.ModuleType("ray.train.v2.jax")
        self.jax.JaxTrainer = JaxTrainer  # type: ignore[attr-defined]
        self.maxtext = types.ModuleType("MaxText.train")
        self.maxtext.main = lambda argv: fake.calls.append(("MaxText.train.main", argv))  # type: ignore[attr-defined]

    def modules(self) -> dict[str, types.ModuleType]:
        return {
            "ray": self.ray,
            "ray.train.v2.api.config": self.config,
            "ray.train.v2.jax": self.jax,
            "MaxText.train": self.maxtext,
        }


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay()
    for name, module in fake.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    return fake


def test_trainer_main_runs_jax_trainer_and_the_per_worker_entry_under_a_fake(
    trainer: types.ModuleType, fake_ray: FakeRay
) -> None:
    argv = [*SLICE_ARGS, CONFIG, "steps=3", "ici_fsdp_parallelism=4", "ici_tensor_parallelism=4", "run_name=r2"]
    assert trainer.main(argv) == 0
    names = [name for name, _ in fake_ray.calls]
    assert names == ["JaxTrainer", "fit", "MaxText.train.main", "shutdown"]
    built = fake_ray.calls[0][1]
    assert built["scaling_config"].kwargs["num_workers"] == 4
    assert built["scaling_config"].kwargs["resources_per_worker"] == {"TPU": 4}
    assert built["run_config"].kwargs["name"] == "r2"
    assert fake_ray.calls[2][1] == [
        "MaxText.train",
        CONFIG,
        "steps=3",
        "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4",
        "run_name=r2",
    ]


def test_trainer_main_fails_fast_on_a_mismatch_before_touching_ray(
    trainer: types.ModuleType, fake_ray: FakeRay, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trainer.main([*SLICE_ARGS, CONFIG, "ici_fsdp_parallelism=8", "ici_tensor_parallelism=4"]) == 2
    assert fake_ray.calls == []
    assert "32 devices, but the slice has 16 chips" in capsys.readouterr().err


def test_trainer_accepts_exactly_the_command_the_stack_renders(trainer: types.ModuleType) -> None:
    for stack in (train_plan(), train_plan(tpu={"topology": "4x8"}), planned_built(STACK).stack_plan):
        argv = shlex.split(render.entrypoint(stack))
        assert argv[:2] == ["python", render.TRAINER]
        args = trainer.parse_args(argv[2:])
        assert args.num_workers == stack.slice.hosts
        assert args.chips == stack.slice.chips
        assert args.config == render.MAXTEXT_CONFIG
        assert args.run_name == render.run_name(stack)
        mesh = trainer.check_parallelism(args.overrides, args.chips)
        assert mesh == stack.flags


# ---------------------------------------------------------------- rendered objects


def test_render_ray_cluster_derives_hosts_chips_and_selectors_from_the_slice() -> None:
    for stack in (train_plan(), train_plan(tpu={"topology": "4x8"})):
        cluster = render.render_ray_cluster(stack)
        (group,) = cluster["spec"]["workerGroupSpecs"]
        assert group["numOfHosts"] == stack.slice.hosts
        assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 1
        pod = group["template"]["spec"]
        (worker,) = pod["containers"]
        tpu = str(stack.slice.chips_per_host)
        assert worker["resources"]["requests"]["google.com/tpu"] == worker["resources"]["limits"]["google.com/tpu"] == tpu
        assert pod["nodeSelector"] == {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": stack.slice.topology,
        }
        assert pod["tolerations"] == [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert render.render_ray_cluster(train_plan(tpu={"topology": "4x8"}))["spec"]["workerGroupSpecs"][0]["numOfHosts"] == 8


def test_render_ray_cluster_mounts_the_bucket_on_head_and_workers_as_the_ksa() -> None:
    stack = train_plan()
    spec = render.render_ray_cluster(stack)["spec"]
    templates = [spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]]
    for template in templates:
        assert template["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
        pod = template["spec"]
        assert pod["serviceAccountName"] == "maxtext-trainer"
        (fuse,) = [v for v in pod["volumes"] if "csi" in v]
        assert fuse["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
        assert fuse["csi"]["volumeAttributes"]["bucketName"] == stack.config.bucket_name("checkpoints")
        assert {"name": fuse["name"], "mountPath": "/data"} in pod["containers"][0]["volumeMounts"]
        assert all(v["name"] != "gcs-fuse-cache" for v in pod["volumes"])  # upstream's unused volume
    head = templates[0]["spec"]
    assert "nodeSelector" not in head
    assert "tolerations" not in head
    assert head["containers"][0]["resources"]["requests"] == {"cpu": "2", "memory": "8Gi"}


def test_render_job_passes_the_seed_arguments_with_parallelism_from_the_plan() -> None:
    stack = train_plan()
    job = render.render_ray_job(stack)
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": render.CLUSTER_NAME}
    assert job["metadata"]["name"] == "llama3-8b-4096-v6e-4x4"
    argv = shlex.split(job["spec"]["entrypoint"])
    overrides = argv[argv.index(render.MAXTEXT_CONFIG) + 1 :]
    assert [o.split("=")[0] for o in overrides] == [
        "base_output_directory",
        "dataset_type",
        "per_device_batch_size",
        "max_target_length",
        "model_name",
        "steps",
        "ici_fsdp_parallelism",
        "ici_tensor_parallelism",
        "run_name",
    ]
    values = dict(o.split("=", 1) for o in overrides)
    assert values["base_output_directory"] == "/data/maxtext"
    assert values["dataset_type"] == "synthetic"
    assert values["per_device_batch_size"] == "1"
    assert values["steps"] == "100"
    assert values["model_name"] == "llama3-8b"
    assert {k: int(v) for k, v in values.items() if k.startswith("ici_")} == stack.flags
    submitter = job["spec"]["submitterPodTemplate"]["spec"]["containers"][0]
    assert submitter["image"] == render.image_ref(stack.config)


def test_render_job_follows_pinned_parallelism_and_extra_args() -> None:
    stack = train_plan(
        workload={
            "parallelism": {"fsdp": 8, "tensor": 2},
            "maxtextRay": {"maxtextArgs": {"checkpoint_period": 50, "enable_checkpointing": True}},
        },
    )
    argv = shlex.split(render.entrypoint(stack))
    assert "ici_fsdp_parallelism=8" in argv
    assert "ici_tensor_parallelism=2" in argv
    assert argv[-2:] == ["checkpoint_period=50", "enable_checkpointing=true"]


def test_render_objects_validate_against_the_kuberay_schemas() -> None:
    for stack in (train_plan(), train_plan(tpu={"topology": "4x8"}), train_plan(workload={"maxtextRay": {"runName": "exp-2"}})):
        objects = [render.render_ray_cluster(stack), render.render_ray_job(stack)]
        assert validate_all(objects) == []
    broken = render.render_ray_cluster(train_plan())
    broken["spec"]["workerGroupSpecs"][0]["numHosts"] = 4  # a typo must fail validation
    assert validate_all([broken])


def test_render_image_is_pinned_and_its_tag_follows_the_build_context(tmp_path: Path) -> None:
    config = train_plan().config
    ref = render.image_ref(config)
    name = "us-east5-docker.pkg.dev/test-project-123/test/ray-maxtext:ray2.49.1-maxtext0.1.0-"
    assert ref.startswith(name)
    assert ref.endswith(f"@{BUILD_DIGEST}")  # by tag and the digest the build recorded
    assert ref == f"{render.image_name(config)}@{BUILD_DIGEST}"
    for file in spec.IMAGE_FILES:
        shutil.copy(spec.IMAGE_CONTEXT / file, tmp_path / file)
    same = spec.context_digest.__wrapped__(tmp_path)
    assert same == spec.context_digest()
    with (tmp_path / "maxtext_ray_trainer.py").open("a") as handle:
        handle.write("\n# edited\n")
    assert spec.context_digest.__wrapped__(tmp_path) != same
    assert render.image_tag(config, "f" * 64).endswith("-ffffffffffff")
    tagged = train_plan(workload={"maxtextRay": {"image": {"tag": "v7", "repository": "images"}}}).config
    assert render.image_ref(tagged) == f"us-east5-docker.pkg.dev/test-project-123/images/ray-maxtext:v7@{BUILD_DIGEST}"


def test_image_built_is_refused_for_another_tag_and_objects_wait_for_it() -> None:
    # Before the build: no digest, so no Ray objects, no flows to them, and an output that says why.
    waiting = train_plan(built=False)
    assert not render.training_ready(waiting.config)
    assert render.render_objects(waiting) == []
    assert render.network_intents(waiting) == ()
    with pytest.raises(ValueError, match="no recorded digest"):
        render.image_ref(waiting.config)
    # A digest recorded for an earlier tag (the Dockerfile or a pin changed since) is refused at load.
    stale = {"maxtextRay": {"image": {"rayVersion": "2.49.0", "built": f"{render.image_tag(waiting.config)}@{BUILD_DIGEST}"}}}
    with pytest.raises(ConfigError) as info:
        train_plan(built=False, workload=stale)
    text = str(info.value)
    assert "gke-tpu-llm:workload.maxtextRay.image.built:" in text
    assert "but the image is now tag ray2.49.0-maxtext0.1.0-" in text
    assert "run image_build_command" in text
    with pytest.raises(ConfigError, match=re.escape("maxtextRay.image.built")):
        train_plan(built=False, workload={"maxtextRay": {"image": {"built": "sha256:" + "5" * 64}}})  # no tag


def test_image_context_hashes_every_file_the_image_is_built_from() -> None:
    present = {p.name for p in spec.IMAGE_CONTEXT.iterdir() if p.is_file() and p.suffix != ".pyc"}
    assert present - {"cloudbuild.yaml", ".gcloudignore"} == set(spec.IMAGE_FILES)


def test_image_dockerfile_and_cloudbuild_agree_with_the_render() -> None:
    text = (spec.IMAGE_CONTEXT / "Dockerfile").read_text()
    dockerfile = "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"
    # Pins come only from the stack (build arguments without defaults), never :latest.
    assert "ARG RAY_VERSION\n" in dockerfile
    assert "ARG MAXTEXT_VERSION\n" in dockerfile
    assert "FROM rayproject/ray:${RAY_VERSION}-py312" in dockerfile
    assert '"maxtext==${MAXTEXT_VERSION}"' in dockerfile
    assert ":latest" not in dockerfile
    assert "git clone" not in dockerfile
    assert f"COPY maxtext_ray_trainer.py {render.TRAINER}" in dockerfile
    assert str(Path(render.MAXTEXT_CONFIG).parent) in dockerfile
    requirements = (spec.IMAGE_CONTEXT / "requirements.txt").read_text().split()
    assert [r for r in requirements if not r.startswith("#") and "==" in r] == ["uv==0.9.30"]
    build = yaml.safe_load((spec.IMAGE_CONTEXT / "cloudbuild.yaml").read_text())
    config = train_plan(built=False).config
    command = render.build_command(config)
    # digest=$(gcloud builds submit ...) && pulumi config set --path <key> "<tag>@$digest"
    assert command.startswith("digest=$(")
    assert ") && " in command
    submit, record = command.removeprefix("digest=$(").split(") && ", 1)
    argv = shlex.split(submit)
    assert argv[:4] == ["gcloud", "builds", "submit", render.IMAGE_CONTEXT_IN_REPO]
    assert argv[-2:] == ["--suppress-logs", "--format=value(results.images[0].digest)"]
    (flag,) = [a for a in argv if a.startswith("--substitutions=")]
    substitutions = dict(kv.split("=", 1) for kv in flag.removeprefix("--substitutions=").split(","))
    used = {token for step in build["steps"] for arg in step["args"] for token in _substitutions(arg)}
    assert used | {token for image in build["images"] for token in _substitutions(image)} == set(substitutions)
    assert substitutions["_IMAGE"] == render.image_name(config)
    assert (substitutions["_RAY_VERSION"], substitutions["_MAXTEXT_VERSION"]) == ("2.49.1", "0.1.0")
    tag = render.image_tag(config)
    assert shlex.split(record.replace("$digest", BUILD_DIGEST)) == [
        "pulumi", "config", "set", "--path", "gke-tpu-llm:workload.maxtextRay.image.built", f"{tag}@{BUILD_DIGEST}"
    ]  # fmt: skip


def _substitutions(text: str) -> set[str]:
    import re

    return set(re.findall(r"\$\{(_[A-Z_]+)\}", text))


def test_render_run_name_is_a_rayjob_name_for_every_catalog_llama() -> None:
    capacity = train_plan().capacity  # the name needs only the config and the slice
    for model in ("llama3.1-405b", "llama3.1-70b", "llama2-70b"):
        config = make_config(**{**TRAIN, "workload": {**TRAIN["workload"], "model": model, "maxTargetLength": 1024}})
        name = render.run_name(StackPlan(config, capacity, selected=False))
        assert len(name) <= 47
        assert name[0].isalpha()
        assert "." not in name


# ---------------------------------------------------------------- spec rules


def test_spec_rejects_maxtext_args_the_stack_derives() -> None:
    with pytest.raises(ConfigError) as info:
        train_plan(workload={"maxtextRay": {"maxtextArgs": {"steps": 5, "ici_fsdp_parallelism": 2, "Bad-Key": 1}}})
    text = str(info.value)
    assert "maxtextRay.maxtextArgs.steps: 5 is derived by the stack" in text
    assert "maxtextArgs.ici_fsdp_parallelism: 2 is parallelism" in text
    assert "gke-tpu-llm:workload.parallelism" in text
    assert "maxtextArgs.Bad-Key" in text


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"image": {"tag": "latest"}}, "is a floating tag"),
        ({"runName": "Run_1"}, "has the wrong format"),
        ({"head": {"cpu": "two"}}, "has the wrong format"),
        ({"outputDir": "../up"}, "has the wrong format"),
    ],
)
def test_spec_rejects_bad_values(override: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        train_plan(workload={"maxtextRay": override})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"workload": {"maxtextRay": {"bucket": "weights"}}}, "workload.maxtextRay.bucket: 'weights' names no bucket"),
        (
            {"identity": {"bucketRoles": {"checkpoints": "roles/storage.objectViewer"}}},
            "identity.bucketRoles.checkpoints: 'roles/storage.objectViewer' does not let the trainer write",
        ),
        ({"tpu": {"slices": 2}}, "gke-tpu-llm:tpu.slices: 2 is more than one slice"),
    ],
)
def test_spec_stack_rules_fail_at_config_load(override: dict[str, Any], message: str) -> None:
    # StackConfig runs the workload's rules while loading, so nothing at all is registered.
    with pytest.raises(ConfigError, match=re.escape(message)):
        train_plan(**override)


# ---------------------------------------------------------------- components under mocks


def build_workload(stack: StackPlan, *, expect_error: bool = False) -> dict[str, Any]:
    platform = build_platform(stack.config)
    cluster, buckets, identity = platform.cluster, platform.buckets, platform.identity
    try:
        return dict(component.deploy(stack, cluster=cluster, identity=identity, buckets=buckets))
    except ConfigError:
        if not expect_error:
            raise
        return {}


def test_component_registers_repository_node_grant_and_ray_objects() -> None:
    stack = train_plan()
    holder: dict[str, Any] = {}
    records, _ = mockengine.record(lambda: holder.update(build_workload(stack)), stack="test", project="test-project-123")
    by_type = {r.type: r for r in records}
    repo = by_type["gcp:artifactregistry/repository:Repository"]
    assert repo.parent == by_type[component.TrainingImageRepository.TYPE].urn
    assert repo.inputs["format"] == "DOCKER"
    assert repo.inputs["location"] == "us-east5"
    assert repo.inputs["dockerConfig"] == {"immutableTags": True}
    grant = by_type["gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"]
    assert grant.inputs["role"] == "roles/artifactregistry.reader"
    # the stack's node account (every pool runs as it), never the Compute Engine default one
    assert grant.inputs["member"] == "serviceAccount:test-tpu-nodes@test-project-123.iam.gserviceaccount.com"
    assert grant.inputs["repository"] == repo.inputs["repositoryId"]
    ray_cluster = by_type["kubernetes:ray.io/v1:RayCluster"]
    ray_job = by_type["kubernetes:ray.io/v1:RayJob"]
    training = by_type[component.RayTraining.TYPE]
    assert ray_cluster.parent == ray_job.parent == training.urn
    assert ray_cluster.provider is not None
    assert ray_job.dependencies == [ray_cluster.urn]
    # The pods need the KSA, its bucket grant, the bucket and the image's pull grant first.
    assert {by_type["kubernetes:core/v1:ServiceAccount"].urn, grant.urn, repo.urn} <= set(ray_cluster.dependencies)
    assert ray_cluster.options["deleteBeforeReplace"]
    assert ray_job.options["deleteBeforeReplace"]
    assert holder["training_image"] == render.image_ref(stack.config)
    assert holder["rayjob_status_command"] == "kubectl get rayjob llama3-8b-4096-v6e-4x4 -n test"
    assert holder["rayjob_logs_command"] == "kubectl logs -f job/llama3-8b-4096-v6e-4x4 -n test"
    assert holder["training_output"] == "gs://test-project-123-test-checkpoints/maxtext/llama3-8b-4096-v6e-4x4/"
    assert holder["image_build_command"].startswith("digest=$(gcloud builds submit components/workloads/maxtext_ray/image ")
    assert "training_waits_for" not in holder


def test_component_before_the_build_creates_the_repository_alone() -> None:
    stack = train_plan(built=False)
    holder: dict[str, Any] = {}
    records, _ = mockengine.record(lambda: holder.update(build_workload(stack)), stack="test", project="test-project-123")
    types_ = {r.type for r in records}
    repository = "gcp:artifactregistry/repository:Repository"
    assert {repository, "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"} <= types_
    assert not {component.RayTraining.TYPE, "kubernetes:ray.io/v1:RayCluster", "kubernetes:ray.io/v1:RayJob"} & types_
    assert holder["training_image"] == render.image_name(stack.config)  # the name the build pushes
    assert "run image_build_command" in holder["training_waits_for"]
    assert not {"rayjob", "rayjob_logs_command", "ray_dashboard_command"} & set(holder)


def test_component_type_tokens_name_this_module() -> None:
    for cls in (component.TrainingImageRepository, component.RayTraining):
        assert cls.TYPE == f"gke-tpu-llm:maxtext_ray:{cls.__name__}"


# ---------------------------------------------------------------- acceptance on the stack


def test_acceptance_plan_json_shows_the_training_stack() -> None:
    data = report.plan_json(planned_built(STACK))
    assert data["cluster"]["addons"] == ["gcsFuseCsiDriver", "rayOperator"]
    resources = data["resources"]
    (cluster,) = [r for r in resources if r["type"] == "gcp:container/cluster:Cluster"]
    assert cluster["inputs"]["addonsConfig"]["rayOperatorConfigs"] == [{"enabled": True}]
    assert cluster["inputs"]["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    (pool,) = [r for r in resources if r["type"] == "gcp:container/nodePool:NodePool" and r["inputs"]["name"] != "system"]
    assert pool["inputs"]["nodeCount"] == 4
    assert pool["inputs"]["placementPolicy"]["tpuTopology"] == "4x4"
    assert pool["inputs"]["nodeConfig"]["advancedMachineFeatures"] == {"threadsPerCore": 1}
    assert [r for r in resources if r["type"] == "gcp:storage/bucket:Bucket"]
    (binding,) = [r for r in resources if r["type"] == "gcp:storage/bucketIAMMember:BucketIAMMember"]
    assert binding["inputs"]["member"].startswith("principal://")
    assert binding["inputs"]["member"].endswith("/sa/maxtext-trainer")
    assert [r for r in resources if r["type"] == "gcp:artifactregistry/repository:Repository"]
    image = data["outputs"]["training_image"]
    assert image.startswith("us-east5-docker.pkg.dev/your-project-id/llama3-8b-train/ray-maxtext:ray2.49.1-maxtext0.1.0-")
    (ray_cluster,) = [m for m in data["manifests"] if m["kind"] == "RayCluster"]
    (group,) = ray_cluster["spec"]["workerGroupSpecs"]
    assert group["numOfHosts"] == 4
    (worker,) = group["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["google.com/tpu"] == "4"
    assert worker["image"] == image
    assert {"name": "gcs-fuse-csi-ephemeral", "mountPath": "/data"} in worker["volumeMounts"]
    (job,) = [m for m in data["manifests"] if m["kind"] == "RayJob"]
    args = dict(a.split("=", 1) for a in shlex.split(job["spec"]["entrypoint"]) if "=" in a)
    mesh = (int(args["ici_fsdp_parallelism"]), int(args["ici_tensor_parallelism"]))
    assert mesh == (4, 4)
    assert math.prod(mesh) == data["slices"][0]["chips"] == 16
    assert data["outputs"]["rayjob_status_command"].startswith("kubectl get rayjob ")
    assert image.endswith(f"@{BUILD_DIGEST}")
    assert data["outputs"]["image_build_command"].count(image.rpartition("@")[0]) == 1
    assert validate_all(data["manifests"]) == []


def test_acceptance_committed_stack_waits_for_its_build(capsys: pytest.CaptureFixture[str]) -> None:
    # The committed stack records no build: it plans the repository and says what to run, with no
    # Ray object in its manifests (so every image the manifests reference carries a digest).
    result = planned(STACK)
    assert not [m for m in result.manifests if m["kind"] in ("RayCluster", "RayJob")]
    assert "image_build_command" in result.outputs
    assert cli(["plan", STACK]) == 0
    assert "waiting: the training image's digest, known once it is built" in capsys.readouterr().out


def _bad_stack(tmp_path: Path, workload: dict[str, Any]) -> Path:
    doc = yaml.safe_load(stacks.stack_path(STACK).read_text())
    doc["config"]["gke-tpu-llm:workload"] = {**doc["config"]["gke-tpu-llm:workload"], **workload}
    path = tmp_path / "Pulumi.bad-train.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"parallelism": {"fsdp": 2, "tensor": 4}}, "mesh fsdp=2 x tensor=4 has 8 devices but slice v6e-4x4 has 16 chips"),
        ({"maxtextRay": {"bucket": "weights"}}, "workload.maxtextRay.bucket: 'weights' names no bucket"),
    ],
)
def test_acceptance_plan_exits_2_when_the_job_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workload: dict[str, Any], message: str
) -> None:
    assert cli(["plan", "--config", str(_bad_stack(tmp_path, workload)), "--json"]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["error"]["kind"] == "config"
    assert "invalid stack configuration" in out.err
    assert message in out.err


def test_acceptance_stack_outputs_are_json() -> None:
    outputs = planned_built(STACK).outputs
    for key in ("image_build_command", "rayjob_logs_command", "ray_dashboard_command", "training_output"):
        assert isinstance(outputs[key], str)
    json.dumps(outputs)


# ---------------------------------------------------------------- queued provisioning: one RayJob with its own cluster

QUEUED_STACK = "llama3-8b-train-queued"
QUEUED_TPU: dict[str, Any] = {"zone": "us-east5-a", "capacity": [{"type": "queuedProvisioning", "maxRunHours": 12}]}


def test_queued_rayjob_embeds_the_standalone_cluster_spec_and_shuts_it_down() -> None:
    stack = train_plan(tpu=QUEUED_TPU)
    assert render.embeds_cluster(stack.config)
    (job,) = render.render_objects(stack)
    spec = job["spec"]
    # The very cluster the standalone RayCluster would be (head, worker group, image, volumes, security).
    assert spec["rayClusterSpec"] == render.render_ray_cluster(stack)["spec"]
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["ttlSecondsAfterFinished"] == 0
    # Kueue's RayJob webhook: no existing cluster, no in-tree autoscaling, no worker group named "head".
    assert "clusterSelector" not in spec
    assert "enableInTreeAutoscaling" not in spec["rayClusterSpec"]
    assert all(g["groupName"] != "head" for g in spec["rayClusterSpec"]["workerGroupSpecs"])
    # Everything else of the RayJob is what the non-queued stack renders.
    standalone = render.render_ray_job(train_plan())
    assert {
        k: v for k, v in spec.items() if k not in ("rayClusterSpec", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished")
    } == {k: v for k, v in standalone["spec"].items() if k != "clusterSelector"}
    # Derived, not copied: a bigger slice changes hosts in the embedded cluster too.
    (bigger,) = render.render_objects(train_plan(tpu={**QUEUED_TPU, "topology": "4x8"}))
    assert bigger["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] == 8


def test_queued_stack_plans_one_queued_rayjob_and_no_raycluster() -> None:
    result = planned_built(QUEUED_STACK)
    stack = result.stack_plan
    kinds = [m["kind"] for m in result.manifests]
    assert "RayCluster" not in kinds
    (job,) = [m for m in result.manifests if m["kind"] == "RayJob"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == capacity.local_queue_name(result.config)
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True
    assert "clusterSelector" not in spec
    (group,) = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert group["numOfHosts"] == stack.slice.hosts
    worker = group["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["google.com/tpu"] == str(stack.slice.tpu_per_host)
    assert worker["nodeSelector"] == dict(stack.slice.node_selector)
    assert f"--accelerator-type {render.ray_accelerator_type(stack.slice)}" in spec["entrypoint"]
    queued = {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}
    assert queued in worker["tolerations"]  # the scheduling transformation reached the embedded template
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert "tolerations" not in head  # the CPU head stays on the system pool
    assert head["securityContext"] == worker["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    # Created after Kueue holds the queue (else it would not be suspended for admission), and after the
    # KSA, bucket and image grant its pods need.
    by_name = {r.name: r for r in result.resources}
    ray_job = by_name["maxtext-ray-job"]
    assert by_name["capacity-scheduling-localqueue-tpu"].urn in ray_job.dependencies
    assert by_name["training-image-node-reader"].urn in ray_job.dependencies
    assert "maxtext-ray-cluster" not in by_name
    # The network policies select the embedded cluster's pods by their template labels: the same
    # policies as the standalone cluster's, for this stack's instance label.
    policies = {m["metadata"]["name"]: m["spec"] for m in result.manifests if m["kind"] == "NetworkPolicy"}
    standalone = {m["metadata"]["name"]: m["spec"] for m in planned_built(STACK).manifests if m["kind"] == "NetworkPolicy"}
    renamed = json.dumps(standalone).replace(f'"{STACK}"', f'"{QUEUED_STACK}"')
    assert policies == json.loads(renamed)
    assert policies["allow-ray-cluster"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/instance": QUEUED_STACK}
    assert "ray_cluster" not in result.outputs
    assert validate_all(result.manifests, controller_versions=result.config.controllers.by_controller) == []


def test_queued_rayjob_strict_validation_covers_the_embedded_cluster() -> None:
    (job,) = render.render_objects(train_plan(tpu=QUEUED_TPU))
    assert validate_all([job]) == []
    broken = json.loads(json.dumps(job))
    broken["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numHosts"] = 4  # a typo inside the cluster
    assert validate_all([broken])
    broken = json.loads(json.dumps(job))
    broken["spec"]["shutdownAfterJobFinishes"] = "true"  # a string is not a boolean
    assert validate_all([broken])


def test_non_queued_stacks_keep_the_standalone_cluster_exactly() -> None:
    for name in (STACK, "llama3-8b-train-v5p"):
        result = planned_built(name)
        assert not render.embeds_cluster(result.config)
        ray = [m for m in result.manifests if m["kind"] in ("RayCluster", "RayJob")]
        assert [m["kind"] for m in ray] == ["RayCluster", "RayJob"]
        assert ray[1]["spec"]["clusterSelector"] == {"ray.io/cluster": render.CLUSTER_NAME}
        assert not {"rayClusterSpec", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished"} & set(ray[1]["spec"])
        assert result.outputs["ray_cluster"] == f"{result.config.namespace}/{render.CLUSTER_NAME}"


def test_queued_component_registers_the_rayjob_alone(tmp_path: Path) -> None:
    stack = train_plan(tpu=QUEUED_TPU)
    holder: dict[str, Any] = {}
    records, _ = mockengine.record(lambda: holder.update(build_workload(stack)), stack="test", project="test-project-123")
    by_type = {r.type: r for r in records}
    assert "kubernetes:ray.io/v1:RayCluster" not in by_type
    ray_job = by_type["kubernetes:ray.io/v1:RayJob"]
    assert ray_job.parent == by_type[component.RayTraining.TYPE].urn
    assert {by_type["kubernetes:core/v1:ServiceAccount"].urn, by_type["gcp:artifactregistry/repository:Repository"].urn} <= set(
        ray_job.dependencies
    )
    assert ray_job.options["deleteBeforeReplace"]
    assert "ray_cluster" not in holder
    assert holder["rayjob_status_command"] == "kubectl get rayjob llama3-8b-4096-v6e-4x4 -n test"
    # The dashboard command finds the cluster KubeRay named: run it against a fake kubectl.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kubectl"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = get ]; then [ "$*" = "get rayjob llama3-8b-4096-v6e-4x4 -n test -o '
        'jsonpath={.status.rayClusterName}" ] && printf llama3-8b-4096-v6e-4x4-abcde; exit; fi\necho "$*"\n'
    )
    fake.chmod(0o755)
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run(
        [bash, "-c", 'eval "$CMD"'],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "CMD": holder["ray_dashboard_command"]},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "port-forward svc/llama3-8b-4096-v6e-4x4-abcde-head-svc 8265:8265 -n test"
