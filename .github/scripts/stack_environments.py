"""Check a dispatched stack name, and read each stack's GitHub environment from the offline plans
(`python -m components plan`).

The stacks are the files in stacks/ and the environment a stack deploys to is the stack file's own
`gke-tpu-llm:environment`, which the offline plan resolves and validates; the workflows read both
here instead of keeping a list.

    stack_environments.py check-stack STACK [--stacks-dir DIR]
        deploy.yml's free-text `stack` input, before anything uses it: a stack name (letters,
        digits, '-', '_', '.', a letter or digit first) whose DIR/Pulumi.STACK.yaml (default
        stacks/) exists. Exits 1 with a GitHub `::error::` line otherwise.
    stack_environments.py environment PLAN.json
        The environment of one stack (`plan STACK --json`); exits 1 when it is missing.
    stack_environments.py file-environment Pulumi.STACK.yaml
        The `gke-tpu-llm:environment` a stack file sets (`dev` when unset, `none` when the file does
        not exist): deploy.yml reads main's copy, so a branch cannot turn a prod stack into dev.
        Needs PyYAML (run it with the project's .venv).
    stack_environments.py matrix --exclude prod HEAD.json [BASE.json ...]
        A JSON list of the stacks in HEAD.json (`plan --all --json`) for a job matrix, leaving out
        every stack whose environment is excluded in ANY of the files: with the base commit's plans
        too, a pull request that moves a stack out of prod still does not get it previewed.

Standard library only: it runs before anything else is set up.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ENVIRONMENT_NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")
"""A GitHub environment this script names (a stack's ``gke-tpu-llm:environment``), matched whole."""
STACK_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]{0,99}")
"""A stack of stacks/, matched whole: components/config/stack_files.py STACK_NAME_PATTERN (this script
runs before the project is installed, so it holds a copy; tests/test_workflows.py keeps them equal)."""


def _plans(path: Path) -> dict[str, dict[str, Any]]:
    """stack -> plan, from either one plan object or `plan --all --json`'s mapping."""
    doc = json.loads(path.read_text())
    if not isinstance(doc, dict):
        raise SystemExit(f"{path}: expected a JSON object, got {type(doc).__name__}")
    if "stack" in doc and isinstance(doc.get("stack"), str):
        return {doc["stack"]: doc}
    return {str(stack): plan for stack, plan in doc.items() if isinstance(plan, dict)}


def environment_of(plan: dict[str, Any], where: str) -> str:
    env = plan.get("environment")
    if not isinstance(env, str) or not ENVIRONMENT_NAME.fullmatch(env):
        raise SystemExit(f"{where}: no valid environment in the plan (got {env!r})")
    return env


def file_environment(path: Path) -> str:
    """The environment a stack file sets: ``dev`` when unset (the config default), ``none`` when the
    file does not exist; an unreadable file or value is an error (the caller must not guess)."""
    if not path.exists():
        return "none"
    import yaml  # the project's .venv has it; only this command needs it

    doc = yaml.safe_load(path.read_text()) or {}
    config = doc.get("config") if isinstance(doc, dict) else None
    env = (config or {}).get("gke-tpu-llm:environment", "dev") if isinstance(config, dict) or config is None else None
    if not isinstance(env, str) or not ENVIRONMENT_NAME.fullmatch(env):
        raise SystemExit(f"{path}: no valid gke-tpu-llm:environment (got {env!r})")
    return env


def stack_problem(name: str, stacks_dir: Path) -> str | None:
    """Why ``name`` is not a stack of ``stacks_dir``, or None. The name is compared with the names of
    the files there, never joined into a path; a refused name is quoted (``repr``: one line, so it
    cannot start a workflow command of its own)."""
    if not STACK_NAME.fullmatch(name):
        return (
            f"stack {name[:120]!r} is not a stack name: letters, digits, '-', '_' and '.' (at most 100), "
            "a letter or digit first"
        )
    found = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
    if name not in found:
        return f"no stack file {stacks_dir.name}/Pulumi.{name}.yaml in this commit; its stacks: {', '.join(found) or 'none'}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check-stack", help="the dispatched name is a stack of stacks/")
    check.add_argument("stack")
    check.add_argument("--stacks-dir", type=Path, default=Path("stacks"))
    one = sub.add_parser("environment", help="the environment of one stack's plan")
    one.add_argument("plan", type=Path)
    file_env = sub.add_parser("file-environment", help="the environment a stack file sets")
    file_env.add_argument("path", type=Path)
    many = sub.add_parser("matrix", help="JSON list of stacks whose environment is not excluded")
    many.add_argument("--exclude", action="append", default=[], metavar="ENVIRONMENT")
    many.add_argument("plans", type=Path, nargs="+")
    args = parser.parse_args(argv)

    if args.command == "check-stack":
        problem = stack_problem(args.stack, args.stacks_dir)
        if problem is not None:
            print(f"::error::{problem}")  # stdout: where the runner reads workflow commands
            return 1
        return 0
    if args.command == "file-environment":
        print(file_environment(args.path))
        return 0
    if args.command == "environment":
        plans = _plans(args.plan)
        if len(plans) != 1:
            raise SystemExit(f"{args.plan}: expected the plan of one stack, found {len(plans)}")
        ((stack, plan),) = plans.items()
        print(environment_of(plan, stack))
        return 0

    stacks = set(_plans(args.plans[0]))
    excluded = {
        stack
        for path in args.plans
        for stack, plan in _plans(path).items()
        if environment_of(plan, f"{path}: {stack}") in args.exclude
    }
    print(json.dumps(sorted(stacks - excluded)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
