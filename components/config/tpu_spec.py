"""``gke-tpu-llm:tpu``: the TPU slices of a stack (generation, topology, zone, capacity tiers,
autoscaling), validated against the TPU catalog; the slice itself is exposed as derived properties.

Split from ``components.config.platform`` (cluster, buckets, identity, controllers), which it shares
value types with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ..catalog import tpu as tpu_catalog
from .base import Spec
from .errors import closest, raise_rules, rule
from .gke_rules import is_fallback_ladder
from .platform import ThreadsPerCore


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


def topology_layouts(raw: object) -> tuple[tpu_catalog.TpuSlice, ...]:
    """The slices a raw ``tpu`` section's topology builds when its machine type is what fails
    ``TpuSpec._catalog_rules`` (one no layout has, or none where the topology has two): the machine
    type only picks among these, so the planner can check the topology although the section does not
    validate (``config.resolve.validated``). () for any other section."""
    if not isinstance(raw, Mapping):
        return ()
    gen, topology, machine_type = (raw.get(k) for k in ("generation", "topology", "machineType"))
    # Any YAML value may be here (a list, a mapping): only well-typed keys are looked up.
    if not isinstance(gen, str) or not isinstance(topology, str) or not isinstance(machine_type, (str, type(None))):
        return ()
    if gen not in tpu_catalog.GENERATIONS or topology not in tpu_catalog.GENERATIONS[gen].topologies:
        return ()
    layouts = tpu_catalog.layouts(gen, str(topology))
    if machine_type in {s.machine_type for s in layouts} or (machine_type is None and len(layouts) == 1):
        return ()
    return layouts


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
            near = closest(self.generation, tpu_catalog.GENERATIONS)
            raise_rules(
                [
                    rule(
                        "generation",
                        self.generation,
                        "is not a TPU generation in the catalog" + (f" (did you mean {near!r}?)" if near else ""),
                        ", ".join(tpu_catalog.GENERATIONS),
                        f"write {near!r}" if near else "set generation to one of the allowed values",
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
    def pinned_multi_host(self) -> bool:
        """Whether a pinned topology's slice spans several hosts (False while the topology is unset: the
        planner's choice, which the rules that depend on it see once the stack resolves)."""
        return self.topology is not None and self.slice.multi_host

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
