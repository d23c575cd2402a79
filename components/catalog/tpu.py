"""Cloud TPU facts for GKE: one row per generation, everything else derived.

The rows are in :mod:`components.catalog.tpu_generations` (every fact with its source, the ``SRC_*``
strings there: the page or repository file and when it was read), their type and completeness check in
:mod:`components.catalog.tpu_types`. This module is the catalog's public face: it re-exports both and
derives slices, machine types and lookups from them. Pure data and pure functions; no Pulumi import.

Vocabulary, because generations disagree on it:
* a *chip* is what ``google.com/tpu`` counts and what the ``-Nt`` machine-type suffix counts
  (``ct6e-standard-4t`` = 4 chips per VM).
* a *TensorCore* is what Cloud TPU accelerator-type names count (``v5p-8`` = 4 chips of 2 cores);
  v5e and v6e have one per chip, so their names count chips too.
* a *JAX device* is what a mesh is laid over. v5e and v6e: one TensorCore, one device per chip.
  v5p: two TensorCores run as one "megacore" device per chip. tpu7x: two chiplets, each its own
  device, so a tpu7x chip is two devices (vLLM's tensor-parallel size is twice the chips).
* a *host* is one VM, i.e. one Kubernetes node. ``hosts = chips / chips_per_host``.
* a *slice* is one topology (``4x4``, ``2x2x2``), provisioned as one GKE node pool; multi-host
  pools are atomic: all of their nodes come and go together.

Only topologies are stored, as (topology, chips per VM) pairs. Chips, hosts, the multi-host
flag, node selectors, the ``google.com/tpu`` request per host and the placement of a multi-host
pool are computed from them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .tpu_generations import FLEX_START_PRICE_AS_OF, GENERATIONS, SRC_FLEX_START_PRICE
from .tpu_types import (
    PRICE_AS_OF,
    PRICE_SOURCE,
    SOURCED_FACTS,
    CatalogError,
    ChipPrice,
    MultiHostPlacement,
    QuotaKind,
    TpuGeneration,
    TpuQuota,
    TpuQuotas,
    UnbuiltAccelerator,
    missing_facts,
    zone_region,
)

__all__ = [
    "ACCELERATOR_LABEL",
    "DWS_CAPACITY_TYPES",
    "DWS_MAX_RUN_HOURS",
    "FLEX_START_MIN_GKE_VERSION",
    "FLEX_START_PRICE_AS_OF",
    "GENERATIONS",
    "NODEPOOL_LABEL",
    "PRICE_AS_OF",
    "PRICE_SOURCE",
    "QUEUED_NODE_LABEL",
    "QUOTA_KIND_BY_CAPACITY",
    "SOURCED_FACTS",
    "SRC_FLEX_START_PRICE",
    "SRC_RESERVATION_PRICE",
    "TOPOLOGY_LABEL",
    "TPU_RESOURCE",
    "WORKLOAD_POLICY_TYPE",
    "CatalogError",
    "ChipPrice",
    "MultiHostPlacement",
    "QuotaKind",
    "TpuGeneration",
    "TpuQuota",
    "TpuQuotas",
    "TpuSlice",
    "UnbuiltAccelerator",
    "all_slices",
    "find_slice",
    "gke_version_at_least",
    "host_memory_gb_of",
    "layouts",
    "missing_facts",
    "parse_gke_version",
    "topology_chips",
    "zone_region",
]


# Kubernetes label keys GKE puts on TPU nodes (and the extended resource it advertises).
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
TPU_RESOURCE = "google.com/tpu"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"

DWS_CAPACITY_TYPES = frozenset({"flexStart", "queuedProvisioning"})
"""The Dynamic Workload Scheduler capacity types (``tpu.capacity[].type``): their pools scale from zero,
consume no reservation, need a flex-start zone and this version floor, and run nodes for a bounded time
(queued provisioning is "flex-start with queued provisioning", GKE provisioningrequest docs)."""
DWS_MAX_RUN_HOURS = 168
"""GKE's longest flex-start node run, 7 days (``SRC_FLEX_START_ZONES`` in :mod:`.tpu_generations`)."""
QUEUED_NODE_LABEL = "cloud.google.com/gke-queued"
"""Node label and taint key of queued-provisioning nodes: GKE taints them itself; the pool sets the label so
workloads and Kueue's ResourceFlavor can select them (GoogleCloudPlatform/cluster-toolkit
modules/compute/gke-node-pool/main.tf:69-75; kubernetes-engine-samples ai-ml/gke-ray/tpu/dws/dws-tpu-queue.yaml)."""
FLEX_START_MIN_GKE_VERSION = "1.33.0-gke.1712000"
"""Oldest GKE version that runs flex-start (and so queued-provisioning) TPU node pools (``SRC_FLEX_START_ZONES``)."""
SRC_RESERVATION_PRICE = (
    "Compute Engine 'Reservations of Compute Engine zonal resources' "
    "(https://cloud.google.com/compute/docs/instances/reservations-overview): reserved resources are billed at the "
    "on-demand rate whether used or not, less any committed-use discount; TPU reservations of 1 year or more come "
    "with a CUD whose TPU rates are not in the reference stores, so the on-demand rate is the list-price bound"
)

WORKLOAD_POLICY_TYPE = "HIGH_THROUGHPUT"
"""``workload_policy.type`` of the resource policy that places a tpu7x multi-host slice (the colocating one)."""

QUOTA_KIND_BY_CAPACITY: Mapping[str, QuotaKind | None] = {
    "onDemand": "on-demand",
    "spot": "preemptible",
    # Flex-start and queued provisioning (DWS) count against preemptible quota, falling back to on-demand
    # quota when preemptible lacks (SRC_QUOTA_DWS in tpu_generations).
    "flexStart": "preemptible",
    "queuedProvisioning": "preemptible",
    # A pool that consumes a reservation needs no TPU quota (SRC_QUOTA_GKE in tpu_generations).
    "reservation": None,
}
"""The quota each capacity type (``tpu.capacity[].type``) draws on."""


def topology_chips(topology: str) -> int:
    return math.prod(int(d) for d in topology.split("x"))


@dataclass(frozen=True)
class TpuSlice:
    """One slice shape: a generation, a topology and the VM layout that builds it."""

    generation: TpuGeneration
    topology: str
    chips_per_host: int

    @property
    def machine_type(self) -> str:
        return self.generation.machine_type(self.chips_per_host)

    @property
    def chips(self) -> int:
        return topology_chips(self.topology)

    @property
    def hosts(self) -> int:
        """VMs = Kubernetes nodes in the slice's node pool."""
        return self.chips // self.chips_per_host

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def dcn_bandwidth_per_host(self) -> int:
        """Bytes/s one VM of the slice sends over the data-centre network: its chips' share."""
        return self.generation.dcn_bandwidth_per_chip * self.chips_per_host

    @property
    def tpu_per_host(self) -> int:
        """``google.com/tpu`` each pod requests: GKE cannot split a TPU VM, so all of its chips."""
        return self.chips_per_host

    @property
    def tensorcores(self) -> int:
        return self.chips * self.generation.tensorcores_per_chip

    @property
    def jax_devices(self) -> int:
        """Devices a JAX mesh over the whole slice has (twice the chips on tpu7x)."""
        return self.chips * self.generation.jax_devices_per_chip

    @property
    def hbm_bytes(self) -> int:
        return self.chips * self.generation.hbm_bytes_per_chip

    @property
    def placement(self) -> MultiHostPlacement | None:
        """How the slice's node pool is placed; None for a single-host pool (no placement policy)."""
        return self.generation.multi_host_placement if self.multi_host else None

    @property
    def accelerator_type(self) -> str:
        """Cloud TPU name, e.g. ``v6e-16``, ``v5litepod-32`` or ``v5p-8`` (it counts TensorCores)."""
        return f"{self.generation.cloud_tpu_prefix}-{self.tensorcores}"

    @property
    def pathways_instance_type(self) -> str:
        return f"{self.generation.pathways_name}:{self.topology}"

    @property
    def node_selector(self) -> dict[str, str]:
        return {ACCELERATOR_LABEL: self.generation.gke_accelerator, TOPOLOGY_LABEL: self.topology}

    @property
    def key(self) -> str:
        """Stable short id, e.g. ``v6e-4x4`` or ``v6e-2x4-4t`` when the topology has two layouts."""
        layouts = [c for t, c in self.generation.shapes if t == self.topology]
        suffix = f"-{self.chips_per_host}t" if len(layouts) > 1 else ""
        return f"{self.generation.name}-{self.topology}{suffix}"

    def price(self, region: str) -> ChipPrice | None:
        """Price per chip-hour in ``region`` or None where the catalog has no (or an unknown) price."""
        return self.generation.prices.get(region)

    def hourly_price(self, region: str | None, *, spot: bool = False, chips: int | None = None) -> float | None:
        """USD per hour for ``chips`` chips of this slice (default: the whole slice) in ``region``,
        on-demand or spot; None where the catalog has no such price. The one place prices are
        multiplied out: the planner ranks slices and the plan report prices pools with it."""
        price = self.price(region) if region else None
        rate = (price.spot if spot else price.on_demand) if price else None
        return None if rate is None else round(rate * (self.chips if chips is None else chips), 4)

    def capacity_price(self, region: str | None, capacity: str, *, chips: int | None = None) -> float | None:
        """USD per hour for ``chips`` chips (default: the slice) obtained as ``capacity`` (a
        ``tpu.capacity[].type``): on-demand and reservation at the on-demand rate
        (:data:`SRC_RESERVATION_PRICE`), spot at the spot rate, flex-start and queued provisioning at
        the flex-start rate (:data:`SRC_FLEX_START_PRICE`); None where the catalog has no such price."""
        if capacity in ("onDemand", "reservation", "spot"):
            return self.hourly_price(region, spot=capacity == "spot", chips=chips)
        rate = self.generation.flex_start_prices.get(region) if region else None
        return None if rate is None else round(rate * (self.chips if chips is None else chips), 4)


def all_slices() -> Iterator[TpuSlice]:
    for gen in GENERATIONS.values():
        for topology, chips_per_host in gen.shapes:
            yield TpuSlice(gen, topology, chips_per_host)


def layouts(generation: str, topology: str) -> tuple[TpuSlice, ...]:
    """Every VM layout of ``topology`` on ``generation`` (two for v5e/v6e 2x4, else one)."""
    gen = GENERATIONS[generation]
    return tuple(TpuSlice(gen, t, c) for t, c in gen.shapes if t == topology)


def find_slice(generation: str, topology: str, machine_type: str | None = None) -> TpuSlice | None:
    """The slice for (generation, topology[, machine type]); None if absent or ambiguous."""
    if generation not in GENERATIONS:
        return None
    candidates = layouts(generation, topology)
    if machine_type is not None:
        candidates = tuple(s for s in candidates if s.machine_type == machine_type)
    return candidates[0] if len(candidates) == 1 else None


def host_memory_gb_of(machine_type: str | None) -> int | None:
    """Host DRAM in GB of one VM of ``machine_type``; None when it is unset or no generation builds it
    (never for one a generation builds: its row holds the RAM of each of them, ``missing_facts``)."""
    for gen in GENERATIONS.values():
        chips = gen.chips_per_host_of(machine_type or "")
        if chips is not None and chips in gen.host_memory_gb:
            return gen.host_memory_gb[chips]
    return None


def parse_gke_version(version: str) -> tuple[int, ...]:
    """``1.31.2-gke.1115000`` -> (1, 31, 2, 1115000); ``1.31`` -> (1, 31)."""
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?(?:-gke\.(\d+))?", version)
    if not match:
        raise ValueError(f"not a GKE version: {version!r}")
    return tuple(int(p) for p in match.groups() if p is not None)


def gke_version_at_least(version: str, minimum: str) -> bool:
    """Compare GKE versions; a version without a patch or gke build is read as the oldest of its line,
    so ``1.31`` does not satisfy ``1.31.2-gke.1115000``."""
    have = parse_gke_version(version)
    need = parse_gke_version(minimum)
    padded = have + (0,) * (len(need) - len(have))
    return padded >= need
