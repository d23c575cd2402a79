"""Planner timings (a script, not a test): jax import time and median wall time per seed plan.

Run: ``PYTHONPATH=. .venv/bin/python tests/bench_planner.py [repeats]``.
"cold" is the first plan of a model in this process (jax tracing of the parameter tree);
"warm" reuses the cached abstract tree and only lays arrays out on the mesh.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable


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
    from components.catalog.tpu import find_slice

    print(f"import components.planner (jax not loaded yet): {(time.perf_counter() - start) * 1000:.1f} ms")
    start = time.perf_counter()
    import jax.numpy  # noqa: F401 - what the first plan would otherwise pay

    print(f"import jax in this process: {(time.perf_counter() - start) * 1000:.0f} ms")

    seeds: dict[str, tuple[tuple[str, str, str | None], planner.Workload]] = {
        "llama3.1-405b": (
            ("v6e", "4x4", None),
            planner.ServingWorkload("maxtext", 2048, 1024, per_device_batch_size=6, weight_dtype="int8", kv_dtype="int8"),
        ),
        "llama3.1-70b": (("v6e", "2x4", "ct6e-standard-8t"), planner.ServingWorkload("vllm", 4096)),
        "llama2-70b": (
            ("v6e", "2x4", "ct6e-standard-4t"),
            planner.ServingWorkload(
                "maxtext", 2048, 1024, per_device_batch_size=27, weight_dtype="int8", kv_dtype="int8", parallelism={"tensor": -1}
            ),
        ),
        "saxml-175b-32test": (("v5e", "4x8", None), planner.ServingWorkload("saxml", 256, 128, batch_size=1)),
        "llama3-8b": (("v6e", "4x4", None), planner.TrainingWorkload(1, 4096)),
    }
    header = f"{'model':<20} {'slice':<12} {'cold ms':>8} {'warm ms':>8} {'select ms':>9}  per-chip"
    print(header)
    print("-" * len(header))
    for name, ((generation, topology, machine), workload) in seeds.items():
        arch, tpu = MODELS[name], find_slice(generation, topology, machine)
        assert tpu is not None
        cold = timed(lambda: planner.plan(arch, tpu, workload))  # noqa: B023 - called immediately
        warm = statistics.median(timed(lambda: planner.plan(arch, tpu, workload)) for _ in range(repeats))  # noqa: B023
        select = statistics.median(
            timed(lambda: planner.select_slice(arch, workload, region="us-east5"))  # noqa: B023
            for _ in range(max(1, repeats // 4))
        )
        p = planner.plan(arch, tpu, workload)
        print(
            f"{name:<20} {tpu.key:<12} {cold * 1000:8.1f} {warm * 1000:8.2f} {select * 1000:9.1f}  "
            f"{p.memory.total / 1e9:.2f}/{p.memory.hbm / 1e9:.0f} GB ({p.memory.summary()})"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
