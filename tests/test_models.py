"""Model catalog facts: closed-form counts from the architecture numbers, no jax."""

from __future__ import annotations

import dataclasses

import pytest

from components.catalog.models import MODELS, ModelArch, get_model


def llama_formula(m: ModelArch) -> int:
    # Reference B1: 2·V·d + L·(2·d·H·hd + 2·d·KV·hd + 3·d·F + 2·d) + d
    d, hd = m.d_model, m.head_dim
    per_layer = 2 * d * m.q_heads * hd + 2 * d * m.kv_heads * hd + 3 * d * m.ffn + 2 * d
    return 2 * m.vocab * d + m.layers * per_layer + d


@pytest.mark.parametrize("name", ["llama3.1-405b", "llama3.1-70b", "llama3-8b", "llama2-70b"])
def test_models_llama_formula_matches_published_total(name: str) -> None:
    m = MODELS[name]
    assert m.published_params is not None
    assert llama_formula(m) == m.published_params


def test_models_published_totals_are_the_reference_figures() -> None:
    assert {n: m.published_params for n, m in MODELS.items()} == {
        "llama3.1-405b": 405_853_388_800,
        "llama3.1-70b": 70_553_706_496,
        "llama3-8b": 8_030_261_248,
        "llama2-70b": 68_976_648_192,
        "saxml-175b-32test": None,
    }


def test_models_llama_rows_are_swiglu_untied_gqa() -> None:
    for name in ("llama3.1-405b", "llama3.1-70b", "llama3-8b", "llama2-70b"):
        m = MODELS[name]
        assert (m.gated_mlp, m.tied_embeddings, m.kv_heads, m.head_dim, m.norm) == (True, False, 8, 128, "rmsnorm")
        assert m.maxtext_name == name
        assert m.q_heads * m.head_dim == m.d_model


def test_models_saxml_175b_is_the_lm_cloud_test_servable() -> None:
    m = MODELS["saxml-175b-32test"]
    assert (m.layers, m.d_model, m.ffn, m.q_heads, m.kv_heads, m.head_dim, m.vocab) == (
        96,
        12288,
        49152,
        96,
        96,
        128,
        32000,
    )
    assert not m.gated_mlp
    assert m.tied_embeddings
    assert m.fused_qkv
    assert m.saxml_mesh == (1, 1, 32)
    assert m.saxml_servable == "LmCloudSpmd175B32Test"
    assert m.servable_weight_dtype == "int8"
    assert m.maxtext_name is None


def test_models_kv_bytes_per_token_match_reference_b4() -> None:
    assert MODELS["llama3.1-405b"].kv_bytes_per_token(2) == 516_096
    assert MODELS["llama3.1-405b"].kv_bytes_per_token(1) == 258_048
    assert MODELS["llama3.1-70b"].kv_bytes_per_token(2) == 327_680
    assert MODELS["llama2-70b"].kv_bytes_per_token(1) == 163_840
    assert MODELS["llama3-8b"].kv_bytes_per_token(2) == 131_072
    assert MODELS["saxml-175b-32test"].kv_bytes_per_token(2) == 4_718_592


def test_models_arch_is_frozen_and_validated() -> None:
    m = MODELS["llama3-8b"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.layers = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match="kv_heads 5 must divide q_heads 32"):
        dataclasses.replace(m, kv_heads=5)
    with pytest.raises(ValueError, match="fused qkv"):
        dataclasses.replace(m, fused_qkv=True)


def test_models_get_model_unknown_name_lists_known() -> None:
    assert get_model("llama3-8b") is MODELS["llama3-8b"]
    with pytest.raises(KeyError, match=r"llama3\.1-405b"):
        get_model("llama4")
