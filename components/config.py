"""Typed stack configuration: the one place where settings, defaults and cross-field rules live.

A stack file holds a few structured keys under the ``gke-tpu-llm:`` namespace plus ``gcp:project``
and ``gcp:region``. ``load_stack_config`` reads them from the Pulumi runtime, validates them into
frozen pydantic specs and raises one ``ConfigError`` listing every violation (key path, bad value,
allowed values, fix) before any resource is registered.

Hardware facts are never configured: chips, hosts, node counts, selectors and TPU requests come
from ``components.catalog``; they are exposed here as derived properties.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components import naming, planner
from components.catalog import gce
from components.catalog import tpu as tpu_catalog
from components.specs.base import Spec, bucket_rules, machine_type_rules, raise_rules, rule
from components.specs.jetstream import JetstreamSpec
from components.specs.maxtext_ray import MaxTextRaySpec
from components.specs.saxml import SaxmlSpec
from components.specs.vllm import VllmSpec

NAMESPACE = "gke-tpu-llm"
"""Pulumi config namespace (the project name)."""


class ConfigError(Exception):
    """Invalid stack configuration. ``str()`` is the full, user-facing report."""

    def __init__(self, violations: Sequence[Violation]):
        self.violations = list(violations)
        lines = [f"invalid stack configuration ({len(self.violations)} problem(s)):"]
        lines += [f"  - {v}" for v in self.violations]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Violation:
    """One broken rule: which key, what value, what is allowed and how to fix it."""

    key: str
    value: Any
    problem: str
    allowed: str
    fix: str

    def __str__(self) -> str:
        allowed = f" Allowed: {self.allowed}." if self.allowed else ""
        value = repr(self.value)
        if len(value) > _VALUE_MAX:  # a whole section or a huge number: the key already says where
            value = value[:_VALUE_MAX] + "…"
        return f"{self.key}: {value} {self.problem}.{allowed} Fix: {self.fix}."


_VALUE_MAX = 160
"""Longest value repr in a violation line."""


class Environment(StrEnum):
    dev = "dev"
    prod = "prod"


@dataclass(frozen=True)
class EnvironmentPolicy:
    """What an environment means for data and replacement safety; the only place it is decided."""

    protect: bool
    """Pulumi ``protect`` on the cluster, TPU pools and buckets: deleting or replacing them fails."""
    retain_on_delete: bool
    """Buckets stay in the project when removed from the stack (checkpoints are never lost)."""
    force_destroy: bool
    """Buckets may be deleted with their objects (dev only: cheap teardown)."""
    deletion_protection: bool
    """GKE's own deletion protection on the cluster."""
    allow_spot: bool
    """Spot TPU capacity may be used (it can be preempted with 30 s warning)."""


ENVIRONMENTS: Mapping[Environment, EnvironmentPolicy] = {
    Environment.dev: EnvironmentPolicy(
        protect=False, retain_on_delete=False, force_destroy=True, deletion_protection=False, allow_spot=True
    ),
    # prod: nothing is deleted or replaced by accident, data outlives the stack, and serving
    # capacity is not preemptible.
    Environment.prod: EnvironmentPolicy(
        protect=True, retain_on_delete=True, force_destroy=False, deletion_protection=True, allow_spot=False
    ),
}
ALLOW_REPLACE_LABEL = "gke-tpu-llm-allow-replace"
"""GCP label marking a prod cluster or TPU pool whose replacement a reviewed change allowed (the
policy pack reads it; see ``allowReplacement``)."""


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
    authorized_networks: list[str] | None = Field(
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
        for i, cidr in enumerate(self.authorized_networks or []):
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                rules.append(rule(f"authorizedNetworks.{i}", cidr, "is not a CIDR network", "e.g. 203.0.113.0/24", "fix it"))
        from components.endpoints import covers_everyone

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
    location_type: Literal["regional", "zonal"] = Field(
        "regional",
        description="Regional (control plane replicated across zones) or zonal (control plane in the TPU "
        "zone). Defaults to regional because it survives a zone outage at the same management fee.",
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(
        "REGULAR",
        description="GKE release channel. Defaults to REGULAR because it carries every TPU generation in the "
        "catalog and gets fixes before STABLE.",
    )
    version: str | None = Field(
        None,
        description="Minimum control-plane version (min_master_version): 1.<minor>, 1.<minor>.<patch> or "
        "1.<minor>.<patch>-gke.<build>. Unset uses the channel default; when set it must be at or above the "
        "minimum of every TPU generation used.",
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
    dataplane: Literal["v2", "legacy"] = Field(
        "v2",
        description="How the cluster enforces the workloads' NetworkPolicies. 'v2': GKE Dataplane V2 (eBPF, "
        "datapathProvider ADVANCED_DATAPATH), enforcement built in. 'legacy': the iptables dataplane with GKE's Calico "
        "network policy (networkPolicy CALICO and its add-on). Defaults to v2 because it enforces policies from the "
        "cluster's creation with no add-on to manage; but the dataplane is chosen at creation only (a changed "
        "datapathProvider replaces the cluster), so a cluster created before this setting existed must set legacy, "
        "which is enabled in place and makes GKE recreate every node once (TPU slices included).",
    )


class AutoscalingSpec(Spec):
    min_nodes: Annotated[int, Field(ge=0, le=1000)] = Field(description="Total minimum nodes of the pool.")
    max_nodes: Annotated[int, Field(ge=1, le=1000)] = Field(
        description="Total maximum nodes of the pool. At most 1000, GKE's limit of nodes per node pool per zone."
    )

    @model_validator(mode="after")
    def _min_le_max(self) -> AutoscalingSpec:
        if self.min_nodes > self.max_nodes:
            raise_rules(
                [
                    rule(
                        "minNodes",
                        self.min_nodes,
                        f"is above maxNodes ({self.max_nodes})",
                        f"0..{self.max_nodes}",
                        "lower minNodes or raise maxNodes",
                    )
                ]
            )
        return self


class TpuSpec(Spec):
    generation: str = Field(description="TPU generation from the catalog (v5e, v6e).")
    topology: str | None = Field(
        None,
        description="Slice topology, e.g. 4x4 (a catalog topology of the generation). Unset lets the capacity "
        "planner pick the cheapest slice of the generation that fits the workload; set, it is verified.",
    )
    machine_type: str | None = Field(
        None,
        description="TPU VM machine type. Unset derives it from the topology; required only where a "
        "topology has two VM layouts (v5e/v6e 2x4: one 8-chip VM or two 4-chip VMs).",
    )
    slices: Annotated[int, Field(ge=1, le=64)] = Field(
        1, description="Number of identical slices; each is its own node pool. Defaults to 1."
    )
    zone: str = Field(description="Zone of the TPU pools (TPU capacity is zonal).")
    allow_undocumented_zone: bool = Field(
        False,
        description="Accept a zone the catalog does not list for the generation. Off by default because "
        "a wrong zone fails only at apply time; turn on when Google adds a zone before the catalog does.",
    )
    spot: bool = Field(False, description="Use Spot VMs (preemptible, cheaper). Defaults to on-demand; not allowed in prod.")
    allow_replacement: bool = Field(
        False,
        description="Lift Pulumi protection from the TPU pools for one reviewed change that must replace them "
        "(a topology or machine-type change in prod). Off by default because a replaced slice may not come back.",
    )
    reservation: str | None = Field(
        None,
        pattern=r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="Specific reservation to consume: its name (a Compute Engine name: lowercase letters, digits "
        "and '-', at most 63) or, for a reservation shared from another project, "
        "projects/<project-id>/reservations/<name>. Unset consumes none.",
    )
    autoscaling: AutoscalingSpec | None = Field(
        None,
        description="Total min/max nodes for single-host pools. Multi-host slices are atomic and are not autoscaled here.",
    )
    workload_metadata: Literal["GKE_METADATA", "GCE_METADATA"] = Field(
        "GKE_METADATA",
        description="Node metadata mode. Defaults to GKE_METADATA because it enables Workload Identity and "
        "hides the node's service-account credentials from pods.",
    )
    threads_per_core: Literal[1, 2] | None = Field(
        None, description="SMT threads per core on the TPU VMs; unset keeps the machine default."
    )
    disk_size_gb: Annotated[int, Field(ge=50, le=4000)] = Field(
        100, description="Boot disk per TPU VM in GB. Defaults to 100 because that is GKE's default."
    )

    @model_validator(mode="after")
    def _catalog_rules(self) -> TpuSpec:
        rules: list[dict[str, Any]] = []
        gen = tpu_catalog.GENERATIONS.get(self.generation)
        if gen is None:
            raise_rules(
                [
                    rule(
                        "generation",
                        self.generation,
                        "is not a TPU generation in the catalog",
                        ", ".join(tpu_catalog.GENERATIONS),
                        "set generation to one of the allowed values",
                    )
                ]
            )
            return self
        if self.topology is None:
            if self.machine_type is not None and self.machine_type not in gen.machine_types:
                rules.append(
                    rule(
                        "machineType",
                        self.machine_type,
                        f"is not a {gen.name} machine type",
                        ", ".join(gen.machine_types),
                        "use a listed machine type",
                    )
                )
        elif self.topology not in gen.topologies:
            rules.append(
                rule(
                    "topology",
                    self.topology,
                    f"is not a {gen.name} topology",
                    ", ".join(gen.topologies),
                    f"pick a {gen.name} topology (chips = product of the dimensions)",
                )
            )
        else:
            layouts = tpu_catalog.layouts(gen.name, self.topology)
            machine_types = [s.machine_type for s in layouts]
            if self.machine_type is None and len(layouts) > 1:
                rules.append(
                    rule(
                        "machineType",
                        None,
                        f"is required: {gen.name} {self.topology} has {len(layouts)} VM layouts",
                        ", ".join(f"{s.machine_type} ({s.hosts} host(s))" for s in layouts),
                        "set machineType to choose the layout",
                    )
                )
            elif self.machine_type is not None and self.machine_type not in machine_types:
                rules.append(
                    rule(
                        "machineType",
                        self.machine_type,
                        f"does not build a {gen.name} {self.topology} slice",
                        ", ".join(machine_types),
                        "use a listed machine type or change the topology",
                    )
                )
            elif self.autoscaling is not None:
                tpu_slice = self._slice_or_none()
                if tpu_slice is not None and tpu_slice.multi_host:
                    rules.append(
                        rule(
                            "autoscaling",
                            self.autoscaling.model_dump(by_alias=True),
                            f"is not allowed on a multi-host slice ({self.topology} = {tpu_slice.hosts} hosts, atomic)",
                            "autoscaling only on single-host slices",
                            "remove autoscaling or use a single-host topology",
                        )
                    )
        if self.zone not in gen.zones and not self.allow_undocumented_zone:
            rules.append(
                rule(
                    "zone",
                    self.zone,
                    f"is not a documented {gen.name} zone",
                    ", ".join(gen.zones),
                    "pick a listed zone, or set allowUndocumentedZone: true if Google lists it now",
                )
            )
        if self.spot and self.reservation:
            rules.append(
                rule(
                    "reservation",
                    self.reservation,
                    "cannot be combined with spot: true",
                    "either spot or a reservation",
                    "remove one of the two",
                )
            )
        raise_rules(rules)
        return self

    def _slice_or_none(self) -> tpu_catalog.TpuSlice | None:
        if self.topology is None:
            return None
        return tpu_catalog.find_slice(self.generation, self.topology, self.machine_type)

    @property
    def slice(self) -> tpu_catalog.TpuSlice:
        """The catalog slice; valid by construction once the spec is validated."""
        found = self._slice_or_none()
        if found is None:  # only before the capacity planner has resolved an unset topology
            raise ValueError(f"no resolved slice for {self.generation} {self.topology} {self.machine_type}")
        return found

    @property
    def region(self) -> str:
        return tpu_catalog.zone_region(self.zone)

    @property
    def nodes_min(self) -> int:
        return self.autoscaling.min_nodes if self.autoscaling else self.slice.hosts

    @property
    def nodes_max(self) -> int:
        return self.autoscaling.max_nodes if self.autoscaling else self.slice.hosts


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
    storage_class: Literal["STANDARD", "NEARLINE"] = Field(
        "STANDARD", description="Storage class. Defaults to STANDARD because weights are read hot."
    )


class IdentitySpec(Spec):
    mode: Literal["principal", "gsa"] = Field(
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
    bucket_roles: dict[str, Literal["roles/storage.objectViewer", "roles/storage.objectUser", "roles/storage.objectAdmin"]] = (
        Field(
            default_factory=dict,
            description="Role per bucket key, scoped to that bucket (never project-wide).",
        )
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


class WorkloadKind(StrEnum):
    jetstream_pathways = "jetstream-pathways"
    saxml = "saxml"
    vllm = "vllm"
    maxtext_ray = "maxtext-ray"


# Add-ons each workload needs; the cluster enables exactly these (one place).
WORKLOAD_ADDONS: Mapping[WorkloadKind, frozenset[str]] = {
    WorkloadKind.jetstream_pathways: frozenset(),
    WorkloadKind.saxml: frozenset(),
    WorkloadKind.vllm: frozenset({"gcsFuseCsiDriver"}),
    WorkloadKind.maxtext_ray: frozenset({"gcsFuseCsiDriver", "rayOperator"}),
}


# The planner engine and mode each workload kind runs (one place).
WORKLOAD_ENGINE: Mapping[WorkloadKind, tuple[Literal["maxtext", "vllm", "saxml"], Literal["serve", "train"]]] = {
    WorkloadKind.jetstream_pathways: ("maxtext", "serve"),
    WorkloadKind.saxml: ("saxml", "serve"),
    WorkloadKind.vllm: ("vllm", "serve"),
    WorkloadKind.maxtext_ray: ("maxtext", "train"),
}


# The workload section each kind reads (``gke-tpu-llm:workload.<section>``).
WORKLOAD_SECTION: Mapping[WorkloadKind, str] = {
    WorkloadKind.jetstream_pathways: "jetstream",
    WorkloadKind.saxml: "saxml",
    WorkloadKind.vllm: "vllm",
    WorkloadKind.maxtext_ray: "maxtext_ray",
}
WORKLOAD_SECTIONS: Mapping[str, WorkloadKind] = {v: k for k, v in WORKLOAD_SECTION.items()}


MAX_TARGET_LENGTH = 131072
"""The longest context window of a catalog model (Llama 3.1: 128K tokens)."""
MAX_CHIPS = max(s.chips for s in tpu_catalog.all_slices())
"""Chips of the largest catalog slice: no mesh axis can be larger."""


class WorkloadSpec(Spec):
    kind: WorkloadKind = Field(description="Which serving/training system runs on the slices.")
    model: str = Field(description="Model key from the model catalog (components/catalog/models.py).")
    weights: Literal["bfloat16", "int8"] | None = Field(
        None,
        description="Weight dtype in HBM. Unset: the servable's own (Saxml int8) or bfloat16. int8 keeps one "
        "float32 scale per output channel.",
    )
    kv_cache: Literal["bfloat16", "int8"] | None = Field(
        None, description="KV-cache dtype. Unset follows the weights (int8 when the weights are int8)."
    )
    max_target_length: Annotated[int, Field(ge=1, le=MAX_TARGET_LENGTH)] = Field(
        description="Tokens cached per sequence (MaxText max_target_length, vLLM --max-model-len, Saxml input "
        "length + decode steps; for training, the sequence length). At most 131072, the longest context of any "
        "catalog model (Llama 3.1)."
    )
    max_prefill_length: Annotated[int, Field(ge=1, le=MAX_TARGET_LENGTH)] | None = Field(
        None, description="MaxText max_prefill_predict_length (serving); below maxTargetLength."
    )
    per_device_batch_size: Annotated[float, Field(gt=0, le=1024)] | None = Field(
        None,
        description="Sequences per chip (MaxText per_device_batch_size); the cache holds this x chips. At most "
        "1024 (a chip's HBM holds far fewer sequences of any useful length; a larger value is a typo).",
    )
    batch_size: Annotated[int, Field(ge=1, le=65536)] | None = Field(
        None,
        description="Sequences per slice, where the engine counts per slice (Saxml, vLLM). At most 65536 "
        "(1024 per chip on the largest single-host slice, and far beyond any engine's scheduler).",
    )
    parallelism: dict[str, int] | None = Field(
        None,
        description="Mesh axes pinned by name (MaxText serving: fsdp/autoregressive/tensor; training: "
        "fsdp/tensor; vLLM: tensor; Saxml: replica/data/mdl). Unset derives them from the slice; set, they are "
        "verified (product = chips, tensor divides the heads).",
    )
    reserve_fraction: Annotated[float, Field(ge=0, lt=1)] | None = Field(
        None,
        description="HBM share kept free for activations and the runtime. Unset: the engine's default "
        "(vLLM 0.10, because vLLM claims 90% of HBM; MaxText/Saxml 0.05), see components/planner.py.",
    )

    jetstream: JetstreamSpec = Field(default_factory=JetstreamSpec, description="Settings when kind is jetstream-pathways.")
    saxml: SaxmlSpec = Field(default_factory=SaxmlSpec, description="Settings when kind is saxml.")
    vllm: VllmSpec = Field(default_factory=VllmSpec, description="Settings when kind is vllm.")
    maxtext_ray: MaxTextRaySpec = Field(default_factory=MaxTextRaySpec, description="Settings when kind is maxtext-ray.")

    @model_validator(mode="after")
    def _workload_rules(self) -> WorkloadSpec:
        from components.catalog.models import MODELS

        rules: list[dict[str, Any]] = []
        if self.max_prefill_length is not None and self.max_prefill_length >= self.max_target_length:
            rules.append(
                rule(
                    "maxPrefillLength",
                    self.max_prefill_length,
                    f"is not below maxTargetLength ({self.max_target_length}); the prefill and decode caches "
                    "together span maxTargetLength",
                    f"1..{self.max_target_length - 1}",
                    "lower maxPrefillLength or raise maxTargetLength",
                )
            )
        if self.model not in MODELS:
            rules.append(rule("model", self.model, "is not in the model catalog", ", ".join(MODELS), "use a catalog model key"))
        rules += self._parallelism_rules()
        for section, kind in WORKLOAD_SECTIONS.items():
            if section in self.model_fields_set and kind is not self.kind:
                rules.append(
                    rule(
                        to_camel(section),
                        "(set)",
                        f"applies to kind {kind.value}, not {self.kind.value}",
                        f"the {to_camel(WORKLOAD_SECTION[self.kind])} section",
                        "remove the section or change kind",
                    )
                )
        if self.per_device_batch_size is not None and self.batch_size is not None:
            rules.append(
                rule("batchSize", self.batch_size, "cannot be combined with perDeviceBatchSize", "one of the two", "remove one")
            )
        raise_rules(rules)
        return self

    def _parallelism_rules(self) -> list[dict[str, Any]]:
        """Axis names and sizes; whether the degrees fit the slice and the model is the planner's check."""
        if self.parallelism is None:
            return []
        names = planner.mesh_axis_names(self.engine, self.mode)
        rules: list[dict[str, Any]] = []
        for axis, size in self.parallelism.items():
            if axis not in names:
                rules.append(
                    rule(
                        f"parallelism.{axis}",
                        size,
                        f"is not a mesh axis of {self.kind.value} ({self.mode})",
                        ", ".join(names),
                        "use one of the allowed axes (missing axes are 1)",
                    )
                )
            elif size == 0 or size < -1 or size > MAX_CHIPS:
                rules.append(
                    rule(
                        f"parallelism.{axis}",
                        size,
                        "is not a mesh size",
                        f"1..{MAX_CHIPS}, or -1 for the chips the other axes leave (one axis at most)",
                        "use a degree that divides the slice's chips, or remove the axis",
                    )
                )
        fill = [axis for axis, size in self.parallelism.items() if size == -1]
        if len(fill) > 1:
            rules.append(
                rule(
                    "parallelism",
                    dict(self.parallelism),
                    f"has {len(fill)} axes set to -1 ({', '.join(fill)})",
                    "at most one -1 axis",
                    "give all but one of them a size",
                )
            )
        return rules

    @property
    def section(self) -> Spec:
        """The settings section of this workload's kind (``jetstream``, ``vllm``, …)."""
        section: Spec = getattr(self, WORKLOAD_SECTION[self.kind])
        return section

    @property
    def engine(self) -> Literal["maxtext", "vllm", "saxml"]:
        return WORKLOAD_ENGINE[self.kind][0]

    @property
    def mode(self) -> Literal["serve", "train"]:
        return WORKLOAD_ENGINE[self.kind][1]


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

    @property
    def by_controller(self) -> dict[str, str]:
        """Configured release per controller: ``{"lws": ..., "jobset": ...}`` (every field is ``<controller>_version``)."""
        return {name.removesuffix("_version"): getattr(self, name) for name in type(self).model_fields}

    @model_validator(mode="after")
    def _vendored_versions(self) -> ControllersSpec:
        # Only releases whose CRDs are vendored in components/crds can be deployed: HelmController
        # registers the CRDs from there and components.validate checks custom resources against them.
        from components import crds  # a light module (no Pulumi); imported here to keep it local to this spec

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


class StackConfig(Spec):
    """A whole stack: ``gcp:project``/``gcp:region`` plus the ``gke-tpu-llm:*`` keys."""

    stack: str = Field(description="Pulumi stack name (not set in the file; taken from the engine).")
    project: str = Field(alias="gcp:project", pattern=naming.PROJECT_ID_PATTERN, description="GCP project id.")
    region: str = Field(alias="gcp:region", description="GCP region of the cluster and buckets.")
    environment: Environment = Field(Environment.dev, description="dev or prod; decides protection, retention and force-destroy.")
    cluster: ClusterSpec = Field(default_factory=ClusterSpec, description="The GKE cluster.")
    tpu: TpuSpec = Field(description="The TPU slices (one node pool each).")
    buckets: dict[str, BucketSpec] = Field(default_factory=dict, description="Buckets by key.")
    identity: IdentitySpec = Field(default_factory=IdentitySpec, description="Workload Identity.")
    workload: WorkloadSpec = Field(description="The workload that runs on the slices.")
    controllers: ControllersSpec = Field(
        default_factory=ControllersSpec, description="Pinned versions of the in-cluster controllers the workload needs."
    )
    allow_teardown: bool = Field(
        False,
        description="Prepare a prod teardown: lift Pulumi protection from the cluster and TPU pools and switch GKE "
        "deletion protection off, so `pulumi destroy --exclude-protected` removes everything except the buckets, "
        "which stay protected and retained. Off by default because prod must not be deletable by accident; "
        "land it as its own reviewed change and `pulumi up` before the destroy (README: Tearing down prod).",
    )

    @model_validator(mode="after")
    def _cross_rules(self) -> StackConfig:
        rules: list[dict[str, Any]] = []
        gen = tpu_catalog.GENERATIONS[self.tpu.generation]
        unknown_region = self.region not in gce.REGIONS and not (
            self.tpu.allow_undocumented_zone and gce.looks_like_region(self.region)
        )
        if unknown_region:
            close = gce.close_regions(self.region)
            rules.append(
                rule(
                    "gcp:region",
                    self.region,
                    "is not a Compute Engine region in the catalog" + (f" (did you mean {' or '.join(close)}?)" if close else ""),
                    f"regions where {gen.name} exists: {', '.join(gen.regions())}",
                    "pulumi config set gcp:region <region>; or set tpu.allowUndocumentedZone: true if Google opened "
                    "the region after the catalog (components/catalog/gce.py)",
                )
            )
        if self.tpu.region != self.region and not unknown_region:  # an unknown region is the one problem
            rules.append(
                rule(
                    "tpu.zone",
                    self.tpu.zone,
                    f"is not in gcp:region {self.region}",
                    f"zones of {self.region} where {self.tpu.generation} exists: "
                    + (", ".join(z for z in gen.zones if tpu_catalog.zone_region(z) == self.region) or "none"),
                    "pick a zone in the region or change gcp:region",
                )
            )
        if self.cluster.version is not None and not tpu_catalog.gke_version_at_least(self.cluster.version, gen.min_gke_version):
            rules.append(
                rule(
                    "cluster.version",
                    self.cluster.version,
                    f"is below the {gen.name} minimum",
                    f">= {gen.min_gke_version}",
                    f"set cluster.version to {gen.min_gke_version} or newer, or unset it",
                )
            )
        if "gcsFuseCsiDriver" in self.addons and self.tpu.workload_metadata == "GCE_METADATA":
            rules.append(
                rule(
                    "tpu.workloadMetadata",
                    "GCE_METADATA",
                    f"breaks {self.workload.kind.value}: the GCS FUSE CSI driver authenticates through Workload "
                    "Identity, which GCE_METADATA nodes do not offer",
                    "GKE_METADATA",
                    "remove the key (GKE_METADATA is the default)",
                )
            )
        if self.tpu.spot and not self.policy.allow_spot:
            rules.append(
                rule(
                    "tpu.spot",
                    True,
                    f"is not allowed in {self.environment.value} (preemptible serving capacity)",
                    "false",
                    "use on-demand capacity or a reservation",
                )
            )
        if self.environment is Environment.prod:
            if self.cluster.deletion_protection is False and not (self.cluster.allow_replacement or self.allow_teardown):
                rules.append(
                    rule(
                        "cluster.deletionProtection",
                        False,
                        "turns off protection in prod",
                        "true (or unset)",
                        "remove the key; to tear down prod, first switch it off in a reviewed change",
                    )
                )
            if self.allow_teardown and self.cluster.deletion_protection is True:
                rules.append(
                    rule(
                        "cluster.deletionProtection",
                        True,
                        "contradicts allowTeardown: GKE would refuse to delete the cluster",
                        "false (or unset)",
                        "remove cluster.deletionProtection, or remove allowTeardown",
                    )
                )
            for key, bucket in self.buckets.items():
                if bucket.force_destroy:
                    rules.append(
                        rule(
                            f"buckets.{key}.forceDestroy",
                            True,
                            "would delete prod data on teardown",
                            "false (or unset)",
                            "remove the key; prod buckets are retained",
                        )
                    )
        for key in self.identity.bucket_roles:
            if key not in self.buckets:
                rules.append(
                    rule(
                        f"identity.bucketRoles.{key}",
                        key,
                        "names no bucket of this stack",
                        ", ".join(self.buckets) or "no buckets defined",
                        "use a key under gke-tpu-llm:buckets",
                    )
                )
        # Workload rules that need the pools, buckets or model (e.g. HPA max <= pool nodes) live with
        # the workload's spec; this file only dispatches to the active section.
        rules += self.workload.section.stack_rules(self)
        # Which buckets the workload reads or writes, and the least role on each, likewise.
        rules += bucket_rules(self.workload.section.bucket_needs(self), self.buckets, self.identity.bucket_roles)
        rules += self._name_rules()
        raise_rules(rules)
        return self

    def _name_rules(self) -> list[dict[str, Any]]:
        """Every physical name the stack generates meets its service's rules and belongs to one
        resource; each problem names the key that changes the name (the stack name is not a key)."""
        rules: list[dict[str, Any]] = []
        from_stack = f"(derived from the stack name {self.stack!r}) "
        for problem in naming.stack_name_problems(self.stack):
            rules.append(
                rule(
                    "(stack name)",
                    self.stack,
                    problem,
                    "letters, digits, '_', '.' and '-'",
                    "rename the stack (pulumi stack rename), or the --config file Pulumi.<stack>.yaml",
                )
            )
        for problem in naming.label_value_problems(self.labels["stack"]):
            problem = f"gives the label value {self.labels['stack']!r}, which {problem}"
            rules.append(rule("(stack name)", self.stack, problem, "", "rename the stack"))
        if self.cluster.name is None:
            for problem in naming.gke_name_problems(self.cluster_name):
                rules.append(
                    rule("cluster.name", self.cluster_name, from_stack + problem, naming.GKE_NAME_PATTERN, "set cluster.name")
                )
        for problem in naming.namespace_problems(self.namespace) if self.identity.namespace is None else []:
            rules.append(
                rule(
                    "identity.namespace",
                    self.namespace,
                    from_stack + problem,
                    "a namespace of this stack's own (not kube-*, gke-*, gmp-*, "
                    + ", ".join(sorted(naming.RESERVED_NAMESPACES))
                    + ")",
                    "set identity.namespace to another name (or rename the stack)",
                )
            )
        bucket_names: dict[str, str] = {}
        for key, bucket in self.buckets.items():
            if not re.match(BUCKET_KEY_PATTERN, key):
                rules.append(
                    rule(
                        f"buckets.{key}",
                        key,
                        "is not a bucket key (it becomes part of the bucket name)",
                        "lowercase letters, digits, '-' and '_', at most 63, alphanumeric at both ends",
                        "rename the key (and its identity.bucketRoles entry)",
                    )
                )
                continue
            name = bucket_names[key] = self.bucket_name(key)
            for problem in naming.bucket_name_problems(name):
                rules.append(
                    rule(
                        f"buckets.{key}",
                        name,
                        f"is the bucket name <project>-<stack>-<key> and {problem}",
                        "3-63 lowercase letters, digits, '-' or '_'; no 'goog' prefix; no 'google'",
                        "rename the key, or the stack",
                    )
                )
            for problem in naming.label_value_problems(naming.label_value(bucket.purpose)):
                rules.append(rule(f"buckets.{key}.purpose", bucket.purpose, problem, "a short label", "shorten it"))
        for name, keys in naming.collisions(bucket_names).items():
            for key in keys[1:]:
                rules.append(
                    rule(
                        f"buckets.{key}",
                        name,
                        f"is the bucket name of buckets.{keys[0]} too ('_' becomes '-' and long names are cut)",
                        "bucket keys that differ after that mapping",
                        f"rename buckets.{key} (and its identity.bucketRoles entry)",
                    )
                )
        accounts: dict[str, str] = {}
        if self.identity.mode == "gsa":
            accounts["identity.serviceAccount"] = naming.service_account_id(self.stack, self.identity.service_account)
            display = naming.workload_gsa_display_name(self.stack, self.namespace, self.identity.service_account)
            for problem in naming.display_name_problems(display):
                problem = f"is the service account's display name and {problem}"
                rules.append(rule("identity.serviceAccount", display, problem, "", "use shorter names"))
        # Every stack's node pools run as its own node service account (components/identity.py).
        accounts["(stack name)"] = naming.service_account_id(self.stack, "tpu-nodes")
        node_display = naming.node_gsa_display_name(self.stack, pods_act_as_it=self.tpu.workload_metadata == "GCE_METADATA")
        for problem in naming.display_name_problems(node_display):
            problem = f"gives the node service account a display name that {problem}"
            rules.append(rule("(stack name)", self.stack, problem, "", "rename the stack"))
        for key, account_id in accounts.items():
            for problem in naming.service_account_id_problems(account_id):
                problem = f"{from_stack}is a Google service-account id and {problem}"
                rules.append(rule(key, account_id, problem, "", "rename the stack or the key"))
        for account_id in naming.collisions(accounts):
            rules.append(
                rule(
                    "identity.serviceAccount",
                    self.identity.service_account,
                    f"gives the workload service account the id {account_id!r}, which the stack's node service account "
                    "uses too",
                    f"any name other than {self.identity.service_account!r}",
                    "set identity.serviceAccount to another name",
                )
            )
        for pool in self.pool_names():
            for problem in naming.gke_name_problems(pool):
                problem = f"gives the node pool name {pool!r}, which {problem}"
                rules.append(rule("tpu.slices", self.tpu.slices, problem, "", "use fewer slices"))
        return rules

    # ---- derived values (never configured) ----

    @property
    def policy(self) -> EnvironmentPolicy:
        return ENVIRONMENTS[self.environment]

    @property
    def namespace(self) -> str:
        """The workloads' namespace: configured, or the stack name (see ``identity.namespace``)."""
        return self.identity.namespace or naming.dns_label(self.stack)

    @property
    def cluster_allowed_to_go(self) -> bool:
        """A reviewed change allows the cluster to be replaced or deleted (the policy pack's label)."""
        return self.cluster.allow_replacement or self.allow_teardown

    @property
    def pools_allowed_to_go(self) -> bool:
        """A reviewed change allows the TPU pools to be replaced or deleted (the policy pack's label)."""
        return self.tpu.allow_replacement or self.allow_teardown

    @property
    def cluster_protected(self) -> bool:
        return self.policy.protect and not self.cluster_allowed_to_go

    @property
    def pools_protected(self) -> bool:
        return self.policy.protect and not self.pools_allowed_to_go

    def labels_for(self, allow_replacement: bool) -> dict[str, str]:
        """Resource labels, with the allowance marker the policy pack reads when set."""
        return self.labels | ({ALLOW_REPLACE_LABEL: "true"} if allow_replacement else {})

    @property
    def cluster_name(self) -> str:
        return self.cluster.name or naming.gke_name(self.stack)

    @property
    def cluster_location(self) -> str:
        return self.region if self.cluster.location_type == "regional" else self.tpu.zone

    @property
    def deletion_protection(self) -> bool:
        dp = self.cluster.deletion_protection
        if dp is None:
            # A teardown must get past GKE's own guard as well as Pulumi's protect.
            return self.policy.deletion_protection and not self.allow_teardown
        return dp

    @property
    def addons(self) -> frozenset[str]:
        return WORKLOAD_ADDONS[self.workload.kind]

    @property
    def labels(self) -> dict[str, str]:
        """GCP resource labels on everything the stack creates (teardown sweeps find them by these)."""
        return {"app": "gke-tpu-llm", "stack": naming.label_value(self.stack), "environment": self.environment.value}

    def bucket_name(self, key: str) -> str:
        return naming.bucket_name(self.project, self.stack, key)

    def bucket_force_destroy(self, key: str) -> bool:
        fd = self.buckets[key].force_destroy
        return self.policy.force_destroy if fd is None else fd

    def pool_names(self) -> list[str]:
        """Node-pool names, one per slice (``tpu-slice-0``): the index only, never the shape, so a
        topology or machine-type change replaces the same pool instead of creating a second one."""
        return [naming.node_pool_name(i) for i in range(self.tpu.slices)]


# ---- loading and error reporting ----

_TOP_KEYS = {"environment", "cluster", "tpu", "buckets", "identity", "workload", "controllers", "allowTeardown"}
_GCP_KEYS = {"gcp:project", "gcp:region"}


def _format_key(loc: Sequence[str | int]) -> str:
    if not loc:
        return f"{NAMESPACE}"
    head, *rest = [str(p) for p in loc]
    if head.startswith(("gcp:", "(")):  # gcp:project; "(stack name)" is not a key
        return head
    return f"{NAMESPACE}:{head}" + "".join(f".{p}" for p in rest)


def _model_at(loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The spec class that owns the key at ``loc`` (for listing allowed keys)."""
    model: Any = StackConfig
    for part in loc[:-1]:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
            if field is None:
                return None
            model = field.annotation
        # dict[str, Spec] / Spec | None: step into the value type
        args = getattr(model, "__args__", ())
        specs = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if specs:
            model = specs[0]
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _allowed_keys(model: type[BaseModel]) -> str:
    return ", ".join(f.alias or n for n, f in model.model_fields.items())


def violations_from(error: ValidationError) -> list[Violation]:
    out: list[Violation] = []
    for err in error.errors(include_url=False):
        loc = [p for p in err["loc"]]
        ctx = err.get("ctx") or {}
        if err["type"] == "stack_rules":
            for r in ctx["rules"]:
                out.append(
                    Violation(_format_key([*loc, *r["path"].split(".")]), r["value"], r["problem"], r["allowed"], r["fix"])
                )
            continue
        key = _format_key(loc)
        if err["type"] == "extra_forbidden":
            owner = _model_at(loc)
            allowed = _allowed_keys(owner) if owner else "see the README's configuration reference"
            names = [f.alias or n for n, f in owner.model_fields.items()] if owner else []
            close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6) if loc else []
            hint = f" (did you mean {close[0]}?)" if close else ""
            out.append(Violation(key, err["input"], f"is an unknown key{hint}", allowed, "remove it or fix its spelling"))
        elif err["type"] == "missing":
            out.append(Violation(key, None, "is required", "see the README's configuration reference", f"set {key}"))
        elif err["type"] in ("literal_error", "enum"):
            out.append(Violation(key, err["input"], "is not an allowed value", str(ctx.get("expected")), "use an allowed value"))
        elif err["type"] == "pinned_image":
            out.append(
                Violation(
                    key,
                    err["input"],
                    str(ctx.get("problem")),
                    "<repository>:<tag> or <repository>@sha256:<digest>",
                    "pin a released tag or a digest",
                )
            )
        elif err["type"] == "string_pattern_mismatch":
            out.append(Violation(key, err["input"], "has the wrong format", f"matches {ctx.get('pattern')}", "correct the value"))
        else:
            out.append(_typed_violation(key, err["type"], err["input"], err["msg"], ctx))
    return out


_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
_TYPES = {
    "finite_number": ("is not a finite number", "a finite number (not .inf or .nan)"),
    "int_type": ("is not a whole number", "an integer"),
    "int_parsing": ("is not a whole number", "an integer"),
    "int_from_float": ("is not a whole number", "an integer"),
    "float_type": ("is not a number", "a number"),
    "float_parsing": ("is not a number", "a number"),
    "string_type": ("is not a string", "a string (quote it in YAML)"),
    "bool_type": ("is not a boolean", "true or false"),
    "bool_parsing": ("is not a boolean", "true or false"),
    "dict_type": ("is not a mapping", "a mapping of keys (see the README's configuration reference)"),
    "model_type": ("is not a mapping", "a mapping of keys (see the README's configuration reference)"),
    "model_attributes_type": ("is not a mapping", "a mapping of keys (see the README's configuration reference)"),
    "list_type": ("is not a list", "a YAML list"),
}


def _typed_violation(key: str, kind: str, value: Any, message: str, ctx: Mapping[str, Any]) -> Violation:
    """A violation for pydantic's built-in checks: bounds, types, finiteness."""
    if kind in _BOUNDS:
        limit = next(iter(ctx.values()), None)
        return Violation(
            key,
            value,
            "is out of range",
            f"{_BOUNDS[kind]} {limit} (the README's configuration reference says why)",
            "use a value within the bound",
        )
    if kind in _TYPES:
        problem, allowed = _TYPES[kind]
        return Violation(key, value, problem, allowed, "correct the value")
    return Violation(key, value, f"is invalid ({message})", "see the README's configuration reference", "correct the value")


# Secret config keys (``pulumi config set --secret gke-tpu-llm:<key>``) and what they are. Their
# values never enter the specs: components read them with ``pulumi.Config.require_secret``.
SECRETS: Mapping[str, str] = {
    "hfToken": "Hugging Face access token of an account that accepted the model's license",
    "metaCheckpointUrl": "Meta's signed Llama download URL (from the license e-mail), for the checkpoint "
    "conversion Job (required while workload.jetstream.conversion.enabled is true)",
    "vllmApiKey": "API key clients of the vLLM endpoint send as `Authorization: Bearer <key>` (required while "
    "workload.vllm.service.auth is api-key)",
}


def required_secrets(workload: object) -> tuple[str, ...]:
    """Secrets the raw ``gke-tpu-llm:workload`` value needs, as its section says (e.g. vLLM's Hugging
    Face token; the Meta URL only while checkpoint conversion is on). () when the section is invalid:
    validation reports that instead."""
    if not isinstance(workload, Mapping):
        return ()
    kinds = {k.value: k for k in WorkloadKind}
    kind = kinds.get(str(workload.get("kind")))
    if kind is None:
        return ()
    section = WORKLOAD_SECTION[kind]
    spec_class = WorkloadSpec.model_fields[section].annotation
    try:
        spec = spec_class.model_validate(workload.get(to_camel(section), {}))  # type: ignore[union-attr]
    except ValidationError:
        return ()
    return tuple(spec.required_secrets())


def _secret_violations(values: Mapping[str, Any], secret_keys: Collection[str]) -> list[Violation]:
    out: list[Violation] = []
    for key in SECRETS:
        if key in values and f"{NAMESPACE}:{key}" not in secret_keys:
            out.append(
                Violation(
                    _format_key([key]),
                    "(plaintext)",
                    "is stored in plaintext",
                    "a secret value",
                    f"pulumi config set --secret {NAMESPACE}:{key} <value>",
                )
            )
    workload = values.get("workload")
    kind = workload.get("kind") if isinstance(workload, Mapping) else None
    for key in required_secrets(workload):
        if key not in values:
            out.append(
                Violation(
                    _format_key([key]),
                    None,
                    f"is required for {kind} ({SECRETS[key]})",
                    "a secret value",
                    f"pulumi config set --secret {NAMESPACE}:{key} <value>",
                )
            )
    return out


def parse_stack_config(values: Mapping[str, Any], stack: str, secret_keys: Collection[str] = ()) -> StackConfig:
    """Validate raw config (``{"gcp:project": ..., "tpu": {...}, ...}``); raise ConfigError with every problem.

    ``secret_keys`` are the full keys the engine holds as secrets; secret values are checked for
    presence and secrecy only and are not part of the returned config.
    """
    unknown = [k for k in values if k not in _TOP_KEYS and k not in _GCP_KEYS and k not in SECRETS]
    pre: list[Violation] = [_unknown_key(k, values[k]) for k in unknown]
    pre += _secret_violations(values, secret_keys)
    data = {k: v for k, v in values.items() if k not in unknown and k not in SECRETS}
    try:
        config = StackConfig.model_validate({"stack": stack, **data})
    except ValidationError as exc:
        raise ConfigError(pre + violations_from(exc)) from None
    if pre:
        raise ConfigError(pre)
    return config


def _quote(text: str) -> str:
    """A shell word; config keys are always single-quoted, as the README writes them."""
    return f"'{text}'" if "'" not in text else shlex.quote(text)


def _shell_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return shlex.quote(str(value)) if isinstance(value, (str, int, float)) else "<value>"


def _unknown_key(key: str, value: Any) -> Violation:
    """An unknown ``gke-tpu-llm:`` key: a flat dotted key (``pulumi config set`` without ``--path``) or a typo."""
    full = f"{NAMESPACE}:{key}"
    head = key.split(".", 1)[0]
    if "." in key and head in _TOP_KEYS:
        if isinstance(value, (Mapping, list)):
            command = f"set each value with pulumi config set --path {_quote(full + '.<key>')} <value>"
        else:
            command = f"pulumi config set --path {_quote(full)} {_shell_value(value)}"
        return Violation(
            full,
            value,
            "is a flat key: `pulumi config set` without --path stored the dotted name as one key, which the "
            f"program does not read (it reads {head} as a structured value)",
            f"the nested key {full}, set with --path",
            f"pulumi config rm {shlex.quote(full)}; then {command}",
        )
    allowed = sorted(_TOP_KEYS | set(SECRETS))
    close = difflib.get_close_matches(head, allowed, n=1, cutoff=0.6)
    return Violation(
        full,
        value,
        "is an unknown key" + (f" (did you mean {NAMESPACE}:{close[0]}?)" if close else ""),
        ", ".join(allowed) + " (under gke-tpu-llm:) and gcp:project, gcp:region",
        "remove it or fix its spelling",
    )


ALLOWED_NAMESPACES = (NAMESPACE, "gcp", "kubernetes", "pulumi")
"""Config namespaces a stack may hold: the program's own, its providers' and Pulumi's."""


def split_namespaces(full: Mapping[Any, Any]) -> tuple[dict[str, Any], list[Violation]]:
    """Full config keys (``gke-tpu-llm:tpu``, ``gcp:project``, ...) -> the values ``parse_stack_config``
    reads (our keys without the namespace, plus ``gcp:project``/``gcp:region``) and a violation for
    every key the program would otherwise drop silently: a key under a namespace it does not know
    (a misspelt ``gke-tpu-lm:environment: prod`` would plan a prod stack as dev) or without one."""
    values: dict[str, Any] = {}
    problems: list[Violation] = []
    for full_key, value in full.items():
        if not isinstance(full_key, str):
            problems.append(
                Violation(
                    str(full_key),
                    value,
                    f"is not a config key (a {type(full_key).__name__}, not a <namespace>:<key> string)",
                    f"{NAMESPACE}:<key>, gcp:project, gcp:region",
                    "quote the key or remove it",
                )
            )
            continue
        ns, sep, key = full_key.partition(":")
        if not sep or not ns or not key:
            bare = full_key.strip(":")
            suggest = f"{NAMESPACE}:{bare}" if bare.split(".", 1)[0] in _TOP_KEYS | set(SECRETS) else f"{NAMESPACE}:<key>"
            problems.append(
                Violation(
                    full_key if full_key.strip() else repr(full_key),
                    value,
                    "has no namespace (Pulumi config keys are <namespace>:<key>)",
                    ", ".join(f"{n}:<key>" for n in ALLOWED_NAMESPACES),
                    f"write it as {suggest}",
                )
            )
        elif ns == NAMESPACE:
            values[key] = value
        elif full_key in _GCP_KEYS:
            values[full_key] = value
        elif ns not in ALLOWED_NAMESPACES:
            close = difflib.get_close_matches(ns, ALLOWED_NAMESPACES, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}:{key}?)" if close else ""
            fix = "remove it (pulumi config rm " + shlex.quote(full_key) + ")"
            if close:
                right = f"{close[0]}:{key}"
                again = (
                    f"pulumi config set {shlex.quote(right)} {_shell_value(value)}"
                    if not isinstance(value, (Mapping, list))
                    else f"move the block to {right}"
                )
                fix = f"rename it to {right}: pulumi config rm {shlex.quote(full_key)}; {again}"
            problems.append(
                Violation(
                    full_key,
                    value,
                    f"is under the namespace {ns!r}, which this program does not read{hint}",
                    "keys under " + ", ".join(f"{n}:" for n in ALLOWED_NAMESPACES),
                    fix,
                )
            )
        # gcp:<other>, kubernetes:*, pulumi:* configure the providers and the engine, not this program.
    return values, problems


def parse_full_config(full: Mapping[Any, Any], stack: str, secret_keys: Collection[str] = ()) -> StackConfig:
    """``parse_stack_config`` for config with full keys (all namespaces, as a stack file or the
    Pulumi runtime holds it); namespace problems are reported with every other problem."""
    values, problems = split_namespaces(full)
    try:
        config = parse_stack_config(values, stack, secret_keys)
    except ConfigError as error:
        raise ConfigError([*problems, *error.violations]) from None
    if problems:
        raise ConfigError(problems)
    return config


def _decode(raw: Any) -> Any:
    """Pulumi keeps structured config as JSON text; plain strings stay strings."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def secret_keys_from_runtime() -> set[str]:
    from pulumi.runtime import config as runtime_config

    return set(runtime_config.get_config_secret_keys_env()) | set(runtime_config._SECRET_KEYS.get())


def raw_config_from_runtime() -> dict[str, Any]:
    """Every config key of the running Pulumi program, in every namespace (full keys), with the
    ``gke-tpu-llm:*`` values decoded; ``split_namespaces`` reports the keys no one reads."""
    from pulumi.runtime import config as runtime_config  # only here: config.py stays importable without an engine

    merged: dict[str, Any] = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    return {
        full_key: _decode(raw) if full_key.partition(":")[0] == NAMESPACE else raw for full_key, raw in merged.items()
    }


def load_stack_config() -> StackConfig:
    """The single loader used by ``__main__.py``."""
    import pulumi

    return parse_full_config(raw_config_from_runtime(), pulumi.get_stack(), secret_keys_from_runtime())
