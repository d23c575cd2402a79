"""The pull-request comment, built from two commits' offline plans (base and head)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import yaml

from components.config import stack_files as stacks
from components.tools import report
from components.tools.cli import main
from components.tools.review import COMMENT_MARKER, compare, render_comment
from tests.conftest import planned, planned_file


def plan_with(tmp_path: Path, stack: str, tpu: dict[str, Any]) -> dict[str, Any]:
    """The plan of ``stack`` after a commit that changes its ``gke-tpu-llm:tpu`` section."""
    doc = yaml.safe_load(stacks.stack_path(stack).read_text())
    doc["config"]["gke-tpu-llm:tpu"].update(tpu)
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return report.plan_json(planned_file(stacks.read_stack_file(path)))


def test_review_topology_change_shows_pool_replacement_manifest_diff_and_cost_delta(tmp_path: Path) -> None:
    base = {"llama-405b": report.plan_json(planned("llama-405b"))}
    head = {"llama-405b": plan_with(tmp_path, "llama-405b", {"topology": "4x8"})}
    (change,) = compare(base, head)
    assert not [r for r in change.added if r.type == "gcp:container/nodePool:NodePool"]
    assert not [r for r in change.removed if r.type == "gcp:container/nodePool:NodePool"]
    assert [r.name for r in change.replaced if r.type == "gcp:container/nodePool:NodePool"] == ["tpu-slice-0-pool"]
    assert change.cost_delta == 16 * 2.70  # 16 more v6e chips at the us-east5 on-demand price
    assert any(w.startswith("replaces NodePool `tpu-slice-0-pool`") for w in change.warnings)
    assert change.manifest_diff  # the Kubernetes layer follows the slice
    comment = render_comment([change])
    assert comment.startswith(COMMENT_MARKER)
    assert "| `llama-405b` | dev |" in comment
    assert "+$43.20/h" in comment
    assert "1 × v6e 4x4 (ct6e-standard-4t × 4, 16 chips) → 1 × v6e 4x8 (ct6e-standard-4t × 8, 32 chips)" in comment
    assert "```diff" in comment


def test_review_disk_size_change_updates_the_pool_in_place(tmp_path: Path) -> None:
    base = {"llama-405b": report.plan_json(planned("llama-405b"))}
    head = {"llama-405b": plan_with(tmp_path, "llama-405b", {"diskSizeGb": 200})}
    (change,) = compare(base, head)
    (pool,) = [r for r in change.changed if r.type == "gcp:container/nodePool:NodePool"]
    assert pool.paths == ("nodeConfig.diskSizeGb",)
    assert pool.op == "update"  # disk_size_gb is updatable on node pools (not ForceNew upstream)
    assert not change.warnings
    assert change.cost_delta == 0


def test_review_unchanged_stacks_are_left_out() -> None:
    plans = {s: report.plan_json(planned(s)) for s in ("llama-70b", "saxml-175b")}
    assert compare(plans, plans) == []
    assert "No stack changes" in render_comment([])


def test_review_cli_builds_the_comment_from_two_files(tmp_path: Path, capsys: Any) -> None:
    base_plan = report.plan_json(planned("llama-70b"))
    head_plan = json.loads(json.dumps(base_plan))
    head_plan["cost_usd_per_hour"]["billed"] = base_plan["cost_usd_per_hour"]["billed"] + 1
    (tmp_path / "base.json").write_text(json.dumps({"llama-70b": base_plan}))
    (tmp_path / "head.json").write_text(json.dumps({"llama-70b": head_plan}))
    assert main(["review", str(tmp_path / "base.json"), str(tmp_path / "head.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(COMMENT_MARKER)
    assert "+$1.00/h" in out


def test_children_of_an_aliased_component_move_with_it() -> None:
    """The engine derives each child's aliases from its parent's (Pulumi SDK inherited_child_alias):
    a controller adopted under a new component name keeps its Helm release and CRDs."""
    from components.tools import plan_resources, steps

    stack = "urn:pulumi:s::gke-tpu-llm"
    comp, release = "gke-tpu-llm:controllers:HelmController", "kubernetes:helm.sh/v3:Release"

    def res(
        urn: str, typ: str, name: str, parent: str = "", aliases: tuple[str, ...] = (), custom: bool = True
    ) -> plan_resources.Res:
        return plan_resources.Res(urn=urn, type=typ, name=name, parent=parent, custom=custom, inputs={"v": 1}, aliases=aliases)

    old_comp = f"{stack}::{comp}::lws"
    old_release = f"{stack}::{comp}${release}::lws-release"
    base = [res(old_comp, comp, "lws", custom=False), res(old_release, release, "lws-release", old_comp)]
    new_comp = f"{stack}::{comp}::vllm-lws"
    head = [
        res(new_comp, comp, "vllm-lws", aliases=(old_comp,), custom=False),
        res(f"{stack}::{comp}${release}::vllm-lws-release", release, "vllm-lws-release", new_comp),
    ]
    prediction = steps.predict(base, head)
    assert not prediction.of("create")
    assert not prediction.of("delete")
    # Without the parent's alias the release would be deleted and created again.
    orphan = steps.predict(base, [dataclasses.replace(head[0], aliases=()), head[1]])
    assert {s.name for s in orphan.of("create")} >= {"vllm-lws-release"}
