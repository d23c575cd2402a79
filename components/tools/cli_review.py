"""The commands that read recorded documents rather than plan a stack: ``review BASE HEAD`` (two
``plan --json`` documents, or a ``pulumi stack export`` and a plan) and ``teardown --state FILE``
(components/README-day2.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


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


def review(base_path: str, head_path: str, stack: str | None) -> int:
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
    print(render_comment(changes, head), end="")
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
