"""The serving model's calibration set: every public TPU serving figure found (2026-11), as data.

One row per run: source, date, engine and the engine build it ran, hardware, server settings,
scenario, the published values, and its kind: a *measurement* (a benchmark's printed output) or a
*lower bound* (a CI threshold a run must meet, ``>=``). Rows the serving model cannot reproduce
(mixture-of-experts models, unpublished prompt lengths, an engine backend no stack runs) are kept
with ``fitted=False`` and the reason, so the set says what exists and what the fit leaves out.

``components/planner/fit_perf.py`` fits the factors on the fitted rows and stores them, with a hash
of these rows, in ``calibration_fit.json``; ``tests/test_calibration.py`` fails when the rows change
without a refit. Research notes with every quote: the issue-27 calibration research (tpu-recipes
c8cfe2f6, tpu-inference b8692ff0, jetstream-pytorch c8bb6119).

Beside the serving runs, :data:`ATTENTION_KERNEL_RUNS`: published timings of the TPU prefill
attention kernel alone, from which the serving model takes the attention kernel's rate
(``calibration.ATTENTION_KERNEL_SHARE``) instead of fitting it (no serving run separates it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Metric = Literal["output_tokens_per_s", "tpot_ms", "ttft_ms"]
Kind = Literal["measurement", "lower_bound"]

RANGE_RATIO_MEAN = 0.9
"""InferenceX ``--random-range-ratio 0.8`` draws lengths from [0.8 L, L]: mean 0.9 L (the Qwen3.5
run's printed totals: 922 of 1024 input, 7350 and 7386 of 8192). Its scenarios are stated at the mean."""

_TR = "AI-Hypercomputer/tpu-recipes"
_TI_CI = (
    "vllm-project/tpu-inference@b8692ff0 .buildkite/models/{}.yml (threshold since ceb27a8b2, 2025-10-15), run by "
    "tests/e2e/benchmarking/benchmark.sh: sonnet dataset, 1000 prompts at request rate inf, no --max-concurrency, "
    "no --ignore-eos; check 'Request throughput (>= MINIMUM_THROUGHPUT_THRESHOLD)'. Bound on output tok/s = "
    "threshold x OUTPUT_LEN (every request reaching its output length)"
)
_LLAMA70B_V6E = (
    f"{_TR}@b005d564 inference/trillium/vLLM/Llama3.3/README.md (PR #114, 2025-12-03; same numbers at c8cfe2f6 "
    "inference/trillium/vLLM/Llama3.x/README.md): meta-llama/Llama-3.3-70B-Instruct (the Llama 3.1 70B "
    "architecture), one v6e 2x4 VM, TP 8, bf16, --max-model-len 2048 --max-num-batched-tokens 512 --max-num-seqs "
    "256 --gpu-memory-utilization 0.98 --async-scheduling --no-enable-prefix-caching; `vllm bench serve "
    "--dataset-name random --ignore-eos --num-prompts 3000 --random-input-len 1000 --random-output-len 1000 "
    "--max-concurrency N`"
)
_QWEN32B_TPU7X = (
    f"{_TR}@467e556 inference/ironwood/vLLM/Qwen3-32B/README.md (2026-04-23; first published 35be8c4, 2026-03-30, "
    "as 6467.74 / 3958.72 / 1357.34 on the same image): Qwen/Qwen3-32B on tpu7x 1x1x1 (1 chip, 2 devices, TP 2), "
    "qwix fp8 weights and activations, --kv-cache-dtype=fp8 --max-model-len=9216 --max-num-batched-tokens=4096 "
    "--max-num-seqs=135 --gpu-memory-utilization=0.98; InferenceX benchmark_serving.py --random-range-ratio=0.8 "
    "--num-prompts=320 --max-concurrency=320 --ignore-eos. 'Output Token Throughput (tok/s) Per Chip' on a 1-chip "
    "slice, taken as the total; the server runs at most 135 sequences"
)
VLLM_NIGHTLY_20251129 = "vllm/vllm-tpu:nightly-20251129-28607fc-39e63de"
VLLM_NIGHTLY_20260330 = "vllm/vllm-tpu:nightly-20260330-2f76400-8c0b626"
VLLM_CI_V0_11_1 = "tpu-inference CI builds from v0.11.1 (2025-10-15) on"


@dataclass(frozen=True)
class PublishedResult:
    """One published serving run: what ran, on what, and what it printed."""

    key: str
    source: str
    date: str
    """When the figure was published (ISO date)."""
    engine: str
    """Planner engine (``components/planner/engines.py``): its factor family."""
    engine_version: str
    """The engine build the figure was measured on (image tag or build description)."""
    model: str
    """Architecture key (``components.catalog.models.ARCHITECTURES``); "" where the catalog has none."""
    generation: str
    topology: str
    chips_per_host: int
    weight_dtype: Literal["bfloat16", "int8", "fp8"]
    kv_dtype: Literal["bfloat16", "int8", "fp8"]
    max_target_length: int
    """The server's context length (vLLM --max-model-len)."""
    input_tokens: int
    output_tokens: int
    concurrency: int
    """Sequences the server runs at once in the steady state: the client's cap, or with a burst
    (no cap) the server's --max-num-seqs."""
    measured: Mapping[Metric, float]
    """Measurements: output tokens/s (whole server), median TTFT and mean TPOT (ms). Median TTFT, not
    mean: the mean carries the start-up burst. Lower bounds: the floor on output tokens/s."""
    kind: Kind
    reserve_fraction: float
    """HBM share the server left free: 1 - vLLM --gpu-memory-utilization."""
    max_num_seqs: int
    max_num_batched_tokens: int | None
    num_prompts: int | None = None
    """Prompts of a burst run (every prompt sent at once, the server's limits the only cap: the run is
    ceil(num_prompts / concurrency) synchronised waves, each prefilling then decoding); None: a closed
    loop of ``concurrency`` clients over many prompts, which drifts into the steady state."""
    fitted: bool = True
    note: str = ""
    """Why a row is not fitted, or what is presumed about it."""


def _vllm(**kw: object) -> PublishedResult:
    return PublishedResult(engine="vllm", **kw)  # type: ignore[arg-type]


def _q(length: int) -> int:
    return round(RANGE_RATIO_MEAN * length)


POINTS: tuple[PublishedResult, ...] = (
    _vllm(
        key="llama3.x-70b-v6e-2x4-vllm-1k1k-c64",
        source=_LLAMA70B_V6E,
        date="2025-12-03",
        engine_version=VLLM_NIGHTLY_20251129,
        model="llama3.1-70b",
        generation="v6e",
        topology="2x4",
        chips_per_host=8,
        weight_dtype="bfloat16",
        kv_dtype="bfloat16",
        max_target_length=2048,
        input_tokens=1000,
        output_tokens=1000,
        concurrency=64,
        # "Output token throughput (tok/s): 2494.80", "Median TTFT (ms): 198.81", "Mean TPOT (ms): 25.35".
        measured=MappingProxyType({"output_tokens_per_s": 2494.80, "ttft_ms": 198.81, "tpot_ms": 25.35}),
        kind="measurement",
        reserve_fraction=0.02,
        max_num_seqs=256,
        max_num_batched_tokens=512,
    ),
    _vllm(
        key="llama3.x-70b-v6e-2x4-vllm-1k1k-c128",
        source=_LLAMA70B_V6E,
        date="2025-12-03",
        engine_version=VLLM_NIGHTLY_20251129,
        model="llama3.1-70b",
        generation="v6e",
        topology="2x4",
        chips_per_host=8,
        weight_dtype="bfloat16",
        kv_dtype="bfloat16",
        max_target_length=2048,
        input_tokens=1000,
        output_tokens=1000,
        concurrency=128,
        # "Output token throughput (tok/s): 3544.46", "Median TTFT (ms): 229.09", "Mean TPOT (ms): 35.12".
        measured=MappingProxyType({"output_tokens_per_s": 3544.46, "ttft_ms": 229.09, "tpot_ms": 35.12}),
        kind="measurement",
        reserve_fraction=0.02,
        max_num_seqs=256,
        max_num_batched_tokens=512,
    ),
    *(
        _vllm(
            key=f"qwen3-32b-tpu7x-1x1x1-vllm-fp8-{name}-c135",
            source=_QWEN32B_TPU7X,
            date="2026-04-23",
            engine_version=VLLM_NIGHTLY_20260330,
            model="qwen3-32b",
            generation="tpu7x",
            topology="1x1x1",
            chips_per_host=1,
            weight_dtype="fp8",
            kv_dtype="fp8",
            max_target_length=9216,
            input_tokens=_q(i),
            output_tokens=_q(o),
            concurrency=135,
            measured=MappingProxyType({"output_tokens_per_s": tok_s}),
            kind="measurement",
            reserve_fraction=0.02,
            max_num_seqs=135,
            max_num_batched_tokens=4096,
            num_prompts=320,
            note="lengths at the range ratio's mean (0.9 L); 320 clients, 135 admitted (--max-num-seqs)",
        )
        for name, i, o, tok_s in (("1k1k", 1024, 1024, 6556.72), ("1k8k", 1024, 8192, 3959.56), ("8k1k", 8192, 1024, 1382.18))
    ),
    _vllm(
        key="llama3.1-8b-v6e-1x1-vllm-pr1006-burst",
        date="2025-11-04",
        engine_version="tpu-inference main before the JAX 0.8.0 bump (PR #1006: 'diffs are less than 1%' after it)",
        source="vllm-project/tpu-inference PR #1006 'Bump jax version to 0.8.0' (2025-11-04), 'before' run: Total input "
        "tokens 1199000, generated 123107, 'Output token throughput (tok/s): 1415.14', 'Peak concurrent requests: "
        "1000.00', 'Mean TPOT (ms): 52.14'",
        model="llama3-8b",
        generation="v6e",
        topology="1x1",
        chips_per_host=1,
        weight_dtype="bfloat16",
        kv_dtype="bfloat16",
        max_target_length=2048,
        input_tokens=1199,
        output_tokens=123,
        concurrency=256,
        measured=MappingProxyType({"output_tokens_per_s": 1415.14}),
        kind="measurement",
        reserve_fraction=0.10,
        max_num_seqs=256,
        max_num_batched_tokens=1024,
        num_prompts=1000,
        note="hardware and flags not in the PR: presumed the CI job's (v6e-1, TP 1, --max-num-seqs 256, "
        "--max-num-batched-tokens 1024: its 11.50 req/s sits just over that job's 10.77 floor); a burst of 1000, so "
        "the server's limits bound concurrency. Fitted with that presumption: the set's only small-model measurement",
    ),
    # tpu-inference CI floors (request throughput >= threshold at OUTPUT_LEN tokens each).
    _vllm(
        key="llama3.1-8b-v6e-1x1-vllm-ci-1800-128",
        source=_TI_CI.format("Meta-Llama-3.1-8B-Instruct"),
        date="2025-10-15",
        engine_version=VLLM_CI_V0_11_1,
        model="llama3-8b",
        generation="v6e",
        topology="1x1",
        chips_per_host=1,
        weight_dtype="bfloat16",
        kv_dtype="bfloat16",
        max_target_length=2048,
        input_tokens=1800,
        output_tokens=128,
        concurrency=256,
        # MINIMUM_THROUGHPUT_THRESHOLD: 10.77 req/s x 128 = 1378.56 output tok/s.
        measured=MappingProxyType({"output_tokens_per_s": 10.77 * 128}),
        kind="lower_bound",
        reserve_fraction=0.10,
        max_num_seqs=256,
        max_num_batched_tokens=1024,
        num_prompts=1000,
    ),
    _vllm(
        key="llama3.x-70b-v6e-2x4-vllm-ci-1800-128",
        source=_TI_CI.format("Llama-3.3-70B-Instruct"),
        date="2025-10-15",
        engine_version=VLLM_CI_V0_11_1,
        model="llama3.1-70b",
        generation="v6e",
        topology="2x4",
        chips_per_host=8,
        weight_dtype="bfloat16",
        kv_dtype="bfloat16",
        max_target_length=2048,
        input_tokens=1800,
        output_tokens=128,
        concurrency=256,
        # MINIMUM_THROUGHPUT_THRESHOLD: 7.0 req/s x 128 = 896 output tok/s.
        measured=MappingProxyType({"output_tokens_per_s": 7.0 * 128}),
        kind="lower_bound",
        reserve_fraction=0.10,
        max_num_seqs=256,
        max_num_batched_tokens=4096,
        num_prompts=1000,
    ),
    _vllm(
        key="qwen3-32b-v6e-2x4-vllm-ci-1800-128",
        source=_TI_CI.format("Qwen3-32B"),
        date="2025-10-15",
        engine_version=VLLM_CI_V0_11_1,
        model="qwen3-32b",
        generation="v6e",
        topology="2x4",
        chips_per_host=8,
        weight_dtype="bfloat16",
        kv_dtype="bfloat16",
        max_target_length=2048,
        input_tokens=1800,
        output_tokens=128,
        concurrency=512,
        # MINIMUM_THROUGHPUT_THRESHOLD: 12.46 req/s x 128 = 1594.88 output tok/s.
        measured=MappingProxyType({"output_tokens_per_s": 12.46 * 128}),
        kind="lower_bound",
        reserve_fraction=0.10,
        max_num_seqs=512,
        max_num_batched_tokens=4096,
        num_prompts=1000,
    ),
)
"""The fitted and the recorded-only rows the serving model can express (dense models in the
architecture catalog). :data:`RECORDED` lists the rest."""


@dataclass(frozen=True)
class RecordedOnly:
    """A published figure the serving model cannot reproduce: kept with its reason."""

    key: str
    source: str
    date: str
    engine_version: str
    hardware: str
    figure: str
    kind: Kind
    reason: str


RECORDED: tuple[RecordedOnly, ...] = (
    *(
        RecordedOnly(
            key=f"qwen3-coder-480b-tpu7x-2x2x1-vllm-{n}-c64",
            kind="measurement",
            date="2026-04-23",
            source=f"{_TR}@abaa76a inference/ironwood/vLLM/Qwen3-Coder-480B-A35B/README.md",
            engine_version=VLLM_NIGHTLY_20260330,
            hardware="tpu7x 2x2x1, TP 8, expert parallel",
            figure=f"{v} output tok/s",
            reason="mixture of experts: the model's bytes per step depend on expert routing, which the dense model lacks",
        )
        for n, v in (("1k1k", 1996.00), ("1k8k", 2075.47), ("8k1k", 1053.10))
    ),
    *(
        RecordedOnly(
            key=f"qwen3.5-397b-tpu7x-2x2x1-vllm-{n}",
            kind="measurement",
            date="2026-07-20",
            source=f"{_TR}@976253b inference/ironwood/vLLM/Qwen3.5-397B/README.md",
            engine_version="vllm/vllm-tpu:nightly-20260626-c539adc-cc79815",
            hardware="tpu7x 2x2x1, TP 8, EP, DP attention",
            figure=f"{v} output tok/s",
            reason="mixture of experts with hybrid attention: not expressible in the dense model",
        )
        for n, v in (("1k8k", 5171.98), ("8k1k", 2280.85))
    ),
    RecordedOnly(
        key="qwen3.5-397b-llmd-pd-2x-tpu7x-rate1",
        kind="lower_bound",
        date="2026-05-02",
        source="llm-d/llm-d@2066a1a2 guides/pd-disaggregation/README.tpu.md",
        engine_version="not stated",
        hardware="2 x tpu7x 2x2x1, prefill/decode disaggregated",
        figure="536.3 output tok/s at 1 req/s offered",
        reason="mixture of experts; throughput capped by the offered load; engine build not stated",
    ),
    RecordedOnly(
        key="llama3.1-8b-v6e-2x2-vllm-ptxla-sharegpt-burst",
        kind="measurement",
        date="2025-02-27",
        source=f"{_TR}@ed1b224 inference/trillium/vLLM/README.md",
        engine_version="vllm/vllm-tpu:e92694b6 (PyTorch/XLA backend)",
        hardware="v6e 2x2, TP 4",
        figure="3459.46 output tok/s",
        reason="the PyTorch/XLA backend the tpu-inference backend replaced (a 2-4x step); ShareGPT burst, no concurrency cap",
    ),
    *(
        RecordedOnly(
            key=f"llama3-8b-v5e-2x4-jetstream-pytorch-{d}-{dt}-b{b}",
            kind="measurement",
            date=date,
            source="AI-Hypercomputer/jetstream-pytorch@c81767f benchmarks/summary.md (rows from 84ac213 and c81767f)",
            engine_version=f"jetstream-pytorch build of {date}",
            hardware="v5e-8",
            figure=f"{v} token/s (batch {b})",
            reason="ShareGPT prompt and output lengths unpublished (1024/1024 are caps), metric undefined; the engine "
            "(jetstream-pytorch) is not the JetStream + MaxText the stacks run. The 2024-07-29 row is 22% under the "
            "2024-04-24 one on the same settings: a build regression",
        )
        for d, date, dt, b, v in (
            ("20240424", "2024-04-24", "bf16", 128, 8249.0),
            ("20240424", "2024-04-24", "int8", 256, 10873.0),
            ("20240729", "2024-07-29", "int8", 256, 8471.54),
        )
    ),
    *(
        RecordedOnly(
            key=f"{m}-vllm-ci",
            kind="lower_bound",
            date="2025-10-15",
            source=_TI_CI.format(m),
            engine_version=VLLM_CI_V0_11_1,
            hardware=hw,
            figure=fig,
            reason=why,
        )
        for m, hw, fig, why in (
            (
                "gemma-3-27b-it",
                "v6e-8, TP 8",
                ">= 21 req/s at 1000/100",
                "Gemma 3 (sliding-window attention) is not in the architecture catalog",
            ),
            ("Qwen3-4B", "v6e-1, TP 1", ">= 11.00 req/s at 1800/128", "not in the architecture catalog"),
            ("Qwen3-30B-A3B", "v6e-8, TP 8", ">= 7.20 req/s at 1800/128", "mixture of experts"),
        )
    ),
    # Found 2026-11-26 (tpu-inference and tpu-recipes pull requests): every one lacks a fact the fit needs.
    *(
        RecordedOnly(
            key=f"{m}-v6e-{chips}-vllm-rpa-v3-1800-128",
            kind="measurement",
            date="2025-08-13",
            source="vllm-project/tpu-inference PR #470 '[RPA] Integrate RPA v3 to JAX backend' (RPA v3 column; the "
            "vLLM blog's 2025-10-16 charts give the same figures as 'BF16 | 1800 Input | 128 Output')",
            engine_version="tpu-inference at PR #470 (RPA v3, JAX backend)",
            hardware=f"v6e-{chips}, bf16",
            figure=f"{rps} req/s at 1800/128",
            reason="server flags, dataset and client settings unpublished (the PR's sample command is cut off); requests/s only",
        )
        for m, chips, rps in (("llama3.1-8b", 1, 11.60), ("llama3.1-70b", 8, 7.65))
    ),
    RecordedOnly(
        key="llama3.1-8b-vllm-pr1820-before-1800-128",
        kind="measurement",
        date="2026-02-27",
        source="vllm-project/tpu-inference PR #1820 '[RPA3] Separate kernel to 3 calls and many optimizations', "
        "'before' run: 1000 requests in 77.56 s (--max-num-batched-tokens 512 --max-num-seqs 512 --max-model-len 2048 "
        "--gpu-memory-utilization 0.95, TP 1; random 1800/128, no --ignore-eos)",
        engine_version="tpu-inference main of 2026-02-27",
        hardware="not stated (the same command ran on v6e-1 in vllm PR #16458)",
        figure="12.89 req/s",
        reason="hardware not stated and no --ignore-eos (output lengths unknown); requests/s only",
    ),
    RecordedOnly(
        key="llama3.1-70b-tpu7x-vllm-pr620-fp8-vs-bf16",
        kind="measurement",
        date="2025-09-02",
        source="vllm-project/tpu-inference PR #620 '[Torchax][Kernel] Support FP8 Dynamic And Static Quantization'",
        engine_version="tpu-inference at PR #620 (torchax)",
        hardware="Ironwood, slice not stated",
        figure="6.52 req/s bf16, 9.55 req/s FP8-dynamic (+46%)",
        reason="workload and slice not stated",
    ),
    RecordedOnly(
        key="qwen3.8-27b-tpu7x-2x2x1-vllm-8k1k-c128",
        kind="measurement",
        date="2026-08-17",
        source="AI-Hypercomputer/tpu-recipes PR #277 (open) inference/ironwood/vLLM/Qwen3.8-27B/README.md",
        engine_version="vllm/vllm-tpu:nightly-20260816-11250b4-1d2d83a",
        hardware="tpu7x 2x2x1, TP 8, bf16 weights, fp8 KV",
        figure="1961 output tok/s at 8192/1024, concurrency 128 (also 1k/1k and 1k/8k rows)",
        reason="hybrid Gated-DeltaNet and full attention: not expressible in the dense model",
    ),
    RecordedOnly(
        key="gemma-4-31b-tpu7x-1x1x1-vllm-1k1k-burst",
        kind="measurement",
        date="2026-04-28",
        source="AI-Hypercomputer/tpu-recipes PR #243 'Update Ironwood recipe for Gemma4' (merged)",
        engine_version="not stated in the output block",
        hardware="tpu7x 1x1x1, TP 2",
        figure="1727.14 output tok/s, 320 prompts at once",
        reason="Gemma 4 (sliding-window layers) is not in the architecture catalog; which of that day's configs ran is "
        "unresolved",
    ),
)
"""Published figures found and not fitted, with the reason."""


@dataclass(frozen=True)
class AttentionKernelRun:
    """A published timing of the TPU prefill attention kernel alone: one layer's causal attention
    over a prompt of ``context_tokens``, tensor parallel over the heads of ``devices`` JAX devices."""

    source: str
    date: str
    generation: str
    devices: int
    q_heads: int
    kv_heads: int
    head_dim: int
    chunk_tokens: int
    """The prompt's chunk (vLLM --max-num-batched-tokens in serving)."""
    context_tokens: int
    seconds: float


_PCP_BENCH = (
    "vllm-project/tpu-inference PR #3478 '[PCP] Add benchmark script' (merged 2026-08-27): "
    "tpu_inference/kernels/experimental/rpa_v3_cp/pcp_vs_tp_benchmark.py example results, TP column (tp8, the "
    "ragged paged attention v3 kernel; ms per prefill of one layer). The script times attention plus the o_proj "
    "all-reduce by default and attention alone with --no-collectives; the excerpt read does not show which "
    "section a table is in. If these hold the all-reduce, the kernel alone is up to ~20% faster than taken here"
)

_KERNEL_TABLES = (
    # (which table, q heads, kv heads, head_dim, (prompt in k tokens, ms) rows)
    (
        "table 'Qwen3.5: NQ=32 NKV=2 HD=256, 8 devices, CH=4k, KV bfloat16'",
        32,
        2,
        256,
        ((16, 2.13), (32, 6.28), (64, 21.58), (128, 80.56), (256, 309.90), (512, 1223.03), (1024, 4839.28)),
    ),
    (
        "the table before 'Gemma4-31B', with Qwen3-Coder-480B's head shape (NQ=96 NKV=8 HD=128, the script's "
        "second MODEL_CONFIGS entry; its title line is not in the excerpt read)",
        96,
        8,
        128,
        ((64, 68.15), (128, 248.81), (256, 943.75), (512, 3667.06), (1024, 14433.48)),
    ),
)

ATTENTION_KERNEL_RUNS: tuple[AttentionKernelRun, ...] = tuple(
    AttentionKernelRun(
        source=f"{_PCP_BENCH}; {table}",
        date="2026-08-27",
        generation="tpu7x",
        devices=8,
        q_heads=q_heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        chunk_tokens=4096,
        context_tokens=k * 1024,
        seconds=ms / 1000,
    )
    for table, q_heads, kv_heads, head_dim, rows in _KERNEL_TABLES
    for k, ms in rows
)
"""The prefill attention kernel's published timings (2026-11: the only ones found that name the head
shape, the devices and the chunk). Two head widths: at the prompts both time, a 128-wide head runs at
half the 256-wide one's rate, as the MXU fill predicts (``tests/test_calibration.py``)."""
