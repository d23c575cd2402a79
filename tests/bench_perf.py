"""Calibration of the serving model's fitted factors (not a test; run by hand):

    .venv/bin/python -m tests.bench_perf

Fits ``hbm_efficiency`` to the calibration results' TPOT and ``prefill_utilisation`` to their
median TTFT by bisection, every other factor as catalogued (components/catalog/calibration.py), then
prints every published result beside the model's prediction with the catalogued factors. The
holdout results are printed, never fitted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from components import planner
from components.catalog import tpu as tpu_catalog
from components.catalog.calibration import FACTORS, PUBLISHED, EfficiencyFactors, Metric, PublishedResult
from components.catalog.models import MODELS
from components.planner import perf


def predict(r: PublishedResult, f: EfficiencyFactors) -> perf.ServingEstimate:
    """The model's estimate for published result ``r`` with factors ``f``."""
    (tpu,) = (s for s in tpu_catalog.all_slices() if s.key == r.slice_key)
    arch = MODELS[r.model]
    workload = planner.ServingWorkload(r.engine, max_target_length=r.max_target_length, reserve_fraction=r.reserve_fraction)
    p = planner.plan(arch, tpu, workload, region=None)
    server = perf.Server(r.max_num_seqs, "vLLM --max-num-seqs (the source's)", r.max_num_batched_tokens)
    scenario = perf.Scenario(r.input_tokens, r.output_tokens, r.concurrency)
    return perf.estimate(arch, p, scenario, server=server, region=None, perf_key=r.engine, factors=f)


def metric(e: perf.ServingEstimate, name: Metric) -> float:
    return {"output_tokens_per_s": e.output_tokens_per_s, "ttft_ms": e.ttft_ms, "tpot_ms": e.tpot_ms}[name]


def bisect(fn: Callable[[float], float], lo: float, hi: float) -> float:
    """x in [lo, hi] where the decreasing ``fn`` crosses zero."""
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fn(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def _miss(r: PublishedResult, factor: str, name: Metric) -> Callable[[float], float]:
    """Predicted minus published ``name`` of ``r`` as a function of one factor (the rest catalogued)."""

    def fn(x: float) -> float:
        return metric(predict(r, dataclasses.replace(FACTORS[r.engine], **{factor: x})), name) - r.measured[name]

    return fn


def main() -> None:
    for r in (r for r in PUBLISHED if r.role == "calibration"):
        hbm = bisect(_miss(r, "hbm_efficiency", "tpot_ms"), 0.05, 1.0)
        pre = bisect(_miss(r, "prefill_utilisation", "ttft_ms"), 0.01, 1.0)
        print(f"{r.key}: hbm_efficiency fit {hbm:.4f}, prefill_utilisation fit {pre:.4f}")
    for r in PUBLISHED:
        e = predict(r, FACTORS[r.engine])
        for name, measured in r.measured.items():
            value = metric(e, name)
            print(
                f"{r.role:11} {r.key} {name}: predicted {value:.2f}, published {measured}, {100 * (value / measured - 1):+.1f}%"
            )


if __name__ == "__main__":
    main()
