"""Compute Engine facts the stack checks before apply: CPU machine types and zones. Pure data.

A CPU machine type or a zone that does not exist is accepted by ``pulumi preview`` and fails only
when GKE creates the node pool, minutes into ``pulumi up``. These tables let the config reject
such values at load time, with the allowed values in the message. Google adds machine types and
zones over time, so every check has an escape hatch (``allowUndocumentedMachineType``,
``allowUndocumentedZone``) for a value newer than the table.

Sources (as of ``AS_OF``):
* machine types: Compute Engine "Machine families resource and comparison guide", "General-purpose
  machine family" (E2, N1, N2, N2D, N4), "Compute-optimized machine family" (C2, C3, C4) and
  "Memory-optimized machine family" (M1, M2, M3), cross-checked against a ``gcloud compute
  machine-types list`` export (Cyclenerd/google-cloud-pricing-cost-calculator
  ``tools/machinetypes.csv``, commit 0026ae3a). Bare-metal shapes (``-metal``) are left out
  because GKE node pools cannot use them; deprecated/obsolete shapes are left out.
* zones: Compute Engine "Regions and zones" (the same export's ``tools/zones.csv``, commit
  29a09a60, plus the regions opened since: africa-south1, europe-north2, europe-west10,
  europe-west12, me-central1, me-central2, me-west1, northamerica-south1) and the AI zones GKE
  lists for TPUs (see ``components.catalog.tpu``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from types import MappingProxyType

AS_OF = "2025-12"

# family -> shape -> vCPU counts; a machine type is f"{family}-{shape}-{vcpus}".
MACHINE_SHAPES: Mapping[str, Mapping[str, tuple[int, ...]]] = MappingProxyType(
    {
        "e2": {
            "standard": (2, 4, 8, 16, 32),
            "highmem": (2, 4, 8, 16),
            "highcpu": (2, 4, 8, 16, 32),
        },
        "n1": {
            "standard": (1, 2, 4, 8, 16, 32, 64, 96),
            "highmem": (2, 4, 8, 16, 32, 64, 96),
            "highcpu": (2, 4, 8, 16, 32, 64, 96),
        },
        "n2": {
            "standard": (2, 4, 8, 16, 32, 48, 64, 80, 96, 128),
            "highmem": (2, 4, 8, 16, 32, 48, 64, 80, 96, 128),
            "highcpu": (2, 4, 8, 16, 32, 48, 64, 80, 96),
        },
        "n2d": {
            "standard": (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224),
            "highmem": (2, 4, 8, 16, 32, 48, 64, 80, 96),
            "highcpu": (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224),
        },
        "n4": {
            "standard": (2, 4, 8, 16, 32, 48, 64, 80),
            "highmem": (2, 4, 8, 16, 32, 48, 64, 80),
            "highcpu": (2, 4, 8, 16, 32, 48, 64, 80),
        },
        "c2": {"standard": (4, 8, 16, 30, 60)},
        "c3": {
            "standard": (4, 8, 22, 44, 88, 176),
            "highmem": (4, 8, 22, 44, 88, 176),
            "highcpu": (4, 8, 22, 44, 88, 176),
        },
        "c4": {
            "standard": (2, 4, 8, 16, 32, 48, 96, 192),
            "highmem": (2, 4, 8, 16, 32, 48, 96, 192),
            "highcpu": (2, 4, 8, 16, 32, 48, 96, 192),
        },
        "m1": {"ultramem": (40, 80, 160), "megamem": (96,)},
        "m2": {"ultramem": (208, 416), "megamem": (416,), "hypermem": (416,)},
        "m3": {"ultramem": (32, 64, 128), "megamem": (64, 128)},
    }
)
EXTRA_MACHINE_TYPES: tuple[str, ...] = (
    # Shared-core E2 and the local-SSD variants of C3 standard.
    "e2-micro",
    "e2-small",
    "e2-medium",
    *(f"c3-standard-{n}-lssd" for n in (4, 8, 22, 44, 88, 176)),
)


def _all_machine_types() -> frozenset[str]:
    names = {f"{fam}-{shape}-{n}" for fam, shapes in MACHINE_SHAPES.items() for shape, ns in shapes.items() for n in ns}
    return frozenset(names | set(EXTRA_MACHINE_TYPES))


MACHINE_TYPES: frozenset[str] = _all_machine_types()


def family_of(machine_type: str) -> str:
    """``e2-standard-4`` -> ``e2``."""
    return machine_type.split("-", 1)[0]


def describe_machine_types(machine_type: str) -> str:
    """The catalog's machine types in the family of ``machine_type`` (or the families), compactly."""
    family = family_of(machine_type)
    shapes = MACHINE_SHAPES.get(family)
    if shapes is None:
        return "families " + ", ".join(MACHINE_SHAPES) + " (components/catalog/gce.py)"
    parts = [f"{family}-{shape}-{{{','.join(map(str, ns))}}}" for shape, ns in shapes.items()]
    parts += [m for m in EXTRA_MACHINE_TYPES if family_of(m) == family and not m.endswith("-lssd")]
    return ", ".join(parts)


def close_machine_types(machine_type: str, n: int = 3) -> list[str]:
    return difflib.get_close_matches(machine_type, sorted(MACHINE_TYPES), n=n, cutoff=0.75)


# region -> zone suffixes.
_ZONE_SUFFIXES: Mapping[str, str] = {
    "africa-south1": "abc",
    "asia-east1": "abc",
    "asia-east2": "abc",
    "asia-northeast1": "abc",
    "asia-northeast2": "abc",
    "asia-northeast3": "abc",
    "asia-south1": "abc",
    "asia-south2": "abc",
    "asia-southeast1": "abc",
    "asia-southeast2": "abc",
    "australia-southeast1": "abc",
    "australia-southeast2": "abc",
    "europe-central2": "abc",
    "europe-north1": "abc",
    "europe-north2": "abc",
    "europe-southwest1": "abc",
    "europe-west1": "bcd",
    "europe-west2": "abc",
    "europe-west3": "abc",
    "europe-west4": "abc",
    "europe-west6": "abc",
    "europe-west8": "abc",
    "europe-west9": "abc",
    "europe-west10": "abc",
    "europe-west12": "abc",
    "me-central1": "abc",
    "me-central2": "abc",
    "me-west1": "abc",
    "northamerica-northeast1": "abc",
    "northamerica-northeast2": "abc",
    "northamerica-south1": "abc",
    "southamerica-east1": "abc",
    "southamerica-west1": "abc",
    "us-central1": "abcf",
    "us-east1": "bcd",
    "us-east4": "abc",
    "us-east5": "abc",
    "us-south1": "abc",
    "us-west1": "abc",
    "us-west2": "abc",
    "us-west3": "abc",
    "us-west4": "abc",
}
# AI zones GKE documents for TPUs (their names do not follow the region-letter pattern).
AI_ZONES: Mapping[str, tuple[str, ...]] = {"us-central1": ("us-central1-ai1",), "us-south1": ("us-south1-ai1b",)}

ZONES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {region: tuple(f"{region}-{s}" for s in suffixes) + AI_ZONES.get(region, ()) for region, suffixes in _ZONE_SUFFIXES.items()}
)
"""Zones per region."""
REGIONS: tuple[str, ...] = tuple(ZONES)

_REGION_SHAPE = re.compile(r"^[a-z]+-[a-z]+\d+$")


def is_zone(zone: str) -> bool:
    return any(zone in zones for zones in ZONES.values())


def zones_of(region: str) -> tuple[str, ...]:
    return ZONES.get(region, ())


def close_regions(region: str, n: int = 3) -> list[str]:
    return difflib.get_close_matches(region, REGIONS, n=n, cutoff=0.7)


def looks_like_region(region: str) -> bool:
    """Shaped like a region name (``us-east5``), whether or not the table lists it."""
    return bool(_REGION_SHAPE.match(region))
