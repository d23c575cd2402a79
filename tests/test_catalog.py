"""TPU catalog: invariants over every entry, a few well-known shapes, sources and prices, version order."""

from __future__ import annotations

import math

import pytest

from components.catalog import tpu
from components.catalog.tpu import GENERATIONS, all_slices, find_slice, gke_version_at_least, layouts

SLICES = list(all_slices())
GENS = list(GENERATIONS.values())


@pytest.mark.parametrize("s", SLICES, ids=lambda s: s.key)
def test_catalog_entry_invariants(s: tpu.TpuSlice) -> None:
    dims = [int(d) for d in s.topology.split("x")]
    assert math.prod(dims) == s.chips
    assert s.hosts * s.chips_per_host == s.chips
    assert s.multi_host == (s.hosts > 1)
    if s.multi_host:
        assert s.chips_per_host == 4  # every multi-host slice is built from 4-chip VMs
    assert s.tpu_per_host == s.chips_per_host <= 8  # a VM reaches at most 8 chips
    assert s.machine_type in s.generation.machine_types
    assert s.generation.chips_per_host_of(s.machine_type) == s.chips_per_host
    assert s.chips_per_host in s.generation.host_vcpus
    assert s.chips_per_host in s.generation.host_memory_gb
    assert s.node_selector == {
        tpu.ACCELERATOR_LABEL: s.generation.gke_accelerator,
        tpu.TOPOLOGY_LABEL: s.topology,
    }
    assert s.tensorcores == s.chips * s.generation.tensorcores_per_chip
    assert s.jax_devices == s.chips * s.generation.jax_devices_per_chip
    assert s.accelerator_type == f"{s.generation.cloud_tpu_prefix}-{s.tensorcores}"
    assert s.hbm_bytes == s.chips * s.generation.hbm_bytes_per_chip
    assert s.placement == (s.generation.multi_host_placement if s.multi_host else None)
    assert find_slice(s.generation.name, s.topology, s.machine_type) == s


@pytest.mark.parametrize("s", [s for s in SLICES if s.topology.count("x") == 2 and s.chips > 64], ids=lambda s: s.key)
def test_catalog_large_3d_topologies_follow_gke_rule(s: tpu.TpuSlice) -> None:
    # GKE: above 64 chips a 3-D topology AxBxC has A <= B <= C, each a multiple of 4.
    a, b, c = (int(d) for d in s.topology.split("x"))
    assert a <= b <= c
    assert a % 4 == b % 4 == c % 4 == 0


def test_catalog_new_generations_keep_the_largest_slice() -> None:
    # components.config.workload.MAX_CHIPS bounds mesh degrees by the largest catalog slice; the 3-D
    # generations stop at 256 chips so that bound (and every stack's validation) stays what it was.
    largest_2d = max(s.chips for s in SLICES if s.generation.name in ("v5e", "v6e"))
    assert max(s.chips for s in SLICES) == largest_2d == 256


def test_catalog_keys_are_unique() -> None:
    keys = [s.key for s in SLICES]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("generation", ["v5e", "v6e"])
def test_catalog_v5e_v6e_complete_topology_set(generation: str) -> None:
    assert GENERATIONS[generation].topologies == ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")


@pytest.mark.parametrize("generation", ["v5e", "v6e"])
def test_catalog_only_2x4_has_two_layouts(generation: str) -> None:
    for topology in GENERATIONS[generation].topologies:
        hosts = sorted(s.hosts for s in layouts(generation, topology))
        assert hosts == ([1, 2] if topology == "2x4" else hosts[:1])
    assert find_slice(generation, "2x4") is None  # ambiguous without a machine type


@pytest.mark.parametrize("generation", ["v5p", "tpu7x"])
def test_catalog_3d_generations_use_one_four_chip_machine(generation: str) -> None:
    gen = GENERATIONS[generation]
    assert len(gen.machine_types) == 1  # only the 4-chip VM is documented for GKE node pools
    single_host = [s.topology for s in SLICES if s.generation is gen and not s.multi_host]
    assert single_host == ["2x2x1"]


@pytest.mark.parametrize(
    ("generation", "topology", "machine_type", "chips", "hosts", "accelerator", "multi_host"),
    [
        ("v6e", "4x4", "ct6e-standard-4t", 16, 4, "tpu-v6e-slice", True),
        ("v6e", "2x4", "ct6e-standard-8t", 8, 1, "tpu-v6e-slice", False),
        ("v6e", "2x4", "ct6e-standard-4t", 8, 2, "tpu-v6e-slice", True),
        ("v6e", "1x1", "ct6e-standard-1t", 1, 1, "tpu-v6e-slice", False),
        ("v5e", "4x8", "ct5lp-hightpu-4t", 32, 8, "tpu-v5-lite-podslice", True),
        ("v5e", "2x2", "ct5lp-hightpu-4t", 4, 1, "tpu-v5-lite-podslice", False),
        ("v5e", "16x16", "ct5lp-hightpu-4t", 256, 64, "tpu-v5-lite-podslice", True),
        ("v5p", "2x2x1", "ct5p-hightpu-4t", 4, 1, "tpu-v5p-slice", False),
        ("v5p", "4x4x4", "ct5p-hightpu-4t", 64, 16, "tpu-v5p-slice", True),
        ("tpu7x", "2x2x1", "tpu7x-standard-4t", 4, 1, "tpu7x", False),
        ("tpu7x", "2x2x2", "tpu7x-standard-4t", 8, 2, "tpu7x", True),
    ],
)
def test_catalog_well_known_shapes(
    generation: str, topology: str, machine_type: str, chips: int, hosts: int, accelerator: str, multi_host: bool
) -> None:
    s = find_slice(generation, topology, machine_type)
    assert s is not None
    assert (s.chips, s.hosts, s.generation.gke_accelerator, s.multi_host) == (chips, hosts, accelerator, multi_host)


@pytest.mark.parametrize(
    ("generation", "topology", "accelerator_type"),
    [("v6e", "4x4", "v6e-16"), ("v5e", "4x8", "v5litepod-32"), ("v5p", "2x2x1", "v5p-8"), ("tpu7x", "2x2x1", "tpu7x-8")],
)
def test_catalog_cloud_tpu_names_count_tensorcores(generation: str, topology: str, accelerator_type: str) -> None:
    # Cloud TPU names v5p-8 a 4-chip slice (cores); v5e/v6e have one core per chip, so their names count chips.
    (s,) = [s for s in layouts(generation, topology) if s.chips_per_host == 4]
    assert s.accelerator_type == accelerator_type


def test_catalog_facts_from_reference() -> None:
    v5e, v6e = GENERATIONS["v5e"], GENERATIONS["v6e"]
    assert (v5e.min_gke_version, v6e.min_gke_version) == ("1.27.2-gke.2100", "1.31.2-gke.1115000")
    assert (v5e.hbm_bytes_per_chip, v6e.hbm_bytes_per_chip) == (16 * 10**9, 32 * 10**9)
    assert v6e.prices["us-east5"].on_demand == pytest.approx(2.70)  # type: ignore[union-attr]
    assert v5e.prices["us-west4"].on_demand == pytest.approx(1.20)  # type: ignore[union-attr]
    assert find_slice("v6e", "4x4", "ct6e-standard-4t").pathways_instance_type == "tpuv6e:4x4"  # type: ignore[union-attr]
    # Bidirectional ICI per chip (Cloud TPU v5e/v6e/v5p/tpu7x pages) and host RAM per VM (Compute Engine
    # 'TPU machines'; the v5e page's VM types); tpu7x's 960 GiB is kept as 1030 GB.
    ici = {"v5e": 400, "v5p": 1200, "v6e": 800, "tpu7x": 1200}
    assert {g: GENERATIONS[g].ici_bandwidth_per_chip // 10**9 for g in ici} == ici
    host_ram = {
        "v5e": {1: 48, 4: 192, 8: 384},
        "v5p": {4: 448},
        "v6e": {1: 176, 4: 720, 8: 1440},
        "tpu7x": {4: 960 * 2**30 // 10**9},
    }
    assert {g: dict(GENERATIONS[g].host_memory_gb) for g in host_ram} == host_ram


def test_catalog_tpu7x_is_placed_by_a_workload_policy() -> None:
    tpu7x = GENERATIONS["tpu7x"]
    assert tpu7x.multi_host_placement == "WORKLOAD_POLICY"
    assert {GENERATIONS[g].multi_host_placement for g in ("v5e", "v5p", "v6e")} == {"COMPACT"}
    assert find_slice("tpu7x", "2x2x2").placement == "WORKLOAD_POLICY"  # type: ignore[union-attr]
    assert find_slice("tpu7x", "2x2x1").placement is None  # type: ignore[union-attr]  # single host: no policy
    assert tpu.WORKLOAD_POLICY_TYPE == "HIGH_THROUGHPUT"
    # The GKE floor is enforced through the same comparison the pools use.
    assert not gke_version_at_least("1.34.0-gke.2200999", tpu7x.min_gke_version)
    assert gke_version_at_least("1.34.1-gke.1", tpu7x.min_gke_version)


@pytest.mark.parametrize("gen", GENS, ids=lambda g: g.name)
def test_catalog_chip_facts_are_consistent(gen: tpu.TpuGeneration) -> None:
    assert 1 <= gen.jax_devices_per_chip <= gen.tensorcores_per_chip <= 2
    assert gen.hbm_bytes_per_chip > 0
    assert gen.hbm_bandwidth_per_chip > 0
    assert gen.peak_fp8_flops_per_chip is None or gen.peak_fp8_flops_per_chip >= gen.peak_bf16_flops_per_chip
    tpu.parse_gke_version(gen.min_gke_version)
    assert gen.ici_bandwidth_per_chip > 0
    assert set(gen.host_memory_gb) == set(gen.host_vcpus) == {c for _, c in gen.shapes}
    assert set(gen.sources) == set(tpu.SOURCED_FACTS)
    assert all(text.strip() for text in gen.sources.values())


@pytest.mark.parametrize("gen", GENS, ids=lambda g: g.name)
def test_catalog_prices_and_zones_are_sane(gen: tpu.TpuGeneration) -> None:
    for region, price in gen.prices.items():
        if price is None:  # unknown: recorded, never guessed
            continue
        assert price.on_demand > 0, region
        assert price.spot is None or 0 < price.spot < price.on_demand, region
        assert price.source.strip(), region
        assert price.as_of.strip(), region
    assert len(set(gen.zones)) == len(gen.zones)
    for zone in gen.zones:
        assert zone.startswith(tpu.zone_region(zone) + "-")


def test_catalog_unknown_price_is_no_price() -> None:
    ironwood = find_slice("tpu7x", "2x2x1")
    assert ironwood is not None
    assert "us-central1" in ironwood.generation.prices
    assert ironwood.hourly_price("us-central1") is None
    v5p = find_slice("v5p", "4x4x4")
    assert v5p is not None
    assert v5p.hourly_price("us-east5") == pytest.approx(64 * 4.20)


@pytest.mark.parametrize(
    ("version", "minimum", "ok"),
    [
        ("1.31.2-gke.1115000", "1.31.2-gke.1115000", True),
        ("1.31.2-gke.1114999", "1.31.2-gke.1115000", False),
        ("1.32", "1.31.2-gke.1115000", True),
        ("1.31", "1.31.2-gke.1115000", False),
        ("1.30.9-gke.9999999", "1.31.2-gke.1115000", False),
        ("1.27.2-gke.2100", "1.27.2-gke.2100", True),
    ],
)
def test_catalog_gke_version_order(version: str, minimum: str, ok: bool) -> None:
    assert gke_version_at_least(version, minimum) is ok


def test_catalog_rejects_malformed_version() -> None:
    with pytest.raises(ValueError, match="not a GKE version"):
        tpu.parse_gke_version("latest")


# ---- Compute Engine catalog (CPU machine types, regions and zones)


def test_gce_catalog_holds_every_tpu_zone_and_the_defaults() -> None:
    from components.catalog import gce
    from components.catalog import tpu as tpu_catalog
    from components.config.platform import SystemPoolSpec
    from components.workloads.jetstream.spec import CheckpointConversionSpec

    for gen in tpu_catalog.GENERATIONS.values():
        for zone in gen.zones:
            assert gce.is_zone(zone), zone
            assert zone in gce.zones_of(tpu_catalog.zone_region(zone)), zone
    assert SystemPoolSpec().machine_type in gce.MACHINE_TYPES
    assert CheckpointConversionSpec().machine_type in gce.MACHINE_TYPES
    assert "e2-standard-8" in gce.MACHINE_TYPES  # saxml-175b's system pool
    assert not any(m.startswith("ct") for m in gce.MACHINE_TYPES)  # TPU VMs are not CPU machine types


def test_gce_catalog_describes_a_family_and_suggests_close_names() -> None:
    from components.catalog import gce

    assert gce.describe_machine_types("n2-weird-3").startswith("n2-standard-{2,4,8,16,32,48,64,80,96,128}")
    assert "families e2, n1" in gce.describe_machine_types("zz-standard-4")
    assert gce.close_machine_types("e2-standart-4")[0] == "e2-standard-4"
    assert gce.close_regions("us-eats5")[0] == "us-east5"
    assert gce.looks_like_region("us-east9")
    assert not gce.looks_like_region("us east")
