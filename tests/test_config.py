"""Stack config: accepted and rejected cases, message quality, derived values."""

from __future__ import annotations

from typing import Any

import pytest

from components import engine
from components.config import ConfigError, Environment, StackConfig
from tests.conftest import STACKS, make_config


def problems(**override: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        make_config(**override)
    return [str(v) for v in info.value.violations]


@pytest.mark.parametrize("stack", STACKS)
def test_config_every_stack_file_is_valid(stack: str) -> None:
    config = engine.config_of(engine.read_stack_file(engine.stack_path(stack))).config
    assert isinstance(config, StackConfig)
    assert config.stack == stack


def test_config_defaults_are_safe() -> None:
    config = make_config()
    assert config.environment is Environment.dev
    assert config.tpu.workload_metadata == "GKE_METADATA"
    assert config.cluster.location_type == "regional"
    assert config.cluster_location == "us-east5"
    assert config.pool_names() == ["tpu-v6e-4x4-0"]


def test_config_is_frozen() -> None:
    config = make_config()
    with pytest.raises(ValueError, match="frozen"):
        config.tpu.topology = "8x8"  # type: ignore[misc]


def test_config_rejects_impossible_topology_naming_key_value_allowed_and_fix() -> None:
    (msg,) = problems(tpu={"topology": "4x5"})
    assert msg.startswith("gke-tpu-llm:tpu.topology: '4x5'")
    assert "Allowed: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16" in msg
    assert "Fix:" in msg


def test_config_rejects_unknown_nested_key_listing_allowed_keys() -> None:
    (msg,) = problems(tpu={"topolgy": "4x4"})
    assert msg.startswith("gke-tpu-llm:tpu.topolgy: '4x4' is an unknown key")
    assert "topology" in msg.split("Allowed:")[1]


def test_config_rejects_unknown_top_level_key() -> None:
    (msg,) = problems(tpus={"generation": "v6e"})
    assert msg.startswith("gke-tpu-llm:tpus:")
    assert "unknown key" in msg


def test_config_rejects_machine_type_not_matching_topology() -> None:
    (msg,) = problems(tpu={"machineType": "ct6e-standard-8t"})
    assert "gke-tpu-llm:tpu.machineType: 'ct6e-standard-8t' does not build a v6e 4x4 slice" in msg
    assert "Allowed: ct6e-standard-4t" in msg


def test_config_requires_machine_type_where_topology_has_two_layouts() -> None:
    (msg,) = problems(tpu={"topology": "2x4"})
    assert "gke-tpu-llm:tpu.machineType" in msg
    assert "ct6e-standard-8t (1 host(s)), ct6e-standard-4t (2 host(s))" in msg


def test_config_rejects_unknown_generation() -> None:
    (msg,) = problems(tpu={"generation": "v9"})
    assert msg.startswith("gke-tpu-llm:tpu.generation: 'v9'")
    assert "Allowed: v5e, v6e" in msg


def test_config_rejects_zone_outside_region() -> None:
    (msg,) = problems(tpu={"zone": "us-central1-b"})
    assert msg.startswith("gke-tpu-llm:tpu.zone: 'us-central1-b' is not in gcp:region us-east5")
    assert "us-east5-a, us-east5-b, us-east5-c" in msg


def test_config_rejects_undocumented_zone_unless_allowed() -> None:
    (msg,) = problems(tpu={"zone": "us-east5-z"})
    assert "is not a documented v6e zone" in msg
    config = make_config(tpu={"zone": "us-east5-z", "allowUndocumentedZone": True})
    assert config.tpu.zone == "us-east5-z"


def test_config_rejects_gke_version_below_generation_minimum() -> None:
    (msg,) = problems(cluster={"version": "1.30.5-gke.100"})
    assert "gke-tpu-llm:cluster.version: '1.30.5-gke.100' is below the v6e minimum" in msg
    assert ">= 1.31.2-gke.1115000" in msg
    assert make_config(cluster={"version": "1.31.2-gke.1115000"}).cluster.version == "1.31.2-gke.1115000"


def test_config_prod_implies_protection() -> None:
    found = problems(
        environment="prod",
        cluster={"deletionProtection": False},
        buckets={"ckpt": {"purpose": "checkpoints", "forceDestroy": True}},
    )
    assert any(m.startswith("gke-tpu-llm:cluster.deletionProtection: False") for m in found)
    assert any(m.startswith("gke-tpu-llm:buckets.ckpt.forceDestroy: True") for m in found)


def test_config_environment_policy_drives_protection() -> None:
    prod = make_config(environment="prod", buckets={"ckpt": {"purpose": "checkpoints"}})
    dev = make_config(buckets={"ckpt": {"purpose": "checkpoints"}})
    assert prod.deletion_protection
    assert prod.policy.protect
    assert prod.policy.retain_on_delete
    assert not prod.bucket_force_destroy("ckpt")
    assert not dev.deletion_protection
    assert not dev.policy.protect
    assert dev.bucket_force_destroy("ckpt")


def test_config_rejects_autoscaling_on_multi_host_slice() -> None:
    (msg,) = problems(tpu={"autoscaling": {"minNodes": 0, "maxNodes": 4}})
    assert msg.startswith("gke-tpu-llm:tpu.autoscaling:")
    assert "multi-host" in msg


def test_config_rejects_autoscaling_min_above_max() -> None:
    (msg,) = problems(tpu={"topology": "2x4", "machineType": "ct6e-standard-8t", "autoscaling": {"minNodes": 3, "maxNodes": 2}})
    assert msg.startswith("gke-tpu-llm:tpu.autoscaling.minNodes: 3 is above maxNodes (2)")


def test_config_rejects_spot_with_reservation() -> None:
    (msg,) = problems(tpu={"spot": True, "reservation": "my-res"})
    assert "gke-tpu-llm:tpu.reservation: 'my-res' cannot be combined with spot" in msg


def test_config_rejects_project_wide_or_unknown_storage_roles() -> None:
    found = problems(buckets={"ckpt": {"purpose": "c"}}, identity={"bucketRoles": {"ckpt": "roles/storage.admin"}})
    assert any("gke-tpu-llm:identity.bucketRoles.ckpt: 'roles/storage.admin'" in m for m in found)
    found = problems(identity={"bucketRoles": {"nope": "roles/storage.objectUser"}})
    assert any(m.startswith("gke-tpu-llm:identity.bucketRoles.nope") and "no bucket" in m for m in found)


def test_config_reports_all_violations_of_a_section_together() -> None:
    found = problems(tpu={"topology": "3x3", "zone": "us-east5-q", "spot": True, "reservation": "r"})
    keys = sorted(m.split(":")[1].split(" ")[0] for m in found)
    assert keys == ["tpu.reservation", "tpu.topology", "tpu.zone"]


def test_config_reports_violations_from_several_sections_together() -> None:
    found = problems(tpu={"topology": "3x3"}, cluster={"releaseChannel": "NIGHTLY"}, bogus=1)
    joined = "\n".join(found)
    assert "gke-tpu-llm:tpu.topology" in joined
    assert "gke-tpu-llm:cluster.releaseChannel: 'NIGHTLY'" in joined
    assert "gke-tpu-llm:bogus" in joined


def test_config_missing_required_section() -> None:
    found = problems(tpu=None)
    assert any(m.startswith("gke-tpu-llm:tpu: None is required") for m in found)


def test_config_addons_follow_the_workload() -> None:
    assert make_config().addons == frozenset()
    vllm = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t"}, workload={"kind": "vllm", "model": "llama3.1-70b"}
    )
    assert vllm.addons == {"gcsFuseCsiDriver"}
    ray = make_config(
        workload={"kind": "maxtext-ray", "model": "llama3-8b"},
        buckets={"checkpoints": {"purpose": "out"}},
        identity={"bucketRoles": {"checkpoints": "roles/storage.objectUser"}},
    )
    assert ray.addons == {"gcsFuseCsiDriver", "rayOperator"}


def test_config_vllm_requires_the_hf_token_as_a_secret() -> None:
    vllm: dict[str, Any] = {
        "tpu": {"topology": "2x4", "machineType": "ct6e-standard-8t"},
        "workload": {"kind": "vllm", "model": "llama3.1-70b"},
    }
    with pytest.raises(ConfigError) as info:
        make_config(with_secrets=False, **vllm)
    (missing,) = info.value.violations
    assert missing.key == "gke-tpu-llm:hfToken"
    assert "pulumi config set --secret gke-tpu-llm:hfToken" in str(missing)
    with pytest.raises(ConfigError, match="is stored in plaintext"):
        make_config(with_secrets=False, hfToken="hf_abc", **vllm)
    assert make_config(**vllm).workload.kind.value == "vllm"


def test_config_secret_values_never_enter_the_specs() -> None:
    config = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t"}, workload={"kind": "vllm", "model": "llama3.1-70b"}
    )
    assert "[secret]" not in config.model_dump_json()


def test_config_workload_section_must_match_kind() -> None:
    (msg,) = problems(workload={"vllm": {}})
    assert msg.startswith("gke-tpu-llm:workload.vllm: '(set)' applies to kind vllm, not jetstream-pathways")


def test_config_prod_forbids_spot() -> None:
    (msg,) = problems(environment="prod", tpu={"spot": True})
    assert msg.startswith("gke-tpu-llm:tpu.spot: True is not allowed in prod")
    assert make_config(tpu={"spot": True}).tpu.spot


def test_config_allow_replacement_lifts_protection_and_labels() -> None:
    prod = make_config(environment="prod", tpu={"allowReplacement": True})
    assert prod.cluster_protected
    assert not prod.pools_protected
    assert prod.labels_for(True)["gke-tpu-llm-allow-replace"] == "true"


def test_config_prefill_must_be_below_target_length() -> None:
    (msg,) = problems(workload={"maxPrefillLength": 2048})
    assert msg.startswith("gke-tpu-llm:workload.maxPrefillLength: 2048 is not below maxTargetLength (2048)")


def test_config_gcs_fuse_workloads_need_gke_metadata() -> None:
    found = problems(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t", "workloadMetadata": "GCE_METADATA"},
        workload={"kind": "vllm", "model": "llama3.1-70b"},
        buckets={"models": {"purpose": "m"}},
        identity={"bucketRoles": {"models": "roles/storage.objectUser"}},
    )
    assert any(m.startswith("gke-tpu-llm:tpu.workloadMetadata: 'GCE_METADATA' breaks vllm") for m in found)
