"""Loading a stack's config: namespaces, flat keys, secrets, and one report of every problem.

``load_stack_config`` reads the Pulumi runtime's config; ``parse_full_config`` does the same for
the keys of a stack file (the offline engine and the tests). Either validates into a frozen
``StackConfig`` or raises one ``ConfigError`` listing every violation (key path, bad value, allowed
values, fix) before any resource is registered.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from ..workloads.registry import BY_KIND, BY_SECTION_KEY, KINDS, SECRETS
from .errors import NAMESPACE, ConfigError, Violation, error_violations, field_model, format_key, mark_defaults, not_allowed
from .front_door import FrontDoorSpec
from .stack import StackConfig
from .workload import WorkloadBase

_GCP_KEYS = {"gcp:project", "gcp:region"}
# The stack config's own keys, as the stack file spells them (stack, project and region come from elsewhere).
_TOP_KEYS = {f.alias or n for n, f in StackConfig.model_fields.items()} - {"stack"} - _GCP_KEYS


def _model_at(loc: Sequence[str | int], tag: str | None = None, root: type[BaseModel] = StackConfig) -> type[BaseModel] | None:
    """The spec class that owns the key at ``loc`` (relative to ``root``; for listing allowed keys);
    ``tag`` is the workload kind when ``loc`` is under ``workload``."""
    model: Any = root
    for part in loc[:-1]:
        if part == "workload" and model is StackConfig:
            if tag is None:
                return None
            model = BY_KIND[tag].workload
            continue
        model = field_model(model, part)
        if model is None:
            return None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _without_tag(loc: Sequence[str | int]) -> tuple[list[str | int], str | None]:
    """``loc`` without the union tag pydantic inserts after ``workload`` (``workload.vllm.vllm.image``
    is the key ``workload.vllm.image`` of a vllm workload), and that tag."""
    if len(loc) > 1 and loc[0] == "workload" and loc[1] in BY_KIND:
        return [loc[0], *loc[2:]], str(loc[1])
    return list(loc), None


def _kind_values() -> str:
    """The kinds as pydantic lists allowed literals: 'a', 'b' or 'c'."""
    quoted = [repr(info.kind) for info in KINDS]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _kindless(raw: Any, loc: Sequence[str | int]) -> list[Violation]:
    """The other problems of a workload whose ``kind`` is missing or unknown: pydantic stops at the
    union's tag, so the keys every kind shares are checked here as any kind would check them, and
    unknown keys get a did-you-mean (``Kind`` -> ``kind``). Sections need a kind: not checked."""
    if not isinstance(raw, Mapping):
        return []
    sections = [info.section_key for info in KINDS]
    common = {k: v for k, v in raw.items() if k not in sections and k != "kind"}
    try:
        WorkloadBase.model_validate({**common, "kind": "(unknown)"})
    except ValidationError as exc:
        return violations_from(exc, prefix=loc, root=WorkloadBase, extra_keys=sections)
    return []


def violations_from(
    error: ValidationError,
    *,
    prefix: Sequence[str | int] = (),
    root: type[BaseModel] = StackConfig,
    extra_keys: Collection[str] = (),
) -> list[Violation]:
    """One ``Violation`` per pydantic error of ``root`` (validated at ``prefix`` of the stack);
    ``extra_keys`` are keys the root also accepts (listed and matched in unknown-key hints)."""
    out: list[Violation] = []
    for err in error.errors(include_url=False):
        loc, tag = _without_tag([*prefix, *err["loc"]])
        ctx = err.get("ctx") or {}
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            key = format_key([*loc, "kind"])
            raw = err["input"]
            if err["type"] == "union_tag_not_found":
                out.append(Violation(key, None, "is required", _kind_values(), f"set {key}"))
            else:
                value = raw.get("kind") if isinstance(raw, Mapping) else ctx.get("tag")
                out.append(not_allowed(key, value, _kind_values(), [info.kind for info in KINDS]))
            out += _kindless(raw, loc)
            continue
        other = BY_SECTION_KEY.get(str(loc[-1])) if tag is not None and len(loc) == 2 else None
        if err["type"] == "extra_forbidden" and other is not None:
            own = BY_KIND[str(tag)]
            out.append(
                Violation(
                    format_key(loc),
                    "(set)",
                    f"applies to kind {other.kind}, not {own.kind}",
                    f"the {own.section_key} section",
                    "remove the section or change kind",
                )
            )
            continue
        owner = _model_at(loc[len(prefix) :], tag, root) if err["type"] == "extra_forbidden" else None
        out += error_violations(err, loc, owner=owner, extra_keys=extra_keys)
    return out


def required_secrets(workload: object) -> tuple[str, ...]:
    """Secrets the raw ``gke-tpu-llm:workload`` value needs, as its section says (e.g. vLLM's Hugging
    Face token; the Meta URL only while checkpoint conversion is on). () when the section is invalid:
    validation reports that instead."""
    if not isinstance(workload, Mapping):
        return ()
    info = BY_KIND.get(str(workload.get("kind")))
    if info is None:
        return ()
    spec_class = info.workload.model_fields[info.section].annotation
    try:
        spec = spec_class.model_validate(workload.get(info.section_key, {}))  # type: ignore[union-attr]
    except ValidationError:
        return ()
    # The front door (common to the serving kinds) adds its own: the public form's IAP OAuth client.
    try:
        front_door = FrontDoorSpec.model_validate(workload.get("frontDoor", {}))
    except ValidationError:
        return tuple(spec.required_secrets())
    return (*spec.required_secrets(), *front_door.required_secrets())


def _secret_violations(values: Mapping[str, Any], secret_keys: Collection[str]) -> list[Violation]:
    out: list[Violation] = []
    for key in SECRETS:
        if key in values and f"{NAMESPACE}:{key}" not in secret_keys:
            out.append(
                Violation(
                    format_key([key]),
                    "(plaintext)",
                    "is stored in plaintext",
                    "a secret value",
                    f"pulumi config set --secret {NAMESPACE}:{key} <value>",
                )
            )
    workload = values.get("workload")
    kind = workload.get("kind") if isinstance(workload, Mapping) else None
    for key in required_secrets(workload):
        if key not in values:
            out.append(
                Violation(
                    format_key([key]),
                    None,
                    f"is required for {kind} ({SECRETS[key]})",
                    "a secret value",
                    f"pulumi config set --secret {NAMESPACE}:{key} <value>",
                )
            )
    return out


def parse_stack_config(values: Mapping[str, Any], stack: str, secret_keys: Collection[str] = ()) -> StackConfig:
    """Validate raw config (``{"gcp:project": ..., "tpu": {...}, ...}``); raise ConfigError with every problem.

    ``secret_keys`` are the full keys the engine holds as secrets; secret values are checked for
    presence and secrecy only and are not part of the returned config.

    Values keep the types YAML (or the engine's JSON) gave them: the specs are strict
    (``config.base.Spec``), so ``concurrency: true`` is an error, not 1. Only the top-level scalar
    keys also take the text that ``pulumi config set KEY VALUE`` (without ``--path``) stores, as
    Pulumi reads it (``config.base.PulumiBool``). A violation at a key the user did not write is
    marked as the default's (``errors.mark_defaults``).
    """
    unknown = [k for k in values if k not in _TOP_KEYS and k not in _GCP_KEYS and k not in SECRETS]
    pre: list[Violation] = [_unknown_key(k, values[k]) for k in unknown]
    pre += _secret_violations(values, secret_keys)
    data = {k: v for k, v in values.items() if k not in unknown and k not in SECRETS}
    try:
        config = StackConfig.model_validate({"stack": stack, **data})
    except ValidationError as exc:
        raise ConfigError(mark_defaults(pre + violations_from(exc), values)) from None
    if pre:
        raise ConfigError(pre)
    return config


def _quote(text: str) -> str:
    """A shell word; config keys are always single-quoted, as the README writes them."""
    return f"'{text}'" if "'" not in text else shlex.quote(text)


def _shell_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return shlex.quote(str(value)) if isinstance(value, (str, int, float)) else "<value>"


def _unknown_key(key: str, value: Any) -> Violation:
    """An unknown ``gke-tpu-llm:`` key: a flat dotted key (``pulumi config set`` without ``--path``) or a typo."""
    full = f"{NAMESPACE}:{key}"
    head = key.split(".", 1)[0]
    if "." in key and head in _TOP_KEYS:
        if isinstance(value, (Mapping, list)):
            command = f"set each value with pulumi config set --path {_quote(full + '.<key>')} <value>"
        else:
            command = f"pulumi config set --path {_quote(full)} {_shell_value(value)}"
        return Violation(
            full,
            value,
            "is a flat key: `pulumi config set` without --path stored the dotted name as one key, which the "
            f"program does not read (it reads {head} as a structured value)",
            f"the nested key {full}, set with --path",
            f"pulumi config rm {shlex.quote(full)}; then {command}",
        )
    allowed = sorted(_TOP_KEYS | set(SECRETS))
    close = difflib.get_close_matches(head, allowed, n=1, cutoff=0.6)
    return Violation(
        full,
        value,
        "is an unknown key" + (f" (did you mean {NAMESPACE}:{close[0]}?)" if close else ""),
        ", ".join(allowed) + " (under gke-tpu-llm:) and gcp:project, gcp:region",
        "remove it or fix its spelling",
    )


ALLOWED_NAMESPACES = (NAMESPACE, "gcp", "kubernetes", "pulumi")
"""Config namespaces a stack may hold: the program's own, its providers' and Pulumi's."""


def split_namespaces(full: Mapping[Any, Any]) -> tuple[dict[str, Any], list[Violation]]:
    """Full config keys (``gke-tpu-llm:tpu``, ``gcp:project``, ...) -> the values ``parse_stack_config``
    reads (our keys without the namespace, plus ``gcp:project``/``gcp:region``) and a violation for
    every key the program would otherwise drop silently: a key under a namespace it does not know
    (a misspelt ``gke-tpu-lm:environment: prod`` would plan a prod stack as dev) or without one."""
    values: dict[str, Any] = {}
    problems: list[Violation] = []
    for full_key, value in full.items():
        if not isinstance(full_key, str):
            problems.append(
                Violation(
                    str(full_key),
                    value,
                    f"is not a config key (a {type(full_key).__name__}, not a <namespace>:<key> string)",
                    f"{NAMESPACE}:<key>, gcp:project, gcp:region",
                    "quote the key or remove it",
                )
            )
            continue
        ns, sep, key = full_key.partition(":")
        if not sep or not ns or not key:
            bare = full_key.strip(":")
            suggest = f"{NAMESPACE}:{bare}" if bare.split(".", 1)[0] in _TOP_KEYS | set(SECRETS) else f"{NAMESPACE}:<key>"
            problems.append(
                Violation(
                    full_key if full_key.strip() else repr(full_key),
                    value,
                    "has no namespace (Pulumi config keys are <namespace>:<key>)",
                    ", ".join(f"{n}:<key>" for n in ALLOWED_NAMESPACES),
                    f"write it as {suggest}",
                )
            )
        elif ns == NAMESPACE:
            values[key] = value
        elif full_key in _GCP_KEYS:
            values[full_key] = value
        elif ns not in ALLOWED_NAMESPACES:
            close = difflib.get_close_matches(ns, ALLOWED_NAMESPACES, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}:{key}?)" if close else ""
            fix = "remove it (pulumi config rm " + shlex.quote(full_key) + ")"
            if close:
                right = f"{close[0]}:{key}"
                again = (
                    f"pulumi config set {shlex.quote(right)} {_shell_value(value)}"
                    if not isinstance(value, (Mapping, list))
                    else f"move the block to {right}"
                )
                fix = f"rename it to {right}: pulumi config rm {shlex.quote(full_key)}; {again}"
            problems.append(
                Violation(
                    full_key,
                    value,
                    f"is under the namespace {ns!r}, which this program does not read{hint}",
                    "keys under " + ", ".join(f"{n}:" for n in ALLOWED_NAMESPACES),
                    fix,
                )
            )
        # gcp:<other>, kubernetes:*, pulumi:* configure the providers and the engine, not this program.
    return values, problems


def parse_full_config(full: Mapping[Any, Any], stack: str, secret_keys: Collection[str] = ()) -> StackConfig:
    """``parse_stack_config`` for config with full keys (all namespaces, as a stack file or the
    Pulumi runtime holds it); namespace problems are reported with every other problem."""
    values, problems = split_namespaces(full)
    try:
        config = parse_stack_config(values, stack, secret_keys)
    except ConfigError as error:
        raise ConfigError([*problems, *error.violations]) from None
    if problems:
        raise ConfigError(problems)
    return config
