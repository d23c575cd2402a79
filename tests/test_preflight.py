"""Pre-flight: the offline checklist per pool (quota by kind, reservations, flex-start zone) and the
online check against recorded Compute Engine API responses (tests/data/preflight/, REST field names
as the API returns them; the google-cloud-compute types parse them strictly)."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.api_core import exceptions as api
from google.auth import exceptions as auth
from google.cloud import compute_v1

from components.catalog import tpu as tpu_catalog
from components.config import naming
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.loader import parse_full_config
from components.config.stack import StackConfig
from components.tools import preflight, preflight_online, report
from components.tools.preflight_online import Clients, Result

DATA = Path(__file__).resolve().parent / "data" / "preflight"
PROJECT = "your-project-id"  # the saxml-175b stack's project, which the recordings belong to
OWNER = "owner-proj-1"
SAXML = "saxml-175b"  # v5e 4x8 x 2 slices (8 x ct5lp-hightpu-4t each) in us-west4-a


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


def saxml_file(**tpu: Any) -> stacks.StackFile:
    """The saxml-175b stack file with ``tpu`` keys replaced (None deletes one)."""
    stack_file = stacks.read_stack_file(stacks.stack_path(SAXML))
    values = copy.deepcopy(stack_file.values)
    section = values["gke-tpu-llm:tpu"]
    for key, value in tpu.items():
        if value is None:
            section.pop(key, None)
        else:
            section[key] = value
    return dataclasses.replace(stack_file, values=values)


def saxml_config(**tpu: Any) -> StackConfig:
    stack_file = saxml_file(**tpu)
    return parse_full_config(stack_file.values, stack_file.stack, stack_file.secret_keys)


# ---- fake clients: each answers only the exact request it was recorded for


class Fake:
    def __init__(self, answers: dict[tuple[tuple[str, str], ...], Any]) -> None:
        self.answers = answers
        self.calls: list[dict[str, str]] = []

    def get(self, **request: str) -> Any:
        self.calls.append(request)
        answer = self.answers.get(tuple(sorted(request.items())))
        if answer is None:
            raise api_error(api.NotFound, f"The resource {request} was not found")
        if isinstance(answer, Exception):
            raise answer
        return answer


def api_error(kind: type[Exception], message: str) -> Exception:
    """An API error (the google-api-core and google-auth constructors are untyped)."""
    return kind(message)


def key(**request: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(request.items()))


def region(**quota_changes: tuple[float, float]) -> compute_v1.Region:
    """The recorded us-west4 region with some metrics' (limit, usage) changed."""
    data = recorded("region-us-west4.json")
    for quota in data["quotas"]:
        if quota["metric"] in quota_changes:
            quota["limit"], quota["usage"] = quota_changes[quota["metric"]]
    parsed: compute_v1.Region = compute_v1.Region.from_json(json.dumps(data))
    return parsed


def reservation(name: str = "reservation-own.json", **changes: Any) -> compute_v1.Reservation:
    data = recorded(name)
    for path, value in changes.items():
        target = data
        *parents, leaf = path.split(".")
        for part in parents:
            target = target[part]
        target[leaf] = value
    parsed: compute_v1.Reservation = compute_v1.Reservation.from_json(json.dumps(data))
    return parsed


def clients(
    *,
    regions: compute_v1.Region | Exception | None = None,
    reservations: dict[tuple[str, str], Any] | None = None,
    zone: str = "us-west4-a",
) -> Clients:
    zone_data = recorded("zone-us-west4-a.json")
    zone_data["name"] = zone
    return Clients(
        regions=Fake({key(project=PROJECT, region="us-west4"): regions if regions is not None else region()}),
        zones=Fake({key(project=PROJECT, zone=zone): compute_v1.Zone.from_json(json.dumps(zone_data))}),
        reservations=Fake({key(project=p, zone="us-west4-a", reservation=r): v for (p, r), v in (reservations or {}).items()}),
        reservation_blocks=Fake(
            {
                key(
                    project=OWNER, zone="us-west4-a", reservation="team-v5e", reservation_block="team-v5e-block-0001"
                ): compute_v1.ReservationBlocksGetResponse.from_json((DATA / "reservation-block.json").read_text())
            }
        ),
        reservation_sub_blocks=Fake(
            {
                key(
                    project=OWNER,
                    zone="us-west4-a",
                    parent_name="reservations/team-v5e/reservationBlocks/team-v5e-block-0001",
                    reservation_sub_block="team-v5e-block-0001-sub-0001",
                ): compute_v1.ReservationSubBlocksGetResponse.from_json((DATA / "reservation-sub-block.json").read_text())
            }
        ),
    )


def results(config: StackConfig, fakes: Clients) -> list[Result]:
    return preflight_online.check(preflight.checklist(config), fakes)


def by_status(found: list[Result], status: str) -> list[Result]:
    return [r for r in found if r.status == status]


# ---- the recordings are what the API returns


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("region-us-west4.json", compute_v1.Region),
        ("zone-us-west4-a.json", compute_v1.Zone),
        ("reservation-own.json", compute_v1.Reservation),
        ("reservation-shared.json", compute_v1.Reservation),
        ("reservation-block.json", compute_v1.ReservationBlocksGetResponse),
        ("reservation-sub-block.json", compute_v1.ReservationSubBlocksGetResponse),
    ],
)
def test_recordings_parse_as_compute_api_responses(name: str, message: Any) -> None:
    text = (DATA / name).read_text()
    parsed = message.from_json(text, ignore_unknown_fields=False)  # a misspelt REST field raises
    # Every recorded field survived: the JSON the type writes back holds the same keys and values.
    assert json.loads(message.to_json(parsed, always_print_fields_with_no_presence=False)) == json.loads(text)


def test_recorded_region_carries_the_v5e_metrics_the_catalog_names() -> None:
    metrics = {q.metric for q in region().quotas}
    v5e = tpu_catalog.GENERATIONS["v5e"].quotas
    assert {v5e.on_demand.metric, v5e.preemptible.metric} <= metrics
    # Every regions.get metric the catalog names is one the API's enum has.
    known = set(compute_v1.Quota.Metric.__members__)
    families = [
        *(g.quotas for g in tpu_catalog.GENERATIONS.values()),
        *(a.quotas for g in tpu_catalog.GENERATIONS.values() for a in g.unbuilt_accelerators),
    ]
    named = {t.metric for q in families for t in (q.on_demand, q.preemptible) if t.metric}
    assert named <= known
    assert named


# ---- the offline checklist


def test_every_catalog_generation_has_its_quota() -> None:
    # Every quota kind a capacity type draws on is on the row, named (tests/test_generation_facts.py
    # holds a row without one to an import-time error naming it).
    for gen in tpu_catalog.GENERATIONS.values():
        for kind in {k for k in tpu_catalog.QUOTA_KIND_BY_CAPACITY.values() if k is not None}:
            quota = gen.quotas.of(kind)
            # Where regions.get does not carry the quota, a Cloud Quotas id or at least a console name is given.
            assert quota.name.strip(), (gen.name, kind)
            assert quota.metric is None or quota.quota_id is None, (gen.name, kind)


@pytest.mark.parametrize(
    ("tier", "kind", "metric", "fallback", "reserved", "flex"),
    [
        ({"type": "onDemand"}, "on-demand", "TPU_LITE_PODSLICE_V5", None, False, False),
        ({"type": "spot"}, "preemptible", "PREEMPTIBLE_TPU_LITE_PODSLICE_V5", None, False, False),
        ({"type": "flexStart"}, "preemptible", "PREEMPTIBLE_TPU_LITE_PODSLICE_V5", "TPU v5 Lite PodSlice chips", False, True),
        (
            {"type": "queuedProvisioning"},
            "preemptible",
            "PREEMPTIBLE_TPU_LITE_PODSLICE_V5",
            "TPU v5 Lite PodSlice chips",
            False,
            True,
        ),
        ({"type": "reservation", "reservation": "v5e-serving"}, None, None, None, True, False),
    ],
)
def test_checklist_per_capacity_type(
    tier: dict[str, str], kind: str | None, metric: str | None, fallback: str | None, reserved: bool, flex: bool
) -> None:
    checklist = preflight.checklist(saxml_config(capacity=[tier]))
    assert [p.pool for p in checklist.pools] == ["tpu-slice-0", "tpu-slice-1"]
    pool = checklist.pools[0]
    assert (pool.vms, pool.chips, pool.machine_type, pool.zone) == (8, 32, "ct5lp-hightpu-4t", "us-west4-a")
    if kind is None:
        assert pool.quota is None
        assert any("no TPU quota" in line for line in pool.lines())
    else:
        assert pool.quota is not None
        assert (pool.quota.kind, pool.quota.quota.metric, pool.quota.region) == (kind, metric, "us-west4")
        assert (pool.quota.fallback.name if pool.quota.fallback else None) == fallback
    assert (pool.reservation is not None) == reserved
    if reserved:
        assert pool.reservation is not None
        assert (pool.reservation.path, pool.reservation.vms) == (f"projects/{PROJECT}/reservations/v5e-serving", 8)
        assert not pool.reservation.shared
    assert (pool.flex_zone is not None) == flex
    if flex:
        assert pool.flex_zone is not None
        assert pool.flex_zone.documented


def test_checklist_sums_every_tier_and_slice_because_all_can_fill_at_once() -> None:
    tiers = [
        {"type": "reservation", "reservation": f"projects/{OWNER}/reservations/team-v5e/reservationBlocks/b1"},
        {"type": "flexStart"},
        {"type": "spot"},
        {"type": "onDemand"},
    ]
    checklist = preflight.checklist(saxml_config(capacity=tiers))
    assert [p.pool for p in checklist.pools] == [
        naming.node_pool_name(s, t, tier["type"]) for s in range(2) for t, tier in enumerate(tiers)
    ]
    totals = {(n.kind, n.quota.metric): n.chips for n in checklist.quota_totals}
    # Spot pools cannot fall back to on-demand quota, so the preemptible total (flex + spot) has no fallback.
    assert [n.fallback for n in checklist.quota_totals] == [None, None]
    # flex-start and spot both draw on preemptible quota: 2 slices x 2 tiers x 32 chips.
    assert totals == {("preemptible", "PREEMPTIBLE_TPU_LITE_PODSLICE_V5"): 128, ("on-demand", "TPU_LITE_PODSLICE_V5"): 64}
    (shared,) = checklist.reservation_totals
    assert (shared.vms, shared.owner_project, shared.block, shared.shared) == (16, OWNER, "b1", True)
    text = "\n".join(checklist.lines())
    assert "every tier's pool can fill at once" in text
    assert f"shared with project {PROJECT}" in text


def test_reservation_values_parse_into_owner_block_and_sub_block() -> None:
    assert preflight.parse_reservation("r1", "me-project") == ("me-project", "r1", None, None)
    assert preflight.parse_reservation("projects/p-owner-1/reservations/r1", "me-project") == ("p-owner-1", "r1", None, None)
    assert preflight.parse_reservation("r1/reservationBlocks/b1/reservationSubBlocks/s1", "me-project") == (
        "me-project",
        "r1",
        "b1",
        "s1",
    )


def test_v5e_single_host_serving_pool_draws_on_podslice_quota_not_the_device_quota() -> None:
    # A single-host v5e serving slice (2x4 on one ct5lp-hightpu-8t VM) is still tpu-v5-lite-podslice.
    checklist = preflight.checklist(saxml_config(topology="2x4", machineType="ct5lp-hightpu-8t", slices=1))
    (pool,) = checklist.pools
    assert pool.quota is not None
    assert pool.quota.quota.metric == "TPU_LITE_PODSLICE_V5"
    assert [a.quotas.on_demand.metric for a in pool.not_drawn] == ["TPU_LITE_DEVICE_V5"]
    assert any("not 'TPU v5 Lite Device chips'" in line for line in pool.lines())
    # The device quota belongs to the tpu-v5-lite-device machine types (ct5l-), which the catalog does not build.
    (device,) = tpu_catalog.GENERATIONS["v5e"].unbuilt_accelerators
    assert (device.gke_accelerator, device.machine_prefix) == ("tpu-v5-lite-device", "ct5l-hightpu")
    assert (device.quotas.on_demand.metric, device.quotas.preemptible.metric) == (
        "TPU_LITE_DEVICE_V5",
        "PREEMPTIBLE_TPU_LITE_DEVICE_V5",
    )
    assert all(not m.startswith("ct5l-") for g in tpu_catalog.GENERATIONS.values() for m in g.machine_types)


def test_v6e_quota_is_named_by_its_cloud_quotas_id_and_family() -> None:
    config = stacks.config_of(stacks.read_stack_file(stacks.stack_path("llama-405b"))).config
    (pool,) = preflight.checklist(config).pools
    assert pool.quota is not None
    assert pool.quota.quota.metric is None
    assert pool.quota.quota.quota_id == "TPUS-PER-TPU-FAMILY-per-project-region"
    assert dict(pool.quota.quota.dimensions) == {"tpu_family": "CT6E"}


def test_plan_json_carries_the_checklist() -> None:
    from tests.conftest import planned

    data = report.plan_json(planned(SAXML))
    assert data["preflight"]["quota_totals"] == [
        {
            "kind": "on-demand",
            "region": "us-west4",
            "chips": 64,
            "name": "TPU v5 Lite PodSlice chips",
            "metric": "TPU_LITE_PODSLICE_V5",
            "quota_id": None,
            "dimensions": {},
            "fallback": None,
        }
    ]
    assert [p["pool"] for p in data["preflight"]["pools"]] == [s["pool"] for s in data["slices"]]


def test_plan_prints_the_checklist(capsys: pytest.CaptureFixture[str]) -> None:
    from components.tools.plan_view import print_plan
    from tests.conftest import planned

    print_plan(planned(SAXML))
    out = capsys.readouterr().out
    assert "Pre-flight (project your-project-id, region us-west4)" in out
    assert "64 chips of on-demand quota 'TPU v5 Lite PodSlice chips' in us-west4" in out


# ---- the online check on recorded responses

ALL_TIERS = [
    {"type": "reservation", "reservation": "v5e-serving"},
    {"type": "flexStart"},
    {"type": "spot"},
    {"type": "onDemand"},
]


def test_all_pass() -> None:
    found = results(saxml_config(capacity=ALL_TIERS), clients(reservations={(PROJECT, "v5e-serving"): reservation()}))
    assert by_status(found, "fail") == []
    assert by_status(found, "warn") == []
    assert {r.what for r in found} == {
        "zone us-west4-a",
        "on-demand TPU quota 'TPU v5 Lite PodSlice chips'",
        "preemptible TPU quota 'Preemptible TPU v5 Lite Podslice chips'",
        f"reservation projects/{PROJECT}/reservations/v5e-serving",
        "flex-start zone us-west4-a",
    }
    assert preflight_online.exit_code(found) == 0


def test_on_demand_quota_short_names_need_have_and_fix() -> None:
    found = results(saxml_config(), clients(regions=region(TPU_LITE_PODSLICE_V5=(64, 8))))
    (fail,) = by_status(found, "fail")
    assert fail.what == "on-demand TPU quota 'TPU v5 Lite PodSlice chips'"
    assert (fail.need, fail.have) == ("64 free chips", "limit 64, usage 8, free 56")
    assert "request 8 more chips" in fail.fix
    assert "TPU_LITE_PODSLICE_V5" in fail.fix
    assert preflight_online.exit_code(found) == 1


def test_preemptible_quota_short() -> None:
    found = results(saxml_config(capacity=[{"type": "spot"}]), clients(regions=region(PREEMPTIBLE_TPU_LITE_PODSLICE_V5=(32, 0))))
    (fail,) = by_status(found, "fail")
    assert fail.what == "preemptible TPU quota 'Preemptible TPU v5 Lite Podslice chips'"
    assert fail.have == "limit 32, usage 0, free 32"


def test_flex_start_passes_on_the_on_demand_fallback_and_fails_without_either() -> None:
    config = saxml_config(capacity=[{"type": "flexStart"}])
    fallback = results(config, clients(regions=region(PREEMPTIBLE_TPU_LITE_PODSLICE_V5=(0, 0))))
    quota = next(r for r in fallback if "quota" in r.what)
    assert quota.status == "pass"
    assert "on-demand 'TPU v5 Lite PodSlice chips' free 64" in quota.have
    neither = results(config, clients(regions=region(PREEMPTIBLE_TPU_LITE_PODSLICE_V5=(0, 0), TPU_LITE_PODSLICE_V5=(0, 0))))
    assert [r.what for r in by_status(neither, "fail")] == ["preemptible TPU quota 'Preemptible TPU v5 Lite Podslice chips'"]


def test_flex_start_fallback_leaves_the_on_demand_tiers_their_quota() -> None:
    # flexStart then onDemand: 64 chips each (2 x v5e 4x8). No preemptible quota, so flex-start needs the
    # on-demand quota the onDemand tier already draws on.
    config = saxml_config(capacity=[{"type": "flexStart"}, {"type": "onDemand"}])
    short = results(config, clients(regions=region(PREEMPTIBLE_TPU_LITE_PODSLICE_V5=(0, 0), TPU_LITE_PODSLICE_V5=(96, 0))))
    assert [r.what for r in by_status(short, "fail")] == ["preemptible TPU quota 'Preemptible TPU v5 Lite Podslice chips'"]
    enough = results(config, clients(regions=region(PREEMPTIBLE_TPU_LITE_PODSLICE_V5=(0, 0), TPU_LITE_PODSLICE_V5=(128, 0))))
    assert not by_status(enough, "fail")
    flex = next(r for r in enough if r.what.startswith("preemptible"))
    assert "(64 of it for the on-demand tiers)" in flex.have


@pytest.mark.parametrize(
    ("changes", "need", "have"),
    [
        (
            {"specificReservation.instanceProperties.machineType": "ct5lp-hightpu-8t"},
            "machine type ct5lp-hightpu-4t",
            "machine type ct5lp-hightpu-8t",
        ),
        ({"specificReservation.inUseCount": "4"}, "16 unused VM(s)", "count 16, in use 4, free 12"),
        (
            {"zone": "https://www.googleapis.com/compute/v1/projects/your-project-id/zones/us-west4-b"},
            "zone us-west4-a",
            "zone us-west4-b",
        ),
        ({"status": "CREATING"}, "status READY", "status CREATING"),
    ],
)
def test_reservation_mismatch_fails(changes: dict[str, str], need: str, have: str) -> None:
    tiers = [{"type": "reservation", "reservation": "v5e-serving"}]
    found = results(saxml_config(capacity=tiers), clients(reservations={(PROJECT, "v5e-serving"): reservation(**changes)}))
    (fail,) = by_status(found, "fail")
    assert (fail.what, fail.need, fail.have) == (f"reservation projects/{PROJECT}/reservations/v5e-serving", need, have)
    assert fail.fix


def test_reservation_missing_from_the_zone_fails() -> None:
    found = results(saxml_config(capacity=[{"type": "reservation", "reservation": "v5e-serving"}]), clients())
    (fail,) = by_status(found, "fail")
    assert fail.have == f"none named v5e-serving in us-west4-a of project {PROJECT}"
    assert "reservations are zonal" in fail.fix


def test_reservation_not_specific_only_warns() -> None:
    tiers = [{"type": "reservation", "reservation": "v5e-serving"}]
    found = results(
        saxml_config(capacity=tiers),
        clients(reservations={(PROJECT, "v5e-serving"): reservation(specificReservationRequired=False)}),
    )
    (warn,) = by_status(found, "warn")
    assert warn.need == "specificReservationRequired true"
    assert preflight_online.exit_code(found) == 0


SHARED = f"projects/{OWNER}/reservations/team-v5e"


def test_shared_reservation_shared_with_the_project_passes() -> None:
    found = results(
        saxml_config(capacity=[{"type": "reservation", "reservation": SHARED}]),
        clients(reservations={(OWNER, "team-v5e"): reservation("reservation-shared.json")}),
    )
    assert by_status(found, "fail") == []
    assert any(r.have == f"SPECIFIC_PROJECTS {PROJECT}" for r in found)


@pytest.mark.parametrize(
    "share",
    [{"shareType": "LOCAL"}, {"shareType": "SPECIFIC_PROJECTS", "projectMap": {"other-proj-9": {"projectId": "other-proj-9"}}}],
)
def test_shared_reservation_not_shared_with_the_project_fails(share: dict[str, Any]) -> None:
    found = results(
        saxml_config(capacity=[{"type": "reservation", "reservation": SHARED}]),
        clients(reservations={(OWNER, "team-v5e"): reservation("reservation-shared.json", shareSettings=share)}),
    )
    (fail,) = by_status(found, "fail")
    assert fail.need == f"shared with {PROJECT}"
    assert f"--add-share-with={PROJECT}" in fail.fix


def test_shared_reservation_the_owner_hides_fails_with_the_fix() -> None:
    denied = api_error(api.Forbidden, "Required 'compute.reservations.get' permission for 'projects/owner-proj-1/...'")
    found = results(
        saxml_config(capacity=[{"type": "reservation", "reservation": SHARED}]),
        clients(reservations={(OWNER, "team-v5e"): denied}),
    )
    (fail,) = by_status(found, "fail")
    assert fail.have == f"permission denied in project {OWNER}"
    assert "share the reservation" in fail.fix


@pytest.mark.parametrize(
    ("suffix", "have", "status"),
    [
        ("/reservationBlocks/team-v5e-block-0001", "count 16, in use 0, free 16", "pass"),
        (
            "/reservationBlocks/team-v5e-block-0001/reservationSubBlocks/team-v5e-block-0001-sub-0001",
            "count 8, in use 4, free 4",
            "fail",
        ),
        ("/reservationBlocks/no-such-block", "no such block", "fail"),
    ],
)
def test_reservation_block_and_sub_block_count_their_own_vms(suffix: str, have: str, status: str) -> None:
    found = results(
        saxml_config(capacity=[{"type": "reservation", "reservation": SHARED + suffix}]),
        clients(reservations={(OWNER, "team-v5e"): reservation("reservation-shared.json")}),
    )
    block = next(r for r in found if r.have == have)
    assert block.status == status
    # The reservation's own count is not what a block targets: only the block's result speaks for the VMs.
    assert not any(r.have.startswith("count 32") for r in found)


def test_flex_start_zone_undocumented_warns() -> None:
    config = saxml_config(capacity=[{"type": "flexStart"}], zone="us-west4-b", allowUndocumentedZone=True)
    found = results(config, clients(zone="us-west4-b"))
    (warn,) = by_status(found, "warn")
    assert warn.what == "flex-start zone us-west4-b"
    assert warn.have == f"not documented (documented: {', '.join(tpu_catalog.GENERATIONS['v5e'].flex_start_zones)})"


def test_v6e_quota_is_reported_unchecked_with_the_cloud_quotas_command() -> None:
    config = stacks.config_of(stacks.read_stack_file(stacks.stack_path("llama-405b"))).config
    zone = Fake({key(project=config.project, zone="us-east5-b"): compute_v1.Zone(name="us-east5-b", status="UP")})
    regions = Fake({})  # regions.get is never asked: it does not carry v6e quota
    fakes = Clients(regions, zone, Fake({}), Fake({}), Fake({}))
    found = preflight_online.check(preflight.checklist(config), fakes)
    (unchecked,) = by_status(found, "unchecked")
    assert "gcloud beta quotas info describe TPUS-PER-TPU-FAMILY-per-project-region" in unchecked.fix
    assert regions.calls == []
    assert preflight_online.exit_code(found) == 0


# ---- the command: exit codes and messages, never a traceback


def run(stack_file: stacks.StackFile, factory: Callable[[], Clients], *, as_json: bool = False) -> tuple[int, str]:
    return preflight_online.run(stack_file, as_json=as_json, clients=factory)


def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, stack_file: stacks.StackFile,
    factory: Callable[[], Clients], *argv: str,
) -> tuple[int, str, str]:
    """``python -m components preflight --config FILE ARGV`` in-process, on the clients ``factory`` makes."""
    from components.tools.cli import main

    path = tmp_path / f"Pulumi.{stack_file.stack}.yaml"
    path.write_text(yaml.safe_dump({"config": stack_file.values}))
    monkeypatch.setattr(preflight_online, "compute_clients", factory)
    code = main(["preflight", "--config", str(path), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_command_passes_and_fails_with_exit_codes() -> None:
    code, out = run(saxml_file(), lambda: clients())
    assert code == 0
    assert "every required item is in place" in out
    code, out = run(saxml_file(), lambda: clients(regions=region(TPU_LITE_PODSLICE_V5=(16, 0))))
    assert code == 1
    assert "FAIL" in out
    assert "1 failing item(s)" in out
    code, out = run(saxml_file(), lambda: clients(regions=region(TPU_LITE_PODSLICE_V5=(16, 0))), as_json=True)
    document = json.loads(out)
    assert document["exit_code"] == 1
    assert [r["status"] for r in document["results"]].count("fail") == 1


def test_command_bad_config_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"tpu\.topology"):
        run(saxml_file(topology="3x3"), lambda: clients())
    code, out, err = cli(monkeypatch, capsys, tmp_path, saxml_file(topology="3x3"), lambda: clients())
    assert code == 2
    assert out == ""
    assert "tpu.topology" in err
    code, out, _ = cli(monkeypatch, capsys, tmp_path, saxml_file(topology="3x3"), lambda: clients(), "--json")
    assert code == 2
    error = json.loads(out)["error"]
    assert (error["kind"], error["exit"]) == ("config", 2)
    assert "gke-tpu-llm:tpu.topology" in [p["key"] for p in error["problems"]]


@pytest.mark.parametrize(
    ("error", "message", "missing"),
    [
        (
            api_error(auth.DefaultCredentialsError, "Your default credentials were not found."),
            "gcloud auth application-default login",
            "application-default credentials",
        ),
        (
            api_error(
                api.Forbidden, "Compute Engine API has not been used in project 123 before or it is disabled. SERVICE_DISABLED"
            ),
            "gcloud services enable compute.googleapis.com",
            "the Compute Engine API (disabled in the project)",
        ),
        (
            api_error(api.PermissionDenied, "Required 'compute.regions.get' permission"),
            "roles/compute.viewer",
            "roles/compute.viewer on the project",
        ),
    ],
)
def test_command_that_cannot_check_exits_3_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    error: Exception,
    message: str,
    missing: str,
) -> None:
    def no_credentials() -> Clients:
        raise error

    code, out, err = cli(monkeypatch, capsys, tmp_path, saxml_file(), no_credentials)
    assert code == 3
    assert out == ""
    assert message in err
    assert "Traceback" not in err
    # The same errors raised by a call, not by building the clients; with --json, one error object.
    code, out, err = cli(monkeypatch, capsys, tmp_path, saxml_file(), lambda: clients(regions=error), "--json")
    assert code == 3
    assert message in err
    document = json.loads(out)["error"]
    assert (document["kind"], document["exit"], document["missing"]) == ("cannot-check", 3, missing)
    assert message in document["fix"]
    with pytest.raises(preflight_online.CannotCheckError):
        run(saxml_file(), no_credentials)
