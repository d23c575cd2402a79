"""Platform specs: the cluster, its TPU slices, buckets, Workload Identity and the pinned controllers.

Hardware facts are never configured: chips, hosts, node counts, selectors and TPU requests come
from ``components.catalog``; they are exposed here as derived properties.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from .. import crds
from . import naming
from .addresses import covers_everyone
from .base import BucketRole, Cidr, Spec, machine_type_rules
from .errors import raise_rules, rule

MAX_AUTHORIZED_NETWORKS = 50
"""Authorized networks GKE accepts on a cluster's public control-plane endpoint (GKE quotas and limits:
50 CIDR ranges; 100 only with a private endpoint, which these clusters do not use)."""

LocationType = Literal["regional", "zonal"]
ReleaseChannel = Literal["RAPID", "REGULAR", "STABLE"]
Dataplane = Literal["v2", "legacy"]
ThreadsPerCore = Literal[1, 2]
StorageClass = Literal["STANDARD", "NEARLINE"]
IdentityMode = Literal["principal", "gsa"]
"""Value types a stack file and the library Args (components/platform/gke.py, tpu_pool.py, storage.py, identity.py) share."""


class SystemPoolSpec(Spec):
    machine_type: str = Field(
        "e2-standard-4",
        description="CPU machine type of the system pool. Defaults to e2-standard-4 because kube-system, "
        "controllers (LWS/JobSet/KubeRay) and small CPU servers fit in 4 vCPU/16 GiB per node.",
    )
    allow_undocumented_machine_type: bool = Field(
        False,
        description="Accept a machineType the Compute Engine catalog (components/catalog/gce.py) does not list. "
        "Off by default because a wrong one fails only when GKE creates the pool; turn on when Google adds a "
        "machine type before the catalog does.",
    )
    nodes_per_zone: Annotated[int, Field(ge=1, le=10)] = Field(
        1,
        description="Nodes per zone of the system pool. Defaults to 1 because a regional cluster already "
        "spreads it over the region's zones.",
    )
    disk_size_gb: Annotated[int, Field(ge=20, le=2000)] = Field(
        100, description="Boot disk of system nodes in GB. Defaults to 100 because GKE's default is 100."
    )

    @model_validator(mode="after")
    def _catalog(self) -> SystemPoolSpec:
        if not self.allow_undocumented_machine_type:
            raise_rules(machine_type_rules(self.machine_type, "allowUndocumentedMachineType"))
        return self


class ClusterHardeningSpec(Spec):
    shielded_nodes: bool = Field(
        True,
        description="Shielded GKE nodes (verifiable node identity and boot integrity; CIS GKE 6.5.5). Defaults to on "
        "because it is GKE's default and costs nothing; off only for an image that cannot boot shielded.",
    )
    secure_boot: bool = Field(
        True,
        description="Secure Boot on the CPU node pools (system, checkpoint converter): only signed boot components "
        "run. Defaults to on because GKE's node images are signed; the TPU pools keep GKE's default (integrity "
        "monitoring on, Secure Boot off) because GKE documents no Secure Boot for TPU VM node images, and the "
        "setting is create-only: changing it replaces the pools it applies to.",
    )
    private_nodes: bool = Field(
        False,
        description="Nodes get internal IP addresses only. Defaults to off because the workloads pull images from "
        "Docker Hub and weights from Hugging Face, and private nodes reach the internet only through Cloud NAT, "
        "which this stack does not create; turn on where the VPC has Cloud NAT (or only Google-hosted images and "
        "buckets are used). Turned on in place on a live cluster; removing the key later leaves it on (the provider "
        "keeps a block the program stops sending).",
    )
    authorized_networks: list[Cidr] | None = Field(
        None,
        description="CIDRs allowed to reach the cluster's control-plane endpoint (master authorized networks). "
        "Unset allows any address, because GitHub-hosted runners and laptops have no fixed ranges and every "
        "request is still authenticated with Google IAM; set your CI and office ranges to close the endpoint. "
        "Changed in place; removing the key later leaves the last ranges in force (the provider keeps the block).",
    )
    binary_authorization: bool = Field(
        False,
        description="Enforce the project's Binary Authorization policy on every pod (PROJECT_SINGLETON_POLICY_ENFORCE). "
        "Defaults to off because the policy (attestors, allowed registries) is the project owner's to define; with "
        "Google's default allow-all policy it only adds an audit trail.",
    )

    @model_validator(mode="after")
    def _cidrs(self) -> ClusterHardeningSpec:
        import ipaddress

        rules: list[dict[str, Any]] = []
        networks = self.authorized_networks or []
        if len(networks) > MAX_AUTHORIZED_NETWORKS:
            parsed = [ipaddress.ip_network(c) for c in networks]
            merged = [str(n) for n in ipaddress.collapse_addresses(n for n in parsed if isinstance(n, ipaddress.IPv4Network))]
            merged += [str(n) for n in ipaddress.collapse_addresses(n for n in parsed if isinstance(n, ipaddress.IPv6Network))]
            hint = (
                f"; merged, they are {len(merged)} ranges: {merged}"
                if len(merged) <= MAX_AUTHORIZED_NETWORKS
                else f" (even merged they are {len(merged)})"
            )
            rules.append(
                rule(
                    "authorizedNetworks",
                    f"{len(networks)} ranges",
                    f"is more than the {MAX_AUTHORIZED_NETWORKS} authorized networks GKE accepts on a cluster with a "
                    f"public endpoint, so the cluster update would fail at apply time{hint}",
                    f"at most {MAX_AUTHORIZED_NETWORKS} CIDR ranges",
                    "merge adjacent ranges into covering prefixes, or drop ranges no client uses",
                )
            )
        if covers_everyone(self.authorized_networks or []):
            rules.append(
                rule(
                    "authorizedNetworks",
                    list(self.authorized_networks or []),
                    "admits every address, which is what leaving the key unset does",
                    "the ranges pulumi and kubectl run from",
                    "list narrower ranges, or remove the key",
                )
            )
        if self.authorized_networks is not None and not self.authorized_networks:
            rules.append(
                rule(
                    "authorizedNetworks",
                    [],
                    "would lock every client (and pulumi itself) out of the control plane",
                    "at least one CIDR, or unset",
                    "list the ranges pulumi and kubectl run from, or remove the key",
                )
            )
        raise_rules(rules)
        return self


class ClusterSpec(Spec):
    name: str | None = Field(
        None,
        description="GKE cluster name. Defaults to the stack name because one stack owns one cluster.",
        pattern=naming.GKE_NAME_PATTERN,
    )
    location_type: LocationType = Field(
        "regional",
        description="Regional (control plane replicated across zones) or zonal (control plane in the TPU "
        "zone). Defaults to regional because it survives a zone outage at the same management fee.",
    )
    release_channel: ReleaseChannel = Field(
        "REGULAR",
        description="GKE release channel. Defaults to REGULAR because it carries every TPU generation in the "
        "catalog and gets fixes before STABLE.",
    )
    version: str | None = Field(
        None,
        description="Minimum control-plane version (min_master_version): 1.<minor>, 1.<minor>.<patch> or "
        "1.<minor>.<patch>-gke.<build>. Unset uses the channel default; when set it must be at or above the "
        "minimum of every TPU generation used. Required for a generation newer than every channel's default "
        "when the catalog was written (tpu7x: its floor 1.34.0-gke.2201000).",
        pattern=r"^1\.[1-9]\d(\.(0|[1-9]\d{0,2})(-gke\.[1-9]\d{0,9})?)?$",
    )
    deletion_protection: bool | None = Field(
        None, description="GKE deletion protection. Defaults to the environment's policy (on in prod)."
    )
    allow_replacement: bool = Field(
        False,
        description="Lift Pulumi protection from the cluster for one reviewed change that must replace or "
        "delete it (prod only; GKE deletion protection must be switched off in the same change).",
    )
    system_pool: SystemPoolSpec = Field(
        default_factory=SystemPoolSpec, description="CPU pool for kube-system, controllers and CPU servers."
    )
    hardening: ClusterHardeningSpec = Field(
        default_factory=ClusterHardeningSpec,
        description="Control-plane and node hardening: the cluster settings are updated in place on a live cluster; "
        "secureBoot is create-only on the CPU pools it applies to.",
    )
    dataplane: Dataplane = Field(
        "v2",
        description="How the cluster enforces the workloads' NetworkPolicies. 'v2': GKE Dataplane V2 (eBPF, "
        "datapathProvider ADVANCED_DATAPATH), enforcement built in. 'legacy': the iptables dataplane with GKE's Calico "
        "network policy (networkPolicy CALICO and its add-on). Defaults to v2 because it enforces policies from the "
        "cluster's creation with no add-on to manage; but the dataplane is chosen at creation only (a changed "
        "datapathProvider replaces the cluster), so a cluster created before this setting existed must set legacy, "
        "which is enabled in place and makes GKE recreate every node once (TPU slices included).",
    )


BUCKET_KEY_PATTERN = r"^[a-z0-9](?:[-_a-z0-9]{0,61}[a-z0-9])?$"
"""Bucket keys become part of bucket names (``<project>-<stack>-<key>``) and resource names."""


class BucketSpec(Spec):
    purpose: str = Field(description="What the bucket holds; becomes a label and documentation.")
    holds_checkpoints: bool = Field(
        False,
        description="The bucket holds checkpoints or weights that are costly to recreate; turns on object "
        "versioning so an overwrite is recoverable.",
    )
    force_destroy: bool | None = Field(
        None,
        description="Delete the bucket with its objects on teardown. Defaults to the environment's policy "
        "(dev only); never allowed in prod.",
    )
    storage_class: StorageClass = Field(
        "STANDARD", description="Storage class. Defaults to STANDARD because weights are read hot."
    )


class IdentitySpec(Spec):
    mode: IdentityMode = Field(
        "principal",
        description="How the Kubernetes ServiceAccount gets Google access: 'principal' grants bucket roles "
        "directly to the KSA's principal:// identity (no Google service account to manage); 'gsa' binds the "
        "KSA to a dedicated Google service account (roles/iam.workloadIdentityUser + KSA annotation) that "
        "holds the bucket roles, for tools that need a service-account email.",
    )
    namespace: str | None = Field(
        None,
        pattern=naming.DNS_LABEL_PATTERN,
        description="Namespace the workloads run in; created by the stack. Defaults to the stack name because "
        "Workload Identity treats every cluster of a project as one identity pool (identity sameness): two stacks "
        "in one project (dev and prod) must not share a namespace/ServiceAccount pair, or one stack's pods would "
        "hold the other's bucket roles.",
    )
    service_account: str = Field(
        "llm-workload",
        pattern=naming.DNS_LABEL_PATTERN,
        description="Kubernetes ServiceAccount name the workloads run as.",
    )
    bucket_roles: dict[str, BucketRole] = Field(
        default_factory=dict,
        description="Role per bucket key, scoped to that bucket (never project-wide).",
    )

    @model_validator(mode="after")
    def _owned_names(self) -> IdentitySpec:
        """Names someone else already owns (creating them fails with AlreadyExists at apply time);
        the namespace derived from the stack name is checked by ``StackConfig``."""
        rules: list[dict[str, Any]] = []
        for problem in naming.namespace_problems(self.namespace) if self.namespace is not None else []:
            rules.append(
                rule(
                    "namespace",
                    self.namespace,
                    problem,
                    "a namespace of this stack's own (not kube-*, gke-*, gmp-*, "
                    + ", ".join(sorted(naming.RESERVED_NAMESPACES))
                    + ")",
                    "set identity.namespace to another name",
                )
            )
        for problem in naming.service_account_name_problems(self.service_account):
            rules.append(
                rule(
                    "serviceAccount",
                    self.service_account,
                    problem,
                    "a ServiceAccount name of the stack's own",
                    "set identity.serviceAccount to another name (the default is llm-workload)",
                )
            )
        raise_rules(rules)
        return self


class ControllersSpec(Spec):
    lws_version: str = Field(
        "0.10.0",
        pattern=r"^\d+\.\d+\.\d+$",
        description="LeaderWorkerSet controller release. Defaults to 0.10.0, the current release, whose CRD "
        "schema the project validates against.",
    )
    jobset_version: str = Field(
        "0.12.0",
        pattern=r"^\d+\.\d+\.\d+$",
        description="JobSet controller release. Defaults to 0.12.0, the current release (Saxml needs >= 0.2.3), "
        "whose CRD schema the project validates against.",
    )
    kueue_version: str = Field(
        "0.19.2",
        pattern=r"^\d+\.\d+\.\d+$",
        description="Kueue controller release (installed only by stacks that queue their slices). Defaults to "
        "0.19.2, the current release, because its CRDs (v1beta2 storage) are the ones the project validates "
        "ClusterQueue, LocalQueue, ResourceFlavor, AdmissionCheck and ProvisioningRequestConfig against.",
    )

    @property
    def by_controller(self) -> dict[str, str]:
        """Configured release per controller: ``{"lws": ..., "jobset": ..., "kueue": ...}``
        (every field is ``<controller>_version``)."""
        return {name.removesuffix("_version"): getattr(self, name) for name in type(self).model_fields}

    @model_validator(mode="after")
    def _vendored_versions(self) -> ControllersSpec:
        # Only releases whose CRDs are vendored in components/crds can be deployed: HelmController
        # registers the CRDs from there and components.tools.validate checks custom resources against them.
        rules: list[dict[str, Any]] = []
        for name, field in type(self).model_fields.items():
            controller, value = name.removesuffix("_version"), getattr(self, name)
            allowed = crds.versions(controller)
            if value not in allowed:
                rules.append(
                    rule(
                        field.alias or name,
                        value,
                        f"is not a supported {controller} release (its CRDs are not vendored in components/crds/{controller})",
                        ", ".join(allowed),
                        "use one of the allowed versions, or vendor that release's CRDs first (components/crds/README.md)",
                    )
                )
        raise_rules(rules)
        return self
