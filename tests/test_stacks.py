"""Every stack file run end to end under the mock engine, as `pulumi up` would run it.

The example stacks this repository ships are held to exact expectations (``EXPECTED_POOLS``); any
other stack file in stacks/ (a user's own, e.g. the README's ``my-llama``) is a stack like them and gets
every check that holds for all stacks (``STACKS``, the ``stack_plan`` fixture), here and in the other
test files; tests/test_own_stacks.py runs them with such a stack added."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.catalog import tpu as tpu_catalog
from components.config import gke_rules as rules
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.stack import StackConfig
from components.tools import manifests, mockengine, report
from tests.conftest import STACKS, make_config, planned, run_cli_process

# The example stacks and the node pools each must produce: (machine type, nodes, topology or None).
EXPECTED_POOLS: dict[str, list[tuple[str, int | None, str | None]]] = {
    "llama-405b": [("ct6e-standard-4t", 4, "4x4")],
    "llama-405b-prod": [("ct6e-standard-4t", 4, "4x4")],
    "llama2-70b-disagg": [("ct6e-standard-4t", 2, "2x4")] * 2,
    "llama-70b": [("ct6e-standard-8t", None, None)],
    "llama-405b-vllm": [("ct6e-standard-4t", 8, "4x8")],
    "llama-405b-ironwood": [("tpu7x-standard-4t", 1, None)],
    "saxml-175b": [("ct5lp-hightpu-4t", 8, "4x8")] * 2,
    "llama3-8b-train": [("ct6e-standard-4t", 4, "4x4")],
    "llama3-8b-train-v5p": [("ct5p-hightpu-4t", 2, "2x2x2")],
    # reservation (held) -> flexStart -> spot -> onDemand: the fallback pools scale from zero (no nodeCount).
    "llama-70b-fallback": [("ct6e-standard-8t", 1, None)] + [("ct6e-standard-8t", None, None)] * 3,
    "llama3-8b-train-queued": [("ct6e-standard-4t", None, "4x4")],  # queued: 0 <-> 4 hosts, atomically
    "llama3-8b-train-multislice": [("ct6e-standard-4t", 4, "4x4")] * 2,  # one pool per slice, DCN across them
    "llama-70b-disagg": [("ct6e-standard-8t", 1, None)] * 2,  # vLLM P/D: a prefill pool and a decode pool
}


def test_stacks_examples_are_all_here() -> None:
    """An example cannot drop out of the table's checks unnoticed: its stack file and its committed
    goldens are here. (A stack file not in the table is a user's: the checks of every stack.)"""
    missing = sorted(set(EXPECTED_POOLS) - set(stacks.list_stacks()))
    assert not missing, f"example stacks without a stack file in stacks/: {missing}"
    without_goldens = [s for s in sorted(EXPECTED_POOLS) if not sorted((manifests.MANIFESTS_DIR / s).glob("*.yaml"))]
    assert not without_goldens, f"example stacks without goldens: `.venv/bin/python -m components render` {without_goldens}"


@pytest.mark.parametrize("stack", STACKS)
def test_stacks_file_name_is_a_stack_name(stack: str) -> None:
    # deploy.yml takes the name as free text and accepts only this rule (stack_environments.py check-stack).
    assert stacks.is_stack_name(stack), (
        f"rename stacks/Pulumi.{stack}.yaml: a stack name is letters, digits, '-', '_' and '.', a letter or digit first"
    )


def by_type(result: report.PlanResult, typ: str) -> list[mockengine.Registration]:
    return [r for r in result.resources if r.type == typ]


def tpu_pools(result: report.PlanResult) -> list[dict[str, Any]]:
    return [r.inputs for r in by_type(result, "gcp:container/nodePool:NodePool") if r.inputs["name"].startswith("tpu-")]


@pytest.mark.parametrize("stack", sorted(EXPECTED_POOLS))
def test_stack_node_pools_match_the_catalog(stack: str) -> None:
    pools = tpu_pools(planned(stack))
    got = sorted(
        (
            (p["nodeConfig"]["machineType"], p.get("nodeCount"), (p.get("placementPolicy") or {}).get("tpuTopology"))
            for p in pools
        ),
        key=repr,  # node counts may be None (autoscaled pools) beside ints
    )
    assert got == sorted(EXPECTED_POOLS[stack], key=repr)


def test_stack_tpu_pools_are_placed_as_their_slices(stack_plan: report.PlanResult) -> None:
    pools = tpu_pools(stack_plan)
    assert pools
    for pool in pools:
        policy = pool.get("placementPolicy")
        # COMPACT only for multi-host (a queued slice starts at 0 nodes and is created whole).
        assert (policy is not None) == (pool.get("nodeCount", 1) > 1 or pool.get("queuedProvisioning") is not None)
        if policy:
            assert policy["type"] == "COMPACT"
        assert len(pool["nodeLocations"]) == 1


def test_stack_llama_70b_pool_autoscales_one_to_two() -> None:
    (pool,) = tpu_pools(planned("llama-70b"))
    assert pool["autoscaling"]["totalMinNodeCount"] == 1
    assert pool["autoscaling"]["totalMaxNodeCount"] == 2
    assert "placementPolicy" not in pool


def test_stack_platform_basics(stack_plan: report.PlanResult) -> None:
    (cluster,) = by_type(stack_plan, "gcp:container/cluster:Cluster")
    # The pool is the stack's own project's (components.config.isolation.workload_pool).
    assert cluster.inputs["workloadIdentityConfig"]["workloadPool"] == f"{stack_plan.config.project}.svc.id.goog"
    buckets = by_type(stack_plan, "gcp:storage/bucket:Bucket")
    assert buckets
    for bucket in buckets:
        assert bucket.inputs["uniformBucketLevelAccess"] is True
        assert bucket.inputs["publicAccessPrevention"] == "enforced"
    urns = [r.urn for r in stack_plan.resources]
    assert len(urns) == len(set(urns))
    components = [r for r in stack_plan.resources if not r.custom]
    assert {c.type for c in components} >= {"gke-tpu-llm:gke:GkeCluster", "gke-tpu-llm:tpu:TpuSlicePool"}
    # every custom resource sits under one of our components
    parents = {c.urn for c in components}
    assert all(r.parent in parents for r in stack_plan.resources if r.custom)
    # no project-wide storage roles, no service-account keys
    project_iam = [r for r in stack_plan.resources if r.type.startswith("gcp:projects/")]
    assert not [r for r in project_iam if str(r.inputs.get("role", "")).startswith("roles/storage.")]
    assert not [r for r in stack_plan.resources if r.type.startswith("gcp:serviceaccount/key:")]


def test_stack_prod_has_deletion_protection_and_no_force_destroy() -> None:
    result = planned("llama-405b-prod")
    (cluster,) = by_type(result, "gcp:container/cluster:Cluster")
    assert cluster.inputs["deletionProtection"] is True
    assert cluster.options["protect"] is True
    for bucket in by_type(result, "gcp:storage/bucket:Bucket"):
        assert bucket.inputs["forceDestroy"] is False
        assert bucket.options["protect"]
        assert bucket.options["retainOnDelete"]
    for pool in by_type(result, "gcp:container/nodePool:NodePool"):
        if pool.inputs["name"].startswith("tpu-"):
            assert pool.options["protect"] is True


def test_stack_dev_is_disposable() -> None:
    result = planned("llama-405b")
    (cluster,) = by_type(result, "gcp:container/cluster:Cluster")
    assert cluster.inputs["deletionProtection"] is False
    assert all(b.inputs["forceDestroy"] is True for b in by_type(result, "gcp:storage/bucket:Bucket"))


def test_stack_outputs_hide_the_kubeconfig(stack_plan: report.PlanResult) -> None:
    assert stack_plan.outputs["kubeconfig"] == stacks.SECRET_PLACEHOLDER
    assert stack_plan.outputs["get_credentials_command"].startswith("gcloud container clusters get-credentials ")
    assert stack_plan.outputs["tpu_pools"] == stack_plan.config.pool_names()


def test_stack_plan_json_shape() -> None:
    data = report.plan_json(planned("saxml-175b"))
    assert {"stack", "environment", "resources", "manifests", "cost_usd_per_hour"} <= set(data)
    for res in data["resources"]:
        assert {"type", "name", "parent", "dependencies", "inputs"} <= set(res)
    assert data["cost_usd_per_hour"]["by_capacity"] == {"onDemand": pytest.approx(2 * 32 * 1.20)}  # no tier, no spot price
    json.dumps(data)  # serialisable as is


def test_stack_cost_counts_autoscaling_maximum() -> None:
    cost = report.plan_json(planned("llama-70b"))["cost_usd_per_hour"]
    assert cost["chips"] == 16
    assert cost["billed"] == pytest.approx(16 * 2.70)
    assert cost["billed_at_min_nodes"] == pytest.approx(8 * 2.70)


BAD_STACKS: dict[str, tuple[dict[str, Any], str]] = {
    "impossible-topology": ({"gke-tpu-llm:tpu": {"topology": "4x5"}}, "gke-tpu-llm:tpu.topology: '4x5'"),
    "unknown-key": ({"gke-tpu-llm:tpu": {"nodeCount": 4}}, "gke-tpu-llm:tpu.nodeCount: 4 is an unknown key"),
    "machine-mismatch": (
        {"gke-tpu-llm:tpu": {"machineType": "ct6e-standard-8t"}},
        "gke-tpu-llm:tpu.machineType: 'ct6e-standard-8t' does not build a v6e 4x4 slice",
    ),
}


def bad_stack_file(tmp_path: Path, override: dict[str, Any]) -> Path:
    doc = yaml.safe_load(stacks.stack_path("llama-405b").read_text())
    for key, value in override.items():
        doc["config"][key] = {**doc["config"][key], **value}
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("case", sorted(BAD_STACKS))
def test_stack_bad_config_registers_nothing(case: str, tmp_path: Path) -> None:
    override, expected = BAD_STACKS[case]
    stack_file = stacks.read_stack_file(bad_stack_file(tmp_path, override))
    records: list[mockengine.Registration] = []
    with pytest.raises(pulumi.RunError, match="invalid stack configuration") as info:
        records, _ = mockengine.run_program(stack_file)
    assert expected in str(info.value)
    assert records == []
    assert manifests.manifests_of(records) == []


def test_stack_bad_config_cli_exits_2_with_message(tmp_path: Path) -> None:
    override, expected = BAD_STACKS["impossible-topology"]
    path = bad_stack_file(tmp_path, override)
    proc = run_cli_process("plan", "--config", str(path), "--json")
    assert proc.returncode == 2
    assert expected in proc.stderr
    assert "Allowed: 1x1, 2x2, 2x4, 4x4" in proc.stderr
    assert json.loads(proc.stdout)["error"]["kind"] == "config"  # --json: the report as one object too


@pytest.mark.slow
def test_stack_cli_plan_json_runs_the_program() -> None:
    proc = run_cli_process("plan", "llama-70b", "--json", check=True)
    data = json.loads(proc.stdout)
    assert data["stack"] == "llama-70b"
    assert data["environment"] == "dev"
    assert any(r["type"] == "gcp:container/nodePool:NodePool" for r in data["resources"])


def test_stack_cli_tree_shows_values_with_brackets(capsys: pytest.CaptureFixture[str], shared_engine: None) -> None:
    from components.tools.cli import main

    assert main(["plan", "llama-405b"]) == 0
    out = capsys.readouterr().out
    assert "serviceAccount:your-project-id.svc.id.goog[llama-405b/jetstream-pathways]" in out
    assert "Memory per chip" in out


def test_stack_dev_and_prod_identities_do_not_overlap() -> None:
    # Every cluster of a project shares <project>.svc.id.goog (identity sameness): a dev stack's
    # pods must not be able to act as the prod stack's identity.
    def members(stack: str) -> set[str]:
        result = planned(stack)
        return {
            str(r.inputs["member"])
            for r in result.resources
            if r.type in ("gcp:serviceaccount/iAMMember:IAMMember", "gcp:storage/bucketIAMMember:BucketIAMMember")
        }

    assert members("llama-405b").isdisjoint(members("llama-405b-prod"))
    assert planned("llama-405b").config.namespace == "llama-405b"


# ---------------------------------------------------------------- GKE version floor (issue 15)

IRONWOOD_TPU = {"generation": "tpu7x", "topology": "2x2x1", "zone": "us-central1-c"}


def ironwood_config(version: str | None) -> StackConfig:
    override: dict[str, Any] = {"gcp:region": "us-central1", "tpu": IRONWOOD_TPU}
    if version is not None:
        override["cluster"] = {"version": version}
    return make_config("s", **override)


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (None, "None must be set for tpu7x: its GKE minimum 1.34.0-gke.2201000 may be newer than the release channel's default"),
        ("1.34.0-gke.2200999", "'1.34.0-gke.2200999' is below the tpu7x minimum"),
        ("1.33", "'1.33' is below the tpu7x minimum"),
    ],
)
def test_tpu7x_gke_version_must_be_set_at_or_above_the_floor(version: str | None, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        ironwood_config(version)
    (msg,) = [str(v) for v in info.value.violations if "cluster.version" in str(v)]
    assert problem in msg
    assert "set cluster.version" in msg
    assert "1.34.0-gke.2201000 or newer" in msg
    assert "or unset it" not in msg  # unset is what is refused


@pytest.mark.parametrize("version", ["1.34.0-gke.2201000", "1.34.1-gke.1", "1.35"])
def test_tpu7x_gke_version_at_the_floor_is_accepted(version: str) -> None:
    assert ironwood_config(version).cluster.version == version


def test_gke_version_unset_stays_the_channel_default_for_older_generations() -> None:
    assert make_config("s").cluster.version is None  # v6e: its floor is below every channel's default
    assert not tpu_catalog.GENERATIONS["v6e"].requires_explicit_gke_version
    assert tpu_catalog.GENERATIONS["tpu7x"].requires_explicit_gke_version
    assert rules.gke_version_rules("cluster.version", None, None) == []  # no generation chosen yet


def test_gke_version_rule_refuses_an_unset_tpu7x_version_for_every_caller() -> None:
    # The one rule the stack config and the library's TpuSlicePoolArgs both run.
    problems = rules.gke_version_rules("cluster.version", None, "tpu7x")
    assert [(p["path"], p["fix"]) for p in problems] == [("cluster.version", "set cluster.version: 1.34.0-gke.2201000 or newer")]
