"""A TPU catalog for tests whose assertions depend on which generations a zone or region holds.

The real catalog (``components/catalog/tpu_generations.py``) grows: a generation documented in one more
zone changes what the planner may choose there, so a test that reads the real zones breaks for a reason
that is not its own. Such a test installs this catalog instead (:func:`install`): the real rows' hardware
facts and prices, with the zones stated here, and nothing else. A row added to the real catalog does not
enter it; ``tests/test_generation_facts.py`` adds a scratch generation to prove that.

Every reader that looks generations up at call time (``tpu.GENERATIONS``, ``all_slices``, the config's
zone rules, the planner, pre-flight) sees the installed catalog. Module-level snapshots (field
descriptions in ``components/config/workload.py``, the review tables in ``components/tools/steps.py``)
keep the real one, which no test here asserts through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

import pytest

from components.catalog import tpu as tpu_catalog

ZONES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        # The real catalog's zones when these tests were written (2026-11). What the tests rely on:
        # us-east5-a holds v5e, v5p and v6e; us-east5-b v5e and v6e; us-central1-b v6e alone;
        # us-central1-c tpu7x alone; us-west4 v5e alone; us-south1 v5e and v6e; us-central1 all four.
        "v5e": (
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
        "v5p": ("us-central1-a", "us-east5-a", "europe-west4-b"),
        "v6e": (
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
        "tpu7x": ("us-central1-c",),
    }
)
"""The zones of each generation in the test catalog (the real rows' other facts are kept)."""


def build(
    *extra: tpu_catalog.TpuGeneration, zones: Mapping[str, tuple[str, ...]] = ZONES
) -> Mapping[str, tpu_catalog.TpuGeneration]:
    """The test catalog: each generation of ``zones`` as its real row documented in those zones only
    (flex-start zones limited to them), plus the ``extra`` rows as given."""
    real = tpu_catalog.GENERATIONS
    rows = {
        name: dataclasses.replace(
            real[name], zones=where, flex_start_zones=tuple(z for z in real[name].flex_start_zones if z in where)
        )
        for name, where in zones.items()
    }
    return MappingProxyType(rows | {g.name: g for g in extra})


def install(monkeypatch: pytest.MonkeyPatch, *extra: tpu_catalog.TpuGeneration) -> Mapping[str, tpu_catalog.TpuGeneration]:
    """Make the test catalog (with ``extra`` rows) the catalog for the rest of the test."""
    catalog = build(*extra)
    monkeypatch.setattr(tpu_catalog, "GENERATIONS", catalog)
    return catalog
