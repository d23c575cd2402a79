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

The resource model and the property helpers are in ``resource_props``; the rules on what a stack
exposes (load balancers, firewalls, Ingresses, Gateways, routes) in ``exposure_checks``. Imports
nothing outside the standard library but ``components.catalog.pinning`` (a leaf) and those two: the
pack runs in its own virtualenv, which holds only pulumi-policy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..catalog.images import DIGEST
from ..catalog.pinning import image_problem, tag_problem
from ..catalog.tpu import TPU_RESOURCE
from .exposure_checks import (
    check_firewall,
    check_ingress_and_gateway,
    check_public_gateway_iap,
    check_public_load_balancer,
    check_routes,
)
from .resource_props import (
    Resource,
    Rule,
    StackRule,
    as_mapping,
    children,
    get,
    indexed,
    is_list,
    join_path,
    k8s_kind,
    known_items,
    walk,
)

ALLOW_REPLACE_LABEL = "gke-tpu-llm-allow-replace"
"""GCP label a prod stack sets (through ``gke-tpu-llm:allowReplace``) on a resource it may replace."""

PROD = "prod"
REQUIRED_LABELS: Mapping[str, str | None] = {"app": "gke-tpu-llm", "stack": None, "environment": PROD}
"""Labels every labelled resource of a prod stack carries (``StackConfig.labels``): key -> the
value it must have (None: any non-empty value)."""


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
    reference = get(image, "reference")
    if isinstance(reference, str):
        problem = image_problem(reference)
        return f"image {reference!r} {problem}" if problem else None
    repository = "/".join(str(get(image, key)) for key in ("registry", "repository") if isinstance(get(image, key), str))
    digest = get(image, "digest")
    if isinstance(digest, str) and digest.strip():
        return None if DIGEST.match(digest.strip()) else f"image digest {digest!r} is not sha256:<64 hex digits>"
    tag = get(image, "tag")
    tag = "" if tag is None else str(tag).strip()  # YAML reads `tag: 1.10` as a number
    shown = f"{repository or '<chart default>'}:{tag}"
    if "@" in tag:
        return None if DIGEST.match(tag.split("@", 1)[1]) else f"image {shown!r} has a malformed digest"
    if tag:
        problem = tag_problem(tag)
        return f"image {shown!r} {problem}" if problem else None
    if repository or isinstance(get(image, "name"), str):
        return "sets the image repository but no tag or digest, so the chart's default tag applies to another image"
    return None  # pull policy or pull secrets only: the chart's own pinned image


def check_images(res: Resource) -> list[str]:
    if not res.type.startswith("kubernetes:"):
        return []
    helm = res.type in HELM_TYPES
    out = []
    for path, value in walk(get(res.props, "values"), "values") if helm else walk(res.props):
        key = path.rsplit(".", 1)[-1]
        if isinstance(value, str) and _is_image_key(key):
            problem = image_problem(value)
            if problem:
                out.append(f"{path}: image {value!r} {problem}; pin a version tag or a digest")
        # Helm charts name their images {repository, tag} under keys of their own choosing.
        elif isinstance(value, Mapping) and (_is_image_key(key) or (helm and isinstance(get(value, "repository"), str))):
            problem = _image_map_problem(value)
            if problem:
                out.append(f"{path}: {problem}; pin a version tag or a digest")
    if helm:
        chart = str(get(res.props, "chart") or "")
        version = get(res.props, "version")
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
    "gcp:certificatemanager/certificate:Certificate": ("labels",),
    "gcp:certificatemanager/dnsAuthorization:DnsAuthorization": ("labels",),
}
"""GCP resource types the project registers that carry labels, and where (a test holds every stack's
labelled resources to this table)."""


def _labels(res: Resource) -> Mapping[str, Any]:
    value: Any = res.props
    for key in LABELLED_TYPES.get(res.type, ()):
        value = get(value, key)
    return as_mapping(value)


def is_prod(res: Resource) -> bool:
    """A resource of a prod stack, or one labelled prod (a prod stack whose resource lost its label
    is still prod: the stack's configuration says so)."""
    return res.environment == PROD or _labels(res).get("environment") == PROD


def _is_tpu_pool(res: Resource) -> bool:
    machine = str(get(get(res.props, "nodeConfig"), "machineType") or "")
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
            for b in (bindings if is_list(bindings) else ())
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
        pools = list(pools) if is_list(pools) else []
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


# --------------------------------------------------------------------------- pod security

PRIVILEGED_TPU_ANNOTATION = "gke-tpu-llm/privileged"
"""Pod annotation that allows ``privileged: true`` on the pod's TPU containers, and nothing else. Set
only by a renderer that must (Saxml's ``modelServerPrivileged``, for clusters older than GKE 1.28,
which expose TPU devices to privileged containers only); value ``PRIVILEGED_TPU_REASON``."""
PRIVILEGED_TPU_REASON = "tpu-device-access"
_POD_LISTS = ("containers", "initContainers", "ephemeralContainers")
_HOST_NAMESPACES = {"hostNetwork": "network", "hostPID": "process", "hostIPC": "IPC"}


def _pod_specs(value: Any, path: str, parent: Any) -> Iterator[tuple[str, Mapping[str, Any], Any]]:
    """Every pod spec in an object, wherever its kind nests it (Deployment, Job, CronJob, JobSet,
    LeaderWorkerSet, RayCluster/RayJob groups, ..., and patches of them): a mapping with a container
    list or a host-namespace field. Yields (path, spec, the mapping holding it: the pod template)."""
    if isinstance(value, Mapping):
        keys = list(value)
        if any(is_list(get(value, k)) for k in _POD_LISTS) or any(k in keys for k in _HOST_NAMESPACES):
            yield path, value, parent
    for key, item in children(value):
        yield from _pod_specs(item, join_path(path, key), value)


def _requests_tpu(container: Any) -> bool:
    resources = get(container, "resources")
    return any(TPU_RESOURCE in list(as_mapping(get(resources, part))) for part in ("limits", "requests"))


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
            if get(spec, field) is True:
                out.append(f"{where}.{field}: true shares the node's {what} namespace with the pod")
        for i, volume in indexed(get(spec, "volumes")):
            host_path = get(volume, "hostPath")
            if host_path is not None:
                out.append(
                    f"{where}.volumes[{i}] ({get(volume, 'name')}) mounts the node's {get(host_path, 'path')!r} (hostPath)"
                )
        tpu_reason = get(get(get(template, "metadata"), "annotations"), PRIVILEGED_TPU_ANNOTATION)
        for list_key in _POD_LISTS:
            for i, container in indexed(get(spec, list_key)):
                at = f"{where}.{list_key}[{i}] ({get(container, 'name')})"
                context = get(container, "securityContext")
                if get(context, "privileged") is True and not (tpu_reason == PRIVILEGED_TPU_REASON and _requests_tpu(container)):
                    out.append(f"{at} runs privileged")
                added = [str(c) for c in known_items(get(get(context, "capabilities"), "add"))]
                if added:
                    out.append(f"{at} adds capabilities {', '.join(added)}")
                for port in known_items(get(container, "ports")):
                    if get(port, "hostPort") not in (None, 0):
                        out.append(f"{at} binds host port {get(port, 'hostPort')}, which bypasses NetworkPolicies")
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
        "Ingresses (and their patches) are of an internal class; so are Gateways, except GKE external ones that "
        "serve HTTPS only and take routes from their own namespace (their backends must be behind IAP).",
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

AVAILABILITY_ALERT = ("gke-tpu-llm-alert", "availability")
"""User label of the stack's "no ready serving endpoint" alert policy (components/render/dashboards.py)."""
_NOT_SERVING_NAMESPACES = frozenset({"custom-metrics", "kube-system"})  # cluster add-ons' Services


def _serves(res: Resource) -> bool:
    """A model endpoint: a Gateway, or a Service with a cluster address outside the add-ons' namespaces
    (headless Services only name pods of a job)."""
    kind = k8s_kind(res.type)
    if kind is None or kind.kind not in ("Gateway", "Service"):
        return False
    if kind.kind == "Gateway":
        return True
    namespace = get(get(res.props, "metadata"), "namespace")
    return namespace not in _NOT_SERVING_NAMESPACES and get(get(res.props, "spec"), "clusterIP") != "None"


def check_prod_availability_alert(resources: Sequence[Resource]) -> list[tuple[Resource, str]]:
    """A prod stack that serves has an enabled alert policy labelled as its availability alert."""
    serving = [r for r in resources if _serves(r) and is_prod(r)]
    if not serving:
        return []
    key, value = AVAILABILITY_ALERT
    for res in resources:
        if res.type == "gcp:monitoring/alertPolicy:AlertPolicy" and res.props.get("enabled") is not False:
            if as_mapping(res.props.get("userLabels")).get(key) == value:
                return []
    return [
        (
            serving[0],
            f"a prod serving stack needs its availability alert (an enabled AlertPolicy labelled {key}={value}): keep "
            "gke-tpu-llm:observability.enabled on",
        )
    ]


STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        "routes-attach-to-stack-gateways",
        "Gateway API routes attach only to Gateways the stack declares (which the Gateway rule checks).",
        "mandatory",
        check_routes,
    ),
    StackRule(
        "public-gateways-behind-iap",
        "Every backend a route of a public GKE Gateway reaches is behind Identity-Aware Proxy (GCPBackendPolicy "
        "default.iap enabled with an OAuth client id and secret), and no policy on it switches IAP off.",
        "mandatory",
        check_public_gateway_iap,
    ),
    StackRule(
        "prod-serving-availability-alert",
        "A prod stack that serves a model has an enabled Cloud Monitoring alert policy for 'no ready serving endpoint'.",
        "mandatory",
        check_prod_availability_alert,
    ),
)


def violations(res: Resource) -> list[tuple[str, str]]:
    """(rule name, message) for every rule ``res`` breaks."""
    return [(rule.name, message) for rule in RULES for message in rule.check(res)]


def stack_violations(resources: Sequence[Resource]) -> list[tuple[str, Resource, str]]:
    """(rule name, offending resource, message) for every stack rule the resources break together."""
    return [(rule.name, res, message) for rule in STACK_RULES for res, message in rule.check(resources)]
