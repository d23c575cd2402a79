"""``TpuSlicePool``: one GKE node pool per TPU slice, shaped entirely by the catalog.

Rules (from GKE's TPU docs, xpk and cluster-toolkit; each field is decided by a pure function of the
Args in ``components.platform.pool_settings``, where its source is cited):
* node count = hosts of the slice; machine type from the catalog layout.
* multi-host slices get ``placement_policy {type: COMPACT, tpu_topology}`` (tpu7x: plus
  ``policy_name``, a HIGH_THROUGHPUT workload policy the component creates); single-host pools get
  no placement policy, because GKE rejects ``tpu_topology`` on single-host pools.
* one zone (``node_locations``): a slice is one physical block and COMPACT needs a single zone.
* no taint is added by default: GKE taints TPU nodes with ``google.com/tpu`` itself; workloads
  tolerate it. ``node_labels``/``node_taints`` add what a scheduling scheme needs (a ComputeClass's).
* autoscaling only for single-host pools, as *total* min/max; the node count is then owned by the
  autoscaler, so we set ``initial_node_count`` once and ignore it afterwards (no perpetual diff,
  and no replacement: ``initial_node_count`` is create-only).
* capacity (one pool per capacity tier, ``pool_args`` in components/program/build.py): on-demand (no
  setting), ``spot``, a specific ``reservation``, ``flex_start`` and ``queued_provisioning`` (DWS).
  Flex-start, queued-provisioning and ``scale_from_zero`` pools autoscale between 0 and the slice's
  hosts (a multi-host slice atomically: all of its nodes or none), so a fallback pool costs nothing
  until the scheduler needs it; GKE requires exactly that of flex-start and queued pools (see the
  comments at the fields).
* every pool runs as the cluster's node service account (``identity.NodeServiceAccount``: GKE's
  minimal node role), never the Compute Engine default, and depends on its grants (created after,
  deleted before them). GCE metadata (``tpu.workloadMetadata: GCE_METADATA``, as the Pathways
  tutorials) exposes that account to pods, so it then also holds the workload's bucket roles.
  The service account is create-only: changing it replaces the pool (components/README-security.md:
  Identity).
* stable identity: the Pulumi name and the GKE pool name carry the slice's index only
  (``tpu-slice-0``), never its shape, so a topology or machine-type change is this one resource
  replaced delete-before-replace (a second slice of scarce TPU capacity is rarely available for
  create-before-destroy, and it would bill both slices during the rollout). In prod the pool is
  protected, so a replacement is refused instead of happening silently (components/README-day2.md:
  Changing a slice).
* the shape inputs (``SHAPE_INPUTS``) replace the pool: the provider alone would not replace it
  on a topology change (only adding or removing ``placement_policy`` is ForceNew upstream).
* pools created before stable names (``tpu-v6e-4x4-0``) keep their state and their GKE name:
  every shape-encoded name this index ever had is an alias of the new URNs, and the GKE ``name``
  is ignored (it is create-only, so changing it would replace a live pool); when such a pool is
  replaced for a shape change, the engine creates the replacement under the program's name
  (``tpu-slice-0``), since ignored inputs take the program's value on a replacement.

As a library (no stack config)::

    from components import GkeCluster, GkeClusterArgs, TpuSlicePool, TpuSlicePoolArgs

    cluster = GkeCluster("demo", GkeClusterArgs(project="my-project", region="us-east5"))
    pool = TpuSlicePool("train", TpuSlicePoolArgs(cluster=cluster, generation="v5e", topology="4x8", zone="us-east5-a"))

Node count, machine type, placement policy and selectors come from the catalog; ``machine_type`` is
needed only where a topology has two VM layouts (v5e/v6e 2x4). The GKE pool is named after the
component unless ``pool_name`` is set; its nodes carry ``pool.tpu_slice.node_selector``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_gcp as gcp
from pydantic import ValidationError

from ..catalog import gce
from ..catalog import tpu as tpu_catalog
from ..config import gke_rules as rules
from ..config import naming
from ..config.environments import ALLOW_REPLACE_LABEL
from ..config.errors import Violation, rule
from ..config.platform import ThreadsPerCore
from ..config.tpu_spec import AutoscalingSpec, CapacityTierSpec, CapacityType, TpuSpec, WorkloadMetadata
from . import pool_settings as settings
from .args import (
    DEFAULT_POLICY,
    args_class,
    check,
    default_of,
    meta,
    own,
    protect_description,
    validate,
    violations,
)
from .gke import GkeCluster
from .identity import stack_urn

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
"""A Kubernetes taint effect, as a ``node_taints`` entry spells it."""

SHAPE_INPUTS = ("placementPolicy", "nodeConfig.machineType", "nodeLocations")
"""NodePool inputs that define the slice itself: a change replaces the pool (``replaceOnChanges``)."""
POOL_RESOURCE_SUFFIX = "-pool"
"""The NodePool child is ``<component name>-pool``."""


LEGACY_GENERATIONS = ("v5e", "v6e")
"""The generations of the releases before stable pool names: only their shapes ever had a
shape-encoded pool name (a generation added to the catalog since never did)."""


def legacy_aliases(index: int) -> list[tuple[str, str]]:
    """(component name, node-pool resource name) of slice ``index`` under every shape-encoded name
    earlier releases used, for every shape of their generations: whatever shape a stack had when it
    was created, its pool is found again, even if the upgrade and a shape change land together."""
    shapes = [s for s in tpu_catalog.all_slices() if s.generation.name in LEGACY_GENERATIONS]
    names = sorted({naming.legacy_node_pool_name(s.key, index) for s in shapes})
    return [(name, f"{name}{POOL_RESOURCE_SUFFIX}") for name in names]


@args_class
@dataclass(frozen=True, kw_only=True)
class Autoscaling:
    """Total node bounds of an autoscaled single-host pool."""

    min_nodes: int = field(metadata=meta(AutoscalingSpec, "min_nodes"))
    max_nodes: int = field(metadata=meta(AutoscalingSpec, "max_nodes"))

    def __post_init__(self) -> None:
        validate(self, AutoscalingSpec)


@args_class
@dataclass(frozen=True, kw_only=True)
class TpuSlicePoolArgs:
    """What a ``TpuSlicePool`` needs: the cluster, the slice (generation, topology, zone) and its capacity options."""

    cluster: GkeCluster | pulumi.Input[str] = field(
        metadata=own(
            "The cluster: a GkeCluster (the pool takes its project, location, node service account and that "
            "account's grants from it) or a cluster name (then project, location and node_service_account are required)."
        )
    )
    generation: str = field(metadata=meta(TpuSpec, "generation", sentences=1))
    topology: str = field(metadata=meta(TpuSpec, "topology", sentences=1))
    machine_type: str | None = field(default=default_of(TpuSpec, "machine_type"), metadata=meta(TpuSpec, "machine_type"))
    zone: str = field(metadata=meta(TpuSpec, "zone"))
    allow_undocumented_zone: bool = field(
        default=default_of(TpuSpec, "allow_undocumented_zone"), metadata=meta(TpuSpec, "allow_undocumented_zone")
    )
    spot: bool = field(default=default_of(TpuSpec, "spot"), metadata=meta(TpuSpec, "spot"))
    reservation: str | None = field(default=default_of(TpuSpec, "reservation"), metadata=meta(TpuSpec, "reservation"))
    autoscaling: Autoscaling | None = field(
        default=default_of(TpuSpec, "autoscaling"), metadata=meta(TpuSpec, "autoscaling", nested=Autoscaling)
    )
    workload_metadata: WorkloadMetadata = field(
        default=default_of(TpuSpec, "workload_metadata"), metadata=meta(TpuSpec, "workload_metadata")
    )
    threads_per_core: ThreadsPerCore | None = field(
        default=default_of(TpuSpec, "threads_per_core"), metadata=meta(TpuSpec, "threads_per_core")
    )
    disk_size_gb: int = field(default=default_of(TpuSpec, "disk_size_gb"), metadata=meta(TpuSpec, "disk_size_gb"))
    flex_start: bool = field(
        default=False,
        metadata=own(
            "Dynamic Workload Scheduler flex-start VMs (node_config.flex_start): the pool autoscales from 0 to the "
            "slice's hosts when pods wait for it, with location policy ANY, no reservation and no auto-repair, as "
            "GKE requires. Not with spot, reservation or autoscaling."
        ),
    )
    queued_provisioning: bool = field(
        default=False,
        metadata=own(
            "DWS queued provisioning (queued_provisioning.enabled, with flex_start): nodes are created only for "
            "a ProvisioningRequest (Kueue's queued-provisioning.gke.io admission check), all of a slice at once; "
            f"nodes are labelled {tpu_catalog.QUEUED_NODE_LABEL}=true. Multi-host slices; not with spot, reservation "
            "or autoscaling."
        ),
    )
    max_run_hours: int | None = field(default=None, metadata=meta(CapacityTierSpec, "max_run_hours", validated=False))
    scale_from_zero: bool = field(
        default=False,
        metadata=own(
            "Autoscale the pool between 0 and the slice's hosts (a multi-host slice atomically) instead of holding "
            "the slice: a fallback capacity tier, created when pods cannot be placed on the preferred one. "
            "Implied by flex_start and queued_provisioning; not with autoscaling (set its min_nodes to 0 instead)."
        ),
    )
    node_labels: Mapping[str, str] = field(
        default_factory=dict,
        metadata=own(
            "Kubernetes labels on the pool's nodes (node_config.labels; updated in place), e.g. "
            "cloud.google.com/compute-class=<class> with the matching taint for a manually created pool of a custom "
            "ComputeClass (GKE 'About custom ComputeClasses', "
            "https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes#manual-node-pools)."
        ),
    )
    node_taints: Sequence[tuple[str, str, TaintEffect]] = field(
        default=(),
        metadata=own(
            "Kubernetes taints on the pool's nodes as (key, value, effect) (node_config.taint; updated in place), "
            "e.g. (cloud.google.com/compute-class, <class>, NoSchedule). GKE's own google.com/tpu taint is added by GKE."
        ),
    )
    allow_replacement: bool = field(
        default=default_of(TpuSpec, "allow_replacement"),
        metadata=meta(
            TpuSpec, "allow_replacement", extra=f"Also labels the pool {ALLOW_REPLACE_LABEL}=true, which the policy pack reads."
        ),
    )
    protect: bool = field(
        default=DEFAULT_POLICY.protect, metadata=own(protect_description("pool", lifted_by="allow_replacement"))
    )
    labels: Mapping[str, str] = field(default_factory=dict, metadata=own("GCP resource labels on the pool's nodes."))
    pool_name: str | None = field(
        default=None,
        metadata=own(
            "GKE node-pool name; unset uses the component's name. Create-only: the stack program names its pools "
            "tpu-slice-<index> and never changes it."
        ),
    )
    project: str | None = field(default=None, metadata=own("GCP project id of the pool; unset: the GkeCluster's."))
    location: str | None = field(
        default=None,
        metadata=own("GKE location of the cluster (its region, or its zone if zonal); unset: the GkeCluster's."),
    )
    node_service_account: pulumi.Input[str] | None = field(
        default=None,
        metadata=own(
            "Email of the Google service account the nodes run as (create-only: a change replaces the pool); "
            "unset: the GkeCluster's node service account. Never the Compute Engine default."
        ),
    )
    depends_on: Sequence[pulumi.Resource] = field(
        default=(),
        metadata=own(
            "Resources the pool is created after and deleted before, besides the cluster's node-account grants "
            "(e.g. bucket grants to that account that pods need under GCE_METADATA)."
        ),
    )
    legacy_alias_index: int | None = field(
        default=None,
        metadata=own(
            "Alias the pool to every shape-encoded name (tpu-v6e-4x4-<index>) releases before stable pool names "
            "gave slice <index> of the stack program, so stacks created then keep their pools. For the stack "
            "program; unset adds no alias."
        ),
    )

    def __post_init__(self) -> None:
        validate(self, TpuSpec)
        found: list[dict[str, Any]] = []
        region: str | None = None
        region_key = ""
        if self.location is not None:
            # A regional cluster's location is its region, a zonal one's its zone.
            region = self.location if gce.looks_like_region(self.location) else tpu_catalog.zone_region(self.location)
            unknown = rules.region_rules(
                "location", region, allow_undocumented=self.allow_undocumented_zone, escape="allow_undocumented_zone=True"
            )
            found += unknown
            region_key = "the region of location"
            if unknown:  # an unknown region is the one problem
                region = None
        elif isinstance(self.cluster, GkeCluster):
            region, region_key = self.cluster.region, "the cluster's region"
        if region is not None:
            found += rules.zone_in_region_rules("zone", self.zone, region, region_key=region_key, generation=self.generation)
        if isinstance(self.cluster, GkeCluster):
            found += rules.gke_version_rules("cluster.version", self.cluster.version, self.generation)
        else:
            for key in ("project", "location", "node_service_account"):
                if getattr(self, key) is None:
                    fix = f"set {key}, or pass the GkeCluster"
                    found.append(rule(key, None, "is required when cluster is a name", "a value", fix))
        if self.project is not None:
            found += rules.project_rules("project", self.project)
        found += rules.label_rules("labels", self.labels)
        problems = violations(found) + self._capacity_problems()
        if self.pool_name is not None:
            problems += [
                Violation("pool_name", self.pool_name, p, naming.GKE_NAME_PATTERN, "choose another name")
                for p in naming.gke_name_problems(self.pool_name)
            ]
        check(self, problems)

    @property
    def capacity(self) -> CapacityType:
        """The pool's capacity type (``tpu.capacity[].type``); valid once the Args are."""
        if self.queued_provisioning:
            return "queuedProvisioning"
        if self.flex_start:
            return "flexStart"
        if self.reservation:
            return "reservation"
        return "spot" if self.spot else "onDemand"

    @property
    def scales_from_zero(self) -> bool:
        return self.scale_from_zero or self.capacity in tpu_catalog.DWS_CAPACITY_TYPES

    def _capacity_problems(self) -> list[Violation]:
        """The stack's capacity rules (TpuSpec.capacity_rules, written once) applied to this pool's one tier."""
        chosen = [
            name
            for name, on in (
                ("spot", self.spot),
                ("reservation", bool(self.reservation)),
                ("flex_start", self.flex_start and not self.queued_provisioning),
                ("queued_provisioning", self.queued_provisioning),
            )
            if on
        ]
        if len(chosen) > 1:
            fields = ", ".join(chosen)
            return [Violation(chosen[-1], True, f"cannot be combined with {fields}", "one capacity option", "keep one")]
        problems: list[Violation] = []
        if self.scale_from_zero and self.autoscaling is not None:
            problems.append(
                Violation(
                    "scale_from_zero",
                    True,
                    "cannot be combined with autoscaling",
                    "one of them",
                    "set autoscaling.min_nodes to 0",
                )
            )
        tier = {"type": self.capacity, "reservation": self.reservation, "maxRunHours": self.max_run_hours}
        spec = TpuSpec.model_validate(
            {
                "generation": self.generation,
                "topology": self.topology,
                "machineType": self.machine_type,
                "zone": self.zone,
                "allowUndocumentedZone": self.allow_undocumented_zone,
                "autoscaling": None,
            }
        )
        autoscaling = (
            AutoscalingSpec.model_validate({"minNodes": self.autoscaling.min_nodes, "maxNodes": self.autoscaling.max_nodes})
            if self.autoscaling is not None
            else None
        )
        try:
            # The stack's rules of one tier (TpuSpec.capacity_rules), autoscaling included.
            one_tier = spec.model_copy(update={"capacity": [CapacityTierSpec.model_validate(tier)], "autoscaling": autoscaling})
        except ValidationError as error:  # maxRunHours out of range
            return [
                Violation("max_run_hours", self.max_run_hours, e["msg"], "1..168", "use at most GKE's 7 days (168 hours)")
                for e in error.errors()
            ]
        found = one_tier.capacity_rules()
        if isinstance(self.cluster, GkeCluster):
            found += rules.flex_start_version_rules("cluster.version", self.cluster.version, [self.capacity])
        names = {
            "capacity.0.type": "flex_start" if self.capacity == "flexStart" else "queued_provisioning",
            "capacity.0.maxRunHours": "max_run_hours",
        }
        problems += [Violation(names.get(r["path"], r["path"]), r["value"], r["problem"], r["allowed"], r["fix"]) for r in found]
        return problems

    @property
    def tpu_slice(self) -> tpu_catalog.TpuSlice:
        """The catalog slice (valid once the Args are)."""
        found = tpu_catalog.find_slice(self.generation, self.topology, self.machine_type)
        if found is None:  # unreachable: validation rejects an unknown or ambiguous shape
            raise ValueError(f"no slice for {self.generation} {self.topology} {self.machine_type}")
        return found


class TpuSlicePool(pulumi.ComponentResource):
    """The node pool of one TPU slice."""

    TYPE = "gke-tpu-llm:tpu:TpuSlicePool"

    pool_name: pulumi.Output[str]
    node_pool: gcp.container.NodePool
    tpu_slice: tpu_catalog.TpuSlice
    """The catalog slice the pool provisions (hosts, chips, node selector, ``google.com/tpu`` per host)."""

    def __init__(self, name: str, args: TpuSlicePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        pool_name = args.pool_name or name
        check(
            args,
            [
                Violation("pool_name", pool_name, f"(the component's name) {p}", naming.GKE_NAME_PATTERN, "set pool_name")
                for p in naming.gke_name_problems(pool_name)
            ],
        )
        legacy = legacy_aliases(args.legacy_alias_index) if args.legacy_alias_index is not None else []
        component_aliases: list[pulumi.Input[str | pulumi.Alias]] = [stack_urn(self.TYPE, old) for old, _ in legacy]
        merged = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=component_aliases))
        super().__init__(self.TYPE, name, None, merged)
        target = settings.cluster_target(args)
        project, cluster_name = target.project, target.cluster_name
        self.tpu_slice = tpu_slice = args.tpu_slice
        self.capacity: CapacityType = args.capacity
        bounds = settings.node_bounds(args)
        dws = settings.dws_flags(args)
        # Ironwood (tpu7x) places a multi-host slice with a workload policy (a Compute resource policy
        # of type HIGH_THROUGHPUT naming the topology) instead of COMPACT + topology alone (GKE "About
        # Ironwood (TPU7x) in GKE": "You create a workload policy and then apply it by using the
        # --placement-policy flag"). The pool names it in placement_policy.policy_name with the
        # topology and no type, as xpk and a deployed tpu7x pool do (components/catalog/tpu.py
        # SRC_PLACEMENT_WORKLOAD_POLICY; Cluster Toolkit's gke-tpu-7x blueprint also sends COMPACT,
        # which GKE refused there). The policy must be in the pool's project and region. Its name carries the topology: resource
        # policies are immutable, so a topology change creates the new policy before the pool is
        # replaced (delete first) and deletes the old one last.
        self.workload_policy: gcp.compute.ResourcePolicy | None = None
        if tpu_slice.placement == "WORKLOAD_POLICY":
            self.workload_policy = gcp.compute.ResourcePolicy(
                f"{name}-workload-policy",
                name=pulumi.Output.from_input(cluster_name).apply(
                    lambda cluster: naming.workload_policy_name(cluster, pool_name, tpu_slice.topology)
                ),
                project=project,
                region=tpu_catalog.zone_region(args.zone),
                workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                    type=tpu_catalog.WORKLOAD_POLICY_TYPE, accelerator_topology=tpu_slice.topology
                ),
                opts=pulumi.ResourceOptions(parent=self, protect=args.protect and not args.allow_replacement),
            )
        pool_type = f"{self.TYPE}$gcp:container/nodePool:NodePool"
        pool_aliases: list[pulumi.Input[str | pulumi.Alias]] = [stack_urn(pool_type, child) for _, child in legacy]
        self.node_pool = gcp.container.NodePool(
            f"{name}{POOL_RESOURCE_SUFFIX}",
            name=pool_name,
            project=project,
            cluster=cluster_name,
            location=target.location,
            node_locations=[args.zone],
            node_count=None if bounds else tpu_slice.hosts,
            initial_node_count=bounds[0] if bounds else None,
            autoscaling=settings.autoscaling(args, bounds),
            placement_policy=settings.placement_policy(
                tpu_slice, self.workload_policy.name if self.workload_policy is not None else None
            ),
            queued_provisioning=dws.queued_provisioning,
            node_config=settings.node_config(args, target.node_service_account),
            management=gcp.container.NodePoolManagementArgs(auto_repair=dws.auto_repair, auto_upgrade=True),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=args.protect and not args.allow_replacement,
                delete_before_replace=True,
                # A TPU slice's shape is fixed at creation. The provider would "update" a topology
                # in place (placement_policy.tpu_topology is not ForceNew and never sent: a no-op
                # and a perpetual diff) and would resize machine type and zone on live nodes; for a
                # slice each of these is a new slice, so Pulumi replaces the pool instead.
                replace_on_changes=list(SHAPE_INPUTS),
                # name: set once at creation (see the module docstring); node counts: the autoscaler's.
                ignore_changes=["name", *(["initialNodeCount", "nodeCount"] if bounds else [])],
                depends_on=[*target.node_grants, *args.depends_on],
                aliases=pool_aliases,
            ),
        )
        self.pool_name = self.node_pool.name
        self.register_outputs({"pool_name": self.pool_name})
