"""Fit the serving model's factors on the calibration set (offline; run by hand after the set changes):

    .venv/bin/python -m components.planner.fit_perf          # fit, print, write calibration_fit.json
    .venv/bin/python -m components.planner.fit_perf --check  # print the stored fit's errors only

Per engine family (the rows' ``engine``) it fits the factors of ``calibration.FIT_BOUNDS`` by
bounded least squares on the log ratio of predicted to published value of every metric of every
fitted measurement, with each lower bound as a one-sided constraint (a penalty only when the
prediction falls under the bound) and a weak pull towards ``calibration.PRIORS`` (so factors the
points cannot tell apart stay near their prior instead of drifting). Leave-one-out: for each
measurement, the fit without it predicts it. The result, with :func:`calibration.inputs_hash`, goes
to ``components/catalog/calibration_fit.json``; nothing fits at import time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from ..catalog import calibration
from ..catalog.calibration import FIT_BOUNDS, PRIORS, EfficiencyFactors, Metric, PublishedResult
from ..catalog.models import ARCHITECTURES
from ..catalog.tpu import GENERATIONS, TpuSlice
from . import perf
from .fit import plan
from .inputs import ServingWorkload
from .results import Plan

PRIOR_WEIGHT = 0.05
"""Weight of the pull towards the priors, per factor, in units of its bound's width (beside the
log-ratio residuals of the points, each about 0.1 for a 10% miss)."""
BOUND_WEIGHT = 10.0
"""Weight of a lower bound's shortfall: a constraint, not a point to match."""
BOUND_SLACK = 0.8
"""A lower bound binds the fit at this share of it (5 points over the acceptance's 75%, so the soft
constraint's residual shortfall stays inside that). The set's bounds are tpu-inference CI floors in
requests/s, run without --ignore-eos: requests may stop before OUTPUT_LEN, so the floor in tokens/s
at OUTPUT_LEN tokens each overstates what the run proves, by an unknown share."""
METRIC_WEIGHT: Mapping[Metric, float] = {"output_tokens_per_s": 1.0, "tpot_ms": 1.0, "ttft_ms": 0.5}
"""TTFT counts half: it is a median under queueing, the least steady of the three."""


def slice_of(r: PublishedResult) -> TpuSlice:
    """The row's slice (built from the generation row: tpu7x 1x1x1 ran the set's Qwen3 runs though no
    stack's catalog shape lists it)."""
    return TpuSlice(GENERATIONS[r.generation], r.topology, r.chips_per_host)


def plan_of(r: PublishedResult) -> Plan:
    return _plan(r.key)


@cache
def _plan(key: str) -> Plan:
    (r,) = (p for p in calibration.PUBLISHED if p.key == key)
    workload = ServingWorkload(
        r.engine,
        max_target_length=r.max_target_length,
        reserve_fraction=r.reserve_fraction,
        weight_dtype=r.weight_dtype,
        kv_dtype=r.kv_dtype,
    )
    return plan(ARCHITECTURES[r.model], slice_of(r), workload, region=None)


def server_of(r: PublishedResult) -> perf.Server:
    return perf.Server(r.max_num_seqs, "vLLM --max-num-seqs (the source's)", r.max_num_batched_tokens)


def predict(r: PublishedResult, f: EfficiencyFactors) -> perf.ServingEstimate:
    """The model's estimate for row ``r`` with factors ``f``."""
    scenario = perf.Scenario(r.input_tokens, r.output_tokens, r.concurrency)
    return perf.estimate(
        ARCHITECTURES[r.model], plan_of(r), scenario, server=server_of(r), region=None, perf_key=r.engine, factors=f
    )


def metric(e: perf.ServingEstimate, name: Metric) -> float:
    return {"output_tokens_per_s": e.output_tokens_per_s, "ttft_ms": e.ttft_ms, "tpot_ms": e.tpot_ms}[name]


def burst_tokens_per_s(r: PublishedResult, f: EfficiencyFactors) -> float:
    """Output tokens/s of a burst run (``r.num_prompts`` sent at once): synchronised waves of at most
    the server's sequences (--max-num-seqs, or what the KV cache holds at ``input + output`` tokens
    each, the length every sequence of a wave reaches together); each wave prefills its prompts in
    steps of the token budget (compute, weights read, no decode batch to overlap with) and then
    decodes (no prefill to overlap with)."""
    arch, p = ARCHITECTURES[r.model], plan_of(r)
    slots = min(r.max_num_seqs, perf.max_concurrent_sequences(p, r.input_tokens + r.output_tokens))
    n = r.num_prompts or slots
    waves = [slots] * (n // slots) + ([n % slots] if n % slots else [])
    s = perf.Scenario(r.input_tokens, r.output_tokens, slots)
    seconds = 0.0
    for c in waves:
        prompt_tokens = c * r.input_tokens
        budget = min(r.max_num_batched_tokens or prompt_tokens, prompt_tokens)
        prefill = perf.step_times(arch, p, s, 0, f, prefill_tokens=budget).total
        decode = perf.step_times(arch, p, s, c, f, prefill_tokens=0).total
        seconds += math.ceil(prompt_tokens / budget) * prefill + (r.output_tokens - 1) * decode
    return n * r.output_tokens / seconds


def predicted(r: PublishedResult, f: EfficiencyFactors) -> dict[Metric, float]:
    """The model's value of every metric ``r`` publishes."""
    if r.num_prompts is not None:
        return {name: burst_tokens_per_s(r, f) for name in r.measured if name == "output_tokens_per_s"}
    e = predict(r, f)
    return {name: metric(e, name) for name in r.measured}


def _factors(x: Sequence[float]) -> EfficiencyFactors:
    return dataclasses.replace(PRIORS, **dict(zip(FIT_BOUNDS, (float(v) for v in x), strict=True)))


def _residuals(x: Sequence[float], rows: Sequence[PublishedResult]) -> list[float]:
    f = _factors(x)
    out: list[float] = []
    for r in rows:
        values = predicted(r, f)
        for name, published in r.measured.items():
            ratio = math.log(values[name] / published)
            if r.kind == "measurement":
                out.append(METRIC_WEIGHT[name] * ratio)
            else:
                out.append(BOUND_WEIGHT * min(0.0, ratio - math.log(BOUND_SLACK)))
    for factor, value in zip(FIT_BOUNDS, x, strict=True):
        lo, hi = FIT_BOUNDS[factor]
        out.append(PRIOR_WEIGHT * (value - getattr(PRIORS, factor)) / (hi - lo))
    return out


def fit(rows: Sequence[PublishedResult]) -> EfficiencyFactors:
    """The factors of ``FIT_BOUNDS`` that best reproduce ``rows`` (bounded least squares)."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]  # offline only: a dev dependency

    x0 = [getattr(PRIORS, n) for n in FIT_BOUNDS]
    lo = [FIT_BOUNDS[n][0] for n in FIT_BOUNDS]
    hi = [FIT_BOUNDS[n][1] for n in FIT_BOUNDS]
    x_scale = [h - lo_ for lo_, h in zip(lo, hi, strict=True)]
    result = least_squares(_residuals, x0, bounds=(lo, hi), args=(list(rows),), x_scale=x_scale, diff_step=1e-4)
    return _factors(result.x)


def errors(r: PublishedResult, f: EfficiencyFactors) -> dict[str, float]:
    """Predicted over published minus one, per metric (a lower bound: predicted over the bound)."""
    values = predicted(r, f)
    return {name: values[name] / v - 1 for name, v in r.measured.items()}


def family_fit(engine: str) -> dict[str, Any]:
    rows = [r for r in calibration.PUBLISHED if r.engine == engine and r.fitted]
    factors = fit(rows)
    loo: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.kind == "measurement":
            loo[r.key] = errors(r, fit([o for o in rows if o is not r]))
    measured = [r for r in rows if r.kind == "measurement"]
    return {
        "factors": {n: round(getattr(factors, n), 6) for n in FIT_BOUNDS},
        "points": [r.key for r in rows],
        "generations": sorted({r.generation for r in measured}),
        "engine_versions": sorted({r.engine_version for r in measured}),
        "models": sorted({r.model for r in measured}),
        "in_sample_error": {r.key: {k: round(v, 4) for k, v in errors(r, factors).items()} for r in rows},
        "leave_one_out_error": {k: {m: round(v, 4) for m, v in d.items()} for k, d in loo.items()},
    }


def report(stored: Mapping[str, Any]) -> str:
    lines = []
    for engine, fam in stored["families"].items():
        lines.append(f"{engine}: factors {fam['factors']}")
        f = dataclasses.replace(PRIORS, **fam["factors"])
        assumed = {n: round(getattr(f, n), 6) for n in (x.name for x in dataclasses.fields(f)) if n not in FIT_BOUNDS}
        lines.append(f"  assumed (not fitted, calibration.PRIORS): {assumed}")
        pinned = [
            f"{n} = {v:g} ({'lower' if v <= FIT_BOUNDS[n][0] else 'upper'})"
            for n, v in fam["factors"].items()
            if v <= FIT_BOUNDS[n][0] or v >= FIT_BOUNDS[n][1]
        ]
        if pinned:
            lines.append(f"  at a bound of calibration.FIT_BOUNDS (the points would take it further): {', '.join(pinned)}")
        for r in calibration.PUBLISHED:
            if r.engine != engine:
                continue
            for name, err in errors(r, f).items():
                loo = fam["leave_one_out_error"].get(r.key, {}).get(name)
                tag = "bound" if r.kind == "lower_bound" else "fit" if r.fitted else "not fitted"
                loo_s = "" if loo is None else f", leave-one-out {100 * loo:+.1f}%"
                lines.append(f"  {tag:10} {r.key} {name}: in-sample {100 * err:+.1f}%{loo_s}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m components.planner.fit_perf")
    parser.add_argument("--check", action="store_true", help="print the stored fit's errors, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        print(report(calibration.FIT))
        return
    engines = sorted({r.engine for r in calibration.PUBLISHED if r.fitted})
    stored = {
        "inputs_sha256": calibration.inputs_hash(),
        "fitted_by": "python -m components.planner.fit_perf",
        "families": {e: family_fit(e) for e in engines},
    }
    calibration.FIT_TABLE.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(report(stored))


if __name__ == "__main__":
    main()
