"""Which input changes make a provider *replace* a resource instead of updating it in place.

Pure data and pure functions (no ``pulumi`` import): the step predictor and the review checks ask
``replacing_paths(type_token, changed_paths)`` which of a resource's changed wire-input paths force a
replacement, so a risky change (a lost TPU slice, a recreated bucket) is caught before ``pulumi up``.

Vendored facts, read 2026-11-23 from the upstream sources (repo @ commit, path:line):

* pulumi-gcp 10.2.0 bridges terraform-provider-google-beta 8.x (pulumi-gcp ``provider/go.mod``
  replaces google-beta with ``../upstream``; pulumi-gcp 9.35.0 = google-beta v7.45.0, and the 10.x
  SDK no longer has the resources TF 8.0.0 removed, e.g. ``gcp.iap.Brand``). The stored google-beta
  snapshot is main @ 93c65b2d60 (2026-08-21, right after "Merge feature branch major release 8.0.0");
  the exact 8.x tag behind 10.2.0 was not in the store. Every ForceNew below is identical at tag
  v7.45.0 and at that commit, so the minor-version gap does not change these rules.
* ForceNew semantics (terraform-plugin-sdk v2 ``schemaMap.diffList``): ForceNew on a nested block
  (TypeList of Resource, e.g. ``placement_policy``) marks only the block's element *count* RequiresNew;
  a changed field inside the block replaces only if that field is ForceNew itself. Pulumi behaves the
  same (pulumi/pulumi-terraform-bridge#2753, closed "by design"). Such blocks are ``block=True`` rules.
* pulumi-kubernetes: main @ 94977969d (2026-07-01, after v4.32.0; 4.33/4.34 were not in the store):
  ``provider/pkg/provider/diff.go`` (per-GVK force-new table), ``provider.go`` (``Diff``: name and
  namespace always force new; ``DiffConfig``), ``helm_release.go`` (Release: ``.name``, ``.namespace``).
* pulumi engine: pulumi/pulumi main @ 1b5949891b (2026-08-21) ``pkg/resource/deploy/step_generator.go``
  ``providerChanged``: a resource whose provider is replaced is itself replaced (ReplaceKeys
  ``provider``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TF = "terraform-provider-google-beta main@93c65b2d60 (8.0.0; same at v7.45.0) google-beta/services/"
K8S = "pulumi-kubernetes main@94977969d (after v4.32.0) provider/pkg/provider/"
ENGINE = "pulumi/pulumi main@1b5949891b pkg/resource/deploy/step_generator.go"

NOT_SET = "not set by this program"
"""``note`` of a rule whose path no stack's program sets today (kept so a later use is caught)."""


@dataclass(frozen=True)
class ReplaceRule:
    """One input path whose change makes the provider replace the resource."""

    path: str
    """Wire input path (camelCase, dotted through objects; a list is a leaf), e.g. ``placementPolicy``."""
    source: str
    """Where the fact comes from: upstream repo, commit/version, file:line, attribute."""
    block: bool = False
    """Terraform ForceNew *block*: only adding or removing the whole block (this path itself, or an
    ancestor, reported as changed) replaces; a change to a field inside it does not, unless that
    field has a rule of its own."""
    note: str = ""
    """Why a stack's plan may not contain this path (``NOT_SET``, or the condition that sets it)."""


def _tf(path: str, where: str, attr: str, *, block: bool = False, note: str = "") -> ReplaceRule:
    return ReplaceRule(path, f"{TF}{where}: {attr} ForceNew", block, note)


def _k8s(path: str, where: str, note: str = "") -> ReplaceRule:
    return ReplaceRule(path, f"{K8S}{where}", note=note)


_NP = "container/resource_container_node_pool.go"
_NC = "container/node_config.go (schemaNodeConfig)"
_CL = "container/resource_container_cluster.go"
_IAM = "../tpgiamresource/resource_iam_member.go IamMemberBaseSchema"


def _iam_member(parent: tuple[ReplaceRule, ...]) -> tuple[ReplaceRule, ...]:
    """IAM member resources have no Update: their parent id, role, member and condition all replace."""
    return (
        *parent,
        _tf("role", f"{_IAM}:64", "role"),
        _tf("member", f"{_IAM}:69", "member"),
        # The condition block and all its fields (expression, title, description) are ForceNew.
        _tf("condition", f"{_IAM}:76", "condition (and .expression/.title/.description)", note=NOT_SET),
    )


NODE_POOL_RULES: tuple[ReplaceRule, ...] = (
    _tf("name", f"{_NP}:527", "name"),
    _tf("namePrefix", f"{_NP}:535", "name_prefix", note=NOT_SET),
    _tf("cluster", f"{_NP}:246", "cluster"),
    _tf("location", f"{_NP}:252", "location"),
    _tf("project", f"{_NP}:239", "project"),
    _tf("initialNodeCount", f"{_NP}:480", "initial_node_count", note="set only for autoscaled (single-host) pools"),
    _tf("maxPodsPerNode", f"{_NP}:427", "max_pods_per_node", note=NOT_SET),
    # Adding or removing placement_policy (single-host <-> multi-host) replaces; type and
    # tpu_topology are NOT ForceNew and the provider's Update never sends them: a tpuTopology change
    # alone is an in-place "update" that changes nothing in GKE.
    _tf("placementPolicy", f"{_NP}:381", "placement_policy (block; type, tpu_topology not ForceNew)", block=True),
    _tf(
        "placementPolicy.policyName",
        f"{_NP}:394",
        "placement_policy.policy_name",
        note="set only for tpu7x multi-host pools (their workload policy; components/platform/tpu_pool.py)",
    ),
    # The block and its one field (.enabled, :417) are both ForceNew: any change replaces the pool.
    _tf(
        "queuedProvisioning",
        f"{_NP}:409",
        "queued_provisioning (block; .enabled ForceNew)",
        note="set only for a queuedProvisioning capacity tier",
    ),
    # node_config is a ForceNew block but Optional+Computed: state always holds one element, so its
    # count never changes; only the ForceNew fields inside it replace. machine_type, disk_size_gb,
    # disk_type, resource_labels, labels, taint, workload_metadata_config are updated in place
    # (node_config.go nodePoolNodeConfigUpdate).
    _tf("nodeConfig.spot", f"{_NC}:635", "node_config.spot", note="set only for a spot capacity tier"),
    # DWS capacity: a tier changing to or from flex-start / queued provisioning, or a changed
    # maxRunHours, replaces its pool (its nodes are DWS VMs from creation).
    _tf(
        "nodeConfig.flexStart",
        f"{_NC}:1493",
        "node_config.flex_start",
        note="set only for flexStart and queuedProvisioning capacity tiers",
    ),
    _tf(
        "nodeConfig.maxRunDuration",
        f"{_NC}:1487",
        "node_config.max_run_duration",
        note="set only for a flexStart/queuedProvisioning tier with maxRunHours",
    ),
    _tf("nodeConfig.preemptible", f"{_NC}:595", "node_config.preemptible", note=NOT_SET),
    # Every pool runs as the stack's node account (components/platform/identity.py); moving pools onto it
    # replaced each of them once (components/README-security.md: Identity).
    _tf("nodeConfig.serviceAccount", f"{_NC}:643", "node_config.service_account"),
    _tf("nodeConfig.oauthScopes", f"{_NC}:579", "node_config.oauth_scopes (set of strings)"),
    _tf("nodeConfig.metadata", f"{_NC}:562", "node_config.metadata", note=NOT_SET),
    _tf("nodeConfig.minCpuPlatform", f"{_NC}:571", "node_config.min_cpu_platform", note=NOT_SET),
    _tf("nodeConfig.localSsdCount", f"{_NC}:438", "node_config.local_ssd_count", note=NOT_SET),
    _tf("nodeConfig.guestAccelerators", f"{_NC}:316", "node_config.guest_accelerator", note=NOT_SET),
    _tf("nodeConfig.bootDiskKmsKey", f"{_NC}:787", "node_config.boot_disk_kms_key", note=NOT_SET),
    # reservation_affinity: the block and all three fields are ForceNew.
    _tf(
        "nodeConfig.reservationAffinity",
        f"{_NC}:602",
        "node_config.reservation_affinity (+ consume_reservation_type, key, values)",
        note="set only for reservation tiers (SPECIFIC_RESERVATION) and flexStart/queuedProvisioning tiers (NO_RESERVATION)",
    ),
    _tf(
        "nodeConfig.advancedMachineFeatures",
        f"{_NC}:1307",
        "node_config.advanced_machine_features (block)",
        block=True,
        note="set only when tpu.threadsPerCore",
    ),
    _tf(
        "nodeConfig.advancedMachineFeatures.threadsPerCore",
        f"{_NC}:1315",
        "node_config.advanced_machine_features.threads_per_core",
        note="set only when tpu.threadsPerCore",
    ),
    _tf(
        "nodeConfig.advancedMachineFeatures.enableNestedVirtualization",
        f"{_NC}:1321",
        "node_config.advanced_machine_features.enable_nested_virtualization",
        note=NOT_SET,
    ),
)

CLUSTER_RULES: tuple[ReplaceRule, ...] = (
    _tf("name", f"{_CL}:295", "name"),
    _tf("location", f"{_CL}:328", "location"),
    _tf("project", f"{_CL}:2020", "project"),
    _tf("initialNodeCount", f"{_CL}:1232", "initial_node_count", note="in ignoreChanges (components/platform/gke.py)"),
    _tf("network", f"{_CL}:1814", "network", note=NOT_SET),
    _tf("subnetwork", f"{_CL}:2028", "subnetwork", note=NOT_SET),
    _tf("ipAllocationPolicy", f"{_CL}:2061", "ip_allocation_policy", note=NOT_SET),
    _tf("networkingMode", f"{_CL}:2232", "networking_mode", note=NOT_SET),
    _tf("clusterIpv4Cidr", f"{_CL}:1066", "cluster_ipv4_cidr", note=NOT_SET),
    _tf("defaultMaxPodsPerNode", f"{_CL}:2424", "default_max_pods_per_node", note=NOT_SET),
    # Set to ADVANCED_DATAPATH by cluster.dataplane: v2 (the default); cluster.dataplane: legacy leaves it
    # unset, so an existing cluster keeps its dataplane (Optional+Computed: unset is no diff).
    _tf("datapathProvider", f"{_CL}:2626", "datapath_provider", note="unset with cluster.dataplane: legacy"),
    _tf("enableAutopilot", f"{_CL}:1190", "enable_autopilot", note=NOT_SET),
    _tf("enableTpu", f"{_CL}:1135", "enable_tpu", note=NOT_SET),
    _tf("enableKubernetesAlpha", f"{_CL}:1110", "enable_kubernetes_alpha", note=NOT_SET),
    _tf("description", f"{_CL}:1076", "description", note=NOT_SET),
    # nodeConfig (the default pool's) is schemaNodeConfig: its ForceNew fields replace the cluster;
    # the program ignores nodeConfig after creation (components/platform/gke.py), so none reach the provider.
    _tf("nodeConfig.oauthScopes", f"{_NC}:579", "node_config.oauth_scopes", note="nodeConfig is in ignoreChanges"),
    _tf("nodeConfig.serviceAccount", f"{_NC}:643", "node_config.service_account", note="nodeConfig is in ignoreChanges"),
)
# Updated in place (no ForceNew): deletion_protection, remove_default_node_pool, release_channel,
# addons_config (http_load_balancing :359 too), monitoring_config, workload_identity_config, resource_labels,
# min_master_version, network_policy (_CL:1823; SetNetworkPolicy at _CL:4768, after the addons_config
# update at _CL:4158), gateway_api_config (_CL:2774 Optional+Computed, UpdateClusterRequest
# DesiredGatewayApiConfig at _CL:5469: a stack moving to a gateway front door keeps its cluster), pod_autoscaling
# (_CL:1922 Optional+Computed, no ForceNew; UpdateClusterRequest DesiredPodAutoscaling at _CL:5192: the HPA
# performance profile AutoscalingMetric needs is switched on in place).

_SN = "compute/resource_compute_subnetwork.go"
SUBNETWORK_RULES: tuple[ReplaceRule, ...] = (
    _tf("name", f"{_SN}:547", "name"),
    _tf("network", f"{_SN}:560", "network"),
    _tf("region", f"{_SN}:748", "region"),
    _tf("project", f"{_SN}:903", "project"),
    _tf("description", f"{_SN}:577", "description"),
    # CustomizeDiff ForceNewIfChange("ip_cidr_range", IsShrinkageIpCidr) (:512, :63): a range that still
    # holds the old one is expanded in place (expandIpCidrRange, :1259); any other change replaces. Kept
    # as a plain rule, so the review flags an expansion too (conservative).
    ReplaceRule("ipCidrRange", f"{TF}{_SN}:512 CustomizeDiff ForceNewIfChange(ip_cidr_range, IsShrinkageIpCidr)"),
    _tf("reservedInternalRange", f"{_SN}:755", "reserved_internal_range", note=NOT_SET),
    _tf("externalIpv6Prefix", f"{_SN}:586", "external_ipv6_prefix", note=NOT_SET),
    _tf("internalIpv6Prefix", f"{_SN}:593", "internal_ipv6_prefix", note=NOT_SET),
)
# The proxy-only subnet a gateway front door may create (components/platform/addons/inference_gateway.py):
# purpose and role are updated in place (PATCH at :1509 and :1577, d.HasChange), as are
# private_ip_google_access and log_config.

BUCKET_RULES: tuple[ReplaceRule, ...] = (
    _tf("name", "storage/resource_storage_bucket.go:132", "name"),
    _tf("location", "storage/resource_storage_bucket.go:193", "location"),
    _tf("project", "storage/resource_storage_bucket.go:203", "project"),
    _tf("enableObjectRetention", "storage/resource_storage_bucket.go:372", "enable_object_retention", note=NOT_SET),
    _tf(
        "customPlacementConfig.dataLocations",
        "storage/resource_storage_bucket.go:573",
        "custom_placement_config.data_locations",
        note=NOT_SET,
    ),
    # Set on the multi-tier checkpointing backup bucket (GKE requires a hierarchical namespace there).
    _tf("hierarchicalNamespace", "storage/resource_storage_bucket.go:624", "hierarchical_namespace (+ .enabled)"),
)
# Updated in place: storage_class, labels, versioning, uniform_bucket_level_access,
# public_access_prevention, force_destroy (and retention_policy, except un-locking a locked policy:
# customdiff.ForceNewIfChange("retention_policy.0.is_locked") at resource_storage_bucket.go:80).

_AR = "artifactregistry/resource_artifact_registry_repository.go"
_AR_IAM = "artifactregistry/iam_artifact_registry_repository.go ArtifactRegistryRepositoryIamSchema"

_RP = "compute/resource_compute_resource_policy.go (read at v7.45.0)"
RESOURCE_POLICY_RULES: tuple[ReplaceRule, ...] = (
    _tf("region", f"{_RP}:295", "region"),
    _tf("project", f"{_RP}:507", "project"),
    _tf("workloadPolicy.type", f"{_RP}:466", "workload_policy.type"),
    _tf("workloadPolicy.acceleratorTopology", f"{_RP}:473", "workload_policy.accelerator_topology"),
)
# The tpu7x pools' workload policy; name and description are updated in place (PATCH).

_CM = "certificatemanager/resource_certificate_manager_"
CERTIFICATE_RULES: tuple[ReplaceRule, ...] = (
    _tf("name", f"{_CM}certificate.go:164", "name"),
    _tf("location", f"{_CM}certificate.go:186", "location"),
    _tf("project", f"{_CM}certificate.go:400", "project"),
    # The managed block and its domains, dns_authorizations and issuance_config are all ForceNew: a new
    # hostname is a new certificate (the Gateway's listener keeps the name, so it serves the new one).
    _tf("managed", f"{_CM}certificate.go:193", "managed (+ .dns_authorizations :203, .domains :213, .issuance_config :223)"),
    _tf("scope", f"{_CM}certificate.go:294", "scope", note=NOT_SET),
)
DNS_AUTHORIZATION_RULES: tuple[ReplaceRule, ...] = (
    _tf("domain", f"{_CM}dns_authorization.go:157", "domain"),
    _tf("name", f"{_CM}dns_authorization.go:165", "name"),
    _tf("location", f"{_CM}dns_authorization.go:187", "location"),
    _tf("type", f"{_CM}dns_authorization.go:195", "type"),
    _tf("project", f"{_CM}dns_authorization.go:250", "project"),
)
# The public gateway's certificate (components/platform/addons/inference_gateway.py); labels and
# description are updated in place (PATCH).

_MON = "monitoring/resource_monitoring_"
MONITORING_RULES: Mapping[str, tuple[ReplaceRule, ...]] = {
    # dashboard_json is PATCHed in place (:246); only project replaces (components/platform/addons/observability.py).
    "gcp:monitoring/dashboard:Dashboard": (_tf("project", f"{_MON}dashboard.go:114", "project"),),
    # Every field but project is PATCHed in place (:1723): conditions, display name, channels, labels.
    "gcp:monitoring/alertPolicy:AlertPolicy": (_tf("project", f"{_MON}alert_policy.go:1313", "project"),),
}

RULES: Mapping[str, tuple[ReplaceRule, ...]] = {
    **MONITORING_RULES,
    "gcp:certificatemanager/certificate:Certificate": CERTIFICATE_RULES,
    "gcp:certificatemanager/dnsAuthorization:DnsAuthorization": DNS_AUTHORIZATION_RULES,
    "gcp:container/nodePool:NodePool": NODE_POOL_RULES,
    "gcp:compute/resourcePolicy:ResourcePolicy": RESOURCE_POLICY_RULES,
    "gcp:compute/subnetwork:Subnetwork": SUBNETWORK_RULES,
    "gcp:container/cluster:Cluster": CLUSTER_RULES,
    "gcp:storage/bucket:Bucket": BUCKET_RULES,
    "gcp:storage/bucketIAMMember:BucketIAMMember": _iam_member(
        (_tf("bucket", "storage/iam_storage_bucket.go StorageBucketIamSchema:33", "bucket"),)
    ),
    "gcp:serviceaccount/account:Account": (
        _tf("accountId", "resourcemanager/resource_google_service_account.go:90", "account_id"),
        _tf("project", "resourcemanager/resource_google_service_account.go:114", "project"),
    ),
    "gcp:serviceaccount/iAMMember:IAMMember": _iam_member(
        (_tf("serviceAccountId", "resourcemanager/iam_service_account.go:37", "service_account_id"),)
    ),
    "gcp:projects/iAMMember:IAMMember": _iam_member((_tf("project", "resourcemanager/iam_project.go:35", "project"),)),
    "gcp:artifactregistry/repository:Repository": (
        _tf("repositoryId", f"{_AR}:312", "repository_id"),
        _tf("location", f"{_AR}:468", "location"),
        _tf("project", f"{_AR}:926", "project"),
        _tf("format", f"{_AR}:302", "format"),
        _tf("mode", f"{_AR}:508", "mode", note=NOT_SET),
        _tf("kmsKeyName", f"{_AR}:445", "kms_key_name", note=NOT_SET),
        _tf("mavenConfig.allowSnapshotOverwrites", f"{_AR}:490", "maven_config.allow_snapshot_overwrites", note=NOT_SET),
        _tf("mavenConfig.versionPolicy", f"{_AR}:497", "maven_config.version_policy", note=NOT_SET),
        _tf("remoteRepositoryConfig", f"{_AR}:516", "remote_repository_config", note=NOT_SET),
    ),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": _iam_member(
        (
            _tf("project", f"{_AR_IAM}:72", "project"),
            _tf("location", f"{_AR_IAM}:78", "location"),
            _tf("repository", f"{_AR_IAM}:84", "repository"),
        )
    ),
    # Helm Release: helmReleaseProvider.Diff forceNewFields {".name", ".namespace"}.
    "kubernetes:helm.sh/v3:Release": (
        _k8s("name", "helm_release.go:907 (Diff forceNewFields)"),
        _k8s("namespace", "helm_release.go:907 (Diff forceNewFields)"),
    ),
    # DiffConfig replaces when the *active cluster* entry of the kubeconfig (server, CA, ...) changes,
    # or when kubeconfig/context/cluster is unknown at preview (e.g. the GKE cluster is being
    # replaced); a kubeconfig change that keeps the cluster entry (user/auth only) is an update.
    # The path rule is therefore conservative for kubeconfig. deleteUnreachable etc. are updates.
    "pulumi:providers:kubernetes": (
        _k8s("kubeconfig", "provider.go:503-558 (DiffConfig: active cluster changed, or value unknown)"),
        _k8s("context", "provider.go:503-558 (DiffConfig)", note=NOT_SET),
        _k8s("cluster", "provider.go:503-558 (DiffConfig)", note=NOT_SET),
        _k8s("renderYamlToDirectory", "provider.go:533 (DiffConfig)", note=NOT_SET),
        _k8s("clusterIdentifier", "provider.go:490 (DiffConfig; when set and unchanged, nothing replaces)", note=NOT_SET),
    ),
    # Kubernetes kinds: diff.go forceNew table (beyond the common metadata.name/namespace).
    "kubernetes:apps/v1:Deployment": (_k8s("spec.selector", "diff.go:171 (deployment)"),),
    "kubernetes:apps/v1:DaemonSet": (_k8s("spec.selector", "diff.go:164 (daemonset)"),),
    "kubernetes:apps/v1:StatefulSet": tuple(
        _k8s(p, "diff.go:196 (statefulSet)")
        for p in (
            "spec.podManagementPolicy",
            "spec.revisionHistoryLimit",
            "spec.selector",
            "spec.serviceName",
            "spec.volumeClaimTemplates",
        )
    ),
    "kubernetes:batch/v1:Job": tuple(
        _k8s(p, "diff.go:178 (job)") for p in ("spec.completions", "spec.parallelism", "spec.selector", "spec.template")
    ),
    "kubernetes:core/v1:Service": (_k8s("spec.clusterIP", "diff.go:158 (Service; spec.type is updatable)"),),
    # Secret/ConfigMap contents replace unless the provider sets enableSecretMutable /
    # enableConfigMapMutable (default false; this program sets neither): diff.go:28-33.
    "kubernetes:core/v1:Secret": tuple(
        _k8s(p, "diff.go:28 (Secret, enableSecretMutable=false default)") for p in ("type", "stringData", "data")
    ),
    "kubernetes:core/v1:ConfigMap": tuple(
        _k8s(p, "diff.go:32 (ConfigMap, enableConfigMapMutable=false default)") for p in ("data", "binaryData")
    ),
    "kubernetes:core/v1:ResourceQuota": (_k8s("spec.scopes", "diff.go:152 (ResourceQuota)"),),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": (_k8s("roleRef", "diff.go:192 (roleBinding)"),),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": (_k8s("roleRef", "diff.go:192 (roleBinding)"),),
    "kubernetes:storage.k8s.io/v1:StorageClass": tuple(
        _k8s(p, "diff.go:72 (StorageClass)") for p in ("parameters", "provisioner")
    ),
}
"""Replacement rules by exact type token. Kubernetes objects also get ``K8S_COMMON_RULES``
(see ``rules_for``); kinds not listed here (Namespace, ServiceAccount, HPA, ClusterRole, Role,
APIService, CRDs, custom resources) replace only on those. core/v1 Pod, PersistentVolume and
PersistentVolumeClaim rules exist upstream but are not vendored: this program registers none."""

K8S_COMMON_RULES: tuple[ReplaceRule, ...] = (
    _k8s("metadata.name", "provider.go:1563 (Diff: identity always forces replacement) + diff.go:207"),
    _k8s("metadata.namespace", "provider.go:1563 (Diff) + diff.go:207"),
)
"""Every Kubernetes object, including custom resources and ``*Patch`` kinds."""

K8S_NOT_OBJECTS = frozenset(
    {
        "kubernetes:helm.sh/v3:Release",
        "kubernetes:helm.sh/v3:Chart",
        "kubernetes:helm.sh/v4:Chart",
        "kubernetes:yaml:ConfigFile",
        "kubernetes:yaml:ConfigGroup",
        "kubernetes:yaml/v2:ConfigFile",
        "kubernetes:yaml/v2:ConfigGroup",
        "kubernetes:kustomize:Directory",
        "kubernetes:kustomize/v2:Directory",
    }
)
"""``kubernetes:`` tokens that are not one Kubernetes object (a Release, or components)."""

K8S_PROVIDER = "pulumi:providers:kubernetes"

# A replaced provider replaces every resource that uses it (steps._cascade applies it): the engine
# diffs the provider reference first and, if the new provider's DiffConfig reports a replacement,
# returns a replace with ReplaceKeys ``provider`` without asking the resource's own Diff (ENGINE
# ``providerChanged`` and ``diff``). A cluster replacement makes the kubeconfig unknown at preview,
# which DiffConfig always treats as a replacement, so every in-cluster object is replaced with it.

PROVIDER_DELETES_FIRST = frozenset({"gcp:projects/iAMMember:IAMMember"})
"""GCP types whose provider asks for delete-before-replace (pulumi-gcp provider/resources.go:939
``DeleteBeforeReplace: true``). Kubernetes objects: see ``provider_deletes_first``."""

DATA_TYPES = frozenset({"gcp:storage/bucket:Bucket"})
"""Stateful: replacing deletes the data (checkpoints, weights)."""

CAPACITY_TYPES = frozenset({"gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster"})
"""Scarce capacity: a replaced TPU pool (or its cluster) must be re-obtained, which may fail."""


def is_k8s_object(type_token: str) -> bool:
    """True for a token that is one Kubernetes object (``kubernetes:<group/version>:<Kind>``)."""
    return type_token.startswith("kubernetes:") and type_token not in K8S_NOT_OBJECTS and type_token.count(":") == 2


def rules_for(type_token: str) -> tuple[ReplaceRule, ...]:
    """All rules for a type: its own plus, for a Kubernetes object, the common metadata rules.
    ``*Patch`` kinds replace only on name/namespace (provider.go Diff: kinds.IsPatchResource)."""
    own = RULES.get(type_token, ())
    if not is_k8s_object(type_token):
        return own
    if type_token.endswith("Patch"):
        return K8S_COMMON_RULES
    return K8S_COMMON_RULES + own


def _forces(rule: ReplaceRule, path: str) -> bool:
    if path == rule.path or rule.path.startswith(f"{path}."):
        return True  # the path itself, or a whole enclosing object, changed
    return not rule.block and path.startswith(f"{rule.path}.")


def _pattern_segments(pattern: str) -> list[str]:
    """A Pulumi property path (``a.b``, ``a["k.x"]``, ``a.b[0].c``, ``a.*``) as wire-path segments;
    cut at the first list index, since a list is one leaf in wire paths."""
    segments: list[str] = []
    for match in re.finditer(r'\["((?:[^"\\]|\\.)*)"\]|\[([^\]]*)\]|([^.\[\]]+)', pattern):
        key, index, plain = match.groups()
        if index is not None:
            break
        segments.append(key if key is not None else plain)
    return segments


def replace_on_changes_contains(pattern: str, path: str) -> bool:
    """The engine's ``replaceOnChanges`` test (PropertyPath.Contains, sdk/go/common/resource/
    properties_path.go:314): ``path`` equals ``pattern`` or lies under it; ``*`` matches any key."""
    want = _pattern_segments(pattern)
    if "*" not in want:  # compare as text: wire keys may contain dots (``kubernetes.io/name``)
        prefix = ".".join(want)
        return path == prefix or path.startswith(f"{prefix}.")
    got = path.split(".")
    return len(got) >= len(want) and all(w in ("*", g) for w, g in zip(want, got, strict=False))


def replacing_paths(type_token: str, changed_paths: Iterable[str], replace_on_changes: Iterable[str] = ()) -> list[str]:
    """The changed paths (as given, in order) that force replacement.

    A changed path P forces replacement when a rule path R equals P, or R starts with P + '.'
    (a whole sub-object changed), or P starts with R + '.' (a field inside R changed) -- the last
    one not for ``block`` rules, whose inner fields are updatable. ``replace_on_changes`` (the
    resource option) adds the engine's own replacements: P equal to or under one of its paths
    (step_generator.go applyReplaceOnChanges)."""
    rules = rules_for(type_token)
    extra = tuple(replace_on_changes)
    return [
        p
        for p in changed_paths
        if any(_forces(rule, p) for rule in rules) or any(replace_on_changes_contains(r, p) for r in extra)
    ]


def provider_deletes_first(type_token: str) -> bool:
    """Whether the provider itself asks to delete before creating the replacement. Kubernetes
    objects do when they are explicitly named and keep their name and namespace (provider.go
    Diff, deleteBeforeReplace; this program names every object); a Helm Release never does."""
    return type_token in PROVIDER_DELETES_FIRST or is_k8s_object(type_token)


def input_changes(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Changed wire-input paths between two input dicts, sorted. Objects present on both sides are
    compared field by field; an object present on one side only is reported as its own path (so a
    ``block`` rule sees a block added or removed); lists and scalars are leaves."""
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        path = f"{prefix}.{key}" if prefix else key
        a, b = old.get(key), new.get(key)  # missing and None are the same (no input)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out.extend(input_changes(a, b, path))
        elif a != b:
            out.append(path)
    return out


def replacing_changes(type_token: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``replacing_paths`` over ``input_changes(old, new)``: the exact form for block rules."""
    return replacing_paths(type_token, input_changes(old, new))
