"""Parameter trees: a catalog architecture's abstract arrays (weights, int8 scales, KV cache) with
the logical axis of every dimension. A new model architecture changes this module only.

The tree is rebuilt abstractly (``jax.eval_shape``: shapes and dtypes, no memory); jax is imported
only when a tree is first built.

* weights: bf16 arrays, or int8 for the matmul weights of the decoder layers with one float32
  scale per output channel (the quantizer's max-abs over the contraction axes, kept as an array of
  the weight's rank with 1s on those axes and sharded like the weight's output axes). Embedding,
  unembedding, norms and biases stay bf16: MaxText's AQT int8 and Saxml's quantize decorator only
  convert the transformer matmuls. float32 scales are the conservative reading (AQT may keep bf16).
* fp8 weights (vLLM only): float8_e4m3fn, 1 byte per element, for the same decoder matmuls, with one
  float32 scale per output channel laid out like the int8 ones. This is the format of the FP8
  checkpoint the vLLM stacks serve (:data:`FP8_CHECKPOINT_FORMAT`): llm-compressor's
  ``compressed-tensors`` ``float-quantized`` scheme, weights FP8 E4M3 with a static symmetric
  per-channel scale (shape (out_features, 1)), activations quantized per token at run time (no
  stored activation scales), and only the linear layers inside the transformer blocks converted:
  the embedding, ``lm_head`` and the norms stay bf16. float32 scales are the conservative reading.
* KV cache: ``global_batch x max_target_length`` tokens of K and V per layer,
  (batch, len, kv_heads, head_dim); int8 adds bf16 scales (batch, len, 1, 1) per K and V
  (MaxText ``kv_quant_axis=heads_and_dkv``; ``dkv`` keeps a heads axis). fp8 (vLLM
  ``--kv-cache-dtype=fp8``) stores float8_e4m3fn, 1 byte per element; vLLM's only fp8 KV scales are
  one k_scale and one v_scale per attention layer (a few hundred bytes in all), not modelled.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..catalog.models import ModelArch

if TYPE_CHECKING:
    import jax

AbstractArray = tuple[Any, tuple[str | None, ...], str]
"""An array to lay out: (``jax.ShapeDtypeStruct``, logical axis per dimension, kind: weight,
scale, kv_cache or kv_scale)."""

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
FP8_SCALE_SUFFIX = "/scale_fp8"
SCALE_SUFFIXES = (SCALE_SUFFIX, FP8_SCALE_SUFFIX)

Quantization = Literal["int8", "fp8"]
"""Weight-only quantization of the decoder matmuls (:data:`_QUANTIZED`)."""

FP8_DTYPE = "float8_e4m3fn"
"""The fp8 element type of FP8 weights and of vLLM's ``fp8`` KV cache (E4M3, 1 byte)."""
FP8_MAX = 448.0
"""Largest finite float8_e4m3fn value: the symmetric quantizer maps each channel's max-abs to it."""

FP8_CHECKPOINT_FORMAT = (
    "neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8-dynamic README (Hugging Face, revision 2b63bb80, read 2026-11): "
    "weight quantization FP8, activation quantization FP8, obtained by quantizing the weights and activations "
    "of Meta-Llama-3.1-405B-Instruct with llm-compressor; llm-compressor's FP8_DYNAMIC preset scheme: weights "
    "FP8 E4M3 static symmetric per output channel (compressed-tensors weight_scale shape (out_features, 1)), "
    "activations dynamic per token (no stored activation scales), the transformer blocks' Linear layers "
    "converted and lm_head ignored (embeddings and norms are not Linear layers and stay bf16)"
)
"""Where the fp8 weight layout modelled here comes from."""


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


def _quantize(params: dict[str, jax.Array], quantization: Quantization) -> dict[str, jax.Array]:
    """Symmetric per-output-channel int8 or fp8 (E4M3) for the decoder matmuls; float32 scales
    (traced only)."""
    import jax.numpy as jnp

    int8 = quantization == "int8"
    target, largest, suffix = (jnp.int8, 127.0, SCALE_SUFFIX) if int8 else (jnp.dtype(FP8_DTYPE), FP8_MAX, FP8_SCALE_SUFFIX)
    out: dict[str, jax.Array] = {}
    for name, w in params.items():
        axes = _QUANTIZED.get(name)
        if axes is None:
            out[name] = w
            continue
        scale = jnp.max(jnp.abs(w.astype(jnp.float32)), axis=axes, keepdims=True) / largest
        scaled = w / scale
        out[name] = (jnp.round(scaled) if int8 else scaled).astype(target)
        out[name + suffix] = scale
    return out


@functools.lru_cache(maxsize=64)
def _cached_shapes(arch: ModelArch, dtype: str, quantization: Quantization | None, kv_heads: int) -> tuple[tuple[str, Any], ...]:
    import jax
    import jax.numpy as jnp

    def init() -> dict[str, jax.Array]:
        params = _init_params(arch, kv_heads, jnp.dtype(dtype))
        return _quantize(params, quantization) if quantization else params

    return tuple(jax.eval_shape(init).items())


def param_shapes(
    arch: ModelArch,
    dtype: str = "bfloat16",
    *,
    quantize: bool | Quantization = False,
    kv_heads: int | None = None,
) -> dict[str, jax.ShapeDtypeStruct]:
    """Abstract parameters (``jax.ShapeDtypeStruct``) of ``arch``; nothing is allocated.

    ``quantize`` turns the decoder matmuls into int8 (``True`` or ``"int8"``) plus
    ``<name>/scale_int8`` float32 arrays, or into fp8 E4M3 (``"fp8"``) plus ``<name>/scale_fp8``
    float32 arrays. ``kv_heads`` lays K/V projections out with that many heads (replicated KV heads).
    """
    quantization: Quantization | None = "int8" if quantize is True else quantize or None
    return dict(_cached_shapes(arch, dtype, quantization, kv_heads or arch.kv_heads))


def param_count(arch: ModelArch) -> int:
    """Number of parameters (scales excluded; K/V heads as the model defines them)."""
    return sum(math.prod(s.shape) for s in param_shapes(arch).values())


def logical_axes(name: str) -> tuple[str | None, ...]:
    for suffix in SCALE_SUFFIXES:
        if name.endswith(suffix):
            weight = name[: -len(suffix)]
            logical = list(_LOGICAL[weight])
            for axis in _QUANTIZED[weight]:
                logical[axis] = None  # reduced to size 1
            return tuple(logical)
    return _LOGICAL[name]


def weight_arrays(arch: ModelArch, dtype: str, quantize: bool | Quantization, kv_heads: int) -> dict[str, AbstractArray]:
    return {
        name: (sds, logical_axes(name), "scale" if name.endswith(SCALE_SUFFIXES) else "weight")
        for name, sds in param_shapes(arch, dtype, quantize=quantize, kv_heads=kv_heads).items()
    }


def kv_cache_arrays(
    arch: ModelArch, batch: int, length: int, kv_heads: int, kv_dtype: str, quant_axis: str
) -> dict[str, AbstractArray]:
    import jax
    import jax.numpy as jnp

    shape = (arch.layers, batch, length, kv_heads, arch.head_dim)
    logical = ("layers", "cache_batch", None, "cache_kv_heads", None)
    out: dict[str, AbstractArray] = {}
    element = FP8_DTYPE if kv_dtype == "fp8" else kv_dtype
    for part in ("key", "value"):
        values = jax.ShapeDtypeStruct(shape, jnp.dtype(element))  # type: ignore[no-untyped-call]
        out[f"kv_cache/{part}"] = (values, logical, "kv_cache")
        if kv_dtype == "int8":
            heads = kv_heads if quant_axis == "dkv" else 1
            scale_logical = ("layers", "cache_batch", None, "cache_kv_heads" if quant_axis == "dkv" else None, None)
            scale = jax.ShapeDtypeStruct((arch.layers, batch, length, heads, 1), jnp.bfloat16)  # type: ignore[no-untyped-call]
            out[f"kv_cache/{part}_scale"] = (scale, scale_logical, "kv_scale")
    return out
