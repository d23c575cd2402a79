"""Platform specs: the cluster, its TPU slices, buckets, Workload Identity and the pinned controllers.

Hardware facts are never configured: chips, hosts, node counts, selectors and TPU requests come
from ``components.catalog``; they are exposed here as derived properties.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from components import crds
from components.catalog import tpu as tpu_catalog
from components.config import naming
from components.config.addresses import covers_everyone
from components.config.base import BucketRole, Cidr, Spec, machine_type_rules
from components.config.errors import raise_rules, rule
from components.config.gke_rules import is_fallback_ladder

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


WorkloadMetadata = Literal["GKE_METADATA", "GCE_METADATA"]
"""Node metadata modes of a TPU pool (``tpu.workloadMetadata``)."""

CapacityType = Literal["onDemand", "spot", "reservation", "flexStart", "queuedProvisioning"]
"""How a TPU pool obtains its VMs (``tpu.capacity[].type``)."""

RESERVATION_PATTERN = (
    r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
    r"(/reservationBlocks/[a-z]([-a-z0-9]{0,61}[a-z0-9])?(/reservationSubBlocks/[a-z]([-a-z0-9]{0,61}[a-z0-9])?)?)?$"
)
"""A specific reservation: ``NAME``, shared ``projects/P/reservations/NAME``, and either followed by
``/reservationBlocks/B`` or ``/reservationBlocks/B/reservationSubBlocks/S`` (the forms GKE's
``reservation_affinity`` values and xpk's ``--reservation`` accept)."""


class CapacityTierSpec(Spec):
    type: CapacityType = Field(
        description="onDemand: on-demand VMs. spot: Spot VMs (preemptible, cheaper; not in prod). reservation: a "
        "specific reservation (set reservation). flexStart: Dynamic Workload Scheduler flex-start VMs (the pool "
        "scales from zero; nodes live at most maxRunHours). queuedProvisioning: DWS queued provisioning (the slice "
        "is created all at once when Kueue admits the workload through a ProvisioningRequest)."
    )
    reservation: str | None = Field(
        None,
        pattern=RESERVATION_PATTERN,
        description="type reservation only: the reservation's name, projects/<project>/reservations/<name> for a "
        "shared one, optionally followed by /reservationBlocks/<block>[/reservationSubBlocks/<sub-block>] to "
        "target one block or sub-block.",
    )
    max_run_hours: Annotated[int, Field(ge=1, le=168)] | None = Field(
        None,
        description="flexStart and queuedProvisioning only: hours a node may run before GKE reclaims it "
        "(node_config.max_run_duration). Unset sends GKE's maximum, 7 days (168), because the field is "
        "create-only and a value GKE filled in by itself would differ from the program's.",
    )


class TpuSpec(Spec):
    generation: str | None = Field(
        None,
        description="TPU generation: a key of the TPU catalog (components/catalog/tpu.py GENERATIONS). Unset lets "
        "the capacity planner pick the cheapest fitting slice across the generations documented in the zone "
        "(in the zone's region with allowUndocumentedZone); plan lists the alternatives it weighed.",
    )
    topology: str | None = Field(
        None,
        description="Slice topology, e.g. 4x4 (a catalog topology of the generation; needs generation). Unset lets "
        "the capacity planner pick the cheapest slice of the generation that fits the workload; set, it is verified.",
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
    capacity: list[CapacityTierSpec] | None = Field(
        None,
        description="Ordered capacity tiers of every slice, first preferred (e.g. reservation, flexStart, spot, "
        "onDemand); each type at most once. Every tier is its own node pool per slice: the first keeps "
        "tpu-slice-<i> and holds the slice (a flexStart or queuedProvisioning first tier scales from zero), each "
        "later one is tpu-slice-<i>-<type> and scales from zero (a multi-host slice all at once), so a fallback "
        "costs nothing until the tiers before it are full. queuedProvisioning is a tier of its own (multi-host "
        "slices only). Unset is one tier from spot/reservation (on-demand when neither is set).",
    )
    spot: bool = Field(
        False,
        description="Shorthand for capacity: [{type: spot}]: Spot VMs (preemptible, cheaper). Defaults to on-demand; "
        "not allowed in prod.",
    )
    allow_replacement: bool = Field(
        False,
        description="Lift Pulumi protection from the TPU pools for one reviewed change that must replace them "
        "(a topology or machine-type change in prod). Off by default because a replaced slice may not come back.",
    )
    reservation: str | None = Field(
        None,
        pattern=RESERVATION_PATTERN,
        description="Shorthand for capacity: [{type: reservation, reservation: ...}]: the specific reservation to "
        "consume: its name (a Compute Engine name: lowercase letters, digits and '-', at most 63) or, for a "
        "reservation shared from another project, projects/<project-id>/reservations/<name>; either may end in "
        "/reservationBlocks/<block>[/reservationSubBlocks/<sub-block>]. Unset consumes none.",
    )
    autoscaling: AutoscalingSpec | None = Field(
        None,
        description="Total min/max nodes for single-host pools. Multi-host slices are atomic and are not autoscaled here.",
    )
    workload_metadata: WorkloadMetadata = Field(
        "GKE_METADATA",
        description="Node metadata mode. Defaults to GKE_METADATA because it enables Workload Identity and "
        "hides the node's service-account credentials from pods.",
    )
    threads_per_core: ThreadsPerCore | None = Field(
        None, description="SMT threads per core on the TPU VMs; unset keeps the machine default."
    )
    disk_size_gb: Annotated[int, Field(ge=50, le=4000)] = Field(
        100, description="Boot disk per TPU VM in GB. Defaults to 100 because that is GKE's default."
    )

    @model_validator(mode="after")
    def _catalog_rules(self) -> TpuSpec:
        rules: list[dict[str, Any]] = []
        if self.generation is None:
            return self._unset_generation_rules()
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

    @model_validator(mode="after")
    def _capacity_rules(self) -> TpuSpec:
        raise_rules(self.capacity_rules())
        return self

    def capacity_rules(self) -> list[dict[str, Any]]:
        """What GKE accepts for each capacity tier and their combination (prod's spot rule is the
        stack's: components/config/stack.py). Sources: GoogleCloudPlatform/cluster-toolkit
        modules/compute/gke-node-pool/main.tf preconditions (HEAD 104708037, 2026-06-25), GKE
        'Run a large-scale workload with flex-start with queued provisioning'
        (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest) and the catalog's
        flex-start zones (components/catalog/tpu.py SRC_FLEX_START_ZONES)."""
        rules: list[dict[str, Any]] = []
        if self.capacity is None:
            return rules
        if not self.capacity:
            return [rule("capacity", [], "has no tier", "one or more tiers", "list at least one tier, or remove the key")]
        for key, value in (("spot", self.spot or None), ("reservation", self.reservation)):
            if value:
                rules.append(
                    rule(
                        key,
                        value,
                        "cannot be combined with capacity (it is the one-tier shorthand of capacity)",
                        "capacity alone, or the shorthand alone",
                        f"remove {key} and list it as a tier of capacity"
                        + (" ({type: spot})" if key == "spot" else " ({type: reservation, reservation: ...})"),
                    )
                )
        seen: dict[str, int] = {}
        scale_from_zero = tpu_catalog.DWS_CAPACITY_TYPES
        gen = tpu_catalog.GENERATIONS.get(self.generation) if self.generation else None
        tpu_slice = self._slice_or_none()
        for i, tier in enumerate(self.capacity):
            at = f"capacity.{i}"
            if tier.type == "reservation" and tier.reservation is None:
                rules.append(
                    rule(
                        f"{at}.reservation",
                        None,
                        "is required for a reservation tier",
                        "NAME, projects/P/reservations/NAME, optionally /reservationBlocks/B[/reservationSubBlocks/S]",
                        "name the specific reservation the tier consumes",
                    )
                )
            if tier.type != "reservation" and tier.reservation is not None:
                rules.append(
                    rule(
                        f"{at}.reservation",
                        tier.reservation,
                        f"is only for type reservation (this tier is {tier.type})",
                        "unset",
                        "remove it, or set the tier's type to reservation",
                    )
                )
            if tier.max_run_hours is not None and tier.type not in scale_from_zero:
                rules.append(
                    rule(
                        f"{at}.maxRunHours",
                        tier.max_run_hours,
                        "is only for flexStart and queuedProvisioning tiers (node_config.max_run_duration; "
                        f"this tier is {tier.type})",
                        "unset",
                        "remove it, or set the tier's type to flexStart",
                    )
                )
            if tier.type in seen:
                rules.append(
                    rule(
                        f"{at}.type",
                        tier.type,
                        f"repeats tier {seen[tier.type]}",
                        "each capacity type at most once (one pool per slice and type: tpu-slice-<i>-<type>)",
                        "remove the repeated tier"
                        + (" (one specific reservation per stack)" if tier.type == "reservation" else ""),
                    )
                )
            seen.setdefault(tier.type, i)
            if tier.type == "queuedProvisioning" and len(self.capacity) > 1:
                rules.append(
                    rule(
                        f"{at}.type",
                        tier.type,
                        "cannot be combined with other tiers: a queued-provisioning pool's nodes are created only for a "
                        "workload Kueue admits through a ProvisioningRequest (GKE taints them cloud.google.com/gke-queued), "
                        "so pods cannot fall back to or from it by scheduling preference, and a Kueue flavor fallback is "
                        "not generated",
                        "queuedProvisioning as the only tier",
                        "remove the other tiers, or use flexStart in a fallback list",
                    )
                )
            if tier.type == "queuedProvisioning" and tpu_slice is not None and not tpu_slice.multi_host:
                rules.append(
                    rule(
                        f"{at}.type",
                        tier.type,
                        f"is for multi-host slices ({self.topology} is one host): GKE obtains all of a queued request's "
                        "nodes at once, and for a workload that fits one node recommends flex-start VMs instead "
                        "(GKE 'Run a large-scale workload with flex-start with queued provisioning')",
                        "flexStart on a single-host slice; queuedProvisioning on a multi-host slice",
                        "set the tier's type to flexStart, or use a multi-host topology",
                    )
                )
            if tier.type in scale_from_zero and self.autoscaling is not None:
                rules.append(
                    rule(
                        "autoscaling",
                        self.autoscaling.model_dump(by_alias=True),
                        f"cannot be combined with a {tier.type} tier (capacity.{i}): its pool autoscales from zero to the "
                        "slice on demand by itself (GKE requires autoscaling with no static node count for it)",
                        "unset",
                        "remove autoscaling, or that tier",
                    )
                )
            if tier.type in scale_from_zero and gen is not None and self.zone not in gen.flex_start_zones:
                if not self.allow_undocumented_zone:
                    rules.append(
                        rule(
                            f"{at}.type",
                            tier.type,
                            f"is not documented for {gen.name} in {self.zone} (flex-start capacity, which queued "
                            "provisioning uses too)",
                            ", ".join(gen.flex_start_zones) or f"no documented {gen.name} flex-start zone",
                            "use a listed zone or another tier, or set allowUndocumentedZone: true if Google offers it there now",
                        )
                    )
        return rules

    def _unset_generation_rules(self) -> TpuSpec:
        """The planner picks the generation: a topology (which belongs to one generation) cannot be
        pinned, and the zone and a pinned machine type must belong to some generation."""
        rules: list[dict[str, Any]] = []
        if self.topology is not None:
            rules.append(
                rule(
                    "topology",
                    self.topology,
                    "is set but generation is not: a topology is a topology of one generation",
                    "generation and topology both set, or both unset",
                    "set tpu.generation too, or remove tpu.topology to let the planner choose both",
                )
            )
        machine_types = sorted({m for g in tpu_catalog.GENERATIONS.values() for m in g.machine_types})
        if self.machine_type is not None and self.machine_type not in machine_types:
            rules.append(
                rule(
                    "machineType",
                    self.machine_type,
                    "is not a TPU machine type in the catalog",
                    ", ".join(machine_types),
                    "use a listed machine type, or remove it",
                )
            )
        if not self.zone_generations() and not self.allow_undocumented_zone:
            zones = sorted({z for g in tpu_catalog.GENERATIONS.values() for z in g.zones})
            rules.append(
                rule(
                    "zone",
                    self.zone,
                    "is not a documented zone of any TPU generation (generation is unset)",
                    ", ".join(zones),
                    "pick a listed zone, or set allowUndocumentedZone: true if Google lists it now",
                )
            )
        raise_rules(rules)
        return self

    def zone_generations(self) -> tuple[str, ...]:
        """Generations the catalog documents in ``zone`` (with ``allowUndocumentedZone``: in its
        region): the planner's candidates when ``generation`` is unset."""
        return tuple(
            g.name
            for g in tpu_catalog.GENERATIONS.values()
            if self.zone in g.zones or (self.allow_undocumented_zone and self.region in g.regions())
        )

    def _slice_or_none(self) -> tpu_catalog.TpuSlice | None:
        if self.topology is None or self.generation is None:
            return None
        return tpu_catalog.find_slice(self.generation, self.topology, self.machine_type)

    @property
    def slice(self) -> tpu_catalog.TpuSlice:
        """The catalog slice; valid by construction once the spec is validated."""
        found = self._slice_or_none()
        if found is None:  # only before the capacity planner has resolved an unset generation or topology
            raise ValueError(f"no resolved slice for {self.generation} {self.topology} {self.machine_type}")
        return found

    @property
    def region(self) -> str:
        return tpu_catalog.zone_region(self.zone)

    @property
    def tiers(self) -> tuple[CapacityTierSpec, ...]:
        """The capacity tiers in order of preference: ``capacity``, else the one tier that ``spot`` or
        ``reservation`` (the shorthands) or neither (on-demand) gives."""
        if self.capacity:
            return tuple(self.capacity)
        if self.reservation:
            return (CapacityTierSpec(type="reservation", reservation=self.reservation),)
        return (CapacityTierSpec(type="spot" if self.spot else "onDemand"),)

    @property
    def nodes_min(self) -> int:
        return self.autoscaling.min_nodes if self.autoscaling else self.slice.hosts

    @property
    def nodes_max(self) -> int:
        return self.autoscaling.max_nodes if self.autoscaling else self.slice.hosts

    def tier_holds(self, tier: int) -> bool:
        """Whether the pool of capacity tier ``tier`` holds its slice (``nodes_min``..``nodes_max``) rather
        than scaling from zero. Only a first tier does, and only when it is the stack's one tier (as
        always) or a reservation (paid for whether used or not): in a fallback ladder an on-demand or
        Spot first tier scales from zero too, so a stock-out on the first ``up`` leaves the ComputeClass
        to try the next tier instead of failing the pool's creation. Flex-start and queued pools always
        scale from zero, as GKE requires."""
        first = self.tiers[0].type
        if tier != 0 or first in tpu_catalog.DWS_CAPACITY_TYPES:
            return False
        return first == "reservation" or not is_fallback_ladder([t.type for t in self.tiers])

    def tier_nodes(self, tier: int) -> tuple[int, int]:
        """(min, max) nodes of one slice's pool in capacity tier ``tier`` (components/program/build.py
        ``pool_args``): ``nodes_min``..``nodes_max`` where the tier holds its slice (:meth:`tier_holds`),
        else from zero."""
        return (self.nodes_min, self.nodes_max) if self.tier_holds(tier) else (0, self.nodes_max)


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
