"""The resources of a recorded plan (``plan --json``) or of a stack's real state (``pulumi stack
export``), in one shape (``Res``) and with the URNs the real engine gives, so ``steps`` can compare
either with a plan. Pure functions over plain dicts; no Pulumi import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .replacement import K8S_PROVIDER

SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
"""The key Pulumi marks a special value (a secret, an asset) with in a state export (pulumi developer-docs
architecture/deployment-schema.md; the Node SDK's ``specialSigKey``)."""


@dataclass(frozen=True)
class Res:
    """One resource as a plan (or a state export) records it."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: Mapping[str, Any]
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    dependencies: tuple[str, ...] = ()
    provider: str | None = None
    defaults: frozenset[str] = frozenset()
    """Input paths the provider filled in itself (a state's ``__defaults``), not the program."""


def _strip_defaults(inputs: Mapping[str, Any], prefix: str = "") -> tuple[dict[str, Any], set[str]]:
    """Inputs without the bridge's ``__defaults`` markers, and the paths those markers name (each
    object of a bridged provider's state lists the keys it defaulted)."""
    out: dict[str, Any] = {}
    defaults = {f"{prefix}{k}" for k in inputs.get("__defaults") or () if isinstance(k, str)}
    for key, value in inputs.items():
        if key == "__defaults":
            continue
        if isinstance(value, Mapping) and value.get(SECRET_SIG_KEY) is None:
            out[key], inner = _strip_defaults(value, f"{prefix}{key}.")
            defaults |= inner
        else:
            out[key] = value
    return out, defaults


def canonical_urns(resources: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Recorded URN -> the URN the real engine gives: the type part is the whole chain of parent
    types below the stack (``A$B$type``); resources parented to the stack carry their own type only.
    (Pulumi's mock monitor uses the immediate parent's type and prefixes top-level ones with the
    stack's type, so recorded URNs are normalised before they are compared with state or aliases.)"""
    by_urn = {r["urn"]: r for r in resources}
    out: dict[str, str] = {}

    def qualified(urn: str) -> str:
        res = by_urn[urn]
        parent = res.get("parent") or ""
        if parent in by_urn:
            return f"{qualified(parent)}${res['type']}"
        return str(res["type"])

    for urn, res in by_urn.items():
        prefix = "::".join(urn.split("::")[:2])  # urn:pulumi:<stack>::<project>
        out[urn] = f"{prefix}::{qualified(urn)}::{res['name']}"
    return out


def from_plan(plan: Mapping[str, Any] | None) -> list[Res]:
    """Resources of a ``plan --json`` document, with engine URNs."""
    raw = list((plan or {}).get("resources", []))
    urns = canonical_urns(raw)
    out = []
    for r in raw:
        opts = r.get("options", {})
        out.append(
            Res(
                urn=urns[r["urn"]],
                type=r["type"],
                name=r["name"],
                parent=urns.get(r.get("parent", ""), r.get("parent", "")),
                custom=bool(r.get("custom", True)),
                inputs=r.get("inputs", {}),
                protect=bool(opts.get("protect")),
                retain_on_delete=bool(opts.get("retainOnDelete")),
                delete_before_replace=bool(opts.get("deleteBeforeReplace")),
                ignore_changes=tuple(opts.get("ignoreChanges", ())),
                replace_on_changes=tuple(opts.get("replaceOnChanges", ())),
                aliases=tuple(opts.get("aliases", ())),
                dependencies=tuple(urns.get(d, d) for d in r.get("dependencies", ())),
                provider=r.get("provider"),
            )
        )
    return out


def from_state(export: Mapping[str, Any]) -> list[Res]:
    """Resources of a ``pulumi stack export`` document (the stack's real state)."""
    out = []
    for r in export.get("deployment", {}).get("resources", []) or []:
        typ = str(r.get("type", ""))
        if typ == "pulumi:pulumi:Stack" or (typ.startswith("pulumi:providers:") and typ != K8S_PROVIDER):
            continue
        urn = str(r["urn"])
        provider_ref = str(r.get("provider") or "")
        inputs, defaults = _strip_defaults(r.get("inputs") or {})
        out.append(
            Res(
                urn=urn,
                type=typ,
                name=urn.rsplit("::", 1)[-1],
                parent=str(r.get("parent") or ""),
                custom=bool(r.get("custom", False)),
                inputs=inputs,
                defaults=frozenset(defaults),
                protect=bool(r.get("protect")),
                retain_on_delete=bool(r.get("retainOnDelete")),
                delete_before_replace=bool(r.get("deleteBeforeReplace")),
                dependencies=tuple(r.get("dependencies") or ()),
                provider=provider_ref.split("::")[-2] if provider_ref.count("::") >= 2 else None,
            )
        )
    return out


def is_state_export(document: Mapping[str, Any]) -> bool:
    return isinstance(document.get("deployment"), Mapping)


def engine_dependencies(resources: Sequence[Res]) -> dict[str, frozenset[str]]:
    """URN -> the URNs the engine orders the resource after (creates after, deletes before): its parent,
    its explicit and input dependencies and its provider (a resource names its provider by name)."""
    providers = {r.name: r.urn for r in resources if r.type.startswith("pulumi:providers:")}
    return {r.urn: frozenset({r.parent, *r.dependencies, providers.get(r.provider or "", "")} - {""}) for r in resources}
