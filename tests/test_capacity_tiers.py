"""Capacity tiers (``tpu.capacity``): the rules GKE sets for each type and their combination, one node
pool per (slice, tier) with the fields GKE requires, $/h per tier from the catalog, and day 2 (existing
stacks keep their pools; a fallback tier is added beside ``tpu-slice-0`` without replacing it)."""

from __future__ import annotations

import ast
import copy
import inspect
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pulumi_gcp
import pytest
import yaml

from components.catalog import tpu as tpu_catalog
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.platform.args import ArgsError
from components.platform.tpu_pool import TpuSlicePoolArgs
from components.tools import plan_resources, report, steps
from components.tools import replacement as rp
from components.tools.cli import main
from components.tools.review import compare_stack, render_comment
from tests.conftest import make_config, planned, planned_file, run_cli_process

NODE_POOL = steps.NODE_POOL
FALLBACK = "llama-70b-fallback"  # reservation -> flexStart -> spot -> onDemand, v6e 2x4 single-host
QUEUED = "llama3-8b-train-queued"  # queuedProvisioning, v6e 4x4 multi-host


def tpu_pools(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """TPU node-pool resources of a plan JSON by GKE pool name."""
    return {
        r["inputs"]["name"]: r
        for r in plan["resources"]
        if r["type"] == NODE_POOL and str(r["inputs"]["name"]).startswith("tpu-slice-")
    }


@cache
def _plan_json(stack: str) -> dict[str, Any]:
    return report.plan_json(planned(stack))


def plan_of(stack: str) -> dict[str, Any]:
    return copy.deepcopy(_plan_json(stack))


@cache
def _variant(stack: str, tpu_yaml: str) -> dict[str, Any]:
    doc = yaml.safe_load(stacks.stack_path(stack).read_text())
    tpu = doc["config"]["gke-tpu-llm:tpu"]
    for key, value in yaml.safe_load(tpu_yaml).items():
        if value is None:
            tpu.pop(key, None)
        else:
            tpu[key] = value
    path = Path(tempfile.mkdtemp()) / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return report.plan_json(planned_file(stacks.read_stack_file(path, stack)))


def variant(stack: str, **tpu: Any) -> dict[str, Any]:
    """The plan of ``stack`` with its ``gke-tpu-llm:tpu`` keys set (None removes one)."""
    return copy.deepcopy(_variant(stack, yaml.safe_dump(tpu)))


def config_error(**tpu: Any) -> ConfigError:
    environment = tpu.pop("environment", None)
    extra = {"environment": environment} if environment else {}
    with pytest.raises(ConfigError) as caught:
        make_config(tpu=tpu, **extra)
    return caught.value


# ---------------------------------------------------------------- each capacity type: its pool


def test_fallback_stack_has_one_pool_per_tier_named_by_type() -> None:
    pools = tpu_pools(plan_of(FALLBACK))
    assert sorted(pools) == ["tpu-slice-0", "tpu-slice-0-flex", "tpu-slice-0-ondemand", "tpu-slice-0-spot"]
    assert planned(FALLBACK).outputs["tpu_pools"] == [
        "tpu-slice-0",
        "tpu-slice-0-flex",
        "tpu-slice-0-spot",
        "tpu-slice-0-ondemand",
    ]


def test_reservation_first_tier_holds_the_slice_with_a_specific_reservation() -> None:
    pool = tpu_pools(plan_of(FALLBACK))["tpu-slice-0"]
    inputs, node_config = pool["inputs"], pool["inputs"]["nodeConfig"]
    assert inputs["nodeCount"] == 1
    assert "autoscaling" not in inputs
    assert node_config["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["llama-70b-v6e"],
    }
    assert "flexStart" not in node_config
    assert "spot" not in node_config
    assert inputs["management"] == {"autoRepair": True, "autoUpgrade": True}
    assert "nodeCount" not in pool["options"]["ignoreChanges"]


def test_flex_start_pool_carries_exactly_what_gke_requires() -> None:
    pool = tpu_pools(plan_of(FALLBACK))["tpu-slice-0-flex"]
    inputs, node_config = pool["inputs"], pool["inputs"]["nodeConfig"]
    assert node_config["flexStart"] is True
    assert node_config["maxRunDuration"] == f"{24 * 3600}s"
    assert node_config["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert "spot" not in node_config
    assert "queuedProvisioning" not in inputs
    assert inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 1, "locationPolicy": "ANY"}
    assert inputs["initialNodeCount"] == 0
    assert "nodeCount" not in inputs
    assert inputs["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert {"nodeCount", "initialNodeCount"} <= set(pool["options"]["ignoreChanges"])  # the autoscaler's


@pytest.mark.parametrize(("pool", "spot"), [("tpu-slice-0-spot", True), ("tpu-slice-0-ondemand", False)])
def test_spot_and_on_demand_fallbacks_scale_from_zero(pool: str, spot: bool) -> None:
    res = tpu_pools(plan_of(FALLBACK))[pool]
    inputs, node_config = res["inputs"], res["inputs"]["nodeConfig"]
    assert node_config.get("spot", False) is spot
    assert "reservationAffinity" not in node_config
    assert "flexStart" not in node_config
    assert inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 1, "locationPolicy": "ANY"}
    assert inputs["management"]["autoRepair"] is True
    assert {"nodeCount", "initialNodeCount"} <= set(res["options"]["ignoreChanges"])


def test_queued_provisioning_pool_is_a_whole_slice_from_zero() -> None:
    (pool,) = tpu_pools(plan_of(QUEUED)).values()
    inputs, node_config = pool["inputs"], pool["inputs"]["nodeConfig"]
    assert inputs["name"] == "tpu-slice-0"
    assert inputs["queuedProvisioning"] == {"enabled": True}
    assert node_config["flexStart"] is True
    assert node_config["maxRunDuration"] == f"{12 * 3600}s"
    assert node_config["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert node_config["labels"] == {tpu_catalog.QUEUED_NODE_LABEL: "true"}
    # 0 <-> all 4 hosts of the 4x4 (atomic), still placed COMPACT as one slice.
    assert inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
    assert inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    assert inputs["management"] == {"autoRepair": False, "autoUpgrade": True}


def test_multi_host_fallback_tier_autoscales_zero_to_all_hosts() -> None:
    pools = tpu_pools(variant("llama-405b", capacity=[{"type": "onDemand"}, {"type": "spot"}]))
    # In a ladder an on-demand first tier scales from zero too: a stock-out leaves the next tier to the
    # ComputeClass instead of failing the pool's creation (TpuSpec.tier_holds).
    assert pools["tpu-slice-0"]["inputs"]["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
    held = tpu_pools(variant("llama-405b", capacity=[{"type": "reservation", "reservation": "r"}, {"type": "spot"}]))
    assert held["tpu-slice-0"]["inputs"]["nodeCount"] == 4  # a reservation is paid for: held
    spot = pools["tpu-slice-0-spot"]["inputs"]
    assert spot["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
    assert spot["placementPolicy"] == pools["tpu-slice-0"]["inputs"]["placementPolicy"]


def test_flex_start_first_tier_also_scales_from_zero() -> None:
    (pool,) = tpu_pools(variant("llama-405b", zone="us-east5-a", capacity=[{"type": "flexStart"}])).values()
    assert pool["inputs"]["name"] == "tpu-slice-0"
    assert pool["inputs"]["autoscaling"]["minNodeCount"] == 0
    # Unset is sent as GKE's 7-day maximum: the ForceNew field then never differs from what GKE reports.
    assert pool["inputs"]["nodeConfig"]["maxRunDuration"] == f"{tpu_catalog.DWS_MAX_RUN_HOURS * 3600}s"


def test_field_names_are_the_provider_sdks() -> None:
    """Every input this program sets for capacity exists in the installed pulumi_gcp, under the wire
    name the plan shows (the SDK's @pulumi.getter names)."""
    import pulumi_gcp.container as container

    def params(cls: type) -> set[str]:
        return set(inspect.signature(cls).parameters)

    assert {"flex_start", "max_run_duration", "reservation_affinity", "spot", "labels", "taints"} <= params(
        container.NodePoolNodeConfigArgs
    )
    assert params(container.NodePoolQueuedProvisioningArgs) >= {"enabled"}
    assert {"key", "value", "effect"} <= params(container.NodePoolNodeConfigTaintArgs)
    assert {"auto_repair", "auto_upgrade"} <= params(container.NodePoolManagementArgs)
    # Scale-from-zero pools are bounded per zone; tpu.autoscaling keeps the total bounds.
    assert {"min_node_count", "max_node_count", "total_min_node_count", "total_max_node_count", "location_policy"} <= params(
        container.NodePoolAutoscalingArgs
    )
    assert {"queued_provisioning", "autoscaling", "initial_node_count"} <= params(container.NodePoolArgs)
    source = (Path(pulumi_gcp.__file__).parent / "container" / "_inputs.py").read_text()
    tree = ast.parse(source)
    getters = {
        kw.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "getter"
        for kw in node.keywords
        if kw.arg == "name" and isinstance(kw.value, ast.Constant)
    }
    for wire in ("flexStart", "maxRunDuration", "reservationAffinity", "consumeReservationType", "minNodeCount", "maxNodeCount"):
        assert wire in getters, wire
    planned_inputs = tpu_pools(plan_of(QUEUED))["tpu-slice-0"]["inputs"]
    assert {"queuedProvisioning", "autoscaling", "nodeConfig", "management"} <= set(planned_inputs)


# ---------------------------------------------------------------- the library Args


def _args(**kw: Any) -> TpuSlicePoolArgs:
    base: dict[str, Any] = {
        "cluster": "c",
        "project": "my-project-123",
        "location": "us-east5",
        "node_service_account": "n@my-project-123.iam.gserviceaccount.com",
        "generation": "v6e",
        "topology": "4x4",
        "zone": "us-east5-a",
    }
    return TpuSlicePoolArgs(**{**base, **kw})


def test_args_capacity_of_each_option() -> None:
    assert _args().capacity == "onDemand"
    assert _args(spot=True).capacity == "spot"
    assert _args(reservation="projects/other-proj/reservations/r/reservationBlocks/b").capacity == "reservation"
    assert _args(flex_start=True, max_run_hours=2).capacity == "flexStart"
    assert _args(queued_provisioning=True).capacity == "queuedProvisioning"
    assert _args(node_labels={"cloud.google.com/compute-class": "tpu"}, node_taints=[("k", "v", "NoSchedule")]).node_labels


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"flex_start": True, "spot": True}, "flex_start"),
        ({"queued_provisioning": True, "reservation": "r"}, "queued_provisioning"),
        ({"max_run_hours": 3}, "max_run_hours"),
        ({"flex_start": True, "max_run_hours": 200}, "max_run_hours"),
        ({"flex_start": True, "zone": "us-east5-c"}, "flex_start"),  # not a documented v6e flex-start zone
        ({"queued_provisioning": True, "topology": "2x2"}, "queued_provisioning"),  # single-host
        ({"scale_from_zero": True, "topology": "2x2", "autoscaling": {"min_nodes": 0, "max_nodes": 2}}, "scale_from_zero"),
    ],
)
def test_args_refuse_what_gke_refuses(kw: dict[str, Any], field: str) -> None:
    if "autoscaling" in kw:
        from components.platform.tpu_pool import Autoscaling

        kw = {**kw, "autoscaling": Autoscaling(**kw["autoscaling"])}
    with pytest.raises(ArgsError) as caught:
        _args(**kw)
    assert field in str(caught.value)


# ---------------------------------------------------------------- bad combinations name their keys


@pytest.mark.parametrize(
    ("tpu", "key", "words"),
    [
        ({"capacity": [{"type": "spot"}], "spot": True}, "tpu.spot", "shorthand"),
        ({"capacity": [{"type": "onDemand"}], "reservation": "r"}, "tpu.reservation", "shorthand"),
        ({"capacity": []}, "tpu.capacity", "no tier"),
        ({"capacity": [{"type": "reservation"}]}, "tpu.capacity.0.reservation", "required"),
        ({"capacity": [{"type": "spot", "reservation": "r"}]}, "tpu.capacity.0.reservation", "only for type reservation"),
        ({"capacity": [{"type": "onDemand", "maxRunHours": 4}]}, "tpu.capacity.0.maxRunHours", "only for flexStart"),
        ({"capacity": [{"type": "spot"}, {"type": "onDemand"}, {"type": "spot"}]}, "tpu.capacity.2.type", "repeats tier 0"),
        (
            {"zone": "us-east5-a", "capacity": [{"type": "queuedProvisioning"}, {"type": "onDemand"}]},
            "tpu.capacity.0.type",
            "ProvisioningRequest",
        ),
        (
            {"zone": "us-east5-a", "topology": "2x2", "capacity": [{"type": "queuedProvisioning"}]},
            "tpu.capacity.0.type",
            "multi-host",
        ),
        ({"zone": "us-east5-c", "capacity": [{"type": "onDemand"}, {"type": "flexStart"}]}, "tpu.capacity.1.type", "us-east5-a"),
        (
            {
                "zone": "us-east5-a",
                "topology": "2x2",
                "autoscaling": {"minNodes": 1, "maxNodes": 2},
                "capacity": [{"type": "flexStart"}],
            },
            "tpu.autoscaling",
            "autoscales from zero",
        ),
        ({"capacity": [{"type": "spot"}], "environment": "prod"}, "tpu.capacity.0.type", "not allowed in prod"),
        ({"capacity": [{"type": "onDemand"}, {"type": "spot"}], "environment": "prod"}, "tpu.capacity.1.type", "fallback"),
    ],
)
def test_bad_combination_names_the_key(tpu: dict[str, Any], key: str, words: str) -> None:
    error = config_error(**tpu)
    hits = [v for v in error.violations if v.key.removeprefix("gke-tpu-llm:") == key]
    assert hits, (key, [v.key for v in error.violations])
    assert any(words in f"{v.problem} {v.allowed} {v.fix}" for v in hits), [str(v) for v in hits]


def test_flex_start_needs_a_documented_generation_zone() -> None:
    region: dict[str, Any] = {"gcp:region": "us-central1"}
    with pytest.raises(ConfigError) as caught:
        make_config(
            tpu={"generation": "v5p", "topology": "2x2x2", "zone": "us-central1-a", "capacity": [{"type": "flexStart"}]}, **region
        )
    (hit,) = [v for v in caught.value.violations if v.key.endswith("tpu.capacity.0.type")]
    assert hit.allowed == ", ".join(tpu_catalog.GENERATIONS["v5p"].flex_start_zones) == "us-east5-a"
    assert tpu_catalog.GENERATIONS["tpu7x"].flex_start_zones == ()  # allow-listed only: no documented zone
    # The catalog's own zones pass; allowUndocumentedZone is the escape hatch where Google added one.
    make_config(tpu={"zone": "us-east5-a", "capacity": [{"type": "flexStart"}]})
    make_config(tpu={"zone": "us-east5-c", "allowUndocumentedZone": True, "capacity": [{"type": "flexStart"}]})


def test_shared_reservation_block_and_sub_block_forms_validate() -> None:
    for value in ("r1", "projects/other-proj/reservations/r1", "r1/reservationBlocks/b1/reservationSubBlocks/s1"):
        cfg = make_config(tpu={"capacity": [{"type": "reservation", "reservation": value}, {"type": "onDemand"}]})
        assert cfg.tpu.tiers[0].reservation == value
        assert cfg.pool_names() == ["tpu-slice-0", "tpu-slice-0-ondemand"]


@pytest.mark.slow
def test_plan_exits_2_naming_the_key(tmp_path: Path) -> None:
    doc = yaml.safe_load(stacks.stack_path(FALLBACK).read_text())
    doc["config"]["gke-tpu-llm:tpu"]["capacity"][0].pop("reservation")
    doc["config"]["gke-tpu-llm:tpu"]["spot"] = True
    path = tmp_path / "Pulumi.bad-capacity.yaml"
    path.write_text(yaml.safe_dump(doc))
    done = run_cli_process("plan", "--config", str(path))
    assert done.returncode == 2, done.stderr
    out = done.stdout + done.stderr
    assert "tpu.capacity.0.reservation" in out
    assert "tpu.spot" in out
    assert "Traceback" not in out


# ---------------------------------------------------------------- $/h per tier


def test_cost_per_tier_comes_from_the_catalog() -> None:
    plan = plan_of(FALLBACK)
    tiers = plan["capacity_tiers"]
    v6e = tpu_catalog.GENERATIONS["v6e"]
    s = tpu_catalog.find_slice("v6e", "2x4", "ct6e-standard-8t")
    assert s is not None
    price = v6e.prices["us-east5"]
    assert price is not None
    assert price.spot is not None
    expected = {
        "reservation": price.on_demand * 8,  # billed at the on-demand rate, held at 1 node
        "flexStart": v6e.flex_start_prices["us-east5"] * 8,
        "spot": price.spot * 8,
        "onDemand": price.on_demand * 8,
    }
    assert [t["type"] for t in tiers["tiers"]] == list(expected)
    for tier in tiers["tiers"]:
        assert tier["usd_per_hour_max"] == pytest.approx(expected[tier["type"]])
        assert tier["chips_max"] == 8
    by_type = {t["type"]: t for t in tiers["tiers"]}
    assert by_type["reservation"]["usd_per_hour_min"] == pytest.approx(expected["reservation"])  # held
    assert by_type["spot"]["usd_per_hour_min"] == 0  # a fallback costs nothing until it fills
    assert by_type["flexStart"]["pools"] == ["tpu-slice-0-flex"]
    assert "dws/pricing" in by_type["flexStart"]["basis"]
    assert tpu_catalog.FLEX_START_PRICE_AS_OF in by_type["flexStart"]["basis"]
    assert tpu_catalog.PRICE_AS_OF in by_type["spot"]["basis"]
    assert tiers["usd_per_hour_if_every_tier_fills"] == pytest.approx(sum(expected.values()))
    assert tiers["chips_if_every_tier_fills"] == 32
    # The billed figure is the preferred tier's; the slices list one entry per pool with its own bounds.
    assert plan["cost_usd_per_hour"]["billed"] == pytest.approx(expected["reservation"])
    assert [(x["pool"], x["nodes_min"], x["nodes_max"]) for x in plan["slices"]] == [
        ("tpu-slice-0", 1, 1),
        ("tpu-slice-0-flex", 0, 1),
        ("tpu-slice-0-spot", 0, 1),
        ("tpu-slice-0-ondemand", 0, 1),
    ]


def test_a_tier_without_a_known_price_is_none_and_so_is_the_maximum() -> None:
    # v5e has a documented flex-start zone but no flex-start price in any source: unknown, never guessed.
    region: dict[str, Any] = {"gcp:region": "us-west4"}
    cfg = make_config(
        tpu={
            "generation": "v5e",
            "topology": "4x4",
            "zone": "us-west4-a",
            "capacity": [{"type": "onDemand"}, {"type": "flexStart"}],
        },
        **region,
    )
    tiers = report.tier_costs(cfg)
    assert tiers["tiers"][0]["usd_per_hour_max"] is not None
    assert tiers["tiers"][1]["usd_per_hour_max"] is None
    assert tiers["usd_per_hour_if_every_tier_fills"] is None


def test_plan_text_shows_each_tier_and_the_maximum(capsys: pytest.CaptureFixture[str], shared_engine: None) -> None:
    assert main(["plan", FALLBACK]) == 0
    out = capsys.readouterr().out
    rows = {tuple(cell.strip() for cell in line.split("│")[1:-1]) for line in out.splitlines() if "│" in line}
    assert ("0", "reservation", "tpu-slice-0", "8", "$21.60/h", "[1]") in rows
    assert ("1", "flexStart", "tpu-slice-0-flex", "0-8", "$10.80/h", "[2]") in rows
    assert ("3", "onDemand", "tpu-slice-0-ondemand", "0-8", "$21.60/h", "[3]") in rows  # same source as spot: listed once
    assert "Maximum if every tier fills (32 chips): $63.72/h" in out
    # The Cost line is the preferred tier's; the table has every tier's, the other capacity types none.
    assert (
        "Cost (TPU chips only, us-east5), reservation (the preferred tier; each tier below): $21.60/h as deployed, "
        "the pool at its fixed size (1 node, 8 chips); $21.60/h per node (ct6e-standard-8t)"
    ) in " ".join(out.split())


def test_plan_json_prices_the_configured_tiers_only() -> None:
    """``cost_usd_per_hour`` names the stack's tiers, preferred first, and no other capacity type; a
    one-tier stack has its one price (the default tier is on-demand)."""
    ladder = plan_of(FALLBACK)["cost_usd_per_hour"]
    assert list(ladder["by_capacity"]) == ["reservation", "flexStart", "spot", "onDemand"]
    assert (ladder["capacity"], ladder["billed"]) == ("reservation", ladder["by_capacity"]["reservation"])
    single = report.cost_per_hour(make_config(tpu={"capacity": [{"type": "flexStart"}], "zone": "us-east5-a"}))
    assert list(single["by_capacity"]) == ["flexStart"]
    assert single["billed"] == pytest.approx(16 * tpu_catalog.GENERATIONS["v6e"].flex_start_prices["us-east5"])
    assert "dws/pricing" in single["basis"]
    assert list(report.cost_per_hour(make_config())["by_capacity"]) == ["onDemand"]


def test_rollout_prices_pools_at_their_capacity_rate() -> None:
    by_name = {p.inputs["name"]: p for p in plan_resources.from_plan(plan_of(FALLBACK)) if p.type == NODE_POOL}
    assert steps.pool_capacity(by_name["tpu-slice-0-flex"]) == "flexStart"
    assert steps.pool_quota(by_name["tpu-slice-0-flex"]) == "v6e preemptible"
    assert steps.pool_quota(by_name["tpu-slice-0"]) == "v6e reserved"
    flex = tpu_catalog.GENERATIONS["v6e"].flex_start_prices["us-east5"]
    assert steps.pool_usd_per_hour(by_name["tpu-slice-0-flex"], "us-east5") == pytest.approx(flex * 8)


# ---------------------------------------------------------------- replacement rules


@pytest.mark.parametrize(
    "path",
    [
        "nodeConfig.flexStart",
        "nodeConfig.maxRunDuration",
        "queuedProvisioning",
        "queuedProvisioning.enabled",
        "nodeConfig.reservationAffinity",
    ],
)
def test_dws_and_reservation_inputs_replace_the_pool(path: str) -> None:
    assert rp.replacing_paths(NODE_POOL, [path]) == [path]


def test_labels_taints_autoscaling_and_management_update_in_place() -> None:
    paths = ["nodeConfig.labels", "nodeConfig.taints", "autoscaling.totalMaxNodeCount", "management.autoRepair"]
    assert rp.replacing_paths(NODE_POOL, paths) == []


# ---------------------------------------------------------------- day 2


@pytest.mark.parametrize(
    ("stack", "tpu"), [("llama-405b", {"capacity": [{"type": "onDemand"}]}), ("llama-70b", {"capacity": [{"type": "onDemand"}]})]
)
def test_the_long_form_of_a_stacks_one_tier_changes_nothing(stack: str, tpu: dict[str, Any]) -> None:
    base, head = plan_of(stack), variant(stack, **tpu)
    assert tpu_pools(base) == tpu_pools(head)
    assert steps.predict(plan_resources.from_plan(base), plan_resources.from_plan(head)).steps == []


def test_spot_shorthand_and_spot_tier_are_the_same_pool() -> None:
    short = variant("llama3-8b-train", spot=True)
    long = variant("llama3-8b-train", capacity=[{"type": "spot"}])
    assert tpu_pools(short) == tpu_pools(long)


def test_existing_stacks_pools_carry_no_capacity_fields_they_did_not_have() -> None:
    for stack in stacks.list_stacks():
        if stack in (FALLBACK, QUEUED):
            continue
        for name, pool in tpu_pools(plan_of(stack)).items():
            inputs, node_config = pool["inputs"], pool["inputs"]["nodeConfig"]
            assert name == "tpu-slice-0" or (name.startswith("tpu-slice-") and name.split("-")[-1].isdigit()), name
            assert not {"flexStart", "maxRunDuration", "labels", "taints"} & set(node_config), (stack, name)
            assert "queuedProvisioning" not in inputs
            assert inputs["management"]["autoRepair"] is True


def test_adding_a_fallback_tier_creates_pools_and_keeps_tpu_slice_0() -> None:
    base = plan_of("llama-405b")
    head = variant("llama-405b", capacity=[{"type": "onDemand"}, {"type": "spot"}])
    change = compare_stack("llama-405b", base, head)
    pool_steps = [s for s in change.prediction.steps if s.type == NODE_POOL]
    # tpu-slice-0 stays: only its ComputeClass label and taint are added, in place (GKE updates node labels
    # and taints of an existing pool without recreating it; node_config.labels/taint are not ForceNew).
    assert [(s.op, s.name) for s in pool_steps] == [("update", "tpu-slice-0-pool"), ("create", "tpu-slice-0-spot-pool")]
    # ... and the on-demand first tier of a ladder becomes autoscaled 0..4 in place (its node count is then
    # the autoscaler's: ignored, so the running slice stays).
    assert set(pool_steps[0].paths) == {"autoscaling", "nodeConfig.labels", "nodeConfig.taints"}
    assert not change.refused
    assert not change.warnings
    comment = render_comment([change], {"llama-405b": head})
    assert "capacity tiers" in comment
    assert "onDemand $43.20/h" in comment
    assert "spot $19.44/h" in comment


def test_prod_fallback_tier_is_added_without_lifting_protection() -> None:
    base = plan_of("llama-405b-prod")
    head = variant("llama-405b-prod", capacity=[{"type": "onDemand"}, {"type": "reservation", "reservation": "prod-v6e"}])
    change = compare_stack("llama-405b-prod", base, head)
    assert not change.refused
    ops = [(s.op, s.name, s.paths) for s in change.prediction.steps if s.type == NODE_POOL]
    assert ops == [
        ("update", "tpu-slice-0-pool", ("autoscaling", "nodeConfig.labels", "nodeConfig.taints")),
        ("create", "tpu-slice-0-reservation-pool", ()),
    ]


def test_changing_the_first_tiers_type_replaces_its_pool() -> None:
    base = plan_of("llama3-8b-train")
    head = variant("llama3-8b-train", capacity=[{"type": "spot"}])
    change = compare_stack("llama3-8b-train", base, head)
    (step,) = [s for s in change.prediction.steps if s.type == NODE_POOL]
    assert step.op == "replace"
    assert "nodeConfig.spot" in step.replacing


def test_a_ladders_pools_carry_its_compute_class_label_and_taint() -> None:
    from components.render.tiers import pool_scheduling

    config = planned(FALLBACK).config
    pools = tpu_pools(plan_of(FALLBACK))
    for tier, name in enumerate(["tpu-slice-0", "tpu-slice-0-flex", "tpu-slice-0-spot", "tpu-slice-0-ondemand"]):
        scheduling = pool_scheduling(config, tier)
        assert scheduling.labels  # a ladder: every tier is one of the class's manually created pools
        node_config = pools[name]["inputs"]["nodeConfig"]
        assert node_config["labels"] == scheduling.labels
        assert node_config["taints"] == [{"key": t.key, "value": t.value, "effect": t.effect} for t in scheduling.taints]


@pytest.mark.parametrize(
    ("version", "ok"), [("1.32.4-gke.100", False), ("1.33", False), ("1.33.0-gke.1712000", True), (None, True)]
)
def test_flex_start_needs_gkes_minimum_version(version: str | None, ok: bool) -> None:
    cluster: dict[str, Any] = {"cluster": {"version": version}} if version else {}
    tpu = {"zone": "us-east5-a", "capacity": [{"type": "flexStart"}]}
    if ok:
        make_config(tpu=tpu, **cluster)
        return
    with pytest.raises(ConfigError) as caught:
        make_config(tpu=tpu, **cluster)
    (hit,) = [v for v in caught.value.violations if v.key.endswith("cluster.version")]
    assert tpu_catalog.FLEX_START_MIN_GKE_VERSION in hit.allowed


@pytest.mark.parametrize(("version", "ok"), [("1.30.5-gke.1014000", False), ("1.31.2-gke.1115000", True), (None, True)])
def test_ray_ladder_needs_kubernetes_1_31_for_its_pod_affinity(version: str | None, ok: bool) -> None:
    # v5p runs on 1.30 (v6e's own floor is already 1.31.2), so only the ladder's rule can refuse it.
    doc = yaml.safe_load(stacks.stack_path("llama3-8b-train-v5p").read_text())
    values = doc["config"]
    values["gke-tpu-llm:tpu"]["capacity"] = [{"type": "onDemand"}, {"type": "spot"}]
    if version:
        values.setdefault("gke-tpu-llm:cluster", {})["version"] = version
    stack_file = stacks.StackFile("ray-ladder", Path("Pulumi.ray-ladder.yaml"), values, ())
    if ok:
        stacks.config_of(stack_file)
        return
    with pytest.raises(ConfigError) as caught:
        stacks.config_of(stack_file)
    (hit,) = [v for v in caught.value.violations if v.key.endswith("cluster.version")]
    assert "1.31" in hit.allowed
    assert "matchLabelKeys" in hit.problem
