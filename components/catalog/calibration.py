"""Serving performance data: the efficiency factors of the planner's serving model
(``components/planner/perf.py``), fitted per engine family on the calibration set
(``calibration_points.py``). A generation's ICI and DCN bandwidths and its MXU width are facts of its
catalog row (``TpuGeneration``, components/catalog/tpu_generations.py).

Data only (no Pulumi, no planner import). The fitted factors live in ``calibration_fit.json``,
written by ``python -m components.planner.fit_perf`` with the hash of the rows and priors they were
fitted on (:func:`inputs_hash`); ``tests/test_calibration.py`` fails when the rows change without a
refit. Every factor is *fitted* (the fit chose it, within the bounds of :data:`FIT_BOUNDS`) or
*assumed* (the prior of :data:`PRIORS`, with its reason), and a prediction says whether its engine,
generation and engine version were measured at all (:func:`calibration_of`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import images
from .calibration_points import (
    ATTENTION_KERNEL_RUNS,
    POINTS,
    RECORDED,
    AttentionKernelRun,
    Metric,
    PublishedResult,
    RecordedOnly,
)
from .tpu_generations import GENERATIONS

__all__ = [
    "ATTENTION_KERNEL_RUNS",
    "ATTENTION_KERNEL_SHARE",
    "FACTORS",
    "FIT",
    "FIT_BOUNDS",
    "PRIORS",
    "PUBLISHED",
    "RECORDED",
    "SRC_MAXTEXT_TIERING",
    "AttentionKernelRun",
    "Calibration",
    "EfficiencyFactors",
    "Metric",
    "PublishedResult",
    "RecordedOnly",
    "attention_kernel_share",
    "calibration_of",
    "inputs_hash",
]

PUBLISHED = POINTS
"""The calibration set's rows the serving model can express (measurements and lower bounds)."""

FIT_TABLE = Path(__file__).with_name("calibration_fit.json")

SRC_MAXTEXT_TIERING = (
    "MaxText 'Optimized models tiering' https://maxtext.readthedocs.io/en/maxtext-v0.2.0/reference/models/tiering.html "
    "(read 2026-11): Trillium (v6e) Llama 3.1 70B, 256 chips, BF16, SL=8192: 50.33% MFU"
)
"""The source of :data:`PRIORS`' step compute utilisation (and of the training model's MFU)."""

def attention_kernel_share(run: AttentionKernelRun) -> float:
    """Share of the bf16 peak a published attention-kernel run achieved, per unit of MXU fill: its
    causal attention FLOPs (QK^T and AV over half the context square, 2 FLOPs per MAC) over its
    seconds and the peak of the devices it spanned, divided by the share of the MXU columns its head
    fills (a head narrower than the MXU leaves the rest idle)."""
    gen = GENERATIONS[run.generation]
    flops = 2 * run.q_heads * run.head_dim * run.context_tokens**2
    peak = gen.peak_bf16_flops_per_chip / gen.jax_devices_per_chip * run.devices
    return flops / run.seconds / peak / gen.mxu_fill(run.head_dim)


ATTENTION_KERNEL_SHARE = attention_kernel_share(min(ATTENTION_KERNEL_RUNS, key=lambda r: r.context_tokens))
"""The prefill attention kernel's share of the bf16 peak at full MXU fill (about 0.22), from the
published run with the shortest prompt (16k tokens): the kernel's share grows with the prompt (its
per-chunk costs weigh less: 0.30 at 32k, 0.40 at 1M), and the prompts the stacks serve are 1-8k,
so the shortest run is the closest and errs fast, not slow."""


@dataclass(frozen=True)
class EfficiencyFactors:
    """The serving model's efficiency factors for one engine family. See each field."""

    hbm_efficiency: float
    """Share of the catalog HBM bandwidth a step achieves reading weights and KV cache. FITTED."""
    step_compute_utilisation: float
    """Share of peak FLOPs the matmuls of a step (decode tokens plus the prefill tokens chunked
    prefill interleaves) achieve; also a dedicated prefill slice's. FITTED (prior 0.50, MaxText's
    published Llama 3.1 70B MFU on v6e, 50.33%)."""
    prefill_utilisation: float
    """Effective share of peak FLOPs a new request's prefill achieves before its first token,
    queueing behind and interleaved with the running decode batch. FITTED on the TTFT the set has."""
    collective_efficiency: float
    """Share of the ICI bandwidth an all-reduce achieves. ASSUMED 0.5 (a ring all-reduce moves data
    in one direction of the bidirectional per-chip figure): one tensor-parallel layout in the set
    cannot separate it from the per-step cost."""
    collective_latency_s: float
    """Fixed cost per collective, seconds. ASSUMED 10 us, the order of a small all-reduce on a TPU
    slice (two per layer); the per-step fixed cost is fitted beside it."""
    step_overhead_s: float
    """Fixed cost per engine step (scheduling, sampling, kernel launches, anything the byte and FLOP
    counts miss), seconds. FITTED."""
    attention_kernel_share: float
    """Share of the bf16 peak the prefill attention kernel (QK^T and AV of the prompt's tokens, a
    kernel of its own between the matmuls) achieves when the head fills the MXU; the head's fill
    scales it (``perf.py``). ASSUMED: :data:`ATTENTION_KERNEL_SHARE`, a kernel benchmark, not fitted:
    no serving run separates it (the set's one long-prompt run is the only one it moves)."""
    overlap: float = 0.0
    """Share of the shorter of a step's HBM and compute time hidden under the longer: 0 adds them,
    1 is the roofline's max. FITTED."""
    dcn_latency_s: float = 50e-6
    """Latency of one pipeline-stage hand-off between hosts over DCN, seconds. ASSUMED: 50 us."""


PRIORS = EfficiencyFactors(
    hbm_efficiency=0.77,
    step_compute_utilisation=0.50,
    prefill_utilisation=0.11,
    collective_efficiency=0.5,
    collective_latency_s=10e-6,
    step_overhead_s=0.5e-3,
    attention_kernel_share=ATTENTION_KERNEL_SHARE,
    overlap=0.0,
)
"""The fit's starting point and weak prior (the one-point calibration before the set existed); the
fields the fit leaves alone keep these values."""

FIT_BOUNDS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        # Physically sensible ranges: no factor may exceed the hardware's figure.
        "hbm_efficiency": (0.3, 1.0),
        "step_compute_utilisation": (0.1, 0.9),
        "prefill_utilisation": (0.02, 0.9),
        "step_overhead_s": (0.0, 0.02),
        "overlap": (0.0, 1.0),
    }
)
"""The fitted factors and their bounds; every other field of :class:`EfficiencyFactors` is assumed."""


def inputs_hash(points: tuple[PublishedResult, ...] = POINTS) -> str:
    """sha256 of what the fit reads: the rows, the priors and the bounds (a change needs a refit)."""

    def row(r: PublishedResult) -> dict[str, Any]:
        d = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
        d["measured"] = dict(r.measured)
        return d

    blob = {"points": [row(r) for r in points], "priors": dataclasses.asdict(PRIORS), "bounds": dict(FIT_BOUNDS)}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()


def _load_fit() -> Mapping[str, Any]:
    return MappingProxyType(json.loads(FIT_TABLE.read_text(encoding="utf-8")))


FIT: Mapping[str, Any] = _load_fit()
"""``calibration_fit.json``: ``inputs_sha256`` and, per engine family, its fitted ``factors``, the
``generations`` and ``engine_versions`` its points were measured on, and the leave-one-out errors."""


def _fitted(family: str) -> EfficiencyFactors:
    return dataclasses.replace(PRIORS, **FIT["families"][family]["factors"])


VLLM_TPU_FACTORS = _fitted("vllm")
"""vLLM TPU (tpu-inference backend) factors, fitted on the set's vLLM rows."""

FACTORS: Mapping[str, EfficiencyFactors] = MappingProxyType(
    {
        "vllm": VLLM_TPU_FACTORS,
        # No published JetStream + MaxText or Saxml serving figure for a dense catalog model was found
        # (2026-11): these rows take vLLM's factors and every prediction with them says it is uncalibrated.
        "maxtext": VLLM_TPU_FACTORS,
        "saxml": VLLM_TPU_FACTORS,
    }
)
"""Efficiency factors by factor key, one row per serving engine (named after it). A workload kind names
its row (``WorkloadKindInfo.perf_key``, in the kind's package); ``tests/test_kind_facts.py`` holds every
serving kind to a row that is here."""

DEPLOYED_IMAGE: Mapping[str, str] = MappingProxyType(
    {"vllm": "vllm-tpu", "maxtext": "jetstream-pathways", "saxml": "sax-model-server"}
)
"""The image (``images.json`` name) whose tag is the engine version a stack deploys, per factor key."""

_LABEL = MappingProxyType({"vllm": "vLLM TPU", "maxtext": "JetStream + MaxText", "saxml": "Saxml"})


@dataclass(frozen=True)
class Calibration:
    """Whether a prediction's factors were measured on its engine, generation and engine version."""

    calibrated: bool
    """Fitted on the engine's own points on this generation."""
    engine_version: str | None
    version_measured: bool
    """The deployed engine version is one the points were measured on."""
    note: str
    """What the prediction stands on, for the report ("calibrated ..." or "uncalibrated: ...")."""


def calibration_of(perf_key: str, generation: str, engine_version: str | None = None) -> Calibration:
    """What a ``perf_key`` prediction on ``generation`` stands on; ``engine_version`` defaults to the
    tag of the image the stacks deploy (:data:`DEPLOYED_IMAGE`)."""
    if engine_version is None and perf_key in DEPLOYED_IMAGE:
        engine_version = f"{images.image(DEPLOYED_IMAGE[perf_key]).repository}:{images.image(DEPLOYED_IMAGE[perf_key]).tag}"
    label = _LABEL.get(perf_key, perf_key)
    family = FIT["families"].get(perf_key)
    if family is None:
        return Calibration(
            False,
            engine_version,
            False,
            f"uncalibrated: no published {label} serving figure for a catalog model; vLLM TPU's fitted factors are borrowed",
        )
    versions: list[str] = family["engine_versions"]
    measured = engine_version in versions
    version_note = (
        f"engine {engine_version} measured"
        if measured
        else f"engine {engine_version} is outside the measured builds ({'; '.join(versions)})"
    )
    if generation not in family["generations"]:
        return Calibration(
            False,
            engine_version,
            measured,
            f"uncalibrated: no {label} point on {generation} (measured on {', '.join(family['generations'])}); {version_note}",
        )
    return Calibration(True, engine_version, measured, f"calibrated on {len(family['points'])} {label} points; {version_note}")
