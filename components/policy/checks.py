"""Policy rules as pure functions over one resource (type, name, input properties, options).

The same functions serve two callers: the Pulumi policy pack in this folder (``__main__.py``,
enforced on real ``pulumi preview --policy-pack components/policy``) and the offline engine's
recorded resources, on which the tests exercise every rule with a passing and a failing case.
Property names are the engine's wire names (camelCase), which is also what policy packs receive.
Rules read them as ``Mapping``/``Sequence`` only: the policy SDK passes read-only proxies, not dicts
and lists, and raises on a value that is unknown during preview (the tests run every case both ways).
A value unknown during preview is skipped or left to raise (the pack then reports the rule as not
run); ``pulumi up`` analyzes each resource again with its inputs resolved, so the rule holds there.

Kubernetes rules key on the resource type, never on a ``kind`` property: a type token is
``kubernetes:<group>/<version>:<Kind>`` (custom resources too, pulumi_kubernetes
``apiextensions.CustomResource``), and every ``<Kind>Patch`` type (Server-Side Apply patches,
custom resources' ``CustomResourcePatch`` included) is judged like its kind.

Rules that need several resources at once (a route and the Gateway it attaches to) are
``STACK_RULES``, run by the pack's stack validation on every resource of the stack.

Imports nothing outside the standard library but ``components.catalog.pinning`` (a leaf): the pack runs in
its own virtualenv, which holds only pulumi-policy.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.catalog.images import DIGEST
from components.catalog.pinning import image_problem, tag_problem

ALLOW_REPLACE_LABEL = "gke-tpu-llm-allow-replace"
"""GCP label a prod stack sets (through ``gke-tpu-llm:allowReplace``) on a resource it may replace."""

INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
"""GKE annotation (value ``Internal``) that makes a LoadBalancer Service VPC-internal."""
AUTH_ANNOTATION = "gke-tpu-llm/auth"
"""Annotation the workloads set on a Service whose server authenticates its clients; the value names
the mechanism (``api-key``, ``iap``, ...). Same key as ``components.tools.endpoints`` (compared in a test)."""

ENVIRONMENT_CONFIG_KEY = "gke-tpu-llm:environment"
"""The stack setting that makes a stack prod (``StackConfig.environment``)."""
DEFAULT_ENVIRONMENT = "dev"
"""What a stack without ``gke-tpu-llm:environment`` is (``StackConfig.environment``'s default)."""
PROD = "prod"
REQUIRED_LABELS: Mapping[str, str | None] = {"app": "gke-tpu-llm", "stack": None, "environment": PROD}
"""Labels every labelled resource of a prod stack carries (``StackConfig.labels``): key -> the
value it must have (None: any non-empty value)."""


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


def _is_unknown(error: Exception) -> bool:
    """pulumi_policy raises ``UnknownValueError`` when a rule reads a value that is not known until
    the update (preview only; the pack reports the rule as not run). Matched by name: this module
    imports nothing from the pack's virtualenv."""
    return type(error).__name__ == "UnknownValueError"


def _is_list(value: Any) -> bool:
    # pulumi_policy hands rules read-only proxies: Mappings that are not dicts, Sequences that are
    # not lists. Checking for the abstract types keeps the rules working on both.
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _children(value: Any) -> Iterator[tuple[str | int, Any]]:
    keys: Iterable[str | int] = list(value) if isinstance(value, Mapping) else range(len(value)) if _is_list(value) else ()
    for key in keys:
        try:
            item = value[key]
        except Exception as error:  # an unknown value, during preview, cannot break the rule yet
            if _is_unknown(error):
                continue
            raise
        yield key, item


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, value
    for key, item in _children(value):
        yield from _walk(item, _join(path, key))


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _get(value: Any, key: str) -> Any:
    """``value[key]`` of a Mapping; None when it is missing, not a Mapping, or unknown (preview)."""
    if not isinstance(value, Mapping) or key not in list(value):
        return None
    try:
        return value[key]
    except Exception as error:
        if _is_unknown(error):
            return None
        raise


def _indexed(value: Any) -> list[tuple[int, Any]]:
    """(index, item) of the known items of a Sequence (nothing for anything else)."""
    return [(int(i), item) for i, item in _children(value)] if _is_list(value) else []


def _items(value: Any) -> list[Any]:
    """The known items of a Sequence (nothing for anything else)."""
    return [item for _, item in _indexed(value)]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _annotations(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_get(_get(props, "metadata"), "annotations"))


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


# --------------------------------------------------------------------------- images

HELM_TYPES = frozenset({"kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v4:Chart"})
"""Helm resources: the pack sees their ``values``, never the objects the chart renders."""


def _is_image_key(key: str | int) -> bool:
    # `image` (containers, Helm's usual `image:` value), and Helm values such as `sidecarImage` or
    # `init_image`.
    return isinstance(key, str) and (key == "image" or key.endswith(("Image", "_image")))


def _image_map_problem(image: Mapping[str, Any]) -> str | None:
    """Why a structured image value (Helm ``image: {registry, repository, tag, digest}``, or a
    Kubernetes image volume ``image: {reference}``) is not pinned, or None."""
    reference = _get(image, "reference")
    if isinstance(reference, str):
        problem = image_problem(reference)
        return f"image {reference!r} {problem}" if problem else None
    repository = "/".join(str(_get(image, key)) for key in ("registry", "repository") if isinstance(_get(image, key), str))
    digest = _get(image, "digest")
    if isinstance(digest, str) and digest.strip():
        return None if DIGEST.match(digest.strip()) else f"image digest {digest!r} is not sha256:<64 hex digits>"
    tag = _get(image, "tag")
    tag = "" if tag is None else str(tag).strip()  # YAML reads `tag: 1.10` as a number
    shown = f"{repository or '<chart default>'}:{tag}"
    if "@" in tag:
        return None if DIGEST.match(tag.split("@", 1)[1]) else f"image {shown!r} has a malformed digest"
    if tag:
        problem = tag_problem(tag)
        return f"image {shown!r} {problem}" if problem else None
    if repository or isinstance(_get(image, "name"), str):
        return "sets the image repository but no tag or digest, so the chart's default tag applies to another image"
    return None  # pull policy or pull secrets only: the chart's own pinned image


def check_images(res: Resource) -> list[str]:
    if not res.type.startswith("kubernetes:"):
        return []
    helm = res.type in HELM_TYPES
    out = []
    for path, value in _walk(_get(res.props, "values"), "values") if helm else _walk(res.props):
        key = path.rsplit(".", 1)[-1]
        if isinstance(value, str) and _is_image_key(key):
            problem = image_problem(value)
            if problem:
                out.append(f"{path}: image {value!r} {problem}; pin a version tag or a digest")
        # Helm charts name their images {repository, tag} under keys of their own choosing.
        elif isinstance(value, Mapping) and (_is_image_key(key) or (helm and isinstance(_get(value, "repository"), str))):
            problem = _image_map_problem(value)
            if problem:
                out.append(f"{path}: {problem}; pin a version tag or a digest")
    if helm:
        chart = str(_get(res.props, "chart") or "")
        version = _get(res.props, "version")
        local = chart.startswith((".", "/"))
        if not local and not (isinstance(version, str) and version.strip()):
            out.append(
                f"chart {chart!r} has no version, so each install takes the newest chart and the images it defaults "
                "to; pin version"
            )
    return out


# --------------------------------------------------------------------------- prod protection and labels

LABELLED_TYPES: Mapping[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": ("resourceLabels",),
    "gcp:container/nodePool:NodePool": ("nodeConfig", "resourceLabels"),
    "gcp:storage/bucket:Bucket": ("labels",),
    "gcp:artifactregistry/repository:Repository": ("labels",),
}
"""GCP resource types the project registers that carry labels, and where (a test holds every stack's
labelled resources to this table)."""


def _labels(res: Resource) -> Mapping[str, Any]:
    value: Any = res.props
    for key in LABELLED_TYPES.get(res.type, ()):
        value = _get(value, key)
    return _mapping(value)


def is_prod(res: Resource) -> bool:
    """A resource of a prod stack, or one labelled prod (a prod stack whose resource lost its label
    is still prod: the stack's configuration says so)."""
    return res.environment == PROD or _labels(res).get("environment") == PROD


def _is_tpu_pool(res: Resource) -> bool:
    machine = str(_get(_get(res.props, "nodeConfig"), "machineType") or "")
    return res.type == "gcp:container/nodePool:NodePool" and machine.startswith(("ct", "tpu"))


def check_prod_protection(res: Resource) -> list[str]:
    if not (_is_tpu_pool(res) or res.type == "gcp:container/cluster:Cluster"):
        return []
    if not is_prod(res) or _labels(res).get(ALLOW_REPLACE_LABEL) == "true":
        return []
    problems = []
    if not res.protect:
        problems.append("prod TPU pools and clusters must be protected (replacement or deletion needs an explicit allowance)")
    if res.type == "gcp:container/cluster:Cluster" and res.props.get("deletionProtection") is not True:
        problems.append("prod clusters need GKE deletion protection")
    return problems


def check_prod_labels(res: Resource) -> list[str]:
    """Billing, inventory and the protection rule above read these labels; a prod resource without
    them (or labelled as another environment) escapes all three."""
    where = LABELLED_TYPES.get(res.type)
    if where is None or not is_prod(res):
        return []
    labels = _labels(res)
    key = ".".join(where)
    out = []
    for label, wanted in REQUIRED_LABELS.items():
        value = labels.get(label)
        if value is None or str(value).strip() == "":
            out.append(f"prod resource without the label {label!r} in {key}")
        elif wanted is not None and value != wanted:
            out.append(f"prod resource labelled {label}={value!r} in {key}; it must be {wanted!r}")
    return out


# --------------------------------------------------------------------------- buckets and keys


def check_bucket(res: Resource) -> list[str]:
    if res.type != "gcp:storage/bucket:Bucket":
        return []
    out = []
    if res.props.get("uniformBucketLevelAccess") is not True:
        out.append("uniformBucketLevelAccess must be true")
    if res.props.get("publicAccessPrevention") != "enforced":
        out.append("publicAccessPrevention must be 'enforced'")
    return out


def check_no_sa_keys(res: Resource) -> list[str]:
    if res.type == "gcp:serviceaccount/key:Key":
        return ["service-account keys are not allowed; use Workload Identity"]
    if res.type == "gcp:storage/hmacKey:HmacKey":
        return ["HMAC keys (long-lived Cloud Storage credentials of a service account) are not allowed; use Workload Identity"]
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


# --------------------------------------------------------------------------- IAM above a resource

# Grants on a whole project, folder or organization: module -> what the grant covers. Each has a
# non-authoritative member, an authoritative binding (one role, every member) and an authoritative
# policy (policyData: the whole IAM policy as JSON). Wire names from pulumi_gcp.<module>.iam_*.
_IAM_SCOPES = {"projects": "project", "folder": "folder", "organizations": "organization"}
IAM_GRANT_TYPES: Mapping[str, str] = {
    f"gcp:{module}/iAM{kind}:IAM{kind}": scope
    for module, scope in _IAM_SCOPES.items()
    for kind in ("Member", "Binding", "Policy")
}
PROJECT_ROLES: frozenset[str] = frozenset({"roles/container.defaultNodeServiceAccount", "roles/monitoring.viewer"})
"""The roles the project's components grant on a project, and nothing else (a test holds this set to
``components.platform.identity.NODE_ROLE``, the vLLM metrics adapter's ``MONITORING_VIEWER`` and every stack's
grants): the node service account's logging/metrics role, and Cloud Monitoring read for the metrics
adapter (Monitoring has no finer resource). Every other role, predefined or custom, is granted on the
resource it is about (a bucket, a repository, a service account), never on the whole project."""
BROAD_ROLES = frozenset({"roles/owner", "roles/editor"})
"""Basic roles that include storage admin on every bucket beneath the grant."""
_CUSTOM_ROLE = re.compile(r"^(projects|organizations)/[^/]+/roles/[^/]+$")


def broad_storage_role(role: str) -> bool:
    """A role that must not be granted above a bucket: any Cloud Storage role (admin, objectAdmin,
    legacyBucketOwner, ... — on a project they reach every bucket in it) and owner/editor."""
    return role.startswith("roles/storage.") or role in BROAD_ROLES


def _grants(res: Resource) -> list[tuple[str, list[str]]] | str:
    """(role, members) of an IAM member/binding/policy resource, or why they cannot be read."""
    props = res.props
    if res.type.endswith(":IAMPolicy"):
        data = props.get("policyData")
        try:
            policy = json.loads(data) if isinstance(data, str) else None
        except ValueError:
            policy = None
        if not isinstance(policy, Mapping):
            return "policyData is not a JSON IAM policy, so its roles cannot be checked"
        bindings = policy.get("bindings") or []
        return [
            (str(b.get("role", "")), [str(m) for m in b.get("members") or ()])
            for b in (bindings if _is_list(bindings) else ())
            if isinstance(b, Mapping)
        ]
    members = [props["member"]] if props.get("member") else list(props.get("members") or ())
    return [(str(props.get("role", "")), [str(m) for m in members])]


def _role_problem(scope: str, role: str, who: str) -> str | None:
    if role in BROAD_ROLES:
        return f"{scope}-wide {role} (to {who}) includes storage admin on every bucket; grant the narrow roles needed"
    if role.startswith("roles/storage."):
        return f"{scope}-wide {role} (to {who}) is not allowed; grant object roles on the bucket instead"
    if scope != "project":
        return f"{scope}-wide {role} (to {who}): the project grants nothing on a {scope}; grant it on the resource it is about"
    if role in PROJECT_ROLES:
        return None
    allowed = ", ".join(sorted(PROJECT_ROLES))
    if _CUSTOM_ROLE.match(role):
        return (
            f"project-wide custom role {role} (to {who}) is not on the allow-list ({allowed}); a custom role can carry "
            "any permission, so it needs the same review as a predefined one: grant on the resource, or add it to "
            "PROJECT_ROLES with its reason"
        )
    return (
        f"project-wide {role} (to {who}) is not on the allow-list ({allowed}); grant it on the resource it is about, "
        "or add it to PROJECT_ROLES with its reason"
    )


def check_project_iam(res: Resource) -> list[str]:
    scope = IAM_GRANT_TYPES.get(res.type)
    if scope is None:
        return []
    grants = _grants(res)
    if isinstance(grants, str):
        return [grants]
    out = []
    if not res.type.endswith(":IAMMember"):
        # Authoritative on a shared project: it removes every member it does not list (other
        # stacks' node accounts, the project's owners), so only additive IAMMember grants pass.
        what = "every binding of the policy" if res.type.endswith(":IAMPolicy") else "the role's binding"
        kind = res.type.rsplit(":", 1)[-1]
        out.append(f"{scope}-level {kind} replaces {what}, removing grants other stacks and owners hold; use IAMMember")
    for role, members in sorted(grants):
        problem = _role_problem(scope, role, ", ".join(members) or "no members")
        if problem:
            out.append(problem)
    return out


# --------------------------------------------------------------------------- node service account

# The Compute Engine default service account: <project number>-compute@developer.gserviceaccount.com,
# or "default", which GKE resolves to it; an unset account means it too.
_DEFAULT_COMPUTE_SA = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$", re.IGNORECASE)


def _default_account(config: Any, where: str) -> str | None:
    account = config.get("serviceAccount") if isinstance(config, Mapping) else None
    if account is None or account == "":
        return f"{where}.serviceAccount is unset, so the nodes run as the Compute Engine default service account"
    if str(account).strip().lower() == "default" or _DEFAULT_COMPUTE_SA.match(str(account).strip()):
        return f"{where}.serviceAccount {account!r} is the Compute Engine default service account"
    return None


def check_node_service_account(res: Resource) -> list[str]:
    """Nodes run as a dedicated account. The default one has roles/editor in many projects, and
    every pod that can reach the metadata server (GCE_METADATA mode, hostNetwork) acts as it."""
    props = res.props
    if res.type == "gcp:container/nodePool:NodePool":
        found = [_default_account(props.get("nodeConfig"), "nodeConfig")]
    elif res.type == "gcp:container/cluster:Cluster":
        autoscaling = props.get("clusterAutoscaling")
        autoscaling = autoscaling if isinstance(autoscaling, Mapping) else {}
        found = []
        if props.get("enableAutopilot") is True or autoscaling.get("enabled") is True:
            # Autopilot and node auto-provisioning create pools with these defaults.
            defaults = autoscaling.get("autoProvisioningDefaults")
            found.append(_default_account(defaults, "clusterAutoscaling.autoProvisioningDefaults"))
        pools = props.get("nodePools") or []
        pools = list(pools) if _is_list(pools) else []
        for i, pool in enumerate(pools):
            config = pool.get("nodeConfig") if isinstance(pool, Mapping) else None
            found.append(_default_account(config, f"nodePools[{i}].nodeConfig"))
        # The default pool runs on the cluster's nodeConfig, unless inline pools replace it, the
        # cluster is Autopilot, or it is removed right after creation (no workload ever lands on it).
        if not pools and props.get("enableAutopilot") is not True and props.get("removeDefaultNodePool") is not True:
            found.append(_default_account(props.get("nodeConfig"), "nodeConfig"))
    else:
        return []
    return [f"{message}; give the nodes a dedicated least-privilege account" for message in found if message]


# --------------------------------------------------------------------------- address space

MAX_PUBLIC_IPV4 = 2**16
"""Most public IPv4 addresses a client list may admit in total: a /16 (65,536), the largest block one
organisation's offices, NAT gateways or partners typically hold. A list admitting more is not a
list of clients but the internet in pieces (``0.0.0.0/1`` + ``128.0.0.0/1``, or 256 /8s)."""
MAX_PUBLIC_IPV6 = 2**96
"""Most public IPv6 addresses a client list may admit in total: a /32, the allocation a regional
registry gives a whole provider (RIPE NCC "IPv6 Address Allocation and Assignment Policy", Minimum
Allocation)."""
_NON_PUBLIC_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network" (RFC 791)
        "10.0.0.0/8",  # private (RFC 1918)
        "100.64.0.0/10",  # shared address space, carrier-grade NAT (RFC 6598)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local (RFC 3927)
        "172.16.0.0/12",  # private (RFC 1918)
        "192.168.0.0/16",  # private (RFC 1918)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved (RFC 1112)
    )
)
"""IPv4 space no internet client connects from: admitting it widens nothing beyond the VPC."""
_NON_PUBLIC_V6 = tuple(ipaddress.IPv6Network(n) for n in ("::1/128", "fc00::/7", "fe80::/10", "ff00::/8"))
_V4_EMBEDDING = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::ffff:0:0/96",  # IPv4-mapped (RFC 4291 §2.5.5.2)
        "::/96",  # IPv4-compatible, deprecated (RFC 4291 §2.5.5.1)
        "64:ff9b::/96",  # NAT64 well-known prefix (RFC 6052)
    )
)
"""IPv6 prefixes whose last 32 bits are an IPv4 address: a range inside one admits those IPv4
clients too, so it is counted as IPv4 space as well (``::ffff:0:0/96`` is the whole IPv4 internet)."""


@dataclass(frozen=True)
class AddressSpace:
    """What a list of client CIDRs admits, overlaps collapsed."""

    public_v4: int
    public_v6: int
    not_cidrs: tuple[str, ...]
    """Entries that are not CIDR networks (a bare address included: the APIs want ``/32``)."""

    def problems(self, where: str) -> list[str]:
        out = [f"{where}: {entry!r} is not a CIDR" for entry in self.not_cidrs]
        if self.public_v4 > MAX_PUBLIC_IPV4:
            out.append(
                f"{where} admit {self.public_v4:,} public IPv4 addresses in total, more than a /16 "
                f"({MAX_PUBLIC_IPV4:,}); list the client CIDRs"
            )
        if self.public_v6 > MAX_PUBLIC_IPV6:
            # IPv6 counts are too long to read: say which prefix they are at least as large as.
            size = 128 - (self.public_v6.bit_length() - 1)
            out.append(f"{where} admit at least a /{size} of public IPv6 space in total, more than a /32; list the client CIDRs")
        return out


def _public_count(networks: Sequence[Any], excluded: Sequence[Any]) -> int:
    total = 0
    for network in ipaddress.collapse_addresses(networks):
        remaining = [network]
        for block in excluded:
            kept = []
            for net in remaining:
                if net.subnet_of(block):
                    continue
                if block.subnet_of(net):
                    kept.extend(net.address_exclude(block))
                else:
                    kept.append(net)  # disjoint: CIDR blocks either nest or do not meet
            remaining = kept
        total += sum(net.num_addresses for net in remaining)
    return total


def public_address_space(cidrs: Iterable[Any]) -> AddressSpace:
    """The public address space a client list admits: every entry summed, overlaps collapsed
    (``ipaddress.collapse_addresses``), private and special-purpose space left out, IPv6 ranges that
    embed IPv4 addresses counted as IPv4 too."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    bad: list[str] = []
    for entry in cidrs:
        text = str(entry).strip()
        try:
            if "/" not in text:
                raise ValueError(text)
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            bad.append(text)
            continue
        if isinstance(network, ipaddress.IPv4Network):
            v4.append(network)
            continue
        v6.append(network)
        for embedding in _V4_EMBEDDING:
            if network.overlaps(embedding):
                inner = network if network.subnet_of(embedding) else embedding
                v4.append(ipaddress.IPv4Network((int(inner.network_address) & 0xFFFFFFFF, inner.prefixlen - 96)))
    return AddressSpace(_public_count(v4, _NON_PUBLIC_V4), _public_count(v6, _NON_PUBLIC_V6), tuple(bad))


# --------------------------------------------------------------------------- exposure

_NO_AUTH = frozenset({"", "none", "no", "false", "off", "disabled"})
_SERVICE_EXPOSURE_FIELDS = ("ports", "loadBalancerSourceRanges", "externalIPs")


def check_public_load_balancer(res: Resource) -> list[str]:
    """A LoadBalancer Service (or a ServicePatch making one) without GKE's internal annotation gets a
    public IP: it must name the client CIDRs allowed in (``spec.loadBalancerSourceRanges``, whose
    public address space, summed, stays within ``MAX_PUBLIC_IPV4``/``MAX_PUBLIC_IPV6``) and carry the
    auth marker (``gke-tpu-llm/auth: <mechanism>``) the workloads set on servers that authenticate.
    ``spec.externalIPs`` is refused on every Service: kube-proxy captures traffic to those
    addresses from every pod of the cluster (CVE-2020-8554)."""
    kind = k8s_kind(res.type)
    if kind is None or (kind.group, kind.kind) != ("core", "Service"):
        return []
    spec = _mapping(_get(res.props, "spec"))
    annotations = _annotations(res.props)
    out = []
    if _items(_get(spec, "externalIPs")):
        out.append("spec.externalIPs is not allowed: kube-proxy would capture traffic to those addresses cluster-wide")
    service_type = _get(spec, "type")
    if "type" in list(spec) and service_type is None:
        return out  # unknown during preview
    if kind.patch and service_type is None:
        touched = [f"spec.{key}" for key in _SERVICE_EXPOSURE_FIELDS if key in list(spec)]
        touched += [f"annotation {key}" for key in (INTERNAL_LB_ANNOTATION, AUTH_ANNOTATION) if key in list(annotations)]
        if touched:
            out.append(
                f"a ServicePatch that sets {', '.join(touched)} must also state spec.type: the pack cannot see the "
                "Service it patches, so it cannot tell whether the result is public"
            )
        return out
    if service_type != "LoadBalancer" or annotations.get(INTERNAL_LB_ANNOTATION) == "Internal":
        return out
    ranges = [str(r) for r in _items(_get(spec, "loadBalancerSourceRanges"))]
    if not ranges:
        out.append("public LoadBalancer without spec.loadBalancerSourceRanges is open to the internet; list the client CIDRs")
    out += public_address_space(ranges).problems("spec.loadBalancerSourceRanges")
    auth = annotations.get(AUTH_ANNOTATION)
    if not isinstance(auth, str) or auth.strip().lower() in _NO_AUTH:
        out.append(
            f"public LoadBalancer without authentication: serve it from a server that authenticates clients and mark it "
            f"with the annotation {AUTH_ANNOTATION}: <mechanism> (e.g. api-key, iap), or make it internal "
            f"({INTERNAL_LB_ANNOTATION}: Internal)"
        )
    return out


INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
INTERNAL_INGRESS_CLASS = "gce-internal"
"""GKE's internal Application Load Balancer Ingress class. An Ingress without a class, or of class
``gce``, gets an external one (ingress-gce docs/annotations.md "Ingress Class"; GKE reads the
annotation, not ``spec.ingressClassName``); any other class belongs to another controller whose
exposure the pack cannot see."""
INTERNAL_GATEWAY_CLASSES = frozenset({"gke-l7-rilb", "gke-l7-rilb-mc", "gke-l7-cross-regional-internal-managed-mc"})
"""GKE's internal GatewayClasses (GKE "GatewayClass capabilities"). The external ones
(``gke-l7-global-external-managed``, ``gke-l7-regional-external-managed``, ``gke-l7-gxlb`` and
their ``-mc`` forms) and any class of another controller count as public."""
GATEWAY_GROUP = "gateway.networking.k8s.io"
ROUTE_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"})
_EXPOSE_INSTEAD = (
    "the pack cannot check who reaches a public Ingress or Gateway (its Cloud Armor policy and IAP live in other "
    "objects), so expose a model through a LoadBalancer Service (loadBalancerSourceRanges + the "
    f"{AUTH_ANNOTATION} marker) or keep it internal"
)


def check_ingress_and_gateway(res: Resource) -> list[str]:
    """An Ingress or Gateway is internal (its class says so) or refused; a patch that leaves the
    class out is judged by what it may patch, so it must state the internal class too."""
    kind = k8s_kind(res.type)
    if kind is None:
        return []
    spec = _mapping(_get(res.props, "spec"))
    if kind.kind == "Ingress" and kind.group in ("networking.k8s.io", "extensions"):
        annotated = _annotations(res.props).get(INGRESS_CLASS_ANNOTATION)
        class_name = _get(spec, "ingressClassName")
        if kind.patch and not spec and annotated is None:
            return []  # metadata only (labels): no change to what it exposes
        if annotated == INTERNAL_INGRESS_CLASS and class_name in (None, INTERNAL_INGRESS_CLASS):
            return []
        shown = annotated if annotated is not None else class_name if class_name is not None else "unset (gce)"
        return [
            f"Ingress of class {shown!r} is public: set the annotation {INGRESS_CLASS_ANNOTATION}: "
            f"{INTERNAL_INGRESS_CLASS} for an internal one; {_EXPOSE_INSTEAD}"
        ]
    if kind.kind == "Gateway" and kind.group == GATEWAY_GROUP:
        gateway_class = _get(spec, "gatewayClassName")
        if (kind.patch and not spec) or ("gatewayClassName" in list(spec) and gateway_class is None):
            return []  # metadata only, or a class unknown during preview
        if gateway_class in INTERNAL_GATEWAY_CLASSES:
            return []
        return [
            f"Gateway of class {gateway_class!r} is public (internal classes: {', '.join(sorted(INTERNAL_GATEWAY_CLASSES))}); "
            f"{_EXPOSE_INSTEAD}"
        ]
    return []


def _k8s_name(res: Resource) -> tuple[str, str]:
    metadata = _get(res.props, "metadata")
    return str(_get(metadata, "namespace") or ""), str(_get(metadata, "name") or "")


def check_routes(resources: Sequence[Resource]) -> list[tuple[Resource, str]]:
    """A route (HTTPRoute, GRPCRoute, ...) attaches only to a Gateway of the same stack, which the
    Gateway rule has judged: a Gateway made elsewhere may be public, and the pack cannot see it.
    Routes whose parent is a Service (the GAMMA mesh form) stay in the cluster and pass. A name
    unknown during preview leaves the rule undecided there; the stack is analyzed again after the
    update, with every name known."""
    gateways = set()
    for res in resources:
        kind = k8s_kind(res.type)
        if kind is not None and kind.kind == "Gateway" and kind.group == GATEWAY_GROUP and not kind.patch:
            if not isinstance(_get(_get(res.props, "metadata"), "name"), str):
                return []
            gateways.add(_k8s_name(res))
    out = []
    for res in resources:
        kind = k8s_kind(res.type)
        if kind is None or kind.group != GATEWAY_GROUP or kind.kind not in ROUTE_KINDS:
            continue
        namespace, _ = _k8s_name(res)
        for i, ref in _indexed(_get(_get(res.props, "spec"), "parentRefs")):
            ref_kind = _get(ref, "kind") or "Gateway"
            ref_group = _get(ref, "group")
            if ref_kind != "Gateway" or ref_group not in (None, GATEWAY_GROUP):
                continue
            name = _get(ref, "name")
            if not isinstance(name, str):
                continue  # required by the API; unknown during preview
            target = (str(_get(ref, "namespace") or namespace), name)
            if target not in gateways:
                out.append(
                    (
                        res,
                        f"spec.parentRefs[{i}] attaches {kind.kind} to Gateway {'/'.join(filter(None, target))!r}, "
                        "which this stack does not declare: the pack cannot tell whether it is public; declare the "
                        "Gateway (of an internal class) in the stack",
                    )
                )
    return out


def check_firewall(res: Resource) -> list[str]:
    """A VPC firewall rule that allows ingress admits a bounded public address space, summed like a
    load balancer's. An ingress rule with no source at all applies to 0.0.0.0/0
    (hashicorp/terraform-provider-google#6789), so it is refused too."""
    if res.type != "gcp:compute/firewall:Firewall":
        return []
    props = res.props
    direction = str(_get(props, "direction") or "INGRESS").upper()
    if direction != "INGRESS" or _get(props, "disabled") is True or not _items(_get(props, "allows")):
        return []
    ranges = [str(r) for r in _items(_get(props, "sourceRanges"))]
    if not ranges:
        if _items(_get(props, "sourceTags")) or _items(_get(props, "sourceServiceAccounts")):
            return []  # sources are the VMs with those tags or accounts
        return [
            "an ingress rule without sourceRanges, sourceTags or sourceServiceAccounts applies to 0.0.0.0/0; list the sources"
        ]
    return public_address_space(ranges).problems("sourceRanges")


# --------------------------------------------------------------------------- pod security

PRIVILEGED_TPU_ANNOTATION = "gke-tpu-llm/privileged"
"""Pod annotation that allows ``privileged: true`` on the pod's TPU containers, and nothing else. Set
only by a renderer that must (Saxml's ``modelServerPrivileged``, for clusters older than GKE 1.28,
which expose TPU devices to privileged containers only); value ``PRIVILEGED_TPU_REASON``."""
PRIVILEGED_TPU_REASON = "tpu-device-access"
TPU_RESOURCE = "google.com/tpu"
_POD_LISTS = ("containers", "initContainers", "ephemeralContainers")
_HOST_NAMESPACES = {"hostNetwork": "network", "hostPID": "process", "hostIPC": "IPC"}


def _pod_specs(value: Any, path: str, parent: Any) -> Iterator[tuple[str, Mapping[str, Any], Any]]:
    """Every pod spec in an object, wherever its kind nests it (Deployment, Job, CronJob, JobSet,
    LeaderWorkerSet, RayCluster/RayJob groups, ..., and patches of them): a mapping with a container
    list or a host-namespace field. Yields (path, spec, the mapping holding it: the pod template)."""
    if isinstance(value, Mapping):
        keys = list(value)
        if any(_is_list(_get(value, k)) for k in _POD_LISTS) or any(k in keys for k in _HOST_NAMESPACES):
            yield path, value, parent
    for key, item in _children(value):
        yield from _pod_specs(item, _join(path, key), value)


def _requests_tpu(container: Any) -> bool:
    resources = _get(container, "resources")
    return any(TPU_RESOURCE in list(_mapping(_get(resources, part))) for part in ("limits", "requests"))


def check_pod_security(res: Resource) -> list[str]:
    """No pod shares the node's namespaces, mounts a node path, runs privileged, adds capabilities or
    binds a host port: each gives a container the node (and every pod and credential on it).

    One exception, narrow: ``privileged: true`` on a container that requests TPUs, in a pod whose
    template carries ``PRIVILEGED_TPU_ANNOTATION: PRIVILEGED_TPU_REASON`` (older GKE versions give
    TPU devices to privileged containers only). Host namespaces, host paths and capabilities stay
    refused even then."""
    kind = k8s_kind(res.type)
    if kind is None or res.type in HELM_TYPES or kind.kind == "CustomResourceDefinition":
        return []  # a CRD's schema names these fields without setting them
    out = []
    for path, spec, template in _pod_specs(res.props, "", None):
        where = path or "spec"
        for field, what in _HOST_NAMESPACES.items():
            if _get(spec, field) is True:
                out.append(f"{where}.{field}: true shares the node's {what} namespace with the pod")
        for i, volume in _indexed(_get(spec, "volumes")):
            host_path = _get(volume, "hostPath")
            if host_path is not None:
                out.append(
                    f"{where}.volumes[{i}] ({_get(volume, 'name')}) mounts the node's {_get(host_path, 'path')!r} (hostPath)"
                )
        tpu_reason = _get(_get(_get(template, "metadata"), "annotations"), PRIVILEGED_TPU_ANNOTATION)
        for list_key in _POD_LISTS:
            for i, container in _indexed(_get(spec, list_key)):
                at = f"{where}.{list_key}[{i}] ({_get(container, 'name')})"
                context = _get(container, "securityContext")
                if _get(context, "privileged") is True and not (tpu_reason == PRIVILEGED_TPU_REASON and _requests_tpu(container)):
                    out.append(f"{at} runs privileged")
                added = [str(c) for c in _items(_get(_get(context, "capabilities"), "add"))]
                if added:
                    out.append(f"{at} adds capabilities {', '.join(added)}")
                for port in _items(_get(container, "ports")):
                    if _get(port, "hostPort") not in (None, 0):
                        out.append(f"{at} binds host port {_get(port, 'hostPort')}, which bypasses NetworkPolicies")
    return out


# --------------------------------------------------------------------------- the pack

RULES: tuple[Rule, ...] = (
    Rule(
        "no-unpinned-images",
        "Container images carry a version tag or a digest (Helm values and chart versions included), never a floating tag.",
        "mandatory",
        check_images,
    ),
    Rule(
        "prod-tpu-pools-and-cluster-protected",
        "In prod, TPU node pools and the cluster are protected (no silent replacement or deletion) unless allowed.",
        "mandatory",
        check_prod_protection,
    ),
    Rule(
        "prod-resources-labelled",
        "Every labelled resource of a prod stack carries the app, stack and environment=prod labels.",
        "mandatory",
        check_prod_labels,
    ),
    Rule("bucket-uniform-access-and-pap", "Buckets have uniform access and public-access prevention.", "mandatory", check_bucket),
    Rule(
        "project-iam-allow-listed",
        "Project grants are additive IAMMember grants of allow-listed roles (custom roles included); no storage, "
        "owner or editor role, and nothing granted on a folder or organization.",
        "mandatory",
        check_project_iam,
    ),
    Rule("no-service-account-keys", "No service-account keys or HMAC keys.", "mandatory", check_no_sa_keys),
    Rule("secrets-stay-secret", "Kubernetes Secret values come from Pulumi secrets.", "mandatory", check_secret_values),
    Rule(
        "no-default-compute-service-account",
        "Node pools (and the cluster's default pool and auto-provisioning) run as a dedicated service account.",
        "mandatory",
        check_node_service_account,
    ),
    Rule(
        "public-load-balancers-restricted-and-authenticated",
        "A public LoadBalancer Service (or ServicePatch) admits a bounded, summed set of client CIDRs and carries "
        "the gke-tpu-llm/auth marker; no externalIPs.",
        "mandatory",
        check_public_load_balancer,
    ),
    Rule(
        "no-public-ingress-or-gateway",
        "Ingresses and Gateways (and their patches) are of an internal class.",
        "mandatory",
        check_ingress_and_gateway,
    ),
    Rule(
        "firewall-ingress-restricted",
        "VPC firewall rules allowing ingress admit a bounded, summed set of source CIDRs.",
        "mandatory",
        check_firewall,
    ),
    Rule(
        "pod-security-baseline",
        "No privileged container (TPU exception aside), host network/PID/IPC, hostPath volume, added capability or host "
        "port, in any pod-bearing object or patch.",
        "mandatory",
        check_pod_security,
    ),
)

STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        "routes-attach-to-stack-gateways",
        "Gateway API routes attach only to Gateways the stack declares (which the Gateway rule checks).",
        "mandatory",
        check_routes,
    ),
)


def violations(res: Resource) -> list[tuple[str, str]]:
    """(rule name, message) for every rule ``res`` breaks."""
    return [(rule.name, message) for rule in RULES for message in rule.check(res)]


def stack_violations(resources: Sequence[Resource]) -> list[tuple[str, Resource, str]]:
    """(rule name, offending resource, message) for every stack rule the resources break together."""
    return [(rule.name, res, message) for rule in STACK_RULES for res, message in rule.check(resources)]
