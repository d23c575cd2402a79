"""Tie an approval to exactly what was previewed (deploy.yml).

The preview job records what it previewed: the commit, the stack, its environment, the action, a
fingerprint of the stack's state (`pulumi stack export`) and the sha256 of the update plan
(`pulumi preview --save-plan`). The approval gate sits on the next job; before it applies anything,
that job checks that nothing moved in between: the same commit checked out, the same stack state,
the same plan file. Anything else fails with what moved and what to do.

    deploy_gate.py fingerprint STATE.json
        sha256 of the state export in canonical JSON (sorted keys, no whitespace), so the same
        state gives the same fingerprint however it is formatted.
    deploy_gate.py record --stack S --environment E --action A --sha SHA --state STATE.json [--plan PLAN]
        The approval record (JSON) on stdout.
    deploy_gate.py verify RECORD.json --stack S --environment E --action A --sha SHA --state STATE.json
                   [--plan PLAN] [--expect FIELD=VALUE ...]
        Exit 0 when the record matches the current commit, state and plan (and each --expect, the
        values the preview job also passed on as job outputs); exit 1 with one `::error::` line per
        difference otherwise.

Standard library only: it runs before anything else is set up.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from stack_environments import ENVIRONMENT_NAME, STACK_NAME  # this script's folder: the same name rules

_SHA = re.compile(r"[0-9a-f]{40}")
ACTIONS = ("up", "destroy")
FIELDS = ("stack", "environment", "action", "sha", "state", "plan")

# What each moved field means and what to do, for the error line.
_WHY = {
    "sha": "the commit moved: the approved preview ran on {recorded}, this job has {current}",
    "state": (
        "the stack's state moved since the preview (previewed against {recorded}, now {current}): "
        "another update, refresh, import or state edit ran in between"
    ),
    "plan": "the update plan is not the one previewed (sha256 {recorded} recorded, {current} downloaded)",
    "stack": "the record is for stack {recorded}, this job deploys {current}",
    "environment": "the record is for environment {recorded}, this job runs in {current}",
    "action": "the record is for action {recorded}, this job runs {current}",
}
_FIX = "run the deploy workflow again to preview and approve the current state"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def fingerprint(path: Path) -> str:
    """The state export's fingerprint; a file that is not a `pulumi stack export` document is an
    error (an empty or failed export must not fingerprint as a state)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: not a `pulumi stack export` document: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("deployment"), dict):
        raise SystemExit(f"{path}: not a `pulumi stack export` document (no `deployment` object)")
    return _sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())


def plan_digest(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return _sha256(path.read_bytes())
    except OSError as exc:
        raise SystemExit(f"{path}: cannot read the update plan: {exc}") from None


def current(args: argparse.Namespace) -> dict[str, Any]:
    checks = (("stack", args.stack, STACK_NAME), ("environment", args.environment, ENVIRONMENT_NAME), ("sha", args.sha, _SHA))
    for key, value, pattern in checks:
        if not pattern.fullmatch(value):
            raise SystemExit(f"--{key} {value!r} is not valid (expected {pattern.pattern})")
    if args.action == "up" and args.plan is None:
        raise SystemExit("--plan is required for action up: `pulumi up` applies the previewed update plan only")
    return {
        "stack": args.stack,
        "environment": args.environment,
        "action": args.action,
        "sha": args.sha,
        "state": fingerprint(args.state),
        "plan": plan_digest(args.plan),
    }


def differences(recorded: dict[str, Any], now: dict[str, Any], expect: dict[str, str]) -> list[str]:
    out = []
    for field in FIELDS:
        if recorded.get(field) != now[field]:
            out.append(_WHY[field].format(recorded=recorded.get(field), current=now[field]))
    for field, value in sorted(expect.items()):
        if recorded.get(field) != value:
            out.append(f"the record's {field} is {recorded.get(field)}, the preview job reported {value}")
    return out


def _expectations(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or field not in FIELDS:
            raise SystemExit(f"--expect {item!r}: expected FIELD=VALUE with FIELD one of {', '.join(FIELDS)}")
        out[field] = value
    return out


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True)
    parser.add_argument("--environment", required=True)
    parser.add_argument("--action", required=True, choices=ACTIONS)
    parser.add_argument("--sha", required=True, help="the commit (40 hex digits) this job checked out")
    parser.add_argument("--state", required=True, type=Path, help="`pulumi stack export` output")
    parser.add_argument("--plan", type=Path, help="the update plan (`pulumi preview --save-plan`); required for up")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    fp = sub.add_parser("fingerprint", help="the state export's fingerprint")
    fp.add_argument("state", type=Path)
    record = sub.add_parser("record", help="write the approval record of a preview")
    _common(record)
    verify = sub.add_parser("verify", help="check that nothing moved since the preview")
    verify.add_argument("record", type=Path)
    _common(verify)
    verify.add_argument("--expect", action="append", default=[], metavar="FIELD=VALUE")
    args = parser.parse_args(argv)

    if args.command == "fingerprint":
        print(fingerprint(args.state))
        return 0
    if args.command == "record":
        print(json.dumps(current(args), indent=2))
        return 0
    expect = _expectations(args.expect)
    try:
        recorded = json.loads(args.record.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{args.record}: no readable approval record ({exc}); {_FIX}") from None
    if not isinstance(recorded, dict):
        raise SystemExit(f"{args.record}: the approval record is not a JSON object; {_FIX}")
    problems = differences(recorded, current(args), expect)
    for problem in problems:
        print(f"::error::{problem}; {_FIX}")
    if problems:
        return 1
    plan = f", plan {recorded['plan']}" if recorded["plan"] else ""
    print(f"verified: {args.action} {args.stack} at {args.sha}, state {recorded['state']}{plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
