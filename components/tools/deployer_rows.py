"""The deployer's permissions per resource type: :data:`ROWS` has one row per Pulumi resource type
the program can register, with the permissions the provider's create, read, update and delete of it
call, each row with its source. A type a stack registers without a row is an error
(:class:`MissingRowError`), never a silent gap. ``components.tools.roles`` turns a stack's rows into
the smallest cover of predefined roles (``python -m components roles STACK``).

Pure data and pure functions (no ``pulumi`` import). Vendored facts (read 2026-11-24):

* Provider calls: terraform-provider-google-beta, the code behind pulumi-gcp (see
  ``components.tools.replacement`` for the version mapping), file:line per row.
* REST method -> permission: ``iann0036/iam-dataset`` @ 2073fa52ac (2026-08-22) ``gcp/map.json``
  (the first permission of a method; the others it lists apply to ACL projections this program does
  not request), and the GKE page "Kubernetes Engine API and Kubernetes API permissions"
  (cloud.google.com/kubernetes-engine/docs/reference/api-permissions): node pools are created,
  updated and deleted with ``container.clusters.update``, read with ``container.clusters.get``;
  Kubernetes API calls are authorized by IAM as ``container.<resource>.<verb>`` (watch counts as
  list, patch as update), objects of custom resources as ``container.thirdPartyObjects.<verb>``.
* Await: pulumi-kubernetes main@94977969d (after v4.32.0) ``provider/pkg/await``: which other kinds
  the provider watches while it waits for an object to become ready.
* Helm charts: the templates of each controller chart at its newest vendored release, with the
  values this project installs it with (``components.crds.releases``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..crds.releases import CONTROLLERS, CUSTOM_RESOURCES
from .replacement import TF

GKE_API = "cloud.google.com/kubernetes-engine/docs/reference/api-permissions"
IAM_MAP = "iann0036/iam-dataset@2073fa52ac gcp/map.json"
AWAIT = "pulumi-kubernetes main@94977969d provider/pkg/await/"
RBAC_ESCALATION = (
    "kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping: "
    "a role may hold only rules its creator holds through RBAC, and a binding may only bind such a role, "
    "unless the creator may escalate / bind; an identity authorized by IAM holds no RBAC rules"
)


class RolesError(ValueError):
    """A fact this module needs is missing (a row, a chart, a role holding a permission)."""


class MissingRowError(RolesError):
    """A registered resource type has no row in :data:`ROWS`."""

    def __init__(self, types: Iterable[str]) -> None:
        self.types = tuple(sorted(types))
        super().__init__(
            f"no deployer permissions known for resource type(s) {', '.join(self.types)}: add a row to "
            "components/tools/deployer_rows.py (ROWS) with the IAM permissions its provider's create/read/update/delete "
            "call, and its source"
        )


Extra = Callable[[Mapping[str, Any]], Mapping[str, str]]
"""Permissions an instance needs because of its inputs: permission -> why (with source)."""


def _no_extra(inputs: Mapping[str, Any]) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True)
class Row:
    """The permissions the provider's create, read, update and delete of one resource type call."""

    type: str
    create: tuple[str, ...]
    read: tuple[str, ...]
    update: tuple[str, ...]
    delete: tuple[str, ...]
    source: str
    extra: Extra = field(default=_no_extra, compare=False)
    """Input-dependent permissions (e.g. ``storage.objects.delete`` only with ``forceDestroy``)."""
    note: str = ""

    def phases(self) -> dict[str, tuple[str, ...]]:
        return {"create": self.create, "read": self.read, "update": self.update, "delete": self.delete}

    def permissions(self, inputs: Mapping[str, Any], *, retain_on_delete: bool = False) -> dict[str, str]:
        """Permission -> why, for one instance. A retained resource is never deleted by Pulumi
        (``retainOnDelete``: the engine drops it from the state instead), so its delete calls are
        not needed."""
        out: dict[str, str] = {}
        for phase, permissions in self.phases().items():
            if phase == "delete" and retain_on_delete:
                continue
            for permission in permissions:
                out.setdefault(permission, f"{phase} ({self.source})")
        for permission, why in self.extra(inputs).items():
            out.setdefault(permission, why)
        return out


# --- Google Cloud resources -------------------------------------------------------------------

ACT_AS = "iam.serviceAccounts.actAs"


def _principal_member(inputs: Mapping[str, Any]) -> Mapping[str, str]:
    """A ``principal://`` member names the project *number*, which the program reads with the
    ``gcp:organizations/getProject`` invoke (cloudresourcemanager projects.get)."""
    member = str(inputs.get("member", ""))
    if member.startswith(("principal://", "principalSet://")):
        return {
            "resourcemanager.projects.get": "the principal:// member's project number, read with the "
            f"gcp:organizations/getProject invoke ({IAM_MAP}: cloudresourcemanager.projects.get)"
        }
    return {}


def _bucket_force_destroy(inputs: Mapping[str, Any]) -> Mapping[str, str]:
    if inputs.get("forceDestroy"):
        return {
            "storage.objects.delete": "delete with forceDestroy deletes every object first "
            f"({TF}storage/resource_storage_bucket.go:1374 Objects.Delete)"
        }
    return {}


def _iam_member(type_: str, get: str, set_: str, where: str) -> Row:
    """IAM member resources read-modify-write their parent's policy on every phase."""
    calls = (get, set_)
    return Row(
        type_,
        create=calls,
        read=(get,),
        update=calls,
        delete=calls,
        source=f"{TF}{where} (getIamPolicy, then setIamPolicy); {IAM_MAP}",
        extra=_principal_member,
    )


_NP = "container/resource_container_node_pool.go"
_CL = "container/resource_container_cluster.go"
_OP = f"{TF}container/container_operation.go:99 Operations.Get"

GCP_ROWS: tuple[Row, ...] = (
    Row(
        "gcp:container/cluster:Cluster",
        # Create also deletes the default pool (removeDefaultNodePool: NodePools.Delete,
        # container.clusters.update) and applies post-create updates; every call waits on an operation.
        # actAs: GKE checks it on the nodes' service account at clusters.create; with no
        # nodeConfig.serviceAccount that is the Compute Engine default account the short-lived
        # default pool runs as.
        create=(
            "container.clusters.create",
            ACT_AS,
            "container.clusters.get",
            "container.clusters.update",
            "container.operations.get",
        ),
        read=("container.clusters.get",),
        update=("container.clusters.update", "container.operations.get"),
        delete=("container.clusters.delete", "container.operations.get"),
        source=f"{TF}{_CL}:3463 Create, :3519 NodePools.Delete, :3704 Get, :4089 Update; {_OP}; {GKE_API}",
    ),
    Row(
        "gcp:container/nodePool:NodePool",
        # actAs on nodeConfig.serviceAccount (roles/container.admin's description: "To set a service
        # account on nodes, you must also have ... roles/iam.serviceAccountUser").
        create=("container.clusters.update", "container.clusters.get", ACT_AS, "container.operations.get"),
        read=("container.clusters.get",),
        update=("container.clusters.update", "container.operations.get"),
        delete=("container.clusters.update", "container.operations.get"),
        source=f"{TF}{_NP}:879 NodePools.Get, :895 Create, :1122 Delete, :1841-1969 Update/SetSize/SetManagement; "
        f"{_OP}; {GKE_API}",
    ),
    Row(
        "gcp:compute/resourcePolicy:ResourcePolicy",
        create=("compute.resourcePolicies.create", "compute.regionOperations.get"),
        read=("compute.resourcePolicies.get",),
        update=("compute.resourcePolicies.update", "compute.regionOperations.get"),
        delete=("compute.resourcePolicies.delete", "compute.regionOperations.get"),
        source=f"{TF}compute/resource_compute_resource_policy.go:632 POST, :715 GET, :891 PATCH, :955 DELETE; "
        f"compute/compute_operation.go:107 regions/.../operations; {IAM_MAP}",
        note="tpu7x multi-host pools only (their workload policy)",
    ),
    Row(
        "gcp:compute/subnetwork:Subnetwork",
        # Update expands the range (expandIpCidrRange) and PATCHes purpose, role and the rest; each
        # call waits on a region operation. The network is referenced by name only (no call on it).
        create=("compute.subnetworks.create", "compute.regionOperations.get"),
        read=("compute.subnetworks.get",),
        update=(
            "compute.subnetworks.get",
            "compute.subnetworks.update",
            "compute.subnetworks.expandIpCidrRange",
            "compute.regionOperations.get",
        ),
        delete=("compute.subnetworks.delete", "compute.regionOperations.get"),
        source=f"{TF}compute/resource_compute_subnetwork.go:1077 POST, :1160 GET, :1283 POST expandIpCidrRange, "
        f":1420-1825 PATCH, :1884 DELETE; compute/compute_operation.go:107 regions/.../operations; {IAM_MAP} "
        "(compute.subnetworks.insert, .get, .patch, .expandIpCidrRange, .delete)",
        note="a gateway front door's proxy-only subnet, with workload.frontDoor.proxySubnet.create only",
    ),
    Row(
        "gcp:certificatemanager/dnsAuthorization:DnsAuthorization",
        create=("certificatemanager.dnsauthorizations.create", "certificatemanager.operations.get"),
        read=("certificatemanager.dnsauthorizations.get",),
        update=(
            "certificatemanager.dnsauthorizations.get",
            "certificatemanager.dnsauthorizations.update",
            "certificatemanager.operations.get",
        ),
        delete=("certificatemanager.dnsauthorizations.delete", "certificatemanager.operations.get"),
        source=f"{TF}certificatemanager/resource_certificate_manager_dns_authorization.go:324 POST, :407 GET, :562 PATCH, "
        f":627 DELETE (each waits on CertificateManagerOperationWaitTime); {IAM_MAP}",
        note="the public gateway's certificate (workload.frontDoor.exposure: public) only",
    ),
    Row(
        "gcp:certificatemanager/certificate:Certificate",
        # A managed certificate names its DNS authorizations, which Certificate Manager checks the
        # caller may use (certificatemanager.dnsauthorizations.use, held by the roles that create them).
        create=(
            "certificatemanager.certs.create",
            "certificatemanager.dnsauthorizations.use",
            "certificatemanager.operations.get",
        ),
        read=("certificatemanager.certs.get",),
        update=("certificatemanager.certs.get", "certificatemanager.certs.update", "certificatemanager.operations.get"),
        delete=("certificatemanager.certs.delete", "certificatemanager.operations.get"),
        source=f"{TF}certificatemanager/resource_certificate_manager_certificate.go:480 POST, :563 GET, :728 PATCH, "
        f":793 DELETE (each waits on CertificateManagerOperationWaitTime); {IAM_MAP}",
        note="the public gateway's certificate (workload.frontDoor.exposure: public) only",
    ),
    Row(
        "gcp:monitoring/dashboard:Dashboard",
        create=("monitoring.dashboards.create",),
        read=("monitoring.dashboards.get",),
        update=("monitoring.dashboards.get", "monitoring.dashboards.update"),
        delete=("monitoring.dashboards.delete",),
        source=f"{TF}monitoring/resource_monitoring_dashboard.go:148 POST, :185 GET, :246 PATCH, :284 DELETE; {IAM_MAP} "
        "(projects.dashboards.create/get/patch/delete)",
        note="the stack's dashboard (gke-tpu-llm:observability.enabled)",
    ),
    Row(
        "gcp:monitoring/alertPolicy:AlertPolicy",
        create=("monitoring.alertPolicies.create",),
        read=("monitoring.alertPolicies.get",),
        update=("monitoring.alertPolicies.get", "monitoring.alertPolicies.update"),
        delete=("monitoring.alertPolicies.delete",),
        source=f"{TF}monitoring/resource_monitoring_alert_policy.go:1424 POST, :1500 GET, :1723 PATCH, :1790 DELETE; "
        f"{IAM_MAP} (projects.alertPolicies.create/get/patch/delete)",
        note="the stack's alert policies (gke-tpu-llm:observability.enabled)",
    ),
    Row(
        "gcp:storage/bucket:Bucket",
        create=("storage.buckets.create", "storage.buckets.get"),
        read=("storage.buckets.get",),
        update=("storage.buckets.update", "storage.buckets.get"),
        # Delete lists the objects first, and refuses a non-empty bucket without forceDestroy.
        delete=("storage.objects.list", "storage.buckets.delete"),
        source=f"{TF}storage/resource_storage_bucket.go:998 Insert, :1189 Patch, :1253 Get, :1325 Objects.List, "
        f":1392 Delete; {IAM_MAP}",
        extra=_bucket_force_destroy,
    ),
    _iam_member(
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        "storage.buckets.getIamPolicy",
        "storage.buckets.setIamPolicy",
        "storage/iam_storage_bucket.go:124 GET .../iam, :167 PUT .../iam",
    ),
    Row(
        "gcp:serviceaccount/account:Account",
        create=("iam.serviceAccounts.create", "iam.serviceAccounts.get"),
        read=("iam.serviceAccounts.get",),
        update=("iam.serviceAccounts.get", "iam.serviceAccounts.update"),
        delete=("iam.serviceAccounts.delete",),
        source=f"{TF}resourcemanager/resource_google_service_account.go:166 Create, :174 Get, :379 Patch, :316 Delete; {IAM_MAP}",
    ),
    _iam_member(
        "gcp:serviceaccount/iAMMember:IAMMember",
        "iam.serviceAccounts.getIamPolicy",
        "iam.serviceAccounts.setIamPolicy",
        "resourcemanager/iam_service_account.go:85 GetIamPolicy, :110 SetIamPolicy",
    ),
    _iam_member(
        "gcp:projects/iAMMember:IAMMember",
        "resourcemanager.projects.getIamPolicy",
        "resourcemanager.projects.setIamPolicy",
        "resourcemanager/iam_project.go:109 GetIamPolicy, :131 SetIamPolicy",
    ),
    Row(
        "gcp:artifactregistry/repository:Repository",
        # The operation the provider polls needs no permission of its own: roles/artifactregistry.admin,
        # which manages repositories, holds none.
        create=("artifactregistry.repositories.create", "artifactregistry.repositories.get"),
        read=("artifactregistry.repositories.get",),
        update=("artifactregistry.repositories.get", "artifactregistry.repositories.update"),
        delete=("artifactregistry.repositories.delete",),
        source=f"{TF}artifactregistry/resource_artifact_registry_repository.go:1060 POST, :1148 GET, :1391 PATCH, "
        f":1452 DELETE; {IAM_MAP}",
    ),
    _iam_member(
        "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
        "artifactregistry.repositories.getIamPolicy",
        "artifactregistry.repositories.setIamPolicy",
        "artifactregistry/iam_artifact_registry_repository.go:189 getIamPolicy, :235 setIamPolicy",
    ),
)


# --- Kubernetes objects -----------------------------------------------------------------------

VERBS = ("create", "get", "list", "update", "delete")
"""What the provider does to an object: create (or Server-Side Apply, patch -> update), read, watch
while it waits (-> list), update, delete (and watch until it is gone)."""


@dataclass(frozen=True)
class KubeKind:
    """A built-in Kubernetes kind: its GKE IAM resource (``container.<resource>.<verb>``) and the
    other resources the provider watches while it waits for an object of it."""

    resource: str
    awaits: tuple[str, ...] = ()
    await_source: str = ""


KUBE_KINDS: Mapping[tuple[str, str], KubeKind] = {
    ("", "Namespace"): KubeKind("namespaces"),
    ("", "ServiceAccount"): KubeKind("serviceAccounts"),
    ("", "Secret"): KubeKind("secrets"),
    ("", "ConfigMap"): KubeKind("configMaps"),
    ("", "Service"): KubeKind("services", ("endpoints",), f"{AWAIT}service.go:148 endpoints informer"),
    ("apps", "Deployment"): KubeKind(
        "deployments",
        ("replicaSets", "pods", "persistentVolumeClaims"),
        f"{AWAIT}deployment.go:174-195 replicasets, pods, persistentvolumeclaims informers",
    ),
    ("batch", "Job"): KubeKind("jobs", ("pods",), f"{AWAIT}job.go:113 pods informer"),
    ("autoscaling", "HorizontalPodAutoscaler"): KubeKind("horizontalPodAutoscalers"),
    ("networking.k8s.io", "NetworkPolicy"): KubeKind("networkPolicies"),
    ("policy", "PodDisruptionBudget"): KubeKind("podDisruptionBudgets"),
    ("rbac.authorization.k8s.io", "ClusterRole"): KubeKind("clusterRoles"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): KubeKind("clusterRoleBindings"),
    ("rbac.authorization.k8s.io", "Role"): KubeKind("roles"),
    ("rbac.authorization.k8s.io", "RoleBinding"): KubeKind("roleBindings"),
    ("apiregistration.k8s.io", "APIService"): KubeKind("apiServices"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): KubeKind("customResourceDefinitions"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): KubeKind("mutatingWebhookConfigurations"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): KubeKind("validatingWebhookConfigurations"),
}
"""Built-in kinds the program registers or a controller chart installs, keyed by (API group, kind)."""

CUSTOM_OBJECTS = "thirdPartyObjects"
"""GKE's IAM resource for objects of every custom resource kind."""

CLUSTER_AUTH = "container.clusters.get"
"""What an identity needs to authenticate to a cluster's API at all (roles/container.clusterViewer
"allows the service account to authenticate on the cluster, but do nothing else":
cloud.google.com/deploy/docs/securing/sa-by-namespace)."""


def _kube_phases(kind: tuple[str, str]) -> dict[str, tuple[str, ...]]:
    """Create and update also watch the object (and, while waiting, the kinds its awaiter watches);
    delete watches it until it is gone. Writing a (Cluster)Role needs ``escalate`` as well."""
    spec = KUBE_KINDS[kind]
    own = f"container.{spec.resource}"
    waits = (f"{own}.list", *(f"container.{other}.list" for other in spec.awaits))
    escalate = (f"{own}.escalate",) if spec.resource in ("roles", "clusterRoles") else ()
    return {
        "create": (CLUSTER_AUTH, f"{own}.create", f"{own}.get", *waits, *escalate),
        "read": (CLUSTER_AUTH, f"{own}.get"),
        "update": (CLUSTER_AUTH, f"{own}.update", f"{own}.get", *waits, *escalate),
        "delete": (CLUSTER_AUTH, f"{own}.delete", f"{own}.list"),
    }


def _kube_permissions(kind: tuple[str, str]) -> tuple[str, ...]:
    """Every permission of every phase for objects of ``kind`` (what a Helm release of them needs)."""
    return tuple(dict.fromkeys(p for phase in _kube_phases(kind).values() for p in phase))


def _role_ref_bind(inputs: Mapping[str, Any]) -> Mapping[str, str]:
    """A (Cluster)RoleBinding needs ``bind`` on the role it references (RBAC escalation check)."""
    ref = inputs.get("roleRef") or {}
    resource = "clusterRoles" if ref.get("kind") == "ClusterRole" else "roles"
    return {f"container.{resource}.bind": f"binds {ref.get('kind', 'Role')} {ref.get('name', '?')} ({RBAC_ESCALATION})"}


def _kube_row(token: str, kind: tuple[str, str]) -> Row:
    spec = KUBE_KINDS[kind]
    phases = _kube_phases(kind)
    return Row(
        token,
        create=phases["create"],
        read=phases["read"],
        update=phases["update"],
        delete=phases["delete"],
        source=f"{GKE_API} (container.{spec.resource}.*)" + (f"; {spec.await_source}" if spec.awaits else ""),
        extra=_role_ref_bind if spec.resource in ("roleBindings", "clusterRoleBindings") else _no_extra,
    )


def _custom_object_row(token: str) -> Row:
    def verbs(*names: str) -> tuple[str, ...]:
        return (CLUSTER_AUTH, *(f"container.{CUSTOM_OBJECTS}.{verb}" for verb in names))

    return Row(
        token,
        create=verbs("create", "list"),
        read=verbs("get"),
        update=verbs("update", "get", "list"),
        delete=verbs("delete", "list"),
        source=f"{GKE_API} (POST/GET/PATCH/DELETE /apis/{{path_to_custom_resource}}: container.thirdPartyObjects.*)",
    )


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"

HELM_CHART_KINDS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "lws": (
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Service"),
        ("", "ServiceAccount"),
        ("apps", "Deployment"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ),
    "jobset": (
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Service"),
        ("", "ServiceAccount"),
        ("apps", "Deployment"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ),
    "kueue": (
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Service"),
        ("", "ServiceAccount"),
        ("apps", "Deployment"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
    ),
}
"""The kinds each controller chart installs with the chart's defaults (cert-manager, Prometheus,
KueueViz, visibility APF and PodDisruptionBudgets off) and this project's values: the ``kind:`` of
every template under ``charts/<chart>/templates`` not guarded off by those defaults, at
kubernetes-sigs/lws v0.10.0, kubernetes-sigs/jobset v0.12.0 and kubernetes-sigs/kueue v0.19.2."""

HELM_STORAGE = ("", "Secret")
"""Helm keeps each release revision in a Secret of the release namespace (the default ``secret``
storage driver; helm.sh/docs/topics/advanced/#storage-backends)."""


def _chart_controller(chart: str) -> str:
    for name, controller in CONTROLLERS.items():
        if controller.chart.chart == chart:
            return name
    raise RolesError(
        f"Helm chart {chart!r} is not a controller of components/crds/releases.py; its kinds are unknown: "
        "add the controller there and its chart's kinds to HELM_CHART_KINDS in components/tools/deployer_rows.py"
    )


def _helm_release(inputs: Mapping[str, Any]) -> Mapping[str, str]:
    """Everything the chart installs, Helm's release Secrets, its namespace (``createNamespace``) and
    the wait for its Deployments (``skipAwait: false``)."""
    controller = _chart_controller(str(inputs.get("chart", "")))
    if controller not in HELM_CHART_KINDS:
        raise RolesError(f"controller {controller!r} has no HELM_CHART_KINDS entry in components/tools/deployer_rows.py")
    out: dict[str, str] = {}
    for kind in (*HELM_CHART_KINDS[controller], HELM_STORAGE):
        for permission in _kube_permissions(kind):
            out.setdefault(permission, f"Helm release {controller}: {kind[1]} (its chart's templates; {GKE_API})")
    if inputs.get("createNamespace"):
        for verb in ("create", "get"):
            out.setdefault(f"container.namespaces.{verb}", f"Helm release {controller}: createNamespace")
    # A RoleBinding or ClusterRoleBinding in the chart binds the chart's own roles.
    out.setdefault("container.clusterRoles.bind", f"Helm release {controller}: its ClusterRoleBindings ({RBAC_ESCALATION})")
    out.setdefault("container.roles.bind", f"Helm release {controller}: its RoleBindings ({RBAC_ESCALATION})")
    if not inputs.get("skipAwait"):
        for other in KUBE_KINDS[("apps", "Deployment")].awaits:
            out.setdefault(
                f"container.{other}.list",
                f"Helm release {controller}: waits for its Deployments "
                f"(pulumi-kubernetes provider/pkg/provider/helm_release.go:608 client.Wait = !skipAwait)",
            )
    return out


KUBE_ROWS: tuple[Row, ...] = (
    *(
        _kube_row(f"kubernetes:{group or 'core'}/{version}:{kind}", (group, kind))
        for (group, kind), version in (
            (("", "Namespace"), "v1"),
            (("", "ServiceAccount"), "v1"),
            (("", "Secret"), "v1"),
            (("", "ConfigMap"), "v1"),
            (("", "Service"), "v1"),
            (("apps", "Deployment"), "v1"),
            (("batch", "Job"), "v1"),
            (("autoscaling", "HorizontalPodAutoscaler"), "v2"),
            (("networking.k8s.io", "NetworkPolicy"), "v1"),
            (("rbac.authorization.k8s.io", "ClusterRole"), "v1"),
            (("rbac.authorization.k8s.io", "ClusterRoleBinding"), "v1"),
            (("rbac.authorization.k8s.io", "Role"), "v1"),
            (("rbac.authorization.k8s.io", "RoleBinding"), "v1"),
            (("apiregistration.k8s.io", "APIService"), "v1"),
        )
    ),
    # Always sent as a Server-Side Apply patch (creates a missing CRD, adopts an existing one).
    _kube_row(
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch",
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ),
    # Every custom resource a controller release or GKE declares (crds/releases.py: CONTROLLERS and MANAGED,
    # the gateway front door's kinds included).
    *(_custom_object_row(f"kubernetes:{api_version}:{kind}") for api_version, kind in CUSTOM_RESOURCES),
    Row(
        HELM_RELEASE,
        create=(CLUSTER_AUTH,),
        read=(CLUSTER_AUTH,),
        update=(CLUSTER_AUTH,),
        delete=(CLUSTER_AUTH,),
        source=f"pulumi-kubernetes provider/pkg/provider/helm_release.go (createNamespace, skipAwait); {GKE_API}",
        extra=_helm_release,
        note="the chart's kinds: HELM_CHART_KINDS",
    ),
    # The provider resource itself calls nothing; the objects it manages authenticate with the cluster.
    Row(
        "pulumi:providers:kubernetes",
        create=(CLUSTER_AUTH,),
        read=(CLUSTER_AUTH,),
        update=(CLUSTER_AUTH,),
        delete=(),
        source="cloud.google.com/deploy/docs/securing/sa-by-namespace (container.clusters.get authenticates to the cluster)",
    ),
)

ROWS: Mapping[str, Row] = {row.type: row for row in (*GCP_ROWS, *KUBE_ROWS)}
"""One row per Pulumi resource type the program can register."""


def permissions_of(resource: Mapping[str, Any]) -> dict[str, str]:
    """Permission -> why for one registration (a ``plan --json`` resource: type, inputs, options)."""
    row = ROWS.get(resource["type"])
    if row is None:
        raise MissingRowError([resource["type"]])
    options = resource.get("options") or {}
    return row.permissions(resource.get("inputs") or {}, retain_on_delete=bool(options.get("retainOnDelete")))


def registered(resources: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The registrations that call a provider: custom resources (components call nothing)."""
    return [r for r in resources if r.get("custom", True)]
