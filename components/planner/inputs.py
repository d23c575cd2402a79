"""What the planner is asked: a serving or training workload (the model and slice are catalog
entries). Validation here is what needs no model or slice; errors carry the field to change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .engines import Engine, Mode, engines
from .plan_errors import PlanError, one_of

WeightDtype = Literal["bfloat16", "int8", "fp8"]
ParamDtype = Literal["float32", "bfloat16"]
KvDtype = Literal["bfloat16", "int8", "fp8"]

FP8_ENGINES: tuple[Engine, ...] = ("vllm",)
"""Engines that serve fp8 weights (an FP8 checkpoint) or an fp8 KV cache (``--kv-cache-dtype=fp8``).
MaxText's serving path quantizes with AQT int8 and Saxml's servables fix their own dtype, so neither
has an fp8 path here. Where fp8 runs also depends on the slice: see ``fit`` (the catalog's
``peak_fp8_flops_per_chip``)."""
KvQuantAxis = Literal["heads_and_dkv", "dkv"]


@dataclass(frozen=True)
class ServingWorkload:
    """What a serving engine is asked to hold in HBM.

    ``max_target_length`` is the cached length per sequence (MaxText ``max_target_length``, vLLM
    ``max_model_len``, Saxml ``INPUT_SEQ_LEN + MAX_DECODE_STEPS``). The cache holds
    ``per_device_batch_size x chips`` sequences (MaxText semantics) or ``batch_size`` sequences;
    with neither, one sequence. An engine that pages its cache (vLLM) is planned for one
    max_model_len sequence whatever ``batch_size`` (its own start-up check); ``batch_size`` is then
    its admission limit (--max-num-seqs), which the serving model applies.
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
    """None: the engine profile's default."""
    reserve_bytes: int = 0
    parallelism: Mapping[str, int] | None = None
    replicate_kv_heads: bool | None = None
    """None: the engine profile's default (True for vLLM, which replicates KV heads when TP > kv_heads)."""

    def __post_init__(self) -> None:
        serving = engines("serve")
        if self.engine not in serving:
            raise PlanError(f"unknown serving engine {self.engine!r}; use {one_of(serving)}", "engine")
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
        if self.engine not in FP8_ENGINES:
            # The field says which input to change: the weights, or (fp8 KV cache) the engine.
            if self.weight_dtype == "fp8":
                raise PlanError(
                    f"weight_dtype fp8 is served by {one_of(FP8_ENGINES)} only, not {self.engine}; use "
                    "bfloat16 or int8 weights, or serve the model with vLLM",
                    "weight_dtype",
                )
            if self.kv_dtype == "fp8":
                raise PlanError(
                    f"kv_dtype fp8 is served by {one_of(FP8_ENGINES)} only, not {self.engine}; use a "
                    "bfloat16 or int8 KV cache, or serve the model with vLLM",
                    "engine",
                )
        check_reserve(self.reserve_fraction, self.reserve_bytes)

    @property
    def mode(self) -> Mode:
        return "serve"


@dataclass(frozen=True)
class TrainingWorkload:
    """Pre-training/fine-tuning with AdamW; global batch = per_device_batch_size x chips."""

    per_device_batch_size: float
    max_target_length: int
    engine: Engine = "maxtext"
    param_dtype: ParamDtype = "float32"
    """MaxText's default ``weight_dtype`` keeps float32 master weights."""
    reserve_fraction: float | None = None
    reserve_bytes: int = 0
    parallelism: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        training = engines("train")
        if self.engine not in training:
            raise PlanError(f"training is planned for {one_of(training)} only, got {self.engine!r}", "engine")
        if self.per_device_batch_size <= 0 or self.max_target_length <= 0:
            raise PlanError(
                "per_device_batch_size and max_target_length must be positive",
                "per_device_batch_size" if self.per_device_batch_size <= 0 else "max_target_length",
            )
        check_reserve(self.reserve_fraction, self.reserve_bytes)

    @property
    def mode(self) -> Mode:
        return "train"


Workload = ServingWorkload | TrainingWorkload


def check_reserve(fraction: float | None, extra: int) -> None:
    if fraction is not None and not 0 <= fraction < 1:
        raise PlanError(f"reserve_fraction must be in [0, 1), got {fraction}", "reserve_fraction")
    if extra < 0:
        raise PlanError(f"reserve_bytes must be >= 0, got {extra}", "reserve_fraction")
