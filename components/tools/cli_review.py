"""The commands that read recorded documents rather than plan a stack: ``review BASE HEAD`` (two
``plan --json`` documents, or a ``pulumi stack export`` and a plan) and ``teardown --state FILE``
(components/README-day2.md).

``review`` prints the pull-request comment (GitHub Markdown) where its output is piped or redirected, as
the workflows do, and renders it for the terminal when stdout is one (``--format`` overrides either way).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

_ALERT = re.compile(r"^> \[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]$")
_SUMMARY = re.compile(r"^<details><summary>(.*)</summary>$")


def terminal_markdown(comment: str) -> str:
    """The comment without what only GitHub renders: the marker (an HTML comment), alert headers
    (``> [!WARNING]``, a label here) and ``<details>`` folds (their summary becomes a heading line)."""
    from .review import COMMENT_MARKER

    lines: list[str] = []
    for line in comment.splitlines():
        if line == COMMENT_MARKER or line == "</details>":
            continue
        if alert := _ALERT.match(line):
            line = f"> **{alert.group(1).capitalize()}:**"
        elif summary := _SUMMARY.match(line):
            line = f"**{summary.group(1)}:**"
        lines.append(line)
    return "\n".join(lines) + "\n"


def print_comment(comment: str, output_format: str | None) -> None:
    """``markdown``: the comment as is; ``terminal``: rendered with rich (colour off under NO_COLOR,
    rich's own rule); None: terminal when stdout is one. Without rich (the program-only virtualenv of
    requirements.lock) the Markdown is printed."""
    terminal = output_format == "terminal" or (output_format is None and sys.stdout.isatty())
    if terminal:
        try:
            from rich.console import Console
            from rich.markdown import Markdown
        except ImportError:
            terminal = False
    if not terminal:
        print(comment, end="")
        return
    # ansi_dark: the terminal's own palette for the diff, no painted background behind it.
    Console(force_terminal=True if output_format == "terminal" else None).print(
        Markdown(terminal_markdown(comment), code_theme="ansi_dark")
    )


def _json_document(path: str) -> dict[str, Any]:
    """A JSON object from ``path``; anything else is a ``DocumentError`` naming the file."""
    from .review import DocumentError

    try:
        document = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DocumentError(f"{path}: cannot read a JSON document ({error})") from None
    if not isinstance(document, dict):
        raise DocumentError(f"{path}: expected a JSON object (a plan or a `pulumi stack export`), got {type(document).__name__}")
    return document


def review(base_path: str, head_path: str, stack: str | None, *, output_format: str | None = None) -> int:
    """``review BASE HEAD``: the review comment of two recorded documents; exit 2 when the engine would refuse."""
    from .review import REFUSED_EXIT, DocumentError, compare, isolation_problems, load_side, render_comment

    try:
        base = load_side(_json_document(base_path), stack, path=base_path)
        head = load_side(_json_document(head_path), None, path=head_path)
        if stack is not None and stack not in head:
            raise DocumentError(f"{head_path}: has no plan of stack {stack!r} (it has: {', '.join(sorted(head)) or 'none'})")
        try:
            changes = compare(base, head)
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            # A hand-edited or foreign file that passed the shape check: say so, never a traceback.
            raise DocumentError(f"{base_path} / {head_path}: not plans this command understands ({error!r})") from None
    except DocumentError as error:
        print(f"review: {error}", file=sys.stderr)
        return 2
    print_comment(render_comment(changes, head), output_format)
    refused = [c.stack for c in changes if c.refused]
    shared = isolation_problems(head)
    if shared:
        print("refused: stacks not isolated from each other:\n" + "\n".join(f"  - {p}" for p in shared), file=sys.stderr)
        return REFUSED_EXIT
    if refused:
        print(f"refused: {', '.join(refused)} (see the comment for what must land first)", file=sys.stderr)
        return REFUSED_EXIT
    return 0


def teardown_state(state_path: str, stack: str | None) -> int:
    """``teardown --state FILE``: what a real stack's state still holds; exit 2 while something blocks the destroy."""
    from .plan_resources import from_state
    from .review import DocumentError, load_side
    from .teardown import plan_teardown, render

    try:
        (export,) = load_side(_json_document(state_path), stack or "the stack", path=state_path, state_only=True).values()
        teardown = plan_teardown(from_state(export))
    except DocumentError as error:
        print(f"teardown: {error}", file=sys.stderr)
        return 2
    print(render(stack or "the stack", "from its state", teardown), end="")
    return 2 if teardown.blockers else 0
