"""Issue 26, operating a serving stack: autoscaling through GKE's AutoscalingMetric (no metrics adapter) down
to zero, the cold start in ``plan``, and the dashboard and alert policies derived from the spec."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from components.config import stack_files as stacks
from components.config.isolation import conflicts, tenancy
from components.config.resolve import resolve_values
from components.policy.checks import stack_violations
from components.policy.resource_props import Resource
from components.render import dashboards
from components.tools import replacement, report, steps
from components.tools.cli import main
from components.tools.review import compare_stack, render_comment
from components.tools.validate import validate_all
from components.workloads.vllm import autoscaling
from tests.conftest import planned
from tests.test_day2 import base, variant

ADAPTER_TYPES = {"kubernetes:apiregistration.k8s.io/v1:APIService", "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"}


def _viewer_grants(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for r in plan["resources"]
        if r["type"] == "gcp:projects/iAMMember:IAMMember" and r["inputs"]["role"] == "roles/monitoring.viewer"
    ]


FLOOR = autoscaling.AUTOSCALING_METRIC_MIN_GKE_VERSION
ZERO: dict[
    str, Any
] = {  # llama-70b's gateway stack scaling to zero honestly: the picker's metric, pools from zero, a 1.37 cluster
    "tpu": {"autoscaling": {"minNodes": 0, "maxNodes": 2}},
    "workload": {"vllm": {"autoscaling": {"minReplicas": 0, "source": "endpointPicker"}}},
}


def _doc(stack: str, **sections: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(stacks.stack_path(stack).read_text())
    for section, value in sections.items():
        target = doc["config"].setdefault(f"gke-tpu-llm:{section}", {})
        _merge(target, value)
    return doc


def _merge(target: dict[str, Any], value: dict[str, Any]) -> None:
    for key, item in value.items():
        if isinstance(item, dict) and isinstance(target.get(key), dict):
            _merge(target[key], item)
        else:
            target[key] = copy.deepcopy(item)


def _config(stack: str, **sections: dict[str, Any]) -> Any:
    import tempfile

    path = Path(tempfile.mkdtemp()) / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(_doc(stack, **sections)))
    stack_file = stacks.read_stack_file(path, stack)
    return resolve_values(stack_file.values, stack, stack_file.secret_keys).config


def _cli(tmp_path: Path, capsys: Any, stack: str, **sections: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(_doc(stack, **sections)))
    code = main(["plan", "--config", str(path), "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def _violation_keys(document: dict[str, Any]) -> set[str]:
    return {v["key"] for v in document.get("violations", [])}


# ---------------------------------------------------------------- AutoscalingMetric and the adapter


def test_llama_70b_plans_without_any_adapter_object_or_project_grant() -> None:
    plan = report.plan_json(planned("llama-70b"))
    types = {r["type"] for r in plan["resources"]}
    assert not ADAPTER_TYPES & types
    assert not _viewer_grants(plan)  # no project-wide monitoring grant
    assert "kubernetes:autoscaling.gke.io/v1beta1:AutoscalingMetric" in types
    (cluster,) = [r for r in plan["resources"] if r["type"] == steps.CLUSTER]
    assert cluster["inputs"]["podAutoscaling"] == {"hpaProfile": "PERFORMANCE"}
    (hpa,) = [m for m in plan["manifests"] if m["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "autoscaling.gke.io|vllm|num-requests-waiting"
    assert not tenancy(planned("llama-70b").config).claims or all(
        c.what != "Workload Identity namespace" or "custom-metrics" not in c.name
        for c in tenancy(planned("llama-70b").config).claims
    )


def test_the_fallback_stack_keeps_the_adapter_on_an_unpinned_cluster() -> None:
    plan = report.plan_json(planned("llama-70b-fallback"))
    assert ADAPTER_TYPES <= {r["type"] for r in plan["resources"]}
    assert _viewer_grants(plan)
    assert "podAutoscaling" not in next(r for r in plan["resources"] if r["type"] == steps.CLUSTER)["inputs"]


def test_autoscaling_metric_objects_validate_strictly() -> None:
    plan = planned("llama-70b")
    metric = next(m for m in plan.manifests if m["kind"] == "AutoscalingMetric")
    assert validate_all([metric]) == []
    broken = copy.deepcopy(metric)
    broken["spec"]["metrics"][0]["pod"]["containers"][0]["metrics"][0]["gauge"]["nmae"] = "x"
    assert validate_all([broken])


def test_adapter_stacks_in_one_project_conflict_and_autoscaling_metric_stacks_do_not() -> None:
    fallback = _config("llama-70b-fallback")
    same_project = _config("llama-70b", workload={"vllm": {"autoscaling": {"via": "adapter"}}})
    moved = same_project.model_copy(update={"project": fallback.project})
    assert any(
        "custom-metrics" in v.problem or "custom-metrics" in str(v.value) for v in conflicts(tenancy(moved), [tenancy(fallback)])
    )
    ours = _config("llama-70b").model_copy(update={"project": fallback.project})
    assert not [v for v in conflicts(tenancy(ours), [tenancy(fallback)]) if "custom-metrics" in v.problem]


def test_switching_from_the_adapter_switches_the_hpa_before_the_adapter_goes() -> None:
    before = variant("llama-70b", workload__vllm__autoscaling__via="adapter")
    change = compare_stack("llama-70b", before, base("llama-70b"))
    assert not change.prediction.of("replace")
    ordered = [s for s in change.prediction.steps if s.op != "delete"]
    kinds = [s.type.rsplit(":", 1)[-1] for s in ordered]
    assert kinds.index("Cluster") < kinds.index("AutoscalingMetric") < kinds.index("HorizontalPodAutoscaler")
    hpa = ordered[kinds.index("HorizontalPodAutoscaler")]
    assert hpa.op == "update"
    deleted = {s.type for s in change.prediction.of("delete")}
    assert ADAPTER_TYPES | {"gcp:projects/iAMMember:IAMMember"} <= deleted
    comment = render_comment([change])
    hpa_line = comment.index("update HorizontalPodAutoscaler")
    assert all(comment.index(f"at the end: delete {t.rsplit(':', 1)[-1]}") > hpa_line for t in (*ADAPTER_TYPES, "IAMMember"))
    assert not replacement.replacing_paths(steps.CLUSTER, ["podAutoscaling", "podAutoscaling.hpaProfile"])


# ---------------------------------------------------------------- scale to zero


def test_min_replicas_zero_plans_and_prints_its_cold_start(tmp_path: Path, capsys: Any) -> None:
    code, plan = _cli(tmp_path, capsys, "llama-70b", **ZERO)
    assert code == 0, plan
    (hpa,) = [m for m in plan["manifests"] if m["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["minReplicas"] == 0
    assert {m["type"] for m in hpa["spec"]["metrics"]} == {"External"}
    cold = plan["operations"]["cold_start"]
    assert cold["reaches_zero"][0].startswith("replicas")
    assert cold["weight_bytes"] > 100e9
    assert cold["total_seconds"] > cold["compile_seconds"] > 0
    # The host's network is the slice's catalog DCN bandwidth (one v6e 8-chip host: 4 x 200 Gbps NICs).
    assert cold["assumptions"]["host_network_bytes_per_second"] == 800e9 / 8
    metric = next(m for m in plan["manifests"] if m["kind"] == "AutoscalingMetric")
    for entry in metric["spec"]["metrics"]:
        promql_parser.parse(entry["promql"]["query"])


@pytest.mark.parametrize(
    ("sections", "key"),
    [
        (
            {"workload": {"vllm": {"autoscaling": {"minReplicas": 0}}}, "tpu": {"autoscaling": {"minNodes": 0, "maxNodes": 2}}},
            "workload.vllm.autoscaling.minReplicas",
        ),  # a Pods metric vanishes at zero
        (
            {"workload": {"vllm": {"autoscaling": {"minReplicas": 0, "source": "endpointPicker"}}}},
            "workload.vllm.autoscaling.minReplicas",
        ),  # the pool holds a node anyway
        ({**ZERO, "cluster": {"version": "1.36.4-gke.1247000"}}, "cluster.version"),
        (
            {"workload": {"vllm": {"autoscaling": {"via": "autoscalingMetric"}}}, "cluster": {"version": "1.35.1-gke.1396000"}},
            "workload.vllm.autoscaling.via",
        ),
        (
            {"_stack": "llama-70b-fallback", "workload": {"vllm": {"autoscaling": {"source": "endpointPicker"}}}},
            "workload.vllm.autoscaling.source",
        ),  # no gateway, and the adapter
    ],
)
def test_bad_autoscaling_combinations_exit_2_naming_the_key(
    tmp_path: Path, capsys: Any, sections: dict[str, Any], key: str
) -> None:
    stack = sections.pop("_stack", "llama-70b")
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(_doc(stack, **sections)))
    code = main(["plan", "--config", str(path), "--json"])
    captured = capsys.readouterr()
    assert code == 2
    assert key in captured.out + captured.err


# ---------------------------------------------------------------- dashboards and alerts


@pytest.mark.parametrize("stack", stacks.list_stacks())
def test_every_query_parses_and_serving_stacks_have_a_dashboard_and_alerts(stack: str) -> None:
    plan = report.plan_json(planned(stack))
    by_type: dict[str, list[dict[str, Any]]] = {}
    for res in plan["resources"]:
        by_type.setdefault(res["type"], []).append(res)
    (board,) = by_type["gcp:monitoring/dashboard:Dashboard"]
    layout = json.loads(board["inputs"]["dashboardJson"])
    assert layout["displayName"].startswith(f"{stack}: ")
    for tile in layout["mosaicLayout"]["tiles"]:
        for data in tile["widget"].get("xyChart", {}).get("dataSets", []):
            promql_parser.parse(data["timeSeriesQuery"]["prometheusQuery"])
    policies = by_type["gcp:monitoring/alertPolicy:AlertPolicy"]
    for policy in policies:
        promql_parser.parse(policy["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"])
        assert policy["inputs"]["displayName"].startswith(f"{stack}: ")
    if planned(stack).config.kind_info.mode == "serve":
        assert any(p["inputs"]["userLabels"][dashboards.ALERT_LABEL] == "availability" for p in policies)


def test_llama_70b_live_cost_panel_uses_the_prices_plan_uses() -> None:
    plan = report.plan_json(planned("llama-70b"))
    config = planned("llama-70b").config
    (panel,) = [p for p in dashboards.panels(config) if p.title.startswith("$ per million")]
    per_node = plan["cost_usd_per_hour"]["per_node"]
    assert per_node is not None
    assert panel.query.startswith(f"({per_node} * ")
    tiers = plan["capacity_tiers"]["tiers"]
    assert all(f"{t['usd_per_hour_max'] / (t['chips_max'] // config.tpu.slice.chips_per_host)}" in panel.query for t in tiers)


def test_a_changed_ttft_target_changes_exactly_one_alert() -> None:
    serving = {"serving": {"inputTokens": 1024, "outputTokens": 256, "concurrency": 8, "ttftMs": 2000, "tpotMs": 80}}
    first = {a.key: a for a in dashboards.alerts(_config("llama-70b", workload=serving))}
    moved = copy.deepcopy(serving)
    moved["serving"]["ttftMs"] = 1500
    second = {a.key: a for a in dashboards.alerts(_config("llama-70b", workload=moved))}
    changed = [key for key in first if first[key] != second[key]]
    assert changed == ["ttft"]
    assert second["ttft"].inputs == {"workload.serving.ttftMs": 1500}
    assert "> 1.5)" in second["ttft"].query
    assert "> 2.0)" in first["ttft"].query


def test_dashboards_and_alerts_update_in_place() -> None:
    change = compare_stack(
        "llama-70b",
        base("llama-70b"),
        variant("llama-70b", observability={"notificationChannels": ["projects/your-project-id/notificationChannels/123"]}),
    )
    updated = {s.type for s in change.prediction.of("update")}
    assert "gcp:monitoring/alertPolicy:AlertPolicy" in updated
    assert not change.prediction.of("replace")
    for token in ("gcp:monitoring/dashboard:Dashboard", "gcp:monitoring/alertPolicy:AlertPolicy"):
        assert not replacement.replacing_paths(token, ["dashboardJson", "conditions", "displayName", "notificationChannels"])
        assert replacement.replacing_paths(token, ["project"]) == ["project"]


def test_bad_notification_channel_exits_2(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "Pulumi.llama-70b.yaml"
    doc = _doc("llama-70b")
    doc["config"]["gke-tpu-llm:observability"] = {"notificationChannels": ["my-email"]}
    path.write_text(yaml.safe_dump(doc))
    assert main(["plan", "--config", str(path)]) == 2
    assert "observability.notificationChannels" in capsys.readouterr().err + ""


def test_prod_serving_stack_needs_its_availability_alert() -> None:
    plan = report.plan_json(planned("llama-405b-prod"))
    resources = [Resource(r["type"], r["name"], r["inputs"], environment="prod") for r in plan["resources"]]
    assert not [v for v in stack_violations(resources) if v[0] == "prod-serving-availability-alert"]
    stripped = [r for r in resources if r.type != "gcp:monitoring/alertPolicy:AlertPolicy"]
    assert [v[0] for v in stack_violations(stripped)] == ["prod-serving-availability-alert"]
