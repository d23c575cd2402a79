"""Config errors: one ``Violation`` per broken rule (key, value, allowed values, fix), all reported at once.

The rule helpers let any spec (platform or workload) report cross-field problems with paths in
stack-file spelling; :func:`error_violations` turns each of pydantic's errors (those rules included)
into ``Violation``s. It needs no stack model, so the library's Args report a spec's errors with it
(``components.platform.args``) and ``components.config.loader`` adds only what a whole stack file
has on top: the workload kinds' union.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

NAMESPACE = "gke-tpu-llm"
"""Pulumi config namespace (the project name)."""


class ConfigError(Exception):
    """Invalid stack configuration. ``str()`` is the full, user-facing report."""

    def __init__(self, violations: Sequence[Violation]):
        self.violations = list(violations)
        lines = [f"invalid stack configuration ({len(self.violations)} problem(s)):"]
        lines += [f"  - {v}" for v in self.violations]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Violation:
    """One broken rule: which key, what value, what is allowed and how to fix it."""

    key: str
    value: Any
    problem: str
    allowed: str
    fix: str
    excerpt: str = ""
    """Lines shown under the violation (the YAML line and a caret under the column), or nothing."""

    def __str__(self) -> str:
        allowed = f" Allowed: {self.allowed}." if self.allowed else ""
        value = repr(self.value)
        if len(value) > _VALUE_MAX:  # a whole section or a huge number: the key already says where
            value = value[:_VALUE_MAX] + "…"
        excerpt = "".join(f"\n      {line}" for line in self.excerpt.splitlines())
        return f"{self.key}: {value} {self.problem}.{allowed} Fix: {self.fix}.{excerpt}"


_VALUE_MAX = 160
"""Longest value repr in a violation line."""

def rule(path: str, value: Any, problem: str, allowed: str, fix: str) -> dict[str, Any]:
    """A violation relative to the spec being validated (path is dotted, in stack-file spelling)."""
    return {"path": path, "value": value, "problem": problem, "allowed": allowed, "fix": fix}


def raise_rules(rules: list[dict[str, Any]]) -> None:
    """Raise every violation at once; :func:`error_violations` expands them into ``Violation``s."""
    if rules:
        raise PydanticCustomError("stack_rules", "{count} rule(s) violated", {"count": len(rules), "rules": rules})


def rules_error(rules: list[dict[str, Any]]) -> ConfigError:
    """The ``ConfigError`` of stack rules (paths relative to ``gke-tpu-llm:``) a renderer meets after the
    config should have refused them: the violations ``error_violations`` makes of the same rules."""
    return ConfigError(
        [Violation(format_key(r["path"].split(".")), r["value"], r["problem"], r["allowed"], r["fix"]) for r in rules]
    )


def format_key(loc: Sequence[str | int]) -> str:
    """A key path in stack-file spelling: ``gke-tpu-llm:tpu.topology``, ``gcp:project``."""
    if not loc:
        return f"{NAMESPACE}"
    head, *rest = [str(p) for p in loc]
    if head.startswith(("gcp:", "(")):  # gcp:project; "(stack name)" is not a key
        return head
    return f"{NAMESPACE}:{head}" + "".join(f".{p}" for p in rest)


def field_model(model: Any, part: str | int) -> Any:
    """One step down a key path: the annotation of ``model``'s field whose key is ``part`` (inside
    ``dict[str, Spec]`` or ``Spec | None``, the spec). None where ``model`` is a spec without that key."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        model = field.annotation
    args = getattr(model, "__args__", ())
    specs = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    return specs[0] if specs else model


def model_at(loc: Sequence[str | int], root: type[BaseModel]) -> type[BaseModel] | None:
    """The spec class that owns the key at ``loc`` under ``root`` (for listing its allowed keys)."""
    model: Any = root
    for part in loc[:-1]:
        model = field_model(model, part)
        if model is None:
            return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def error_violations(
    err: ErrorDetails, loc: Sequence[str | int], *, owner: type[BaseModel] | None = None, extra_keys: Collection[str] = ()
) -> list[Violation]:
    """The violations of one pydantic error at key path ``loc``: a spec's own rules (``raise_rules``),
    unknown keys (``owner`` is the spec that lists the allowed ones, plus ``extra_keys``), missing
    keys, values outside a Literal, unpinned images, annotated types' rules, patterns, bounds, types."""
    ctx = err.get("ctx") or {}
    if err["type"] == "stack_rules":
        return [
            Violation(format_key([*loc, *r["path"].split(".")]), r["value"], r["problem"], r["allowed"], r["fix"])
            for r in ctx["rules"]
        ]
    key = format_key(loc)
    if err["type"] == "extra_forbidden":
        names = [*(f.alias or n for n, f in owner.model_fields.items()), *extra_keys] if owner else []
        allowed = ", ".join(names) if owner else "see stacks/CONFIGURATION.md"
        close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6) if loc else []
        hint = f" (did you mean {close[0]}?)" if close else ""
        return [Violation(key, err["input"], f"is an unknown key{hint}", allowed, "remove it or fix its spelling")]
    if err["type"] == "missing":
        return [Violation(key, None, "is required", "see stacks/CONFIGURATION.md", f"set {key}")]
    if err["type"] in ("literal_error", "enum"):
        expected = str(ctx.get("expected"))
        return [not_allowed(key, err["input"], expected, quoted_values(expected))]
    if err["type"] == "pinned_image":
        return [
            Violation(
                key,
                err["input"],
                str(ctx.get("problem")),
                "<repository>:<tag> or <repository>@sha256:<digest>",
                "pin a released tag or a digest",
            )
        ]
    if err["type"] == "value_rule":  # an annotated type's own rule (e.g. config.base.Cidr)
        return [Violation(key, err["input"], str(ctx["problem"]), str(ctx["allowed"]), str(ctx["fix"]))]
    if err["type"] == "string_pattern_mismatch":
        return [Violation(key, err["input"], "has the wrong format", f"matches {ctx.get('pattern')}", "correct the value")]
    return [_typed_violation(key, err["type"], err["input"], err["msg"], ctx)]


def spec_violations(error: ValidationError, root: type[BaseModel]) -> list[Violation]:
    """Every violation of a spec validated on its own (no stack around it: key paths start at the spec)."""
    return [
        v
        for err in error.errors(include_url=False)
        for v in error_violations(
            err, err["loc"], owner=model_at(err["loc"], root) if err["type"] == "extra_forbidden" else None
        )
    ]


_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
_MAPPING = ("is not a mapping", "a mapping of keys (see stacks/CONFIGURATION.md)")
_TYPES = {
    "finite_number": ("is not a finite number", "a finite number (not .inf or .nan)"),
    "dict_type": _MAPPING,
    "model_type": _MAPPING,
    "model_attributes_type": _MAPPING,
    "list_type": ("is not a list", "a YAML list"),
}
_WANTED = {
    "int_type": "whole number",
    "int_parsing": "whole number",
    "int_from_float": "whole number",
    "float_type": "number",
    "float_parsing": "number",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "string_type": "string",
}
"""pydantic's type errors by what the field wants. The specs are strict (``config.base.Spec``): a
value must already have its type as YAML reads it, so each message says what YAML read instead."""
_WANTED_ALLOWED = {
    "whole number": "a whole number, unquoted and without a decimal point",
    "number": "a number, unquoted",
    "boolean": "true or false, unquoted",
    "string": "a string (quote it in YAML when it looks like a number or a boolean)",
}
_YAML_BOOLEANS = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}
"""Words YAML 1.1 (PyYAML, Pulumi's Go YAML reading a plain scalar) may read as booleans."""


def _number_text(text: str) -> int | float | None:
    """The number a quoted string spells (``"64"``, ``"0.5"``), None when it spells none."""
    try:
        number = float(text.strip().replace("_", ""))
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def _what_yaml_read(value: Any) -> str:
    """Why a value of the wrong type is what it is, in YAML's words."""
    if value is None:
        return "the key has no value"
    if isinstance(value, bool):
        return "YAML reads an unquoted true/false/yes/no/on/off as a boolean"
    if isinstance(value, (int, float)):
        return "YAML reads an unquoted number as a number"
    if isinstance(value, str):
        return "YAML reads it as text"  # quoted, or a form YAML 1.1 does not read as a number (1e3)
    if isinstance(value, list):
        return "it is a list"
    if isinstance(value, Mapping):
        return "it is a mapping"
    return f"it is a {type(value).__name__}"


def type_violation(key: str, wanted: str, value: Any) -> Violation:
    """A value that does not have the type its key needs (``wanted``: whole number, number, boolean or
    string): what YAML read and how to write the value so it has the type."""
    allowed = _WANTED_ALLOWED[wanted]
    fix = f"write a {wanted}" if wanted != "boolean" else "write true or false"
    why = _what_yaml_read(value)
    if wanted == "whole number" and isinstance(value, bool):
        why = "a boolean is not a count"
    elif wanted == "number" and isinstance(value, bool):
        why = "a boolean is not a number"
    elif wanted == "whole number" and isinstance(value, float) and math.isfinite(value):
        why = "it has a decimal point"
        fix = f"write {int(value)}" if value.is_integer() else f"write a whole number ({math.floor(value)} or {math.ceil(value)})"
    elif wanted in ("whole number", "number") and isinstance(value, str):
        number = _number_text(value)
        if number is not None and (wanted == "number" or isinstance(number, int) or number.is_integer()):
            fix = f"write {int(number) if wanted == 'whole number' else number}, unquoted"
    elif wanted == "boolean" and isinstance(value, str) and value.lower() in _YAML_BOOLEANS:
        fix = f"write {str(_YAML_BOOLEANS[value.lower()]).lower()}, unquoted"
    elif wanted == "boolean" and isinstance(value, (int, float)):
        why = "a number is not true or false"
    elif wanted == "string" and isinstance(value, (bool, int, float)):
        fix = "quote the value as you meant it, e.g. '1.30' or 'on'"
    if value is None:
        fix = f"{fix}, or remove the key"
    return Violation(key, value, f"is not a {wanted} ({why})", allowed, fix)


def _typed_violation(key: str, kind: str, value: Any, message: str, ctx: Mapping[str, Any]) -> Violation:
    """A violation for pydantic's built-in checks: bounds, types, finiteness."""
    if kind in _BOUNDS:
        limit = next(iter(ctx.values()), None)
        return Violation(
            key,
            value,
            "is out of range",
            f"{_BOUNDS[kind]} {limit} (stacks/CONFIGURATION.md says why)",
            "use a value within the bound",
        )
    if kind in _WANTED:
        return type_violation(key, _WANTED[kind], value)
    if kind in _TYPES:
        problem, allowed = _TYPES[kind]
        return Violation(key, value, problem, allowed, "correct the value")
    return Violation(key, value, f"is invalid ({message})", "see stacks/CONFIGURATION.md", "correct the value")


# ---------------------------------------------------------------- did you mean

_SEPARATORS = re.compile(r"[\s_./-]+")


def _plain(text: str) -> str:
    """``text`` as a reader compares it: case and separators ignored (``on_demand`` is ``onDemand``)."""
    return _SEPARATORS.sub("", text).lower()


def _subsequence(short: str, long: str) -> bool:
    """Every character of ``short`` appears in ``long`` in order (``bf16`` in ``bfloat16``)."""
    rest = iter(long)
    return all(char in rest for char in short)


def _closeness(value: str, candidate: str) -> tuple[int, float] | None:
    """How near ``value`` is to ``candidate``, smaller is nearer: (how it matches, -similarity); None
    when it is not near. Abbreviations and truncations count as well as typos: ``difflib`` alone finds
    ``bfloat1`` but not ``bf16``."""
    v, c = _plain(value), _plain(candidate)
    if not v or not c:
        return None
    digits_v, digits_c = re.sub(r"\D", "", v), re.sub(r"\D", "", c)
    if digits_v and digits_c and digits_v != digits_c:
        return None  # another number is another value (int4 is not a typo of int8)
    similarity = difflib.SequenceMatcher(None, v, c).ratio()
    if v == c:
        tier = 0  # only case or separators differ
    elif len(v) >= 2 and len(c) >= 2 and (c.startswith(v) or v.startswith(c)):
        tier = 1  # cut short, or with something added
    elif len(v) >= 3 and v in c:
        tier = 2  # the distinctive part of a longer value (objectUser)
    elif len(v) >= 2 and v[0] == c[0] and 3 * len(v) >= len(c) and _subsequence(v, c):
        tier = 3  # an abbreviation (bf16)
    elif similarity >= 0.6:
        tier = 4  # a typo
    else:
        return None
    return tier, -similarity


def closest(value: Any, candidates: Iterable[str]) -> str | None:
    """The one allowed value ``value`` most likely meant, or None when none is near or two are
    about equally near (a guess between two helps no one)."""
    if not isinstance(value, str):
        return None
    scored = sorted((score, c) for c in candidates if (score := _closeness(value, c)) is not None)
    if not scored:
        return None
    if len(scored) > 1 and scored[0][0][0] == scored[1][0][0] and scored[1][0][1] - scored[0][0][1] < _MARGIN:
        return None
    return scored[0][1]


_MARGIN = 0.1
"""How much more similar the best candidate must be than the next one of the same kind of match."""


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def quoted_values(expected: str) -> list[str]:
    """The string values in pydantic's ``'a', 'b' or 'c'`` (a Literal's or an enum's allowed values)."""
    out: list[str] = []
    for match in _QUOTED.finditer(expected):
        value = ast.literal_eval(match.group(0))
        if isinstance(value, str):
            out.append(value)
    return out


def not_allowed(key: str, value: Any, allowed: str, candidates: Iterable[str]) -> Violation:
    """A value outside a fixed set (``allowed`` as the reader sees it), with the nearest candidate."""
    near = closest(value, candidates)
    if near is None:
        return Violation(key, value, "is not an allowed value", allowed, "use an allowed value")
    return Violation(key, value, f"is not an allowed value (did you mean {near!r}?)", allowed, f"write {near!r}")


# ---------------------------------------------------------------- values the user did not write

DEFAULT_NOTE = "(the default: you did not set this key)"
"""What a violation says about a value the stack file does not hold (the spec's default)."""
DERIVED_NOTE = "(derived: you did not set this key)"
"""The same for a value the planner chose (``tpu.topology`` left unset): the ``note`` to pass then."""


def _written(raw: Any, parts: Sequence[str]) -> bool:
    """Whether the key path ``parts`` is in ``raw`` (mappings and lists as the stack file holds them).
    A key may itself hold dots (a flat key, a bucket or argument name), so each split is tried."""
    if not parts:
        return True
    if isinstance(raw, Mapping):
        return any(
            ".".join(parts[:i]) in raw and _written(raw[".".join(parts[:i])], parts[i:]) for i in range(1, len(parts) + 1)
        )
    if isinstance(raw, list) and parts[0].isdigit():
        return int(parts[0]) < len(raw) and _written(raw[int(parts[0])], parts[1:])
    return False


def mark_defaults(
    violations: Iterable[Violation], raw: Mapping[str, Any] | BaseModel, note: str = DEFAULT_NOTE
) -> list[Violation]:
    """``violations`` with each one about a value the stack does not hold marked as such: its problem
    starts with ``note`` and its fix adds "or set <key>". A user who never wrote
    ``workload.vllm.bucket: models`` is told the rule broke on the spec's default, not on a typo.

    ``raw`` is what the user wrote: the values :func:`components.config.loader.parse_stack_config`
    reads (keys without the ``gke-tpu-llm:`` namespace, plus ``gcp:project``/``gcp:region``), or a
    validated ``StackConfig`` (its explicitly set fields). Left alone: keys that are not config keys
    (``line 3, column 1``), a missing value (``None``: "is required" says it) and a value that already
    says where it comes from (``'(unset: on in prod)'``, ``'kube-llm' (derived from the stack name)``)."""
    if isinstance(raw, BaseModel):
        raw = raw.model_dump(by_alias=True, exclude_unset=True)
    out: list[Violation] = []
    for v in violations:
        ns, sep, path = v.key.partition(":")
        if ns == NAMESPACE and sep:
            parts = path.split(".")
        elif ns == "gcp" and sep:
            parts = [v.key]
        else:
            parts = []
        explained = (isinstance(v.value, str) and v.value.startswith("(")) or v.problem.startswith("(")
        if not parts or v.value is None or explained or _written(raw, parts):
            out.append(v)
            continue
        out.append(dataclasses.replace(v, problem=f"{note} {v.problem}", fix=f"{v.fix}; or set {v.key} yourself"))
    return out
