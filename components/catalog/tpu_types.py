"""What one row of the TPU catalog holds, and the check that it holds all of it.

A generation row (:class:`TpuGeneration`) carries every fact the planner, the pools, the vLLM RAM cache
and pre-flight read about a generation, each with its source in ``sources``. A row that leaves a fact
out fails to build: a missing field is a ``TypeError`` naming it (mypy names it first), and a gap inside
one (a machine type without its host RAM or vCPUs, a fact without a source, a quota without a name) is a
:class:`CatalogError` naming the generation and the field, raised when the catalog is imported, so no
reader meets a half-filled row (no ``KeyError`` in ``plan``, no dropped pre-flight line or cache cap).

The rows themselves are in :mod:`components.catalog.tpu_generations`; :mod:`components.catalog.tpu` is
the catalog's public face (slices, lookups). Pure data types; no Pulumi import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

PRICE_SOURCE = (
    "SkyPilot GCP catalog catalogs/v8/gcp/vms.csv (commit 006059e0, generated from the GCP "
    "billing catalog; snapshot late 2025 or newer), per-slice prices divided by chips"
)
PRICE_AS_OF = "2025-12"

MultiHostPlacement = Literal["COMPACT", "WORKLOAD_POLICY"]
"""How GKE places the VMs of a multi-host slice node pool (single-host pools take no placement policy).

* ``COMPACT``: the node pool's ``placement_policy`` is ``type = "COMPACT"`` with ``tpu_topology`` set to
  the slice's topology; GKE derives a compact placement policy from it (v5e, v5p, v6e).
* ``WORKLOAD_POLICY``: a Compute Engine resource policy with ``workload_policy { type = "HIGH_THROUGHPUT",
  accelerator_topology = <topology> }`` in the pool's region, named by the pool's
  ``placement_policy.policy_name``; a compact placement policy is refused (tpu7x).
"""

QuotaKind = Literal["on-demand", "preemptible"]
"""The two Compute Engine TPU quotas of a generation: on-demand VMs, and preemptible (Spot; flex-start and
queued provisioning too, ``SRC_QUOTA_DWS`` in :mod:`components.catalog.tpu_generations`)."""

SOURCED_FACTS = (
    "cloud_tpu_prefix",
    "pathways_name",
    "gke_accelerator",
    "machine_prefix",
    "hbm_bytes_per_chip",
    "hbm_bandwidth_per_chip",
    "ici_bandwidth_per_chip",
    "dcn_bandwidth_per_chip",
    "peak_bf16_flops_per_chip",
    "peak_fp8_flops_per_chip",
    "tensorcores_per_chip",
    "jax_devices_per_chip",
    "mxu_columns",
    "host_vcpus",
    "host_memory_gb",
    "min_gke_version",
    "shapes",
    "zones",
    "multi_host_placement",
    "prices",
    "quotas",
)
"""The facts every generation names a source for in ``TpuGeneration.sources``."""


class CatalogError(ValueError):
    """A catalog row that lacks a fact: the message names the generation, the field and what to add."""


def zone_region(zone: str) -> str:
    """``us-east5-b`` -> ``us-east5``; AI zones such as ``us-central1-ai1`` also map to their region."""
    return zone.rsplit("-", 1)[0]


@dataclass(frozen=True)
class ChipPrice:
    """USD per chip-hour in one region, with where and when it was read. ``spot`` is None where no spot
    price is recorded; a region whose price no source gives maps to None instead of a ChipPrice."""

    on_demand: float
    spot: float | None = None
    source: str = PRICE_SOURCE
    as_of: str = PRICE_AS_OF


@dataclass(frozen=True)
class TpuQuota:
    """One Compute Engine quota a GKE TPU node pool draws on, counted in chips."""

    name: str
    """The console's name of the quota (IAM & Admin > Quotas, service Compute Engine API)."""
    metric: str | None
    """``Quota.metric`` as Compute Engine ``regions.get`` returns it; None where regions.get does not carry
    this generation's quota (``SRC_QUOTA_REGIONS_GET``): then only Cloud Quotas has it."""
    quota_id: str | None
    """Cloud Quotas quota id (service compute.googleapis.com) where regions.get does not carry the metric;
    None where regions.get does, or where no id is documented (look it up by ``name``)."""
    dimensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Cloud Quotas dimensions besides the region (``tpu_family`` of the family quota)."""


@dataclass(frozen=True)
class TpuQuotas:
    """The on-demand and preemptible quota of one TPU machine family (one GKE accelerator)."""

    on_demand: TpuQuota
    preemptible: TpuQuota

    def of(self, kind: QuotaKind) -> TpuQuota:
        return self.on_demand if kind == "on-demand" else self.preemptible


@dataclass(frozen=True)
class UnbuiltAccelerator:
    """Another GKE accelerator of a generation, with quota of its own, that the catalog builds no pool
    from (v5e: ``tpu-v5-lite-device``): pre-flight names its quota as one the pools do not draw on."""

    gke_accelerator: str
    machine_prefix: str
    quotas: TpuQuotas


@dataclass(frozen=True, kw_only=True)
class TpuGeneration:
    """One TPU generation as GKE offers it."""

    name: str
    """Short name users type in stack files (``v5e``, ``v5p``, ``v6e``, ``tpu7x``)."""
    cloud_tpu_prefix: str
    """Prefix of the Cloud TPU accelerator type (``v5litepod-16``, ``v6e-16``, ``v5p-8``, ``tpu7x-8``)."""
    pathways_name: str
    """Name Pathways uses in ``--instance_type=<name>:<topology>``."""
    gke_accelerator: str
    """Value of the ``cloud.google.com/gke-tpu-accelerator`` node label."""
    machine_prefix: str
    """Machine type without the chip suffix; ``f"{prefix}-{chips}t"`` is the machine type."""
    hbm_bytes_per_chip: int
    """HBM per chip. Cloud TPU docs quote v5e/v6e in GB and v5p/tpu7x in GB or GiB depending on the
    page; we read every figure as 10^9 bytes because that is the smaller, safer reading when budgeting
    memory (JAX reports 94.7 GiB per tpu7x device, less than the nominal 96 GiB, so not all of it is
    usable anyway)."""
    hbm_bandwidth_per_chip: int
    """HBM bandwidth per chip in bytes/s (docs quote GB/s; read as 10^9)."""
    ici_bandwidth_per_chip: int
    """Bidirectional inter-chip interconnect (ICI) bandwidth per chip in bytes/s (GBps read as 10^9): what
    the planner's serving model moves tensor-parallel all-reduces over."""
    dcn_bandwidth_per_chip: int
    """Data-centre network (DCN) bandwidth per chip in bytes/s (Gbps / 8): a host sends at this times its
    chips. What crosses slices and pools moves over it: multislice gradient all-reduces, pipeline stages
    on other hosts, a prefill slice's KV cache to its decode slice, peer checkpoint restores, and a cold
    start's checkpoint read from Cloud Storage."""
    peak_bf16_flops_per_chip: int
    """Peak dense bf16 FLOP/s per chip."""
    peak_fp8_flops_per_chip: int | None
    """Peak dense fp8 FLOP/s per chip; None where no fp8 rate is published. v5p and v6e run fp8 at
    their bf16 rate (no speed-up), tpu7x at twice it."""
    tensorcores_per_chip: int
    """TensorCores per chip; Cloud TPU accelerator-type names count them."""
    jax_devices_per_chip: int
    """JAX devices per chip (v5p: two TensorCores as one megacore device; tpu7x: two chiplet devices)."""
    mxu_columns: int
    """Width of the matrix units (MXU columns): a matmul whose contracted or output dimension is
    narrower fills that share of them. Attention contracts over a head (``head_dim``) and writes one,
    so a head narrower than the MXU caps the attention kernel's rate (``planner/perf.py``)."""
    host_vcpus: Mapping[int, int]
    """vCPUs per VM, by chips per VM."""
    host_memory_gb: Mapping[int, int]
    """Host DRAM per VM in GB (10^9 bytes, rounded down where the source quotes GiB), by chips per VM: it
    bounds the RAM-backed file cache a VM can hold."""
    min_gke_version: str
    """Oldest GKE Standard version that runs this generation."""
    shapes: tuple[tuple[str, int], ...]
    """Every supported (topology, chips per VM) pair. 2x4 appears twice on v5e/v6e: one 8-chip VM
    or two 4-chip VMs."""
    zones: tuple[str, ...]
    """Zones where the generation is documented for GKE (lists churn; see ``allowUndocumentedZone``)."""
    multi_host_placement: MultiHostPlacement
    """How a multi-host pool of this generation is placed (see ``MultiHostPlacement``)."""
    prices: Mapping[str, ChipPrice | None]
    """Per-region price per chip-hour; None records a region whose price no source gives."""
    quotas: TpuQuotas
    """The Compute Engine quotas this generation's node pools draw on (per region, in chips)."""
    sources: Mapping[str, str]
    """Where each fact comes from, by field name (every name in ``SOURCED_FACTS``)."""
    unbuilt_accelerators: tuple[UnbuiltAccelerator, ...] = ()
    """The generation's other GKE accelerators, with quota of their own, that no pool here is built from."""
    requires_explicit_gke_version: bool = False
    """An unset ``cluster.version`` (the release channel's default, unknown offline) is refused: the
    generation's floor is a patch build that a channel's default may be below. False where the floor
    is a minor older than every channel's default when the catalog was written (``SRC_EXPLICIT_GKE_VERSION``)."""
    flex_start_zones: tuple[str, ...] = ()
    """Zones where flex-start (DWS) capacity of this generation is documented (``SRC_FLEX_START_ZONES``);
    empty where none is."""
    flex_start_prices: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    """Flex-start (and queued-provisioning) USD per chip-hour by region (``SRC_FLEX_START_PRICE``); a
    region missing here has no known price."""

    def __post_init__(self) -> None:
        gaps = missing_facts(self)
        if gaps:
            raise CatalogError(
                f"TPU generation {self.name!r} lacks " + "; ".join(gaps) + " (add each, with its source, to the "
                "generation's row in components/catalog/tpu_generations.py)"
            )

    def mxu_fill(self, width: int) -> float:
        """Share of the MXU columns a matmul dimension of ``width`` fills (1 at the MXU's width or over)."""
        return min(1.0, width / self.mxu_columns)

    def machine_type(self, chips_per_host: int) -> str:
        return f"{self.machine_prefix}-{chips_per_host}t"

    @property
    def machine_types(self) -> tuple[str, ...]:
        return tuple(sorted({self.machine_type(c) for _, c in self.shapes}))

    @property
    def topologies(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for t, _ in self.shapes))

    def chips_per_host_of(self, machine_type: str) -> int | None:
        match = re.fullmatch(re.escape(self.machine_prefix) + r"-(\d+)t", machine_type)
        return int(match.group(1)) if match else None

    def regions(self) -> tuple[str, ...]:
        return tuple(sorted({zone_region(z) for z in self.zones}))


def missing_facts(gen: TpuGeneration) -> list[str]:
    """What ``gen`` lacks, one phrase per field (empty when the row is complete): a source per
    :data:`SOURCED_FACTS`, the vCPUs and host RAM of every machine type its shapes use, a positive ICI
    bandwidth and a named on-demand and preemptible quota."""
    gaps = [f"sources[{fact!r}]" for fact in SOURCED_FACTS if not gen.sources.get(fact, "").strip()]
    gaps += [f"sources[{extra!r}] (not a fact of the row)" for extra in gen.sources if extra not in SOURCED_FACTS]
    for chips in sorted({c for _, c in gen.shapes}):
        for name, per_vm in (("host_vcpus", gen.host_vcpus), ("host_memory_gb", gen.host_memory_gb)):
            if per_vm.get(chips, 0) <= 0:
                gaps.append(f"{name}[{chips}] (the {gen.machine_type(chips)} VM)")
    if gen.ici_bandwidth_per_chip <= 0:
        gaps.append("ici_bandwidth_per_chip (bytes/s, positive)")
    if gen.dcn_bandwidth_per_chip <= 0:
        gaps.append("dcn_bandwidth_per_chip (bytes/s, positive)")
    for kind, quota in (("on_demand", gen.quotas.on_demand), ("preemptible", gen.quotas.preemptible)):
        if not quota.name.strip():
            gaps.append(f"quotas.{kind}.name (the console name; with its regions.get metric or Cloud Quotas id)")
    return gaps
