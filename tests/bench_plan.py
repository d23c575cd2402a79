"""Benchmark: median wall time of the offline `plan` per stack, beside the import floor.

Run: .venv/bin/python tests/bench_plan.py [--runs N]
Each sample is a fresh process (what a user waits for). The floor here is a bare import of the
top-level packages pulumi, pulumi_gcp, pulumi_kubernetes and jax, a rough per-stack yardstick; the
acceptance figure (plan against the import of the modules it really executes) is
``tests/bench_import.py``. Not a test: figures vary by machine; the suite never times anything.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.config import stack_files as stacks  # noqa: E402

FLOOR = "import pulumi, pulumi_gcp, pulumi_kubernetes, jax"


def median_seconds(cmd: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    floor = median_seconds([sys.executable, "-c", FLOOR], args.runs)
    print(f"{'stack':<20} {'plan median (s)':>16} {'floor (s)':>10} {'plan - floor (s)':>17}")
    for stack in stacks.list_stacks():
        t = median_seconds([sys.executable, "-m", "components", "plan", stack, "--json"], args.runs)
        print(f"{stack:<20} {t:>16.2f} {floor:>10.2f} {t - floor:>17.2f}")


if __name__ == "__main__":
    main()
