"""The serving model's calibration set and its fit (components/catalog/calibration*.py,
components/planner/fit_perf.py): the acceptance of issue 27 on the stored fit, and that the stored
fit is the fit of the rows as they are."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest

from components.catalog import calibration
from components.catalog.calibration import FIT, PUBLISHED, PublishedResult, calibration_of
from components.catalog.models import ARCHITECTURES
from components.catalog.tpu import GENERATIONS
from components.planner import fit_perf, perf
from components.planner.fit import plan
from components.planner.inputs import ServingWorkload

LOO_TOLERANCE = 0.25
BOUND_SHARE = 0.75

FAMILY = FIT["families"]


def _measurements() -> list[PublishedResult]:
    return [r for r in PUBLISHED if r.kind == "measurement" and r.fitted]


def test_the_stored_fit_is_of_the_rows_as_they_are() -> None:
    """Editing a row, a prior or a bound without ``python -m components.planner.fit_perf`` fails here."""
    assert FIT["inputs_sha256"] == calibration.inputs_hash()


def test_the_stored_factors_are_the_ones_a_refit_gives() -> None:
    for engine, fam in FAMILY.items():
        rows = [r for r in PUBLISHED if r.engine == engine and r.fitted]
        refit = fit_perf.fit(rows)
        for name, stored in fam["factors"].items():
            assert getattr(refit, name) == pytest.approx(stored, rel=1e-3, abs=1e-6), name


def test_at_least_six_measurements_from_two_model_sizes() -> None:
    rows = _measurements()
    assert len(rows) >= 6
    # and the known misses are a small minority of them
    assert len(KNOWN_MISSES) <= len(rows) // 6
    assert len({ARCHITECTURES[r.model].d_model for r in rows}) >= 2


KNOWN_MISSES: dict[str, str] = {}
"""Measurements the model misses beyond the tolerance, each with what was checked (none since the
prefill attention kernel has its own rate: the 8k/1k Qwen3-32B run was +51%). Strict: a refit that
brings one within ±25% fails here until it is removed, so the list cannot hide a point that is fine."""


def _loo_cases() -> list[object]:
    return [
        pytest.param(r, marks=pytest.mark.xfail(reason=KNOWN_MISSES[r.key], strict=True)) if r.key in KNOWN_MISSES else r
        for r in _measurements()
    ]


@pytest.mark.parametrize("row", _loo_cases(), ids=lambda r: r.key)
def test_leave_one_out_error(row: PublishedResult) -> None:
    """Acceptance: the fit without a measurement predicts it within ±25% (every metric it publishes)."""
    errors = FAMILY[row.engine]["leave_one_out_error"][row.key]
    misses = {m: e for m, e in errors.items() if abs(e) > LOO_TOLERANCE}
    assert not misses, f"{row.key}: leave-one-out {misses}"


@pytest.mark.parametrize("row", [r for r in PUBLISHED if r.kind == "lower_bound"], ids=lambda r: r.key)
def test_no_lower_bound_is_predicted_below_three_quarters_of_it(row: PublishedResult) -> None:
    f = calibration.FACTORS[row.engine]
    for name, err in fit_perf.errors(row, f).items():
        assert 1 + err >= BOUND_SHARE, f"{row.key} {name}: predicted {100 * (1 + err):.0f}% of the bound"


def test_every_row_is_sourced_dated_and_versioned() -> None:
    rows: list[PublishedResult | calibration.RecordedOnly] = [*PUBLISHED, *calibration.RECORDED]
    for r in rows:
        assert r.source
        assert r.date[:2] == "20"
        assert r.engine_version
    for r in PUBLISHED:
        assert r.model in ARCHITECTURES
        if not r.fitted:
            assert r.note, f"{r.key}: an unfitted row says why"
    for recorded in calibration.RECORDED:
        assert recorded.reason


def test_a_generation_without_a_point_is_uncalibrated() -> None:
    assert calibration_of("vllm", "v6e").calibrated
    v5p = calibration_of("vllm", "v5p")
    assert not v5p.calibrated
    assert v5p.note.startswith("uncalibrated: no vLLM TPU point on v5p")
    borrowed = calibration_of("maxtext", "v6e")
    assert not borrowed.calibrated
    assert "uncalibrated" in borrowed.note


def test_an_engine_version_outside_the_measured_builds_says_so() -> None:
    measured = FAMILY["vllm"]["engine_versions"][0]
    assert calibration_of("vllm", "v6e", measured).version_measured
    other = calibration_of("vllm", "v6e", "vllm/vllm-tpu:v0.0.1")
    assert not other.version_measured
    assert "outside the measured builds" in other.note


def test_the_compute_memory_overlap_never_hides_the_hbm_floor() -> None:
    """With every overlap the fit may choose, a step is never shorter than its HBM time."""
    row = PUBLISHED[0]
    for overlap in (0.0, 0.5, 1.0):
        f = dataclasses.replace(calibration.FACTORS["vllm"], overlap=overlap)
        e = fit_perf.predict(row, f)
        assert e.step.total >= max(e.step.hbm, e.step.compute) >= e.step.hbm_floor


def test_the_attention_kernel_share_is_the_published_runs_most_conservative() -> None:
    """The kernel's share grows with the prompt (per-chunk costs weigh less); the model takes the
    shortest published prompt's, the closest to the 1-8k prompts the stacks serve, which errs fast."""
    for head_dim in {r.head_dim for r in calibration.ATTENTION_KERNEL_RUNS}:
        runs = sorted((r for r in calibration.ATTENTION_KERNEL_RUNS if r.head_dim == head_dim), key=lambda r: r.context_tokens)
        shares = [calibration.attention_kernel_share(r) for r in runs]
        assert shares == sorted(shares), head_dim
        assert 0.0 < shares[0] < shares[-1] < 1.0
    shortest = min(calibration.ATTENTION_KERNEL_RUNS, key=lambda r: r.context_tokens)
    assert calibration.ATTENTION_KERNEL_SHARE == calibration.attention_kernel_share(shortest)
    assert calibration.FACTORS["vllm"].attention_kernel_share == calibration.ATTENTION_KERNEL_SHARE


def test_a_narrow_head_runs_at_the_mxu_share_it_fills() -> None:
    """The published runs of a 128-wide and a 256-wide head on tpu7x (256 MXU columns): at every prompt
    both time, the 128-wide one's share of the peak is half, within 10% (the MXU fill the model applies)."""
    by_shape: dict[int, dict[int, float]] = {}
    for r in calibration.ATTENTION_KERNEL_RUNS:
        gen = GENERATIONS[r.generation]
        raw = calibration.attention_kernel_share(r) * gen.mxu_fill(r.head_dim)  # share of the peak, unadjusted
        by_shape.setdefault(r.head_dim, {})[r.context_tokens] = raw
    narrow, wide = by_shape[128], by_shape[256]
    shared = narrow.keys() & wide.keys()
    assert len(shared) >= 3
    for tokens in shared:
        assert narrow[tokens] / wide[tokens] == pytest.approx(0.5, rel=0.10), tokens


def test_prefill_attention_runs_at_the_bf16_rate_whatever_the_weights() -> None:
    """fp8 weights double tpu7x's matmul peak, not the attention kernel's: the 8k-prompt run's step
    spends the same time in attention with bf16 weights, and longer in its matmuls."""
    row = next(r for r in PUBLISHED if r.key.endswith("fp8-8k1k-c135"))
    arch, f = ARCHITECTURES[row.model], calibration.FACTORS[row.engine]
    scenario = perf.Scenario(row.input_tokens, row.output_tokens, row.concurrency)

    def step(weight_dtype: Literal["fp8", "bfloat16"]) -> perf.StepTimes:
        workload = ServingWorkload(
            row.engine, max_target_length=row.max_target_length, weight_dtype=weight_dtype, kv_dtype=row.kv_dtype
        )
        p = plan(arch, fit_perf.slice_of(row), workload, region=None)
        return perf.step_times(arch, p, scenario, row.concurrency, f)

    fp8, bf16 = step("fp8"), step("bfloat16")
    assert fp8.attention > 0
    assert bf16.attention == pytest.approx(fp8.attention)
    assert bf16.compute > fp8.compute
