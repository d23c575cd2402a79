"""The serving model's calibration set and its fit (components/catalog/calibration*.py,
components/planner/fit_perf.py): the acceptance of issue 27 on the stored fit, and that the stored
fit is the fit of the rows as they are."""

from __future__ import annotations

import dataclasses

import pytest

from components.catalog import calibration
from components.catalog.calibration import FIT, PUBLISHED, PublishedResult, calibration_of
from components.catalog.models import ARCHITECTURES
from components.planner import fit_perf

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


KNOWN_MISSES = {
    "qwen3-32b-tpu7x-1x1x1-vllm-fp8-8k1k-c135": (
        "predicted +47% in-sample, +51% leave-one-out (too fast): the run implies ~213 s for 320 requests "
        "against ~146 s modelled, the gap in prefill, which would have to run at ~34% of the fp8 peak against "
        "the fitted 0.85. Tried: attention at the bf16 peak (+42%), KV-bound concurrency and preemption "
        "(worse), a fitted attention factor (passes in-sample, fails leave-one-out), fp8 at the bf16 peak "
        "(passes, but contradicts tpu-inference PR #620's +46% fp8 gain). No other point has enough prefill "
        "to fit a term honestly: needs a second long-prompt measurement"
    ),
}
"""Measurements the model misses beyond the tolerance, each with what was checked. Strict: a refit that
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
