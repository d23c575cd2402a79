"""Cloud TPU facts for GKE: one table per generation, everything else derived.

Pure data and pure functions; no Pulumi import. Every fact of a generation names its source in the
generation's ``sources`` (the ``SRC_*`` strings below: the page or repository file and when it was
read). Most of them are also collected in the project's reference notes.

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
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

# Kubernetes label keys GKE puts on TPU nodes (and the extended resource it advertises).
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
TPU_RESOURCE = "google.com/tpu"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"

PRICE_SOURCE = (
    "SkyPilot GCP catalog catalogs/v8/gcp/vms.csv (commit 006059e0, generated from the GCP "
    "billing catalog; snapshot late 2025 or newer), per-slice prices divided by chips"
)
PRICE_AS_OF = "2025-12"

# ---- sources (read 2026-11 unless a date is given; copies of Google pages are not live)

SRC_GKE_ABOUT = (
    "GKE 'About TPUs in GKE' https://docs.cloud.google.com/kubernetes-engine/docs/concepts/tpus (copy updated 2026-04-08)"
)
SRC_GKE_IRONWOOD = (
    "GKE 'About Ironwood (TPU7x) in GKE' https://docs.cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood"
    " (read 2026-11)"
)
SRC_TPU_V5E = "Cloud TPU 'TPU v5e' https://docs.cloud.google.com/tpu/docs/v5e (read 2026-11)"
SRC_TPU_V6E = "Cloud TPU 'TPU v6e' https://docs.cloud.google.com/tpu/docs/v6e.md.txt (read 2026-11)"
SRC_TPU_V5P = "Cloud TPU 'TPU v5p' https://docs.cloud.google.com/tpu/docs/v5p (read 2026-11)"
SRC_TPU_7X = "Cloud TPU 'TPU7x (Ironwood)' https://docs.cloud.google.com/tpu/docs/tpu7x (spec table, read 2026-11)"
SRC_TPU_ZONES = "Cloud TPU 'TPU regions and zones' https://docs.cloud.google.com/tpu/docs/regions-zones.md.txt (read 2026-11)"
SRC_CE_TPU_MACHINES = (
    "Compute Engine 'TPU machines in the accelerator-optimized machine family' "
    "https://docs.cloud.google.com/compute/docs/tpus/tpu-machines (copy updated 2026-08-26)"
)
SRC_XPK = "AI-Hypercomputer/xpk src/xpk/core/system_characteristics.py (HEAD 367c838, 2026-06-25)"
SRC_XPK_V5P_GKE = (
    "AI-Hypercomputer/xpk #38 (commit 4c93fa5, 2023-12-06) 'Add v5p support and increase the GKE default "
    "version to support it': 1.28.3-gke.1286000. GKE's own v5p floor was not found; this one is known to work"
)
SRC_JAX_CHIPS = (
    "JAX jax.experimental.pallas.tpu.ChipVersion (docs.jax.dev, read 2026-11): TensorCores per chip and megacore "
    "support by version; tpu7x dual-chiplet: Cloud TPU 'TPU7x (Ironwood)'"
)
SRC_PLACEMENT_COMPACT = (
    "AI-Hypercomputer/xpk src/xpk/core/nodepool.py (multi-host: --placement-type=COMPACT --tpu-topology); "
    "hashicorp/terraform-provider-google website/docs/r/container_node_pool.html.markdown placement_policy"
)
SRC_PLACEMENT_WORKLOAD_POLICY = (
    "GKE 'About Ironwood (TPU7x) in GKE' (workload policy via --placement-policy replaces --tpu-topology); "
    "AI-Hypercomputer/xpk src/xpk/core/nodepool.py (HIGH_THROUGHPUT policy, no COMPACT); "
    "vllm-project/ci-infra #547/#552 terraform/gcp_old/tpu-inference/k8s/workers.tf (2026-09-11: GKE refuses a "
    "compact placement policy for tpu7x-standard-4t)"
)
SRC_PRICES_UNKNOWN_TPU7X = (
    "no tpu7x rows in the SkyPilot snapshot above and no Cloud TPU price page in the reference stores (2026-11): "
    "unknown, never guessed"
)
SRC_FLEX_START_ZONES = (
    "GKE 'About flex-start provisioning mode' https://cloud.google.com/kubernetes-engine/docs/concepts/dws (zh-cn copy, "
    "read 2026-11): TPU Trillium (v6e) in asia-northeast1-b, us-east5-a, us-east5-b; v5e in us-west4-a; v5p in "
    "us-east5-a; TPUs need GKE 1.33.0-gke.1712000 or later. The Cloud TPU API page ('Request Cloud TPUs using "
    "Flex-start', copy dated 2025-08-19) adds v5e us-central1-a for its own queued resources, not GKE. tpu7x "
    "flex-start is allow-listed only (Compute Engine 'TPU machines'), so it has no zone here"
)
DWS_CAPACITY_TYPES = frozenset({"flexStart", "queuedProvisioning"})
"""The Dynamic Workload Scheduler capacity types (``tpu.capacity[].type``): their pools scale from zero,
consume no reservation, need a flex-start zone and this version floor, and run nodes for a bounded time
(queued provisioning is "flex-start with queued provisioning", GKE provisioningrequest docs)."""
DWS_MAX_RUN_HOURS = 168
"""GKE's longest flex-start node run, 7 days (:data:`SRC_FLEX_START_ZONES`)."""
QUEUED_NODE_LABEL = "cloud.google.com/gke-queued"
"""Node label and taint key of queued-provisioning nodes: GKE taints them itself; the pool sets the label so
workloads and Kueue's ResourceFlavor can select them (GoogleCloudPlatform/cluster-toolkit
modules/compute/gke-node-pool/main.tf:69-75; kubernetes-engine-samples ai-ml/gke-ray/tpu/dws/dws-tpu-queue.yaml)."""
FLEX_START_MIN_GKE_VERSION = "1.33.0-gke.1712000"
"""Oldest GKE version that runs flex-start (and so queued-provisioning) TPU node pools (:data:`SRC_FLEX_START_ZONES`)."""
SRC_FLEX_START_PRICE = (
    "v6e flex-start $1.35 per chip-hour in europe-west4, us-east1, us-east5 and asia-northeast1: a public benchmark "
    "write-up citing https://cloud.google.com/products/dws/pricing (secondary; the DWS page itself is not in the "
    "reference stores); no other generation's flex-start price was found. Queued provisioning is DWS flex-start "
    "with queued provisioning (GKE 'Run a large-scale workload with flex-start with queued provisioning', "
    "https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest) and is priced the same"
)
FLEX_START_PRICE_AS_OF = "2026-11"
SRC_RESERVATION_PRICE = (
    "Compute Engine 'Reservations of Compute Engine zonal resources' "
    "(https://cloud.google.com/compute/docs/instances/reservations-overview): reserved resources are billed at the "
    "on-demand rate whether used or not, less any committed-use discount; TPU reservations of 1 year or more come "
    "with a CUD whose TPU rates are not in the reference stores, so the on-demand rate is the list-price bound"
)

SRC_EXPLICIT_GKE_VERSION = (
    "v5e 1.27, v5p 1.28 and v6e 1.31 floors: minors GKE had taken off its release channels by 2026-11 "
    "(each minor gets about 14 months of standard support); tpu7x 1.34.0-gke.2201000: "
    f"{SRC_GKE_IRONWOOD} gives it as a patch build of 1.34, a minor that release channels carried at "
    "older builds too, and the channel's current default is not known offline"
)

MultiHostPlacement = Literal["COMPACT", "WORKLOAD_POLICY"]
"""How GKE places the VMs of a multi-host slice node pool (single-host pools take no placement policy).

* ``COMPACT``: the node pool's ``placement_policy`` is ``type = "COMPACT"`` with ``tpu_topology`` set to
  the slice's topology; GKE derives a compact placement policy from it (v5e, v5p, v6e).
* ``WORKLOAD_POLICY``: a Compute Engine resource policy with ``workload_policy { type = "HIGH_THROUGHPUT",
  accelerator_topology = <topology> }`` in the pool's region, named by the pool's
  ``placement_policy.policy_name``; a compact placement policy is refused (tpu7x).
"""

WORKLOAD_POLICY_TYPE = "HIGH_THROUGHPUT"
"""``workload_policy.type`` of the resource policy that places a tpu7x multi-host slice (the colocating one)."""

SOURCED_FACTS = (
    "cloud_tpu_prefix",
    "pathways_name",
    "gke_accelerator",
    "machine_prefix",
    "hbm_bytes_per_chip",
    "hbm_bandwidth_per_chip",
    "peak_bf16_flops_per_chip",
    "peak_fp8_flops_per_chip",
    "tensorcores_per_chip",
    "jax_devices_per_chip",
    "host_vcpus",
    "min_gke_version",
    "shapes",
    "zones",
    "multi_host_placement",
    "prices",
)
"""The facts every generation names a source for in ``TpuGeneration.sources``."""


@dataclass(frozen=True)
class ChipPrice:
    """USD per chip-hour in one region, with where and when it was read. ``spot`` is None where no spot
    price is recorded; a region whose price no source gives maps to None instead of a ChipPrice."""

    on_demand: float
    spot: float | None = None
    source: str = PRICE_SOURCE
    as_of: str = PRICE_AS_OF


@dataclass(frozen=True)
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
    peak_bf16_flops_per_chip: int
    """Peak dense bf16 FLOP/s per chip."""
    peak_fp8_flops_per_chip: int | None
    """Peak dense fp8 FLOP/s per chip; None where no fp8 rate is published. v5p and v6e run fp8 at
    their bf16 rate (no speed-up), tpu7x at twice it."""
    tensorcores_per_chip: int
    """TensorCores per chip; Cloud TPU accelerator-type names count them."""
    jax_devices_per_chip: int
    """JAX devices per chip (v5p: two TensorCores as one megacore device; tpu7x: two chiplet devices)."""
    host_vcpus: Mapping[int, int]
    """vCPUs per VM, by chips per VM."""
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
    sources: Mapping[str, str]
    """Where each fact comes from, by field name (every name in ``SOURCED_FACTS``)."""
    requires_explicit_gke_version: bool = False
    """An unset ``cluster.version`` (the release channel's default, unknown offline) is refused: the
    generation's floor is a patch build that a channel's default may be below. False where the floor
    is a minor older than every channel's default when the catalog was written (see
    :data:`SRC_EXPLICIT_GKE_VERSION`)."""
    flex_start_zones: tuple[str, ...] = ()
    """Zones where flex-start (DWS) capacity of this generation is documented (:data:`SRC_FLEX_START_ZONES`);
    empty where none is."""
    flex_start_prices: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    """Flex-start (and queued-provisioning) USD per chip-hour by region (:data:`SRC_FLEX_START_PRICE`); a
    region missing here has no known price."""

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


def zone_region(zone: str) -> str:
    """``us-east5-b`` -> ``us-east5``; AI zones such as ``us-central1-ai1`` also map to their region."""
    return zone.rsplit("-", 1)[0]


def topology_chips(topology: str) -> int:
    return math.prod(int(d) for d in topology.split("x"))


def _v5e_v6e_shapes(single_host: Mapping[str, int], multi: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    # 2x4 is offered both as one 8-chip VM and as two 4-chip VMs; larger slices use 4-chip VMs.
    return (*single_host.items(), ("2x4", 4), *((t, 4) for t in multi))


def _four_chip_vm_shapes(topologies: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    # v5p and tpu7x build every slice from 4-chip VMs: 2x2x1 is one VM, larger topologies are multi-host.
    return tuple((t, 4) for t in topologies)


_MULTI_2D = ("4x4", "4x8", "8x8", "8x16", "16x16")
_US_V5E = ("us-central1", "us-east1", "us-east4", "us-east5", "us-west1", "us-west4")
_US_V6E = ("us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1")

# 3-D slices of v5p and tpu7x, all from 4-chip VMs: each is named by the Cloud TPU v5p table (2x2x1, 2x2x2,
# 2x4x4, 4x4x4, 4x4x8, 4x8x8) and by xpk's default topologies for both generations (which add 2x2x4).
# Capped at 256 chips (64 VMs), the size of the largest v5e/v6e slice: larger single-pool slices exist
# (v5p up to 16x16x24, the largest v5p topology GKE quotes; tpu7x up to 144 cubes in xpk) but
# components.config.workload.MAX_CHIPS bounds every mesh degree by the largest catalog slice, so listing
# them would loosen load-time validation for every stack. Add them with a per-generation bound.
_CUBES_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8")

GENERATIONS: Mapping[str, TpuGeneration] = MappingProxyType(
    {
        g.name: g
        for g in (
            TpuGeneration(
                name="v5e",
                cloud_tpu_prefix="v5litepod",
                pathways_name="tpuv5e",
                gke_accelerator="tpu-v5-lite-podslice",
                machine_prefix="ct5lp-hightpu",
                hbm_bytes_per_chip=16 * 10**9,
                # The v5e page's chip table says 819 GBps; its newer spec table says "800 GiBps" (859 GB/s).
                # The smaller figure is kept: it never overstates what a decode step can stream.
                hbm_bandwidth_per_chip=819 * 10**9,
                peak_bf16_flops_per_chip=197 * 10**12,
                peak_fp8_flops_per_chip=None,  # v5e publishes bf16 and int8 (393 TOPS), no fp8 rate
                tensorcores_per_chip=1,
                jax_devices_per_chip=1,
                host_vcpus=MappingProxyType({1: 24, 4: 112, 8: 224}),
                min_gke_version="1.27.2-gke.2100",
                shapes=_v5e_v6e_shapes({"1x1": 1, "2x2": 4, "2x4": 8}, _MULTI_2D),
                zones=(
                    "us-central1-a",
                    "us-south1-a",
                    "us-west1-c",
                    "us-west4-a",
                    "us-east5-a",
                    "us-east5-b",
                    "us-east5-c",
                    "europe-west4-a",
                    "europe-west4-b",
                    "asia-northeast1-b",
                    "asia-southeast1-b",
                ),
                multi_host_placement="COMPACT",
                flex_start_zones=("us-west4-a",),
                prices=MappingProxyType(
                    {r: ChipPrice(1.20) for r in _US_V5E}
                    | {
                        "us-central1": ChipPrice(1.20, 0.245),
                        "us-east5": ChipPrice(1.20, 0.60),
                        "us-west4": ChipPrice(1.20, 0.48),
                        "us-south1": ChipPrice(1.416),
                        "europe-west4": ChipPrice(1.56),
                        "asia-east1": ChipPrice(1.389),
                    }
                ),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": SRC_TPU_V5E,
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; {SRC_GKE_ABOUT}",
                        "machine_prefix": f"{SRC_TPU_V5E}; {SRC_XPK}",
                        "hbm_bytes_per_chip": SRC_TPU_V5E,
                        "hbm_bandwidth_per_chip": SRC_TPU_V5E,
                        "peak_bf16_flops_per_chip": SRC_TPU_V5E,
                        "peak_fp8_flops_per_chip": SRC_TPU_V5E,
                        "tensorcores_per_chip": SRC_TPU_V5E,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "host_vcpus": SRC_TPU_V5E,
                        "min_gke_version": "project reference notes (GKE availability table not readable from a copy)",
                        "shapes": f"{SRC_TPU_V5E}; {SRC_XPK}; {SRC_GKE_ABOUT}",
                        "zones": f"{SRC_TPU_ZONES}; {PRICE_SOURCE} (priced zones)",
                        "multi_host_placement": SRC_PLACEMENT_COMPACT,
                        "prices": PRICE_SOURCE,
                    }
                ),
            ),
            TpuGeneration(
                name="v5p",
                cloud_tpu_prefix="v5p",
                pathways_name="tpuv5",
                gke_accelerator="tpu-v5p-slice",
                # GKE node pools: ct5p-hightpu-4t only. Cluster Toolkit's chip-count map also lists
                # ct5p-hightpu-1t/2t, but no GKE page or xpk names a topology for them.
                machine_prefix="ct5p-hightpu",
                hbm_bytes_per_chip=95 * 10**9,
                hbm_bandwidth_per_chip=2765 * 10**9,
                peak_bf16_flops_per_chip=459 * 10**12,
                peak_fp8_flops_per_chip=459 * 10**12,
                tensorcores_per_chip=2,
                jax_devices_per_chip=1,
                host_vcpus=MappingProxyType({4: 208}),
                min_gke_version="1.28.3-gke.1286000",
                shapes=_four_chip_vm_shapes(_CUBES_3D),
                # us-east5-b/c and us-south1-a appear only as single-tenant extras in an older translated
                # copy and are left out.
                zones=("us-central1-a", "us-east5-a", "europe-west4-b"),
                multi_host_placement="COMPACT",
                flex_start_zones=("us-east5-a",),
                # v5p-8 (4 chips) rows of the snapshot, divided by 4; the larger slices price the same per chip.
                prices=MappingProxyType(
                    {
                        "us-central1": ChipPrice(4.20, 0.8357),
                        "us-east1": ChipPrice(4.20, 0.8357),
                        "us-east5": ChipPrice(4.20, 1.68),
                        "us-south1": ChipPrice(4.779, 1.3161),
                        "europe-west4": ChipPrice(4.2525, 1.3485),
                        "europe-west1": ChipPrice(4.4595, 1.7838),
                    }
                ),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": f"{SRC_TPU_V5P} ('v5p-32' = 32 TensorCores, 16 chips)",
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; GoogleCloudPlatform/cluster-toolkit modules/internal/tpu-definition",
                        "machine_prefix": f"{SRC_XPK}; {SRC_CE_TPU_MACHINES}",
                        "hbm_bytes_per_chip": SRC_TPU_V5P,
                        "hbm_bandwidth_per_chip": f"{SRC_TPU_V5P} (2765 GBps; newer copy: 2575 GiBps, the same)",
                        "peak_bf16_flops_per_chip": f"{SRC_TPU_V5P}; {SRC_TPU_7X}",
                        "peak_fp8_flops_per_chip": f"{SRC_TPU_V5P}; {SRC_TPU_7X}",
                        "tensorcores_per_chip": SRC_TPU_V5P,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "host_vcpus": f"{SRC_TPU_V5P}; {SRC_CE_TPU_MACHINES}",
                        "min_gke_version": SRC_XPK_V5P_GKE,
                        "shapes": f"{SRC_TPU_V5P} (2x2x1 ... 4x8x8 of its table); {SRC_XPK} (default_topologies, adds 2x2x4)",
                        "zones": f"{SRC_TPU_ZONES} (us-central1-a, us-east5-a); {PRICE_SOURCE} (europe-west4-b)",
                        "multi_host_placement": SRC_PLACEMENT_COMPACT,
                        "prices": PRICE_SOURCE,
                    }
                ),
            ),
            TpuGeneration(
                name="v6e",
                cloud_tpu_prefix="v6e",
                pathways_name="tpuv6e",
                gke_accelerator="tpu-v6e-slice",
                machine_prefix="ct6e-standard",
                hbm_bytes_per_chip=32 * 10**9,
                hbm_bandwidth_per_chip=1638 * 10**9,  # older copies: 1600 GBps
                peak_bf16_flops_per_chip=918 * 10**12,
                peak_fp8_flops_per_chip=918 * 10**12,
                tensorcores_per_chip=1,
                jax_devices_per_chip=1,
                host_vcpus=MappingProxyType({1: 44, 4: 180, 8: 360}),
                min_gke_version="1.31.2-gke.1115000",
                shapes=_v5e_v6e_shapes({"1x1": 1, "2x2": 4, "2x4": 8}, _MULTI_2D),
                zones=(
                    "us-central1-b",
                    "us-east1-d",
                    "us-east5-a",
                    "us-east5-b",
                    "us-east5-c",
                    "us-east4-a",
                    "us-east4-b",
                    "us-west1-c",
                    "us-south1-ai1b",
                    "us-central1-ai1",
                    "europe-west4-a",
                    "asia-northeast1-b",
                    "southamerica-west1-a",
                ),
                multi_host_placement="COMPACT",
                flex_start_zones=("asia-northeast1-b", "us-east5-a", "us-east5-b"),
                flex_start_prices=MappingProxyType(
                    {r: 1.35 for r in ("europe-west4", "us-east1", "us-east5", "asia-northeast1")}
                ),
                prices=MappingProxyType(
                    {r: ChipPrice(2.70) for r in _US_V6E}
                    | {
                        "us-central1": ChipPrice(2.70, 0.544),
                        "us-east5": ChipPrice(2.70, 1.215),
                        "us-south1": ChipPrice(2.70, 1.35),
                        "europe-west4": ChipPrice(2.97),
                        "asia-southeast1": ChipPrice(2.97),
                        "asia-northeast1": ChipPrice(3.24),
                    }
                ),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": SRC_TPU_V6E,
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; {SRC_GKE_ABOUT}",
                        "machine_prefix": f"{SRC_TPU_V6E}; {SRC_CE_TPU_MACHINES}",
                        "hbm_bytes_per_chip": SRC_TPU_V6E,
                        "hbm_bandwidth_per_chip": SRC_TPU_V6E,
                        "peak_bf16_flops_per_chip": SRC_TPU_V6E,
                        "peak_fp8_flops_per_chip": SRC_TPU_7X,
                        "tensorcores_per_chip": SRC_TPU_V6E,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "host_vcpus": SRC_CE_TPU_MACHINES,
                        "min_gke_version": "docs.ray.io gcp-gke-tpu-cluster quoting GKE ('v6e ... 1.31.2-gke.1115000 or later')",
                        "shapes": f"{SRC_TPU_V6E}; {SRC_XPK}",
                        "zones": f"{SRC_TPU_ZONES}; {PRICE_SOURCE} (priced zones)",
                        "multi_host_placement": SRC_PLACEMENT_COMPACT,
                        "prices": PRICE_SOURCE,
                    }
                ),
            ),
            TpuGeneration(
                name="tpu7x",
                cloud_tpu_prefix="tpu7x",
                pathways_name="tpu7x",
                gke_accelerator="tpu7x",
                # GKE node pools: tpu7x-standard-4t only. xpk also models tpu7x-standard-1t (1x1x1), which
                # neither the GKE Ironwood page nor the Compute Engine TPU machine-type page documents.
                machine_prefix="tpu7x-standard",
                hbm_bytes_per_chip=192 * 10**9,
                hbm_bandwidth_per_chip=7380 * 10**9,
                peak_bf16_flops_per_chip=2307 * 10**12,
                peak_fp8_flops_per_chip=4614 * 10**12,
                tensorcores_per_chip=2,
                jax_devices_per_chip=2,
                host_vcpus=MappingProxyType({4: 224}),
                min_gke_version="1.34.0-gke.2201000",
                shapes=_four_chip_vm_shapes(_CUBES_3D),
                # The AI zone us-central1-ai1a is documented too; it waits for components.catalog.gce to
                # know it (every TPU zone must be a Compute Engine zone there).
                zones=("us-central1-c",),
                multi_host_placement="WORKLOAD_POLICY",
                prices=MappingProxyType({"us-central1": None}),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": f"{SRC_XPK} (tpu7x-<TensorCores>); {SRC_TPU_7X}",
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; {SRC_GKE_IRONWOOD}",
                        "machine_prefix": f"{SRC_GKE_IRONWOOD}; {SRC_CE_TPU_MACHINES}",
                        "hbm_bytes_per_chip": SRC_TPU_7X,
                        "hbm_bandwidth_per_chip": SRC_CE_TPU_MACHINES,
                        "peak_bf16_flops_per_chip": SRC_TPU_7X,
                        "peak_fp8_flops_per_chip": SRC_TPU_7X,
                        "tensorcores_per_chip": SRC_TPU_7X,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "host_vcpus": SRC_CE_TPU_MACHINES,
                        "min_gke_version": f"{SRC_GKE_IRONWOOD} (Standard; Autopilot 1.34.1-gke.3084001)",
                        "shapes": f"{SRC_XPK} (tpu7x-standard-4t default_topologies); {SRC_CE_TPU_MACHINES} (2x2x2)",
                        "zones": SRC_TPU_ZONES,
                        "multi_host_placement": SRC_PLACEMENT_WORKLOAD_POLICY,
                        "prices": SRC_PRICES_UNKNOWN_TPU7X,
                    }
                ),
                requires_explicit_gke_version=True,  # SRC_EXPLICIT_GKE_VERSION
            ),
        )
    }
)


# ---- TPU quota of GKE node pools (components/tools/preflight.py reads it)

SRC_QUOTA_GKE = (
    "GKE 'Deploy TPU workloads in GKE Standard' https://cloud.google.com/kubernetes-engine/docs/how-to/tpus and "
    "'Troubleshoot TPUs in GKE' https://docs.cloud.google.com/kubernetes-engine/docs/troubleshooting/tpus (read "
    "2026-11): on-demand and Spot TPU slice node pools need Compute Engine API quota (compute.googleapis.com, per "
    "region), not Cloud TPU API quota; a node pool that consumes a TPU reservation needs no TPU quota; the quota "
    "names per machine-type prefix (ct5lp- 'TPU v5 Lite PodSlice chips' / 'Preemptible TPU v5 Lite Podslice chips', "
    "ct5p- 'TPU v5p chips' / 'Preemptible TPU v5p chips', ct6e- 'TPUs per TPU family' tpu_family=CT6E / "
    "'Preemptible TPU slices v6e', tpu7x- 'TPUs per TPU family' tpu_family=tpu7x / 'Preemptible TPU slices tpu7x') "
    "as a public research note quotes that table (github find_string 'Preemptible TPU slices tpu7x', 2026-07-14)"
)
SRC_QUOTA_REGIONS_GET = (
    "google-cloud-compute 1.57.0 compute_v1.Quota.Metric: the TPU metrics Compute Engine's regions.get reports "
    "are TPU_LITE_DEVICE_V5, TPU_LITE_PODSLICE_V5, TPU_PODSLICE_V4 and their PREEMPTIBLE_ forms, and no v5p, v6e "
    "or tpu7x metric: those are Cloud Quotas (cloudquotas.googleapis.com) quota ids of compute.googleapis.com"
)
SRC_QUOTA_IDS = (
    "Cloud Quotas ids seen by users of compute.googleapis.com (public write-ups, 2026-06..08: "
    "'TPUS-PER-TPU-FAMILY-per-project-region' tpu_family=CT6E for v6e on-demand, "
    "'PREEMPTIBLE-TPU-V6E-per-project-region' for v6e Spot and flex-start, 'TPU-V5P-per-project-region' and "
    "'PREEMPTIBLE-TPU-V5P-per-project-region' for v5p); no tpu7x Spot quota id was found, only its console name"
)
SRC_QUOTA_V5E_DEVICE = (
    "tpu-v5-lite-device (machine types ct5l-hightpu-*) is GKE's single-host v5e accelerator with its own "
    "TPU_LITE_DEVICE_V5 quota (SRC_QUOTA_REGIONS_GET; skypilot-org/skypilot GKE_TPU_ACCELERATOR_TO_GENERATION: "
    "'Only Single-host v5e TPU configurations'); this catalog builds v5e from ct5lp-hightpu-* "
    "(tpu-v5-lite-podslice), whose single-host pools count against TPU_LITE_PODSLICE_V5 too (public GKE v5e "
    "single-host ComputeClass guides check PREEMPTIBLE_TPU_LITE_PODSLICE_V5). The Cloud TPU API's v5e serving "
    "quota (tpu-v5s-litepod-serving, Cloud TPU 'Quotas' https://cloud.google.com/tpu/docs/quota) is Cloud TPU API "
    "quota, which GKE does not use"
)
SRC_QUOTA_DWS = (
    "Compute Engine 'Provisioning models' https://cloud.google.com/compute/docs/instances/provisioning-models: "
    "'When you create a Flex-start VM, preemptible quota is consumed. If your project lacks preemptible quota, "
    "then standard quota is consumed' (quoted by public migration guides, 2026); Cloud TPU 'Request Cloud TPUs "
    "using Flex-start' (flex-start uses preemptible quota). GKE queued provisioning is DWS flex-start with queued "
    "provisioning (GKE 'provisioningrequest' how-to), so it draws on the same quota"
)

QuotaKind = Literal["on-demand", "preemptible"]
"""The two Compute Engine TPU quotas of a generation: on-demand VMs, and preemptible (Spot; flex-start and
queued provisioning too, :data:`SRC_QUOTA_DWS`)."""


@dataclass(frozen=True)
class TpuQuota:
    """One Compute Engine quota a GKE TPU node pool draws on, counted in chips."""

    name: str
    """The console's name of the quota (IAM & Admin > Quotas, service Compute Engine API)."""
    metric: str | None
    """``Quota.metric`` as Compute Engine ``regions.get`` returns it; None where regions.get does not carry
    this generation's quota (:data:`SRC_QUOTA_REGIONS_GET`): then only Cloud Quotas has it."""
    quota_id: str | None
    """Cloud Quotas quota id (service compute.googleapis.com) where regions.get does not carry the metric;
    None where regions.get does, or where no id is documented (look it up by ``name``)."""
    dimensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Cloud Quotas dimensions besides the region (``tpu_family`` of the family quota)."""


@dataclass(frozen=True)
class TpuQuotas:
    """The on-demand and preemptible quota of one TPU machine family (one GKE accelerator)."""

    machine_prefix: str
    gke_accelerator: str
    on_demand: TpuQuota
    preemptible: TpuQuota
    source: str

    def of(self, kind: QuotaKind) -> TpuQuota:
        return self.on_demand if kind == "on-demand" else self.preemptible


QUOTA_KIND_BY_CAPACITY: Mapping[str, QuotaKind | None] = {
    "onDemand": "on-demand",
    "spot": "preemptible",
    # Flex-start and queued provisioning (DWS) count against preemptible quota, falling back to on-demand
    # quota when preemptible lacks (SRC_QUOTA_DWS).
    "flexStart": "preemptible",
    "queuedProvisioning": "preemptible",
    # A pool that consumes a reservation needs no TPU quota (SRC_QUOTA_GKE).
    "reservation": None,
}
"""The quota each capacity type (``tpu.capacity[].type``) draws on."""


TPU_QUOTAS: Mapping[str, TpuQuotas] = MappingProxyType(
    {
        q.machine_prefix: q
        for q in (
            TpuQuotas(
                "ct5lp-hightpu",
                "tpu-v5-lite-podslice",
                TpuQuota("TPU v5 Lite PodSlice chips", "TPU_LITE_PODSLICE_V5", None),
                TpuQuota("Preemptible TPU v5 Lite Podslice chips", "PREEMPTIBLE_TPU_LITE_PODSLICE_V5", None),
                f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_V5E_DEVICE}",
            ),
            TpuQuotas(
                "ct5l-hightpu",
                "tpu-v5-lite-device",
                TpuQuota("TPU v5 Lite Device chips", "TPU_LITE_DEVICE_V5", None),
                TpuQuota("Preemptible TPU v5 Lite Device chips", "PREEMPTIBLE_TPU_LITE_DEVICE_V5", None),
                f"{SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_V5E_DEVICE}",
            ),
            TpuQuotas(
                "ct5p-hightpu",
                "tpu-v5p-slice",
                TpuQuota("TPU v5p chips", None, "TPU-V5P-per-project-region"),
                TpuQuota("Preemptible TPU v5p chips", None, "PREEMPTIBLE-TPU-V5P-per-project-region"),
                f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_IDS}",
            ),
            TpuQuotas(
                "ct6e-standard",
                "tpu-v6e-slice",
                TpuQuota(
                    "TPUs per TPU family",
                    None,
                    "TPUS-PER-TPU-FAMILY-per-project-region",
                    MappingProxyType({"tpu_family": "CT6E"}),
                ),
                TpuQuota("Preemptible TPU slices v6e", None, "PREEMPTIBLE-TPU-V6E-per-project-region"),
                f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_IDS}",
            ),
            TpuQuotas(
                "tpu7x-standard",
                "tpu7x",
                TpuQuota(
                    "TPUs per TPU family",
                    None,
                    "TPUS-PER-TPU-FAMILY-per-project-region",
                    MappingProxyType({"tpu_family": "tpu7x"}),
                ),
                TpuQuota("Preemptible TPU slices tpu7x", None, None),
                f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_IDS}",
            ),
        )
    }
)
"""Compute Engine TPU quotas by machine-type prefix (the part before ``-<chips>t``)."""


def quotas_of(machine_type: str) -> TpuQuotas | None:
    """The quotas a node pool of ``machine_type`` draws on; None for a machine type no entry covers."""
    return TPU_QUOTAS.get(machine_type.rsplit("-", 1)[0])


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
