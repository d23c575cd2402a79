"""Meshes: device-free ``AbstractMesh`` building, explicit axes resolved against a slice, and the
default (derived) meshes an engine profile tries in order of preference.

A mesh is an ordered ``{axis name: size}``; the order is the engine profile's axis order. Sizes
must multiply to the slice's chips exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..catalog.models import ModelArch
from ..catalog.tpu import TpuSlice
from .plan_errors import PlanError

if TYPE_CHECKING:
    import jax

CandidateMeshes = Callable[[tuple[str, ...], ModelArch, TpuSlice], list[dict[str, int]]]
"""Default meshes for ``(axis names, model, slice)``, most preferred first; the first that lays
the model out without error wins."""


def build_mesh(axes: Mapping[str, int]) -> jax.sharding.AbstractMesh:
    """A device-free mesh with the given axis sizes (insertion order = mesh order)."""
    from jax.sharding import AbstractMesh

    return AbstractMesh(tuple(axes.values()), tuple(axes.keys()))


def describe(axes: Mapping[str, int]) -> str:
    return " x ".join(f"{k}={v}" for k, v in axes.items())


def resolve_explicit(names: tuple[str, ...], given: Mapping[str, int], tpu: TpuSlice) -> dict[str, int]:
    """Pinned degrees by axis name: missing axes are 1, one axis may be -1 (the remaining chips)."""
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise PlanError(f"unknown mesh axes {unknown}; this engine's axes are {list(names)}", "parallelism")
    axes = {n: int(given.get(n, 1)) for n in names}
    fill = [n for n, v in axes.items() if v == -1]
    if len(fill) > 1 or any(v == 0 or v < -1 for v in axes.values()):
        raise PlanError(f"mesh {describe(axes)}: sizes must be >= 1, with at most one -1", "parallelism")
    if fill:
        rest = math.prod(v for n, v in axes.items() if n != fill[0])
        if tpu.chips % rest:
            raise PlanError(
                f"{fill[0]}=-1 cannot fill: the other axes multiply to {rest}, which does not divide "
                f"the {tpu.chips} chips of {tpu.key}",
                "parallelism",
            )
        axes[fill[0]] = tpu.chips // rest
    return axes


def check_mesh(axes: Mapping[str, int], tpu: TpuSlice) -> None:
    devices = math.prod(axes.values())
    if devices != tpu.chips:
        raise PlanError(
            f"mesh {describe(axes)} has {devices} devices but slice {tpu.key} has {tpu.chips} chips; "
            f"choose degrees whose product is {tpu.chips}",
            "parallelism",
        )


def _divisors_desc(n: int) -> list[int]:
    return [k for k in range(n, 0, -1) if n % k == 0]


# ---- default meshes (an engine profile names one) ----------------------------------------------


def last_axis_takes_all(names: tuple[str, ...], arch: ModelArch, tpu: TpuSlice) -> list[dict[str, int]]:
    """Every chip on the last axis (vLLM: ``tensor``), the others 1."""
    return [{**{n: 1 for n in names[:-1]}, names[-1]: tpu.chips}]


def devices_per_chip(tpu: TpuSlice) -> int:
    """JAX devices per chip (the catalog's ``jax_devices_per_chip``): what vLLM's tensor-parallel size
    counts. 1 on v5e/v6e and on v5p (two TensorCores as one megacore device), 2 on tpu7x (two
    chiplets), where the tensor-parallel size is twice the chips. The mesh itself stays in chips."""
    return tpu.generation.jax_devices_per_chip


def stages_per_host(names: tuple[str, ...], arch: ModelArch, tpu: TpuSlice) -> list[dict[str, int]]:
    """``(pipeline, tensor)``: single-host, every chip on ``tensor`` (as :func:`last_axis_takes_all`);
    multi-host, one pipeline stage per host and its chips on ``tensor`` (vLLM on Ray: the layout
    tpu-inference's multi-host tests pass)."""
    pipeline, tensor = names
    if not tpu.multi_host:
        return last_axis_takes_all(names, arch, tpu)
    return [{pipeline: tpu.hosts, tensor: tpu.chips_per_host}]


def servable_mesh(names: tuple[str, ...], arch: ModelArch, tpu: TpuSlice) -> list[dict[str, int]]:
    """The servable's fixed mesh (Saxml ``ICI_MESH_SHAPE``) where the model has one, else every chip
    on the last axis."""
    if arch.saxml_mesh is not None:
        return [dict(zip(names, arch.saxml_mesh, strict=True))]
    return last_axis_takes_all(names, arch, tpu)


def tensor_then_rest(names: tuple[str, ...], arch: ModelArch, tpu: TpuSlice) -> list[dict[str, int]]:
    """``(fsdp, autoregressive, tensor)``: the largest tensor degree the heads allow, the rest on the
    middle axis; fsdp only when heads cannot absorb the slice (a small model on a big slice)."""
    outer, middle, tensor = names
    chips = tpu.chips
    return [
        {outer: f, middle: chips // f // t, tensor: t}
        for f in reversed(_divisors_desc(chips))
        for t in _divisors_desc(chips // f)
    ]


def torus_2d(names: tuple[str, ...], arch: ModelArch, tpu: TpuSlice) -> list[dict[str, int]]:
    """``(fsdp, tensor)``: balanced 2D mesh along the physical torus: tensor on the slice's short side
    (4x4 -> 4x4, the training seed's fsdp=4 tensor=4), fsdp on the rest; a smaller tensor degree if
    the heads do not divide."""
    fsdp, tensor = names
    chips = tpu.chips
    short = min(int(x) for x in tpu.topology.split("x"))
    return [{fsdp: chips // t, tensor: t} for t in _divisors_desc(chips) if t <= short]
