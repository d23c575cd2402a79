"""Kubernetes names and object metadata, as the API server and the webhooks check them
(``components.tools.validate`` applies them to every rendered object).

apimachinery's name rules (DNS-1123 label and subdomain, DNS-1035 label, qualified names and label
values), the API server's ``ValidateObjectMeta`` checks the schemas cannot express (namespace,
label and annotation syntax, 256 KiB of annotations) and the JobSet webhook's generated-name checks.
Each problem is a (field path, message) pair; the path reads like ``spec.template.metadata.labels[app]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

ROOT = "<root>"
"""The path of the whole object."""
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

_DNS1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_FIELD_NAME_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")

Problem = tuple[str, str]  # (field path, message)




def _pattern_errors(value: str, max_length: int, pattern: re.Pattern[str], rule_text: str) -> list[str]:
    """The apimachinery name checks: a length limit and a pattern, each with its own message."""
    errors = []
    if len(value) > max_length:
        errors.append(f"must be no more than {max_length} characters")
    if not pattern.fullmatch(value):
        errors.append(rule_text)
    return errors


def dns1123_label_errors(value: str) -> list[str]:
    return _pattern_errors(
        value, 63, _DNS1123_LABEL_RE,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
        "'-', and must start and end with an alphanumeric character",
    )


def dns1123_subdomain_errors(value: str) -> list[str]:
    return _pattern_errors(
        value, 253, _DNS1123_SUBDOMAIN_RE,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character",
    )


def dns1035_label_errors(value: str, max_length: int = 63) -> list[str]:
    return _pattern_errors(
        value, max_length, _DNS1035_LABEL_RE,
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
        "with an alphabetic character, and end with an alphanumeric character",
    )


def qualified_name_errors(value: str) -> list[str]:
    """``k8s.io/apimachinery`` ``IsQualifiedName`` (label and annotation keys)."""
    prefix, slash, name = value.rpartition("/")
    errors = []
    if slash:
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {msg}" for msg in dns1123_subdomain_errors(prefix))
    if not name:
        errors.append("name part must be non-empty")
        return errors
    if len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if value and not _QUALIFIED_NAME_RE.fullmatch(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def format_path(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _FIELD_NAME_RE.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part}]"
    return out or ROOT


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def get_path(mapping: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def jobset_problems(obj: Mapping[str, Any]) -> list[Problem]:
    """Re-implementation of the JobSet validating webhook's generated-name checks."""
    problems: list[Problem] = []
    name = get_path(obj, "metadata", "name")
    if not isinstance(name, str) or dns1035_label_errors(name):
        return problems  # already reported
    replicated_jobs = get_path(obj, "spec", "replicatedJobs")
    if isinstance(replicated_jobs, list):
        for index, rjob in enumerate(replicated_jobs):
            rjob_name = get_path(rjob, "name")
            replicas = get_path(rjob, "replicas")
            replicas = 1 if replicas is None else replicas  # CRD default
            if not isinstance(rjob_name, str) or not is_int(replicas):
                continue  # reported by the schema
            path = f"spec.replicatedJobs[{index}]"
            job_name = f"{name}-{rjob_name}-{replicas - 1}"
            for msg in dns1035_label_errors(job_name):
                problems.append((path, f"generated Job name {job_name!r} is invalid: {msg} (JobSet webhook)"))
            job_spec = get_path(rjob, "template", "spec")
            mode = get_path(job_spec, "completionMode") or "Indexed"  # JobSet webhook default
            completions = get_path(job_spec, "completions")
            if mode == "Indexed" and is_int(completions):
                pod_name = f"{name}-{rjob_name}-{replicas - 1}-{completions - 1}-abcde"
                for msg in dns1035_label_errors(pod_name):
                    problems.append(
                        (
                            path,
                            (f"generated Pod name {pod_name!r} (5-char random suffix) is invalid: {msg} (JobSet webhook)"),
                        )
                    )
    subdomain = get_path(obj, "spec", "network", "subdomain")
    if isinstance(subdomain, str) and subdomain:
        problems.extend(
            ("spec.network.subdomain", msg) for msg in [*dns1123_subdomain_errors(subdomain), *dns1035_label_errors(subdomain)]
        )
    return problems




def common_metadata_problems(obj: Mapping[str, Any]) -> list[Problem]:
    """API-server ``ValidateObjectMeta`` checks the schemas cannot express (all kinds)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return []
    problems: list[Problem] = []
    namespace = metadata.get("namespace")
    if isinstance(namespace, str) and namespace:
        problems.extend(("metadata.namespace", msg) for msg in dns1123_label_errors(namespace))
    labels = metadata.get("labels")
    if isinstance(labels, Mapping):
        for key, value in labels.items():
            if not isinstance(key, str):
                continue
            path = format_path(["metadata", "labels", key])
            problems.extend((path, f"key {key!r}: {msg}") for msg in qualified_name_errors(key))
            if isinstance(value, str):
                problems.extend((path, f"value {value!r}: {msg}") for msg in label_value_errors(value))
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping):
        total = 0
        for key, value in annotations.items():
            if not isinstance(key, str):
                continue
            total += len(key) + (len(value) if isinstance(value, str) else 0)
            path = format_path(["metadata", "annotations", key])
            problems.extend((path, f"key {key!r}: {msg}") for msg in qualified_name_errors(key))
        if total > TOTAL_ANNOTATION_SIZE_LIMIT:
            problems.append(
                (
                    "metadata.annotations",
                    f"may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes in total (is {total})",
                )
            )
    return problems
