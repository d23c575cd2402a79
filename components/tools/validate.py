"""Offline validation of rendered Kubernetes objects (plain ``dict``s).

Public API
----------
``KUBERNETES_VERSION``
    Kubernetes minor version whose built-in API schemas are used by default.
``validate_object(obj, *, kubernetes_version=KUBERNETES_VERSION, controller_versions=None) -> list[str]``
    Human-readable problems (empty list if valid), each formatted as
    ``<kind>/<metadata.name>: <path>: <message>``; ``<path>`` is a field path such as
    ``spec.template.spec.containers[0].image`` (``<root>`` for the whole object).
    ``controller_versions`` maps a controller (``lws``, ``jobset``, ``kueue``) to its release, as
    ``ControllersSpec.by_controller`` of the stack config gives it; omitted controllers use the
    config defaults.
``validate_all(objs, *, kubernetes_version=..., controller_versions=None) -> list[str]``
    ``validate_object`` over an iterable, problems concatenated in order.

Built-in kinds
--------------
Objects whose ``apiVersion`` has no API group (``v1``), a group without a dot (``apps/v1``,
``batch/v1``, ``autoscaling/v2``, ``policy/v1``) or a ``*.k8s.io`` group
(``rbac.authorization.k8s.io/v1``, ``networking.k8s.io/v1`` ...) are validated against the
**strict** JSON schemas shipped inside the ``kubernetes-validate`` package (``-local-strict``
variants: every object schema has ``additionalProperties: false``, so unknown/misspelt fields are
errors, like ``kubectl apply --validate=strict``). The schema file, the API-version-to-file mapping,
the version fallback and the exception types (``SchemaNotFoundError``, ``InvalidSchemaError``,
``VersionNotSupportedError``) are kubernetes-validate's own; the validator itself is built here
instead of calling ``kubernetes_validate.validate`` because that function

* re-reads and re-parses the 1.4 MB ``_definitions.json`` on every call (~16 ms per object),
* stops at the first error, and
* uses jsonschema's default type checker, which accepts ``4.0`` as an ``integer``. The API server
  does not for built-in kinds (Go's JSON decoder cannot put the number ``4.0`` into a typed
  ``int32`` field), so here a float is never an integer -- for custom resources too, for
  consistency (the apiserver's OpenAPI validator may tolerate integral floats there; not verified).
  The project converts integral floats coming from the Pulumi mock engine before validating, so a
  float that reaches this module is a real bug.

Custom resources
----------------
The custom resources known here are those declared in ``components/crds/releases.py`` (kind,
schema source, name rule). ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet,
``jobset.x-k8s.io/v1alpha2`` JobSet and the ``kueue.x-k8s.io/v1beta2`` kinds (ResourceFlavor,
ClusterQueue, LocalQueue, AdmissionCheck, ProvisioningRequestConfig) are validated against the
``openAPIV3Schema`` of the CRD of the configured controller release, taken from the very CRDs the
stack installs (``components/crds``; Kueue's are its chart's templates, rendered; see
:data:`CONTROLLER_RESOURCES`);
``ray.io/v1`` RayCluster and RayJob, ``monitoring.googleapis.com/v1`` PodMonitoring,
``autoscaling.x-k8s.io/v1`` ProvisioningRequest and ``cloud.google.com/v1`` ComputeClass against
the schemas in ``components/schemas`` (sources and versions in its READMEs; ComputeClass's is
hand-built from GKE's reference page because GKE publishes no CRD file). Both use
``jsonschema`` Draft 2020-12. At load time every object schema
that has ``properties`` but neither ``additionalProperties`` nor
``x-kubernetes-preserve-unknown-fields`` gets ``additionalProperties: false`` (so typos are caught,
including inside the embedded PodSpec/JobSpec schemas), ``nullable: true`` becomes a
null-allowing ``type``, and a Go-only ``pattern`` form (``^(?i)...``, a flag group after ``^``, in
Kueue's AdmissionCheck) is rewritten to Python's equivalent ``^(?i:...)``. Formats are not
checked (PodMonitoring's ``format: duration`` is a Go duration such as ``30s``, not ISO 8601).
CEL rules (``x-kubernetes-validations``) and list-map keys are not checked.

CR ``metadata`` (``{type: object}`` in every CRD) is validated against the strict ``ObjectMeta``
schema of ``kubernetes_version`` and the name rules below (each kind's ``name_max_length`` and
``name_rule`` in ``components/crds/releases.py``):

=================  ==========================================================================
kind               ``metadata.name`` rule (all: required, DNS-1123 subdomain, <= 253 chars)
=================  ==========================================================================
LeaderWorkerSet    DNS-1035 label, <= 63: the LWS webhook validates ``ObjectMeta`` with
                   ``NameIsDNS1035Label`` because the name becomes the headless Service name.
JobSet             DNS-1035 label, <= 63, and the JobSet webhook's checks: every generated Job
                   name ``<name>-<replicatedJob>-<replicas-1>`` must be a DNS-1035 label and, for
                   Indexed jobs (the webhook's default) with ``completions`` set, the longest Pod
                   name ``<name>-<replicatedJob>-<jobIdx>-<podIdx>-abcde`` as well;
                   ``spec.network.subdomain`` (if set) must be a DNS-1123 subdomain and a DNS-1035
                   label.
RayCluster         DNS-1035 label, <= 53 (KubeRay ``MaxRayClusterNameLength``: 63 minus the
                   longest Service suffix ``-serve-svc``); enforced by the KubeRay controller.
RayJob             DNS-1035 label, <= 47 (KubeRay ``MaxRayJobNameLength`` = 53 - 6: the RayCluster
                   is named ``<name>-<5 random chars>``); enforced by the KubeRay controller.
PodMonitoring      only the generic DNS-1123 subdomain rule.
Kueue kinds,       only the generic DNS-1123 subdomain rule (Kueue's webhooks add none; a
ComputeClass,      LocalQueue name is also the value of workloads' ``kueue.x-k8s.io/queue-name``
ProvisioningReq.   label, which the label rules below check on those workloads).
=================  ==========================================================================

Not checked (documented limitation): StatefulSet-derived limits for LWS (worker StatefulSets are
named ``<name>-<groupIndex>`` and the StatefulSet controller labels pods
``controller-revision-hash=<statefulset>-<hash>``, which must fit a 63-char label value, so very
long LWS names, roughly > 50 chars, can fail at run time although admission accepts them).

For every object, top-level ``metadata.namespace`` (DNS-1123 label), ``metadata.labels`` (label
key/value syntax) and ``metadata.annotations`` (key syntax, 256 KiB total) are checked like the
API server's ``ValidateObjectMeta`` does. The name and metadata rules, and the JobSet webhook's, are
in ``components.tools.object_meta``.

``KUBERNETES_VERSION``
----------------------
``1.34``. kubernetes-validate 1.37.0 ships schemas for 1.25 ... 1.37. In the most recent GKE
release notes "Current versions" table consulted (2026; undated copy), 1.34 is the oldest minor
still offered in all of the Rapid (1.34-1.37), Regular (1.34-1.36) and Stable (1.34-1.35)
channels and is the Stable channel's recommended auto-upgrade target, while 1.33 is left only in
the Extended channel (1.31-1.36). Validating against the
oldest version a cluster in any standard channel can run catches fields that do not exist there
yet; fields removed in newer versions are rare (built-in APIs are not removed within v1). The
project caps the version at 1.34; raise it (and keep it <= the cluster's minimum version) when
1.34 leaves the Stable channel.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import kubernetes_validate
import referencing.exceptions
from jsonschema.exceptions import ValidationError as JsonSchemaValidationError
from jsonschema.protocols import Validator
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

from .. import crds
from ..config.platform import ControllersSpec
from ..crds.releases import CONTROLLERS, CUSTOM_RESOURCES, MANAGED
from .object_meta import (
    ROOT,
    Problem,
    common_metadata_problems,
    dns1035_label_errors,
    dns1123_subdomain_errors,
    format_path,
    get_path,
    is_int,
    jobset_problems,
)

__all__ = [
    "CONTROLLER_RESOURCES",
    "CUSTOM_RESOURCE_SCHEMAS",
    "GATEWAY_SCHEMAS",
    "KUBERNETES_VERSION",
    "SCHEMA_DIR",
    "validate_all",
    "validate_object",
]

KUBERNETES_VERSION = "1.34"

SCHEMA_DIR = Path(__file__).parent.parent / "schemas"

# Both views are derived from the one declaration per kind in components/crds/releases.py.

#: ``(apiVersion, kind)`` -> controller whose vendored CRDs (``components/crds``) define the kind;
#: the schema is that of the controller release being validated against.
CONTROLLER_RESOURCES: Mapping[tuple[str, str], str] = MappingProxyType(
    {(r.api_version, r.kind): c.name for c in CONTROLLERS.values() for r in c.resources}
)

#: The GKE Inference Gateway front door's kinds (``workload.frontDoor.type: gateway``), declared once in
#: ``components.crds.releases.MANAGED["gke-gateway"]``: ``(apiVersion, kind)`` -> vendored schema.
GATEWAY_SCHEMAS: Mapping[tuple[str, str], str] = MappingProxyType(
    {(r.api_version, r.kind): r.schema for r in MANAGED["gke-gateway"].resources if r.schema is not None}
)

#: ``(apiVersion, kind)`` -> vendored schema file relative to :data:`SCHEMA_DIR`.
CUSTOM_RESOURCE_SCHEMAS: Mapping[tuple[str, str], str] = MappingProxyType(
    {(r.api_version, r.kind): r.schema for m in MANAGED.values() for r in m.resources if r.schema is not None}
)

_MAX_MESSAGE = 400
_OBJECT_META_REF = "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

_API_VERSION_RE = re.compile(r"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+[a-z0-9]*")
_KIND_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")


# --------------------------------------------------------------------------- helpers


def _is_strict_integer(_checker: object, instance: object) -> bool:
    """JSON Schema ``integer`` without jsonschema's "4.0 is an integer" leniency."""
    return is_int(instance)


_StrictValidator: type[Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_strict_integer),
)


def _shorten(message: str) -> str:
    if len(message) <= _MAX_MESSAGE:
        return message
    return message[: _MAX_MESSAGE - 3] + "..."


def _describe_error(error: JsonSchemaValidationError, prefix: Sequence[str | int]) -> list[Problem]:
    path = [*prefix, *error.absolute_path]
    if (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and isinstance(error.instance, Mapping)
        and isinstance(error.schema, Mapping)
    ):
        known = error.schema.get("properties", {})
        patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
        extras = [key for key in error.instance if key not in known and not any(p.search(str(key)) for p in patterns)]
        if extras:
            return [(format_path([*path, str(key)]), f"unknown field {key!r}") for key in extras]
    message = error.message
    if error.validator in ("anyOf", "oneOf") and error.context:
        details = list(dict.fromkeys(sub.message for sub in error.context))
        message = f"{message} ({'; '.join(details)})"
    return [(format_path(path), _shorten(message))]


def _schema_problems(validator: Validator, instance: Any, prefix: Sequence[str | int] = ()) -> list[Problem]:
    problems: list[Problem] = []
    try:
        for error in validator.iter_errors(instance):
            problems.extend(_describe_error(error, prefix))
    except referencing.exceptions.Unresolvable as exc:
        problems.append((format_path(prefix), f"schema reference cannot be resolved: {exc}"))
    return sorted(problems)


# --------------------------------------------------------------------------- built-in kinds


def _version_tuple(version: str) -> tuple[int, int] | None:
    match = re.match(r"v?(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


@functools.cache
def _kv_schema_version(kubernetes_version: str) -> str:
    """kubernetes-validate schema version (e.g. ``1.34.0``) for ``kubernetes_version``.

    Same rule as ``kubernetes_validate.validate``: the newest bundled version whose minor is not
    newer than the requested one (compared numerically, not as strings)."""
    wanted = _version_tuple(kubernetes_version)
    available: list[str] = list(kv_utils.all_versions())
    if wanted is None or wanted > (_version_tuple(available[-1]) or (0, 0)):
        raise kubernetes_validate.utils.VersionNotSupportedError(version=kubernetes_version)
    candidates = [v for v in available if (_version_tuple(v) or (0, 0)) <= wanted]
    if not candidates:
        raise kubernetes_validate.utils.VersionNotSupportedError(version=kubernetes_version)
    return candidates[-1]


@functools.cache
def _kv_definitions(kubernetes_version: str) -> Resource[Any]:
    schema_dir = f"v{_kv_schema_version(kubernetes_version)}-local-strict"
    contents = kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", kubernetes_version)
    return Resource.from_contents(contents)


@functools.cache
def _builtin_validator(kubernetes_version: str, api_version: str, kind: str) -> Validator:
    schema_version = _kv_schema_version(kubernetes_version)
    schema_dir = f"v{schema_version}-local-strict"
    # kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1, apps/v1 -> apps-v1
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    filename = f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json"
    try:
        contents = kv_utils.schema_contents(filename, kubernetes_version)
    except FileNotFoundError:
        raise kubernetes_validate.SchemaNotFoundError(kind=kind, version=schema_version, api_version=api_version) from None
    resource: Resource[Any] = Resource.from_contents(contents)
    definitions = _kv_definitions(kubernetes_version)
    registry: Registry[Any] = Registry().with_resources([(resource.id() or "", resource), (definitions.id() or "", definitions)])
    return _StrictValidator(contents, registry=registry)


@functools.cache
def _object_meta_validator(kubernetes_version: str) -> Validator:
    definitions = _kv_definitions(kubernetes_version)
    base = definitions.id() or ""
    registry: Registry[Any] = Registry().with_resource(base, definitions)
    return _StrictValidator({"$ref": base + _OBJECT_META_REF}, registry=registry)


def _is_builtin_api_version(api_version: str) -> bool:
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def _kv_error_problems(exc: Exception, kubernetes_version: str) -> list[Problem]:
    if isinstance(exc, kubernetes_validate.utils.VersionNotSupportedError):
        versions: list[str] = list(kv_utils.all_versions())
        return [
            (
                ROOT,
                (
                    f"kubernetes-validate {kubernetes_validate.__version__} has no schemas for "
                    f"Kubernetes {kubernetes_version} (has {versions[0]} .. {versions[-1]})"
                ),
            )
        ]
    message = getattr(exc, "message", str(exc))
    return [(ROOT, f"{type(exc).__name__}: {message}")]


def _builtin_problems(obj: Mapping[str, Any], kubernetes_version: str) -> list[Problem]:
    api_version, kind = obj["apiVersion"], obj["kind"]
    try:
        validator = _builtin_validator(kubernetes_version, api_version, kind)
    except kubernetes_validate.SchemaNotFoundError:
        return [
            (
                ROOT,
                (
                    f"no schema for {api_version} {kind}; not a built-in kind of Kubernetes "
                    f"{kubernetes_version} (kubernetes-validate) and not one of the custom "
                    f"resources known here: {_known_custom_resources()}"
                ),
            )
        ]
    except (
        kubernetes_validate.InvalidSchemaError,
        kubernetes_validate.utils.VersionNotSupportedError,
    ) as exc:
        return _kv_error_problems(exc, kubernetes_version)
    return _schema_problems(validator, obj)


# --------------------------------------------------------------------------- custom resources


# A CRD ``pattern`` is a Go (RE2) regular expression, where a flag group may follow ``^`` and then
# applies to the rest of the expression (Kueue's AdmissionCheck ``spec.parameters.kind`` is
# ``^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$``); Python accepts global flags only at the very start.
_LEADING_FLAGS_RE = re.compile(r"(\^?)\(\?([ims]+)\)(.*)", re.DOTALL)


def _python_pattern(pattern: str) -> str:
    """``pattern`` as Python ``re`` syntax: ``^(?i)rest`` becomes the equivalent ``^(?i:rest)``."""
    match = _LEADING_FLAGS_RE.fullmatch(pattern)
    return f"{match[1]}(?{match[2]}:{match[3]})" if match and match[1] else pattern


def _strictify(schema: object) -> None:
    """In place: ``additionalProperties: false`` on closed object schemas, ``nullable`` -> type,
    Go-only regular-expression syntax in ``pattern`` -> Python's (:func:`_python_pattern`).

    Walks only schema positions (never ``default``/``enum`` values or property *names*)."""
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("pattern"), str):
        schema["pattern"] = _python_pattern(schema["pattern"])
    if schema.pop("nullable", False) is True:
        type_ = schema.get("type")
        if isinstance(type_, str):
            schema["type"] = [type_, "null"]
        if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
            schema["enum"].append(None)
    if "properties" in schema and "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        schema["additionalProperties"] = False
    for key in ("properties", "patternProperties"):
        for sub in schema.get(key, {}).values():
            _strictify(sub)
    for key in ("items", "additionalProperties", "not"):
        sub = schema.get(key)
        if isinstance(sub, list):
            for item in sub:
                _strictify(item)
        else:
            _strictify(sub)
    for key in ("anyOf", "allOf", "oneOf"):
        for sub in schema.get(key, []):
            _strictify(sub)


@functools.cache
def _load_crd_schema(relative_path: str) -> Mapping[str, Any]:
    """Vendored CRD schema, transformed by :func:`_strictify`. Cached; do not mutate."""
    schema = json.loads((SCHEMA_DIR / relative_path).read_text(encoding="utf-8"))
    _strictify(schema)
    return schema  # type: ignore[no-any-return]


@functools.cache
def _crd_validator(api_version: str, kind: str) -> Validator:
    return _StrictValidator(_load_crd_schema(CUSTOM_RESOURCE_SCHEMAS[(api_version, kind)]))


@functools.cache
def _controller_crd_validator(controller: str, version: str, api_version: str, kind: str) -> Validator:
    """Validator for ``kind`` from the controller release's vendored CRD (raises ``KeyError`` if absent)."""
    schema = crds.schema(controller, version, api_version, kind)  # a fresh copy: safe to transform
    _strictify(schema)
    return _StrictValidator(schema)


def _default_controller_versions() -> dict[str, str]:
    return ControllersSpec().by_controller


def _known_custom_resources() -> str:
    return ", ".join(f"{api} {kind}" for api, kind in CUSTOM_RESOURCES)


def _custom_resource_metadata_problems(obj: Mapping[str, Any], kubernetes_version: str) -> list[Problem]:
    metadata = obj.get("metadata")
    if metadata is None:
        return [("metadata", "required: custom resources need metadata.name")]
    try:
        problems = _schema_problems(_object_meta_validator(kubernetes_version), metadata, ["metadata"])
    except (
        kubernetes_validate.InvalidSchemaError,
        kubernetes_validate.utils.VersionNotSupportedError,
    ) as exc:
        problems = _kv_error_problems(exc, kubernetes_version)
    if not isinstance(metadata, Mapping):
        return problems
    name = metadata.get("name")
    if name is None or name == "":
        problems.append(("metadata.name", "required: custom resources need a name"))
        return problems
    if not isinstance(name, str):
        return problems  # type error already reported by the ObjectMeta schema
    problems.extend(("metadata.name", msg) for msg in dns1123_subdomain_errors(name))
    resource = CUSTOM_RESOURCES.get((obj["apiVersion"], obj["kind"]))
    if resource is not None and resource.name_max_length is not None:
        problems.extend(
            ("metadata.name", f"{msg} ({resource.name_rule})")
            for msg in dns1035_label_errors(name, resource.name_max_length)
        )
    return problems


def _custom_resource_problems(
    obj: Mapping[str, Any], kubernetes_version: str, controller_versions: Mapping[str, str]
) -> list[Problem]:
    api_version, kind = obj["apiVersion"], obj["kind"]
    controller = CONTROLLER_RESOURCES.get((api_version, kind))
    if controller is None:
        problems = _schema_problems(_crd_validator(api_version, kind), obj)
    else:
        version = controller_versions.get(controller) or _default_controller_versions()[controller]
        try:
            problems = _schema_problems(_controller_crd_validator(controller, version, api_version, kind), obj)
        except KeyError as exc:
            problems = [(ROOT, str(exc.args[0]) if exc.args else repr(exc))]
    problems.extend(_custom_resource_metadata_problems(obj, kubernetes_version))
    if obj["kind"] == "JobSet":
        problems.extend(jobset_problems(obj))
    return problems


# --------------------------------------------------------------------------- public API


def _label(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    name = get_path(obj, "metadata", "name")
    kind_part = kind if isinstance(kind, str) and kind else "<no kind>"
    name_part = name if isinstance(name, str) and name else "<no name>"
    return f"{kind_part}/{name_part}"


def _object_problems(
    obj: Mapping[str, Any], kubernetes_version: str, controller_versions: Mapping[str, str]
) -> Iterator[Problem]:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    api_version_ok = isinstance(api_version, str) and _API_VERSION_RE.fullmatch(api_version) is not None
    kind_ok = isinstance(kind, str) and _KIND_RE.fullmatch(kind) is not None
    if not api_version_ok:
        yield ("apiVersion", f"missing or malformed: {api_version!r}")
    if not kind_ok:
        yield ("kind", f"missing or malformed: {kind!r}")
    if api_version_ok and kind_ok and isinstance(api_version, str) and isinstance(kind, str):
        if (api_version, kind) in CUSTOM_RESOURCES:
            yield from _custom_resource_problems(obj, kubernetes_version, controller_versions)
        elif _is_builtin_api_version(api_version):
            yield from _builtin_problems(obj, kubernetes_version)
        else:
            yield (
                ROOT,
                (
                    f"no schema for {api_version} {kind}; known: {_known_custom_resources()} "
                    f"and the built-in kinds of Kubernetes {kubernetes_version}"
                ),
            )
    yield from common_metadata_problems(obj)


def validate_object(
    obj: Mapping[str, Any],
    *,
    kubernetes_version: str = KUBERNETES_VERSION,
    controller_versions: Mapping[str, str] | None = None,
) -> list[str]:
    """Validate one rendered Kubernetes object; return problems (empty list if valid).

    Each problem reads ``<kind>/<metadata.name>: <path>: <message>``. ``controller_versions``
    (e.g. ``config.controllers.by_controller``) picks the LWS/JobSet CRD release; default: the
    ``gke-tpu-llm:controllers`` defaults."""
    if not isinstance(obj, Mapping):
        return [f"<no kind>/<no name>: {ROOT}: expected a mapping, got {type(obj).__name__}"]
    label = _label(obj)
    seen: set[Problem] = set()
    out: list[str] = []
    for problem in _object_problems(obj, kubernetes_version, controller_versions or {}):
        if problem not in seen:
            seen.add(problem)
            out.append(f"{label}: {problem[0]}: {problem[1]}")
    return out


def validate_all(
    objs: Iterable[Mapping[str, Any]],
    *,
    kubernetes_version: str = KUBERNETES_VERSION,
    controller_versions: Mapping[str, str] | None = None,
) -> list[str]:
    """:func:`validate_object` for each object; all problems, in input order."""
    problems: list[str] = []
    for obj in objs:
        problems.extend(validate_object(obj, kubernetes_version=kubernetes_version, controller_versions=controller_versions))
    return problems
