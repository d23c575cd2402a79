"""Capacity planner: which TPU slice a model needs, and the parallelism flags to serve or train it.

The planner rebuilds a model's parameter tree abstractly (``jax.eval_shape``: shapes and dtypes,
no memory), lays every array out on a ``jax.sharding.AbstractMesh`` whose axes are the engine's
parallelism, and sums the shard shapes per chip. A dimension that a mesh axis does not divide is
an error (no ceil division, no padding): the plan must be one that ``jax.device_put`` would
accept as is. ``tests/test_planner.py`` checks the per-chip figures against real shards on 16
fake CPU devices.

Engines and their mesh axes
---------------------------
* ``maxtext`` serving (JetStream + MaxText): ``fsdp, autoregressive, tensor`` ->
  ``ici_fsdp_parallelism``, ``ici_autoregressive_parallelism``, ``ici_tensor_parallelism``.
* ``maxtext`` training: ``fsdp, tensor`` -> ``ici_fsdp_parallelism``, ``ici_tensor_parallelism``.
* ``vllm``: ``tensor`` -> ``tensor_parallel_size``. Single-host slices only (the manifests run one
  Deployment pod; multi-host vLLM needs a Ray cluster, which is not what we deploy).
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

Memory model (per chip, bytes)
------------------------------
* weights: bf16 arrays, or int8 for the matmul weights of the decoder layers with one float32
  scale per output channel (the quantizer's max-abs over the contraction axes, kept as an array of
  the weight's rank with 1s on those axes and sharded like the weight's output axes). Embedding,
  unembedding, norms and biases stay bf16: MaxText's AQT int8 and Saxml's quantize decorator only
  convert the transformer matmuls. float32 scales are the conservative reading (AQT may keep bf16).
* KV cache: ``global_batch x max_target_length`` tokens of K and V per layer,
  (batch, len, kv_heads, head_dim); int8 adds bf16 scales (batch, len, 1, 1) per K and V
  (MaxText ``kv_quant_axis=heads_and_dkv``; ``dkv`` keeps a heads axis).
* reserve: ``reserve_fraction x HBM + reserve_bytes`` for XLA temporaries, prefill activations,
  logits and the runtime. Defaults: vLLM 0.10 because vLLM itself only claims
  ``gpu_memory_utilization=0.9`` of HBM; MaxText and Saxml 0.05, the largest round figure under
  which the known-good 405B int8 seed on v6e 4x4 (batch 96 x 2048 tokens) still plans as fitting
  (it leaves ~3.1 GB per chip after weights and cache).
* training adds gradients (parameter dtype) and two float32 Adam moments per parameter, and an
  activation estimate, see :func:`training_activation_bytes`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from components.catalog.models import ModelArch
from components.catalog.tpu import TpuSlice, all_slices

if TYPE_CHECKING:
    import jax

Engine = Literal["maxtext", "vllm", "saxml"]
WeightDtype = Literal["bfloat16", "int8"]
ParamDtype = Literal["float32", "bfloat16"]
KvDtype = Literal["bfloat16", "int8"]
KvQuantAxis = Literal["heads_and_dkv", "dkv"]
SpecEntry = str | tuple[str, ...] | None

GB = 10**9

# Serving reserve defaults, see the module docstring for why.
DEFAULT_RESERVE_FRACTION: Mapping[str, float] = {"maxtext": 0.05, "saxml": 0.05, "vllm": 0.10}
TRAINING_RESERVE_FRACTION = 0.05


class PlanError(ValueError):
    """A model/workload/slice combination that cannot work; the message names the numbers and a fix.

    ``field`` says which input must change, in the planner's own words, so a caller can blame the
    right setting: ``slice`` (the slice cannot hold or split the model), ``parallelism``, ``batch``
    (the batch does not split over the mesh), ``per_device_batch_size``, ``batch_size``,
    ``max_target_length``, ``max_prefill_length``, ``weight_dtype``, ``reserve_fraction``,
    ``kv_cache`` (the cache outgrows every slice: batch x length), ``engine``.
    """

    def __init__(self, message: str, field: str = "slice") -> None:
        super().__init__(message)
        self.field = field


# ---------------------------------------------------------------------------------------------
# Workload settings
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServingWorkload:
    """What a serving engine is asked to hold in HBM.

    ``max_target_length`` is the cached length per sequence (MaxText ``max_target_length``, vLLM
    ``max_model_len``, Saxml ``INPUT_SEQ_LEN + MAX_DECODE_STEPS``). The cache holds
    ``per_device_batch_size x chips`` sequences (MaxText semantics) or ``batch_size`` sequences;
    with neither, one sequence (vLLM's own start-up check: one max_model_len sequence must fit).
    ``max_prefill_length`` is validated only: MaxText's prefill and autoregressive caches together
    span ``max_target_length``.
    ``parallelism`` pins mesh axes by name (``{"tensor": 8}``; missing axes are 1, one axis may be
    -1 = the remaining chips, as MaxText's ``ici_*_parallelism`` flags); None derives them.
    """

    engine: Engine
    max_target_length: int
    max_prefill_length: int | None = None
    per_device_batch_size: float | None = None
    batch_size: int | None = None
    weight_dtype: WeightDtype | None = None
    """None: the servable's fixed dtype (Saxml int8) or bfloat16."""
    kv_dtype: KvDtype = "bfloat16"
    kv_quant_axis: KvQuantAxis = "heads_and_dkv"
    reserve_fraction: float | None = None
    reserve_bytes: int = 0
    parallelism: Mapping[str, int] | None = None
    replicate_kv_heads: bool | None = None
    """None: True for vLLM (it replicates KV heads when TP > kv_heads), False otherwise."""

    def __post_init__(self) -> None:
        if self.engine not in ("maxtext", "vllm", "saxml"):
            raise PlanError(f"unknown serving engine {self.engine!r}; use maxtext, vllm or saxml", "engine")
        if self.max_target_length <= 0:
            raise PlanError(f"max_target_length must be positive, got {self.max_target_length}", "max_target_length")
        if self.max_prefill_length is not None and not 0 < self.max_prefill_length < self.max_target_length:
            raise PlanError(
                f"max_prefill_length {self.max_prefill_length} must be positive and below "
                f"max_target_length {self.max_target_length}",
                "max_prefill_length",
            )
        if self.per_device_batch_size is not None and self.batch_size is not None:
            raise PlanError("set per_device_batch_size or batch_size, not both", "batch_size")
        _check_reserve(self.reserve_fraction, self.reserve_bytes)

    @property
    def mode(self) -> str:
        return "serve"


@dataclass(frozen=True)
class TrainingWorkload:
    """MaxText pre-training/fine-tuning with AdamW; global batch = per_device_batch_size x chips."""

    per_device_batch_size: float
    max_target_length: int
    engine: Literal["maxtext"] = "maxtext"
    param_dtype: ParamDtype = "float32"
    """MaxText's default ``weight_dtype`` keeps float32 master weights."""
    reserve_fraction: float | None = None
    reserve_bytes: int = 0
    parallelism: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        if self.engine != "maxtext":
            raise PlanError(f"training is planned for maxtext only, got {self.engine!r}", "engine")
        if self.per_device_batch_size <= 0 or self.max_target_length <= 0:
            raise PlanError(
                "per_device_batch_size and max_target_length must be positive",
                "per_device_batch_size" if self.per_device_batch_size <= 0 else "max_target_length",
            )
        _check_reserve(self.reserve_fraction, self.reserve_bytes)

    @property
    def mode(self) -> str:
        return "train"


Workload = ServingWorkload | TrainingWorkload


def _check_reserve(fraction: float | None, extra: int) -> None:
    if fraction is not None and not 0 <= fraction < 1:
        raise PlanError(f"reserve_fraction must be in [0, 1), got {fraction}", "reserve_fraction")
    if extra < 0:
        raise PlanError(f"reserve_bytes must be >= 0, got {extra}", "reserve_fraction")


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArrayPlan:
    """One array as laid out on the mesh (not hashable: plain data for reports)."""

    kind: str
    """weight, scale, kv_cache or kv_scale."""
    shape: tuple[int, ...]
    dtype: str
    spec: tuple[SpecEntry, ...]
    shard_shape: tuple[int, ...]
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
    spot: bool = False
    price_per_hour: float | None = None
    """chips x per-chip price in ``region`` (spot price when ``spot``); None where uncatalogued."""
    kv_capacity_sequences: int | None = None
    """Serving: full-length sequences the HBM left after weights and reserve could cache."""
    arrays: Mapping[str, ArrayPlan] = field(default_factory=dict, repr=False)

    @property
    def fits(self) -> bool:
        return self.memory.fits

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


# ---------------------------------------------------------------------------------------------
# Abstract parameter tree
# ---------------------------------------------------------------------------------------------

# Logical axes of every array the init function can produce (MaxText-style names). Layers are
# stacked on a leading axis (MaxText scan_layers / paxml repeated layers); bytes are identical to
# unstacked layers and the stacked tree traces ~100x faster.
_LOGICAL: Mapping[str, tuple[str | None, ...]] = {
    "embed/tokens": ("vocab", "embed"),
    "embed/shared": ("embed", "vocab"),
    "logits/kernel": ("embed", "vocab"),
    "logits/bias": ("vocab",),
    "decoder/attn_norm/scale": ("layers", None),
    "decoder/attn_norm/bias": ("layers", None),
    "decoder/attention/qkv": ("layers", None, "embed", "heads", "head_dim"),
    "decoder/attention/qkv_bias": ("layers", None, "heads", "head_dim"),
    "decoder/attention/query": ("layers", "embed", "heads", "head_dim"),
    "decoder/attention/key": ("layers", "kv_embed", "kv_heads", "head_dim"),
    "decoder/attention/value": ("layers", "kv_embed", "kv_heads", "head_dim"),
    "decoder/attention/query_bias": ("layers", "heads", "head_dim"),
    "decoder/attention/key_bias": ("layers", "kv_heads", "head_dim"),
    "decoder/attention/value_bias": ("layers", "kv_heads", "head_dim"),
    "decoder/attention/out": ("layers", "heads", "head_dim", "embed"),
    "decoder/attention/out_bias": ("layers", None),
    "decoder/attention/per_dim_scale": ("layers", None),
    "decoder/mlp_norm/scale": ("layers", None),
    "decoder/mlp_norm/bias": ("layers", None),
    "decoder/mlp/wi_0": ("layers", "embed", "mlp"),
    "decoder/mlp/wi_1": ("layers", "embed", "mlp"),
    "decoder/mlp/wi": ("layers", "embed", "mlp"),
    "decoder/mlp/wi_0_bias": ("layers", "mlp"),
    "decoder/mlp/wi_1_bias": ("layers", "mlp"),
    "decoder/mlp/wi_bias": ("layers", "mlp"),
    "decoder/mlp/wo": ("layers", "mlp", "embed"),
    "decoder/mlp/wo_bias": ("layers", None),
    "final_norm/scale": (None,),
    "final_norm/bias": (None,),
}

# int8 weight-only quantization: the decoder matmuls and their contraction axes.
_QUANTIZED: Mapping[str, tuple[int, ...]] = {
    "decoder/attention/qkv": (2,),
    "decoder/attention/query": (1,),
    "decoder/attention/key": (1,),
    "decoder/attention/value": (1,),
    "decoder/attention/out": (1, 2),
    "decoder/mlp/wi_0": (1,),
    "decoder/mlp/wi_1": (1,),
    "decoder/mlp/wi": (1,),
    "decoder/mlp/wo": (1,),
}

SCALE_SUFFIX = "/scale_int8"


def _init_params(arch: ModelArch, kv_heads: int, dtype: Any) -> dict[str, jax.Array]:
    """Initialise the model's parameters (only ever traced under ``jax.eval_shape``)."""
    import jax
    import jax.numpy as jnp

    layers, d, heads, hd, ffn, vocab = arch.layers, arch.d_model, arch.q_heads, arch.head_dim, arch.ffn, arch.vocab
    keys = iter(jax.random.split(jax.random.key(0), 16))

    def dense(*shape: int) -> jax.Array:
        w: jax.Array = (jax.random.normal(next(keys), shape, jnp.float32) * d**-0.5).astype(dtype)
        return w

    def ones(*shape: int) -> jax.Array:
        return jnp.ones(shape, dtype)

    def zeros(*shape: int) -> jax.Array:
        return jnp.zeros(shape, dtype)

    p: dict[str, jax.Array] = {}
    if arch.tied_embeddings:
        p["embed/shared"] = dense(d, vocab)  # praxis keeps the shared softmax weight as (d, vocab)
    else:
        p["embed/tokens"] = dense(vocab, d)
        p["logits/kernel"] = dense(d, vocab)
    if arch.logits_bias:
        p["logits/bias"] = zeros(vocab)

    layernorm = arch.norm == "layernorm"
    p["decoder/attn_norm/scale"] = ones(layers, d)
    if layernorm:
        p["decoder/attn_norm/bias"] = zeros(layers, d)
    if arch.fused_qkv:
        p["decoder/attention/qkv"] = dense(layers, 3, d, heads, hd)
        if arch.attention_bias:
            p["decoder/attention/qkv_bias"] = zeros(layers, 3, heads, hd)
    else:
        p["decoder/attention/query"] = dense(layers, d, heads, hd)
        p["decoder/attention/key"] = dense(layers, d, kv_heads, hd)
        p["decoder/attention/value"] = dense(layers, d, kv_heads, hd)
        if arch.attention_bias:
            p["decoder/attention/query_bias"] = zeros(layers, heads, hd)
            p["decoder/attention/key_bias"] = zeros(layers, kv_heads, hd)
            p["decoder/attention/value_bias"] = zeros(layers, kv_heads, hd)
    p["decoder/attention/out"] = dense(layers, heads, hd, d)
    if arch.attention_bias:
        p["decoder/attention/out_bias"] = zeros(layers, d)
    if arch.per_dim_scale:
        p["decoder/attention/per_dim_scale"] = zeros(layers, hd)

    p["decoder/mlp_norm/scale"] = ones(layers, d)
    if layernorm:
        p["decoder/mlp_norm/bias"] = zeros(layers, d)
    up = ("wi_0", "wi_1") if arch.gated_mlp else ("wi",)
    for name in up:
        p[f"decoder/mlp/{name}"] = dense(layers, d, ffn)
        if arch.mlp_bias:
            p[f"decoder/mlp/{name}_bias"] = zeros(layers, ffn)
    p["decoder/mlp/wo"] = dense(layers, ffn, d)
    if arch.mlp_bias:
        p["decoder/mlp/wo_bias"] = zeros(layers, d)

    p["final_norm/scale"] = ones(d)
    if layernorm:
        p["final_norm/bias"] = zeros(d)
    return p


def _quantize_int8(params: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Symmetric per-output-channel int8 for the decoder matmuls; float32 scales (traced only)."""
    import jax.numpy as jnp

    out: dict[str, jax.Array] = {}
    for name, w in params.items():
        axes = _QUANTIZED.get(name)
        if axes is None:
            out[name] = w
            continue
        scale = jnp.max(jnp.abs(w.astype(jnp.float32)), axis=axes, keepdims=True) / 127.0
        out[name] = jnp.round(w / scale).astype(jnp.int8)
        out[name + SCALE_SUFFIX] = scale
    return out


@functools.lru_cache(maxsize=64)
def _cached_shapes(arch: ModelArch, dtype: str, quantize: bool, kv_heads: int) -> tuple[tuple[str, Any], ...]:
    import jax
    import jax.numpy as jnp

    def init() -> dict[str, jax.Array]:
        params = _init_params(arch, kv_heads, jnp.dtype(dtype))
        return _quantize_int8(params) if quantize else params

    return tuple(jax.eval_shape(init).items())


def param_shapes(
    arch: ModelArch, dtype: str = "bfloat16", *, quantize: bool = False, kv_heads: int | None = None
) -> dict[str, jax.ShapeDtypeStruct]:
    """Abstract parameters (``jax.ShapeDtypeStruct``) of ``arch``; nothing is allocated.

    ``quantize`` turns the decoder matmuls into int8 plus ``<name>/scale_int8`` float32 arrays.
    ``kv_heads`` lays K/V projections out with that many heads (replicated KV heads).
    """
    return dict(_cached_shapes(arch, dtype, quantize, kv_heads or arch.kv_heads))


def param_count(arch: ModelArch) -> int:
    """Number of parameters (scales excluded; K/V heads as the model defines them)."""
    return sum(math.prod(s.shape) for s in param_shapes(arch).values())


def _logical_axes(name: str) -> tuple[str | None, ...]:
    if name.endswith(SCALE_SUFFIX):
        weight = name[: -len(SCALE_SUFFIX)]
        logical = list(_LOGICAL[weight])
        for axis in _QUANTIZED[weight]:
            logical[axis] = None  # reduced to size 1
        return tuple(logical)
    return _LOGICAL[name]


# ---------------------------------------------------------------------------------------------
# Meshes and partition specs
# ---------------------------------------------------------------------------------------------

_AXES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("serve", "maxtext"): ("fsdp", "autoregressive", "tensor"),
    ("train", "maxtext"): ("fsdp", "tensor"),
    ("serve", "vllm"): ("tensor",),
    ("serve", "saxml"): ("replica", "data", "mdl"),
}

# Logical axis -> mesh axes, per engine (see the module docstring).
_RULES: Mapping[tuple[str, str], Mapping[str, tuple[str, ...]]] = {
    ("serve", "maxtext"): {
        "embed": ("fsdp",),
        "kv_embed": ("fsdp", "autoregressive"),
        "heads": ("tensor", "autoregressive"),
        "kv_heads": ("tensor",),
        "mlp": ("tensor", "autoregressive"),
        "vocab": ("tensor", "autoregressive"),
        "cache_batch": ("fsdp", "autoregressive"),
        "cache_kv_heads": ("tensor",),
    },
    ("train", "maxtext"): {
        "embed": ("fsdp",),
        "kv_embed": ("fsdp",),
        "heads": ("tensor",),
        "kv_heads": ("tensor",),
        "mlp": ("tensor",),
        "vocab": ("tensor",),
    },
    ("serve", "vllm"): {
        "heads": ("tensor",),
        "kv_heads": ("tensor",),
        "mlp": ("tensor",),
        "vocab": ("tensor",),
        "cache_kv_heads": ("tensor",),
    },
    ("serve", "saxml"): {
        "embed": ("data",),
        "kv_embed": ("data",),
        "heads": ("mdl",),
        "kv_heads": ("mdl",),
        "mlp": ("mdl",),
        "vocab": ("mdl",),
        "cache_batch": ("replica", "data"),
        "cache_kv_heads": ("mdl",),
    },
}


def mesh_axis_names(engine: str, mode: str = "serve") -> tuple[str, ...]:
    try:
        return _AXES[(mode, engine)]
    except KeyError:
        raise PlanError(f"no {mode} plan for engine {engine!r}", "engine") from None


def build_mesh(axes: Mapping[str, int]) -> jax.sharding.AbstractMesh:
    """A device-free mesh with the given axis sizes (insertion order = mesh order)."""
    from jax.sharding import AbstractMesh

    return AbstractMesh(tuple(axes.values()), tuple(axes.keys()))


def _describe(axes: Mapping[str, int]) -> str:
    return " x ".join(f"{k}={v}" for k, v in axes.items())


def _flags(engine: str, mode: str, axes: Mapping[str, int]) -> dict[str, Any]:
    if engine == "vllm":
        return {"tensor_parallel_size": axes["tensor"]}
    if engine == "saxml":
        return {"saxml_mesh": [axes["replica"], axes["data"], axes["mdl"]]}
    return {f"ici_{name}_parallelism": size for name, size in axes.items()}


def _resolve_explicit(names: tuple[str, ...], given: Mapping[str, int], tpu: TpuSlice) -> dict[str, int]:
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise PlanError(f"unknown mesh axes {unknown}; this engine's axes are {list(names)}", "parallelism")
    axes = {n: int(given.get(n, 1)) for n in names}
    fill = [n for n, v in axes.items() if v == -1]
    if len(fill) > 1 or any(v == 0 or v < -1 for v in axes.values()):
        raise PlanError(f"mesh {_describe(axes)}: sizes must be >= 1, with at most one -1", "parallelism")
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


def _check_mesh(axes: Mapping[str, int], tpu: TpuSlice) -> None:
    devices = math.prod(axes.values())
    if devices != tpu.chips:
        raise PlanError(
            f"mesh {_describe(axes)} has {devices} devices but slice {tpu.key} has {tpu.chips} chips; "
            f"choose degrees whose product is {tpu.chips}",
            "parallelism",
        )


def _divisors_desc(n: int) -> list[int]:
    return [k for k in range(n, 0, -1) if n % k == 0]


def _candidate_meshes(arch: ModelArch, tpu: TpuSlice, workload: Workload) -> list[dict[str, int]]:
    """Default meshes in order of preference; the first that lays out without error wins."""
    chips = tpu.chips
    if workload.mode == "train":
        # Balanced 2D mesh along the physical torus: tensor on the slice's short side (4x4 -> 4x4,
        # the seed's fsdp=4 tensor=4), fsdp on the rest; smaller tensor if heads do not divide.
        short = min(int(x) for x in tpu.topology.split("x"))
        return [{"fsdp": chips // t, "tensor": t} for t in _divisors_desc(chips) if t <= short]
    if workload.engine == "vllm":
        return [{"tensor": chips}]
    if workload.engine == "saxml":
        if arch.saxml_mesh is not None:
            return [dict(zip(("replica", "data", "mdl"), arch.saxml_mesh, strict=True))]
        return [{"replica": 1, "data": 1, "mdl": chips}]
    # MaxText serving: the largest tensor degree the heads allow, the rest on autoregressive; fsdp
    # only when heads cannot absorb the slice (a small model on a big slice).
    return [
        {"fsdp": f, "autoregressive": chips // f // t, "tensor": t}
        for f in reversed(_divisors_desc(chips))
        for t in _divisors_desc(chips // f)
    ]


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------

# An abstract array to lay out: (jax.ShapeDtypeStruct, logical axes, kind).
_Abstract = tuple[Any, tuple[str | None, ...], str]


@dataclass(frozen=True)
class _Context:
    arch: ModelArch
    engine: str
    mode: str
    axes: Mapping[str, int]
    kv_heads: int
    replicated: bool


def _spec(
    logical: tuple[str | None, ...], rules: Mapping[str, tuple[str, ...]], axes: Mapping[str, int]
) -> tuple[SpecEntry, ...]:
    out: list[SpecEntry] = []
    for name in logical:
        mesh = tuple(a for a in rules.get(name or "", ()) if axes.get(a, 1) > 1)
        out.append(None if not mesh else mesh[0] if len(mesh) == 1 else mesh)
    return tuple(out)


def _axis_label(entry: SpecEntry) -> tuple[str, ...]:
    return () if entry is None else (entry,) if isinstance(entry, str) else entry


def _layout(ctx: _Context, arrays: Mapping[str, _Abstract]) -> dict[str, ArrayPlan]:
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = build_mesh(ctx.axes)
    rules = _RULES[(ctx.mode, ctx.engine)]
    arch = ctx.arch
    out: dict[str, ArrayPlan] = {}
    for name, (sds, logical, kind) in arrays.items():
        spec = _spec(logical, rules, ctx.axes)
        for dim, entry, logical_name in zip(sds.shape, spec, logical, strict=True):
            mesh_axes = _axis_label(entry)
            degree = math.prod(ctx.axes[a] for a in mesh_axes)
            if dim % degree == 0:
                continue
            label = " x ".join(mesh_axes)
            if logical_name in ("kv_heads", "cache_kv_heads"):
                fix = f"use a {label} degree dividing {arch.kv_heads}"
                if degree % arch.kv_heads == 0 and not ctx.replicated:
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
            bytes_per_chip=math.prod(shard) * sds.dtype.itemsize,
        )
    return out


def _kv_heads_for(arch: ModelArch, engine: str, mode: str, axes: Mapping[str, int], replicate: bool) -> tuple[int, bool]:
    rules = _RULES[(mode, engine)]
    degree = math.prod(axes.get(a, 1) for a in rules.get("kv_heads", ()))
    if replicate and degree > arch.kv_heads and degree % arch.kv_heads == 0:
        return degree, True
    return arch.kv_heads, False


def _weight_arrays(arch: ModelArch, dtype: str, quantize: bool, kv_heads: int) -> dict[str, _Abstract]:
    return {
        name: (sds, _logical_axes(name), "scale" if name.endswith(SCALE_SUFFIX) else "weight")
        for name, sds in param_shapes(arch, dtype, quantize=quantize, kv_heads=kv_heads).items()
    }


def _kv_arrays(
    arch: ModelArch, batch: int, length: int, kv_heads: int, kv_dtype: str, quant_axis: str
) -> dict[str, _Abstract]:
    import jax
    import jax.numpy as jnp

    shape = (arch.layers, batch, length, kv_heads, arch.head_dim)
    logical = ("layers", "cache_batch", None, "cache_kv_heads", None)
    out: dict[str, _Abstract] = {}
    for part in ("key", "value"):
        values = jax.ShapeDtypeStruct(shape, jnp.dtype(kv_dtype))  # type: ignore[no-untyped-call]
        out[f"kv_cache/{part}"] = (values, logical, "kv_cache")
        if kv_dtype == "int8":
            heads = kv_heads if quant_axis == "dkv" else 1
            scale_logical = ("layers", "cache_batch", None, "cache_kv_heads" if quant_axis == "dkv" else None, None)
            scale = jax.ShapeDtypeStruct((arch.layers, batch, length, heads, 1), jnp.bfloat16)  # type: ignore[no-untyped-call]
            out[f"kv_cache/{part}_scale"] = (scale, scale_logical, "kv_scale")
    return out


# ---------------------------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------------------------


def derive_parallelism(arch: ModelArch, tpu: TpuSlice, workload: Workload) -> dict[str, int]:
    """Mesh axes for ``workload`` on ``tpu``: the explicit ones verified, or the derived default."""
    return dict(_plan_uncached(arch, tpu, workload).sharding.mesh_axes)


def _serving_weight_dtype(arch: ModelArch, workload: ServingWorkload) -> str:
    fixed = arch.servable_weight_dtype
    if workload.weight_dtype is None:
        return fixed or "bfloat16"
    if fixed is not None and workload.weight_dtype != fixed:
        raise PlanError(
            f"{arch.name} is served by {arch.saxml_servable or 'its servable'} with {fixed} weights; "
            f"weight_dtype {workload.weight_dtype} is not available",
            "weight_dtype",
        )
    return workload.weight_dtype


def _global_batch(tpu: TpuSlice, per_device: float | None, batch: int | None) -> int:
    if per_device is not None:
        total = per_device * tpu.chips
        if total != int(total) or total < 1:
            raise PlanError(
                f"per_device_batch_size {per_device} x {tpu.chips} chips = {total} is not a whole batch",
                "per_device_batch_size",
            )
        return int(total)
    return batch if batch is not None else 1


def training_activation_bytes(arch: ModelArch, tokens_per_chip: float) -> int:
    """Activation estimate per chip for MaxText training with ``remat_policy=full``.

    * checkpoints: each decoder layer's bf16 input, layers x tokens x d_model x 2 B;
    * one layer being recomputed and back-propagated: its bf16 intermediates and their gradients,
      tokens x (q + k + v + attention output + 3 d_model for residual/norms + 3 ffn (gated) or
      2 ffn) x 2 B x 2; flash attention on TPU, so no seq^2 scores;
    * float32 logits and their gradient: tokens x vocab x 4 B x 2.
    Batch sits on fsdp and hidden/mlp/vocab dims on tensor, so per chip each term is
    ``per_device_batch_size x seq`` tokens at full width.
    """
    width = (
        (arch.q_heads * 2 + arch.kv_heads * 2) * arch.head_dim
        + 3 * arch.d_model
        + arch.mlp_matrices * arch.ffn
    )
    checkpoints = arch.layers * tokens_per_chip * arch.d_model * 2
    working = tokens_per_chip * width * 2 * 2
    logits = tokens_per_chip * arch.vocab * 4 * 2
    return int(checkpoints + working + logits)


def _plan_uncached(arch: ModelArch, tpu: TpuSlice, workload: Workload) -> Plan:
    engine, mode = workload.engine, workload.mode
    names = mesh_axis_names(engine, mode)
    if engine == "vllm" and tpu.multi_host:
        raise PlanError(
            f"vLLM is planned on single-host slices; {tpu.key} has {tpu.hosts} hosts. Use a one-VM "
            f"slice (e.g. {tpu.generation.name} 2x4 with {tpu.generation.machine_type(8)})"
        )
    if workload.parallelism is not None:
        axes = _resolve_explicit(names, workload.parallelism, tpu)
        _check_mesh(axes, tpu)
        candidates = [axes]
    else:
        candidates = _candidate_meshes(arch, tpu, workload)
        for axes in candidates:
            _check_mesh(axes, tpu)
    if isinstance(workload, ServingWorkload):
        # Mesh-independent checks first, so they are not reported as "no mesh works".
        _serving_weight_dtype(arch, workload)
        _global_batch(tpu, workload.per_device_batch_size, workload.batch_size)
    errors: list[PlanError] = []
    for axes in candidates:
        try:
            return _plan_on_mesh(arch, tpu, workload, axes)
        except PlanError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    fields = {e.field for e in errors}
    raise PlanError(
        f"no {engine} {mode} mesh over the {tpu.chips} chips of {tpu.key} splits {arch.name} evenly "
        f"({len(errors)} tried); first attempt: {errors[0]}",
        fields.pop() if len(fields) == 1 else "slice",
    )


def _plan_on_mesh(arch: ModelArch, tpu: TpuSlice, workload: Workload, axes: dict[str, int]) -> Plan:
    engine, mode = workload.engine, workload.mode
    hbm = tpu.generation.hbm_bytes_per_chip
    if isinstance(workload, ServingWorkload):
        replicate = workload.replicate_kv_heads
        if replicate is None:
            replicate = engine == "vllm"
        kv_heads, replicated = _kv_heads_for(arch, engine, mode, axes, replicate)
        ctx = _Context(arch, engine, mode, axes, kv_heads, replicated)
        weight_dtype = _serving_weight_dtype(arch, workload)
        batch = _global_batch(tpu, workload.per_device_batch_size, workload.batch_size)
        arrays = _weight_arrays(arch, "bfloat16", weight_dtype == "int8", kv_heads)
        arrays |= _kv_arrays(arch, batch, workload.max_target_length, kv_heads, workload.kv_dtype, workload.kv_quant_axis)
        laid = _layout(ctx, arrays)
        weights = sum(a.bytes_per_chip for a in laid.values() if a.kind in ("weight", "scale"))
        kv = sum(a.bytes_per_chip for a in laid.values() if a.kind in ("kv_cache", "kv_scale"))
        fraction = workload.reserve_fraction
        if fraction is None:
            fraction = DEFAULT_RESERVE_FRACTION[engine]
        reserve = int(fraction * hbm) + workload.reserve_bytes
        memory = MemoryPlan(weights=weights, kv_cache=kv, optimizer=0, activations=0, reserve=reserve, hbm=hbm)
        free = hbm - weights - reserve
        capacity = max(0, free * batch // kv) if kv else None
        return Plan(
            model=arch.name,
            mode=mode,
            slice=tpu,
            sharding=ShardingPlan(engine, dict(axes), _flags(engine, mode, axes), kv_heads, replicated),
            memory=memory,
            global_batch=batch,
            max_target_length=workload.max_target_length,
            weight_dtype=weight_dtype,
            kv_dtype=workload.kv_dtype,
            kv_capacity_sequences=capacity,
            arrays=laid,
        )

    ctx = _Context(arch, engine, mode, axes, arch.kv_heads, False)
    global_batch = workload.per_device_batch_size * tpu.chips
    if global_batch != int(global_batch) or int(global_batch) % axes["fsdp"]:
        raise PlanError(
            f"global batch {global_batch} (per_device_batch_size {workload.per_device_batch_size} x "
            f"{tpu.chips} chips) does not split over fsdp {axes['fsdp']}; use a whole batch divisible by it",
            "per_device_batch_size",
        )
    laid = _layout(ctx, _weight_arrays(arch, workload.param_dtype, False, arch.kv_heads))
    weights = sum(a.bytes_per_chip for a in laid.values())
    elements = sum(math.prod(a.shard_shape) for a in laid.values())
    optimizer = weights + elements * 8  # gradients in the param dtype + Adam mu, nu in float32
    tokens = workload.per_device_batch_size * workload.max_target_length
    fraction = workload.reserve_fraction
    if fraction is None:
        fraction = TRAINING_RESERVE_FRACTION
    memory = MemoryPlan(
        weights=weights,
        kv_cache=0,
        optimizer=optimizer,
        activations=training_activation_bytes(arch, tokens),
        reserve=int(fraction * hbm) + workload.reserve_bytes,
        hbm=hbm,
    )
    return Plan(
        model=arch.name,
        mode=mode,
        slice=tpu,
        sharding=ShardingPlan(engine, dict(axes), _flags(engine, mode, axes), arch.kv_heads, False),
        memory=memory,
        global_batch=global_batch,
        max_target_length=workload.max_target_length,
        weight_dtype=workload.param_dtype,
        kv_dtype=None,
        arrays=laid,
    )


def _priced(plan: Plan, region: str | None, spot: bool) -> Plan:
    price = plan.slice.price(region) if region else None
    rate = (price.spot if spot else price.on_demand) if price else None
    cost = None if rate is None else round(rate * plan.slice.chips, 4)
    return dataclasses.replace(plan, region=region, spot=spot, price_per_hour=cost)


def plan(arch: ModelArch, tpu: TpuSlice, workload: Workload, *, region: str | None = None, spot: bool = False) -> Plan:
    """Lay ``arch`` out on ``tpu`` for ``workload``; sharding errors raise, a tight fit does not.

    Check ``plan(...).fits`` or use :func:`verify_slice` to turn an overflow into a PlanError.
    """
    return _priced(_plan_uncached(arch, tpu, workload), region, spot)


def _rank_key(p: Plan) -> tuple[bool, float, int, int, str]:
    # Cheapest first; uncatalogued prices last; then fewer VMs (simpler pools), fewer chips.
    cost = p.price_per_hour
    return (cost is None, cost if cost is not None else 0.0, p.slice.hosts, p.slice.chips, p.slice.key)


def _fitting(
    arch: ModelArch,
    workload: Workload,
    candidates: Iterable[TpuSlice],
    region: str | None,
    spot: bool,
    min_margin_fraction: float = 0.0,
) -> tuple[list[Plan], list[str], set[str]]:
    """(fitting plans, one reason per rejected slice, the ``PlanError.field`` of each rejection)."""
    fits: list[Plan] = []
    rejected: list[str] = []
    fields: set[str] = set()
    for tpu in candidates:
        try:
            p = plan(arch, tpu, workload, region=region, spot=spot)
        except PlanError as exc:
            rejected.append(f"{tpu.key}: {exc}")
            fields.add(exc.field)
            continue
        if p.memory.margin_fraction >= min_margin_fraction and p.fits:
            fits.append(p)
        else:
            rejected.append(f"{tpu.key}: needs {p.memory.total / GB:.2f} GB of {p.memory.hbm / GB:.1f} GB per chip")
            fields.add(_overflow_field(p.memory))
    return fits, rejected, fields


def _overflow_field(m: MemoryPlan) -> str:
    """What to shrink when a plan overflows HBM: the tokens in flight (batch x length: KV cache,
    activations) when they outweigh the model's own state, else the slice is too small."""
    return "tokens" if m.kv_cache + m.activations > m.weights + m.optimizer else "slice"


def select_slice(
    arch: ModelArch,
    workload: Workload,
    candidates: Iterable[TpuSlice] | None = None,
    *,
    region: str,
    spot: bool = False,
    generations: Iterable[str] | None = None,
    single_host_only: bool = False,
    min_margin_fraction: float = 0.0,
) -> Plan:
    """The cheapest slice (chips x price per chip-hour in ``region``) that ``arch`` fits on.

    Slices without a price in ``region`` (or without a spot price when ``spot``) stay eligible
    but rank after every priced slice.
    """
    allowed = set(generations) if generations is not None else None
    pool = [
        s
        for s in (all_slices() if candidates is None else candidates)
        if (allowed is None or s.generation.name in allowed) and not (single_host_only and s.multi_host)
    ]
    if not pool:
        raise PlanError(
            f"no candidate slices for {arch.name} (generations={sorted(allowed or [])}, single_host_only={single_host_only})"
        )
    fits, rejected, fields = _fitting(arch, workload, pool, region, spot, min_margin_fraction)
    if not fits:
        raise PlanError(
            f"no candidate slice fits {arch.name} ({workload.engine} {workload.mode}); "
            f"{len(pool)} considered: " + "; ".join(rejected),
            fields.pop() if len(fields) == 1 else "slice",
        )
    return min(fits, key=_rank_key)


def smallest_fitting_slice(
    arch: ModelArch, workload: Workload, candidates: Iterable[TpuSlice] | None = None, region: str | None = None
) -> Plan | None:
    """The fitting slice with the fewest chips (then cheapest), or None."""
    fits, _, _ = _fitting(arch, workload, all_slices() if candidates is None else candidates, region, False)
    if not fits:
        return None
    return min(fits, key=lambda p: (p.slice.chips, *_rank_key(p)))


def verify_slice(
    arch: ModelArch,
    workload: Workload,
    tpu: TpuSlice,
    *,
    region: str | None = None,
    spot: bool = False,
    alternatives: Iterable[TpuSlice] | None = None,
) -> Plan:
    """The plan for a pinned slice, or a PlanError naming the need, the HBM and a slice that fits.

    ``alternatives`` (default: the catalog) is searched for the smallest fitting slice, same
    generation first.
    """

    def fitting() -> Plan | None:
        pool = list(all_slices() if alternatives is None else alternatives)
        same = [s for s in pool if s.generation.name == tpu.generation.name]
        return smallest_fitting_slice(arch, workload, same, region) or smallest_fitting_slice(arch, workload, pool, region)

    def suggestion(best: Plan | None) -> str:
        if best is None:
            return "no catalog slice fits this workload"
        return f"smallest slice that fits: {best.slice.key} ({best.slice.chips} chips, {best.memory.total / GB:.2f} GB per chip)"

    try:
        p = plan(arch, tpu, workload, region=region, spot=spot)
    except PlanError as exc:
        raise PlanError(f"{exc}; {suggestion(fitting())}", exc.field) from None
    if not p.fits:
        m = p.memory
        best = fitting()
        raise PlanError(
            f"{arch.name} needs {m.total / GB:.2f} GB per chip on {tpu.key} ({m.summary()}) but a "
            f"{tpu.generation.name} chip has {m.hbm / GB:.1f} GB HBM; {suggestion(best)}",
            # Another slice holds it: the topology is what to change. None does: shrink the workload.
            "slice" if best is not None else _overflow_field(m),
        )
    return p
