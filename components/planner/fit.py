"""Fitting a workload on one slice: the mesh (pinned, or the engine's first default that lays out),
the arrays laid out on it, and the memory per chip.

Memory model (per chip, bytes)
------------------------------
* weights and KV cache: the laid-out arrays (``params`` says what they are, ``layout`` how they split);
  the KV cache of ``batch x max_target_length`` tokens, or of one max-length sequence for an engine
  that pages it (``EngineProfile.paged_kv_cache``: vLLM), whose concurrency the serving model sizes
  by the tokens in use.
* reserve: ``reserve_fraction x HBM + reserve_bytes`` for XLA temporaries, prefill activations,
  logits and the runtime; the default fraction is the engine profile's (``engines``).
* training adds gradients (parameter dtype) and two float32 Adam moments per parameter, and an
  activation estimate, see :func:`training_activation_bytes`.
"""

from __future__ import annotations

import dataclasses
import math

from ..catalog import tpu as tpu_catalog
from ..catalog.models import ModelArch
from ..catalog.tpu import TpuSlice
from .engines import EngineProfile, profile
from .inputs import ServingWorkload, TrainingWorkload, Workload
from .layout import bytes_per_chip, kv_heads_for, lay_out
from .mesh import check_mesh, devices_per_chip, resolve_explicit
from .params import Quantization, kv_cache_arrays, weight_arrays
from .plan_errors import PlanError
from .results import MemoryPlan, Plan, ShardingPlan


def plan(arch: ModelArch, tpu: TpuSlice, workload: Workload, *, region: str | None = None, capacity: str = "onDemand") -> Plan:
    """Lay ``arch`` out on ``tpu`` for ``workload``; sharding errors raise, a tight fit does not.

    Check ``plan(...).fits`` or use :func:`~components.planner.verify_slice` to turn an overflow
    into a PlanError. The price is the slice's in ``region`` obtained as ``capacity`` (a
    ``tpu.capacity[].type``: the catalog's ``TpuSlice.capacity_price``), None where uncatalogued.
    """
    unpriced = _plan_unpriced(arch, tpu, workload)
    price = tpu.capacity_price(region, capacity)
    return dataclasses.replace(unpriced, region=region, capacity=capacity, price_per_hour=price)


def derive_parallelism(arch: ModelArch, tpu: TpuSlice, workload: Workload) -> dict[str, int]:
    """Mesh axes for ``workload`` on ``tpu``: the explicit ones verified, or the derived default."""
    return dict(_plan_unpriced(arch, tpu, workload).sharding.mesh_axes)


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


def fp8_generations() -> tuple[str, ...]:
    """Generations the catalog gives an fp8 path (a published ``peak_fp8_flops_per_chip``)."""
    # Read through the module at call time, so a test catalog (tests/tpu_test_catalog.py) is seen too.
    return tuple(g.name for g in tpu_catalog.GENERATIONS.values() if g.peak_fp8_flops_per_chip is not None)


def _check_fp8(tpu: TpuSlice, workload: ServingWorkload) -> None:
    """fp8 weights or KV cache need a generation with an fp8 path: v5e publishes none (bf16 and
    int8 only), so an fp8 plan there would describe arrays no engine keeps on it."""
    if tpu.generation.peak_fp8_flops_per_chip is not None:
        return
    dtypes = (("weight_dtype", workload.weight_dtype), ("kv_dtype", workload.kv_dtype))
    what = [f"{name} fp8" for name, dtype in dtypes if dtype == "fp8"]
    if what:
        raise PlanError(
            f"{' and '.join(what)} needs a TPU generation with an fp8 path; {tpu.generation.name} has none in the "
            f"catalog (no peak_fp8_flops_per_chip). Use {', '.join(fp8_generations())}, or bfloat16/int8",
            "weight_dtype" if workload.weight_dtype == "fp8" else "slice",
        )


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


def _plan_unpriced(arch: ModelArch, tpu: TpuSlice, workload: Workload) -> Plan:
    engine, mode = workload.engine, workload.mode
    prof = profile(engine, mode)
    if prof.single_host_only and tpu.multi_host:
        raise PlanError(
            f"{prof.label} is planned on single-host slices; {tpu.key} has {tpu.hosts} hosts. Use a one-VM "
            f"slice (e.g. {tpu.generation.name} 2x4 with {tpu.generation.machine_type(8)})"
        )
    if workload.parallelism is not None:
        axes = prof.mesh_for(resolve_explicit(prof.axes, workload.parallelism, tpu), tpu)
        check_mesh(axes, tpu)
        candidates = [axes]
    else:
        candidates = [prof.mesh_for(axes, tpu) for axes in prof.candidates(prof.axes, arch, tpu)]
        for axes in candidates:
            check_mesh(axes, tpu)
    if isinstance(workload, ServingWorkload):
        # Mesh-independent checks first, so they are not reported as "no mesh works".
        _check_fp8(tpu, workload)
        _serving_weight_dtype(arch, workload)
        _global_batch(tpu, workload.per_device_batch_size, workload.batch_size)
    errors: list[PlanError] = []
    for axes in candidates:
        try:
            if isinstance(workload, ServingWorkload):
                return _serving_plan(arch, tpu, workload, prof, axes)
            return _training_plan(arch, tpu, workload, prof, axes)
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


def _busiest_stage(arch: ModelArch, prof: EngineProfile, axes: dict[str, int]) -> ModelArch:
    """``arch`` with its decoder layers rounded up to a multiple of the pipeline degree.

    vLLM splits layers over pipeline stages unevenly when they do not divide (get_pp_indices: 126
    layers on 8 stages are stages of 15 and 16), so the per-chip figures are those of the busiest
    stage, ceil(layers / stages) layers; laying out the rounded-up stack gives exactly that shard.
    """
    stages = math.prod(axes.get(a, 1) for a in prof.rules.get("layers", ()))
    if stages <= 1 or arch.layers % stages == 0:
        return arch
    return dataclasses.replace(arch, layers=math.ceil(arch.layers / stages) * stages)


def _serving_plan(arch: ModelArch, tpu: TpuSlice, workload: ServingWorkload, prof: EngineProfile, axes: dict[str, int]) -> Plan:
    hbm = tpu.generation.hbm_bytes_per_chip
    replicate = workload.replicate_kv_heads
    if replicate is None:
        replicate = prof.replicate_kv_heads
    per_chip = devices_per_chip(tpu)
    devices = prof.device_axes(axes, per_chip)
    kv_heads, replicated = kv_heads_for(arch, prof.rules, devices, replicate)
    weight_dtype = _serving_weight_dtype(arch, workload)
    batch = _global_batch(tpu, workload.per_device_batch_size, workload.batch_size)
    if prof.paged_kv_cache:
        # vLLM pages the cache by tokens in use: it must hold one max-length sequence (its start-up
        # check), and --max-num-seqs is an admission limit, not a reservation (perf.kv_room).
        batch = 1
    staged = _busiest_stage(arch, prof, axes)
    quantization: Quantization | None = "int8" if weight_dtype == "int8" else "fp8" if weight_dtype == "fp8" else None
    arrays = weight_arrays(staged, "bfloat16", quantization or False, kv_heads)
    arrays |= kv_cache_arrays(staged, batch, workload.max_target_length, kv_heads, workload.kv_dtype, workload.kv_quant_axis)
    laid = lay_out(arch, prof.rules, devices, arrays, kv_heads_replicated=replicated, devices_per_chip=per_chip)
    weights = bytes_per_chip(laid, "weight", "scale")
    kv = bytes_per_chip(laid, "kv_cache", "kv_scale")
    fraction = workload.reserve_fraction
    if fraction is None:
        fraction = prof.reserve_fraction
    reserve = int(fraction * hbm) + workload.reserve_bytes
    memory = MemoryPlan(weights=weights, kv_cache=kv, optimizer=0, activations=0, reserve=reserve, hbm=hbm)
    free = hbm - weights - reserve
    capacity = max(0, free * batch // kv) if kv else None
    return Plan(
        model=arch.name,
        mode=prof.mode,
        slice=tpu,
        sharding=ShardingPlan(prof.engine, dict(axes), prof.flag_values(axes, per_chip), kv_heads, replicated),
        memory=memory,
        global_batch=batch,
        max_target_length=workload.max_target_length,
        weight_dtype=weight_dtype,
        kv_dtype=workload.kv_dtype,
        kv_capacity_sequences=capacity,
        arrays=laid,
    )


def _training_plan(arch: ModelArch, tpu: TpuSlice, workload: TrainingWorkload, prof: EngineProfile, axes: dict[str, int]) -> Plan:
    hbm = tpu.generation.hbm_bytes_per_chip
    global_batch = workload.per_device_batch_size * tpu.chips
    split = math.prod(axes[a] for a in prof.batch_axes)
    if global_batch != int(global_batch) or int(global_batch) % split:
        raise PlanError(
            f"global batch {global_batch} (per_device_batch_size {workload.per_device_batch_size} x "
            f"{tpu.chips} chips) does not split over {' x '.join(prof.batch_axes)} {split}; use a whole batch "
            "divisible by it",
            "per_device_batch_size",
        )
    arrays = weight_arrays(arch, workload.param_dtype, False, arch.kv_heads)
    per_chip = devices_per_chip(tpu)
    laid = lay_out(
        arch, prof.rules, prof.device_axes(axes, per_chip), arrays, kv_heads_replicated=False, devices_per_chip=per_chip
    )
    weights = bytes_per_chip(laid)
    elements = sum(math.prod(a.shard_shape) for a in laid.values()) * per_chip
    optimizer = weights + elements * 8  # gradients in the param dtype + Adam mu, nu in float32
    tokens = workload.per_device_batch_size * workload.max_target_length
    fraction = workload.reserve_fraction
    if fraction is None:
        fraction = prof.reserve_fraction
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
        mode=prof.mode,
        slice=tpu,
        sharding=ShardingPlan(prof.engine, dict(axes), prof.flag_values(axes, per_chip), arch.kv_heads, False),
        memory=memory,
        global_batch=global_batch,
        max_target_length=workload.max_target_length,
        weight_dtype=workload.param_dtype,
        kv_dtype=None,
        arrays=laid,
    )
