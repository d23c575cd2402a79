"""Benchmark: median wall and CPU time of the offline `plan` per stack, beside the import floor.

Run: .venv/bin/python tests/bench_plan.py [--runs N]
Each sample is a fresh process (what a user waits for), in this environment as it is. The floor here
is a bare import of the top-level packages pulumi, pulumi_gcp, pulumi_kubernetes and jax, a rough
per-stack yardstick; the acceptance figure (plan against the import of the modules it really
executes) is ``tests/bench_import.py``. Not a test: figures vary by machine; the suite never times
anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.config import stack_files as stacks  # noqa: E402
from tests.bench_import import timed  # noqa: E402

FLOOR = "import pulumi, pulumi_gcp, pulumi_kubernetes, jax"


def medians(cmd: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` fresh processes."""
    samples = [timed(cmd, dict(os.environ)) for _ in range(runs)]
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    floor_wall, floor_cpu = medians([sys.executable, "-c", FLOOR], args.runs)
    print(f"{'stack':<24} {'plan wall / CPU (s)':>20} {'floor wall / CPU (s)':>21} {'plan - floor wall (s)':>22}")
    for stack in stacks.list_stacks():
        wall, cpu = medians([sys.executable, "-m", "components", "plan", stack, "--json"], args.runs)
        print(f"{stack:<24} {wall:>11.2f} / {cpu:>5.2f} {floor_wall:>12.2f} / {floor_cpu:>5.2f} {wall - floor_wall:>22.2f}")


if __name__ == "__main__":
    main()
