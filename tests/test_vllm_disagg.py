"""Prefill/decode disaggregation on vLLM TPU (workload.vllm.disaggregation): the llama-70b-disagg stack
renders and validates strictly, its roles run on their own pools with the catalog's KV connector, the
endpoint picker gets llm-d's P/D profiles, bad combinations exit 2 naming the key, and the review of
the move from the JetStream stack says what is replaced."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from components.catalog import models
from components.config import stack_files as stacks
from components.render import gateway_picker
from components.tools import report
from components.tools.review import compare_stack
from components.tools.validate import validate_all
from tests.conftest import planned, planned_file
from tests.test_bad_inputs import run_cli, write_stack

STACK = "llama-70b-disagg"


def _objects(kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in planned(STACK).manifests if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def _server(role: str) -> dict[str, Any]:
    (deployment,) = _objects("Deployment", f"vllm-{role}")
    return deployment


def _vllm(role: str) -> dict[str, Any]:
    return next(c for c in _server(role)["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm")


def test_the_pd_stack_renders_and_validates_strictly() -> None:
    assert validate_all(planned(STACK).manifests) == []


@pytest.mark.parametrize(
    ("role", "pool", "kv_role"), [("prefill", "tpu-slice-0", "kv_producer"), ("decode", "tpu-slice-1", "kv_consumer")]
)
def test_each_role_runs_on_its_pool_with_the_dense_connector(role: str, pool: str, kv_role: str) -> None:
    template = _server(role)["spec"]["template"]
    assert template["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"] == pool
    assert template["metadata"]["labels"]["llm-d.ai/role"] == role
    args = _vllm(role)["args"]
    config = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert config["kv_connector"] == "TPUConnector"  # llama2-70b is dense
    assert config["kv_connector_module_path"] == "tpu_inference.distributed.tpu_connector"
    assert config["kv_role"] == kv_role
    assert _server(role)["spec"]["replicas"] == 1


def test_decode_pods_route_through_the_sidecar_and_the_pool_selects_both_roles() -> None:
    containers = _server("decode")["spec"]["template"]["spec"]["containers"]
    sidecar = next(c for c in containers if c["name"] == "routing-sidecar")
    assert sidecar["image"].startswith("ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0")
    assert "--model-server-port=8200" in sidecar["args"]
    assert "--port=8200" in _vllm("decode")["args"]
    (pool,) = _objects("InferencePool")
    selected = pool["spec"]["selector"]["matchLabels"]
    for role in ("prefill", "decode"):
        labels = _server(role)["spec"]["template"]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in selected.items())


def test_the_endpoint_picker_runs_llm_d_pd_profiles() -> None:
    (config_map,) = _objects("ConfigMap", "vllm-epp")
    config = json.loads(next(iter(config_map["data"].values())))
    types = {p["type"]: p for p in config["plugins"]}
    assert types["disagg-profile-handler"]["parameters"] == {"deciders": {"prefill": "prefix-based-pd-decider"}}
    assert types["prefix-based-pd-decider"]["parameters"] == {"nonCachedTokens": 16}
    profiles = {p["name"]: [r["pluginRef"] for r in p["plugins"]] for p in config["schedulingProfiles"]}
    assert profiles["prefill"][0] == "prefill-filter"
    assert profiles["decode"][0] == "decode-filter"
    assert config == gateway_picker.endpoint_picker_config(disaggregated=True)
    assert gateway_picker.endpoint_picker_config() != config  # the aggregated stacks keep the default profile


def test_disaggregation_needs_the_gateway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def drop(c: dict[str, Any]) -> None:
        c["gke-tpu-llm:workload"].pop("frontDoor")

    code, err = run_cli(["plan", "--config", str(write_stack(tmp_path, STACK, drop))], capsys)
    assert code == 2
    assert "workload.vllm.disaggregation" in err
    assert "workload.frontDoor.type" in err


def test_disaggregation_needs_one_pool_per_role(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(
        ["plan", "--config", str(write_stack(tmp_path, STACK, lambda c: c["gke-tpu-llm:tpu"].update(slices=3)))], capsys
    )
    assert code == 2
    assert "tpu.slices" in err


@pytest.mark.parametrize("version", ["0.27.0", "0.28.0", "0.29.0"])
def test_a_hybrid_model_on_a_broken_hma_release_exits_2_naming_the_fix(
    version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No catalog model is hybrid yet: make llama2-70b one for this test, as a hybrid row would be.
    hybrid = dataclasses.replace(models.MODELS["llama2-70b"], attention="hybrid")
    monkeypatch.setattr(models, "MODELS", {**models.MODELS, "llama2-70b": hybrid})
    from components.workloads.vllm import disagg

    monkeypatch.setattr(disagg, "MODELS", models.MODELS)

    def pin(c: dict[str, Any]) -> None:
        c["gke-tpu-llm:workload"]["vllm"]["engineVersion"] = version

    code, err = run_cli(["plan", "--config", str(write_stack(tmp_path, STACK, pin))], capsys)
    assert code == 2
    assert "workload.vllm.engineVersion" in err
    assert "TPUConnectorHMA" in err
    assert "0.30.0" in err


def test_review_of_the_move_off_jetstream(tmp_path: Path) -> None:
    """The committed JetStream stack, then the vLLM P/D config under the same stack name: the pools are
    replaced in place of themselves (two 4-chip VMs -> one 8-chip VM per slice), the JetStream
    LeaderWorkerSet goes, the two role Deployments come."""
    moved = tmp_path / "Pulumi.llama2-70b-disagg.yaml"
    moved.write_text((stacks.STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text())
    head = report.plan_json(planned_file(stacks.read_stack_file(moved)))
    change = compare_stack("llama2-70b-disagg", report.plan_json(planned("llama2-70b-disagg")), head)
    replaced = [s for s in change.prediction.of("replace") if s.type.endswith("NodePool")]
    assert sorted(s.name for s in replaced) == ["tpu-slice-0-pool", "tpu-slice-1-pool"]
    assert all("nodeConfig.machineType" in s.paths for s in replaced)
    created = {s.name for s in change.prediction.of("create")}
    deleted = {s.type.rsplit(":", 1)[-1] for s in change.prediction.of("delete")}
    assert {"vllm-prefill", "vllm-decode"} <= created
    assert "LeaderWorkerSet" in deleted


def test_the_benchmark_job_is_refused_on_a_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The in-cluster benchmark client targets the aggregated server's Service: refused, not rendered wrong."""

    def benchmark(config: dict[str, Any]) -> None:
        config["gke-tpu-llm:workload"]["serving"]["benchmark"] = True

    code, err = run_cli(["plan", "--config", str(write_stack(tmp_path, STACK, benchmark))], capsys)
    assert code == 2
    assert "gke-tpu-llm:workload.serving.benchmark: True runs vLLM's benchmark client" in err
