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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, SequenceNode

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


def _yaml_error(error: yaml.YAMLError, text: str) -> Violation:
    """Where the YAML breaks (line, column), the text of that line and the parser's reason."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = str(getattr(error, "problem", None) or error)
    line = column = None
    if mark is not None:
        line, column = mark.line + 1, mark.column + 1
    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow: a position, no mark
        line = text.count("\n", 0, error.position) + 1
        column = error.position - text.rfind("\n", 0, error.position)
        char = chr(error.character) if isinstance(error.character, int) else error.character
        problem = f"the character {char!r} is not allowed ({error.reason})"
    context = getattr(error, "context", None)
    if context:
        problem = f"{problem} ({context})"
    lines = text.splitlines()
    source = lines[line - 1].strip() if line is not None and 0 < line <= len(lines) else None
    return Violation(
        f"line {line}, column {column}" if line is not None else "the file",
        source,
        f"is not valid YAML: {problem}",
        EXPECTED,
        "fix the YAML at that line (indentation, a missing ':' or an unclosed quote or bracket are the usual causes)",
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


def config_section(document: Any) -> dict[Any, Any]:
    """The ``config:`` mapping of a parsed stack file; ConfigError when the document has another shape."""
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise ConfigError(
            [Violation("(top level)", _kind(document), "is not a mapping", EXPECTED, "start the file with `config:`")]
        )
    config = document.get("config")
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
