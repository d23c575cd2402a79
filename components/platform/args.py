"""The typed Args of the platform components, and the rules they share.

``GkeCluster``, ``TpuSlicePool``, ``StackBucket`` and ``WorkloadIdentity`` each take a frozen,
keyword-only dataclass. Where a field is also a stack-file key, it takes that key's description and
default from the pydantic spec (``components.config.platform``), so the configuration reference and
the library cannot drift, and :func:`validate` checks the value with that same spec, so each rule is
written once. Fields with no stack-file key (project, labels, protection, ...) carry their own text.
Before any rule, every field's value is checked against its annotation (:func:`check_types`), so a
wrong type is reported as an :class:`ArgsError` too, never as a traceback further down. Rules that
a stack file and the Args share but no spec holds (region, zone, GKE version, project, labels) are
in :mod:`components.config.gke_rules`.

No Pulumi import: the Args can be built, validated and documented without the SDK.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import sys
import textwrap
import types
import typing
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.alias_generators import to_snake

from ..config.environments import ENVIRONMENTS, Environment
from ..config.errors import NAMESPACE, Violation, not_allowed, quoted_values, spec_violations
from ..config.platform import ClusterSpec, IdentitySpec
from ..config.tpu_spec import TpuSpec

DEFAULT_POLICY = ENVIRONMENTS[Environment.dev]
"""What a stack file that sets no ``environment`` (dev) means for protection and retention: the
defaults of the Args' protection fields, so a library program gets what a default stack gets."""


def protect_description(resource: str, *, lifted_by: str | None = None) -> str:
    """The description of an Args' ``protect`` field (Pulumi protect on ``resource``); ``lifted_by``
    names the field that lifts it for one reviewed change, if any."""
    lifted = f" {lifted_by} lifts it." if lifted_by else ""
    return (
        f"Pulumi protect on the {resource}: deleting or replacing it fails until lifted. Defaults to off, the dev "
        f"environment's policy; the stack program sets it in prod.{lifted}"
    )


SpecT = TypeVar("SpecT", bound=BaseModel)
ArgsT = TypeVar("ArgsT")


class ArgsError(ValueError):
    """Invalid component Args. ``str()`` lists every problem: field, value, allowed values, fix."""

    def __init__(self, args_type: str, violations: Sequence[Violation]):
        self.args_type = args_type
        self.violations = list(violations)
        lines = [f"invalid {args_type} ({len(self.violations)} problem(s)):"]
        lines += [f"  - {v}" for v in self.violations]
        super().__init__("\n".join(lines))


def _sentences(text: str, count: int | None) -> str:
    if count is None:
        return text
    # A sentence ends at '.' before a capital letter ("e.g. 4x4" does not end one).
    return " ".join(re.split(r"(?<=\.)\s+(?=[A-Z])", text)[:count])


def meta(
    model: type[BaseModel],
    name: str,
    *,
    path: str | None = None,
    sentences: int | None = None,
    extra: str = "",
    nested: type[Any] | None = None,
    validated: bool = True,
) -> dict[str, Any]:
    """Field metadata for an Args field that is the stack-file key ``name`` of ``model``: its
    description (the first ``sentences`` only where the rest speaks of stack-only behaviour, then
    ``extra``), its key ``path`` in the spec :func:`validate` builds (default: the key's alias;
    none when not ``validated`` by that spec), and the ``nested`` Args class its value is, if any."""
    info = model.model_fields[name]
    text = _sentences(info.description or "", sentences)
    return {
        "description": f"{text} {extra}".strip(),
        "path": (path or info.alias or name) if validated else None,
        "nested": nested,
    }


def own(description: str) -> dict[str, Any]:
    """Field metadata for an Args field with no stack-file key."""
    return {"description": description}


def default_of(model: type[BaseModel], name: str) -> Any:
    """The stack-file default of ``model.name`` (never a second literal)."""
    return model.model_fields[name].get_default(call_default_factory=True)


def args_class(cls: type[ArgsT]) -> type[ArgsT]:
    """Finish an Args dataclass: each field's description goes into the class docstring (``help()``
    and IDEs show it), and unknown or missing keyword arguments raise :class:`ArgsError` (a stack
    file's ``machineType`` gets "did you mean machine_type?") instead of a bare ``TypeError``."""
    fields = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    lines = [(cls.__doc__ or "").rstrip(), "", "Fields:"]
    for f in fields:
        text = f.metadata.get("description", "")
        lines.append(textwrap.fill(f"{f.name}: {text}", width=100, initial_indent="    ", subsequent_indent="        "))
    cls.__doc__ = "\n".join(lines)

    names = [f.name for f in fields]
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    init = cls.__init__

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        problems: list[Violation] = []
        if args:
            problems.append(
                Violation("(positional)", list(args), "are not accepted", "keyword arguments", f"name each value: {names[0]}=...")
            )
        for key, value in kwargs.items():
            if key not in names:
                close = difflib.get_close_matches(to_snake(key), names, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                fix = f"use {close[0]}" if close else "remove it"
                problems.append(Violation(key, value, f"is not a field of {cls.__name__}{hint}", ", ".join(names), fix))
        for f in required:
            if f.name not in kwargs:
                problems.append(Violation(f.name, None, "is required", _written(f), f"pass {f.name}=..."))
        if problems:
            raise ArgsError(cls.__name__, problems)
        init(self, *args, **kwargs)

    setattr(cls, "__init__", checked_init)  # noqa: B010  (assigning a method: mypy rejects the attribute form)
    return cls


def _written(f: dataclasses.Field[Any]) -> str:
    """A field's annotation as written in its Args class (every Args module has postponed annotations)."""
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def description(cls: type[Any], name: str) -> str:
    """The description of field ``name`` of an Args class."""
    return str(next(f for f in dataclasses.fields(cls) if f.name == name).metadata["description"])


def _wire(value: Any) -> Any:
    """A field value as the spec reads it: nested Args by their paths, sequences as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _spec_data(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return value


def _spec_data(args: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for f in dataclasses.fields(args):
        path = f.metadata.get("path")
        if path is None:
            continue
        *parents, leaf = path.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _wire(getattr(args, f.name))
    return data


def _names(args_type: type[Any], prefix: str = "", path_prefix: str = "") -> dict[str, str]:
    """Spec key path -> Args field path, including nested Args (``autoscaling.minNodes`` ->
    ``autoscaling.min_nodes``)."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(args_type):
        path = f.metadata.get("path")
        if path is None:
            continue
        out[path_prefix + path] = prefix + f.name
        if f.metadata.get("nested") is not None:
            out |= _names(f.metadata["nested"], f"{prefix}{f.name}.", f"{path_prefix}{path}.")
    return out


def _to_field(key: str, names: Mapping[str, str]) -> str:
    """A spec key path as the Args field path; unknown keys are kept as they are."""
    for path in sorted(names, key=len, reverse=True):
        if key == path or key.startswith(path + "."):
            return names[path] + key[len(path) :]
    return key


def _respell(text: str, names: Mapping[str, str], section: str | None) -> str:
    """A spec rule's text as the Args spell it: key names (``machineType`` -> ``machine_type``), no
    stack-file prefixes (``gke-tpu-llm:``, the spec's own section such as ``identity.``), and
    booleans as Python arguments (``allowUndocumentedZone: true`` -> ``allow_undocumented_zone=True``)."""
    text = text.replace(f"{NAMESPACE}:", "")
    if section is not None:
        text = re.sub(rf"\b{re.escape(section)}\.(?=[A-Za-z])", "", text)
    fields: set[str] = set()
    for path, name in names.items():
        alias, field_name = path.rsplit(".", 1)[-1], name.rsplit(".", 1)[-1]
        fields.add(field_name)
        if alias != field_name:
            text = re.sub(rf"\b{re.escape(alias)}\b", field_name, text)
    if fields:
        keys = "|".join(re.escape(f) for f in sorted(fields, key=len, reverse=True))
        text = re.sub(rf"\b({keys}): (true|false)\b", lambda m: f"{m[1]}={m[2].capitalize()}", text)
    return text


_SECTIONS: dict[type[BaseModel], str] = {ClusterSpec: "cluster", TpuSpec: "tpu", IdentitySpec: "identity"}
"""The stack-file section each spec the Args validate with is the value of (``StackConfig``'s field;
tests/test_install.py holds the two together). A table rather than a look-up in ``StackConfig``, so
that reporting an Args error loads no stack model and no workload kind."""


# ---- field types: each value against its annotation, before any rule reads it

_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)
"""No coercion ('1' is not an int, a dict is not an Args dataclass); classes such as ``GkeCluster``
or ``pulumi.Output`` are checked with isinstance."""
_TYPES: dict[type[Any], dict[str, tuple[Any, TypeAdapter[Any]]]] = {}


def _types(args_type: type[Any]) -> dict[str, tuple[Any, TypeAdapter[Any]]]:
    """Field name -> (resolved annotation, strict pydantic validator of it), built once per class."""
    if args_type not in _TYPES:
        namespace: dict[str, Any] = {}
        pulumi_output = sys.modules.get("pulumi.output")
        if pulumi_output is not None:
            # pulumi.Input[T] is Union[T, Awaitable[T], "Output[T]"]: that forward reference resolves
            # in Pulumi's namespace, beneath the Args module's own names.
            namespace |= vars(pulumi_output)
        namespace |= vars(sys.modules[args_type.__module__])
        while True:
            try:
                hints = typing.get_type_hints(args_type, globalns=namespace)
                break
            except NameError as missing:
                # A component its module imports only for type checking, to break an import cycle
                # (WorkloadIdentityArgs.cluster: GkeCluster): the package's lazy exports have it
                # (the package is components here, gke_tpu_llm when installed).
                package, name = sys.modules[__name__.partition(".")[0]], missing.name
                if name is None or name in namespace or name not in package.__all__:
                    raise
                namespace[name] = getattr(package, name)
        _TYPES[args_type] = {
            f.name: (hints[f.name], TypeAdapter(hints[f.name], config=_STRICT)) for f in dataclasses.fields(args_type)
        }
    return _TYPES[args_type]


def field_types(args_type: type[Any]) -> dict[str, Any]:
    """The resolved annotation of each field of ``args_type``."""
    return {name: hint for name, (hint, _) in _types(args_type).items()}


def _members(hint: Any) -> tuple[Any, ...]:
    """The members of a union annotation; ``(hint,)`` for any other."""
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


def _text_as_collection(hint: Any, value: Any) -> bool:
    """A str where ``Collection[str]`` is expected: Python's types accept it (each character an
    element), but no field means that."""
    return isinstance(value, str) and any(typing.get_origin(m) in (Collection, Iterable) for m in _members(hint))


def _type_violation(f: dataclasses.Field[Any], hint: Any, value: Any, error: ValidationError | None) -> Violation | None:
    """The violation of a value that does not have its field's type: the whole value, or the one
    element of a mapping or sequence that is wrong. None where the only problem is a Literal value
    that the field's spec reports (in the config's words)."""
    errors = error.errors(include_url=False) if error is not None else []
    if errors and all(e["type"] == "literal_error" for e in errors):
        if f.metadata.get("path") is not None:
            return None
        key = ".".join([f.name, *(str(p) for p in errors[0]["loc"])])
        allowed = " or ".join(str((e.get("ctx") or {}).get("expected")) for e in errors)
        return not_allowed(key, errors[0]["input"], allowed, quoted_values(allowed))
    expected = _written(f)
    fix = f"pass a value of type {expected}"
    # pydantic locates an element's error by its key or index first (then by union member).
    at = {e["loc"][0] for e in errors if e["loc"]}
    first = next(iter(at), None)
    in_value = (isinstance(value, Mapping) and first in value) or (
        isinstance(value, Sequence) and not isinstance(value, str) and isinstance(first, int) and first < len(value)
    )
    if len(at) == 1 and all(e["loc"] for e in errors) and in_value:
        problem = f"has the wrong type at [{first!r}] ({type(value[first]).__name__})"
    else:
        problem = f"has the wrong type ({type(value).__name__})"
        wanted = [m for m in _members(hint) if isinstance(m, type) and dataclasses.is_dataclass(m)]
        if isinstance(value, Mapping) and wanted:
            arguments = ", ".join(f"{x.name}=..." for x in dataclasses.fields(wanted[0]))
            fix = f"pass {wanted[0].__name__}({arguments}) instead of a mapping"
        elif _text_as_collection(hint, value):
            fix = f"pass a collection of strings, e.g. {{{value!r}}}"
    return Violation(f.name, value, problem, expected, fix)


def check_types(args: Any) -> None:
    """Raise :class:`ArgsError` for every field whose value does not have its annotated type (the
    other rules then never see one)."""
    problems: list[Violation] = []
    for f in dataclasses.fields(args):
        hint, adapter = _types(type(args))[f.name]
        value = getattr(args, f.name)
        error: ValidationError | None = None
        try:
            adapter.validate_python(value)
        except ValidationError as caught:
            error = caught
        if error is None and not _text_as_collection(hint, value):
            continue
        found = _type_violation(f, hint, value, error)
        if found is not None:
            problems.append(found)
    check(args, problems)


def validate(args: Any, spec: type[SpecT]) -> SpecT:
    """Check the field types (:func:`check_types`), then validate the Args fields that are stack-file
    keys with ``spec`` (every rule of the config applies, written once) and return the spec; raise
    :class:`ArgsError` naming the Args fields."""
    check_types(args)
    try:
        return spec.model_validate(_spec_data(args))
    except ValidationError as error:
        # The config's own translation of pydantic's errors (the stack loader uses it too).
        names_of = _names(type(args))
        section = _SECTIONS.get(spec)
        found = []
        for v in spec_violations(error, spec):
            key = _to_field(v.key.removeprefix(f"{NAMESPACE}:"), names_of)
            texts = (_respell(t, names_of, section) for t in (v.problem, v.allowed, v.fix))
            found.append(Violation(key, v.value, *texts))
        raise ArgsError(type(args).__name__, found) from None


def violations(rules: Iterable[Mapping[str, Any]]) -> list[Violation]:
    """The ``rule(...)`` dicts of :mod:`components.config.gke_rules` as violations of the Args."""
    return [Violation(r["path"], r["value"], r["problem"], r["allowed"], r["fix"]) for r in rules]


def check(args: Any, problems: Sequence[Violation]) -> None:
    """Raise :class:`ArgsError` for the ``problems`` of ``args`` (rules that are not a spec's)."""
    if problems:
        raise ArgsError(type(args).__name__, problems)
