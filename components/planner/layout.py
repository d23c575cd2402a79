"""Laying abstract arrays out on a mesh: each dimension's logical axis goes to the mesh axes the
engine's rules name, and the per-chip shard shape and bytes follow from ``NamedSharding``.

A dimension that its mesh axes do not divide is an error (no ceil division, no padding): the plan
must be one that ``jax.device_put`` would accept as is. ``tests/test_planner.py`` checks the
per-chip figures against real shards on 16 fake CPU devices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..catalog.models import ModelArch
from .mesh import build_mesh
from .params import AbstractArray
from .plan_errors import PlanError
from .results import ArrayPlan, SpecEntry

Rules = Mapping[str, tuple[str, ...]]
"""Logical axis -> mesh axes (an engine profile's ``rules``)."""


def _spec(logical: tuple[str | None, ...], rules: Rules, axes: Mapping[str, int]) -> tuple[SpecEntry, ...]:
    out: list[SpecEntry] = []
    for name in logical:
        mesh = tuple(a for a in rules.get(name or "", ()) if axes.get(a, 1) > 1)
        out.append(None if not mesh else mesh[0] if len(mesh) == 1 else mesh)
    return tuple(out)


def _axis_label(entry: SpecEntry) -> tuple[str, ...]:
    return () if entry is None else (entry,) if isinstance(entry, str) else entry


def lay_out(
    arch: ModelArch,
    rules: Rules,
    axes: Mapping[str, int],
    arrays: Mapping[str, AbstractArray],
    *,
    kv_heads_replicated: bool,
    devices_per_chip: int = 1,
) -> dict[str, ArrayPlan]:
    """Every array's partition spec, shard shape and bytes per chip; PlanError if a split is uneven.

    ``axes`` are in JAX devices (``EngineProfile.device_axes``); a chip of ``devices_per_chip``
    devices holds that many shards, so an array replicated over the device axis (a norm scale) is
    held once per device, twice per tpu7x chip (``tests/test_planner.py`` checks it against XLA)."""
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = build_mesh(axes)
    out: dict[str, ArrayPlan] = {}
    for name, (sds, logical, kind) in arrays.items():
        spec = _spec(logical, rules, axes)
        for dim, entry, logical_name in zip(sds.shape, spec, logical, strict=True):
            mesh_axes = _axis_label(entry)
            degree = math.prod(axes[a] for a in mesh_axes)
            if dim % degree == 0:
                continue
            label = " x ".join(mesh_axes)
            if logical_name in ("kv_heads", "cache_kv_heads"):
                fix = f"use a {label} degree dividing {arch.kv_heads}"
                if degree % arch.kv_heads == 0 and not kv_heads_replicated:
                    fix += " or replicate KV heads (replicate_kv_heads=True)"
                raise PlanError(
                    f"{label} parallelism {degree} does not divide kv_heads {arch.kv_heads} of {arch.name}; {fix}",
                    "parallelism",
                )
            what = "batch" if logical_name == "cache_batch" else logical_name
            raise PlanError(
                f"{label} parallelism {degree} does not divide {what} {dim} of {arch.name} "
                f"(array {name}); use a {label} degree dividing {dim}",
                "batch" if what == "batch" else "parallelism",
            )
        partition = PartitionSpec(*spec)  # type: ignore[no-untyped-call]
        shard = NamedSharding(mesh, partition).shard_shape(sds.shape)
        out[name] = ArrayPlan(
            kind=kind,
            shape=tuple(sds.shape),
            dtype=str(sds.dtype),
            spec=spec,
            shard_shape=tuple(shard),
            bytes_per_chip=math.prod(shard) * sds.dtype.itemsize * devices_per_chip,
        )
    return out


def kv_heads_for(arch: ModelArch, rules: Rules, axes: Mapping[str, int], replicate: bool) -> tuple[int, bool]:
    """(KV heads as laid out, replicated?): ``replicate`` lays them out as the kv_heads split degree
    when that is a multiple of the model's KV heads."""
    degree = math.prod(axes.get(a, 1) for a in rules.get("kv_heads", ()))
    if replicate and degree > arch.kv_heads and degree % arch.kv_heads == 0:
        return degree, True
    return arch.kv_heads, False


def bytes_per_chip(laid: Mapping[str, ArrayPlan], *kinds: str) -> int:
    """Bytes per chip of the laid-out arrays of ``kinds`` (all arrays when none is given)."""
    return sum(a.bytes_per_chip for a in laid.values() if not kinds or a.kind in kinds)
