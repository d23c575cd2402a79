"""Benchmark (issue 14 acceptance): ``plan STACK --json`` against the import time of what it needs.

Prints, for one stack (default llama-70b), the median over ``--runs`` fresh processes of

(a) ``python -m components plan STACK --json``;
(b) a process that only imports the modules the plan really executed from pulumi, pydantic, jax,
    pulumi_gcp and pulumi_kubernetes: read from ``sys.modules`` after a plan run in another
    process, leaving out the provider submodules that were only registered for lazy loading and
    never loaded (their dependencies, e.g. numpy, jaxlib, grpc, protobuf, come along as in the plan);
(c) the ratio (a) / (b); the target is at most 1.5.

Plan and floor runs alternate, so load from other processes on the machine hits both alike.
Not a test: figures vary by machine; the suite never times anything.

Run: .venv/bin/python tests/bench_import.py [STACK] [--runs N] [--modules]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pulumi", "pydantic", "jax", "pulumi_gcp", "pulumi_kubernetes")
TARGET = 1.5

# Runs one plan in-process, then prints the modules of PACKAGES it really loaded, in load order.
# A provider SDK registers every submodule as a lazy placeholder (pulumi._utils._LazyModule) and
# loads it on first attribute access; a placeholder still of that class was never loaded.
_DISCOVER = """
import contextlib, io, json, sys
from components.tools.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main(["plan", sys.argv[1], "--json"])
if status:
    raise SystemExit(f"plan {sys.argv[1]} exited {status}")
packages = set(sys.argv[2].split(","))
print(json.dumps([
    name for name, module in list(sys.modules.items())
    if module is not None and name.partition(".")[0] in packages and type(module).__name__ != "_LazyModule"
]))
"""

# Imports the listed modules, loading (as the plan did) those a parent left as lazy placeholders.
_FLOOR = """
import importlib, json, sys
for name in json.loads(open(sys.argv[1]).read()):
    module = importlib.import_module(name)
    if type(module).__name__ == "_LazyModule":
        hasattr(module, "__all__")  # any attribute but the introspection ones triggers the load
"""


def needed_modules(stack: str) -> list[str]:
    """The modules of :data:`PACKAGES` that ``plan STACK --json`` executes, in load order."""
    proc = subprocess.run(
        [sys.executable, "-c", _DISCOVER, stack, ",".join(PACKAGES)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    modules = json.loads(proc.stdout)
    assert isinstance(modules, list)
    return [str(m) for m in modules]


def wall_seconds(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stack", nargs="?", default="llama-70b")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per measurement (median)")
    parser.add_argument("--modules", action="store_true", help="also print the floor's module list")
    args = parser.parse_args()

    modules = needed_modules(args.stack)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as listing:
        json.dump(modules, listing)
    plan_cmd = [sys.executable, "-m", "components", "plan", args.stack, "--json"]
    floor_cmd = [sys.executable, "-c", _FLOOR, listing.name]
    plan_s: list[float] = []
    floor_s: list[float] = []
    try:
        wall_seconds(floor_cmd)  # warm the file cache for both (the floor's files are a subset of the plan's)
        for _ in range(args.runs):
            plan_s.append(wall_seconds(plan_cmd))
            floor_s.append(wall_seconds(floor_cmd))
    finally:
        Path(listing.name).unlink()

    plan_median, floor_median = statistics.median(plan_s), statistics.median(floor_s)
    ratio = plan_median / floor_median
    counts = collections.Counter(m.partition(".")[0] for m in modules)
    per_package = ", ".join(f"{p} {counts[p]}" for p in PACKAGES)
    print(f"stack {args.stack}: median of {args.runs} fresh processes each, seconds")
    print(f"(a) plan {args.stack} --json      {plan_median:6.2f}   (runs: {' '.join(f'{s:.2f}' for s in plan_s)})")
    print(f"(b) import of what it needs  {floor_median:6.2f}   (runs: {' '.join(f'{s:.2f}' for s in floor_s)})")
    print(f"    {len(modules)} modules: {per_package}")
    print(f"(c) ratio (a)/(b)            {ratio:6.2f}   target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'}")
    if args.modules:
        print("\n".join(modules))


if __name__ == "__main__":
    main()
