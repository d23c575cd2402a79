"""Policy rules as pure functions over one resource (type, name, input properties, options).

The same functions serve two callers: the Pulumi policy pack in this folder (``__main__.py``,
enforced on real ``pulumi preview --policy-pack components/policy``) and the offline engine's
recorded resources, on which the tests exercise every rule with a passing and a failing case.
Property names are the engine's wire names (camelCase), which is also what policy packs receive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ALLOW_REPLACE_LABEL = "gke-tpu-llm-allow-replace"
"""GCP label a prod stack sets (through ``gke-tpu-llm:allowReplace``) on a resource it may replace."""



@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    secret_outputs: tuple[str, ...] = ()
    """The resource's ``additionalSecretOutputs`` option."""


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    enforcement: str  # "mandatory" or "advisory"
    check: Callable[[Resource], list[str]]


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, value
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")


# A container image reference: registry/path, then a tag and/or a digest.
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*?[a-z0-9](?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@sha256:[a-f0-9]{64})?$")
# Tags that name a moving target rather than one build.
FLOATING_TAGS = frozenset({"latest", "nightly", "main", "master", "stable", "edge"})


def image_problem(image: str) -> str | None:
    """Why an image reference is not pinned, or None. Digests and released tags pass.

    The one definition of "pinned" in the project: the workload specs reject such images at config
    load and the policy pack rejects them on real previews.
    """
    match = _IMAGE.match(image)
    if match is None:
        return "is not a valid image reference"
    if "@sha256:" in image:
        return None
    tag = match.group("tag")
    if tag is None:
        return "has no tag (resolves to :latest)"
    if tag.lower() in FLOATING_TAGS:
        return f"uses the floating tag {tag!r}"
    return None


def check_images(res: Resource) -> list[str]:
    if not res.type.startswith("kubernetes:"):
        return []
    out = []
    for path, value in _walk(res.props):
        if path.endswith(".image") and isinstance(value, str):
            problem = image_problem(value)
            if problem:
                out.append(f"{path}: image {value!r} {problem}; pin a released tag or a digest")
    return out


def _labels(res: Resource) -> Mapping[str, Any]:
    props = res.props
    return props.get("resourceLabels") or (props.get("nodeConfig") or {}).get("resourceLabels") or props.get("labels") or {}


def _is_tpu_pool(res: Resource) -> bool:
    machine = str((res.props.get("nodeConfig") or {}).get("machineType", ""))
    return res.type == "gcp:container/nodePool:NodePool" and machine.startswith(("ct", "tpu"))


def check_prod_protection(res: Resource) -> list[str]:
    if not (_is_tpu_pool(res) or res.type == "gcp:container/cluster:Cluster"):
        return []
    labels = _labels(res)
    if labels.get("environment") != "prod" or labels.get(ALLOW_REPLACE_LABEL) == "true":
        return []
    problems = []
    if not res.protect:
        problems.append("prod TPU pools and clusters must be protected (replacement or deletion needs an explicit allowance)")
    if res.type == "gcp:container/cluster:Cluster" and res.props.get("deletionProtection") is not True:
        problems.append("prod clusters need GKE deletion protection")
    return problems


def check_bucket(res: Resource) -> list[str]:
    if res.type != "gcp:storage/bucket:Bucket":
        return []
    out = []
    if res.props.get("uniformBucketLevelAccess") is not True:
        out.append("uniformBucketLevelAccess must be true")
    if res.props.get("publicAccessPrevention") != "enforced":
        out.append("publicAccessPrevention must be 'enforced'")
    return out


def check_project_storage_admin(res: Resource) -> list[str]:
    if not res.type.startswith("gcp:projects/"):
        return []
    roles = [res.props.get("role")] + [b.get("role") for b in res.props.get("bindings", []) if isinstance(b, Mapping)]
    bad = sorted({r for r in roles if isinstance(r, str) and r.startswith("roles/storage.")})
    return [f"project-wide {r} is not allowed; grant object roles on the bucket instead" for r in bad]


def check_no_sa_keys(res: Resource) -> list[str]:
    if res.type == "gcp:serviceaccount/key:Key":
        return ["service-account keys are not allowed; use Workload Identity"]
    return []


def check_secret_values(res: Resource) -> list[str]:
    """Kubernetes Secret data stays encrypted in state and outputs.

    Policy packs see secret values in plaintext (pulumi-policy#163), so the rule checks what the
    program controls: the Secret declares ``data``/``stringData`` as secret outputs. (Where the
    values come from — ``Config.require_secret`` — is checked at config load.)
    """
    if res.type != "kubernetes:core/v1:Secret":
        return []
    present = [section for section in ("data", "stringData") if res.props.get(section)]
    missing = [section for section in present if section not in res.secret_outputs]
    return [f"{section} is not declared a secret output (additionalSecretOutputs)" for section in missing]


RULES: tuple[Rule, ...] = (
    Rule("no-unpinned-images", "Container images carry a released tag or a digest, never :latest.", "mandatory", check_images),
    Rule(
        "prod-tpu-pools-and-cluster-protected",
        "In prod, TPU node pools and the cluster are protected (no silent replacement or deletion) unless allowed.",
        "mandatory",
        check_prod_protection,
    ),
    Rule("bucket-uniform-access-and-pap", "Buckets have uniform access and public-access prevention.", "mandatory", check_bucket),
    Rule("no-project-wide-storage-roles", "No project-wide storage roles.", "mandatory", check_project_storage_admin),
    Rule("no-service-account-keys", "No service-account keys.", "mandatory", check_no_sa_keys),
    Rule("secrets-stay-secret", "Kubernetes Secret values come from Pulumi secrets.", "mandatory", check_secret_values),
)


def violations(res: Resource) -> list[tuple[str, str]]:
    """(rule name, message) for every rule ``res`` breaks."""
    return [(rule.name, message) for rule in RULES for message in rule.check(res)]
