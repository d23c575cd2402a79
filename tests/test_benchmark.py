"""Benchmark after up (issue 17 item 5): the engine's own client as a Job, against the deployed server.

The benchmark is opt-in (``workload.serving.benchmark: true``) and no committed stack enables it, so
these tests build one in memory: the llama-70b stack file plus a serving scenario.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.catalog.engine_releases import image_ref
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.policy.checks import violations
from components.policy.resource_props import Resource
from components.render import benchmark as render
from components.render import netpol
from components.tools import report
from components.tools.scan import SCOPED_SKIPS, resource_key, run_checkov, scan_inputs, scoped_reason
from components.tools.validate import validate_all
from components.workloads.kind import benchmark_rules
from components.workloads.registry import BY_KIND
from components.workloads.serving_benchmark import BUCKET_ROLE, ServingBenchmark
from components.workloads.vllm import clients as vllm_clients
from components.workloads.vllm import render as vllm_render
from components.workloads.vllm.component import VllmServer
from components.workloads.vllm.engine import server_image
from components.workloads.vllm.spec import ENGINE_DEFAULT
from tests.conftest import make_config

CHECKOV = stacks.ROOT / ".venv" / "scan" / "bin" / "checkov"
SCENARIO = {"inputTokens": 1000, "outputTokens": 900, "concurrency": 48, "benchmark": True}
"""Numbers no default has, so a test that finds them in the Job found the scenario's."""
VLLM: dict[str, Any] = {
    "tpu": {"topology": "2x4", "machineType": "ct6e-standard-8t", "zone": "us-east5-b"},
    "buckets": {"models": {"purpose": "hf-weights-cache"}},
    "identity": {"serviceAccount": "vllm", "bucketRoles": {"models": "roles/storage.objectUser"}},
    "workload": {"kind": "vllm", "model": "llama3.1-70b", "maxTargetLength": 4096, "serving": SCENARIO},
}


@functools.cache
def planned_benchmark(auth: str = "none") -> report.PlanResult:
    """llama-70b with the scenario and ``benchmark: true``, planned offline (once per variant)."""
    doc = yaml.safe_load(stacks.stack_path("llama-70b").read_text())
    workload = doc["config"]["gke-tpu-llm:workload"]
    workload["serving"] = dict(SCENARIO)
    if auth == "api-key":
        workload["vllm"]["service"] = {"type": "internal", "auth": "api-key"}
    directory = Path(os.environ.get("TMPDIR", "/tmp")) / f"test-benchmark-{os.getpid()}-{auth}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "Pulumi.llama-70b.yaml"
    path.write_text(yaml.safe_dump(doc))
    return report.plan(stacks.read_stack_file(path, "llama-70b"))


def job_of(result: report.PlanResult) -> dict[str, Any]:
    (job,) = [m for m in result.manifests if m["kind"] == "Job"]
    return job


def pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def container(job: dict[str, Any]) -> dict[str, Any]:
    (found,) = pod_spec(job)["containers"]
    assert isinstance(found, dict)
    return found


# ---------------------------------------------------------------- the client's command


def test_job_command_carries_the_scenario() -> None:
    job = job_of(planned_benchmark())
    args = container(job)["args"]
    assert args[:3] == ["vllm", "bench", "serve"]
    for flag in (
        "--random-input-len=1000",
        "--random-output-len=900",
        "--max-concurrency=48",
        f"--num-prompts={48 * render.PROMPTS_PER_SLOT}",
        "--dataset-name=random",
        "--random-range-ratio=0",
        "--ignore-eos",
        "--backend=vllm",
        "--endpoint=/v1/completions",
        "--model=meta-llama/Llama-3.1-70B",
        "--tokenizer=meta-llama/Llama-3.1-70B",
        "--base-url=http://vllm.llama-70b.svc.cluster.local:8000",
        "--save-result",
        "--percentile-metrics=ttft,tpot,itl",
    ):
        assert flag in args, flag
    # The client runs from the server's own pinned image (one release for client and server).
    assert container(job)["image"] == server_image(planned_benchmark().config)  # the server's own image


def test_results_go_to_the_stack_bucket_under_its_prefix_per_run() -> None:
    result = planned_benchmark()
    job = job_of(result)
    (volume,) = [v for v in pod_spec(job)["volumes"] if "csi" in v]
    attributes = volume["csi"]["volumeAttributes"]
    assert attributes["bucketName"] == result.config.bucket_name("models")
    options = attributes["mountOptions"].split(",")
    assert "only-dir=benchmarks/llama-70b" in options
    assert {"uid=65534", "gid=65534", "enable-hns=false"} <= set(options)  # writable by the client; no bucket-wide list
    env = {e["name"]: e for e in container(job)["env"]}
    assert env["RUN_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{render.JOB_UID_LABEL}']"
    assert env["RESULT_DIR"]["value"] == f"{render.RESULTS_MOUNT}/$(RUN_ID)"
    assert "--result-dir=$(RESULT_DIR)" in container(job)["args"]
    assert result.outputs["benchmark_results"] == f"gs://{result.config.bucket_name('models')}/benchmarks/llama-70b/"


def test_scenario_record_holds_the_scenario_slice_and_versions() -> None:
    import json

    env = {e["name"]: e.get("value") for e in container(job_of(planned_benchmark()))["env"]}
    record = json.loads(env["BENCHMARK_SCENARIO"])
    assert record["scenario"] == {"inputTokens": 1000, "outputTokens": 900, "concurrency": 48, "ttftMs": None, "tpotMs": None}
    assert record["slice"] == {
        "key": "v6e-2x4-8t",  # components/catalog/calibration.py PublishedResult.slice_key
        "generation": "v6e",
        "topology": "2x4",
        "machineType": "ct6e-standard-8t",
        "chips": 8,
        "hosts": 1,
        "slices": 1,
    }
    # The server's image: the engine catalog's newest passing release (tag only until its digest is read).
    assert record["image"] == image_ref("vllm-tpu", ENGINE_DEFAULT.version)
    assert record["image"].startswith(f"vllm/vllm-tpu:v{ENGINE_DEFAULT.version}")
    assert record["engine"] == "vllm"
    assert "--tensor-parallel-size=8" in record["serverArgs"]
    assert "vllm.__version__" in env["VERSION_COMMAND"]
    # The planner's prediction for this slice and scenario, to compare the measurement with.
    (estimate,) = planned_benchmark().stack_plan.serving
    predicted = estimate.to_dict()
    assert record["predicted"] == {key: predicted[key] for key in render.PREDICTED_KEYS}
    assert record["predicted"]["concurrency"] == 48
    assert record["predicted"]["output_tokens_per_s"] > 0


# ---------------------------------------------------------------- placement, readiness, security


def test_job_never_lands_on_a_tpu_node() -> None:
    spec = pod_spec(job_of(planned_benchmark()))
    assert spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}
    assert not spec.get("tolerations")  # TPU nodes are tainted google.com/tpu:NoSchedule
    for c in [*spec["containers"], *spec["initContainers"]]:
        assert "google.com/tpu" not in str(c.get("resources"))
    assert "affinity" not in spec


def test_job_waits_for_the_server_with_bounded_retries() -> None:
    result = planned_benchmark()
    (wait,) = pod_spec(job_of(result))["initContainers"]
    script = wait["command"][-1]
    assert "http://vllm.llama-70b.svc.cluster.local:8000/health" in script
    attempts = -(-vllm_render.deployment_timeout_seconds(result.stack_plan) // render.READY_POLL_SECONDS)
    assert f"range({attempts})" in script  # the server's own startup budget, then the pod fails
    job = job_of(result)
    assert job["spec"]["backoffLimit"] == render.BACKOFF_LIMIT <= 2
    assert job["metadata"]["name"] == "vllm-benchmark"
    assert pod_spec(job)["restartPolicy"] == "Never"


def test_job_depends_on_the_workload_server() -> None:
    resources = planned_benchmark().resources
    by_urn = {r.urn: r for r in resources}
    (server,) = [r for r in resources if r.type == VllmServer.TYPE]
    (job,) = [r for r in resources if r.type == "kubernetes:batch/v1:Job"]
    (component,) = [r for r in resources if r.type == ServingBenchmark.TYPE]
    assert job.parent == component.urn
    server_service = [
        d for d in job.dependencies if by_urn[d].type == "kubernetes:core/v1:Service" and by_urn[d].parent == server.urn
    ]
    assert server_service, "the Job must wait for the server's Service (Pulumi waits for a ready endpoint)"
    dep_types = {by_urn[d].type for d in job.dependencies}
    assert {"gcp:storage/bucketIAMMember:BucketIAMMember", "kubernetes:networking.k8s.io/v1:NetworkPolicy"} <= dep_types


def test_secrets_are_files_never_env_values_or_argv() -> None:
    job = job_of(planned_benchmark("api-key"))
    c = container(job)
    assert all("valueFrom" not in e or "fieldRef" in e["valueFrom"] for e in c["env"])
    mounted = {m["mountPath"] for m in c["volumeMounts"]}
    assert {f"{render.SECRETS_MOUNT}/HF_TOKEN", f"{render.SECRETS_MOUNT}/OPENAI_API_KEY"} <= mounted
    secrets = {v["secret"]["secretName"] for v in pod_spec(job)["volumes"] if "secret" in v}
    assert secrets == {vllm_render.SECRET_NAME, vllm_render.API_KEY_SECRET_NAME}
    argv = " ".join([*c["command"], *c["args"]])
    for forbidden in (stacks.SECRET_PLACEHOLDER, "--api-key", "--hf-token"):
        assert forbidden not in argv
    assert planned_benchmark().manifests != planned_benchmark("api-key").manifests


def test_job_passes_strict_validation_and_the_policy_pack() -> None:
    result = planned_benchmark()
    assert validate_all(result.manifests) == []
    found = [
        (res.name, rule, message)
        for res in result.resources
        if "benchmark" in res.name
        for rule, message in violations(Resource(res.type, res.name, res.inputs, protect=res.options["protect"]))
    ]
    assert found == []


@pytest.mark.skipif(
    not CHECKOV.exists() and not os.environ.get("CI"), reason="checkov is installed by `bash .ci/setup` into .venv/scan"
)
@pytest.mark.slow
def test_job_is_checkov_clean(tmp_path: Path) -> None:
    """The stack's whole namespace is scanned (checkov's graph checks need the NetworkPolicies)."""
    result = planned_benchmark("api-key")
    scan_inputs({"llama-70b": result.manifests}, tmp_path)
    failed = run_checkov(CHECKOV, tmp_path, scoped=False)
    ours = [(f["check_id"], f["resource"]) for f in failed if "benchmark" in f["resource"]]
    # Not even a scoped skip: the benchmark needs none (secrets as files, non-root, read-only root).
    assert ours == []
    uncovered = [
        (f["check_id"], f["resource"]) for f in failed if scoped_reason(f["check_id"], resource_key(f["resource"])) is None
    ]
    assert uncovered == []
    assert not any(fnmatch.fnmatchcase("Job/vllm-benchmark", p) for checks in SCOPED_SKIPS.values() for p in checks)


# ---------------------------------------------------------------- network and identity


def test_network_policy_admits_the_benchmark_to_the_server_port_only() -> None:
    result = planned_benchmark()
    policies = [m for m in result.manifests if m["kind"] == "NetworkPolicy" and m["metadata"]["namespace"] == "llama-70b"]
    (allow,) = [p for p in policies if p["metadata"]["name"] == "allow-benchmark"]
    spec = allow["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/instance": "llama-70b", "app.kubernetes.io/component": "vllm"}
    }
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": vllm_render.PORT}]
    assert rule["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/instance": "llama-70b", "app.kubernetes.io/component": "benchmark"}}}
    ]
    # Nothing admits traffic to the benchmark pod: the namespace's default deny covers it.
    assert any(p["metadata"]["name"] == netpol.DEFAULT_DENY for p in policies)
    for p in policies:
        selector = p["spec"]["podSelector"].get("matchLabels", {})
        assert selector.get("app.kubernetes.io/component") != render.ROLE


def test_bucket_role_is_conditioned_on_the_results_prefix() -> None:
    result = planned_benchmark()
    (grant,) = [r for r in result.resources if r.name == "benchmark-results-access"]
    inputs = grant.inputs
    bucket = result.config.bucket_name("models")
    assert inputs["role"] == BUCKET_ROLE
    assert inputs["member"].endswith("/subject/ns/llama-70b/sa/vllm-benchmark")
    expression = inputs["condition"]["expression"]
    assert f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/benchmarks/llama-70b/")' in expression
    assert '"storage.googleapis.com/objectListPrefix", "").startsWith("benchmarks/llama-70b/")' in expression
    (sa,) = [m for m in result.manifests if m["kind"] == "ServiceAccount" and m["metadata"]["name"] == "vllm-benchmark"]
    assert pod_spec(job_of(result))["serviceAccountName"] == "vllm-benchmark"
    assert "annotations" not in sa["metadata"]  # no Google service account: the principal holds the role


# ---------------------------------------------------------------- opt-in and refusals


def test_without_benchmark_nothing_is_added() -> None:
    scenario = {k: v for k, v in SCENARIO.items() if k != "benchmark"}
    assert (
        benchmark_rules(make_config("s", **{**VLLM, "workload": {**VLLM["workload"], "serving": scenario}}).workload, BY_KIND)
        == []
    )
    assert not any("benchmark" in r.urn for r in _planned_llama70b().resources)
    assert not any(k.startswith("benchmark") for k in _planned_llama70b().outputs)


@functools.cache
def _planned_llama70b() -> report.PlanResult:
    return report.plan(stacks.read_stack_file(stacks.stack_path("llama-70b")))


def test_kind_without_a_client_is_refused_naming_the_key() -> None:
    config = make_config("s", **{**VLLM, "workload": {**VLLM["workload"]}})
    workload = config.workload.model_copy(update={"kind": "saxml"})
    (problem,) = benchmark_rules(workload, BY_KIND)
    assert problem["path"] == "workload.serving.benchmark"
    assert "saxml" in problem["problem"]
    assert "vllm" in problem["allowed"]
    assert "remove workload.serving.benchmark" in problem["fix"]
    for kind, info in BY_KIND.items():
        assert (info.benchmark is not None) == (kind == "vllm")


def test_kind_without_a_client_fails_config_load() -> None:
    """A Saxml stack with ``benchmark: true`` exits 2 at load (StackConfig runs ``benchmark_rules``), naming the key."""
    from tests.test_saxml import SAXML_BASE

    serving = {"inputTokens": 100, "outputTokens": 100, "concurrency": 4, "benchmark": True}
    with pytest.raises(ConfigError) as info:
        make_config("s", **{**SAXML_BASE, "workload": {**SAXML_BASE["workload"], "serving": serving}})
    (problem,) = info.value.violations
    assert problem.key.endswith("workload.serving.benchmark")
    assert "saxml" in problem.problem


def test_multi_host_server_is_reached_through_its_leader() -> None:
    """On a multi-host slice (LeaderWorkerSet), the benchmark reaches the leaders' serving port only."""
    doc = yaml.safe_load(stacks.stack_path("llama-405b-vllm").read_text())
    doc["config"]["gke-tpu-llm:workload"]["serving"] = {
        "inputTokens": 128,
        "outputTokens": 128,
        "concurrency": 8,
        "benchmark": True,
    }
    directory = Path(os.environ.get("TMPDIR", "/tmp")) / f"test-benchmark-{os.getpid()}-405b"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "Pulumi.llama-405b-vllm.yaml"
    path.write_text(yaml.safe_dump(doc))
    plan = stacks.config_of(stacks.read_stack_file(path, "llama-405b-vllm"))
    client = vllm_clients.benchmark_client(plan, namespace="llm", service_account="vllm")
    scenario = plan.config.workload.serving
    assert scenario is not None
    job = render.render_job(plan, scenario, client, namespace="llm", bucket_name="b")
    (policy,) = render.render_network_policies(job, client, namespace="llm", stack=plan.config.stack)
    assert policy["spec"]["podSelector"]["matchLabels"][netpol.ROLE_LABEL] == "vllm"  # the leaders, not vllm-worker
    assert policy["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": vllm_render.PORT}]
    assert "--max-concurrency=8" in container(job)["args"]
    assert {e for e in client.secret_env} == {"HF_TOKEN", "OPENAI_API_KEY"}  # auth: api-key
    assert validate_all([job, *render.render_network_policies(job, client, namespace="llm", stack=plan.config.stack)]) == []


def test_plan_of_a_kind_without_a_client_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from components.tools.cli import main as cli

    doc = yaml.safe_load(stacks.stack_path("saxml-175b").read_text())
    doc["config"]["gke-tpu-llm:workload"]["serving"] = {
        "inputTokens": 128,
        "outputTokens": 128,
        "concurrency": 4,
        "benchmark": True,
    }
    path = tmp_path / "Pulumi.saxml-175b.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli(["plan", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "gke-tpu-llm:workload.serving.benchmark: True is not supported for kind saxml" in err
    assert "Allowed: false, or a kind with one: vllm" in err
    assert "Traceback" not in err
