"""The TPU catalog's rows: one per generation, every fact with its source.

Each row is a :class:`~components.catalog.tpu_types.TpuGeneration`; a row that leaves a fact out fails
when this module is imported, naming the generation and the field (``tpu_types.missing_facts``). Slices,
lookups and the vocabulary (chip, TensorCore, JAX device, host, slice) are in
:mod:`components.catalog.tpu`. Pure data; no Pulumi import.

Adding a generation is one row here. Tests that need to know which generations a zone holds build their
own catalog (``tests/tpu_test_catalog.py``) instead of reading this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .tpu_types import PRICE_SOURCE, ChipPrice, TpuGeneration, TpuQuota, TpuQuotas, UnbuiltAccelerator

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
SRC_TPU7X_DCN = (
    "ASSUMED: GKE 'About Ironwood (TPU7x) in GKE' https://docs.cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood "
    "(each VM: 4 chips and 2 NICs; read 2026-11) publishes no NIC speed: v6e's 100 Gbps per chip"
)
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
SRC_JAX_TPU_INFO = (
    "jax 0.10.2 (requirements.txt) jax/_src/pallas/mosaic/tpu_info.py TpuInfo.mxu_column_size: "
    "MXU_COLUMN_SIZE_GEN_LT_6 = 128 (v5e, v5p), MXU_COLUMN_SIZE_GEN_GE_6 = 256 (v6e), 256 (TPU_7X); Cloud TPU "
    "'TPU v6e': 'two 256x256 matrix-multiply units (MXU)' per TensorCore"
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

SRC_FLEX_START_PRICE = (
    "v6e flex-start $1.35 per chip-hour in europe-west4, us-east1, us-east5 and asia-northeast1: a public benchmark "
    "write-up citing https://cloud.google.com/products/dws/pricing (secondary; the DWS page itself is not in the "
    "reference stores); no other generation's flex-start price was found. Queued provisioning is DWS flex-start "
    "with queued provisioning (GKE 'Run a large-scale workload with flex-start with queued provisioning', "
    "https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest) and is priced the same"
)
FLEX_START_PRICE_AS_OF = "2026-11"

SRC_EXPLICIT_GKE_VERSION = (
    "v5e 1.27, v5p 1.28 and v6e 1.31 floors: minors GKE had taken off its release channels by 2026-11 "
    "(each minor gets about 14 months of standard support); tpu7x 1.34.0-gke.2201000: "
    f"{SRC_GKE_IRONWOOD} gives it as a patch build of 1.34, a minor that release channels carried at "
    "older builds too, and the channel's current default is not known offline"
)


# ---- Compute Engine TPU quota of GKE node pools (each row's ``quotas``; components/tools/preflight.py reads them)

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
                ici_bandwidth_per_chip=400 * 10**9,  # "400 GBps", bidirectional
                dcn_bandwidth_per_chip=25 * 10**9 // 8,  # "2 x 100 Gbps NIC" per 8-chip host
                peak_bf16_flops_per_chip=197 * 10**12,
                peak_fp8_flops_per_chip=None,  # v5e publishes bf16 and int8 (393 TOPS), no fp8 rate
                tensorcores_per_chip=1,
                jax_devices_per_chip=1,
                mxu_columns=128,
                host_vcpus=MappingProxyType({1: 24, 4: 112, 8: 224}),
                host_memory_gb=MappingProxyType({1: 48, 4: 192, 8: 384}),
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
                quotas=TpuQuotas(
                    TpuQuota("TPU v5 Lite PodSlice chips", "TPU_LITE_PODSLICE_V5", None),
                    TpuQuota("Preemptible TPU v5 Lite Podslice chips", "PREEMPTIBLE_TPU_LITE_PODSLICE_V5", None),
                ),
                # GKE's single-host v5e accelerator, with quota of its own; this catalog builds v5e from
                # podslice machine types only (SRC_QUOTA_V5E_DEVICE).
                unbuilt_accelerators=(
                    UnbuiltAccelerator(
                        "tpu-v5-lite-device",
                        "ct5l-hightpu",
                        TpuQuotas(
                            TpuQuota("TPU v5 Lite Device chips", "TPU_LITE_DEVICE_V5", None),
                            TpuQuota("Preemptible TPU v5 Lite Device chips", "PREEMPTIBLE_TPU_LITE_DEVICE_V5", None),
                        ),
                    ),
                ),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": SRC_TPU_V5E,
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; {SRC_GKE_ABOUT}",
                        "machine_prefix": f"{SRC_TPU_V5E}; {SRC_XPK}",
                        "hbm_bytes_per_chip": SRC_TPU_V5E,
                        "hbm_bandwidth_per_chip": SRC_TPU_V5E,
                        "ici_bandwidth_per_chip": SRC_TPU_V5E,
                        "dcn_bandwidth_per_chip": SRC_TPU_V5E,
                        "peak_bf16_flops_per_chip": SRC_TPU_V5E,
                        "peak_fp8_flops_per_chip": SRC_TPU_V5E,
                        "tensorcores_per_chip": SRC_TPU_V5E,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "mxu_columns": SRC_JAX_TPU_INFO,
                        "host_vcpus": SRC_TPU_V5E,
                        "host_memory_gb": f"{SRC_TPU_V5E} (VM types table)",
                        "min_gke_version": "project reference notes (GKE availability table not readable from a copy)",
                        "shapes": f"{SRC_TPU_V5E}; {SRC_XPK}; {SRC_GKE_ABOUT}",
                        "zones": f"{SRC_TPU_ZONES}; {PRICE_SOURCE} (priced zones)",
                        "multi_host_placement": SRC_PLACEMENT_COMPACT,
                        "prices": PRICE_SOURCE,
                        "quotas": f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_V5E_DEVICE}",
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
                ici_bandwidth_per_chip=1200 * 10**9,  # bidirectional; a copy's older table: "4800 Gbps"
                dcn_bandwidth_per_chip=50 * 10**9 // 8,  # "Data center network (DCN) bandwidth per chip (Gbps): 50"
                peak_bf16_flops_per_chip=459 * 10**12,
                peak_fp8_flops_per_chip=459 * 10**12,
                tensorcores_per_chip=2,
                jax_devices_per_chip=1,
                mxu_columns=128,
                host_vcpus=MappingProxyType({4: 208}),
                host_memory_gb=MappingProxyType({4: 448}),
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
                quotas=TpuQuotas(
                    TpuQuota("TPU v5p chips", None, "TPU-V5P-per-project-region"),
                    TpuQuota("Preemptible TPU v5p chips", None, "PREEMPTIBLE-TPU-V5P-per-project-region"),
                ),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": f"{SRC_TPU_V5P} ('v5p-32' = 32 TensorCores, 16 chips)",
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; GoogleCloudPlatform/cluster-toolkit modules/internal/tpu-definition",
                        "machine_prefix": f"{SRC_XPK}; {SRC_CE_TPU_MACHINES}",
                        "hbm_bytes_per_chip": SRC_TPU_V5P,
                        "hbm_bandwidth_per_chip": f"{SRC_TPU_V5P} (2765 GBps; newer copy: 2575 GiBps, the same)",
                        "ici_bandwidth_per_chip": SRC_TPU_V5P,
                        "dcn_bandwidth_per_chip": SRC_TPU_V5P,
                        "peak_bf16_flops_per_chip": f"{SRC_TPU_V5P}; {SRC_TPU_7X}",
                        "peak_fp8_flops_per_chip": f"{SRC_TPU_V5P}; {SRC_TPU_7X}",
                        "tensorcores_per_chip": SRC_TPU_V5P,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "mxu_columns": SRC_JAX_TPU_INFO,
                        "host_vcpus": f"{SRC_TPU_V5P}; {SRC_CE_TPU_MACHINES}",
                        "host_memory_gb": SRC_CE_TPU_MACHINES,
                        "min_gke_version": SRC_XPK_V5P_GKE,
                        "shapes": f"{SRC_TPU_V5P} (2x2x1 ... 4x8x8 of its table); {SRC_XPK} (default_topologies, adds 2x2x4)",
                        "zones": f"{SRC_TPU_ZONES} (us-central1-a, us-east5-a); {PRICE_SOURCE} (europe-west4-b)",
                        "multi_host_placement": SRC_PLACEMENT_COMPACT,
                        "prices": PRICE_SOURCE,
                        "quotas": f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_IDS}",
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
                ici_bandwidth_per_chip=800 * 10**9,
                dcn_bandwidth_per_chip=100 * 10**9 // 8,  # "4 x 200 Gbps NIC" per 8-chip host
                peak_bf16_flops_per_chip=918 * 10**12,
                peak_fp8_flops_per_chip=918 * 10**12,
                tensorcores_per_chip=1,
                jax_devices_per_chip=1,
                mxu_columns=256,
                host_vcpus=MappingProxyType({1: 44, 4: 180, 8: 360}),
                host_memory_gb=MappingProxyType({1: 176, 4: 720, 8: 1440}),
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
                quotas=TpuQuotas(
                    TpuQuota(
                        "TPUs per TPU family",
                        None,
                        "TPUS-PER-TPU-FAMILY-per-project-region",
                        MappingProxyType({"tpu_family": "CT6E"}),
                    ),
                    TpuQuota("Preemptible TPU slices v6e", None, "PREEMPTIBLE-TPU-V6E-per-project-region"),
                ),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": SRC_TPU_V6E,
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; {SRC_GKE_ABOUT}",
                        "machine_prefix": f"{SRC_TPU_V6E}; {SRC_CE_TPU_MACHINES}",
                        "hbm_bytes_per_chip": SRC_TPU_V6E,
                        "hbm_bandwidth_per_chip": SRC_TPU_V6E,
                        "ici_bandwidth_per_chip": SRC_TPU_V6E,
                        "dcn_bandwidth_per_chip": SRC_TPU_V6E,
                        "peak_bf16_flops_per_chip": SRC_TPU_V6E,
                        "peak_fp8_flops_per_chip": SRC_TPU_7X,
                        "tensorcores_per_chip": SRC_TPU_V6E,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "mxu_columns": SRC_JAX_TPU_INFO,
                        "host_vcpus": SRC_CE_TPU_MACHINES,
                        "host_memory_gb": SRC_CE_TPU_MACHINES,
                        "min_gke_version": "docs.ray.io gcp-gke-tpu-cluster quoting GKE ('v6e ... 1.31.2-gke.1115000 or later')",
                        "shapes": f"{SRC_TPU_V6E}; {SRC_XPK}",
                        "zones": f"{SRC_TPU_ZONES}; {PRICE_SOURCE} (priced zones)",
                        "multi_host_placement": SRC_PLACEMENT_COMPACT,
                        "prices": PRICE_SOURCE,
                        "quotas": f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_IDS}",
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
                ici_bandwidth_per_chip=1200 * 10**9,
                dcn_bandwidth_per_chip=100 * 10**9 // 8,  # ASSUMED (SRC_TPU7X_DCN)
                peak_bf16_flops_per_chip=2307 * 10**12,
                peak_fp8_flops_per_chip=4614 * 10**12,
                tensorcores_per_chip=2,
                jax_devices_per_chip=2,
                mxu_columns=256,
                host_vcpus=MappingProxyType({4: 224}),
                host_memory_gb=MappingProxyType({4: 1030}),  # 960 GiB, read as GB and rounded down
                min_gke_version="1.34.0-gke.2201000",
                shapes=_four_chip_vm_shapes(_CUBES_3D),
                # The AI zone us-central1-ai1a is documented too; it waits for components.catalog.gce to
                # know it (every TPU zone must be a Compute Engine zone there).
                zones=("us-central1-c",),
                multi_host_placement="WORKLOAD_POLICY",
                prices=MappingProxyType({"us-central1": None}),
                quotas=TpuQuotas(
                    TpuQuota(
                        "TPUs per TPU family",
                        None,
                        "TPUS-PER-TPU-FAMILY-per-project-region",
                        MappingProxyType({"tpu_family": "tpu7x"}),
                    ),
                    TpuQuota("Preemptible TPU slices tpu7x", None, None),  # no quota id found (SRC_QUOTA_IDS)
                ),
                sources=MappingProxyType(
                    {
                        "cloud_tpu_prefix": f"{SRC_XPK} (tpu7x-<TensorCores>); {SRC_TPU_7X}",
                        "pathways_name": SRC_XPK,
                        "gke_accelerator": f"{SRC_XPK}; {SRC_GKE_IRONWOOD}",
                        "machine_prefix": f"{SRC_GKE_IRONWOOD}; {SRC_CE_TPU_MACHINES}",
                        "hbm_bytes_per_chip": SRC_TPU_7X,
                        "hbm_bandwidth_per_chip": SRC_CE_TPU_MACHINES,
                        "ici_bandwidth_per_chip": SRC_TPU_7X,
                        "dcn_bandwidth_per_chip": SRC_TPU7X_DCN,
                        "peak_bf16_flops_per_chip": SRC_TPU_7X,
                        "peak_fp8_flops_per_chip": SRC_TPU_7X,
                        "tensorcores_per_chip": SRC_TPU_7X,
                        "jax_devices_per_chip": SRC_JAX_CHIPS,
                        "mxu_columns": SRC_JAX_TPU_INFO,
                        "host_vcpus": SRC_CE_TPU_MACHINES,
                        "host_memory_gb": SRC_CE_TPU_MACHINES,
                        "min_gke_version": f"{SRC_GKE_IRONWOOD} (Standard; Autopilot 1.34.1-gke.3084001)",
                        "shapes": f"{SRC_XPK} (tpu7x-standard-4t default_topologies); {SRC_CE_TPU_MACHINES} (2x2x2)",
                        "zones": SRC_TPU_ZONES,
                        "multi_host_placement": SRC_PLACEMENT_WORKLOAD_POLICY,
                        "prices": SRC_PRICES_UNKNOWN_TPU7X,
                        "quotas": f"{SRC_QUOTA_GKE}; {SRC_QUOTA_REGIONS_GET}; {SRC_QUOTA_IDS}",
                    }
                ),
                requires_explicit_gke_version=True,  # SRC_EXPLICIT_GKE_VERSION
            ),
        )
    }
)
