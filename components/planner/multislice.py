"""Training across several slices: the hybrid mesh MaxText builds from ICI axes within a slice and DCN
axes across slices, derived from one slice's plan and verified.

MaxText (``src/maxtext/configs/base.yml``: ``dcn_data_parallelism``, ``dcn_fsdp_parallelism``,
``ici_*_parallelism``; ``maxtext_utils.create_device_mesh`` -> ``mesh_utils.create_hybrid_device_mesh``)
multiplies each axis's DCN and ICI degrees: the mesh axis ``fsdp`` has ``dcn_fsdp x ici_fsdp`` devices,
``data`` has ``dcn_data x ici_data``. Within a slice the planner's per-slice mesh (``fsdp``, ``tensor``;
``components/planner/engines.py``, training profile) is the ICI part; across slices only ``data`` and
``fsdp`` are allowed on DCN, because tensor parallelism over the data-centre network is orders of magnitude
slower than over ICI (MaxText's and xpk's multislice recipes put ``dcn_data_parallelism`` = slices, e.g.
tpu-recipes ``training/*/*-MaxText`` with ``--num_slices``). Rules:

* DCN degrees multiply to the slice count (one slice: every DCN degree is 1);
* the global batch splits over ``data x fsdp`` (DCN and ICI): each slice trains on
  ``global / dcn_data`` sequences and each chip of the batch axes on an equal share of them;
* ICI x DCN devices = chips per slice x slices (checked; ``tests/test_maxtext_jobset.py`` also checks
  the layout against XLA on a fake CPU mesh of that many devices).

The per-chip memory of the slice's plan stays valid: DCN ``data`` replicates a slice's state, DCN
``fsdp`` splits it further (the slice's plan is then an upper bound, held conservatively).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..catalog.models import ModelArch
from .engines import profile
from .layout import lay_out
from .params import weight_arrays
from .plan_errors import PlanError
from .results import Plan

DCN_AXES: tuple[str, ...] = ("data", "fsdp")
"""Mesh axes MaxText may put across slices here (``dcn_data_parallelism``, ``dcn_fsdp_parallelism``)."""
HYBRID_AXES: tuple[str, ...] = ("data", "fsdp", "tensor")
"""The hybrid mesh's axes, outermost first (MaxText's order among the axes used here)."""
BATCH_AXES: tuple[str, ...] = ("data", "fsdp")
"""Axes the global batch splits over (MaxText's ``activation_batch`` rule: data, fsdp)."""


@dataclass(frozen=True)
class MultisliceMesh:
    """The hybrid mesh of a multislice run: the slice's ICI axes and the DCN axes across slices."""

    slices: int
    chips_per_slice: int
    ici: Mapping[str, int]
    """Per slice, in chips (the slice plan's mesh: ``fsdp``, ``tensor``)."""
    dcn: Mapping[str, int]
    """Across slices (``data``, ``fsdp``)."""
    global_batch: int
    """Sequences per step over every slice."""

    @property
    def devices(self) -> int:
        return self.slices * self.chips_per_slice

    @property
    def hybrid(self) -> dict[str, int]:
        """Each mesh axis's size: its DCN degree x its ICI degree (MaxText's hybrid device mesh)."""
        return {axis: self.dcn.get(axis, 1) * self.ici.get(axis, 1) for axis in HYBRID_AXES}

    @property
    def per_device_batch(self) -> float:
        """MaxText's ``per_device_batch_size``: the global batch over every chip."""
        return self.global_batch / self.devices

    def flags(self) -> dict[str, int]:
        """MaxText's DCN flags (the ICI flags come from the slice's plan); ``num_slices`` is set by the
        renderer, which knows the slice count too."""
        return {f"dcn_{axis}_parallelism": self.dcn.get(axis, 1) for axis in DCN_AXES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "slices": self.slices,
            "devices": self.devices,
            "ici": dict(self.ici),
            "dcn": dict(self.dcn),
            "hybrid": self.hybrid,
            "global_batch": self.global_batch,
            "per_device_batch_size": self.per_device_batch,
        }


def dcn_axes(slices: int, given: Mapping[str, int] | None) -> dict[str, int]:
    """DCN degrees: ``given`` verified, or all slices on ``data`` (MaxText's multislice default)."""
    if given is None:
        return {"data": slices, "fsdp": 1}
    unknown = sorted(set(given) - set(DCN_AXES))
    if unknown:
        raise PlanError(
            f"DCN axes {unknown} are not allowed across slices; use {', '.join(DCN_AXES)} (tensor parallelism "
            "stays within a slice's ICI)",
            "parallelism",
        )
    axes = {axis: int(given.get(axis, 1)) for axis in DCN_AXES}
    if any(size < 1 for size in axes.values()):
        raise PlanError(f"DCN degrees {axes} must be >= 1", "parallelism")
    if slices == 1 and math.prod(axes.values()) > 1:
        raise PlanError(
            f"DCN parallelism {axes} needs several slices, and the stack has one: DCN axes split work across slices "
            "over the data-centre network",
            "parallelism",
        )
    if math.prod(axes.values()) != slices:
        raise PlanError(
            f"DCN degrees {axes} multiply to {math.prod(axes.values())}, not the {slices} slices; choose degrees "
            f"whose product is {slices}",
            "parallelism",
        )
    return axes


def derive(slice_plan: Plan, slices: int, dcn: Mapping[str, int] | None, global_batch: int) -> MultisliceMesh:
    """The hybrid mesh of ``slices`` copies of ``slice_plan``'s slice; PlanError on a DCN mesh that does not
    cover the slices or a batch that does not split."""
    if slice_plan.mode != "train":
        raise PlanError(f"a multislice mesh is planned for training; this plan is {slice_plan.mode}", "engine")
    axes = dcn_axes(slices, dcn)
    mesh = MultisliceMesh(
        slices=slices,
        chips_per_slice=slice_plan.slice.chips,
        ici=dict(slice_plan.sharding.mesh_axes),
        dcn=axes,
        global_batch=global_batch,
    )
    if math.prod(mesh.hybrid.values()) != mesh.devices:
        raise PlanError(
            f"the hybrid mesh {mesh.hybrid} has {math.prod(mesh.hybrid.values())} devices, not {mesh.devices} "
            f"({slices} slices x {mesh.chips_per_slice} chips)",
            "parallelism",
        )
    split = math.prod(mesh.hybrid[a] for a in BATCH_AXES)
    if global_batch < 1 or global_batch % split:
        raise PlanError(
            f"global batch {global_batch} does not split over data x fsdp = {split} ({axes['data']} x "
            f"{mesh.hybrid['fsdp']} across {slices} slices); use a multiple of {split}",
            "batch",
        )
    return mesh


def per_device_bytes(arch: ModelArch, mesh: MultisliceMesh, param_dtype: str = "float32") -> int:
    """Parameter bytes per device on the hybrid mesh (the training profile's rules with ``fsdp`` as its
    hybrid size; ``data`` replicates): what :func:`xla_per_device_bytes` measures on real devices."""
    rules = profile("maxtext", "train").rules
    arrays = weight_arrays(arch, param_dtype, False, arch.kv_heads)
    laid = lay_out(arch, rules, mesh.hybrid, arrays, kv_heads_replicated=False)
    return sum(a.bytes_per_chip for a in laid.values())


def xla_per_device_bytes(arch: ModelArch, mesh: MultisliceMesh, param_dtype: str = "float32") -> dict[str, Any]:
    """Compile the parameters' initialisation onto a real ``jax.sharding.Mesh`` of ``mesh.devices`` devices
    (fake CPU devices under ``XLA_FLAGS=--xla_force_host_platform_device_count=N``) with the hybrid shape, and
    return XLA's output bytes per device and the shard shape of a ``[global_batch, 1]`` batch array. Nothing is
    allocated: the program is lowered and compiled only."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()
    if len(devices) != mesh.devices:
        raise PlanError(f"{len(devices)} JAX devices, the mesh needs {mesh.devices}", "slice")
    shape = tuple(mesh.hybrid[a] for a in HYBRID_AXES)
    real = Mesh(np.array(devices).reshape(shape), HYBRID_AXES)
    rules = profile("maxtext", "train").rules
    arrays = weight_arrays(arch, param_dtype, False, arch.kv_heads)
    laid = lay_out(arch, rules, mesh.hybrid, arrays, kv_heads_replicated=False)
    shardings = {name: NamedSharding(real, PartitionSpec(*laid[name].spec)) for name in arrays}  # type: ignore[no-untyped-call]

    def init() -> dict[str, Any]:
        return {name: jax.numpy.zeros(sds.shape, sds.dtype) for name, (sds, _, _) in arrays.items()}

    compiled = jax.jit(init, out_shardings=shardings).lower().compile()
    analysis = compiled.memory_analysis()
    batch = NamedSharding(real, PartitionSpec(BATCH_AXES, None))  # type: ignore[no-untyped-call]
    return {
        "devices": len(devices),
        "mesh_shape": dict(real.shape),
        "output_bytes_per_device": int(analysis.output_size_in_bytes) if analysis is not None else None,
        "batch_shard": list(batch.shard_shape((mesh.global_batch, 1))),
    }
