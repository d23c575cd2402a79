"""Capacity wired into stacks: pinned slices verified, unset topologies selected, bad ones rejected."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pulumi
import pytest
import yaml

from components import planner
from components.catalog import tpu as tpu_catalog
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.resolve import resolve
from components.config.stack import StackConfig
from components.tools import mockengine, report
from tests import tpu_test_catalog
from tests.conftest import STACKS, make_config, planned

# What the planner must reproduce from the model and settings alone (topology removed), per seed.
SEED_HARDWARE = {
    "llama-405b": ("4x4", "ct6e-standard-4t"),
    "llama-70b": ("2x4", "ct6e-standard-8t"),
    "saxml-175b": ("4x8", "ct5lp-hightpu-4t"),
}


def without_topology(stack: str) -> stacks.StackFile:
    stack_file = stacks.read_stack_file(stacks.stack_path(stack))
    tpu = stack_file.values["gke-tpu-llm:tpu"]
    stack_file.values["gke-tpu-llm:tpu"] = {k: v for k, v in tpu.items() if k not in ("topology", "machineType")}
    return stack_file


@pytest.mark.parametrize("stack", sorted(SEED_HARDWARE))
def test_capacity_planner_reproduces_seed_hardware(stack: str) -> None:
    resolved = stacks.config_of(without_topology(stack))
    assert resolved.selected
    assert (resolved.slice.topology, resolved.slice.machine_type) == SEED_HARDWARE[stack]


def test_capacity_llama2_70b_selection_respects_the_disaggregated_server() -> None:
    # At the seed's per-device batch the int8 model alone would fit a 4-chip v6e 2x2 (half the
    # price), but the disaggregated JetStream server needs 8-chip slices, so the planner only
    # prices slices the whole config accepts and lands on the seed's 2x4.
    resolved = stacks.config_of(without_topology("llama2-70b-disagg"))
    assert resolved.slice.topology == "2x4"
    assert resolved.capacity.fits
    assert resolved.capacity.memory.margin > 0
    pinned = stacks.config_of(stacks.read_stack_file(stacks.stack_path("llama2-70b-disagg")))
    assert pinned.slice.key == "v6e-2x4-4t"
    assert pinned.capacity.sharding.flags["ici_tensor_parallelism"] == 8


def test_capacity_training_fits_v6e_4x4_with_fsdp_times_tensor_16() -> None:
    resolved = planned("llama3-8b-train").stack_plan
    flags = resolved.flags
    assert flags["ici_fsdp_parallelism"] * flags["ici_tensor_parallelism"] == 16
    assert (flags["ici_fsdp_parallelism"], flags["ici_tensor_parallelism"]) == (4, 4)


@pytest.mark.parametrize("stack", STACKS)
def test_capacity_every_stack_is_verified_with_a_margin(stack: str) -> None:
    result = planned(stack)
    cap = report.plan_json(result)["capacity"]
    assert cap["selected_by_planner"] is False
    assert cap["memory"]["fits"] is True
    assert cap["memory"]["margin_bytes"] > 0
    assert cap["slice"]["chips"] == result.config.tpu.slice.chips


def test_capacity_seed_flags_are_derived() -> None:
    assert planned("llama-405b").stack_plan.flags == {
        "ici_fsdp_parallelism": 1,
        "ici_autoregressive_parallelism": 2,
        "ici_tensor_parallelism": 8,
    }
    assert planned("llama-70b").stack_plan.flags == {"tensor_parallel_size": 8}
    assert planned("saxml-175b").stack_plan.flags == {"saxml_mesh": [1, 1, 32]}


def test_capacity_model_that_does_not_fit_names_the_numbers() -> None:
    config = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-4t"},
        workload={"weights": "bfloat16", "maxTargetLength": 2048, "perDeviceBatchSize": 1},
    )
    with pytest.raises(ConfigError) as info:
        resolve(config)
    (violation,) = info.value.violations
    assert violation.key == "gke-tpu-llm:tpu.topology"
    assert violation.value == "2x4"
    text = str(violation)
    assert "llama3.1-405b needs" in text
    assert "GB per chip" in text
    assert "a v6e chip has 32.0 GB HBM" in text
    assert "smallest slice that fits" in text


def test_capacity_tensor_not_dividing_heads_is_a_parallelism_error() -> None:
    config = make_config(workload={"maxTargetLength": 2048, "parallelism": {"tensor": 16}, "weights": "int8"})
    with pytest.raises(ConfigError) as info:
        resolve(config)
    (violation,) = info.value.violations
    assert violation.key == "gke-tpu-llm:workload.parallelism"
    assert "tensor parallelism 16 does not divide kv_heads 8" in str(violation)


def test_capacity_vllm_on_a_multi_host_slice_plans_pipeline_stages_and_refuses_the_hpa() -> None:
    workload = {"kind": "vllm", "model": "llama3.1-70b", "maxTargetLength": 4096}
    default = r"\(the default: you did not set this key\)"
    with pytest.raises(ConfigError, match=rf"autoscaling\.enabled: True {default} scales single-host replicas"):
        make_config(workload=workload)  # v6e 4x4: a replica is a whole LeaderWorkerSet group
    config = make_config(workload=workload | {"vllm": {"autoscaling": {"enabled": False}}})
    assert resolve(config).flags == {"pipeline_parallel_size": 4, "tensor_parallel_size": 4}


def test_capacity_unknown_model_lists_catalog() -> None:
    with pytest.raises(ConfigError) as info:
        make_config(workload={"model": "gpt-5", "maxTargetLength": 10})
    assert "gke-tpu-llm:workload.model: 'gpt-5' is not in the model catalog" in str(info.value)
    assert "llama3.1-405b" in str(info.value)


def test_capacity_bad_stack_registers_nothing_and_cli_exits_2(tmp_path: Path) -> None:
    doc = yaml.safe_load(stacks.stack_path("llama-405b").read_text())
    doc["config"]["gke-tpu-llm:tpu"].update(topology="2x4", machineType="ct6e-standard-4t")
    doc["config"]["gke-tpu-llm:workload"]["weights"] = "bfloat16"
    path = tmp_path / "Pulumi.too-small.yaml"
    path.write_text(yaml.safe_dump(doc))
    stack_file = stacks.read_stack_file(path)
    records: list[mockengine.Registration] = []
    with pytest.raises(pulumi.RunError, match=r"llama3.1-405b needs \d+"):
        records, _ = mockengine.run_program(stack_file)
    assert records == []
    from components.tools.cli import main

    assert main(["plan", "--config", str(path)]) == 2


# ---- planner errors name the setting to change (PlanError.field), not a guess from the message


@pytest.mark.parametrize(
    ("workload", "tpu", "key", "value"),
    [
        ({"parallelism": {"tensor": 3}}, {}, "workload.parallelism", {"tensor": 3}),
        ({"parallelism": {"tensor": 16}}, {}, "workload.parallelism", {"tensor": 16}),
        ({"perDeviceBatchSize": 0.01}, {}, "workload.perDeviceBatchSize", 0.01),
        ({"perDeviceBatchSize": 1000}, {}, "workload.perDeviceBatchSize", 1000),
        ({"weights": "bfloat16"}, {"topology": "2x4", "machineType": "ct6e-standard-4t"}, "tpu.topology", "2x4"),
        ({"perDeviceBatchSize": 1000}, {"topology": None}, "workload.perDeviceBatchSize", 1000),
    ],
)
def test_capacity_errors_blame_the_setting_to_change(workload: dict[str, Any], tpu: dict[str, Any], key: str, value: Any) -> None:
    config = make_config(workload=workload, tpu=tpu)
    with pytest.raises(ConfigError) as info:
        resolve(config)
    (violation,) = info.value.violations
    assert violation.key == f"gke-tpu-llm:{key}", violation
    assert violation.value == value
    assert violation.fix


def test_capacity_selection_that_finds_no_slice_blames_the_generation() -> None:
    from components.config.resolve import blamed

    config = make_config(tpu={"topology": None})
    assert blamed(config, "slice") == ("tpu.generation", "v6e", blamed(config, "slice")[2])
    assert blamed(make_config(), "slice")[0] == "tpu.topology"
    assert blamed(make_config(), "tokens")[0] == "workload.perDeviceBatchSize"
    vllm = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t"}, workload={"kind": "vllm", "model": "llama3.1-70b"}
    )
    assert blamed(vllm, "tokens")[0] == "workload.maxTargetLength"
    assert blamed(vllm, "batch")[0] == "tpu.topology"
    assert blamed(make_config(), "parallelism")[0] == "tpu.topology"  # the planner's own mesh: the slice is to blame


@pytest.mark.parametrize("field", sorted(planner.PLAN_FIELDS))
@pytest.mark.parametrize("topology", ["4x4", None])
def test_capacity_every_planner_field_blames_a_stack_key_with_a_fix(field: planner.PlanField, topology: str | None) -> None:
    from components.config.resolve import blamed

    key, _, fix = blamed(make_config(tpu={"topology": topology}), field)
    assert key.startswith(("workload.", "tpu.")), key
    assert fix


# ---- across generations (tpu.generation unset) ----

IRONWOOD_TEST_PRICE = 6.0
"""A made-up tpu7x price per chip-hour for the selection tests: the catalog records it as unknown."""


def ironwood_variant(monkeypatch: pytest.MonkeyPatch, *, priced: bool) -> None:
    """The test catalog with tpu7x documented in us-central1-b too (where v6e is the only generation),
    priced or not, so one zone offers both and only the price decides."""
    real = tpu_test_catalog.build()
    prices = {"us-central1": tpu_catalog.ChipPrice(IRONWOOD_TEST_PRICE, source="test", as_of="test")} if priced else {}
    iron = dataclasses.replace(
        real["tpu7x"], zones=("us-central1-b", *real["tpu7x"].zones), prices=MappingProxyType(prices or {"us-central1": None})
    )
    monkeypatch.setattr(tpu_catalog, "GENERATIONS", MappingProxyType({**real, "tpu7x": iron}))


IRONWOOD_GKE = "1.34.0-gke.2201000"
"""tpu7x's GKE floor, which a stack must set for tpu7x to be a candidate (the channel default is unknown offline)."""


def unpinned(zone: str, **workload: Any) -> StackConfig:
    """The 405B int8 JetStream base (or ``workload``) with generation and topology unset in ``zone``,
    on a GKE version every generation accepts. What the zone offers is the catalog's: tests that assert
    it install the test catalog (``tpu_test_catalog.install``)."""
    region: dict[str, Any] = {"gcp:region": tpu_catalog.zone_region(zone)}
    return make_config(
        **region,
        tpu={"generation": None, "topology": None, "zone": zone},
        cluster={"version": IRONWOOD_GKE},
        workload=workload,
    )


# As the llama-405b-vllm stack: bf16 as published, one LWS group per slice (no single-host HPA).
VLLM_405B_BF16 = {
    "kind": "vllm",
    "model": "llama3.1-405b",
    "maxTargetLength": 4096,
    "batchSize": 8,
    "vllm": {"autoscaling": {"enabled": False}, "gcsFuse": {"fileCacheGi": 300}},
}


@pytest.mark.parametrize(
    ("workload", "ironwood", "v6e"),
    [({}, ("tpu7x-2x2x1", 1), ("v6e-4x4", 4)), (VLLM_405B_BF16, ("tpu7x-2x2x2", 2), ("v6e-4x8", 8))],
)
def test_capacity_405b_picks_tpu7x_where_documented_and_priced_else_v6e(
    monkeypatch: pytest.MonkeyPatch, workload: dict[str, Any], ironwood: tuple[str, int], v6e: tuple[str, int]
) -> None:
    ironwood_variant(monkeypatch, priced=True)
    chosen = resolve(unpinned("us-central1-b", **workload))
    assert chosen.selected
    assert (chosen.slice.key, chosen.slice.hosts) == ironwood
    # The config is completed with the generation, topology and machine type the planner chose.
    assert (chosen.config.tpu.generation, chosen.config.tpu.machine_type) == ("tpu7x", "tpu7x-standard-4t")
    alternatives = chosen.alternatives()
    assert alternatives[0] == {**alternatives[0], "slice": ironwood[0], "hosts": ironwood[1], "chosen": True}
    assert [a["chosen"] for a in alternatives].count(True) == 1
    (v6e_row,) = [a for a in alternatives if a["slice"] == v6e[0]]
    assert v6e_row["hosts"] == v6e[1]
    assert v6e_row["price_per_hour"] > alternatives[0]["price_per_hour"]
    assert {a["generation"] for a in alternatives} == {"tpu7x", "v6e"}  # the zone's generations only

    ironwood_variant(monkeypatch, priced=False)  # documented but unpriced: ranks after every priced slice
    fallback = resolve(unpinned("us-central1-b", **workload))
    assert (fallback.slice.key, fallback.config.tpu.generation) == (v6e[0], "v6e")
    prices = [a["price_per_hour"] for a in fallback.alternatives()]
    assert None in prices
    assert prices.index(None) == len([p for p in prices if p is not None])


def test_capacity_region_without_tpu7x_falls_back_to_its_own_generations(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # us-east5 has no tpu7x; us-east5-a documents v5e, v5p and v6e: the int8 405B is cheapest on a v5p
    # 2x2x2 (8 chips x 95 GB), and v5e (16 GB a chip) fits only its largest slices.
    chosen = resolve(unpinned("us-east5-a"))
    assert chosen.slice.key == "v5p-2x2x2"
    assert chosen.config.tpu.generation == "v5p"
    generations = {a["generation"] for a in chosen.alternatives()}
    assert "tpu7x" not in generations
    assert {"v5p", "v6e"} <= generations
    # us-east5-b documents v5e and v6e only: a v5p slice would not be placed in that zone.
    assert resolve(unpinned("us-east5-b")).slice.key == "v6e-4x4"


def test_capacity_tpu7x_only_zone_picks_an_unpriced_tpu7x_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # us-central1-c has tpu7x alone (unpriced in the catalog): unpriced slices stay eligible.
    chosen = resolve(unpinned("us-central1-c"))
    assert chosen.slice.key == "tpu7x-2x2x1"
    assert chosen.capacity.price_per_hour is None
    assert {a["generation"] for a in chosen.alternatives()} == {"tpu7x"}


def test_capacity_slices_the_config_refuses_are_reported_once_per_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # Without cluster.version, the tpu7x floor rule refuses every tpu7x slice: in a zone with other
    # generations they are reported as rejected, in a tpu7x-only zone nothing is left.
    region: dict[str, Any] = {"gcp:region": "us-central1"}
    only = make_config(**region, tpu={"generation": None, "topology": None, "zone": "us-central1-c"})
    with pytest.raises(ConfigError) as info:
        resolve(only)
    (violation,) = info.value.violations
    assert violation.key == "gke-tpu-llm:tpu.zone"
    assert "tpu7x-2x2x1, tpu7x-2x2x2," in str(violation)
    assert str(violation).count("cluster.version must be set") == 1


def test_capacity_alternatives_only_where_the_planner_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = planned("llama-405b").stack_plan
    assert "alternatives" not in pinned.to_dict()
    assert "rejected" not in pinned.to_dict()
    assert pinned.alternatives() == []
    tpu_test_catalog.install(monkeypatch)
    chosen = resolve(unpinned("us-east5-b")).to_dict()
    assert chosen["selected_by_planner"] is True
    assert chosen["alternatives"][0]["slice"] == "v6e-4x4"
    assert chosen["alternatives"][0]["chosen"]
    # v5e (16 GB a chip) holds the int8 405B on its largest slices only.
    assert any(r.startswith("v5e-4x8") for r in chosen["rejected"])
    assert "v5e-8x8" in [a["slice"] for a in chosen["alternatives"]]


def test_capacity_no_generation_of_the_zone_fits_blames_the_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    from components.config.resolve import blamed

    config = unpinned("us-east5-b")
    key, value, fix = blamed(config, "slice")
    assert (key, value) == ("tpu.zone", "us-east5-b")
    assert "zone" in fix
    with pytest.raises(ConfigError) as info:
        resolve(unpinned("us-east5-b", perDeviceBatchSize=1000))
    (violation,) = info.value.violations
    assert violation.key == "gke-tpu-llm:workload.perDeviceBatchSize"


def test_capacity_plan_prints_the_alternatives_for_a_chosen_slice_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from components.tools.plan_view import print_capacity

    class Capture:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def print(self, value: Any) -> None:
            from rich.console import Console

            console = Console(width=200, record=True)
            console.print(value)
            self.lines.append(console.export_text())

    chosen, pinned = Capture(), Capture()
    print_capacity(pinned, planned("llama-405b").stack_plan.to_dict())
    tpu_test_catalog.install(monkeypatch)
    print_capacity(chosen, resolve(unpinned("us-east5-a")).to_dict())
    text = "".join(chosen.lines)
    assert "Slices the planner weighed" in text
    assert "chosen" in text
    assert "v5p" in text
    assert "2x2x2 (ct5p-hightpu-4t)" in text
    assert "4x4 (ct6e-standard-4t)" in text
    assert "weighed" not in "".join(pinned.lines)


def ironwood_stack_without_generation(zone: str, **vllm: Any) -> stacks.StackFile:
    """The llama-405b-ironwood stack (405B FP8 on vLLM) with generation, topology and machine type
    removed, in ``zone``."""
    stack_file = stacks.read_stack_file(stacks.stack_path("llama-405b-ironwood"))
    tpu = stack_file.values["gke-tpu-llm:tpu"]
    stack_file.values["gke-tpu-llm:tpu"] = {
        **{k: v for k, v in tpu.items() if k not in ("generation", "topology", "machineType")},
        "zone": zone,
    }
    stack_file.values["gke-tpu-llm:workload"]["vllm"].update(vllm)
    return stack_file


def test_capacity_405b_fp8_picks_tpu7x_where_documented_and_priced_else_v6e(monkeypatch: pytest.MonkeyPatch) -> None:
    # The acceptance case in FP8, with fileCacheGi as the llama-405b-vllm stack sets it.
    cache = {"gcsFuse": {"fileCacheGi": 300}}
    ironwood_variant(monkeypatch, priced=True)
    chosen = stacks.config_of(ironwood_stack_without_generation("us-central1-b", **cache))
    assert (chosen.slice.key, chosen.slice.hosts, chosen.config.workload.weights) == ("tpu7x-2x2x1", 1, "fp8")
    # vLLM pages its KV cache (one maxTargetLength sequence must fit; the scenario's 64 sequences are
    # capped by what the cache holds), so a v6e 4x4 holds the FP8 weights and is the cheaper v6e answer.
    rows = {a["slice"]: a for a in chosen.alternatives()}
    assert rows["v6e-4x4"]["hosts"] == 4
    assert rows["v6e-4x4"]["price_per_hour"] > rows["tpu7x-2x2x1"]["price_per_hour"]
    assert chosen.ranking is not None
    ironwood_variant(monkeypatch, priced=False)
    assert stacks.config_of(ironwood_stack_without_generation("us-central1-b", **cache)).slice.key == "v6e-4x4"
    # Without fileCacheGi the default cache is capped at half a host, so no v6e slice is refused for it.
    default_cache = stacks.config_of(ironwood_stack_without_generation("us-central1-b"))
    assert default_cache.slice.key == "v6e-4x4"
    assert default_cache.ranking is not None
    assert not any("fileCacheGi" in r for r in default_cache.ranking.rejected)


def test_capacity_405b_fp8_in_a_region_without_tpu7x_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    stack_file = ironwood_stack_without_generation("us-east5-b", gcsFuse={"fileCacheGi": 300})
    stack_file.values["gcp:region"] = "us-east5"
    chosen = stacks.config_of(stack_file)
    assert chosen.slice.key == "v6e-4x4"
    assert {a["generation"] for a in chosen.alternatives()} == {"v6e"}  # us-east5-b: v5e has no fp8 path
    assert chosen.ranking is not None
    assert any("v5e has none" in r for r in chosen.ranking.rejected)


def test_capacity_machine_type_without_generation_limits_the_choice_to_its_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # us-east5-a has v5e, v5p and v6e; a pinned ct6e machine type leaves only v6e slices built from it.
    config = make_config(
        tpu={"generation": None, "topology": None, "zone": "us-east5-a", "machineType": "ct6e-standard-4t"},
        cluster={"version": IRONWOOD_GKE},
    )
    chosen = resolve(config)
    assert (chosen.slice.key, chosen.config.tpu.generation) == ("v6e-4x4", "v6e")
    assert {a["machine_type"] for a in chosen.alternatives()} == {"ct6e-standard-4t"}
