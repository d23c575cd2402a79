"""Day 2: what `pulumi up` does to a stack that exists — changes, prod replacements, teardown.

Each test plans two commits of a stack offline and reads the predicted steps (``components.tools.steps``)
and the review comment, as a reviewer of an existing stack would.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import stack_files as stacks
from components.tools import plan_resources, report, steps
from components.tools.cli import main
from components.tools.review import compare, compare_stack, render_comment
from components.tools.teardown import plan_teardown, plan_teardown_of
from tests.conftest import planned, planned_file

V6E_US_EAST5 = 2.70  # on-demand $/chip-hour in the catalog


@cache
def _plan_variant(stack: str, changes_json: str) -> dict[str, Any]:
    doc = yaml.safe_load(stacks.stack_path(stack).read_text())
    for key, value in json.loads(changes_json).items():
        section, _, sub = key.partition(".")
        full = f"gke-tpu-llm:{section}"
        if sub:
            doc["config"].setdefault(full, {})
            target = doc["config"][full]
            *parents, leaf = sub.split(".")
            for p in parents:
                target = target.setdefault(p, {})
            target[leaf] = value
        else:
            doc["config"][full] = value
    import tempfile

    path = Path(tempfile.mkdtemp()) / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return report.plan_json(planned_file(stacks.read_stack_file(path, stack)))


def variant(stack: str, **changes: Any) -> dict[str, Any]:
    """The plan of ``stack`` after a commit setting dotted keys (``tpu.topology``) under gke-tpu-llm:."""
    return copy.deepcopy(_plan_variant(stack, json.dumps({k.replace("__", "."): v for k, v in changes.items()})))


def base(stack: str) -> dict[str, Any]:
    return report.plan_json(planned(stack))


def pools(prediction: steps.Prediction, op: str) -> list[steps.Step]:
    return [s for s in prediction.of(op) if s.type == steps.NODE_POOL]  # type: ignore[arg-type]


def legacy(plan: dict[str, Any]) -> dict[str, Any]:
    """The same plan as the release before stable pool names recorded it: slice pools named by shape."""
    old = copy.deepcopy(plan)
    key = "v6e-" + plan["slices"][0]["topology"]
    for res in old["resources"]:
        for field in ("urn", "name", "parent"):
            res[field] = res[field].replace("tpu-slice-0", f"tpu-{key}-0")
        if res["type"] == steps.NODE_POOL and res["inputs"].get("name") == "tpu-slice-0":
            res["inputs"]["name"] = f"tpu-{key}-0"
        res["options"].pop("aliases", None)
        res["options"]["ignoreChanges"] = [c for c in res["options"]["ignoreChanges"] if c != "name"]
    return old


# ---------------------------------------------------------------- a slice changes shape


def test_dev_topology_change_replaces_one_pool_delete_before_replace() -> None:
    change = compare_stack("llama-405b", base("llama-405b"), variant("llama-405b", tpu__topology="4x8"))
    p = change.prediction
    (pool,) = pools(p, "replace")
    assert pool.name == "tpu-slice-0-pool"
    assert pool.delete_first
    assert "placementPolicy.tpuTopology" in pool.replacing
    assert not pools(p, "create")
    assert not pools(p, "delete")
    assert p.rollout is not None
    assert (p.rollout.chips_before, p.rollout.chips_peak, p.rollout.chips_after) == (16, 32, 32)
    assert p.rollout.usd_peak == pytest.approx(32 * V6E_US_EAST5)
    assert not change.refused
    comment = render_comment([change])
    assert "### `llama-405b` (dev)" in comment
    assert "replace NodePool `tpu-slice-0-pool` (delete, then create" in comment
    assert "peak 32 chips ($86.40/h)" in comment
    assert "TPU quota needed at the peak: 32 v6e on-demand chips" in comment
    assert "replaces NodePool `tpu-slice-0-pool`" in comment


def test_renaming_a_pool_without_alias_would_hold_both_slices() -> None:
    """The failure stable names fix: a new URN is created first and the old one deleted at the end."""
    head = variant("llama-405b", tpu__topology="4x8")
    for res in head["resources"]:
        res["options"]["aliases"] = []
    change = compare_stack("llama-405b", legacy(base("llama-405b")), head)
    assert [s.name for s in pools(change.prediction, "create")] == ["tpu-slice-0-pool"]
    assert [s.name for s in pools(change.prediction, "delete")] == ["tpu-v6e-4x4-0-pool"]
    rollout = change.prediction.rollout
    assert rollout is not None
    assert rollout.chips_peak == 48
    assert rollout.usd_peak == pytest.approx(48 * V6E_US_EAST5)  # $129.60/h


def test_upgrading_keeps_a_legacy_pool_and_its_name() -> None:
    """A stack created by the previous release: its pool is found by alias, its GKE name kept."""
    head = base("llama-405b")
    change = compare_stack("llama-405b", legacy(head), head)
    p = change.prediction
    assert not [s for s in p.steps if s.type in (steps.NODE_POOL, "gke-tpu-llm:tpu:TpuSlicePool")]
    assert any("tpu-slice-0-pool" in u for u in p.state_only)


def test_upgrade_and_shape_change_together_are_still_one_replacement() -> None:
    change = compare_stack("llama-405b", legacy(base("llama-405b")), variant("llama-405b", tpu__topology="4x8"))
    (pool,) = pools(change.prediction, "replace")
    assert pool.old_urn is not None
    assert pool.old_urn.endswith("::tpu-v6e-4x4-0-pool")
    assert pool.delete_first
    assert not pools(change.prediction, "create")
    assert not pools(change.prediction, "delete")


def test_machine_type_layout_change_replaces_each_pool_in_place_of_itself() -> None:
    one_vm = variant("llama2-70b-disagg", tpu__machineType="ct6e-standard-8t")  # 2x4 on one 8-chip VM
    change = compare_stack("llama2-70b-disagg", base("llama2-70b-disagg"), one_vm)  # from two 4-chip VMs
    replaced = pools(change.prediction, "replace")
    assert [s.name for s in replaced] == ["tpu-slice-0-pool", "tpu-slice-1-pool"]
    assert all(s.delete_first and "nodeConfig.machineType" in s.paths for s in replaced)
    assert not pools(change.prediction, "create")
    assert not pools(change.prediction, "delete")
    rollout = change.prediction.rollout
    assert rollout is not None
    assert rollout.chips_peak == 16  # never both layouts at once
    # The LWS webhook keeps subGroupPolicy immutable: the LeaderWorkerSet is recreated, not patched.
    (lws,) = [s for s in change.prediction.of("replace") if s.type.endswith(":LeaderWorkerSet")]
    assert lws.replacing == ("spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize",)
    assert lws.delete_first


# ---------------------------------------------------------------- prod: protection


def test_prod_topology_change_in_one_step_is_refused_with_the_two_step_procedure(tmp_path: Path) -> None:
    head = variant("llama-405b-prod", tpu__topology="4x8", tpu__allowReplacement=True)
    change = compare_stack("llama-405b-prod", base("llama-405b-prod"), head)
    assert change.refused
    (blocker,) = change.prediction.blockers
    assert blocker.step.type == steps.NODE_POOL
    assert blocker.step.op == "replace"
    # The engine itself allows unprotect + replace in one update (it checks old and new protect);
    # the prod procedure refuses it so the allowance is applied on its own first.
    assert not blocker.engine
    assert "in one step" in blocker.why
    assert "allowReplacement: true` with the current shape first" in blocker.fix
    comment = render_comment([change])
    assert "(prod)" in comment
    assert "**Refused.**" in comment
    assert "| **refused** |" in comment
    assert "peak 32 chips" in comment
    (tmp_path / "base.json").write_text(json.dumps({"llama-405b-prod": base("llama-405b-prod")}))
    (tmp_path / "head.json").write_text(json.dumps({"llama-405b-prod": head}))
    assert main(["review", str(tmp_path / "base.json"), str(tmp_path / "head.json")]) == 2


def test_prod_topology_change_without_allowance_is_what_the_engine_refuses() -> None:
    change = compare_stack("llama-405b-prod", base("llama-405b-prod"), variant("llama-405b-prod", tpu__topology="4x8"))
    (blocker,) = change.prediction.blockers
    assert blocker.engine
    assert "protected (in the state and in this change)" in blocker.why
    assert "`pulumi up` would stop half-way" in render_comment([change])


def test_prod_topology_change_in_two_steps_goes_through() -> None:
    step1 = variant("llama-405b-prod", tpu__allowReplacement=True)
    first = compare_stack("llama-405b-prod", base("llama-405b-prod"), step1)
    assert not first.refused
    assert not first.prediction.of("replace")
    assert not first.prediction.of("delete")
    assert not first.prediction.of("create")
    (label_update,) = pools(first.prediction, "update")
    assert label_update.paths == ("nodeConfig.resourceLabels.gke-tpu-llm-allow-replace",)
    step2 = variant("llama-405b-prod", tpu__allowReplacement=True, tpu__topology="4x8")
    second = compare_stack("llama-405b-prod", step1, step2)
    assert not second.refused
    (pool,) = pools(second.prediction, "replace")
    assert pool.delete_first


def test_dev_is_never_refused_and_the_environment_is_shown() -> None:
    change = compare_stack("llama-405b", base("llama-405b"), variant("llama-405b", tpu__topology="4x8"))
    assert change.environment == "dev"
    assert not change.refused


# ---------------------------------------------------------------- buckets


def test_bucket_deletion_and_replacement_are_warned_and_refused_in_prod() -> None:
    prod = base("llama-405b-prod")
    head = copy.deepcopy(prod)
    head["resources"] = [r for r in head["resources"] if "bucket-pathways" not in r["urn"]]
    for r in head["resources"]:
        if r["type"] == steps.BUCKET:
            r["inputs"]["location"] = "US-CENTRAL1"
    change = compare_stack("llama-405b-prod", prod, head)
    warnings = " ".join(change.warnings)
    assert "deletes Bucket `bucket-pathways-bucket` (retained in GCP" in warnings
    assert "replaces Bucket `bucket-checkpoints-bucket` (location" in warnings
    assert "objects are lost" in warnings
    fixes = {b.step.name: b.fix for b in change.prediction.blockers}
    assert "keep `gke-tpu-llm:buckets.pathways`" in fixes["bucket-pathways-bucket"]
    assert "revert the change to `gke-tpu-llm:buckets.checkpoints`" in fixes["bucket-checkpoints-bucket"]


def test_dev_bucket_removed_is_warned() -> None:
    dev = base("llama-70b")
    head = copy.deepcopy(dev)
    head["resources"] = [r for r in head["resources"] if r["type"] != steps.BUCKET]
    change = compare_stack("llama-70b", dev, head)
    assert any(w.startswith("deletes Bucket") for w in change.warnings)
    assert not change.refused


# ---------------------------------------------------------------- the cluster


def test_cluster_replacement_replaces_its_provider_and_every_object() -> None:
    regional = variant("llama-70b", cluster__locationType="regional")
    change = compare_stack("llama-70b", base("llama-70b"), regional)
    replaced = {s.type for s in change.prediction.of("replace")}
    assert steps.CLUSTER in replaced
    assert steps.K8S_PROVIDER in replaced
    assert "kubernetes:apps/v1:Deployment" in replaced
    by_name = {s.name: s for s in change.prediction.steps}
    # Deleted before the cluster (its dependents), even the system pool its own location change replaces.
    assert by_name["llama-70b-system"].op == "replace"
    assert by_name["llama-70b-system"].delete_first
    dev = compare_stack("llama-405b", base("llama-405b"), variant("llama-405b", cluster__locationType="zonal"))
    release = {s.name: s for s in dev.prediction.steps}["lws-release"]
    assert release.op == "replace"  # every resource of a replaced provider, Helm releases too
    assert "its Kubernetes provider is replaced (new cluster)" in release.replacing
    prod = compare_stack(
        "llama-405b-prod", base("llama-405b-prod"), variant("llama-405b-prod", cluster__locationType="zonal")
    )
    assert {b.step.type for b in prod.prediction.blockers} >= {steps.CLUSTER}


# ---------------------------------------------------------------- against the real state


def _encrypted(value: Any) -> Any:
    """Secrets as a state holds them: ciphertext under Pulumi's secret signature."""
    if value == "[secret]":
        return {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}
    if isinstance(value, dict):
        return {k: _encrypted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encrypted(v) for v in value]
    return value


def state_export(plan: dict[str, Any]) -> dict[str, Any]:
    """A ``pulumi stack export`` of a stack deployed from ``plan`` (what the state holds: secrets
    encrypted, provider defaults recorded under ``__defaults``)."""
    resources = [{"urn": "urn:pulumi:s::gke-tpu-llm::pulumi:pulumi:Stack::gke-tpu-llm-s", "type": "pulumi:pulumi:Stack"}]
    for r in plan["resources"]:
        opts = r["options"]
        inputs = _encrypted(r["inputs"]) | {"__defaults": []}
        if r["type"] == steps.NODE_POOL:
            # What the bridge adds at Check: provider defaults, each listed in its object's __defaults.
            node_config = dict(inputs["nodeConfig"]) | {"diskType": "pd-balanced", "__defaults": ["diskType"]}
            inputs |= {"nodeConfig": node_config, "maxPodsPerNode": 110, "__defaults": ["maxPodsPerNode"]}
        entry: dict[str, Any] = {
            "urn": r["urn"],
            "custom": r["custom"],
            "type": r["type"],
            "inputs": inputs,
            "parent": r["parent"],
            "protect": opts["protect"],
            "retainOnDelete": opts["retainOnDelete"],
            "dependencies": r["dependencies"],
        }
        if r.get("provider"):
            entry["provider"] = f"urn:x::{r['provider']}::id"
        resources.append(entry)
    return {"version": 3, "deployment": {"resources": resources}}


def test_review_against_the_stack_state_refuses_a_one_step_prod_change(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps(state_export(base("llama-405b-prod"))))
    head = variant("llama-405b-prod", tpu__topology="4x8", tpu__allowReplacement=True)
    (tmp_path / "head.json").write_text(json.dumps(head))
    args = ["review", str(tmp_path / "state.json"), str(tmp_path / "head.json"), "--stack", "llama-405b-prod"]
    assert main(args) == 2
    same = compare({"llama-405b-prod": state_export(base("llama-405b-prod"))}, {"llama-405b-prod": base("llama-405b-prod")})
    assert all(not c.prediction.steps for c in same)  # provider defaults in the state are not changes


@pytest.mark.parametrize(
    ("changes", "forced"),
    [
        ({"tpu__spot": True}, "nodeConfig.spot"),
        ({"tpu__reservation": "my-tpu-reservation"}, "nodeConfig.reservationAffinity"),
        ({"tpu__threadsPerCore": 1}, "nodeConfig.advancedMachineFeatures"),
    ],
)
def test_review_against_state_sees_an_input_the_program_starts_setting(changes: dict[str, Any], forced: str) -> None:
    """A state holds only what the program set (plus listed defaults): a newly set input that
    forces a new pool is a replacement, not a "provider default"."""
    change = compare_stack("llama-405b", state_export(base("llama-405b")), variant("llama-405b", **changes))
    (pool,) = pools(change.prediction, "replace")
    assert forced in pool.replacing


# ---------------------------------------------------------------- teardown


def test_prod_teardown_is_refused_until_allow_teardown_lands(capsys: Any, shared_engine: None) -> None:
    plan = plan_teardown_of(base("llama-405b-prod"))
    assert plan.blockers
    assert any("Cluster" in b for b in plan.blockers)
    assert any("NodePool" in b for b in plan.blockers)
    assert main(["teardown", "llama-405b-prod"]) == 2
    assert "allowTeardown: true" in capsys.readouterr().out


def test_prod_teardown_destroys_everything_but_the_buckets(tmp_path: Path, capsys: Any) -> None:
    ready = variant("llama-405b-prod", allowTeardown=True)
    cluster = next(r for r in ready["resources"] if r["type"] == steps.CLUSTER)
    assert cluster["inputs"]["deletionProtection"] is False
    assert not cluster["options"]["protect"]
    plan = plan_teardown_of(ready)
    assert not plan.blockers
    retained = {(i.type, i.physical) for i in plan.retained}
    assert retained == {
        (steps.BUCKET, "your-prod-project-id-llama-405b-prod-checkpoints"),
        (steps.BUCKET, "your-prod-project-id-llama-405b-prod-pathways"),
    }
    destroyed = {i.type for i in plan.destroyed}
    assert {steps.CLUSTER, steps.NODE_POOL, "gcp:storage/bucketIAMMember:BucketIAMMember", steps.K8S_PROVIDER} <= destroyed
    # After the destroy the state holds the buckets (and their components) only; the workflow lists them.
    export = state_export(ready)
    after = {"deployment": {"resources": [r for r in export["deployment"]["resources"] if r["type"] == steps.BUCKET]}}
    (tmp_path / "after.json").write_text(json.dumps(after))
    assert main(["teardown", "llama-405b-prod", "--state", str(tmp_path / "after.json")]) == 0
    out = capsys.readouterr().out
    assert "destroyed (0)" in out
    assert "Bucket your-prod-project-id-llama-405b-prod-checkpoints" in out
    assert plan_teardown(plan_resources.from_state(after)).retained


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("", [], "cannot read a JSON document"),
        ("[]", [], "expected a JSON object"),
        ("null", [], "expected a JSON object"),
        ('{"deployment": {"resources": []}}', [], "needs --stack NAME"),
        ('{"deployment": {"resources": [{"type": "x"}]}}', ["--stack", "s"], "must be a list of objects with urn, type"),
        ('{"s": 1}', [], "`s` is not a plan"),
        ('{"s": {"resources": [{"urn": "u", "type": "t", "name": "n", "options": 5}]}}', [], "not plans this command"),
    ],
)
def test_review_cli_rejects_files_that_are_not_plans(
    tmp_path: Path, capsys: Any, content: str, extra: list[str], message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"s": {"resources": []}}))
    assert main(["review", str(bad), str(good), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert str(bad) in err


def test_review_cli_rejects_a_stack_the_head_has_not(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "state.json").write_text(json.dumps(state_export(base("llama-405b"))))
    (tmp_path / "head.json").write_text(json.dumps(base("llama-405b")))
    assert main(["review", str(tmp_path / "state.json"), str(tmp_path / "head.json"), "--stack", "llama-405b-prod"]) == 2
    assert "has no plan of stack 'llama-405b-prod'" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["", "[]", '{"deployment": null}', '{"llama-405b": {}}'])
def test_teardown_state_cli_rejects_files_that_are_not_state(tmp_path: Path, capsys: Any, content: str) -> None:
    (tmp_path / "state.json").write_text(content)
    assert main(["teardown", "x", "--state", str(tmp_path / "state.json")]) == 2
    assert "teardown: " in capsys.readouterr().err


@pytest.mark.slow
def test_teardown_all_reports_every_stack_before_refusing(capsys: Any, shared_engine: None) -> None:
    assert main(["teardown", "--all"]) == 2
    out = capsys.readouterr().out
    assert out.count("teardown of ") == len(stacks.list_stacks())


def test_dev_teardown_destroys_everything() -> None:
    plan = plan_teardown_of(base("llama-405b"))
    assert {i.type for i in plan.released} == {"kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch"}
    assert not plan.blockers
    assert not plan.retained


def test_teardown_steps_run_dependents_first_in_the_engines_rounds() -> None:
    """``pulumi destroy`` deletes in the rounds of the engine's ``ScheduleDeletes``: a resource's round
    is after every round of what depends on it, and resources with no dependency path between them
    share one (the TPU pool with the system pool, not after the workloads' objects one by one)."""
    plan = plan_teardown_of(base("llama-70b"))
    step = {i.name: i.step or 0 for i in plan.destroyed}
    assert all(step.values())  # every destroyed resource has its step
    resources = {r.name: r for r in plan_resources.from_plan(base("llama-70b")) if r.custom}
    urns = {r.urn: name for name, r in resources.items()}
    for name, res in resources.items():
        for dep in res.dependencies:
            if dep in urns:
                assert step[name] < step[urns[dep]], (name, urns[dep])
    assert step["tpu-slice-0-pool"] == step["llama-70b-system"] > step["llama-70b-k8s"]
    assert step["llama-70b-cluster"] == max(step.values())
    assert sorted(set(step.values())) == list(range(1, max(step.values()) + 1))  # numbered without gaps


def _doc_teardown_groups() -> list[set[str]]:
    """The ordered list of components/README-day2.md "## Teardown": the resource kinds each item names
    in backticks (the first item names none: every other kind, the Kubernetes objects)."""
    text = (stacks.ROOT / "components" / "README-day2.md").read_text()
    section = text.split("\n## Teardown\n", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^\d+\. (.*?)(?=^\d+\. |^\s*$)", section, flags=re.MULTILINE | re.DOTALL)
    return [set(re.findall(r"`([^`]+)`", item)) for item in items]


@pytest.mark.slow
def test_the_day2_teardown_order_is_the_commands(capsys: Any, shared_engine: None) -> None:
    """The day-2 page's teardown order, group by group, is the order ``teardown STACK`` prints for every
    stack it does not refuse: a kind the page does not name is a Kubernetes object (its first group),
    every step's groups come at or after the previous step's, and every kind the page names occurs."""
    groups = _doc_teardown_groups()
    assert len(groups) == 5, groups
    assert not groups[0], groups
    assert all(groups[1:]), groups
    group_of = {kind: i for i, kinds in enumerate(groups) for kind in kinds}
    printed: set[str] = set()
    for stack in stacks.list_stacks():
        status = main(["teardown", stack])
        out = capsys.readouterr().out
        if status == 2:  # prod until allowTeardown lands: nothing is destroyed
            assert "refused" in out
            continue
        kinds = {r["type"].rsplit(":", 1)[-1]: r["type"] for r in base(stack)["resources"]}
        steps_seen: list[set[int]] = []
        for line in out.split("retained in GCP")[0].split("removed from the stack")[0].splitlines():
            if re.match(r"  step \d+:$", line):
                steps_seen.append(set())
            elif line.startswith("  - ") and steps_seen:
                kind = line[4:].split()[0]
                printed.add(kind)
                if kind not in group_of:
                    assert kinds[kind].startswith("kubernetes:"), (stack, kind)
                steps_seen[-1].add(group_of.get(kind, 0))
        assert steps_seen, stack
        for before, after in itertools.pairwise(steps_seen):
            assert max(before) <= min(after), (stack, steps_seen)
    assert set(group_of) <= printed, set(group_of) - printed
