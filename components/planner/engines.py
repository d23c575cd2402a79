"""Engine profiles: the one table of what each engine (and mode) means to the planner.

A profile gives the engine's mesh axes, the logical -> mesh sharding rules, the engine flags that
reproduce the mesh, the default reserve, the default meshes to try, whether KV heads are replicated
by default, and whether the engine runs on single-host slices only. Adding an engine is one entry in
:data:`_PROFILES` (per mode); nothing else in the planner names an engine.

Engines and their mesh axes
---------------------------
* ``maxtext`` serving (JetStream + MaxText): ``fsdp, autoregressive, tensor`` ->
  ``ici_fsdp_parallelism``, ``ici_autoregressive_parallelism``, ``ici_tensor_parallelism``.
* ``maxtext`` training: ``fsdp, tensor`` -> ``ici_fsdp_parallelism``, ``ici_tensor_parallelism``.
* ``vllm``: ``pipeline, tensor`` -> ``pipeline_parallel_size``, ``tensor_parallel_size``. On a
  single-host slice the mesh is ``tensor`` alone (every chip; ``pipeline`` is absent, so the plan and
  flags are those of a tensor-only engine). On a multi-host slice (a LeaderWorkerSet whose leader runs
  the Ray head and ``vllm serve``) the default is ``pipeline`` = hosts and ``tensor`` = the chips of
  one host (the flag counts JAX devices: x 2 on tpu7x): the one multi-host layout tpu-inference's support matrix
  (``docs/includes/parallelism.md``: multi-host PP passing; multi-host TP, DP and EP "untested")
  reports as passing. :func:`untested_multi_host` names what any other layout would rely on.
* ``saxml``: ``replica, data, mdl`` -> the servable's ``ICI_MESH_SHAPE`` ([1, 1, N]).

Sharding model (logical axis -> mesh axes; everything else replicated)
-----------------------------------------------------------------------
MaxText's rules put ``heads``, ``kv_heads``, ``mlp`` and ``vocab`` on (tensor, autoregressive) and
rely on GSPMD padding when that product does not divide a dimension (e.g. 8 KV heads on a 16-way
tensor x autoregressive split, which is what the 405B seed's flags mean). The planner does not pad:
it keeps ``kv_heads`` (and the cache's heads) on ``tensor`` alone and moves the autoregressive split
onto the K/V projections' ``embed`` rows and the KV cache's batch, so those still split over all
tensor x autoregressive chips (their int8 scales, whose ``embed`` rows are reduced away, split over
tensor only). Where MaxText pads instead, its real K/V projection shards are up to 2x the planner's
(about 1% of a Llama's weights); the cache split is the planner's choice.

KV heads when tensor > kv_heads: vLLM replicates KV heads (needs ``tensor % kv_heads == 0``; each
chip then holds one whole KV head of weights and cache, duplicated on ``tensor / kv_heads`` chips),
laid out here as ``tensor`` heads; so ``replicate_kv_heads`` defaults to True for vLLM. MaxText has
no replication switch, so it defaults to False there and the plan fails with a message suggesting a
smaller tensor degree or replication.

Reserve defaults
----------------
vLLM 0.10 because vLLM itself only claims ``gpu_memory_utilization=0.9`` of HBM; MaxText and Saxml
0.05, the largest round figure under which the known-good 405B int8 seed on v6e 4x4 (batch 96 x
2048 tokens) still plans as fitting (it leaves ~3.1 GB per chip after weights and cache). Training
0.05.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..catalog.tpu import TpuSlice
from .mesh import CandidateMeshes, servable_mesh, stages_per_host, tensor_then_rest, torus_2d
from .plan_errors import PlanError, one_of

Engine = str
"""An engine name: the ``engine`` of a profile in :data:`_PROFILES`."""
Mode = Literal["serve", "train"]


@dataclass(frozen=True)
class EngineProfile:
    engine: Engine
    mode: Mode
    label: str
    """The engine's name in messages."""
    axes: tuple[str, ...]
    """Mesh axis names, in mesh order."""
    rules: Mapping[str, tuple[str, ...]]
    """Logical axis -> mesh axes (logical axes not listed are replicated)."""
    flags: Mapping[str, str | tuple[str, ...]]
    """Engine flag -> the mesh axis whose size it takes, or a tuple of axes for a list-valued flag."""
    reserve_fraction: float
    """Default share of HBM kept free (see the module docstring)."""
    candidates: CandidateMeshes
    """Default meshes, most preferred first (used when the workload pins no parallelism)."""
    batch_axes: tuple[str, ...] = ()
    """Training: the mesh axes the global batch splits over."""
    replicate_kv_heads: bool = False
    """Default for ``ServingWorkload.replicate_kv_heads``."""
    single_host_only: bool = False
    """The engine as deployed runs on single-host slices only."""
    kv_page_tokens: Callable[[int], int] | None = None
    """For an engine that pages its KV cache by the tokens in use (vLLM: blocks from one pool)
    instead of reserving ``max_target_length`` per sequence, the tokens of one page given the
    maximum length; None: no paging. With paging the memory plan needs one max-length sequence to
    fit (vLLM's own start-up check), and the sequences it runs follow from the pages they hold
    (``perf.kv_room``)."""

    @property
    def paged_kv_cache(self) -> bool:
        return self.kv_page_tokens is not None
    host_axis: str | None = None
    """A mesh axis that exists only on multi-host slices (vLLM's ``pipeline``, one stage per host):
    dropped from a single-host mesh, and its flag with it, so single-host plans keep their shape."""

    device_axis: str | None = None
    """The innermost mesh axis, over which a chip's JAX devices extend where a chip is more than one
    device (tpu7x: two chiplets, ``jax_devices_per_chip`` 2). The planner's mesh is in chips; the
    engine sees devices, so its flags and the arrays' shards are those of :meth:`device_axes`."""

    def device_axes(self, axes: Mapping[str, int], devices_per_chip: int) -> dict[str, int]:
        """``axes`` in JAX devices: the device axis times ``devices_per_chip`` (the same on 1 device per chip)."""
        if devices_per_chip == 1 or self.device_axis is None:
            return dict(axes)
        return {**axes, self.device_axis: axes.get(self.device_axis, 1) * devices_per_chip}

    def flag_values(self, axes: Mapping[str, int], devices_per_chip: int = 1) -> dict[str, Any]:
        """The engine flags that reproduce ``axes``, e.g. ``{"tensor_parallel_size": 8}`` (a flag of
        an axis the mesh does not have, such as a single-host ``pipeline``, is left out). Flags count
        JAX devices (vLLM's tensor_parallel_size and MaxText's ici_tensor_parallelism are 2 x chips
        on tpu7x)."""
        devices = self.device_axes(axes, devices_per_chip)
        return {
            name: [devices[a] for a in source] if isinstance(source, tuple) else devices[source]
            for name, source in self.flags.items()
            if isinstance(source, tuple) or source in devices
        }

    def mesh_for(self, axes: Mapping[str, int], tpu: TpuSlice) -> dict[str, int]:
        """``axes`` without the host axis on a single-host slice (where it can only be 1)."""
        if self.host_axis is None or tpu.multi_host or axes.get(self.host_axis, 1) != 1:
            return dict(axes)
        return {k: v for k, v in axes.items() if k != self.host_axis}


def vllm_page_tokens(max_model_len: int) -> int:
    """vLLM's KV block (page) size on TPU when --block-size is unset (this project sets none): about
    max-model-len / 16 as a power of two within [16, 256], and 16 above 8192 tokens (vLLM
    ``PallasAttentionBackend.get_page_size``; some later tpu-inference builds pin 32, a difference of
    under one page per sequence in the sizing)."""
    if max_model_len > 8192:
        return 16
    return min(256, max(16, (1 << (max_model_len - 1).bit_length()) // 16))


_PROFILES: tuple[EngineProfile, ...] = (
    EngineProfile(
        engine="maxtext",
        mode="serve",
        label="MaxText",
        axes=("fsdp", "autoregressive", "tensor"),
        rules={
            "embed": ("fsdp",),
            "kv_embed": ("fsdp", "autoregressive"),
            "heads": ("tensor", "autoregressive"),
            "kv_heads": ("tensor",),
            "mlp": ("tensor", "autoregressive"),
            "vocab": ("tensor", "autoregressive"),
            "cache_batch": ("fsdp", "autoregressive"),
            "cache_kv_heads": ("tensor",),
        },
        flags={
            "ici_fsdp_parallelism": "fsdp",
            "ici_autoregressive_parallelism": "autoregressive",
            "ici_tensor_parallelism": "tensor",
        },
        reserve_fraction=0.05,
        candidates=tensor_then_rest,
        device_axis="tensor",
    ),
    EngineProfile(
        engine="maxtext",
        mode="train",
        label="MaxText",
        axes=("fsdp", "tensor"),
        rules={
            "embed": ("fsdp",),
            "kv_embed": ("fsdp",),
            "heads": ("tensor",),
            "kv_heads": ("tensor",),
            "mlp": ("tensor",),
            "vocab": ("tensor",),
        },
        flags={"ici_fsdp_parallelism": "fsdp", "ici_tensor_parallelism": "tensor"},
        reserve_fraction=0.05,
        candidates=torus_2d,
        batch_axes=("fsdp",),
        device_axis="tensor",
    ),
    EngineProfile(
        engine="vllm",
        mode="serve",
        label="vLLM",
        axes=("pipeline", "tensor"),
        rules={
            # Each pipeline stage holds its own decoder layers and their KV cache (vLLM's
            # get_pp_indices); embeddings and the LM head are counted on every stage (conservative:
            # vLLM keeps them on the first and last stage only).
            "layers": ("pipeline",),
            "heads": ("tensor",),
            "kv_heads": ("tensor",),
            "mlp": ("tensor",),
            "vocab": ("tensor",),
            "cache_kv_heads": ("tensor",),
        },
        flags={"pipeline_parallel_size": "pipeline", "tensor_parallel_size": "tensor"},
        reserve_fraction=0.10,
        kv_page_tokens=vllm_page_tokens,
        candidates=stages_per_host,
        replicate_kv_heads=True,
        host_axis="pipeline",
        device_axis="tensor",
    ),
    EngineProfile(
        engine="saxml",
        mode="serve",
        label="Saxml",
        axes=("replica", "data", "mdl"),
        rules={
            "embed": ("data",),
            "kv_embed": ("data",),
            "heads": ("mdl",),
            "kv_heads": ("mdl",),
            "mlp": ("mdl",),
            "vocab": ("mdl",),
            "cache_batch": ("replica", "data"),
            "cache_kv_heads": ("mdl",),
        },
        flags={"saxml_mesh": ("replica", "data", "mdl")},
        reserve_fraction=0.05,
        candidates=servable_mesh,
        device_axis="mdl",
    ),
)

PROFILES: Mapping[tuple[str, str], EngineProfile] = {(p.engine, p.mode): p for p in _PROFILES}
"""(engine, mode) -> profile."""

DEFAULT_RESERVE_FRACTION: Mapping[str, float] = {p.engine: p.reserve_fraction for p in _PROFILES if p.mode == "serve"}
"""Serving reserve default per engine."""


def engines(mode: Mode) -> tuple[Engine, ...]:
    """Engines with a profile for ``mode``, in table order."""
    return tuple(p.engine for p in _PROFILES if p.mode == mode)


def profile(engine: str, mode: str) -> EngineProfile:
    try:
        return PROFILES[(engine, mode)]
    except KeyError:
        raise PlanError(f"no {mode} plan for engine {engine!r}", "engine") from None


def mesh_axis_names(engine: str, mode: str = "serve") -> tuple[str, ...]:
    return profile(engine, mode).axes


def single_host_only(engine: str) -> bool:
    """Whether ``engine`` (as this project deploys it) runs on single-host slices only."""
    found = [p for p in _PROFILES if p.engine == engine]
    if not found:
        raise PlanError(f"unknown engine {engine!r}; use {one_of(dict.fromkeys(p.engine for p in _PROFILES))}", "engine")
    return any(p.single_host_only for p in found)


def untested_multi_host(engine: str, axes: Mapping[str, int], tpu: TpuSlice) -> str | None:
    """Why ``axes`` on ``tpu`` is outside what ``engine``'s multi-host tests cover, or None.

    vLLM (tpu-inference ``docs/includes/parallelism.md``, multi-host column): pipeline parallelism
    across hosts passes; tensor, data and expert parallelism across hosts are "untested". So the
    tested layout is one pipeline stage per host with tensor parallelism inside the host. Other
    engines (and single-host slices) have no such table here: None.
    """
    if engine != "vllm" or not tpu.multi_host:
        return None
    within = tpu.chips_per_host  # the mesh counts chips; the flag multiplies by devices per chip
    pipeline, tensor = axes.get("pipeline", 1), axes.get("tensor", 1)
    if pipeline == tpu.hosts and tensor == within:
        return None
    return (
        f"pipeline={pipeline} x tensor={tensor} on {tpu.key} ({tpu.hosts} hosts of {within} chips) "
        "splits tensor parallelism across hosts, which tpu-inference's support matrix (docs/includes/parallelism.md) "
        f"lists as untested (multi-host TP/DP/EP untested, only multi-host PP passing: pipeline={tpu.hosts} x "
        f"tensor={within})"
    )
