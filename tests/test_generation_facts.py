"""One home per generation fact: a TPU catalog row holds its ICI bandwidth, host RAM and quotas, and a
row that lacks one names the generation and the field; a scratch generation added in an existing zone
changes what the planner offers in that zone and nothing else."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

import pytest

from components import planner
from components.catalog import tpu as tpu_catalog
from components.catalog.calibration import FACTORS
from components.catalog.models import MODELS
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.resolve import resolve
from components.planner import perf
from components.tools import preflight, report
from components.workloads.vllm.spec import CACHE_HOST_MEMORY_SHARE, max_file_cache_gi
from tests.conftest import make_config, planned

GENS = list(tpu_catalog.GENERATIONS.values())
V6E = tpu_catalog.GENERATIONS["v6e"]


def _row(**changes: Any) -> tpu_catalog.TpuGeneration:
    return dataclasses.replace(V6E, **changes)


def region(zone: str) -> dict[str, Any]:
    """The stack's ``gcp:region`` for a TPU in ``zone``."""
    return {"gcp:region": tpu_catalog.zone_region(zone)}


# ---- every row holds the facts, and every reader takes them from the row


@pytest.mark.parametrize("gen", GENS, ids=lambda g: g.name)
def test_the_vllm_cache_cap_of_every_machine_type_is_its_rows_host_ram(gen: tpu_catalog.TpuGeneration) -> None:
    for machine_type in gen.machine_types:
        chips = gen.chips_per_host_of(machine_type)
        assert chips is not None
        host_gb = gen.host_memory_gb[chips]
        assert tpu_catalog.host_memory_gb_of(machine_type) == host_gb
        # Never None for a catalogued machine type: no cache cap is dropped.
        assert max_file_cache_gi(machine_type) == int(host_gb * 1e9 * CACHE_HOST_MEMORY_SHARE // 2**30)
    assert tpu_catalog.host_memory_gb_of(gen.machine_type(3)) is None  # a VM size no generation builds


def test_v5p_has_a_cache_cap_now_that_its_row_holds_its_host_ram() -> None:
    # The vLLM side table this replaces had no v5p entry, so a v5p host's RAM cache went uncapped.
    assert max_file_cache_gi("ct5p-hightpu-4t") == int(448 * 1e9 * 0.5 // 2**30)


@pytest.mark.parametrize("gen", GENS, ids=lambda g: g.name)
def test_the_serving_model_moves_all_reduces_over_the_rows_ici_bandwidth(gen: tpu_catalog.TpuGeneration) -> None:
    # The smallest single-host slice with more than one chip: vLLM runs it tensor-parallel, so every step
    # all-reduces over ICI.
    tpu_slice = next(
        s
        for s in tpu_catalog.all_slices()
        if s.generation is gen and not s.multi_host and s.chips > 1 and s.chips_per_host == s.chips
    )
    arch = MODELS["llama3-8b"]
    scenario = perf.Scenario(1000, 1000, 8)

    def collectives(row: tpu_catalog.TpuGeneration) -> float:
        p = planner.plan(arch, dataclasses.replace(tpu_slice, generation=row), planner.ServingWorkload("vllm", 4096))
        return perf.step_times(arch, p, scenario, 8, FACTORS["vllm"]).collectives

    full = collectives(gen)
    half = collectives(dataclasses.replace(gen, ici_bandwidth_per_chip=gen.ici_bandwidth_per_chip // 2))
    latency = collectives(dataclasses.replace(gen, ici_bandwidth_per_chip=10**30))  # transfer time ~0
    assert full > latency
    assert half - latency == pytest.approx(2 * (full - latency))


@pytest.mark.parametrize("gen", GENS, ids=lambda g: g.name)
def test_the_prefill_attention_rate_reads_the_rows_mxu_columns(gen: tpu_catalog.TpuGeneration) -> None:
    # Every catalog model has 128-wide heads: they fill a 128-column MXU and half of a 256-column one.
    tpu_slice = next(s for s in tpu_catalog.all_slices() if s.generation is gen and not s.multi_host)
    arch = MODELS["llama3-8b"]
    p = planner.plan(arch, tpu_slice, planner.ServingWorkload("vllm", 4096))

    def rate(row: tpu_catalog.TpuGeneration) -> float:
        on_row = dataclasses.replace(p, slice=dataclasses.replace(tpu_slice, generation=row))
        return perf.attention_rate(arch, on_row, FACTORS["vllm"])

    full = gen.peak_bf16_flops_per_chip * FACTORS["vllm"].attention_kernel_share
    assert rate(gen) == pytest.approx(full * min(1.0, arch.head_dim / gen.mxu_columns))
    assert rate(dataclasses.replace(gen, mxu_columns=arch.head_dim)) == pytest.approx(full)
    assert rate(dataclasses.replace(gen, mxu_columns=4 * arch.head_dim)) == pytest.approx(full / 4)


JAX_CHIP = {"v5e": "TPU_V5E", "v5p": "TPU_V5P", "v6e": "TPU_V6E", "tpu7x": "TPU_7X"}


@pytest.mark.parametrize("gen", GENS, ids=lambda g: g.name)
def test_mxu_columns_are_the_pinned_jaxs(gen: tpu_catalog.TpuGeneration) -> None:
    """The catalog's MXU width is what the pinned JAX's Pallas TPU table says for the chip."""
    from jax._src.pallas.mosaic import tpu_info

    assert gen.name in JAX_CHIP, f"map {gen.name!r} to its jax tpu_info.ChipVersion in JAX_CHIP"
    info = tpu_info.get_tpu_info_for_chip(tpu_info.ChipVersion[JAX_CHIP[gen.name]], 1)
    assert gen.mxu_columns == info.mxu_column_size


@pytest.mark.parametrize("gen", GENS, ids=lambda g: g.name)
@pytest.mark.parametrize(("capacity", "kind"), [("onDemand", "on-demand"), ("spot", "preemptible"), ("flexStart", "preemptible")])
def test_every_generation_has_a_preflight_quota_line_for_every_capacity_type(
    gen: tpu_catalog.TpuGeneration, capacity: str, kind: tpu_catalog.QuotaKind
) -> None:
    topology, chips_per_host = gen.shapes[0]
    zone = (gen.flex_start_zones or gen.zones)[0] if capacity == "flexStart" else gen.zones[0]
    config = make_config(
        **region(zone),
        tpu={
            "generation": gen.name,
            "topology": topology,
            "machineType": gen.machine_type(chips_per_host),
            "zone": zone,
            "capacity": [{"type": capacity}],
            "allowUndocumentedZone": capacity == "flexStart" and not gen.flex_start_zones,
        },
        cluster={"version": max(gen.min_gke_version, tpu_catalog.FLEX_START_MIN_GKE_VERSION, key=tpu_catalog.parse_gke_version)},
    )
    (pool,) = preflight.checklist(config).pools
    assert pool.quota is not None, f"{gen.name} {capacity}: no quota line"
    assert pool.quota.quota == gen.quotas.of(kind)
    assert any(gen.quotas.of(kind).name in line for line in pool.lines())


# ---- a row that lacks a fact names the generation and the field


@pytest.mark.parametrize("fact", tpu_catalog.SOURCED_FACTS)
def test_a_fact_without_a_source_is_refused_naming_it(fact: str) -> None:
    sources = {k: v for k, v in V6E.sources.items() if k != fact}
    with pytest.raises(tpu_catalog.CatalogError) as info:
        _row(sources=MappingProxyType(sources))
    assert str(info.value).startswith(f"TPU generation 'v6e' lacks sources['{fact}']")
    assert "components/catalog/tpu_generations.py" in str(info.value)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"host_memory_gb": MappingProxyType({1: 176, 4: 720})}, "host_memory_gb[8] (the ct6e-standard-8t VM)"),
        ({"host_memory_gb": MappingProxyType({1: 176, 4: 0, 8: 1440})}, "host_memory_gb[4] (the ct6e-standard-4t VM)"),
        ({"host_vcpus": MappingProxyType({4: 180, 8: 360})}, "host_vcpus[1] (the ct6e-standard-1t VM)"),
        ({"ici_bandwidth_per_chip": 0}, "ici_bandwidth_per_chip"),
        (
            {"quotas": tpu_catalog.TpuQuotas(V6E.quotas.on_demand, tpu_catalog.TpuQuota(" ", None, None))},
            "quotas.preemptible.name",
        ),
        ({"sources": MappingProxyType({**V6E.sources, "hbm": "x"})}, "sources['hbm'] (not a fact of the row)"),
    ],
)
def test_a_gap_in_a_fact_is_refused_naming_the_generation_and_the_field(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(tpu_catalog.CatalogError, match=r"^TPU generation 'v6e' lacks ") as info:
        _row(**changes)
    assert named in str(info.value)
    assert tpu_catalog.missing_facts(V6E) == []


@pytest.mark.parametrize("field", ["ici_bandwidth_per_chip", "host_memory_gb", "quotas"])
def test_a_row_without_a_fact_field_does_not_build(field: str) -> None:
    # The facts are required fields: a row written without one fails where it is written, naming it.
    facts = {f.name: getattr(V6E, f.name) for f in dataclasses.fields(V6E) if f.name != field}
    with pytest.raises(TypeError, match=f"missing 1 required keyword-only argument: '{field}'"):
        tpu_catalog.TpuGeneration(**facts)


# ---- a scratch generation in an existing zone: it appears in that zone, and nowhere else

SCRATCH_ZONE = "us-east5-b"


def scratch_generation() -> tpu_catalog.TpuGeneration:
    """A made-up generation documented in us-east5-b only: v6e's hardware under its own names, cheaper
    than every generation there, so wherever it is a candidate it wins."""
    test = "scratch row: tests/test_generation_facts.py"
    return _row(
        name="v9x",
        cloud_tpu_prefix="v9x",
        pathways_name="tpuv9x",
        gke_accelerator="tpu-v9x-slice",
        machine_prefix="ct9x-standard",
        zones=(SCRATCH_ZONE,),
        flex_start_zones=(),
        flex_start_prices=MappingProxyType({}),
        prices=MappingProxyType({"us-east5": tpu_catalog.ChipPrice(0.5, 0.2, source=test, as_of="test")}),
        quotas=tpu_catalog.TpuQuotas(
            tpu_catalog.TpuQuota("TPU v9x chips", None, "TPU-V9X-per-project-region"),
            tpu_catalog.TpuQuota("Preemptible TPU v9x chips", None, None),
        ),
        sources=MappingProxyType(dict.fromkeys(tpu_catalog.SOURCED_FACTS, test)),
    )


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> tpu_catalog.TpuGeneration:
    """The real catalog plus the scratch generation, for the rest of the test."""
    row = scratch_generation()
    monkeypatch.setattr(tpu_catalog, "GENERATIONS", MappingProxyType({**tpu_catalog.GENERATIONS, row.name: row}))
    return row


def unpinned(zone: str) -> Any:
    """A serving config (Llama 3 8B on vLLM with a traffic scenario, so every candidate is estimated by
    the serving model) with generation and topology unset in ``zone``."""
    return make_config(
        **region(zone),
        tpu={"generation": None, "topology": None, "zone": zone},
        cluster={"version": "1.34.0-gke.2201000"},
        workload={
            "kind": "vllm",
            "model": "llama3-8b",
            "maxTargetLength": 4096,
            "serving": {"inputTokens": 1000, "outputTokens": 1000, "concurrency": 8},
        },
    )


def test_the_scratch_generation_is_offered_in_its_zone(scratch: tpu_catalog.TpuGeneration) -> None:
    config = unpinned(SCRATCH_ZONE)
    assert scratch.name in config.tpu.zone_generations()
    chosen = resolve(config)
    assert chosen.config.tpu.generation == scratch.name  # the cheapest per token there
    assert all(e.plan.slice.generation.ici_bandwidth_per_chip > 0 for e in chosen.serving)
    assert {a["generation"] for a in chosen.alternatives()} >= {scratch.name, "v6e"}


@pytest.mark.parametrize("zone", ["us-east5-a", "us-central1-b", "us-central1-c"])
def test_the_scratch_generation_is_offered_nowhere_else(scratch: tpu_catalog.TpuGeneration, zone: str) -> None:
    config = unpinned(zone)
    assert scratch.name not in config.tpu.zone_generations()
    chosen = resolve(config)
    assert scratch.name not in {a["generation"] for a in chosen.alternatives()}
    assert chosen.ranking is not None
    assert not any(r.startswith(f"{scratch.name}-") for r in chosen.ranking.rejected)
    with pytest.raises(ConfigError) as info:
        make_config(
            **region(zone),
            tpu={"generation": scratch.name, "topology": "4x4", "zone": zone},
        )
    (violation,) = info.value.violations
    assert violation.key == "gke-tpu-llm:tpu.zone"
    assert SCRATCH_ZONE in str(violation)


def test_a_stack_pinned_to_the_scratch_generation_plans_with_its_rows_facts(scratch: tpu_catalog.TpuGeneration) -> None:
    stack_file = stacks.read_stack_file(stacks.stack_path("llama-70b"))  # vLLM on a v6e 2x4 VM in us-east5-b
    tpu = stack_file.values["gke-tpu-llm:tpu"]
    assert tpu["zone"] == SCRATCH_ZONE
    values = {
        **stack_file.values,
        "gke-tpu-llm:tpu": {**tpu, "generation": scratch.name, "machineType": scratch.machine_type(8)},
    }
    result = report.plan(dataclasses.replace(stack_file, values=values))
    pools = [r for r in result.resources if r.type == "gcp:container/nodePool:NodePool" and "tpu" in r.name]
    assert [p.inputs["nodeConfig"]["machineType"] for p in pools] == ["ct9x-standard-8t"]
    (pool,) = preflight.checklist(result.config).pools
    assert pool.quota is not None
    assert pool.quota.quota.name == "TPU v9x chips"
    assert result.config.tpu.slice.generation is scratch


def test_the_committed_stacks_plan_as_before_with_the_scratch_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    # llama-405b is pinned to v6e in the scratch generation's zone: its plan does not change.
    before = report.plan_json(planned("llama-405b"))
    row = scratch_generation()
    monkeypatch.setattr(tpu_catalog, "GENERATIONS", MappingProxyType({**tpu_catalog.GENERATIONS, row.name: row}))
    after = report.plan_json(report.plan(stacks.read_stack_file(stacks.stack_path("llama-405b"))))
    assert after == before
