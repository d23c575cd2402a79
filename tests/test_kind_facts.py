"""Every workload kind declares, in its own package, the facts other layers read of it (issue 23):
its checkov waivers, its row of performance factors and its cluster add-ons as a function of its
settings. A kind that misses one fails here naming the kind and the fact, never a KeyError later."""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any

import pytest

from components.catalog.calibration import FACTORS
from components.config.errors import ConfigError
from components.config.resolve import perf_key_of
from components.tools.scan import SCOPED_SKIPS, SKIPS, merged_waivers, scanned_objects
from components.workloads.kind import WorkloadKindInfo, perf_key_violation
from components.workloads.registry import BY_KIND, KINDS
from tests.conftest import STACKS, make_config, planned, planned_built

KIND_NAMES = [info.kind for info in KINDS]


def stacks_of(kind: str) -> list[str]:
    """The committed stacks of ``kind`` (every kind has one: tests/test_purity.py)."""
    found = [stack for stack in STACKS if planned(stack).config.workload.kind == kind]
    assert found, f"kind {kind} has no committed stack to check its facts against"
    return found


# ---------------------------------------------------------------- performance factors


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_kinds_perf_key_is_a_row_of_the_calibration_table(kind: str) -> None:
    info = BY_KIND[kind]
    assert (info.perf_key is None) == (info.mode == "train"), f"kind {kind}: perf_key {info.perf_key!r} for mode {info.mode}"
    problem = perf_key_violation(info)
    assert problem is None, str(problem)
    if info.mode == "serve":
        assert info.perf_key in FACTORS


def test_a_perf_key_the_table_lacks_is_reported_naming_the_kind_and_the_key() -> None:
    broken = dataclasses.replace(BY_KIND["vllm"], perf_key="vllm-nightly")
    problem = perf_key_violation(broken)
    assert problem is not None
    text = str(problem)
    assert text.startswith("gke-tpu-llm:workload.kind: 'vllm' cannot be estimated")
    assert "perf_key 'vllm-nightly' (components/workloads/vllm/__init__.py)" in text
    assert f"Allowed: {', '.join(sorted(FACTORS))}." in text
    # Training kinds have nothing to estimate, whatever the key.
    assert perf_key_violation(dataclasses.replace(BY_KIND["maxtext-ray"], perf_key="anything")) is None


def _with_kind(monkeypatch: pytest.MonkeyPatch, info: WorkloadKindInfo) -> None:
    """The registry as the stack config reads it, with ``info`` in place of its kind's entry."""
    import components.config.stack as stack_module

    monkeypatch.setattr(stack_module, "BY_KIND", {**BY_KIND, info.kind: info})


def test_estimate_exits_2_naming_a_kind_whose_perf_key_has_no_factors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from components.tools.cli import main

    _with_kind(monkeypatch, dataclasses.replace(BY_KIND["vllm"], perf_key="vllm-nightly"))
    code = main(["estimate", "llama-70b", "--input-tokens", "1000", "--output-tokens", "1000", "--concurrency", "8"])
    err = capsys.readouterr().err
    assert code == 2
    assert "gke-tpu-llm:workload.kind: 'vllm' cannot be estimated: its perf_key 'vllm-nightly'" in err
    assert "Traceback" not in err
    assert "KeyError" not in err


def test_resolving_a_stack_with_a_scenario_reports_the_missing_row(monkeypatch: pytest.MonkeyPatch) -> None:
    config = planned("llama-70b").config
    _with_kind(monkeypatch, dataclasses.replace(BY_KIND["vllm"], perf_key="vllm-nightly"))
    with pytest.raises(ConfigError, match="perf_key 'vllm-nightly'"):
        perf_key_of(config)


# ---------------------------------------------------------------- scan waivers


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_kinds_waivers_name_objects_its_own_stacks_render(kind: str) -> None:
    """Each waiver is in the package of the kind whose objects fail the check: a pattern that matches
    nothing the kind's stacks render is stale, or belongs to another kind."""
    info = BY_KIND[kind]
    assert info.scan_waivers, f"kind {kind} declares no scan waivers"  # every kind here runs pods checkov flags
    keys = sorted({key for stack in stacks_of(kind) for key, _ in scanned_objects(planned_built(stack).manifests)})
    stale = [
        f"{check} {pattern}"
        for check, resources in info.scan_waivers.items()
        for pattern in resources
        if not fnmatch.filter(keys, pattern)
    ]
    assert not stale, f"kind {kind} waives checks for objects its stacks do not render: {stale}"
    for check, resources in info.scan_waivers.items():
        assert check.startswith("CKV"), (kind, check)
        assert check not in SKIPS, (kind, check)
        assert all(len(reason) > 30 for reason in resources.values()), (kind, check)


def test_the_scan_reads_every_kinds_waivers() -> None:
    for info in KINDS:
        for check, resources in info.scan_waivers.items():
            assert {p: SCOPED_SKIPS[check][p] for p in resources} == dict(resources), (info.kind, check)


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        (
            [("kind a", {"CKV_K8S_8": {"Pod/x": "reason one, long enough to read"}}), ("kind b", {"CKV_K8S_8": {"Pod/x": "r"}})],
            "CKV_K8S_8 Pod/x: waived by both kind a and kind b",
        ),
        ([("kind a", {"CKV_K8S_11": {"Pod/x": "a reason"}})], "kind a: CKV_K8S_11 is skipped for every resource already"),
    ],
)
def test_a_waiver_has_one_home(tables: list[tuple[str, dict[str, dict[str, str]]]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        merged_waivers(tables)


# ---------------------------------------------------------------- add-ons as a function of the settings


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_kinds_addons_are_a_function_of_its_settings(kind: str) -> None:
    info = BY_KIND[kind]
    for stack in stacks_of(kind):
        config = planned(stack).config
        found = info.addons(config)
        assert isinstance(found, frozenset), (kind, stack, found)
        assert all(isinstance(name, str) for name in found), (kind, stack, found)
        assert config.addons == found


def _vllm(**section: Any) -> Any:
    return make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t", "autoscaling": {"minNodes": 1, "maxNodes": 2}},
        buckets={"models": {"purpose": "hf-weights-cache"}},
        identity={"bucketRoles": {"models": "roles/storage.objectUser"}},
        workload={"kind": "vllm", "model": "llama3.1-70b", "maxTargetLength": 4096, "vllm": section},
    )


def test_vllm_opts_into_the_adapter_with_autoscaling_and_into_lws_on_a_multi_host_slice() -> None:
    assert _vllm().addons == {"gcsFuseCsiDriver", "metricsAdapter"}
    assert _vllm(autoscaling={"enabled": False}).addons == {"gcsFuseCsiDriver"}
    assert planned("llama-405b-vllm").config.addons == {"gcsFuseCsiDriver", "lws"}  # multi-host: LWS, no HPA
