"""Typed stack configuration: the one place where settings, defaults and cross-field rules live.

A stack file holds a few structured keys under the ``gke-tpu-llm:`` namespace plus ``gcp:project``
and ``gcp:region``. ``load_stack_config`` reads them from the Pulumi runtime, validates them into
frozen pydantic specs and raises one ``ConfigError`` listing every violation (key path, bad value,
allowed values, fix) before any resource is registered.

Hardware facts are never configured: chips, hosts, node counts, selectors and TPU requests come
from ``components.catalog``; they are exposed here as derived properties.
"""

from __future__ import annotations

import json
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

from components import naming
from components.catalog import tpu as tpu_catalog
from components.specs.base import Spec, raise_rules, rule
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
        return f"{self.key}: {self.value!r} {self.problem}.{allowed} Fix: {self.fix}."


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
    nodes_per_zone: Annotated[int, Field(ge=1, le=10)] = Field(
        1,
        description="Nodes per zone of the system pool. Defaults to 1 because a regional cluster already "
        "spreads it over the region's zones.",
    )
    disk_size_gb: Annotated[int, Field(ge=20, le=2000)] = Field(
        100, description="Boot disk of system nodes in GB. Defaults to 100 because GKE's default is 100."
    )


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
        description="Minimum control-plane version (min_master_version). Unset uses the channel default; "
        "when set it must be at or above the minimum of every TPU generation used.",
        pattern=r"^\d+\.\d+(\.\d+)?(-gke\.\d+)?$",
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


class AutoscalingSpec(Spec):
    min_nodes: Annotated[int, Field(ge=0)] = Field(description="Total minimum nodes of the pool.")
    max_nodes: Annotated[int, Field(ge=1)] = Field(description="Total maximum nodes of the pool.")

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
    reservation: str | None = Field(None, description="Name of a specific reservation to consume. Unset consumes none.")
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


STORAGE_ROLES = ("roles/storage.objectViewer", "roles/storage.objectUser", "roles/storage.objectAdmin")


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
    max_target_length: Annotated[int, Field(ge=1)] = Field(
        description="Tokens cached per sequence (MaxText max_target_length, vLLM --max-model-len, Saxml input "
        "length + decode steps; for training, the sequence length)."
    )
    max_prefill_length: Annotated[int, Field(ge=1)] | None = Field(
        None, description="MaxText max_prefill_predict_length (serving); below maxTargetLength."
    )
    per_device_batch_size: Annotated[float, Field(gt=0)] | None = Field(
        None, description="Sequences per chip (MaxText per_device_batch_size); the cache holds this x chips."
    )
    batch_size: Annotated[int, Field(ge=1)] | None = Field(
        None, description="Sequences per slice, where the engine counts per slice (Saxml, vLLM)."
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

    @model_validator(mode="after")
    def _cross_rules(self) -> StackConfig:
        rules: list[dict[str, Any]] = []
        gen = tpu_catalog.GENERATIONS[self.tpu.generation]
        if self.tpu.region != self.region:
            rules.append(
                rule(
                    "tpu.zone",
                    self.tpu.zone,
                    f"is not in gcp:region {self.region}",
                    f"zones of {self.region} where {self.tpu.generation} exists: "
                    + (
                        ", ".join(z for z in self.tpu.slice.generation.zones if tpu_catalog.zone_region(z) == self.region)
                        or "none"
                    ),
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
            if self.cluster.deletion_protection is False and not self.cluster.allow_replacement:
                rules.append(
                    rule(
                        "cluster.deletionProtection",
                        False,
                        "turns off protection in prod",
                        "true (or unset)",
                        "remove the key; to tear down prod, first switch it off in a reviewed change",
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
        raise_rules(rules)
        return self

    # ---- derived values (never configured) ----

    @property
    def policy(self) -> EnvironmentPolicy:
        return ENVIRONMENTS[self.environment]

    @property
    def namespace(self) -> str:
        """The workloads' namespace: configured, or the stack name (see ``identity.namespace``)."""
        return self.identity.namespace or naming.dns_label(self.stack)

    @property
    def cluster_protected(self) -> bool:
        return self.policy.protect and not self.cluster.allow_replacement

    @property
    def pools_protected(self) -> bool:
        return self.policy.protect and not self.tpu.allow_replacement

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
        return self.policy.deletion_protection if dp is None else dp

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
        """Deterministic node-pool names, one per slice (``tpu-v6e-4x4-0``)."""
        return [naming.node_pool_name(self.tpu.slice.key, i) for i in range(self.tpu.slices)]


# ---- loading and error reporting ----

_TOP_KEYS = {"environment", "cluster", "tpu", "buckets", "identity", "workload", "controllers"}
_GCP_KEYS = {"gcp:project", "gcp:region"}


def _format_key(loc: Sequence[str | int]) -> str:
    if not loc:
        return f"{NAMESPACE}"
    head, *rest = [str(p) for p in loc]
    if head.startswith("gcp:"):
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
            out.append(Violation(key, err["input"], "is an unknown key", allowed, "remove it or fix its spelling"))
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
            out.append(
                Violation(
                    key,
                    err["input"],
                    f"is invalid ({err['msg']})",
                    "see the README's configuration reference",
                    "correct the value",
                )
            )
    return out


# Secret config keys (``pulumi config set --secret gke-tpu-llm:<key>``) and what they are. Their
# values never enter the specs: components read them with ``pulumi.Config.require_secret``.
SECRETS: Mapping[str, str] = {
    "hfToken": "Hugging Face access token of an account that accepted the model's license",
    "metaCheckpointUrl": "Meta's signed Llama download URL (from the license e-mail), for the checkpoint "
    "conversion Job (required while workload.jetstream.conversion.enabled is true)",
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
    pre: list[Violation] = [
        Violation(
            _format_key([k]),
            values[k],
            "is an unknown key",
            ", ".join(sorted(_TOP_KEYS | set(SECRETS))) + " (under gke-tpu-llm:) and gcp:project, gcp:region",
            "remove it or fix its spelling",
        )
        for k in unknown
    ]
    pre += _secret_violations(values, secret_keys)
    data = {k: v for k, v in values.items() if k not in unknown and k not in SECRETS}
    try:
        config = StackConfig.model_validate({"stack": stack, **data})
    except ValidationError as exc:
        raise ConfigError(pre + violations_from(exc)) from None
    if pre:
        raise ConfigError(pre)
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
    """Every ``gke-tpu-llm:*`` key plus ``gcp:project``/``gcp:region`` from the running Pulumi program."""
    from pulumi.runtime import config as runtime_config  # only here: config.py stays importable without an engine

    merged: dict[str, Any] = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    values: dict[str, Any] = {}
    for full_key, raw in merged.items():
        ns, _, key = full_key.partition(":")
        if ns == NAMESPACE:
            values[key] = _decode(raw)
        elif full_key in _GCP_KEYS:
            values[full_key] = raw
    return values


def load_stack_config() -> StackConfig:
    """The single loader used by ``__main__.py``."""
    import pulumi

    return parse_stack_config(raw_config_from_runtime(), pulumi.get_stack(), secret_keys_from_runtime())
