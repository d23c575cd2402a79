"""Reading a Pulumi stack file (``Pulumi.<stack>.yaml``) without ever raising anything but ConfigError.

Whatever a user points ``--config`` at — a missing path, a directory, a binary file, malformed
YAML, a document whose ``config:`` is a list — becomes a ``ConfigError`` naming where the problem
is (line and column for YAML) and what the file must look like, so the CLI exits 2 instead of
printing a traceback.

The YAML is read as Pulumi's own loader reads it, stricter than ``yaml.safe_load`` where silence
would change a stack:
* a key given twice in one mapping is an error (``safe_load`` silently keeps the last one, so a
  second ``gke-tpu-llm:tpu:`` block would drop the first);
* dates stay strings (``2025-01-01`` is a string to Pulumi, not a timestamp);
* tags that are not plain data (``!!binary``, ``!!set``, ``!!omap``, ``!!pairs``, ``!!timestamp``)
  are errors, because Pulumi config holds only strings, numbers, booleans, lists and maps.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.tokens import ScalarToken, Token

from .errors import ConfigError, Violation

EXPECTED = "a mapping with a `config:` mapping of <namespace>:<key> entries, as `pulumi config set` writes"


class _StackLoader(yaml.SafeLoader):
    """SafeLoader without timestamps and without non-data tags."""


_StackLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _reject_tag(loader: yaml.SafeLoader, node: Node) -> Any:
    problem = f"the tag {node.tag} is not plain data (Pulumi config holds strings, numbers, booleans, lists, maps)"
    raise ConstructorError(None, None, problem, node.start_mark)


for _tag in ("binary", "set", "omap", "pairs", "timestamp"):
    _StackLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _reject_tag)


def _key_text(loader: _StackLoader, node: Node) -> str:
    if node.tag == "tag:yaml.org,2002:merge":
        return "<<"
    if isinstance(node, (MappingNode, SequenceNode)):
        return f"<{type(node).__name__} key>"
    return str(node.value)


def _duplicates(loader: _StackLoader, root: Node) -> list[Violation]:
    """Every key given twice in one mapping, with both lines and the key's path."""
    out: list[Violation] = []
    seen_nodes: set[int] = set()
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:  # aliases point at one node; check it once
            continue
        seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                text = _key_text(loader, key_node)
                line = key_node.start_mark.line + 1
                ident = (key_node.tag, text)
                if ident in first_line and text != "<<":
                    dotted = ".".join((*path, text))
                    out.append(
                        Violation(
                            dotted,
                            text,
                            f"is given twice in one mapping (lines {first_line[ident]} and {line}); YAML keeps only one, "
                            "so the other block would be dropped silently",
                            "each key once per mapping",
                            f"merge the two {text!r} blocks into one",
                        )
                    )
                else:
                    first_line.setdefault(ident, line)
                stack.append((value_node, (*path, text)))
        elif isinstance(node, SequenceNode):
            stack.extend((item, (*path, f"[{i}]")) for i, item in enumerate(node.value))
    return out


_FIX = "fix the YAML at that line (indentation, a missing ':' or an unclosed quote or bracket are the usual causes)"


def _tokens_before(text: str, mark: Mark) -> list[Token]:
    """The tokens PyYAML's scanner reads before ``mark`` (up to where the scanning itself fails)."""
    tokens: list[Token] = []
    try:
        for token in yaml.scan(text, Loader=_StackLoader):
            if token.start_mark.index >= mark.index:
                break
            tokens.append(token)
    except yaml.YAMLError:
        pass
    return tokens


def _last_scalar(tokens: list[Token]) -> ScalarToken | None:
    return next((t for t in reversed(tokens) if isinstance(t, ScalarToken)), None)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _key_line_before(lines: list[str], line: int) -> int | None:
    """The 0-based index of the last line before ``line`` that holds YAML (not blank, not a comment)."""
    return next((i for i in range(line - 1, -1, -1) if lines[i].strip() and not lines[i].lstrip().startswith("#")), None)


def _diagnose(error: yaml.MarkedYAMLError, text: str) -> tuple[Mark | None, str, str]:
    """Where the problem starts (not where PyYAML gave up, which for an unclosed quote is the end
    of the file), what it is in plain words, and the fix."""
    problem = str(error.problem or error)
    context = str(error.context or "")
    at, ctx_at = error.problem_mark, error.context_mark
    lines = text.splitlines()
    if ctx_at is not None and context == "while scanning a quoted scalar" and "end of stream" in problem:
        return (
            ctx_at,
            "the quoted value that starts here is never closed (the file ends first)",
            f"close the quote on line {ctx_at.line + 1}",
        )
    if ctx_at is not None and context == "while scanning a simple key":
        return (
            ctx_at,
            "this line has no ': ' after its key (YAML reads each line of a mapping as `key: value`)",
            "add ': ' after the key, or join the line to the one before",
        )
    if ctx_at is not None and context.startswith(("while parsing a flow", "while scanning a flow")):
        bracket = "[" if "sequence" in context else "{"
        closing = "]" if bracket == "[" else "}"
        seen = f" (at line {at.line + 1}, column {at.column + 1}: {problem})" if at is not None else ""
        return (
            ctx_at,
            f"the '{bracket}' opened here is never closed{seen}",
            f"close it with '{closing}' on line {ctx_at.line + 1}",
        )
    if at is None:
        return ctx_at, f"{problem} ({context})" if context else problem, _FIX
    scalar = _last_scalar(_tokens_before(text, at))
    if problem == "mapping values are not allowed here" and scalar is not None:
        if scalar.plain and scalar.start_mark.line < at.line and at.line < len(lines):
            # A deeper-indented line continues the value of the key before it (a plain scalar may span lines).
            before = scalar.start_mark.line
            column = _indent(lines[at.line])
            mark = Mark("", at.index - at.column + column, at.line, column, None, 0)
            return (
                mark,
                f"this line is indented deeper than the key on line {before + 1}, so YAML reads it as more of that "
                f"key's value ({scalar.value!r}), and a value cannot hold ': '",
                f"indent line {at.line + 1} like the keys around it",
            )
        if scalar.plain and scalar.start_mark.line == at.line:
            value = lines[at.line][scalar.start_mark.column :].split(" #", 1)[0].strip()
            return (
                scalar.start_mark,
                "this value holds ': ', which YAML reads as the start of another mapping",
                f"quote the value: {chr(39)}{value}{chr(39)}" if chr(39) not in value else "quote the value",
            )
    if scalar is not None and scalar.style in ("'", '"') and scalar.start_mark.line < scalar.end_mark.line == at.line:
        # An unclosed quote runs on (a quoted value may span lines) to the next quote mark, then fails.
        return (
            scalar.start_mark,
            f"the quote opened here is not closed on its line: YAML reads on to line {scalar.end_mark.line + 1}, "
            f"column {scalar.end_mark.column}, where the next {scalar.style} closes it",
            f"close the quote on line {scalar.start_mark.line + 1}",
        )
    if "'\\t'" in problem:
        return at, "a tab character: YAML indents and separates with spaces only", "replace the tab with spaces"
    if problem.startswith("expected <block end>") and at.line < len(lines):
        previous = _key_line_before(lines, at.line)
        if "'-'" in problem:
            return (
                at,
                "a list item ('- ') where the mapping expects another key",
                "remove the '- ' (config keys are `key: value` lines)",
            )
        if "<scalar>" in problem and scalar is not None and scalar.style and scalar.end_mark.line == at.line:
            return at, "more text after a quoted value's closing quote", "put the whole value inside the quotes"
        if previous is not None and "<block mapping start>" in problem:
            return (
                at,
                f"this line is indented to column {at.column + 1}, but the key before it (line {previous + 1}) starts "
                f"in column {_indent(lines[previous]) + 1}: keys of one mapping start in the same column",
                f"indent line {at.line + 1} like the keys around it",
            )
    if "unknown escape character" in problem:
        return (
            at,
            f"{problem}: a backslash inside double quotes starts an escape",
            "use single quotes, or write \\\\ for a backslash",
        )
    if "found undefined alias" in problem:
        return at, f"{problem}: a value starting with '*' names an anchor (&name)", "quote the value"
    return at, f"{problem} ({context})" if context else problem, _FIX


def _yaml_error(error: yaml.YAMLError, text: str) -> Violation:
    """Where the YAML breaks (line, column: where the problem starts), the text of that line with a
    caret under the column, what is wrong in plain words and how to fix it."""
    mark: Mark | None = None
    fix = _FIX
    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow: a position, no mark
        line = text.count("\n", 0, error.position)
        column = error.position - text.rfind("\n", 0, error.position) - 1
        mark = Mark("", error.position, line, column, None, 0)
        char = chr(error.character) if isinstance(error.character, int) else error.character
        problem = f"the character {char!r} is not allowed ({error.reason})"
        fix = "remove the character (a stack file holds printable text only)"
    elif isinstance(error, yaml.MarkedYAMLError):
        mark, problem, fix = _diagnose(error, text)
    else:
        problem = str(error)
    lines = text.splitlines()
    source = lines[mark.line] if mark is not None and mark.line < len(lines) else None
    excerpt = ""
    if mark is not None and source is not None:
        number = f"{mark.line + 1} | "
        excerpt = f"{number}{source}\n{' ' * (len(number) - 2)}| {' ' * mark.column}^"
    return Violation(
        f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "the file",
        source.strip() if source is not None else "(end of file)",
        f"is not valid YAML: {problem}",
        EXPECTED,
        fix,
        excerpt,
    )


def load(path: Path) -> Any:
    """The parsed YAML document at ``path``; ConfigError for anything unreadable or malformed."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [Violation("--config", where, "does not exist", "a Pulumi.<stack>.yaml file", "check the path")]
        ) from None
    except IsADirectoryError:
        raise ConfigError(
            [Violation("--config", where, "is a directory", "a Pulumi.<stack>.yaml file", "point --config at the stack file")]
        ) from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            [
                Violation(
                    "--config",
                    where,
                    f"is not a UTF-8 text file (byte {error.start} is {error.object[error.start : error.start + 1]!r})",
                    "a YAML stack file",
                    "point --config at the stack file",
                )
            ]
        ) from None
    except OSError as error:
        raise ConfigError(
            [Violation("--config", where, f"cannot be read ({error.strerror})", "a readable file", "check the path")]
        ) from None
    loader: _StackLoader | None = None
    try:
        loader = _StackLoader(text)  # the reader rejects control characters here
        node = loader.get_single_node()
        if node is None:
            return None
        duplicates = _duplicates(loader, node)
        if duplicates:
            raise ConfigError(duplicates)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise ConfigError([_yaml_error(error, text)]) from None
    except RecursionError:
        raise ConfigError(
            [Violation(where, None, "nests too deeply to be a stack file", EXPECTED, "flatten the document")]
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def _namespaced(mapping: Mapping[Any, Any]) -> list[str]:
    """The keys of ``mapping`` that look like config keys (``<namespace>:<key>``)."""
    return [k for k in mapping if isinstance(k, str) and ":" in k.strip(":")]


def _listed(keys: list[str]) -> str:
    return ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")


def _misplaced(document: Mapping[Any, Any]) -> list[Violation]:
    """Config keys the file holds where Pulumi does not read them: at the top level (no ``config:``
    line, or keys dedented out of it), under a misspelt ``configs:``, or one level too deep (a
    ``config:`` inside ``config:`` or inside another key). Pulumi reads only the ``config:``
    mapping, so each of these would otherwise be a list of "is required" problems for keys the
    file plainly holds."""
    out: list[Violation] = []
    top = _namespaced(document)
    if top:
        where = "outside `config:`" if isinstance(document.get("config"), Mapping) else "and the file has no `config:` line"
        out.append(
            Violation(
                "(top level)",
                _listed(top),
                ("are config keys" if len(top) > 1 else "is a config key")
                + f" at the top level of the file, {where}; Pulumi reads config keys only under `config:`",
                EXPECTED,
                f"indent {'them' if len(top) > 1 else 'it'} by two spaces under a `config:` line at the top of the file",
            )
        )
    for name, value in document.items():
        if name == "config" or not isinstance(value, Mapping):
            continue
        inner = _namespaced(value)
        if inner:
            near = difflib.get_close_matches(str(name).lower(), ["config"], n=1, cutoff=0.6)
            hint = " (did you mean config?)" if near else ""
            out.append(
                Violation(
                    str(name),
                    _listed(inner),
                    f"holds config keys, but Pulumi reads them only under `config:`{hint}",
                    EXPECTED,
                    f"rename `{name}:` to `config:`" if near else f"move them under `config:` (out of `{name}:`)",
                )
            )
        elif isinstance(value.get("config"), Mapping) and _namespaced(value["config"]):
            out.append(_too_deep(f"{name}.config", value["config"], str(name)))
    return out


def _too_deep(key: str, inner: Mapping[Any, Any], parent: str) -> Violation:
    return Violation(
        key,
        _listed(_namespaced(inner)),
        f"is nested one level too deep (under `{parent}:`); Pulumi reads config keys only in the top-level `config:`",
        EXPECTED,
        ("remove the inner `config:` line" if parent == "config" else f"remove the `{parent}:` line")
        + " and dedent the keys under it by two spaces",
    )


def config_section(document: Any) -> dict[Any, Any]:
    """The ``config:`` mapping of a parsed stack file; ConfigError when the document has another
    shape, or holds config keys where Pulumi does not read them (:func:`_misplaced`)."""
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise ConfigError(
            [Violation("(top level)", _kind(document), "is not a mapping", EXPECTED, "start the file with `config:`")]
        )
    misplaced = _misplaced(document)
    config = document.get("config")
    if isinstance(config, Mapping) and isinstance(config.get("config"), Mapping) and _namespaced(config["config"]):
        misplaced.append(_too_deep("config.config", config["config"], "config"))
    if misplaced:
        raise ConfigError(misplaced)
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(
            [
                Violation(
                    "config",
                    _kind(config),
                    "is not a mapping",
                    EXPECTED,
                    "write each setting as `  <namespace>:<key>: <value>` under `config:` (no leading '-')",
                )
            ]
        )
    return dict(config)


def _kind(value: Any) -> str:
    """A short description of a wrongly shaped value (the value itself may be huge)."""
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    return f"{type(value).__name__} {value!r}"[:80]
