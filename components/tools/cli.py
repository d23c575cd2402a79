"""Offline CLI: ``python -m components plan|render|review|teardown|estimate|preflight|roles|docs`` (see
components/README-offline.md; ``preflight`` is the one command that calls Google Cloud).

Runs the real Pulumi program under the mock engine (``components.tools.report`` plans a stack read by
``components.config.stack_files`` and run by ``components.tools.mockengine``). A bad config exits 2 with the full
report on stderr; nothing is registered. This module parses the command line and runs ``plan``, ``render``,
``teardown`` and ``roles``; ``plan_view`` prints a plan, ``cli_estimate`` and ``cli_review`` hold ``estimate``,
``review`` and ``teardown --state``, ``preflight_online`` holds ``preflight``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import stack_files as stacks
from ..config.errors import ConfigError
from ..config.workload import MAX_CONCURRENCY, MAX_TARGET_LENGTH
from . import cli_estimate, cli_review, manifests, report
from .plan_view import print_plan


def _read_stack_file(path: Path) -> stacks.StackFile:
    """The stack file at ``path``; a file that is not one (missing, binary, malformed YAML, wrong
    shape) exits 2 with the report, like any other config problem."""
    try:
        return stacks.read_stack_file(path)
    except ConfigError as error:
        print(f"{path}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _stack_file(args: argparse.Namespace) -> stacks.StackFile:
    if args.config and args.stack:
        # Which one would run is not obvious to the reader of the command: refuse rather than pick.
        print(f"give a STACK name or --config FILE, not both (got {args.stack!r} and --config {args.config})", file=sys.stderr)
        raise SystemExit(2)
    if args.config:
        return _read_stack_file(Path(args.config))
    if not args.stack:
        print("give a STACK name or --config FILE", file=sys.stderr)
        raise SystemExit(2)
    path = stacks.stack_path(args.stack)
    if not path.is_file():
        print(f"no stack file {path}; stacks: {', '.join(stacks.list_stacks())}", file=sys.stderr)
        raise SystemExit(2)
    return _read_stack_file(path)


def _bounded_int(flag: str, most: int) -> Any:
    """argparse type: an integer in 1..``most`` (argparse exits 2 with the message otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes a whole number, not {text!r}") from None
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"{flag} {value} is outside 1..{most}")
        return value

    return parse


def _roles(args: argparse.Namespace) -> int:
    """``roles``: the deployer's minimal IAM permissions and predefined roles for one stack, derived
    from the resource types its plan registers (``components.tools.roles``)."""
    from .deployer_rows import RolesError
    from .roles import custom_role_yaml, deployer_roles, render

    stack_file = _stack_file(args)
    try:
        result = report.plan(stack_file)
    except ConfigError as error:
        print(f"{stack_file.path}: {error}", file=sys.stderr)
        return 2
    cfg = result.config
    try:
        roles = deployer_roles(
            result.stack, cfg.environment.value, cfg.project, [r.to_dict() for r in result.resources]
        )
    except RolesError as error:
        print(f"roles: {result.stack}: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(roles.to_dict(), separators=(",", ":")))
    elif args.format == "custom-role":
        print(custom_role_yaml(roles), end="")
    else:
        print(render(roles), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    commands = (
        ("plan", "show what the stack would create"),
        ("render", "write the Kubernetes manifests"),
        ("teardown", "what `pulumi destroy --exclude-protected` removes and retains (exit 2 while prod is protected)"),
    )

    def stack_command(name: str, help_text: str) -> argparse.ArgumentParser:
        """A subcommand of one stack: by name, or ``--config FILE``."""
        p = sub.add_parser(name, help=help_text)
        p.add_argument("stack", nargs="?", help="stack name (stacks/Pulumi.<stack>.yaml)")
        p.add_argument("--config", metavar="FILE", help="this stack file instead of a named stack")
        return p

    for name, help_text in commands:
        p = stack_command(name, help_text)
        p.add_argument("--all", action="store_true", help="every stack in stacks/")
        if name == "plan":
            p.add_argument("--json", action="store_true", help="print one JSON object (with --all: one per stack)")
        elif name == "render":
            p.add_argument("--out", metavar="DIR", help="output directory (default manifests/STACK/)")
        else:
            p.add_argument(
                "--state", metavar="FILE", help="list what a real stack still holds (`pulumi stack export` after the destroy)"
            )
    est = stack_command(
        "estimate",
        "predicted output tokens/s, TTFT, TPOT and $ per million output tokens of a serving scenario on every "
        "slice the stack could use (flags override workload.serving)",
    )
    est.add_argument("--input-tokens", type=_bounded_int("--input-tokens", MAX_TARGET_LENGTH), metavar="N")
    est.add_argument("--output-tokens", type=_bounded_int("--output-tokens", MAX_TARGET_LENGTH), metavar="N")
    est.add_argument("--concurrency", type=_bounded_int("--concurrency", MAX_CONCURRENCY), metavar="N")
    est.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser(
        "docs", help="regenerate the configuration reference, stacks/CONFIGURATION.md, and the config: block of Pulumi.yaml"
    )
    check = stack_command(
        "preflight",
        "check the stack's TPU quota, reservations and zone in its project with your application-default "
        "credentials (exit 1 names each missing item, 3 when the check cannot run)",
    )
    check.add_argument("--json", action="store_true", help="print the results as one JSON object")
    roles = stack_command(
        "roles",
        "the deployer's minimal IAM permissions and predefined roles, derived from the resource types the stack registers",
    )
    roles_output = roles.add_mutually_exclusive_group()
    roles_output.add_argument("--json", action="store_true", help="print one JSON object")
    roles_output.add_argument(
        "--format",
        choices=("text", "custom-role"),
        default="text",
        help="custom-role: a YAML file for `gcloud iam roles create ROLE_ID --project PROJECT --file FILE`",
    )
    review = sub.add_parser(
        "review", help="what `pulumi up` will do, from two `plan --json` files (exit 2 when the engine would refuse it)"
    )
    review.add_argument("base", help="plans of the base commit (`plan --all --json`), or `pulumi stack export` of one stack")
    review.add_argument("head", help="plans of the head commit (`plan --all --json` or `plan STACK --json`)")
    review.add_argument("--stack", help="the stack a `pulumi stack export` base belongs to")
    args = parser.parse_args(argv)
    if args.command == "preflight":
        from .preflight_online import command

        return command(_stack_file(args), as_json=args.json)
    if args.command == "review":
        return cli_review.review(args.base, args.head, args.stack)
    if args.command == "estimate":
        return cli_estimate.command(
            _stack_file(args),
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            concurrency=args.concurrency,
            as_json=args.json,
        )
    if args.command == "roles":
        return _roles(args)
    if args.command == "teardown" and args.state:
        return cli_review.teardown_state(args.state, args.stack)
    if args.command == "docs":
        from .docs import write_reference
        from .project_config import ProjectFileError, write_project_config

        print(f"wrote the configuration reference to {write_reference()}")
        try:
            print(f"wrote the project config schema (config:) to {write_project_config()}")
        except ProjectFileError as error:
            print(f"Pulumi.yaml: {error}", file=sys.stderr)
            return 2
        return 0

    stack_files = (
        [_read_stack_file(stacks.stack_path(s)) for s in stacks.list_stacks()]
        if getattr(args, "all", False)
        else [_stack_file(args)]
    )
    all_plans: dict[str, Any] = {}
    status = 0
    for stack_file in stack_files:
        for key in stack_file.placeholders:
            print(
                f"note: {key} is not in {stack_file.path.name}; previewing with a placeholder "
                f"(pulumi up requires: pulumi config set --secret {key} <value>)",
                file=sys.stderr,
            )
        try:
            result = report.plan(stack_file)
        except ConfigError as error:
            print(f"{stack_file.path}: {error}", file=sys.stderr)
            if getattr(args, "all", False):
                status = 2  # every stack's problems in one run (two stacks sharing a name both say so)
                continue
            return 2
        if args.command == "teardown":
            from .teardown import plan_teardown_of, render

            teardown = plan_teardown_of(report.plan_json(result))
            print(render(result.stack, result.config.environment.value, teardown), end="")
            if teardown.blockers:
                status = 2  # every stack is still shown
        elif args.command == "plan":
            if args.json and args.all:
                all_plans[result.stack] = report.plan_json(result)
            elif args.json:
                # Compact: json's C encoder only runs without indent, and a 405B plan is ~2 MB
                # (pipe to `jq .` to read it).
                print(json.dumps(report.plan_json(result), separators=(",", ":")))
            else:
                print_plan(result)
        else:
            out = Path(args.out) if args.out and not args.all else None
            written = manifests.write_manifests(result.stack, result.manifests, out)
            where = out or manifests.MANIFESTS_DIR / result.stack
            print(f"{result.stack}: wrote {len(written)} manifest(s) to {where}")
    if all_plans:
        print(json.dumps(all_plans, separators=(",", ":")))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
