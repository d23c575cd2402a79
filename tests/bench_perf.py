"""The serving model against its calibration set (not a test; run by hand):

    .venv/bin/python -m tests.bench_perf

Prints, per engine family, the stored fitted factors and every row of the calibration set beside
the model's prediction: in-sample error, leave-one-out error for each fitted measurement (the fit
without that row predicts it; stored by ``python -m components.planner.fit_perf``), and each lower
bound as a share of its floor. Rows recorded but not expressible are listed with their reason.
"""

from __future__ import annotations

from components.catalog import calibration
from components.planner import fit_perf


def main() -> None:
    print(fit_perf.report(calibration.FIT))
    for r in calibration.RECORDED:
        print(f"  recorded   {r.key} ({r.figure}): {r.reason}")


if __name__ == "__main__":
    main()
