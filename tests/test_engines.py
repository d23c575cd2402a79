"""The engine catalog (components/catalog/engine_releases.json): its facts, the default vLLM TPU release of every
committed stack, the rules that refuse a broken combination naming the fixing release, and a version
bump seen in review as an in-place update of exactly the server that uses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.catalog import engine_releases as engines
from components.catalog.images import parse, pin_of
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.tools.review import compare_stack
from components.workloads.vllm import engine
from tests.conftest import make_config, planned
from tests.test_day2 import base, variant
from tests.test_vllm import VLLM

VLLM_STACKS = sorted(name for name in stacks.list_stacks() if "kind: vllm" in stacks.stack_path(name).read_text())
SELECTABLE = {"prefixCaching", "multiHostPipeline", "rayExecutor", "fp8Weights", "fp8KvCache"}
"""Features a stack's settings can select today (engine.selected_features)."""


def test_every_release_and_fact_has_a_source_and_statuses_are_known() -> None:
    vllm = engines.engine("vllm-tpu")
    assert vllm.status == "current"
    assert {engines.engine(name).status for name in ("jetstream", "saxml")} == {"archived"}
    for release in vllm.releases:
        assert release.source.strip(), release
        assert release.released is not None, release
    for fact in vllm.facts:
        assert fact.source.strip()
        assert fact.status in engines.STATUSES
    # A release no fact covers is untested for the feature, never silently supported.
    assert engines.status("vllm-tpu", "0.32.0", "prefixCaching") == ("untested", engines.NO_SOURCE)


def test_hma_connector_is_broken_in_0_27_to_0_29_and_fixed_in_0_30() -> None:
    hma = "kvConnector.TPUConnectorHMA"
    assert [v for v in engines.versions("vllm-tpu") if engines.status("vllm-tpu", v, hma)[0] == "broken"] == [
        "0.27.0",
        "0.28.0",
        "0.29.0",
    ]
    for version in ("0.27.0", "0.28.0", "0.29.0"):
        assert engines.fixed_in("vllm-tpu", version, hma) == "0.30.0"
    assert "tpu-inference#3566" in engines.status("vllm-tpu", "0.28.0", hma)[1]
    assert engines.newest_passing("vllm-tpu", [hma]).version == "0.32.0"


def test_a_fact_stated_twice_or_outside_the_releases_fails_on_load(tmp_path: Path) -> None:
    data = json.loads(engines.TABLE.read_text())
    facts = data["engines"]["vllm-tpu"]["facts"]
    facts.append({**facts[0]})
    (tmp_path / "twice.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="stated twice"):
        engines.load(tmp_path / "twice.json")
    facts[-1] = {**facts[0], "from": "0.99.0", "to": "0.99.0"}
    (tmp_path / "outside.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="not a range of listed releases"):
        engines.load(tmp_path / "outside.json")


@pytest.mark.parametrize("stack", VLLM_STACKS)
def test_every_vllm_stack_runs_the_newest_passing_release_or_an_explicit_pin(stack: str) -> None:
    plan = planned(stack)
    config = plan.config
    spec = config.workload.vllm  # type: ignore[attr-defined]
    newest = engines.newest_passing("vllm-tpu", engine.selected_features(config)).version
    version = engine.engine_version(config)
    assert version == (spec.engine_version or newest), stack
    assert not engines.broken("vllm-tpu", version, engine.selected_features(config))
    servers = [
        c["image"]
        for obj in plan.manifests
        if obj["kind"] in {"Deployment", "LeaderWorkerSet"}
        and obj["metadata"]["name"] in {"vllm", "vllm-group", "vllm-prefill", "vllm-decode"}
        for c in _containers(obj)
        if c["name"] != "routing-sidecar"  # llm-d's router sidecar beside a P/D decode server: its own image row
    ]
    assert servers, stack
    assert set(servers) == {engines.image_ref("vllm-tpu", version)}, stack
    ref = parse(servers[0])
    assert ref is not None
    assert ref.tag == f"v{version}"
    assert pin_of(ref.repository, ref.tag) is not None  # a catalog image row (digest, or the listed gap)


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "Deployment":
        return list(obj["spec"]["template"]["spec"]["containers"])
    group = obj["spec"]["leaderWorkerTemplate"]
    return [*group["leaderTemplate"]["spec"]["containers"], *group["workerTemplate"]["spec"]["containers"]]


def _config(**vllm: Any) -> Any:
    override = json.loads(json.dumps(VLLM))
    override["workload"]["vllm"] = vllm
    return make_config("llama-70b", **override)


def _violations(**vllm: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _config(**vllm)
    return [str(v) for v in info.value.violations]


def test_an_unlisted_engine_version_exits_2_with_the_listed_ones() -> None:
    (msg,) = _violations(engineVersion="0.99.0")
    assert msg.startswith("gke-tpu-llm:workload.vllm.engineVersion: '0.99.0' is not a release the engine catalog lists")
    assert "0.32.0" in msg


def test_an_image_that_contradicts_the_engine_version_is_refused() -> None:
    (msg,) = _violations(engineVersion="0.30.0", image="vllm/vllm-tpu:v0.31.0")
    assert msg.startswith("gke-tpu-llm:workload.vllm.image: 'vllm/vllm-tpu:v0.31.0' is release 0.31.0")


def test_a_pinned_older_release_renders_its_own_image_by_digest() -> None:
    config = _config(engineVersion="0.27.0")
    assert engine.server_image(config) == pin_of("vllm/vllm-tpu", "v0.27.0").ref  # type: ignore[union-attr]
    assert "@sha256:" in engine.server_image(config)


def test_every_broken_selectable_combination_exits_2_naming_the_key_and_the_fixing_release(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = {(f.feature, f.first, f.last) for e in engines.ENGINES.values() for f in e.facts if f.status == "broken"}
    # TPUConnectorHMA is selectable with workload.vllm.disaggregation only for a hybrid-attention model, which the
    # catalog has none of yet (tests/test_vllm_disagg.py patches one in): the gap stays visible.
    assert {b for b in broken if b[0] not in SELECTABLE} == {("kvConnector.TPUConnectorHMA", "0.27.0", "0.29.0")}
    # The rule machinery on a selectable feature: prefix caching marked broken in 0.27.0-0.28.0.
    data = json.loads(engines.TABLE.read_text())
    data["engines"]["vllm-tpu"]["facts"] = [
        {"feature": "prefixCaching", "status": "broken", "from": "0.27.0", "to": "0.28.0", "source": "a test's fact"}
    ]
    path = tmp_path / "engine_releases.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(engines, "ENGINES", engines.load(path))
    (msg,) = _violations(engineVersion="0.28.0")
    assert msg.startswith("gke-tpu-llm:workload.vllm.engineVersion: '0.28.0' runs vllm-tpu 0.28.0, in which automatic prefix")
    assert "use engine version 0.29.0 or later" in msg
    (by_image,) = _violations(image="vllm/vllm-tpu:v0.27.0")
    assert by_image.startswith("gke-tpu-llm:workload.vllm.image:")
    assert "0.29.0 or later" in by_image


@pytest.mark.parametrize("stack", ["llama-70b", "llama-405b-vllm"])
def test_a_version_bump_is_an_in_place_update_of_exactly_the_server(stack: str) -> None:
    change = compare_stack(stack, variant(stack, workload__vllm__engineVersion="0.31.0"), base(stack))
    assert not change.prediction.of("replace")
    assert not change.prediction.of("create")
    assert not change.prediction.of("delete")
    updated = {(s.type, s.name) for s in change.prediction.of("update")}
    server = "kubernetes:apps/v1:Deployment" if stack == "llama-70b" else "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    assert {t for t, _ in updated} == {server}, updated
    assert "v0.31.0" in change.manifest_diff
    assert "v0.32.0" in change.manifest_diff
