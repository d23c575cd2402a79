"""Decoder-only LLM architectures the stacks deploy: pure data, no jax, no Pulumi.

Each entry records the published architecture numbers (see the project's reference notes, part B)
and the structural switches the planner needs to rebuild the parameter tree: gated MLP, tied
embeddings, biases, norm kind. ``components.planner`` turns an entry into abstract arrays.

Llama rows come from MaxText ``configs/models/*.yml`` and Meta's ``sku_list.py``; their
``published_params`` are the exact HF safetensors totals. The Saxml 175B test servable has no
published total: its structure is paxml's ``TransformerLmSpmdAdafactor`` as configured by
``LmCloudSpmd`` (see :data:`SAXML_175B_STRUCTURE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Norm = Literal["rmsnorm", "layernorm"]
Attention = Literal["dense", "hybrid"]
"""dense: every layer attends to the whole context (one KV cache layout); hybrid: layers of several
attention kinds (sliding window, linear) whose KV caches vLLM's hybrid KV-cache manager keeps apart.
The prefill/decode KV connector depends on it (``components/workloads/vllm/disagg.py``)."""


@dataclass(frozen=True)
class ModelArch:
    """One decoder-only transformer, as the parameter tree needs it."""

    name: str
    family: str
    layers: int
    d_model: int
    q_heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool
    """True: one (d_model, vocab) matrix serves as embedding and softmax (paxml shared softmax)."""
    gated_mlp: bool
    """SwiGLU-style gate + up + down (3 matrices) versus GELU/ReLU up + down (2 matrices)."""
    published_params: int | None
    maxtext_name: str | None
    source: str
    norm: Norm = "rmsnorm"
    """RMSNorm has a scale only; LayerNorm has scale and bias."""
    attention_bias: bool = False
    mlp_bias: bool = False
    logits_bias: bool = False
    """Bias on the softmax projection (praxis ``FullSoftmax`` feed-forward default)."""
    fused_qkv: bool = False
    """q, k and v stored as one (3, d_model, heads, head_dim) array (praxis ``combine_qkv``); MHA only."""
    per_dim_scale: bool = False
    """praxis ``DotProductAttention`` learned per-head-dim query scale, shape (head_dim,)."""
    saxml_servable: str | None = None
    saxml_mesh: tuple[int, ...] | None = None
    """ICI mesh the Saxml servable class hard-codes (``ICI_MESH_SHAPE``); None for non-Saxml models."""
    servable_weight_dtype: str | None = None
    """Weight dtype fixed by the servable itself (Saxml's quantize decorator); None = workload chooses."""
    attention: Attention = "dense"
    """Every catalog model is dense: Llama 2/3/3.1 and the paxml LM use full attention in every layer
    (their published configs have no sliding window or linear-attention layers)."""

    def __post_init__(self) -> None:
        if self.fused_qkv and self.kv_heads != self.q_heads:
            raise ValueError(f"{self.name}: fused qkv needs kv_heads == q_heads")
        if self.q_heads % self.kv_heads:
            raise ValueError(f"{self.name}: kv_heads {self.kv_heads} must divide q_heads {self.q_heads}")

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def kv_bytes_per_token(self, elem_bytes: float = 2) -> float:
        """K and V bytes one cached token costs across all layers (reference B4), without scales."""
        return 2 * self.layers * self.kv_heads * self.head_dim * elem_bytes


_MAXTEXT = "AI-Hypercomputer/maxtext src/maxtext/configs/models/{}.yml; meta-llama/llama-models sku_list.py"


def _llama(name: str, layers: int, d: int, q: int, kv: int, ffn: int, vocab: int, params: int) -> ModelArch:
    return ModelArch(
        name=name,
        family="llama",
        layers=layers,
        d_model=d,
        q_heads=q,
        kv_heads=kv,
        head_dim=128,
        ffn=ffn,
        vocab=vocab,
        tied_embeddings=False,
        gated_mlp=True,
        published_params=params,
        maxtext_name=name,
        source=_MAXTEXT.format(name),
    )


SAXML_175B_STRUCTURE = (
    "paxml TransformerLmSpmdAdafactor via LmCloudSpmd: per layer a pre-attention LayerNorm (scale+bias), "
    "combined qkv (3, d, heads, head_dim) and post (d, heads, head_dim) projections without bias "
    "(tr_atten_tpl.use_bias=False), a per_dim_scale (head_dim) (praxis default), then the FFN's own "
    "LayerNorm (scale+bias) and ffn_layer1 (d, ffn)+bias, ffn_layer2 (ffn, d)+bias (praxis "
    "TransformerFeedForward has_bias default); a final LayerNorm; one shared embedding/softmax "
    "(d, vocab) with its softmax bias (vocab) (SEPARATE_EMBEDDING=False); sinusoidal positions, no "
    "parameters. Total 174,350,077,184 = the reference's 96*(4d^2+8d^2)+32000*d (174,339,391,488) plus "
    "10,685,696 bias/norm/scale parameters."
)

MODELS: Mapping[str, ModelArch] = MappingProxyType(
    {
        m.name: m
        for m in (
            _llama("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 405_853_388_800),
            _llama("llama3.1-70b", 80, 8192, 64, 8, 28672, 128256, 70_553_706_496),
            _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8_030_261_248),
            _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 68_976_648_192),
            ModelArch(
                name="saxml-175b-32test",
                family="paxml",
                layers=96,
                d_model=12288,
                q_heads=96,
                kv_heads=96,
                head_dim=128,
                ffn=49152,
                vocab=32000,
                tied_embeddings=True,
                gated_mlp=False,
                published_params=None,
                maxtext_name=None,
                source=(
                    "google/saxml saxml/server/pax/lm/params/lm_cloud.py LmCloudSpmd175B32Test; "
                    "google/paxml paxml/tasks/lm/model_params.py TransformerLmSpmdAdafactor. "
                    + SAXML_175B_STRUCTURE
                ),
                norm="layernorm",
                attention_bias=False,
                mlp_bias=True,
                logits_bias=True,
                fused_qkv=True,
                per_dim_scale=True,
                saxml_servable="LmCloudSpmd175B32Test",
                saxml_mesh=(1, 1, 32),
                # @quantization.for_transformer(quantize_on_the_fly=False): int8 weight-only.
                servable_weight_dtype="int8",
            ),
        )
    }
)


QWEN3_32B = ModelArch(
    name="qwen3-32b",
    family="qwen3",
    layers=64,
    d_model=5120,
    q_heads=64,
    kv_heads=8,
    head_dim=128,
    ffn=25600,
    vocab=151936,
    tied_embeddings=False,
    gated_mlp=True,
    published_params=None,
    maxtext_name=None,
    # Qwen3 also has a per-head RMSNorm on q and k (2 x 128 parameters a layer): left out, 0.00003%.
    source=(
        "Qwen/Qwen3-32B config.json (Qwen3ForCausalLM: num_hidden_layers 64, hidden_size 5120, "
        "num_attention_heads 64, num_key_value_heads 8, head_dim 128, intermediate_size 25600, "
        "vocab_size 151936, tie_word_embeddings false, attention_bias false, hidden_act silu), read "
        "through copies of it in the public code index (2026-11)"
    ),
)
"""A model no stack deploys, only in the serving model's calibration set
(components/catalog/calibration_points.py): tpu-recipes publishes Qwen3-32B runs on tpu7x and
tpu-inference's CI a floor on v6e, where no Llama run exists. Not in :data:`MODELS`, so no stack can
name it."""

ARCHITECTURES: Mapping[str, ModelArch] = MappingProxyType({**MODELS, QWEN3_32B.name: QWEN3_32B})
"""Every architecture the planner can size: the stacks' models and the calibration-only ones."""

def get_model(name: str) -> ModelArch:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None
