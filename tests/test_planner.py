"""Capacity planner: parameter trees, per-chip memory, meshes, derived flags, slice choice.

Workload numbers come from the seed manifests (reference: upstream-manifests.md sections 1-5).
"""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from components import planner
from components.catalog import tpu as tpu_catalog
from components.catalog.models import MODELS, ModelArch
from components.catalog.tpu import TpuSlice, all_slices, find_slice
from components.planner import PlanError, ServingWorkload, TrainingWorkload
from tests import tpu_test_catalog

GB = 10**9
ROOT = Path(__file__).resolve().parents[1]


def slice_of(generation: str, topology: str, machine_type: str | None = None) -> TpuSlice:
    found = find_slice(generation, topology, machine_type)
    assert found is not None
    return found


# Seed workloads.
SEED_405B = ServingWorkload(  # §1: JetStream + MaxText, v6e 4x4
    "maxtext",
    max_target_length=2048,
    max_prefill_length=1024,
    per_device_batch_size=6,
    weight_dtype="int8",
    kv_dtype="int8",
)
SEED_VLLM_70B = ServingWorkload("vllm", max_target_length=4096)  # §4: --max-model-len=4096, TP 8
SEED_LLAMA2_70B = ServingWorkload(  # §2: disaggregated, each slice v6e 2x4, ici_tensor_parallelism=-1
    "maxtext",
    max_target_length=2048,
    max_prefill_length=1024,
    per_device_batch_size=27,
    weight_dtype="int8",
    kv_dtype="int8",
    parallelism={"fsdp": 1, "autoregressive": 1, "tensor": -1},
)
SEED_SAXML = ServingWorkload("saxml", max_target_length=128 + 128, max_prefill_length=128, batch_size=1)  # §3
SEED_TRAIN_8B = TrainingWorkload(per_device_batch_size=1, max_target_length=4096)  # §5


# --- parameter trees ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_param_count_matches_published_or_reference(name: str) -> None:
    arch = MODELS[name]
    count = planner.param_count(arch)
    if arch.published_params is not None:
        assert count == arch.published_params
    else:
        d, v = arch.d_model, arch.vocab
        reference = 96 * (4 * d * d + 2 * d * 4 * d) + v * d  # reference B2, ≈174.3B
        extras = 96 * (2 * d + 2 * d + arch.ffn + d + arch.head_dim) + v + 2 * d  # norms, biases, per_dim_scale
        assert count == reference + extras == 174_350_077_184
        assert abs(count - reference) / reference < 1e-4


def test_param_shapes_are_abstract_and_layer_stacked() -> None:
    import jax

    shapes = planner.param_shapes(MODELS["llama3.1-405b"])
    assert all(isinstance(s, jax.ShapeDtypeStruct) for s in shapes.values())
    assert shapes["decoder/attention/query"].shape == (126, 16384, 128, 128)
    assert shapes["decoder/attention/key"].shape == (126, 16384, 8, 128)
    assert shapes["decoder/mlp/wi_0"].shape == (126, 16384, 53248)
    assert shapes["embed/tokens"].shape == (128256, 16384)
    assert {str(s.dtype) for s in shapes.values()} == {"bfloat16"}


def test_param_shapes_int8_adds_per_channel_float32_scales() -> None:
    shapes = planner.param_shapes(MODELS["llama3-8b"], quantize=True)
    assert str(shapes["decoder/mlp/wo"].dtype) == "int8"
    assert shapes["decoder/mlp/wo/scale_int8"].shape == (32, 1, 4096)
    assert shapes["decoder/attention/out/scale_int8"].shape == (32, 1, 1, 4096)
    assert shapes["decoder/attention/key/scale_int8"].shape == (32, 1, 8, 128)
    assert str(shapes["decoder/attention/key/scale_int8"].dtype) == "float32"
    # Embedding, unembedding and norms stay bf16.
    assert str(shapes["embed/tokens"].dtype) == str(shapes["logits/kernel"].dtype) == "bfloat16"
    assert str(shapes["decoder/attn_norm/scale"].dtype) == "bfloat16"


def test_param_shapes_saxml_follows_paxml_structure() -> None:
    shapes = planner.param_shapes(MODELS["saxml-175b-32test"])
    assert shapes["decoder/attention/qkv"].shape == (96, 3, 12288, 96, 128)
    assert shapes["embed/shared"].shape == (12288, 32000)
    assert shapes["decoder/mlp/wi_bias"].shape == (96, 49152)
    assert "logits/kernel" not in shapes
    assert "decoder/mlp/wi_0" not in shapes
    assert "decoder/attention/query_bias" not in shapes  # tr_atten_tpl.use_bias=False


# --- seed stacks -------------------------------------------------------------------------------


def test_serving_llama405b_int8_v6e_4x4_fits_with_seed_flags() -> None:
    arch = MODELS["llama3.1-405b"]
    p = planner.plan(arch, slice_of("v6e", "4x4"), SEED_405B)
    assert dict(p.sharding.flags) == {
        "ici_fsdp_parallelism": 1,
        "ici_autoregressive_parallelism": 2,
        "ici_tensor_parallelism": 8,
    }
    assert p.global_batch == 96
    # Weights: int8 layer matmuls and bf16 embedding+unembedding split 16 ways. float32 scales follow
    # their output axes: q/wi scales 16 ways, k/v scales 8 ways (their autoregressive split was on the
    # reduced embed rows), o/wo scales on 'embed' with fsdp=1 replicated; bf16 norms replicated.
    layers, d, heads, kv, hd, ffn, vocab = 126, 16384, 128, 8, 128, 53248, 128256
    int8 = layers * (2 * d * heads * hd + 2 * d * kv * hd + 3 * d * ffn)
    scales_16 = 4 * layers * (heads * hd + 2 * ffn)
    scales_8 = 4 * layers * 2 * kv * hd
    replicated = 4 * layers * 2 * d + 2 * (2 * layers * d + d)
    assert p.memory.weights == (int8 + 2 * 2 * vocab * d + scales_16) // 16 + scales_8 // 8 + replicated
    # KV: 96 x 2048 tokens x (258,048 int8 + 504 scale bytes); values 16-way, scales only over autoregressive.
    tokens = 96 * 2048
    assert p.memory.kv_cache == tokens * 258_048 // 16 + tokens * 504 // 2
    assert p.fits
    assert 1.0 * GB < p.memory.margin < 2.0 * GB  # 30.48 of 32 GB
    # The 5% default reserve is what lets the known-good seed plan; 10% would reject it.
    tight = ServingWorkload(**{**SEED_405B.__dict__, "reserve_fraction": 0.10})
    assert not planner.plan(arch, slice_of("v6e", "4x4"), tight).fits


def test_serving_llama31_70b_bf16_vllm_v6e_2x4_8t_fits() -> None:
    p = planner.plan(MODELS["llama3.1-70b"], slice_of("v6e", "2x4", "ct6e-standard-8t"), SEED_VLLM_70B)
    assert dict(p.sharding.flags) == {"tensor_parallel_size": 8}
    assert not p.sharding.kv_heads_replicated
    assert p.memory.weights == 70_553_706_496 * 2 // 8 + 2 * (2 * 80 * 8192 + 8192) * 7 // 8
    assert p.memory.kv_cache == 4096 * 327_680 // 8
    assert p.memory.reserve == int(0.10 * 32 * GB)  # vLLM's gpu_memory_utilization=0.9
    assert p.fits
    assert p.memory.margin > 10 * GB
    assert p.kv_capacity_sequences == 66  # full 4096-token sequences the rest of HBM holds


def test_serving_llama2_70b_int8_v6e_2x4_fits_with_tensor_fill() -> None:
    p = planner.plan(MODELS["llama2-70b"], slice_of("v6e", "2x4", "ct6e-standard-4t"), SEED_LLAMA2_70B)
    assert dict(p.sharding.mesh_axes) == {"fsdp": 1, "autoregressive": 1, "tensor": 8}
    assert p.global_batch == 27 * 8
    assert p.memory.kv_cache == 216 * 2048 * 163_840 // 8 + 216 * 2048 * 320
    assert p.fits
    assert 19 * GB < p.memory.total < 20 * GB


def test_serving_saxml_175b_int8_v5e_4x8_fits() -> None:
    p = planner.plan(MODELS["saxml-175b-32test"], slice_of("v5e", "4x8"), SEED_SAXML)
    assert dict(p.sharding.flags) == {"saxml_mesh": [1, 1, 32]}
    assert p.weight_dtype == "int8"
    assert p.fits
    assert 5.4 * GB < p.memory.weights < 5.6 * GB  # ≈174 GB int8 / 32
    assert p.memory.kv_cache == 256 * 4_718_592 // 32


def test_serving_saxml_175b_v5e_4x4_is_rejected_by_the_servable_mesh() -> None:
    arch, small = MODELS["saxml-175b-32test"], slice_of("v5e", "4x4")
    with pytest.raises(PlanError, match=r"mdl=32 has 32 devices but slice v5e-4x4 has 16 chips") as info:
        planner.verify_slice(arch, SEED_SAXML, small)
    assert "smallest slice that fits: v5e-4x8" in str(info.value)
    # Memory is not the obstacle: a [1,1,16] mesh (LmCloudSpmd175BTest) would hold it in ~11.7 of 16 GB.
    p = planner.plan(arch, small, ServingWorkload(**{**SEED_SAXML.__dict__, "parallelism": {"mdl": 16}}))
    assert p.fits
    assert 11 * GB < p.memory.total < 12.5 * GB


def test_serving_saxml_175b_v5e_2x4_does_not_fit_in_hbm() -> None:
    workload = ServingWorkload(**{**SEED_SAXML.__dict__, "parallelism": {"mdl": -1}})
    with pytest.raises(PlanError) as info:
        planner.verify_slice(MODELS["saxml-175b-32test"], workload, slice_of("v5e", "2x4", "ct5lp-hightpu-8t"))
    message = str(info.value)
    assert "saxml-175b-32test needs 22." in message
    assert "a v5e chip has 16.0 GB HBM" in message
    assert "smallest slice that fits: v5e-4x4" in message


def test_serving_saxml_rejects_bf16_for_int8_servable() -> None:
    workload = ServingWorkload(**{**SEED_SAXML.__dict__, "weight_dtype": "bfloat16"})
    with pytest.raises(PlanError, match="LmCloudSpmd175B32Test with int8 weights"):
        planner.plan(MODELS["saxml-175b-32test"], slice_of("v5e", "4x8"), workload)


def test_training_llama3_8b_v6e_4x4_fits_with_seed_flags() -> None:
    arch = MODELS["llama3-8b"]
    p = planner.plan(arch, slice_of("v6e", "4x4"), SEED_TRAIN_8B)
    assert dict(p.sharding.flags) == {"ici_fsdp_parallelism": 4, "ici_tensor_parallelism": 4}
    replicated = 4 * (2 * 32 * 4096 + 4096)  # fp32 norms
    assert p.memory.weights == (8_030_261_248 * 4 - replicated) // 16 + replicated
    assert p.memory.optimizer == 3 * p.memory.weights  # fp32 grads + Adam mu, nu
    assert p.memory.activations == planner.training_activation_bytes(arch, 4096)
    assert p.fits
    assert 15 * GB < p.memory.total < 17 * GB


def test_training_bf16_params_keep_float32_adam_moments() -> None:
    p = planner.plan(MODELS["llama3-8b"], slice_of("v6e", "4x4"), TrainingWorkload(1, 4096, param_dtype="bfloat16"))
    assert p.memory.optimizer == 5 * p.memory.weights  # bf16 grads + 2 x fp32 moments = 2 + 8 bytes


def test_training_activation_estimate_is_linear_in_tokens() -> None:
    arch = MODELS["llama3-8b"]
    # The 8B seed (1 x 4096 tokens per chip): ~6.35 GB, most of it the float32 logits and their gradient.
    assert planner.training_activation_bytes(arch, 4096) == 6_350_176_256
    assert planner.training_activation_bytes(arch, 8192) == 2 * planner.training_activation_bytes(arch, 4096)


def test_training_derived_mesh_follows_short_torus_side() -> None:
    arch = MODELS["llama3-8b"]
    assert planner.derive_parallelism(arch, slice_of("v6e", "4x8"), SEED_TRAIN_8B) == {"fsdp": 8, "tensor": 4}
    assert planner.derive_parallelism(arch, slice_of("v6e", "1x1"), SEED_TRAIN_8B) == {"fsdp": 1, "tensor": 1}
    # 16x16: tensor 16 would split 8 KV heads, so the next divisor wins.
    assert planner.derive_parallelism(arch, slice_of("v6e", "16x16"), SEED_TRAIN_8B) == {"fsdp": 32, "tensor": 8}


def test_training_batch_must_split_over_fsdp() -> None:
    with pytest.raises(PlanError, match=r"global batch 2.0 .* does not split over fsdp 4"):
        planner.plan(MODELS["llama3-8b"], slice_of("v6e", "4x4"), TrainingWorkload(0.125, 4096))


# --- sharding errors and overrides ------------------------------------------------------------


def test_sharding_tensor_not_dividing_kv_heads_names_both_numbers() -> None:
    workload = ServingWorkload(**{**SEED_405B.__dict__, "parallelism": {"tensor": 16}})
    with pytest.raises(PlanError) as info:
        planner.plan(MODELS["llama3.1-405b"], slice_of("v6e", "4x4"), workload)
    assert str(info.value).startswith(
        "tensor parallelism 16 does not divide kv_heads 8 of llama3.1-405b; use a tensor degree dividing 8 or replicate KV heads"
    )


def test_sharding_replicated_kv_heads_allow_tensor_16_at_double_cache() -> None:
    arch, tpu = MODELS["llama3.1-405b"], slice_of("v6e", "4x4")
    replicated = planner.plan(
        arch, tpu, ServingWorkload(**{**SEED_405B.__dict__, "parallelism": {"tensor": 16}, "replicate_kv_heads": True})
    )
    split = planner.plan(arch, tpu, SEED_405B)
    assert replicated.sharding.kv_heads == 16
    assert replicated.sharding.kv_heads_replicated
    assert replicated.memory.kv_cache > 1.9 * split.memory.kv_cache  # every chip caches a whole KV head
    assert not replicated.fits


def test_sharding_q_heads_not_divisible_is_an_error() -> None:
    workload = ServingWorkload("vllm", 4096, parallelism={"tensor": 3})
    tpu = TpuSlice(slice_of("v6e", "1x1").generation, "1x3", 3)  # hypothetical 3-chip host
    with pytest.raises(PlanError, match="tensor parallelism 3 does not divide kv_heads 8 of llama3-8b"):
        planner.plan(MODELS["llama3-8b"], tpu, workload)
    pax = MODELS["saxml-175b-32test"]
    with pytest.raises(PlanError, match=r"mdl parallelism 64 does not divide heads 96 of saxml-175b-32test"):
        planner.plan(pax, slice_of("v5e", "8x8"), ServingWorkload("saxml", 256, parallelism={"mdl": 64}))


def test_sharding_mesh_product_mismatch_names_both_numbers() -> None:
    workload = ServingWorkload(**{**SEED_405B.__dict__, "parallelism": {"tensor": 8}})
    with pytest.raises(PlanError, match=r"has 8 devices but slice v6e-4x4 has 16 chips; choose degrees whose product is 16"):
        planner.plan(MODELS["llama3.1-405b"], slice_of("v6e", "4x4"), workload)
    with pytest.raises(PlanError, match=r"tensor=4 has 4 devices but slice v6e-2x4-8t has 8 chips"):
        planner.plan(
            MODELS["llama3.1-70b"],
            slice_of("v6e", "2x4", "ct6e-standard-8t"),
            ServingWorkload("vllm", 4096, parallelism={"tensor": 4}),
        )


def test_sharding_rejects_unknown_axes_and_double_fill() -> None:
    arch, tpu = MODELS["llama3-8b"], slice_of("v6e", "2x2")
    with pytest.raises(PlanError, match=r"unknown mesh axes \['mdl'\]"):
        planner.plan(arch, tpu, ServingWorkload("maxtext", 1024, parallelism={"mdl": 4}))
    with pytest.raises(PlanError, match="at most one -1"):
        planner.plan(arch, tpu, ServingWorkload("maxtext", 1024, parallelism={"tensor": -1, "fsdp": -1}))
    with pytest.raises(PlanError, match="other axes multiply to 3"):
        planner.plan(arch, tpu, ServingWorkload("maxtext", 1024, parallelism={"tensor": -1, "fsdp": 3}))


def test_sharding_vllm_multi_host_is_pipeline_across_hosts_and_tensor_within() -> None:
    # tpu-inference's support matrix: multi-host PP passes, multi-host TP is untested.
    p = planner.plan(MODELS["llama3.1-70b"], slice_of("v6e", "2x4", "ct6e-standard-4t"), SEED_VLLM_70B)
    assert p.sharding.mesh_axes == {"pipeline": 2, "tensor": 4}
    assert p.sharding.flags == {"pipeline_parallel_size": 2, "tensor_parallel_size": 4}
    one_host = planner.plan(MODELS["llama3.1-70b"], slice_of("v6e", "2x4", "ct6e-standard-8t"), SEED_VLLM_70B)
    assert one_host.sharding.flags == {"tensor_parallel_size": 8}
    # Splitting the layers over two stages halves each chip's share of the decoder weights.
    assert p.memory.weights < one_host.memory.weights * 2


def test_sharding_maxtext_default_keeps_tensor_within_kv_heads() -> None:
    arch = MODELS["llama3.1-405b"]
    assert planner.derive_parallelism(arch, slice_of("v6e", "8x8"), SEED_405B) == {
        "fsdp": 1,
        "autoregressive": 8,
        "tensor": 8,
    }
    assert planner.derive_parallelism(arch, slice_of("v6e", "2x2"), SEED_405B) == {
        "fsdp": 1,
        "autoregressive": 1,
        "tensor": 4,
    }


def test_sharding_build_mesh_is_abstract() -> None:
    from jax.sharding import AbstractMesh

    mesh = planner.build_mesh({"fsdp": 1, "autoregressive": 2, "tensor": 8})
    assert isinstance(mesh, AbstractMesh)
    assert dict(mesh.shape) == {"fsdp": 1, "autoregressive": 2, "tensor": 8}


def test_workload_validation_errors() -> None:
    with pytest.raises(PlanError, match="not both"):
        ServingWorkload("vllm", 4096, per_device_batch_size=1, batch_size=2)
    with pytest.raises(PlanError, match="max_prefill_length 4096 must be positive and below max_target_length 4096"):
        ServingWorkload("maxtext", 4096, max_prefill_length=4096)
    with pytest.raises(PlanError, match="reserve_fraction"):
        ServingWorkload("vllm", 4096, reserve_fraction=1.5)
    with pytest.raises(PlanError, match="unknown serving engine"):
        ServingWorkload("tgi", 4096)
    with pytest.raises(PlanError, match="training is planned for maxtext only, got 'vllm'"):
        TrainingWorkload(1, 4096, engine="vllm")


# --- engine profiles and errors ----------------------------------------------------------------


def test_unknown_engines_and_modes_name_the_engine_key() -> None:
    with pytest.raises(PlanError, match="unknown engine 'tgi'; use maxtext, vllm or saxml") as info:
        planner.single_host_only("tgi")
    assert info.value.field == "engine"
    with pytest.raises(PlanError, match="no train plan for engine 'vllm'") as info:
        planner.mesh_axis_names("vllm", "train")
    assert info.value.field == "engine"


def test_plan_error_fields_are_a_closed_set() -> None:
    assert PlanError("x").field == "slice"
    with pytest.raises(ValueError, match="is not one of"):
        PlanError("x", "topology")  # type: ignore[arg-type]


def test_planner_package_imports_no_jax_pulumi_or_config_and_no_cycle() -> None:
    # jax loads on the first plan only; the planner is below config and the Pulumi program.
    code = (
        "import sys, components.planner; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'pulumi') or m.startswith('components.config')))"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert run.stdout.strip() == "[]"
    # Submodules import their siblings, never the package (which re-exports them): no import cycle.
    for path in (ROOT / "components" / "planner").glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "components.planner", path.name
                assert not (node.module == "components" and any(a.name == "planner" for a in node.names)), path.name
            elif isinstance(node, ast.Import):
                assert all(a.name != "components.planner" for a in node.names), path.name


# --- slice selection --------------------------------------------------------------------------


def test_select_slice_llama31_70b_vllm_single_host_v6e_is_2x4_8t() -> None:
    p = planner.select_slice(MODELS["llama3.1-70b"], SEED_VLLM_70B, region="us-east5", generations=["v6e"], single_host_only=True)
    assert p.slice.key == "v6e-2x4-8t"
    assert p.price_per_hour == pytest.approx(8 * 2.70)
    assert dict(p.sharding.flags) == {"tensor_parallel_size": 8}


def test_select_slice_small_model_takes_a_smaller_slice() -> None:
    p = planner.select_slice(MODELS["llama3-8b"], SEED_VLLM_70B, region="us-east5", generations=["v6e"])
    assert p.slice.key == "v6e-1x1"
    assert p.price_per_hour == pytest.approx(2.70)


def test_select_slice_spot_prices_change_the_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # us-south1: v5e on-demand $1.416 with no spot price; v6e on-demand $2.70, spot $1.35.
    workload = ServingWorkload("maxtext", 2048, per_device_batch_size=1, weight_dtype="int8", kv_dtype="int8")
    arch = MODELS["llama3-8b"]
    on_demand = planner.select_slice(arch, workload, region="us-south1")
    spot = planner.select_slice(arch, workload, region="us-south1", capacity="spot")
    assert on_demand.slice.key == "v5e-1x1"
    assert on_demand.price_per_hour == pytest.approx(1.416)
    assert spot.slice.key == "v6e-1x1"
    assert spot.price_per_hour == pytest.approx(1.35)
    assert spot.spot
    assert spot.to_dict()["capacity_type"] == "spot"


def test_select_slice_unpriced_slices_rank_last_but_stay_eligible() -> None:
    # Candidates from v5e and v6e in us-west4, which prices v5e only; the 70B bf16 weights (141 GB)
    # exceed every single-host v5e slice.
    both = [s for s in all_slices() if s.generation.name in ("v5e", "v6e")]
    p = planner.select_slice(MODELS["llama3.1-70b"], SEED_VLLM_70B, both, region="us-west4", single_host_only=True)
    assert p.slice.key == "v6e-2x4-8t"
    assert p.price_per_hour is None
    # 8B bf16 fits v6e-1x1 (one chip), but unpriced it ranks after the priced v5e-2x2 (16 GB of weights
    # overflow a 16 GB v5e chip, so 4 chips x $1.20).
    small = planner.select_slice(MODELS["llama3-8b"], SEED_VLLM_70B, both, region="us-west4")
    assert small.slice.key == "v5e-2x2"
    assert small.price_per_hour == pytest.approx(4 * 1.20)
    assert planner.plan(MODELS["llama3-8b"], slice_of("v6e", "1x1"), SEED_VLLM_70B).fits


def test_select_slice_across_generations_considers_those_documented_in_the_region(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # us-west4 documents v5e only: no v6e alternative there, so the 70B does not fit single-host.
    with pytest.raises(PlanError, match=r"3 considered: v5e-1x1"):
        planner.select_slice(MODELS["llama3.1-70b"], SEED_VLLM_70B, region="us-west4", single_host_only=True)
    # us-central1 documents every generation; tpu7x is unpriced there, so a priced slice wins.
    p = planner.select_slice(MODELS["llama3.1-70b"], SEED_VLLM_70B, region="us-central1", single_host_only=True)
    assert p.slice.generation.name in {g for g, gen in tpu_catalog.GENERATIONS.items() if "us-central1" in gen.regions()}
    assert p.price_per_hour is not None


def test_select_slice_respects_candidates_and_margin() -> None:
    arch = MODELS["llama3.1-70b"]
    candidates = [slice_of("v6e", "2x4", "ct6e-standard-8t")]
    assert planner.select_slice(arch, SEED_VLLM_70B, candidates, region="us-east5").slice.key == "v6e-2x4-8t"
    with pytest.raises(PlanError, match=r"no candidate slice fits llama3.1-70b .*v6e-2x4-8t: needs 21.01 GB of 32.0 GB"):
        planner.select_slice(arch, SEED_VLLM_70B, candidates, region="us-east5", min_margin_fraction=0.5)


def test_select_slice_nothing_fits_lists_reasons() -> None:
    with pytest.raises(PlanError, match=r"no candidate slice fits llama3.1-405b \(vllm serve\); 3 considered"):
        planner.select_slice(
            MODELS["llama3.1-405b"], SEED_VLLM_70B, region="us-east5", generations=["v6e"], single_host_only=True
        )


def test_verify_slice_returns_margin_for_a_fit() -> None:
    p = planner.verify_slice(MODELS["llama3.1-405b"], SEED_405B, slice_of("v6e", "4x4"), region="us-east5", capacity="spot")
    assert p.memory.margin == p.memory.hbm - p.memory.total > 0
    assert p.price_per_hour == pytest.approx(16 * 1.215)


def test_a_slice_is_priced_at_the_capacity_type_it_is_asked_for() -> None:
    """The planner prices a slice at the stack's preferred tier (the catalog's rate for that type):
    flex-start and queued provisioning at the flex-start rate, a reservation at the on-demand rate."""
    tpu = slice_of("v6e", "4x4")
    rates = {
        "flexStart": tpu_catalog.GENERATIONS["v6e"].flex_start_prices["us-east5"],
        "queuedProvisioning": tpu_catalog.GENERATIONS["v6e"].flex_start_prices["us-east5"],
        "reservation": 2.70,
        "onDemand": 2.70,
    }
    for capacity, rate in rates.items():
        p = planner.verify_slice(MODELS["llama3.1-405b"], SEED_405B, tpu, region="us-east5", capacity=capacity)
        assert (p.capacity, p.spot) == (capacity, False)
        assert p.price_per_hour == pytest.approx(16 * rate), capacity


def test_verify_slice_overflow_names_model_need_hbm_and_smallest_fit() -> None:
    with pytest.raises(PlanError) as info:
        planner.verify_slice(MODELS["llama3.1-70b"], SEED_VLLM_70B, slice_of("v6e", "2x2"))
    assert str(info.value) == (
        "llama3.1-70b needs 38.81 GB per chip on v6e-2x2 (weights 35.28 + KV cache 0.34 + reserve 3.20 GB) "
        "but a v6e chip has 32.0 GB HBM; smallest slice that fits: v6e-2x4-8t (8 chips, 21.01 GB per chip)"
    )


def test_plan_to_dict_is_json() -> None:
    p = planner.plan(MODELS["llama3.1-405b"], slice_of("v6e", "4x4"), SEED_405B, region="us-east5")
    data = json.loads(json.dumps(p.to_dict(include_arrays=True)))
    assert data["sharding"]["flags"]["ici_tensor_parallelism"] == 8
    assert data["memory"]["total_bytes"] == p.memory.total
    assert data["memory"]["fits"] is True
    assert data["slice"]["key"] == "v6e-4x4"
    assert data["arrays"]["decoder/attention/key"]["spec"] == [None, "autoregressive", "tensor", None]
    assert data["arrays"]["decoder/mlp/wi_0"]["spec"] == [None, None, ["tensor", "autoregressive"]]
    assert "arrays" not in p.to_dict()


def test_plan_every_catalog_slice_lays_out_or_explains() -> None:
    arch = MODELS["llama3-8b"]
    for tpu in all_slices():
        p = planner.plan(arch, tpu, ServingWorkload("maxtext", 2048, per_device_batch_size=1))
        assert math.prod(p.sharding.mesh_axes.values()) == tpu.chips


# --- cross-check against XLA's real shards ------------------------------------------------------

_XLA_CHECK = textwrap.dedent(
    """
    import json
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from components import planner
    from components.catalog.models import ModelArch
    from components.catalog.tpu import find_slice

    # Llama 3.1 405B ratios (128 q heads over 8 KV heads, ffn = 3.25 d, SwiGLU, untied), tiny dims.
    llama = ModelArch(name="tiny-llama", family="llama", layers=2, d_model=512, q_heads=128, kv_heads=8,
                      head_dim=4, ffn=1664, vocab=1024, tied_embeddings=False, gated_mlp=True,
                      published_params=None, maxtext_name=None, source="test")
    pax = ModelArch(name="tiny-pax", family="paxml", layers=2, d_model=256, q_heads=16, kv_heads=16,
                    head_dim=16, ffn=1024, vocab=512, tied_embeddings=True, gated_mlp=False,
                    published_params=None, maxtext_name=None, source="test", norm="layernorm",
                    mlp_bias=True, logits_bias=True, fused_qkv=True, per_dim_scale=True,
                    saxml_mesh=(1, 1, 16), servable_weight_dtype="int8")
    v6e16, v6e8 = find_slice("v6e", "4x4"), find_slice("v6e", "2x4", "ct6e-standard-8t")
    S, T = planner.ServingWorkload, planner.TrainingWorkload
    cases = {
        "maxtext-serve-int8": (llama, v6e16, S("maxtext", 64, 32, per_device_batch_size=6,
                                               weight_dtype="int8", kv_dtype="int8")),
        "maxtext-serve-replicated-kv": (llama, v6e16, S("maxtext", 64, per_device_batch_size=2,
                                                        parallelism={"tensor": 16}, replicate_kv_heads=True)),
        "maxtext-train": (llama, v6e16, T(1, 64)),
        "vllm": (llama, v6e8, S("vllm", 128, batch_size=4)),
        "saxml": (pax, v6e16, S("saxml", 64, batch_size=2)),
    }
    out = {}
    for label, (arch, tpu, workload) in cases.items():
        plan = planner.plan(arch, tpu, workload)
        axes = plan.sharding.mesh_axes
        devices = np.array(jax.devices()[: tpu.chips]).reshape(tuple(axes.values()))
        mesh = Mesh(devices, tuple(axes.keys()))
        per_device = {d.id: {"weights": 0, "kv": 0} for d in devices.flat}
        shapes_ok = True
        for a in plan.arrays.values():
            x = jax.device_put(np.zeros(a.shape, a.dtype), NamedSharding(mesh, PartitionSpec(*a.spec)))
            bucket = "kv" if a.kind.startswith("kv") else "weights"
            for shard in x.addressable_shards:
                shapes_ok &= tuple(shard.data.shape) == a.shard_shape
                per_device[shard.device.id][bucket] += shard.data.nbytes
        # XLA's own accounting: compile a function over the sharded arrays and read the per-device
        # argument bytes of the partitioned program from its memory analysis.
        compiled = {}
        for bucket in ("weights", "kv"):
            arrs = [a for a in plan.arrays.values() if a.kind.startswith("kv") == (bucket == "kv")]
            specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, PartitionSpec(*a.spec)))
                     for a in arrs]
            fn = jax.jit(lambda *xs: sum(x.sum().astype("float32") for x in xs))
            compiled[bucket] = fn.lower(*specs).compile().memory_analysis().argument_size_in_bytes if arrs else 0
        out[label] = {
            "compiled_weights": compiled["weights"],
            "compiled_kv": compiled["kv"],
            "mesh": dict(axes),
            "shapes_ok": shapes_ok,
            "devices": len(per_device),
            "xla_weights": sorted({v["weights"] for v in per_device.values()}),
            "xla_kv": sorted({v["kv"] for v in per_device.values()}),
            "planner_weights": plan.memory.weights,
            "planner_kv": plan.memory.kv_cache,
        }
    print(json.dumps(out))
    """
)


@pytest.mark.slow  # a fresh interpreter with 16 fake devices compiling five programs: ~5 s
def test_xla_cross_check_shard_bytes_and_compiled_memory_match_planner() -> None:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=16",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    run = subprocess.run([sys.executable, "-c", _XLA_CHECK], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert results["maxtext-serve-int8"]["mesh"] == {"fsdp": 1, "autoregressive": 2, "tensor": 8}
    assert results["maxtext-train"]["mesh"] == {"fsdp": 4, "tensor": 4}
    for label, r in results.items():
        assert r["shapes_ok"], label
        assert r["devices"] == (8 if label == "vllm" else 16), label
        # Every device holds the same bytes (no padding, no uneven shards) and it is the planner's figure.
        assert r["xla_weights"] == [r["planner_weights"]], label
        assert r["xla_kv"] == [r["planner_kv"]], label
        assert r["planner_weights"] > 0, label
        # XLA's compiled memory analysis per device: weights within 1 %, KV cache within 5 %.
        assert abs(r["compiled_weights"] - r["planner_weights"]) <= 0.01 * r["planner_weights"], label
        assert abs(r["compiled_kv"] - r["planner_kv"]) <= 0.05 * max(r["planner_kv"], 1), label


def test_sharding_no_default_mesh_reports_the_attempts() -> None:
    # 5 KV heads on 16 chips: no tensor degree > 1 divides them, and a batch of one sequence cannot
    # split over fsdp/autoregressive either, so every candidate mesh fails.
    odd = ModelArch(
        name="odd",
        family="llama",
        layers=1,
        d_model=640,
        q_heads=40,
        kv_heads=5,
        head_dim=16,
        ffn=1024,
        vocab=1024,
        tied_embeddings=False,
        gated_mlp=True,
        published_params=None,
        maxtext_name=None,
        source="test",
    )
    with pytest.raises(PlanError, match=r"no maxtext serve mesh over the 16 chips of v6e-4x4 splits odd evenly"):
        planner.plan(odd, slice_of("v6e", "4x4"), ServingWorkload("maxtext", 128))
    # With a batch of 16 the fallback puts the slice on fsdp x autoregressive (40 q heads over 8).
    derived = planner.derive_parallelism(odd, slice_of("v6e", "4x4"), ServingWorkload("maxtext", 128, per_device_batch_size=1))
    assert derived == {"fsdp": 2, "autoregressive": 8, "tensor": 1}


# ---------------------------------------------------------------- fp8 weights and KV cache (issue 15)


def test_fp8_weights_halve_the_quantized_matrices_and_count_their_scales() -> None:
    import jax  # for the annotation below; the planner has imported it already

    arch = MODELS["llama3-8b"]
    bf16 = planner.param_shapes(arch)
    fp8 = planner.param_shapes(arch, quantize="fp8")
    quantized = {n for n in bf16 if n.startswith(("decoder/attention/", "decoder/mlp/"))}
    assert quantized
    assert all(str(fp8[n].dtype) == "float8_e4m3fn" for n in quantized)
    for name in set(bf16) - quantized:  # embedding, lm_head, norms stay bf16
        assert str(fp8[name].dtype) == "bfloat16", name
    # One float32 scale per output channel, shaped like the int8 ones.
    assert fp8["decoder/mlp/wo/scale_fp8"].shape == (32, 1, 4096)
    assert fp8["decoder/attention/key/scale_fp8"].shape == (32, 1, 8, 128)
    assert str(fp8["decoder/attention/key/scale_fp8"].dtype) == "float32"

    def nbytes(shapes: dict[str, jax.ShapeDtypeStruct], names: set[str] | None = None) -> int:
        return sum(math.prod(s.shape) * s.dtype.itemsize for n, s in shapes.items() if names is None or n in names)

    matrices = nbytes(bf16, quantized)
    rest = nbytes(bf16) - matrices
    scales = nbytes(fp8, {n for n in fp8 if n.endswith("/scale_fp8")})
    out_channels = 32 * (4096 + 8 * 128 * 2 + 4096 + 14336 * 2 + 4096)  # q, k, v, o, gate, up, down outputs
    assert scales == out_channels * 4
    assert nbytes(fp8) == matrices // 2 + rest + scales


def test_fp8_405b_on_one_tpu7x_host_is_about_405_gb_with_tp_8() -> None:
    tpu = slice_of("tpu7x", "2x2x1")
    arch = MODELS["llama3.1-405b"]
    bf16 = planner.plan(arch, tpu, ServingWorkload("vllm", 8192, batch_size=64))
    fp8 = planner.plan(arch, tpu, ServingWorkload("vllm", 8192, batch_size=64, weight_dtype="fp8", kv_dtype="fp8"))
    # tpu7x chips are two JAX devices each: vLLM's tensor-parallel size is twice the chips.
    assert fp8.sharding.flags == {"tensor_parallel_size": 8} == bf16.sharding.flags
    assert (fp8.weight_dtype, fp8.kv_dtype) == ("fp8", "fp8")
    total = fp8.memory.weights * tpu.chips
    assert 405 * GB < total < 415 * GB  # 1 byte per matmul weight + bf16 embeddings/lm_head + scales
    assert not bf16.fits  # ~811 GB of bf16 weights exceed 4 x 192 GB
    assert fp8.fits
    assert fp8.memory.kv_cache * 2 == bf16.memory.kv_cache  # fp8 KV: 1 byte per element
    kv_arrays = [a for a in fp8.arrays.values() if a.kind == "kv_cache"]
    assert kv_arrays
    assert all(a.dtype == "float8_e4m3fn" for a in kv_arrays)
    assert not [a for a in fp8.arrays.values() if a.kind == "kv_scale"]


def test_fp8_kv_cache_alone_halves_the_cache_and_keeps_bf16_weights() -> None:
    tpu = slice_of("v6e", "2x4", "ct6e-standard-8t")
    arch = MODELS["llama3.1-70b"]
    bf16 = planner.plan(arch, tpu, ServingWorkload("vllm", 4096, batch_size=16))
    kv8 = planner.plan(arch, tpu, ServingWorkload("vllm", 4096, batch_size=16, kv_dtype="fp8"))
    assert kv8.memory.weights == bf16.memory.weights
    assert kv8.memory.kv_cache * 2 == bf16.memory.kv_cache


@pytest.mark.parametrize("engine", ["maxtext", "saxml"])
def test_fp8_is_refused_outside_vllm(engine: planner.Engine) -> None:
    with pytest.raises(PlanError, match=rf"weight_dtype fp8 is served by vllm only, not {engine}") as info:
        ServingWorkload(engine, 1024, weight_dtype="fp8")
    assert info.value.field == "weight_dtype"
    with pytest.raises(PlanError, match=rf"kv_dtype fp8 is served by vllm only, not {engine}") as info:
        ServingWorkload(engine, 1024, kv_dtype="fp8")
    assert info.value.field == "engine"


def test_fp8_needs_a_generation_with_an_fp8_path(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tpu_test_catalog.install(monkeypatch)
    assert catalog["v5e"].peak_fp8_flops_per_chip is None
    v5e = slice_of("v5e", "2x4", "ct5lp-hightpu-8t")
    with pytest.raises(PlanError, match=r"weight_dtype fp8 needs a TPU generation with an fp8 path; v5e") as info:
        planner.plan(MODELS["llama3-8b"], v5e, ServingWorkload("vllm", 1024, weight_dtype="fp8"))
    assert info.value.field == "weight_dtype"
    with pytest.raises(PlanError, match=r"kv_dtype fp8 needs .* v5e .* Use v5p, v6e, tpu7x") as info:
        planner.plan(MODELS["llama3-8b"], v5e, ServingWorkload("vllm", 1024, kv_dtype="fp8"))
    assert info.value.field == "slice"


# ---- across generations: rank_slices / select_slice with tpu.generation unset ----

INT8_405B = ServingWorkload("vllm", max_target_length=4096, weight_dtype="int8", kv_dtype="int8")
"""The 405B in a dtype the planner models for every generation (one host of tpu7x holds it)."""


def priced_tpu7x_catalog(region: str, on_demand: float) -> list[TpuSlice]:
    """Every slice of the installed catalog, tpu7x with a made-up price in ``region`` (the catalog records it
    as unknown)."""
    import dataclasses
    from types import MappingProxyType

    from components.catalog.tpu import ChipPrice

    iron = dataclasses.replace(
        tpu_catalog.GENERATIONS["tpu7x"], prices=MappingProxyType({region: ChipPrice(on_demand, source="test")})
    )
    return [dataclasses.replace(s, generation=iron) if s.generation.name == "tpu7x" else s for s in all_slices()]


def test_select_405b_picks_tpu7x_where_documented_and_priced(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tpu_test_catalog.install(monkeypatch)
    arch = MODELS["llama3.1-405b"]
    ranking = planner.rank_slices(
        arch, INT8_405B, priced_tpu7x_catalog("us-central1", 6.0), region="us-central1", generations=catalog
    )
    chosen = ranking.chosen
    assert (chosen.slice.key, chosen.slice.hosts, chosen.price_per_hour) == ("tpu7x-2x2x1", 1, 24.0)
    by_key = {p.slice.key: p for p in ranking.fits}
    assert by_key["v6e-4x4"].slice.hosts == 4
    assert by_key["v6e-4x4"].price_per_hour == 43.2
    prices = [p.price_per_hour or 0.0 for p in ranking.fits]
    assert None not in [p.price_per_hour for p in ranking.fits]
    assert prices == sorted(prices)  # every alternative priced here: cheapest first
    # Too small: v5e up to 4x8, v5p's one host, v6e up to 2x4 (405 GB of int8 weights).
    rejected = {r.split(":")[0] for r in ranking.rejected}
    assert {"v5e-4x8", "v5p-2x2x1", "v6e-2x4-4t"} <= rejected
    assert not any(k.startswith("tpu7x") for k in rejected)
    assert (
        planner.select_slice(arch, INT8_405B, priced_tpu7x_catalog("us-central1", 6.0), region="us-central1", generations=catalog)
        == chosen
    )
    # A price above v5p's and v6e's (per slice) loses to them: the price decides, not the generation.
    dear = planner.select_slice(
        arch, INT8_405B, priced_tpu7x_catalog("us-central1", 20.0), region="us-central1", generations=catalog
    )
    assert dear.slice.generation.name != "tpu7x"


def test_select_405b_ranks_unpriced_tpu7x_after_every_priced_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # The test catalog: tpu7x documented in us-central1, its price unknown (as in the real one).
    ranking = planner.rank_slices(MODELS["llama3.1-405b"], INT8_405B, region="us-central1")
    generations = [p.slice.generation.name for p in ranking.fits]
    assert ranking.chosen.slice.generation.name != "tpu7x"
    assert ranking.chosen.price_per_hour is not None
    first_unpriced = generations.index("tpu7x")
    assert all(p.price_per_hour is None for p in ranking.fits[first_unpriced:])
    assert all(p.price_per_hour is not None for p in ranking.fits[:first_unpriced])
    v6e_only = planner.select_slice(MODELS["llama3.1-405b"], INT8_405B, region="us-central1", generations=("v6e", "tpu7x"))
    assert v6e_only.slice.key == "v6e-4x4"


def test_select_region_without_tpu7x_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    # us-east5 documents v5e, v5p and v6e; tpu7x (us-central1-c only) is no candidate there.
    ranking = planner.rank_slices(MODELS["llama3.1-405b"], INT8_405B, region="us-east5")
    considered = {p.slice.generation.name for p in ranking.fits} | {r.split("-")[0] for r in ranking.rejected}
    assert "tpu7x" not in considered
    assert {"v5p", "v6e", "v5e"} <= considered
    assert ranking.chosen.slice.key == "v5p-2x2x2"
    assert planner.select_slice(MODELS["llama3.1-405b"], INT8_405B, region="us-east5", generations=("v6e", "v5e")).slice.key == (
        "v6e-4x4"
    )


def test_rank_slices_raises_with_every_rejection_when_nothing_fits() -> None:
    with pytest.raises(PlanError, match=r"no candidate slice fits llama3.1-405b .*v5e-1x1: needs"):
        planner.rank_slices(MODELS["llama3.1-405b"], INT8_405B, region="us-east5", generations=("v5e",), single_host_only=True)


def test_select_405b_fp8_picks_one_tpu7x_host_where_priced_else_another_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tpu_test_catalog.install(monkeypatch)
    fp8 = ServingWorkload("vllm", max_target_length=4096, weight_dtype="fp8", kv_dtype="fp8")
    arch = MODELS["llama3.1-405b"]
    priced = planner.rank_slices(arch, fp8, priced_tpu7x_catalog("us-central1", 6.0), region="us-central1", generations=catalog)
    assert (priced.chosen.slice.key, priced.chosen.slice.hosts) == ("tpu7x-2x2x1", 1)
    assert {p.slice.key: p.slice.hosts for p in priced.fits}["v6e-4x4"] == 4
    unpriced = planner.select_slice(arch, fp8, region="us-central1")
    assert unpriced.slice.generation.name != "tpu7x"
    assert unpriced.price_per_hour is not None
    assert planner.select_slice(arch, fp8, region="us-east5", generations=("v6e",)).slice.key == "v6e-4x4"


_XLA_FP8_CHECK = textwrap.dedent(
    """
    import json
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from components import planner
    from components.catalog.models import ModelArch
    from components.catalog.tpu import find_slice

    llama = ModelArch(name="tiny-llama", family="llama", layers=2, d_model=512, q_heads=128, kv_heads=8,
                      head_dim=4, ffn=1664, vocab=1024, tied_embeddings=False, gated_mlp=True,
                      published_params=None, maxtext_name=None, source="test")
    tpu = find_slice("v6e", "2x4", "ct6e-standard-8t")
    plan = planner.plan(llama, tpu, planner.ServingWorkload("vllm", 128, batch_size=4, weight_dtype="fp8", kv_dtype="fp8"))
    axes = plan.sharding.mesh_axes
    mesh = Mesh(np.array(jax.devices()[: tpu.chips]).reshape(tuple(axes.values())), tuple(axes.keys()))
    per_device = {}
    compiled = {}
    for bucket in ("weights", "kv"):
        arrs = [a for a in plan.arrays.values() if a.kind.startswith("kv") == (bucket == "kv")]
        for a in arrs:
            x = jax.device_put(jnp.zeros(a.shape, a.dtype), NamedSharding(mesh, PartitionSpec(*a.spec)))
            for shard in x.addressable_shards:
                key = (bucket, shard.device.id)
                per_device[key] = per_device.get(key, 0) + shard.data.nbytes
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, PartitionSpec(*a.spec))) for a in arrs]
        fn = jax.jit(lambda *xs: sum(x.astype("float32").sum() for x in xs))
        compiled[bucket] = fn.lower(*specs).compile().memory_analysis().argument_size_in_bytes
    print(json.dumps({
        "dtypes": sorted({a.dtype for a in plan.arrays.values()}),
        "xla_weights": sorted({v for (b, _), v in per_device.items() if b == "weights"}),
        "xla_kv": sorted({v for (b, _), v in per_device.items() if b == "kv"}),
        "compiled_weights": compiled["weights"],
        "compiled_kv": compiled["kv"],
        "planner_weights": plan.memory.weights,
        "planner_kv": plan.memory.kv_cache,
    }))
    """
)


@pytest.mark.slow  # a fresh interpreter with 8 fake devices compiling two programs
def test_xla_cross_check_fp8_weights_and_kv_cache_match_planner() -> None:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    command = [sys.executable, "-c", _XLA_FP8_CHECK]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["dtypes"] == ["bfloat16", "float32", "float8_e4m3fn"]  # bf16 embeddings/norms, f32 scales, fp8
    assert r["xla_weights"] == [r["planner_weights"]]  # every device holds exactly the planner's bytes
    assert r["xla_kv"] == [r["planner_kv"]]
    assert abs(r["compiled_weights"] - r["planner_weights"]) <= 0.01 * r["planner_weights"]
    assert abs(r["compiled_kv"] - r["planner_kv"]) <= 0.05 * r["planner_kv"]


# ---------------------------------------------------------------- issue 15 layouts against XLA

_XLA_LAYOUTS_CHECK = textwrap.dedent(
    """
    import json
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from components import planner
    from components.catalog.models import ModelArch
    from components.catalog.tpu import find_slice

    def llama(layers):
        # Llama 3.1 405B ratios (128 q heads over 8 KV heads, SwiGLU, untied), tiny dims.
        return ModelArch(name="tiny-llama", family="llama", layers=layers, d_model=512, q_heads=128, kv_heads=8,
                         head_dim=4, ffn=1664, vocab=1024, tied_embeddings=False, gated_mlp=True,
                         published_params=None, maxtext_name=None, source="test")

    S = planner.ServingWorkload
    cases = {
        # vLLM on Ray: one pipeline stage per host, tensor parallel within (llama-405b-vllm's layout).
        "vllm-pp8-v6e-4x8": (llama(8), find_slice("v6e", "4x8"), S("vllm", 128, batch_size=4)),
        # 6 layers over 4 stages: vLLM's uneven split; the planner rounds the layers up to 8.
        "vllm-pp4-uneven": (llama(6), find_slice("v6e", "4x4"), S("vllm", 128, batch_size=4)),
        # Ironwood: the planner's mesh is in chips, vLLM's TP counts 2 JAX devices per chip.
        "vllm-tpu7x-fp8": (llama(2), find_slice("tpu7x", "2x2x1"),
                           S("vllm", 128, batch_size=4, weight_dtype="fp8", kv_dtype="fp8")),
    }
    out = {}
    for label, (arch, tpu, workload) in cases.items():
        plan = planner.plan(arch, tpu, workload)
        chip_axes = dict(plan.sharding.mesh_axes)
        per_chip = tpu.generation.jax_devices_per_chip
        # The devices the engine really shards over: the innermost (tensor) axis spans every device of a chip.
        axes = {**chip_axes, "tensor": chip_axes["tensor"] * per_chip}
        devices = np.array(jax.devices()[: tpu.chips * per_chip]).reshape(tuple(axes.values()))
        mesh = Mesh(devices, tuple(axes.keys()))
        per_device = {d.id: {"weights": 0, "kv": 0} for d in devices.flat}
        for a in plan.arrays.values():
            x = jax.device_put(np.zeros(a.shape, a.dtype), NamedSharding(mesh, PartitionSpec(*a.spec)))
            bucket = "kv" if a.kind.startswith("kv") else "weights"
            for shard in x.addressable_shards:
                per_device[shard.device.id][bucket] += shard.data.nbytes
        # A chip is per_chip consecutive devices along tensor (the last mesh dimension).
        chips = devices.reshape(-1, per_chip)
        out[label] = {
            "mesh": chip_axes,
            "flags": plan.sharding.flags,
            "devices": int(devices.size),
            "layers_in_plan": max(a.shape[0] for a in plan.arrays.values() if a.kind.startswith("kv")),
            "chip_weights": sorted({sum(per_device[d.id]["weights"] for d in chip) for chip in chips}),
            "chip_kv": sorted({sum(per_device[d.id]["kv"] for d in chip) for chip in chips}),
            "planner_weights": plan.memory.weights,
            "planner_kv": plan.memory.kv_cache,
        }
    print(json.dumps(out))
    """
)


@pytest.mark.slow  # a fresh interpreter with 32 fake devices
def test_xla_cross_check_pipeline_stages_and_two_devices_per_chip_match_planner() -> None:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=32",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    run = subprocess.run(
        [sys.executable, "-c", _XLA_LAYOUTS_CHECK], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert run.returncode == 0, run.stderr
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["vllm-pp8-v6e-4x8"]["mesh"] == {"pipeline": 8, "tensor": 4}
    assert r["vllm-pp8-v6e-4x8"]["flags"] == {"pipeline_parallel_size": 8, "tensor_parallel_size": 4}
    assert r["vllm-pp4-uneven"]["layers_in_plan"] == 8  # 6 layers padded to a multiple of 4 stages
    assert r["vllm-tpu7x-fp8"]["mesh"] == {"tensor": 4}
    assert r["vllm-tpu7x-fp8"]["flags"] == {"tensor_parallel_size": 8}  # 2 JAX devices per chip
    assert r["vllm-tpu7x-fp8"]["devices"] == 8
    for label, c in r.items():
        # Every chip (both devices of a tpu7x chip together) holds exactly the planner's per-chip bytes.
        assert c["chip_weights"] == [c["planner_weights"]], label
        assert c["chip_kv"] == [c["planner_kv"]], label
        assert c["planner_weights"] > 0, label
        assert c["planner_kv"] > 0, label
