"""Serving performance data: published benchmark results, the DCN bandwidth and the efficiency
factors of the planner's serving model (``components/planner/perf.py``). A generation's ICI bandwidth
is a fact of its catalog row (``TpuGeneration.ici_bandwidth_per_chip``, components/catalog/tpu_generations.py).

Data only (no Pulumi, no planner import). Every number has its source and date. The factors are
of two kinds: *calibrated* (chosen so the model reproduces the calibration results below, with the
fit written down) and *assumed* (taken from another published figure or a stated prior, not fitted
to any serving result). ``tests/test_perf.py`` recomputes every published result with the model
from these numbers and the planner's own per-chip byte counts: calibration results within ±15%,
holdout results (never used to choose a factor) within ±25%.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

SRC_LLAMA3X_V6E = (
    "AI-Hypercomputer/tpu-recipes inference/trillium/vLLM/Llama3.3/README.md at commit b005d564 (PR #114, "
    "2025-12-03; the file is inference/trillium/vLLM/Llama3.x/README.md since 00c8229, same numbers through "
    "b709d734, 2026-04-08): vLLM TPU (DOCKER_URI=vllm/vllm-tpu:nightly-20251129-28607fc-39e63de, the image the "
    "numbers were measured with; the v0.12.0 pin came later in f2ae25f, 2025-12-10, without new numbers) serving "
    "meta-llama/Llama-3.3-70B-Instruct (the Llama 3.1 70B architecture) on one v6e 2x4 VM, tensor parallel 8, "
    "bf16, --max-model-len 2048 --max-num-batched-tokens 512 --max-num-seqs 256 --async-scheduling "
    "--no-enable-prefix-caching; `vllm bench serve --dataset-name random --ignore-eos --num-prompts 3000 "
    "--random-input-len 1000 --random-output-len 1000 --max-concurrency N`"
)
SRC_MAXTEXT_TIERING = (
    "MaxText 'Optimized models tiering' https://maxtext.readthedocs.io/en/maxtext-v0.2.0/reference/models/tiering.html "
    "(read 2026-11): Trillium (v6e) Llama 3.1 70B, 256 chips, BF16, SL=8192: 50.33% MFU"
)

Metric = Literal["output_tokens_per_s", "tpot_ms", "ttft_ms"]


@dataclass(frozen=True)
class PublishedResult:
    """One published serving benchmark run: scenario and measured values."""

    key: str
    source: str
    date: str
    """When the result was published (ISO date)."""
    engine: str
    """Planner engine (``components/planner/engines.py``)."""
    model: str
    """Model catalog key whose architecture the benchmarked checkpoint has."""
    slice_key: str
    """TPU catalog slice key (``TpuSlice.key``)."""
    max_target_length: int
    """The server's context length (vLLM --max-model-len)."""
    input_tokens: int
    output_tokens: int
    concurrency: int
    measured: Mapping[Metric, float]
    """Measured values: output tokens/s (whole server), median TTFT and mean TPOT in milliseconds.
    Median TTFT, not mean: the mean carries the start-up burst (all N requests sent at once; the
    source's P99 TTFT is 10-16x its median), which steady-state serving does not have."""
    role: Literal["calibration", "holdout"]
    reserve_fraction: float
    """HBM share the server left free: 1 - vLLM --gpu-memory-utilization."""
    max_num_seqs: int
    """The server's batch limit (vLLM --max-num-seqs)."""
    max_num_batched_tokens: int | None
    """The server's per-step token budget (vLLM --max-num-batched-tokens); None: none."""


PUBLISHED: tuple[PublishedResult, ...] = (
    PublishedResult(
        key="llama3.x-70b-v6e-2x4-vllm-1k1k-c64",
        source=SRC_LLAMA3X_V6E,
        date="2025-12-03",
        engine="vllm",
        model="llama3.1-70b",
        slice_key="v6e-2x4-8t",
        max_target_length=2048,
        input_tokens=1000,
        output_tokens=1000,
        concurrency=64,
        # "Output token throughput (tok/s): 2494.80", "Median TTFT (ms): 198.81", "Mean TPOT (ms): 25.35".
        measured=MappingProxyType({"output_tokens_per_s": 2494.80, "ttft_ms": 198.81, "tpot_ms": 25.35}),
        role="calibration",
        reserve_fraction=0.02,  # --gpu-memory-utilization 0.98
        max_num_seqs=256,  # --max-num-seqs 256
        max_num_batched_tokens=512,  # --max-num-batched-tokens 512
    ),
    PublishedResult(
        key="llama3.x-70b-v6e-2x4-vllm-1k1k-c128",
        source=SRC_LLAMA3X_V6E,
        date="2025-12-03",
        engine="vllm",
        model="llama3.1-70b",
        slice_key="v6e-2x4-8t",
        max_target_length=2048,
        input_tokens=1000,
        output_tokens=1000,
        concurrency=128,
        # "Output token throughput (tok/s): 3544.46", "Median TTFT (ms): 229.09", "Mean TPOT (ms): 35.12".
        measured=MappingProxyType({"output_tokens_per_s": 3544.46, "ttft_ms": 229.09, "tpot_ms": 35.12}),
        role="holdout",
        reserve_fraction=0.02,  # --gpu-memory-utilization 0.98
        max_num_seqs=256,  # --max-num-seqs 256
        max_num_batched_tokens=512,  # --max-num-batched-tokens 512
    ),
)
"""Published vLLM-TPU results. Searched (2026-11) and not usable: the tpu-recipes Llama 3.1 and
DeepSeek-distilled Llama READMEs (placeholders ``xxxxxxx`` instead of numbers), the tpu-inference
repository (benchmark case definitions, no results), the Qwen/Gemma recipes (models not in the
model catalog), and tpu-recipes ed1b224 (2025-02-27, ``inference/trillium/vLLM/README.md``:
Llama-3.1-8B on v6e 2x2, 3459.46 output tok/s, median TTFT 13841.77 ms, mean TPOT 119.79 ms),
examined and excluded: its load is a burst of 1000 ShareGPT prompts with no concurrency cap
(``benchmark_serving.py --num-prompts 1000``, request rate unlimited), so TTFT is queueing behind
the burst and no fixed input/output/concurrency scenario describes it (ShareGPT prompt lengths
vary, ``--sharegpt-output-len 256``); it ran the old PyTorch/XLA vLLM TPU backend, not the
tpu-inference backend the factors describe; and the guide says its numbers are illustrative ("the
numbers vary based on the vllm version, the model size and the TPU instance type/size").
The calibration/holdout split is by concurrency: every factor below was chosen
on the concurrency-64 run only; the concurrency-128 run tests how the model scales with batch
(KV bytes and amortised prefill per step grow, weight bytes do not)."""


DCN_BANDWIDTH_PER_HOST = 100 * 10**9 // 8
"""Data-centre network bandwidth per TPU host for pipeline-stage hand-offs, bytes/s. ASSUMED:
100 Gbps, the order of a TPU VM's network interface; no per-machine-type figure is in the
catalog. Multi-host vLLM layouts with pipeline > 1 use it for stage hand-offs (small beside the
per-stage HBM time: a hand-off is tokens x d_model x 2 bytes), and disaggregated JetStream for a
prompt's KV cache from the prefill slice to the decode slice (every host sending its share)."""


@dataclass(frozen=True)
class EfficiencyFactors:
    """The serving model's efficiency factors for one engine. See each field."""

    hbm_efficiency: float
    """Share of the catalog HBM bandwidth a decode step achieves reading weights and KV cache.
    CALIBRATED on llama3.x-70b-v6e-2x4-vllm-1k1k-c64 (mean TPOT 25.35 ms): with the assumed
    factors below fixed, bisection gives 0.772 (``python -m tests.bench_perf``), kept as 0.77."""
    step_compute_utilisation: float
    """Share of peak FLOPs the matmuls of a decode step (decode tokens plus the prefill tokens
    interleaved into the same step by chunked prefill) achieve. ASSUMED: 0.50, MaxText's published
    Llama 3.1 70B MFU on v6e (50.33%, SRC_MAXTEXT_TIERING), not fitted to a serving result. Also the
    utilisation of a dedicated prefill slice (disaggregated serving: whole prompts, no decode batch
    sharing the step), the same assumption."""
    prefill_utilisation: float
    """Effective share of peak FLOPs a new request's prefill achieves before its first token,
    queueing behind and interleaved with the running decode batch (vLLM chunked prefill,
    --max-num-batched-tokens 512 in the source). CALIBRATED on llama3.x-70b-v6e-2x4-vllm-1k1k-c64
    (median TTFT 198.81 ms): bisection gives 0.1103 (``python -m tests.bench_perf``), kept as 0.11.
    Low because chunked prefill spreads a 1000-token prompt over several mixed steps, each also
    running the whole decode batch."""
    collective_efficiency: float
    """Share of the ICI bandwidth an all-reduce achieves. ASSUMED: 0.5 (a ring all-reduce moves
    data in one direction of the bidirectional per-chip figure); not fitted."""
    collective_latency_s: float
    """Fixed cost per collective (launch and synchronisation), seconds. ASSUMED: 10 us, the order
    of a small all-reduce on a TPU slice; not fitted. Two tensor-parallel all-reduces per layer."""
    step_overhead_s: float
    """Host-side cost per engine step (scheduling, sampling, detokenisation) not hidden by
    asynchronous scheduling, seconds. ASSUMED: 0.5 ms; not fitted."""
    dcn_latency_s: float = 50e-6
    """Latency of one pipeline-stage hand-off between hosts over DCN, seconds. ASSUMED: 50 us."""


VLLM_TPU_FACTORS = EfficiencyFactors(
    hbm_efficiency=0.77,
    step_compute_utilisation=0.50,
    prefill_utilisation=0.11,
    collective_efficiency=0.5,
    collective_latency_s=10e-6,
    step_overhead_s=0.5e-3,
)
"""vLLM TPU (tpu-inference) factors, calibrated as each field says."""

FACTORS: Mapping[str, EfficiencyFactors] = MappingProxyType(
    {
        "vllm": VLLM_TPU_FACTORS,
        # No published JetStream/Saxml serving result for a catalog model and slice was found
        # (2026-11): they use vLLM's factors, an assumption the plan report states.
        "maxtext": VLLM_TPU_FACTORS,
        "saxml": VLLM_TPU_FACTORS,
    }
)
"""Efficiency factors by factor key, one row per serving engine (named after it). A workload kind names
its row (``WorkloadKindInfo.perf_key``, in the kind's package); ``tests/test_kind_facts.py`` holds every
serving kind to a row that is here."""

CALIBRATED_KEYS: frozenset[str] = frozenset({"vllm"})
"""Rows of :data:`FACTORS` calibrated on their own engine's published results (the others borrow them)."""
