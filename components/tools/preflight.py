"""Pre-flight: what must exist in the project for ``pulumi up`` to create the TPU pools. Pure data.

From a resolved stack (``components.config.resolve.resolve``) and the TPU catalog, one checklist entry per
pool, i.e. per (slice, capacity tier):

* **quota** (on-demand, Spot, flex-start, queued provisioning): the Compute Engine TPU quota the pool
  draws on in the TPU's region, in chips at the pool's maximum size, with the quota's console name,
  its ``regions.get`` metric or, for generations regions.get does not carry, its Cloud Quotas id
  (the generation row's ``quotas``). A pool that consumes a reservation draws on none.
* **reservation**: the specific reservation (own or shared, optionally a block or sub-block) with the
  pool's machine type in the pool's zone and at least the pool's VMs (hosts) unused.
* **flex-start zone**: flex-start and queued-provisioning pools need a zone where the generation's
  flex-start capacity is documented.

Every tier can fill at once (the fallback only prefers a tier: nothing stops each tier's pool from
scaling to its maximum), so the stack-level needs sum every pool of a quota or reservation.

A gateway front door (``workload.frontDoor.type: gateway``) adds a :class:`GatewayNeed`: the region's
proxy-only subnet with the configured range when the stack expects it (``proxySubnet.create: false``),
and GKE's version floor for the Gateway API and InferencePool CRDs when no version is pinned.
``components.tools.preflight_online`` checks the list against the project with the Compute API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..catalog import tpu as tpu_catalog
from ..config.stack import StackConfig


@dataclass(frozen=True)
class QuotaNeed:
    """Chips of one Compute Engine TPU quota in one region."""

    kind: tpu_catalog.QuotaKind
    region: str
    chips: int
    quota: tpu_catalog.TpuQuota
    fallback: tpu_catalog.TpuQuota | None = None
    """The quota Compute Engine uses when ``quota`` lacks room (flex-start and queued provisioning: on-demand)."""

    @property
    def key(self) -> tuple[str, str, str | None, str | None]:
        return (self.region, self.quota.name, self.quota.metric, self.quota.quota_id)

    def describe(self) -> str:
        where = (
            f"regions.get metric {self.quota.metric}"
            if self.quota.metric
            else (f"Cloud Quotas id {self.quota.quota_id}" if self.quota.quota_id else "Cloud Quotas (no documented id)")
        )
        dims = "".join(f", {k}={v}" for k, v in self.quota.dimensions.items())
        text = f"{self.chips} chips of {self.kind} quota '{self.quota.name}' in {self.region} ({where}{dims})"
        if self.fallback is not None:
            text += f"; Compute Engine falls back to '{self.fallback.name}' when it lacks room"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "region": self.region,
            "chips": self.chips,
            "name": self.quota.name,
            "metric": self.quota.metric,
            "quota_id": self.quota.quota_id,
            "dimensions": dict(self.quota.dimensions),
            "fallback": None if self.fallback is None else self.fallback.name,
        }


@dataclass(frozen=True)
class ReservationNeed:
    """A specific reservation the pool consumes: ``vms`` unused VMs of ``machine_type`` in ``zone``."""

    owner_project: str
    name: str
    block: str | None
    sub_block: str | None
    zone: str
    machine_type: str
    vms: int
    consumer_project: str

    @property
    def shared(self) -> bool:
        return self.owner_project != self.consumer_project

    @property
    def path(self) -> str:
        """``projects/P/reservations/R[/reservationBlocks/B[/reservationSubBlocks/S]]``."""
        path = f"projects/{self.owner_project}/reservations/{self.name}"
        if self.block:
            path += f"/reservationBlocks/{self.block}"
        if self.sub_block:
            path += f"/reservationSubBlocks/{self.sub_block}"
        return path

    def describe(self) -> str:
        target = self.path if self.shared else self.path.split("/reservations/", 1)[1]
        text = f"reservation {target} in {self.zone}: {self.vms} unused {self.machine_type} VM(s)"
        if self.block or self.sub_block:
            text += f" in that {'sub-block' if self.sub_block else 'block'}"
        text += ", specificReservationRequired true (or other VMs may take it)"
        if self.shared:
            text += f"; shared with project {self.consumer_project} (shareSettings SPECIFIC_PROJECTS)"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "owner_project": self.owner_project,
            "name": self.name,
            "block": self.block,
            "sub_block": self.sub_block,
            "zone": self.zone,
            "machine_type": self.machine_type,
            "vms": self.vms,
            "shared_with": self.consumer_project if self.shared else None,
        }


@dataclass(frozen=True)
class FlexZoneNeed:
    """Flex-start capacity of ``generation`` must be documented in ``zone``."""

    generation: str
    zone: str
    documented_zones: tuple[str, ...]

    @property
    def documented(self) -> bool:
        return self.zone in self.documented_zones

    def describe(self) -> str:
        allowed = ", ".join(self.documented_zones) or "none"
        state = "documented" if self.documented else "NOT documented"
        return f"flex-start zone: {self.zone} is {state} for {self.generation} flex-start (documented: {allowed})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "zone": self.zone,
            "documented": self.documented,
            "documented_zones": list(self.documented_zones),
        }


@dataclass(frozen=True)
class GatewayNeed:
    """What a gateway front door needs in the VPC and the cluster that the stack does not create."""

    region: str
    network: str
    proxy_cidr: str
    create_proxy_subnet: bool
    version: str | None
    """The pinned cluster version (None: the release channel's default, which must reach the floor)."""
    version_floor: str

    def lines(self) -> list[str]:
        out = ["gateway front door"]
        if not self.create_proxy_subnet:
            out.append(
                f"  - proxy-only subnet in network {self.network}, region {self.region}: purpose REGIONAL_MANAGED_PROXY, "
                f"role ACTIVE, range {self.proxy_cidr} (expected: workload.frontDoor.proxySubnet.create is false)"
            )
        if self.version is None:
            out.append(
                f"  - the release channel's GKE version >= {self.version_floor} (GKE installs the Gateway API and "
                "InferencePool CRDs from there; cluster.version is unset)"
            )
        return out if len(out) > 1 else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "network": self.network,
            "proxy_cidr": self.proxy_cidr,
            "create_proxy_subnet": self.create_proxy_subnet,
            "version": self.version,
            "version_floor": self.version_floor,
        }


@dataclass(frozen=True)
class PoolNeeds:
    """What one pool (one slice in one capacity tier) needs before ``pulumi up``."""

    pool: str
    slice_index: int
    tier_index: int
    capacity: str
    generation: str
    machine_type: str
    zone: str
    vms: int
    chips: int
    quota: QuotaNeed | None
    reservation: ReservationNeed | None
    flex_zone: FlexZoneNeed | None
    not_drawn: tuple[tpu_catalog.UnbuiltAccelerator, ...] = ()
    """Quotas of the generation's other GKE accelerator that this pool does not draw on (v5e: the
    tpu-v5-lite-device serving quota, while the catalog's v5e pools are tpu-v5-lite-podslice)."""

    def lines(self) -> list[str]:
        head = f"{self.pool} ({self.capacity}, {self.vms} x {self.machine_type} = {self.chips} chips, {self.zone})"
        items = [i.describe() for i in (self.quota, self.reservation, self.flex_zone) if i is not None]
        if self.quota is None and self.reservation is not None:
            items.append("no TPU quota: a pool that consumes a reservation draws on none")
        items.extend(
            f"not '{a.quotas.on_demand.name}' / '{a.quotas.preemptible.name}' ({a.gke_accelerator}, "
            f"{a.machine_prefix}-*): this pool is {self.machine_type}"
            for a in self.not_drawn
        )
        return [head, *(f"  - {item}" for item in items)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "slice": self.slice_index,
            "tier": self.tier_index,
            "capacity": self.capacity,
            "generation": self.generation,
            "machine_type": self.machine_type,
            "zone": self.zone,
            "vms": self.vms,
            "chips": self.chips,
            "quota": None if self.quota is None else self.quota.to_dict(),
            "reservation": None if self.reservation is None else self.reservation.to_dict(),
            "flex_start_zone": None if self.flex_zone is None else self.flex_zone.to_dict(),
            "quotas_not_drawn": [a.quotas.on_demand.metric or a.quotas.on_demand.name for a in self.not_drawn],
        }


@dataclass(frozen=True)
class Checklist:
    """Every pool's needs, and the stack's totals per quota and per reservation (all tiers full)."""

    project: str
    region: str
    zone: str
    pools: tuple[PoolNeeds, ...]
    gateway: GatewayNeed | None = None
    """A gateway front door's needs (None: the stack serves through its Service)."""

    @property
    def quota_totals(self) -> tuple[QuotaNeed, ...]:
        """Chips per quota summed over every pool that draws on it: every tier can fill at once. The
        on-demand fallback stays only where every pool of the total has it (Spot pools have none)."""
        totals: dict[tuple[str, str, str | None, str | None], QuotaNeed] = {}
        for need in (p.quota for p in self.pools if p.quota is not None):
            seen = totals.get(need.key)
            totals[need.key] = (
                need
                if seen is None
                else QuotaNeed(seen.kind, seen.region, seen.chips + need.chips, seen.quota, need.fallback and seen.fallback)
            )
        return tuple(totals.values())

    @property
    def reservation_totals(self) -> tuple[ReservationNeed, ...]:
        """VMs per reservation (block, sub-block) summed over the pools that consume it (one per slice)."""
        totals: dict[str, ReservationNeed] = {}
        for need in (p.reservation for p in self.pools if p.reservation is not None):
            seen = totals.get(need.path)
            totals[need.path] = need if seen is None else ReservationNeed(**{**seen.__dict__, "vms": seen.vms + need.vms})
        return tuple(totals.values())

    @property
    def flex_zones(self) -> tuple[FlexZoneNeed, ...]:
        return tuple(dict.fromkeys(p.flex_zone for p in self.pools if p.flex_zone is not None))

    def lines(self) -> list[str]:
        out = [f"Pre-flight (project {self.project}, region {self.region}): what `pulumi up` needs, per pool"]
        for pool in self.pools:
            out.extend(pool.lines())
        if len(self.pools) > 1:
            out.append("Totals (every tier's pool can fill at once, so each quota and reservation must hold all of them):")
            out.extend(f"  - {n.describe()}" for n in self.quota_totals)
            out.extend(f"  - {n.describe()}" for n in self.reservation_totals)
        if self.gateway is not None:
            out.extend(self.gateway.lines())
        out.append("Check them with your credentials: python -m components preflight STACK")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "region": self.region,
            "zone": self.zone,
            "pools": [p.to_dict() for p in self.pools],
            "quota_totals": [n.to_dict() for n in self.quota_totals],
            "reservation_totals": [n.to_dict() for n in self.reservation_totals],
            "gateway": None if self.gateway is None else self.gateway.to_dict(),
        }


def parse_reservation(value: str, project: str) -> tuple[str, str, str | None, str | None]:
    """``(owner project, name, block, sub-block)`` of a ``reservation`` value (config RESERVATION_PATTERN):
    ``NAME``, ``projects/P/reservations/NAME``, either followed by ``/reservationBlocks/B`` and
    ``/reservationSubBlocks/S``. A bare name belongs to the stack's own project."""
    owner = project
    rest = value
    if rest.startswith("projects/"):
        _, owner, _, rest = rest.split("/", 3)
    name, _, tail = rest.partition("/reservationBlocks/")
    block, _, sub_block = tail.partition("/reservationSubBlocks/")
    return owner, name, block or None, sub_block or None


def checklist(config: StackConfig) -> Checklist:
    """The pre-flight checklist of a resolved stack (its slice is known: ``capacity.resolve``)."""
    tpu = config.tpu
    s = tpu.slice
    region = tpu.region
    quotas = s.generation.quotas
    # The same generation under another GKE accelerator (v5e device vs podslice) has quota of its own.
    not_drawn = s.generation.unbuilt_accelerators
    vms = tpu.nodes_max
    chips = vms * s.chips_per_host
    pools: list[PoolNeeds] = []
    for index, tier_index, pool in config.tier_pools():
        tier = tpu.tiers[tier_index]
        dws = tier.type in tpu_catalog.DWS_CAPACITY_TYPES
        kind = tpu_catalog.QUOTA_KIND_BY_CAPACITY[tier.type]
        quota = None
        if kind is not None:
            quota = QuotaNeed(kind, region, chips, quotas.of(kind), quotas.on_demand if dws else None)
        reservation = None
        if tier.type == "reservation" and tier.reservation:
            owner, name, block, sub_block = parse_reservation(tier.reservation, config.project)
            reservation = ReservationNeed(owner, name, block, sub_block, tpu.zone, s.machine_type, vms, config.project)
        flex_zone = FlexZoneNeed(s.generation.name, tpu.zone, s.generation.flex_start_zones) if dws else None
        pools.append(
            PoolNeeds(
                pool=pool,
                slice_index=index,
                tier_index=tier_index,
                capacity=tier.type,
                generation=s.generation.name,
                machine_type=s.machine_type,
                zone=tpu.zone,
                vms=vms,
                chips=chips,
                quota=quota,
                reservation=reservation,
                flex_zone=flex_zone,
                not_drawn=not_drawn if quota is not None else (),
            )
        )
    return Checklist(config.project, region, tpu.zone, tuple(pools), gateway_need(config))


def gateway_need(config: StackConfig) -> GatewayNeed | None:
    """What the stack's gateway front door expects to exist (None without one)."""
    from ..config.front_door import GKE_VERSION_FLOOR
    from ..config.isolation import NETWORK

    door = config.workload.front_door
    if not door.gateway or door.proxy_subnet is None:
        return None
    subnet = door.proxy_subnet
    return GatewayNeed(config.region, NETWORK, str(subnet.cidr), subnet.create, config.cluster.version, GKE_VERSION_FLOOR)
