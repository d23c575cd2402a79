"""Benchmark (issue 14 and 23 acceptance): ``plan STACK --json`` against the import time of what it needs.

Prints, for one stack (default llama-70b), the median over ``--runs`` fresh processes of

(a) ``python -m components plan STACK --json``;
(b) a process that only imports the modules the plan really executed from pulumi, pydantic, jax,
    pulumi_gcp and pulumi_kubernetes: read from ``sys.modules`` after a plan run in another
    process, leaving out the provider submodules that were only registered for lazy loading and
    never loaded (their dependencies, e.g. numpy, jaxlib, grpc, protobuf, come along as in the plan);
(c) the ratio (a) / (b); the target is at most 1.5.

Each figure is given as wall time and as CPU time (user + system of the process): on a machine
other jobs share, wall time moves with their load, CPU time much less. Plan and floor runs
alternate, so load hits both alike.

Bytecode: by default both sides run with a warm bytecode cache, as Python keeps one on a user's
machine from the second run on (a private ``PYTHONPYCACHEPREFIX``, so the working tree gets no
``__pycache__``; one untimed run of each fills it). ``--as-is`` runs them in this environment
unchanged instead: with ``PYTHONDONTWRITEBYTECODE`` set, the project's modules are compiled on every
run while the installed packages' are not (pip compiles those at install), which is what a first
run from a fresh clone costs.

Not a test: figures vary by machine; the suite never times anything.

Run: .venv/bin/python tests/bench_import.py [STACK] [--runs N] [--as-is] [--modules]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
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


def needed_modules(stack: str, env: dict[str, str] | None = None) -> list[str]:
    """The modules of :data:`PACKAGES` that ``plan STACK --json`` executes, in load order."""
    proc = subprocess.run(
        [sys.executable, "-c", _DISCOVER, stack, ",".join(PACKAGES)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    modules = json.loads(proc.stdout)
    assert isinstance(modules, list)
    return [str(m) for m in modules]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stack", nargs="?", default="llama-70b")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per measurement (median)")
    parser.add_argument("--as-is", action="store_true", help="this environment's bytecode settings, not a warm cache")
    parser.add_argument("--modules", action="store_true", help="also print the floor's module list")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-import-") as scratch:
        env = dict(os.environ)
        if not args.as_is:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
        modules = needed_modules(args.stack, env)
        listing = Path(scratch) / "modules.json"
        listing.write_text(json.dumps(modules))
        plan_cmd = [sys.executable, "-m", "components", "plan", args.stack, "--json"]
        floor_cmd = [sys.executable, "-c", _FLOOR, str(listing)]
        timed(plan_cmd, env)  # untimed: the file cache, and the bytecode cache unless --as-is
        timed(floor_cmd, env)
        plan_runs: list[tuple[float, float]] = []
        floor_runs: list[tuple[float, float]] = []
        for _ in range(args.runs):
            plan_runs.append(timed(plan_cmd, env))
            floor_runs.append(timed(floor_cmd, env))

    def medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)

    (plan_wall, plan_cpu), (floor_wall, floor_cpu) = medians(plan_runs), medians(floor_runs)
    plan_walls, floor_walls = (" ".join(f"{w:.2f}" for w, _ in runs) for runs in (plan_runs, floor_runs))
    counts = collections.Counter(m.partition(".")[0] for m in modules)
    per_package = ", ".join(f"{p} {counts[p]}" for p in PACKAGES)
    bytecode = "as this environment has it" if args.as_is else "warm bytecode cache"
    print(f"stack {args.stack}: median of {args.runs} fresh processes each ({bytecode}), seconds wall / CPU")
    print(f"(a) plan {args.stack} --json   {plan_wall:6.2f} / {plan_cpu:5.2f}   (wall: {plan_walls})")
    print(f"(b) import of what it needs  {floor_wall:6.2f} / {floor_cpu:5.2f}   (wall: {floor_walls})")
    print(f"    {len(modules)} modules: {per_package}")
    for label, ratio in (("wall", plan_wall / floor_wall), ("CPU", plan_cpu / floor_cpu)):
        print(f"(c) ratio (a)/(b), {label:<4}      {ratio:6.2f}   target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'}")
    if args.modules:
        print("\n".join(modules))


if __name__ == "__main__":
    main()
