"""The policy rules' view of a resource: ``Resource`` (type, name, input properties, options, the
stack's environment), the ``Rule``/``StackRule`` records the pack registers, and the helpers every
rule reads properties with.

Property names are the engine's wire names (camelCase), which is also what policy packs receive.
The helpers read them as ``Mapping``/``Sequence`` only: the policy SDK passes read-only proxies, not
dicts and lists, and raises on a value that is unknown during preview; ``get``, ``children`` and
``known_items`` skip such a value (the pack then reports the rule as not run, and ``pulumi up``
analyzes each resource again with its inputs resolved). Standard library only: the pack runs in its
own virtualenv, which holds only pulumi-policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ENVIRONMENT_CONFIG_KEY = "gke-tpu-llm:environment"
"""The stack setting that makes a stack prod (``StackConfig.environment``)."""
DEFAULT_ENVIRONMENT = "dev"
"""What a stack without ``gke-tpu-llm:environment`` is (``StackConfig.environment``'s default)."""

@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    secret_outputs: tuple[str, ...] = ()
    """The resource's ``additionalSecretOutputs`` option."""
    environment: str | None = None
    """The stack's environment (``stack_environment`` of the stack configuration Pulumi hands the
    pack), or None when it is not known; then a resource's own labels alone say it is prod."""


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    enforcement: str  # "mandatory" or "advisory"
    check: Callable[[Resource], list[str]]


@dataclass(frozen=True)
class StackRule:
    """A rule over every resource of a stack: (offending resource, message) pairs."""

    name: str
    description: str
    enforcement: str
    check: Callable[[Sequence[Resource]], list[tuple[Resource, str]]]


def stack_environment(config: Mapping[str, Any] | None) -> str | None:
    """The environment of a stack, from its configuration (``{"gke-tpu-llm:environment": ...}``):
    the configured value, the program's default when unset, None when no configuration is known.

    The pack gets the configuration from Pulumi, which passes an analyzer the stack's config as the
    ``PULUMI_CONFIG`` JSON environment variable (pulumi/pulumi sdk/go/common/resource/plugin/
    analyzer_plugin.go ``constructEnv``), as it does for the program itself."""
    if not config:
        return None
    value = config.get(ENVIRONMENT_CONFIG_KEY)
    return DEFAULT_ENVIRONMENT if value is None else str(value)


def is_unknown(error: Exception) -> bool:
    """pulumi_policy raises ``UnknownValueError`` when a rule reads a value that is not known until
    the update (preview only; the pack reports the rule as not run). Matched by name: this module
    imports nothing from the pack's virtualenv."""
    return type(error).__name__ == "UnknownValueError"


def is_list(value: Any) -> bool:
    # pulumi_policy hands rules read-only proxies: Mappings that are not dicts, Sequences that are
    # not lists. Checking for the abstract types keeps the rules working on both.
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def children(value: Any) -> Iterator[tuple[str | int, Any]]:
    keys: Iterable[str | int] = list(value) if isinstance(value, Mapping) else range(len(value)) if is_list(value) else ()
    for key in keys:
        try:
            item = value[key]
        except Exception as error:  # an unknown value, during preview, cannot break the rule yet
            if is_unknown(error):
                continue
            raise
        yield key, item


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, value
    for key, item in children(value):
        yield from walk(item, join_path(path, key))


def join_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def get(value: Any, key: str) -> Any:
    """``value[key]`` of a Mapping; None when it is missing, not a Mapping, or unknown (preview)."""
    if not isinstance(value, Mapping) or key not in list(value):
        return None
    try:
        return value[key]
    except Exception as error:
        if is_unknown(error):
            return None
        raise


def indexed(value: Any) -> list[tuple[int, Any]]:
    """(index, item) of the known items of a Sequence (nothing for anything else)."""
    return [(int(i), item) for i, item in children(value)] if is_list(value) else []


def known_items(value: Any) -> list[Any]:
    """The known items of a Sequence (nothing for anything else)."""
    return [item for _, item in indexed(value)]


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def annotations_of(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(get(get(props, "metadata"), "annotations"))


@dataclass(frozen=True)
class K8sKind:
    group: str
    """API group (``core`` for the core group, as in the type token ``kubernetes:core/v1:Service``)."""
    kind: str
    """The kind, without a ``Patch`` suffix."""
    patch: bool
    """A Server-Side Apply patch of an existing object (``<Kind>Patch``)."""


def k8s_kind(type_: str) -> K8sKind | None:
    """The Kubernetes group and kind of a resource type token, or None (not a Kubernetes object)."""
    parts = type_.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes":
        return None
    group = parts[1].rsplit("/", 1)[0]
    kind = parts[2]
    patch = kind.endswith("Patch") and kind != "Patch"
    return K8sKind(group, kind.removesuffix("Patch") if patch else kind, patch)
