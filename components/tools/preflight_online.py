"""Online pre-flight: ``python -m components preflight STACK [--json]`` checks the stack's checklist
(``components.tools.preflight``) against its project with the user's application-default credentials,
through the Compute Engine API client (google-cloud-compute, imported only here and only when the
command runs, so ``plan`` never loads it).

* quota: ``RegionsClient.get`` (``Region.quotas``: limit - usage >= the chips every pool of that quota
  needs at once); generations whose quota ``regions.get`` does not carry (v5p, v6e, tpu7x: Cloud
  Quotas only) are reported as not checked, with the quota id and the command that shows it;
* reservation: ``ReservationsClient.get`` (zone, status, machine type, count - in use, share settings,
  specificReservationRequired) and, for a block or sub-block, ``ReservationBlocksClient.get`` /
  ``ReservationSubBlocksClient.get`` (count - in use of that block);
* zone: ``ZonesClient.get`` (exists and UP); flex-start pools: the zone is a documented flex-start zone.

Exit codes: 0 every item passes (warnings and unchecked items are listed), 1 an item fails (each is
named with where, need, have and the fix), 2 the stack config is invalid, 3 the check cannot run (no
credentials, Compute Engine API disabled, permission denied): a message, never a traceback. The
CLI (``components.tools.cli``) reports 2 and 3, with ``--json`` as one error object on stdout naming
what is missing and the fix (``CannotCheckError.missing``, ``.fix``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from . import preflight

if TYPE_CHECKING:
    from google.cloud import compute_v1

    from ..config.stack_files import StackFile

# A stack-file error exits 2 in the CLI (its config error) before anything here runs.
EXIT_OK, EXIT_FAILED, EXIT_CANNOT_CHECK = 0, 1, 3

Status = Literal["pass", "fail", "warn", "unchecked"]

VIEWER_ROLE = "roles/compute.viewer"
"""Grants compute.regions.get, compute.zones.get and compute.reservations.get (Compute Engine IAM roles,
https://cloud.google.com/compute/docs/access/iam#compute.viewer)."""
_LOGIN = "run `gcloud auth application-default login`"
_ENABLE = "gcloud services enable compute.googleapis.com"


@dataclass(frozen=True)
class Result:
    """One checked item: what, where, what it needs, what the project has, and the fix when it fails."""

    status: Status
    what: str
    where: str
    need: str
    have: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status.upper():9} {self.what} ({self.where}): need {self.need}; have {self.have}"
        return text + (f"\n          fix: {self.fix}" if self.fix and self.status != "pass" else "")

    def to_dict(self) -> dict[str, str]:
        return {
            "status": self.status,
            "what": self.what,
            "where": self.where,
            "need": self.need,
            "have": self.have,
            "fix": self.fix,
        }


class CannotCheckError(Exception):
    """The check cannot run at all (credentials, disabled API, permissions): exit 3 with this message,
    ``missing`` (what the check lacks) and ``fix`` (the command or grant that supplies it)."""

    def __init__(self, message: str, *, missing: str, fix: str) -> None:
        super().__init__(message)
        self.missing, self.fix = missing, fix


# The client methods used, as the google-cloud-compute clients declare them (keyword arguments).
class RegionsApi(Protocol):
    def get(self, *, project: str, region: str) -> compute_v1.Region: ...


class ZonesApi(Protocol):
    def get(self, *, project: str, zone: str) -> compute_v1.Zone: ...


class ReservationsApi(Protocol):
    def get(self, *, project: str, zone: str, reservation: str) -> compute_v1.Reservation: ...


class ReservationBlocksApi(Protocol):
    def get(
        self, *, project: str, zone: str, reservation: str, reservation_block: str
    ) -> compute_v1.ReservationBlocksGetResponse: ...


class ReservationSubBlocksApi(Protocol):
    def get(
        self, *, project: str, zone: str, parent_name: str, reservation_sub_block: str
    ) -> compute_v1.ReservationSubBlocksGetResponse: ...


class SubnetworksApi(Protocol):
    def list(self, *, project: str, region: str) -> Iterable[compute_v1.Subnetwork]: ...


@dataclass(frozen=True)
class Clients:
    regions: RegionsApi
    zones: ZonesApi
    reservations: ReservationsApi
    reservation_blocks: ReservationBlocksApi
    reservation_sub_blocks: ReservationSubBlocksApi
    subnetworks: SubnetworksApi | None = None
    """Reads a gateway front door's proxy-only subnet (None: that item is reported unchecked)."""


def compute_clients() -> Clients:
    """The real clients, on application-default credentials (google.auth.default)."""
    from google.cloud import compute_v1

    return Clients(
        regions=compute_v1.RegionsClient(),
        zones=compute_v1.ZonesClient(),
        reservations=compute_v1.ReservationsClient(),
        reservation_blocks=compute_v1.ReservationBlocksClient(),
        reservation_sub_blocks=compute_v1.ReservationSubBlocksClient(),
        subnetworks=compute_v1.SubnetworksClient(),
    )


def _last(url: str) -> str:
    """``https://.../zones/us-east5-b`` -> ``us-east5-b`` (the API returns zones and machine types as URLs)."""
    return url.rstrip("/").rsplit("/", 1)[-1]


@dataclass
class _Checker:
    checklist: preflight.Checklist
    clients: Clients
    _regions: dict[str, compute_v1.Region] = field(default_factory=dict)

    def region(self, name: str) -> compute_v1.Region:
        if name not in self._regions:
            self._regions[name] = _call(lambda: self.clients.regions.get(project=self.checklist.project, region=name))
        return self._regions[name]

    def results(self) -> Iterator[Result]:
        yield self.zone()
        for need in self.checklist.quota_totals:
            yield self.quota(need)
        for reservation in self.checklist.reservation_totals:
            yield from self.reservation(reservation)
        for flex in self.checklist.flex_zones:
            yield self.flex_zone(flex)
        gateway = self.checklist.gateway
        if gateway is not None and not gateway.create_proxy_subnet:
            yield self.proxy_subnet(gateway)

    def proxy_subnet(self, need: preflight.GatewayNeed) -> Result:
        """The region's ACTIVE REGIONAL_MANAGED_PROXY subnet of the network has the configured range (the
        model servers' NetworkPolicies admit exactly that range)."""
        what = "proxy-only subnet"
        where = f"project {self.checklist.project}, region {need.region}, network {need.network}"
        wanted = f"purpose REGIONAL_MANAGED_PROXY, role ACTIVE, range {need.proxy_cidr}"
        api = self.clients.subnetworks
        if api is None:
            return Result(
                "unchecked",
                what,
                where,
                wanted,
                "no subnetworks client",
                f"gcloud compute networks subnets list --filter=purpose=REGIONAL_MANAGED_PROXY --regions={need.region}",
            )
        found = _call(lambda: list(api.list(project=self.checklist.project, region=need.region)))
        active = [
            s
            for s in found
            if s.purpose == "REGIONAL_MANAGED_PROXY" and s.role == "ACTIVE" and _last(s.network or "") == need.network
        ]
        create = (
            f"gcloud compute networks subnets create proxy-only-{need.region} --purpose=REGIONAL_MANAGED_PROXY "
            f"--role=ACTIVE --region={need.region} --network={need.network} --range={need.proxy_cidr}, or set "
            "workload.frontDoor.proxySubnet.create: true"
        )
        if not active:
            return Result("fail", what, where, wanted, "none", create)
        ranges = ", ".join(f"{s.name} {s.ip_cidr_range}" for s in active)
        if any(s.ip_cidr_range == need.proxy_cidr for s in active):
            return Result("pass", what, where, wanted, ranges)
        return Result(
            "fail",
            what,
            where,
            wanted,
            ranges,
            f"set workload.frontDoor.proxySubnet.cidr to the active subnet's range ({ranges}): the NetworkPolicies admit it",
        )

    def zone(self) -> Result:
        zone, project = self.checklist.zone, self.checklist.project
        where = f"project {project}"
        found = _call(lambda: self.clients.zones.get(project=project, zone=zone), not_found=True)
        if found is None:
            return Result("fail", f"zone {zone}", where, "an existing zone", "no such zone", "fix tpu.zone")
        status = found.status or "unknown"
        if status != "UP":
            return Result("fail", f"zone {zone}", where, "status UP", f"status {status}", "wait, or pick another zone")
        return Result("pass", f"zone {zone}", where, "status UP", "UP")

    def _quota_room(self, region: compute_v1.Region, metric: str) -> tuple[float, float] | None:
        for quota in region.quotas:
            if quota.metric == metric:
                return quota.limit, quota.usage
        return None

    def quota(self, need: preflight.QuotaNeed) -> Result:
        what = f"{need.kind} TPU quota '{need.quota.name}'"
        where = f"project {self.checklist.project}, region {need.region}"
        wanted = f"{need.chips} free chips"
        if need.quota.metric is None:
            how = (
                f"gcloud beta quotas info describe {need.quota.quota_id} --service=compute.googleapis.com "
                f"--project={self.checklist.project}"
                if need.quota.quota_id
                else f"console IAM & Admin > Quotas, service Compute Engine API, name '{need.quota.name}'"
            )
            dims = "".join(f", {k}={v}" for k, v in need.quota.dimensions.items())
            return Result(
                "unchecked",
                what,
                where + dims,
                wanted,
                "not in Compute Engine regions.get (this generation's TPU quota is in Cloud Quotas only)",
                f"check it: {how}",
            )
        region = self.region(need.region)
        room = self._quota_room(region, need.quota.metric)
        free = None if room is None else room[0] - room[1]
        have = "no such quota in the region (limit 0)" if room is None else f"limit {room[0]:g}, usage {room[1]:g}, free {free:g}"
        if free is not None and free >= need.chips:
            return Result("pass", what, where, wanted, have)
        if need.fallback is not None and need.fallback.metric is not None:
            # Flex-start and queued provisioning use on-demand quota where preemptible lacks (SRC_QUOTA_DWS).
            fallback = self._quota_room(region, need.fallback.metric)
            # The on-demand tiers of the stack draw on that quota too: only what they leave is a fallback.
            taken = sum(
                n.chips for n in self.checklist.quota_totals if n.quota.metric == need.fallback.metric and n.region == need.region
            )
            if fallback is not None and fallback[0] - fallback[1] - taken >= need.chips:
                return Result(
                    "pass",
                    what,
                    where,
                    wanted,
                    f"{have}; on-demand '{need.fallback.name}' free {fallback[0] - fallback[1]:g} "
                    f"({taken:g} of it for the on-demand tiers), which Compute Engine uses when preemptible quota lacks",
                )
        return Result(
            "fail",
            what,
            where,
            wanted,
            have,
            f"request {need.chips - max(free or 0, 0):g} more chips of '{need.quota.name}' "
            f"({need.quota.metric}) in {need.region} (IAM & Admin > Quotas), or lower tpu.slices/capacity tiers",
        )

    def reservation(self, need: preflight.ReservationNeed) -> Iterator[Result]:
        what = f"reservation {need.path}"
        where = f"zone {need.zone}"
        fix_value = "fix tpu.capacity[].reservation (or tpu.reservation)"
        reservation = _call(
            lambda: self.clients.reservations.get(project=need.owner_project, zone=need.zone, reservation=need.name),
            not_found=True,
            shared_owner=need.owner_project if need.shared else None,
        )
        if isinstance(reservation, Result):
            yield Result(reservation.status, what, where, "readable", reservation.have, reservation.fix)
            return
        if reservation is None:
            yield Result(
                "fail",
                what,
                where,
                "an existing reservation",
                f"none named {need.name} in {need.zone} of project {need.owner_project}",
                f"create it there (reservations are zonal: it must be in tpu.zone {need.zone}), or {fix_value}",
            )
            return
        zone = _last(reservation.zone) if reservation.zone else need.zone
        if zone != need.zone:
            yield Result(
                "fail",
                what,
                where,
                f"zone {need.zone}",
                f"zone {zone}",
                f"use a reservation in {need.zone}, or move tpu.zone to {zone}",
            )
        if reservation.status and reservation.status != "READY":
            yield Result("fail", what, where, "status READY", f"status {reservation.status}", "wait until it is READY")
        specific = reservation.specific_reservation
        machine_type = _last(specific.instance_properties.machine_type) if specific.instance_properties.machine_type else ""
        if machine_type != need.machine_type:
            yield Result(
                "fail",
                what,
                where,
                f"machine type {need.machine_type}",
                f"machine type {machine_type or 'none (not a specific VM reservation)'}",
                f"reserve {need.machine_type} VMs, or {fix_value}",
            )
        if need.block is None:
            free = specific.count - specific.in_use_count
            counts = f"count {specific.count}, in use {specific.in_use_count}, free {free}"
            status: Status = "pass" if free >= need.vms else "fail"
            yield Result(
                status,
                what,
                where,
                f"{need.vms} unused VM(s)",
                counts,
                f"grow the reservation by {need.vms - free} VM(s) or free them",
            )
        else:
            yield self.block(need)
        if not reservation.specific_reservation_required:
            yield Result(
                "warn",
                what,
                where,
                "specificReservationRequired true",
                "false: any matching VM in the project may consume it first",
                "recreate it with --require-specific-reservation",
            )
        if need.shared:
            yield self.sharing(need, reservation)

    def block(self, need: preflight.ReservationNeed) -> Result:
        assert need.block is not None
        what = f"reservation {need.path}"
        where = f"zone {need.zone}"
        if need.sub_block is None:
            got = _call(
                lambda: self.clients.reservation_blocks.get(
                    project=need.owner_project, zone=need.zone, reservation=need.name, reservation_block=need.block or ""
                ),
                not_found=True,
            )
            kind = "block"
        else:
            parent = f"reservations/{need.name}/reservationBlocks/{need.block}"
            got = _call(
                lambda: self.clients.reservation_sub_blocks.get(
                    project=need.owner_project, zone=need.zone, parent_name=parent, reservation_sub_block=need.sub_block or ""
                ),
                not_found=True,
            )
            kind = "sub-block"
        if got is None or isinstance(got, Result):
            return Result(
                "fail",
                what,
                where,
                f"an existing {kind}",
                f"no such {kind}",
                f"fix the {kind} name in tpu.capacity[].reservation",
            )
        count, in_use = got.resource.count, got.resource.in_use_count
        free = count - in_use
        return Result(
            "pass" if free >= need.vms else "fail",
            what,
            where,
            f"{need.vms} unused VM(s) in the {kind}",
            f"count {count}, in use {in_use}, free {free}",
            f"target a {kind} with {need.vms} free VM(s)",
        )

    def sharing(self, need: preflight.ReservationNeed, reservation: compute_v1.Reservation) -> Result:
        what = f"reservation {need.path}"
        where = f"owner project {need.owner_project}"
        settings = reservation.share_settings
        share_type = settings.share_type or "LOCAL"
        projects = sorted({entry.project_id or key for key, entry in settings.project_map.items()})
        if share_type == "SPECIFIC_PROJECTS" and need.consumer_project in projects:
            return Result("pass", what, where, f"shared with {need.consumer_project}", f"SPECIFIC_PROJECTS {', '.join(projects)}")
        if share_type == "ORGANIZATION":
            return Result(
                "warn",
                what,
                where,
                f"shared with {need.consumer_project}",
                "shared with the owner's organization",
                f"make sure {need.consumer_project} is in that organization",
            )
        have = f"{share_type} {', '.join(projects)}".strip()
        return Result(
            "fail",
            what,
            where,
            f"shared with {need.consumer_project}",
            have,
            f"in {need.owner_project}: gcloud compute reservations update {need.name} --zone={need.zone} "
            f"--add-share-with={need.consumer_project}",
        )

    def flex_zone(self, need: preflight.FlexZoneNeed) -> Result:
        what = f"flex-start zone {need.zone}"
        where = f"{need.generation} flex-start"
        documented = ", ".join(need.documented_zones) or "none"
        if need.documented:
            return Result("pass", what, where, "a documented flex-start zone", f"documented ({documented})")
        # The Compute API cannot say whether DWS capacity exists in a zone; the stack accepted an
        # undocumented zone on purpose (allowUndocumentedZone), so this warns rather than fails.
        return Result(
            "warn",
            what,
            where,
            "a documented flex-start zone",
            f"not documented (documented: {documented})",
            "use a documented zone, or confirm Google offers flex-start there and add it to the catalog",
        )


def _call(fn: Callable[[], Any], *, not_found: bool = False, shared_owner: str | None = None) -> Any:
    """``fn()``, mapping API errors: NotFound -> None (when ``not_found``); a permission error reading a
    shared reservation -> a failing Result (the owner has not shared it or granted read); any other
    credential, API-enablement or permission error -> CannotCheckError."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    try:
        return fn()
    except auth.DefaultCredentialsError:
        raise CannotCheckError(
            f"no application-default credentials: {_LOGIN} (or set GOOGLE_APPLICATION_CREDENTIALS), then rerun",
            missing="application-default credentials",
            fix=f"{_LOGIN} (or set GOOGLE_APPLICATION_CREDENTIALS), then rerun",
        ) from None
    except auth.RefreshError as error:
        raise CannotCheckError(
            f"the application-default credentials were refused ({error}): {_LOGIN}",
            missing="valid application-default credentials (these were refused)",
            fix=f"{_LOGIN}, then rerun",
        ) from None
    except api.NotFound:
        if not_found:
            return None
        raise
    except (api.Forbidden, api.PermissionDenied) as error:
        message = str(error)
        if "SERVICE_DISABLED" in message or "has not been used" in message or "is disabled" in message:
            raise CannotCheckError(
                f"the Compute Engine API is disabled in the project: {_ENABLE} ({message})",
                missing="the Compute Engine API (disabled in the project)",
                fix=_ENABLE,
            ) from None
        if shared_owner is not None:
            return Result(
                "fail",
                "",
                "",
                "",
                f"permission denied in project {shared_owner}",
                f"ask the owner of {shared_owner} to share the reservation with this project, "
                f"or grant you {VIEWER_ROLE} to read it",
            )
        raise CannotCheckError(
            f"permission denied ({message}): the check needs {VIEWER_ROLE} on the project",
            missing=f"{VIEWER_ROLE} on the project",
            fix=f"grant your account {VIEWER_ROLE} on the stack's project (gcloud projects add-iam-policy-binding)",
        ) from None
    except api.Unauthenticated as error:
        raise CannotCheckError(
            f"not authenticated ({error}): {_LOGIN}",
            missing="valid application-default credentials (not authenticated)",
            fix=f"{_LOGIN}, then rerun",
        ) from None
    except api.GoogleAPICallError as error:
        raise CannotCheckError(
            f"the Compute Engine API call failed: {error}",
            missing="an answer from the Compute Engine API",
            fix="rerun; if it persists, check the project and https://status.cloud.google.com",
        ) from None


def check(checklist: preflight.Checklist, clients: Clients) -> list[Result]:
    """Every result of the checklist against the project (raises CannotCheckError when it cannot run)."""
    return list(_Checker(checklist, clients).results())


def exit_code(results: list[Result]) -> int:
    return EXIT_FAILED if any(r.status == "fail" for r in results) else EXIT_OK


def run(stack_file: StackFile, *, as_json: bool = False, clients: Callable[[], Clients] | None = None) -> tuple[int, str]:
    """``(exit code, stdout)`` of a check that ran: 0 every item passes, 1 one fails. A bad config
    raises ``ConfigError`` and a check that cannot run ``CannotCheckError``, which the CLI reports
    (exit 2 and 3). ``clients`` makes the API clients (default: the real ones; tests inject fakes)."""
    from ..config.stack_files import config_of

    checklist = preflight.checklist(config_of(stack_file).config)
    results = check(checklist, _call(clients or compute_clients))
    code = exit_code(results)
    if as_json:
        document = {
            "stack": stack_file.stack,
            "project": checklist.project,
            "exit_code": code,
            "results": [r.to_dict() for r in results],
        }
        return code, json.dumps(document, indent=2) + "\n"
    failed = [r for r in results if r.status == "fail"]
    head = f"preflight {stack_file.stack} (project {checklist.project}, zone {checklist.zone})"
    tail = f"{len(failed)} failing item(s)" if failed else "every required item is in place"
    return code, "\n".join([head, *(r.line() for r in results), tail]) + "\n"


def command(stack_file: StackFile, *, as_json: bool = False) -> int:
    """The CLI entry point (``python -m components preflight``; the CLI reports the errors it raises)."""
    code, out = run(stack_file, as_json=as_json)
    sys.stdout.write(out)
    return code
