"""Config errors: one ``Violation`` per broken rule (key, value, allowed values, fix), all reported at once.

The rule helpers let any spec (platform or workload) report cross-field problems with paths in
stack-file spelling; :func:`error_violations` turns each of pydantic's errors (those rules included)
into ``Violation``s. It needs no stack model, so the library's Args report a spec's errors with it
(``components.platform.args``) and ``components.config.loader`` adds only what a whole stack file
has on top: the workload kinds' union.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
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

    def __str__(self) -> str:
        allowed = f" Allowed: {self.allowed}." if self.allowed else ""
        value = repr(self.value)
        if len(value) > _VALUE_MAX:  # a whole section or a huge number: the key already says where
            value = value[:_VALUE_MAX] + "…"
        return f"{self.key}: {value} {self.problem}.{allowed} Fix: {self.fix}."


_VALUE_MAX = 160
"""Longest value repr in a violation line."""

def rule(path: str, value: Any, problem: str, allowed: str, fix: str) -> dict[str, Any]:
    """A violation relative to the spec being validated (path is dotted, in stack-file spelling)."""
    return {"path": path, "value": value, "problem": problem, "allowed": allowed, "fix": fix}


def raise_rules(rules: list[dict[str, Any]]) -> None:
    """Raise every violation at once; :func:`error_violations` expands them into ``Violation``s."""
    if rules:
        raise PydanticCustomError("stack_rules", "{count} rule(s) violated", {"count": len(rules), "rules": rules})


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
        return [Violation(key, err["input"], "is not an allowed value", str(ctx.get("expected")), "use an allowed value")]
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
_TYPES = {
    "finite_number": ("is not a finite number", "a finite number (not .inf or .nan)"),
    "int_type": ("is not a whole number", "an integer"),
    "int_parsing": ("is not a whole number", "an integer"),
    "int_from_float": ("is not a whole number", "an integer"),
    "float_type": ("is not a number", "a number"),
    "float_parsing": ("is not a number", "a number"),
    "string_type": ("is not a string", "a string (quote it in YAML)"),
    "bool_type": ("is not a boolean", "true or false"),
    "bool_parsing": ("is not a boolean", "true or false"),
    "dict_type": ("is not a mapping", "a mapping of keys (see stacks/CONFIGURATION.md)"),
    "model_type": ("is not a mapping", "a mapping of keys (see stacks/CONFIGURATION.md)"),
    "model_attributes_type": ("is not a mapping", "a mapping of keys (see stacks/CONFIGURATION.md)"),
    "list_type": ("is not a list", "a YAML list"),
}


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
    if kind in _TYPES:
        problem, allowed = _TYPES[kind]
        return Violation(key, value, problem, allowed, "correct the value")
    return Violation(key, value, f"is invalid ({message})", "see stacks/CONFIGURATION.md", "correct the value")
