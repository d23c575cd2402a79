"""Offline CLI: ``python -m components plan|render|review|teardown|estimate|preflight|roles|docs`` (see
components/README-offline.md; ``preflight`` is the one command that calls Google Cloud).

Runs the real Pulumi program under the mock engine (``components.tools.report`` plans a stack read by
``components.config.stack_files`` and run by ``components.tools.mockengine``). A bad config exits 2 with the full
report on stderr; nothing is registered. This module parses the command line, reports every error (on stderr, and
with ``--json`` as one JSON object on stdout: components/README-offline.md, "--json errors") and runs ``plan``,
``render``, ``teardown`` and ``roles``; ``plan_view`` prints a plan, ``cli_estimate`` and ``cli_review`` hold
``estimate``, ``review`` and ``teardown --state``, ``preflight_online`` holds ``preflight``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NoReturn

from ..config import stack_files as stacks
from ..config.errors import ConfigError, Violation
from ..config.workload import MAX_CONCURRENCY, MAX_TARGET_LENGTH
from . import cli_estimate, cli_review, manifests, report
from .plan_view import print_plan

ERROR_KINDS = ("usage", "not-found", "config", "cannot-check", "command", "internal")
"""``error.kind`` of a ``--json`` error object (components/README-offline.md, "--json errors")."""


class CliError(Exception):
    """An error the CLI reports: ``message`` on stderr as before, and with ``--json`` the error object
    on stdout. ``system_exit``: raised as ``SystemExit`` (command-line mistakes) rather than returned."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        exit_code: int = 2,
        stack: str | None = None,
        file: Path | None = None,
        problems: Sequence[Violation] = (),
        missing: str | None = None,
        fix: str | None = None,
        system_exit: bool = False,
    ) -> None:
        assert kind in ERROR_KINDS, kind
        super().__init__(message)
        self.kind, self.message, self.exit_code = kind, message, exit_code
        self.stack, self.file, self.problems = stack, file, list(problems)
        self.missing, self.fix, self.system_exit = missing, fix, system_exit

    def document(self, command: str | None) -> dict[str, Any]:
        """``{"error": {...}}``: every key always present (null when it does not apply), values JSON-safe."""
        return {
            "error": {
                "kind": self.kind,
                "exit": self.exit_code,
                "command": command,
                "stack": self.stack,
                "file": None if self.file is None else str(self.file),
                "message": self.message,
                "missing": self.missing,
                "fix": self.fix,
                "problems": [
                    {"key": v.key, "value": json_safe(v.value), "problem": v.problem, "allowed": v.allowed, "fix": v.fix}
                    for v in self.problems
                ],
            }
        }


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON: a stack file's value may be a date, a set or ``.nan``, which ``json``
    rejects or writes as invalid JSON (``NaN``); those become their text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((json_safe(v) for v in value), key=repr)
    return str(value)


def _print_json(document: Mapping[str, Any], stream: IO[str] | None = None) -> None:
    # Compact: json's C encoder only runs without indent, and a 405B plan is ~2 MB (pipe to `jq .`).
    print(json.dumps(document, separators=(",", ":")), file=stream or sys.stdout)


def _config_error(stack_file: stacks.StackFile | Path, error: ConfigError, *, system_exit: bool = False) -> CliError:
    path = stack_file if isinstance(stack_file, Path) else stack_file.path
    return CliError(
        "config",
        f"{path}: {error}",
        stack=None if isinstance(stack_file, Path) else stack_file.stack,
        file=path,
        problems=error.violations,
        fix=f"fix each problem in {path} (each names its fix)",
        system_exit=system_exit,
    )


@contextmanager
def _config_errors(stack_file: stacks.StackFile) -> Iterator[None]:
    """A ``ConfigError`` inside becomes the CLI's config error of ``stack_file``."""
    try:
        yield
    except ConfigError as error:
        raise _config_error(stack_file, error) from None


def _read_stack_file(path: Path) -> stacks.StackFile:
    """The stack file at ``path``; a file that is not one (missing, binary, malformed YAML, wrong
    shape) exits 2 with the report, like any other config problem."""
    try:
        return stacks.read_stack_file(path)
    except ConfigError as error:
        raise _config_error(path, error, system_exit=True) from None


def _usage(message: str, fix: str) -> CliError:
    return CliError("usage", message, fix=fix, system_exit=True)


def _stack_file(args: argparse.Namespace) -> stacks.StackFile:
    if args.config and args.stack:
        # Which one would run is not obvious to the reader of the command: refuse rather than pick.
        raise _usage(
            f"give a STACK name or --config FILE, not both (got {args.stack!r} and --config {args.config})",
            "drop STACK or --config",
        )
    if args.config:
        return _read_stack_file(Path(args.config))
    if not args.stack:
        raise _usage("give a STACK name or --config FILE", f"one of: {', '.join(stacks.list_stacks())}")
    path = stacks.stack_path(args.stack)
    if not path.is_file():
        known = ", ".join(stacks.list_stacks())
        raise CliError(
            "not-found",
            f"no stack file {path}; stacks: {known}",
            stack=args.stack,
            file=path,
            fix=f"give one of: {known} (or --config FILE)",
            system_exit=True,
        )
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
    with _config_errors(stack_file):
        result = report.plan(stack_file)
    cfg = result.config
    try:
        roles = deployer_roles(
            result.stack, cfg.environment.value, cfg.project, [r.to_dict() for r in result.resources]
        )
    except RolesError as error:
        # A registered type without a deployer row: a gap in components/tools/deployer_rows.py, not the stack file's.
        raise CliError("command", f"roles: {result.stack}: {error}", stack=result.stack) from None
    if args.json:
        _print_json(roles.to_dict())
    elif args.format == "custom-role":
        print(custom_role_yaml(roles), end="")
    else:
        print(render(roles), end="")
    return 0


def _preflight(args: argparse.Namespace) -> int:
    from .preflight_online import EXIT_CANNOT_CHECK, CannotCheckError, command

    stack_file = _stack_file(args)
    try:
        with _config_errors(stack_file):
            return command(stack_file, as_json=args.json)
    except CannotCheckError as error:
        raise CliError(
            "cannot-check",
            f"preflight {stack_file.stack}: cannot check: {error}",
            exit_code=EXIT_CANNOT_CHECK,
            stack=stack_file.stack,
            file=stack_file.path,
            missing=error.missing,
            fix=error.fix,
        ) from None


def _plan_stacks(args: argparse.Namespace) -> int:
    """``plan``, ``render`` and ``teardown`` of one stack or, with ``--all``, of each (every stack's
    problems in one run; with ``--json`` a failing stack's entry is its error object)."""
    if not args.all:
        return _plan_one(args, _stack_file(args), None)
    all_plans: dict[str, Any] = {}
    status = 0
    for stack in stacks.list_stacks():
        try:
            status = max(status, _plan_one(args, _read_stack_file(stacks.stack_path(stack)), all_plans))
        except CliError as error:
            print(error.message, file=sys.stderr)
            error.stack = error.stack or stack  # a file that does not parse has no stack of its own
            all_plans[stack] = error.document(args.command)
            status = max(status, error.exit_code)  # two stacks sharing a name both say so
    if args.command == "plan" and args.json:
        _print_json(all_plans)
    return status


def _plan_one(args: argparse.Namespace, stack_file: stacks.StackFile, all_plans: dict[str, Any] | None) -> int:
    """One stack of ``_plan_stacks``; ``all_plans`` collects ``plan --all --json``'s plans."""
    for key in stack_file.placeholders:
        print(
            f"note: {key} is not in {stack_file.path.name}; previewing with a placeholder "
            f"(pulumi up requires: pulumi config set --secret {key} <value>)",
            file=sys.stderr,
        )
    with _config_errors(stack_file):
        result = report.plan(stack_file)
    if args.command == "teardown":
        from .teardown import plan_teardown_of, render

        # Only the resources: the whole plan document (operations, endpoints, …) is not needed here.
        teardown = plan_teardown_of({"resources": [r.to_dict() for r in result.resources]})
        print(render(result.stack, result.config.environment.value, teardown), end="")
        return 2 if teardown.blockers else 0  # every stack is still shown
    if args.command == "plan":
        if args.json and all_plans is not None:
            all_plans[result.stack] = report.plan_json(result)
        elif args.json:
            _print_json(report.plan_json(result))
        else:
            print_plan(result)
        return 0
    out = Path(args.out) if args.out and not args.all else None
    written = manifests.write_manifests(result.stack, result.manifests, out)
    where = out or manifests.MANIFESTS_DIR / result.stack
    print(f"{result.stack}: wrote {len(written)} manifest(s) to {where}")
    return 0


class _UsageError(Exception):
    """What ``argparse`` would print before exiting 2: the usage line and the message."""

    def __init__(self, usage: str, message: str) -> None:
        super().__init__(message)
        self.usage, self.message = usage, message


class _Parser(argparse.ArgumentParser):
    """argparse, except that a command-line error is raised to ``main`` (which still exits 2 with
    argparse's text) so that ``--json`` can print it as JSON too. Subparsers are of the same class."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self.format_usage(), f"{self.prog}: error: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m components", description=__doc__)
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

    json_help = "print one JSON object (an error too: {\"error\": {...}}, same exit code)"
    for name, help_text in commands:
        p = stack_command(name, help_text)
        p.add_argument("--all", action="store_true", help="every stack in stacks/")
        if name == "plan":
            p.add_argument(
                "--json",
                action="store_true",
                help="print one JSON object (with --all: one per stack, a failing stack's being {\"error\": {...}})",
            )
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
    est.add_argument("--json", action="store_true", help=json_help)
    est.add_argument(
        "--plot", metavar="FILE.svg", help="draw every candidate slice ($ per million output tokens vs output tokens/s) as an SVG"
    )
    sub.add_parser(
        "docs", help="regenerate the configuration reference, stacks/CONFIGURATION.md, and the config: block of Pulumi.yaml"
    )
    check = stack_command(
        "preflight",
        "check the stack's TPU quota, reservations and zone in its project with your application-default "
        "credentials (exit 1 names each missing item, 3 when the check cannot run)",
    )
    check.add_argument("--json", action="store_true", help=json_help)
    roles = stack_command(
        "roles",
        "the deployer's minimal IAM permissions and predefined roles, derived from the resource types the stack registers",
    )
    roles_output = roles.add_mutually_exclusive_group()
    roles_output.add_argument("--json", action="store_true", help=json_help)
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
    review.add_argument(
        "--format",
        choices=("markdown", "terminal"),
        help="markdown: the pull-request comment as is; terminal: rendered (default: terminal when stdout is one)",
    )
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "preflight":
        return _preflight(args)
    if args.command == "review":
        return cli_review.review(args.base, args.head, args.stack, output_format=args.format)
    if args.command == "estimate":
        stack_file = _stack_file(args)
        with _config_errors(stack_file):  # a ConfigError estimate lets through is reported as every other
            return cli_estimate.command(
                stack_file,
                input_tokens=args.input_tokens,
                output_tokens=args.output_tokens,
                concurrency=args.concurrency,
                as_json=args.json,
                plot=args.plot,
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
    return _plan_stacks(args)


class _Watched:
    """A stream that remembers what went through it (``--json``: did the command print its own
    document on stdout, and what did it say on stderr)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.text: list[str] = []

    def write(self, text: str) -> int:
        self.text.append(text)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def _watched(enabled: bool) -> Iterator[tuple[_Watched, _Watched] | None]:
    if not enabled:
        yield None
        return
    out, err = sys.stdout, sys.stderr
    watched = _Watched(out), _Watched(err)
    sys.stdout, sys.stderr = watched
    try:
        yield watched
    finally:
        sys.stdout, sys.stderr = out, err


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    try:
        args = _parser().parse_args(argv)
    except _UsageError as error:
        sys.stderr.write(error.usage)
        print(error.message, file=sys.stderr)
        if "--json" in argv:
            fix = f"see `python -m components {command + ' ' if command else ''}--help`"
            _print_json(CliError("usage", error.message, fix=fix).document(command))
        raise SystemExit(2) from None
    as_json = bool(getattr(args, "json", False))
    with _watched(as_json) as watched:
        try:
            code = _dispatch(args)
        except CliError as error:
            print(error.message, file=sys.stderr)
            if as_json:
                _print_json(error.document(args.command))
            if error.system_exit:
                raise SystemExit(error.exit_code) from None
            return error.exit_code
        except SystemExit as exit_:
            code = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
            _unreported(watched, args, code, "command")
            raise
        except Exception as error:
            # A bug, not an input problem: the traceback still goes to stderr (re-raised), and --json still gets JSON.
            _unreported(watched, args, 1, "internal", f"{type(error).__name__}: {error}")
            raise
        _unreported(watched, args, code, "command")
        return code


def _unreported(
    watched: tuple[_Watched, _Watched] | None, args: argparse.Namespace, code: int, kind: str, message: str = ""
) -> None:
    """With ``--json``, a command that failed without printing its own JSON (one that reports its
    errors on stderr itself, such as ``estimate``'s scenario checks) still prints one error object:
    what it said on stderr is the message."""
    if watched is None or code == 0 or "".join(watched[0].text):
        return
    said = message or "".join(watched[1].text).strip() or f"{args.command} exited {code}"
    error = CliError(kind, said, exit_code=code, stack=getattr(args, "stack", None))
    _print_json(error.document(args.command), watched[0].stream)


if __name__ == "__main__":
    raise SystemExit(main())
