"""What the planner answers: per-array layouts, per-chip memory, the mesh and flags, the plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..catalog.tpu import TpuSlice

GB = 10**9

SpecEntry = str | tuple[str, ...] | None
"""One dimension of a partition spec: unsplit, one mesh axis, or several."""


@dataclass(frozen=True)
class ArrayPlan:
    """One array as laid out on the mesh (not hashable: plain data for reports)."""

    kind: str
    """weight, scale, kv_cache or kv_scale."""
    shape: tuple[int, ...]
    dtype: str
    spec: tuple[SpecEntry, ...]
    shard_shape: tuple[int, ...]
    """The shard one JAX device holds (a tpu7x chip holds two)."""
    bytes_per_chip: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "spec": [list(e) if isinstance(e, tuple) else e for e in self.spec],
            "shard_shape": list(self.shard_shape),
            "bytes_per_chip": self.bytes_per_chip,
        }


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per chip."""

    weights: int
    kv_cache: int
    optimizer: int
    """Gradients + Adam moments (training only)."""
    activations: int
    """Training estimate; serving activations live in ``reserve``."""
    reserve: int
    hbm: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.optimizer + self.activations + self.reserve

    @property
    def margin(self) -> int:
        return self.hbm - self.total

    @property
    def margin_fraction(self) -> float:
        return self.margin / self.hbm

    @property
    def fits(self) -> bool:
        return self.margin >= 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "weights_bytes": self.weights,
            "kv_cache_bytes": self.kv_cache,
            "optimizer_bytes": self.optimizer,
            "activation_bytes": self.activations,
            "reserve_bytes": self.reserve,
            "total_bytes": self.total,
            "hbm_bytes": self.hbm,
            "margin_bytes": self.margin,
            "margin_percent": round(100 * self.margin_fraction, 2),
            "fits": self.fits,
        }

    def summary(self) -> str:
        parts = [f"weights {self.weights / GB:.2f}"]
        if self.kv_cache:
            parts.append(f"KV cache {self.kv_cache / GB:.2f}")
        if self.optimizer:
            parts.append(f"grads+Adam {self.optimizer / GB:.2f}")
        if self.activations:
            parts.append(f"activations {self.activations / GB:.2f}")
        parts.append(f"reserve {self.reserve / GB:.2f}")
        return " + ".join(parts) + " GB"


@dataclass(frozen=True)
class ShardingPlan:
    engine: str
    mesh_axes: Mapping[str, int]
    """Axis name -> size, in mesh order."""
    flags: Mapping[str, Any]
    """Engine flags that reproduce the mesh, e.g. {"tensor_parallel_size": 8}."""
    kv_heads: int
    """KV heads as laid out: the model's, or ``tensor`` when replicated."""
    kv_heads_replicated: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "mesh_axes": dict(self.mesh_axes),
            "flags": {k: list(v) if isinstance(v, tuple) else v for k, v in self.flags.items()},
            "kv_heads": self.kv_heads,
            "kv_heads_replicated": self.kv_heads_replicated,
        }


@dataclass(frozen=True)
class Plan:
    model: str
    mode: str
    slice: TpuSlice
    sharding: ShardingPlan
    memory: MemoryPlan
    global_batch: float
    max_target_length: int
    weight_dtype: str
    kv_dtype: str | None
    region: str | None = None
    capacity: str = "onDemand"
    """The capacity type (a ``tpu.capacity[].type``) the slice is priced at: the stack's preferred tier."""
    price_per_hour: float | None = None
    """chips x per-chip price of ``capacity`` in ``region``; None where uncatalogued."""
    kv_capacity_sequences: int | None = None
    """Serving: full-length sequences the HBM left after weights and reserve could cache."""
    arrays: Mapping[str, ArrayPlan] = field(default_factory=dict, repr=False)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def spot(self) -> bool:
        return self.capacity == "spot"

    def to_dict(self, include_arrays: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "mode": self.mode,
            "slice": {
                "key": self.slice.key,
                "generation": self.slice.generation.name,
                "topology": self.slice.topology,
                "machine_type": self.slice.machine_type,
                "chips": self.slice.chips,
                "hosts": self.slice.hosts,
            },
            "region": self.region,
            "spot": self.spot,
            "capacity_type": self.capacity,
            "price_per_hour": self.price_per_hour,
            "global_batch": self.global_batch,
            "max_target_length": self.max_target_length,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "kv_capacity_sequences": self.kv_capacity_sequences,
            "sharding": self.sharding.to_dict(),
            "memory": self.memory.to_dict(),
        }
        if include_arrays:
            out["arrays"] = {k: v.to_dict() for k, v in self.arrays.items()}
        return out
