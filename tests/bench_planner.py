"""Planner timings (a script, not a test): jax import time and median wall time per seed plan.

Run: ``.venv/bin/python tests/bench_planner.py [repeats]``. Settings come from the stack files.
"cold" is validating the stack file plus the first plan of its model in this process (jax tracing
of the parameter tree; models shared by two stacks are traced once);
"warm" reuses the cached abstract tree and only lays arrays out on the mesh.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def jax_import_seconds(runs: int = 3) -> float:
    # A fresh interpreter per run: in-process re-imports are free.
    code = "import time; t = time.perf_counter(); import jax; print(time.perf_counter() - t)"
    times = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(runs)
    ]
    return statistics.median(times)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(repeats: int = 20) -> None:
    print(f"import jax (median of 3 fresh interpreters): {jax_import_seconds() * 1000:.0f} ms")
    start = time.perf_counter()
    from components import planner
    from components.catalog.models import MODELS

    print(f"import components.planner (jax not loaded yet): {(time.perf_counter() - start) * 1000:.1f} ms")
    start = time.perf_counter()
    import jax.numpy  # noqa: F401 - what the first plan would otherwise pay

    print(f"import jax in this process: {(time.perf_counter() - start) * 1000:.0f} ms")

    from components.config import stack_files as stacks
    from components.config.resolve import resolve, workload_of

    header = f"{'stack':<20} {'slice':<12} {'cold ms':>8} {'warm ms':>8} {'select ms':>9} {'resolve ms':>10}  per-chip"
    print(header)
    print("-" * len(header))
    for stack in stacks.list_stacks():
        stack_file = stacks.read_stack_file(stacks.stack_path(stack))
        start = time.perf_counter()
        config = stacks.config_of(stack_file).config  # validate + first (cold) plan of this stack's model
        cold = time.perf_counter() - start
        arch, tpu, workload = MODELS[config.workload.model], config.tpu.slice, workload_of(config)
        single_host = planner.single_host_only(config.kind_info.engine)
        warm = statistics.median(timed(lambda: planner.plan(arch, tpu, workload)) for _ in range(repeats))  # noqa: B023
        select = statistics.median(
            timed(lambda: planner.select_slice(arch, workload, region=config.region, single_host_only=single_host))  # noqa: B023
            for _ in range(max(1, repeats // 4))
        )
        whole = statistics.median(timed(lambda: resolve(config)) for _ in range(max(1, repeats // 4)))  # noqa: B023
        p = planner.plan(arch, tpu, workload)
        print(
            f"{stack:<20} {tpu.key:<12} {cold * 1000:8.1f} {warm * 1000:8.2f} {select * 1000:9.1f} {whole * 1000:10.1f}  "
            f"{p.memory.total / 1e9:.2f}/{p.memory.hbm / 1e9:.0f} GB ({p.memory.summary()})"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
