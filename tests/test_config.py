"""Stack config: accepted and rejected cases, message quality, derived values."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import stack_files as stacks
from components.config.environments import Environment
from components.config.errors import ConfigError
from components.config.stack import StackConfig
from components.workloads.vllm.spec import settings as vllm_settings
from tests import tpu_test_catalog
from tests.conftest import STACKS, make_config


def problems(**override: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        make_config(**override)
    return [str(v) for v in info.value.violations]


@pytest.mark.parametrize("stack", STACKS)
def test_config_every_stack_file_is_valid(stack: str) -> None:
    config = stacks.config_of(stacks.read_stack_file(stacks.stack_path(stack))).config
    assert isinstance(config, StackConfig)
    assert config.stack == stack


def test_config_defaults_are_safe() -> None:
    config = make_config()
    assert config.environment is Environment.dev
    assert config.tpu.workload_metadata == "GKE_METADATA"
    assert config.cluster.location_type == "regional"
    assert config.cluster_location == "us-east5"
    assert config.pool_names() == ["tpu-slice-0"]
    assert make_config(tpu={"topology": "4x8"}).pool_names() == config.pool_names()  # shape never renames a pool


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
    from components.catalog.tpu import GENERATIONS

    assert f"Allowed: {', '.join(GENERATIONS)}" in msg


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
    assert make_config().addons == {"lws"}  # JetStream: no GKE add-on, its LWS controller
    vllm = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t"}, workload={"kind": "vllm", "model": "llama3.1-70b"}
    )
    assert vllm.addons == {"gcsFuseCsiDriver", "metricsAdapter"}  # autoscaling is on by default
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
    assert make_config(**vllm).workload.kind == "vllm"


def test_config_secret_values_never_enter_the_specs() -> None:
    config = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t"}, workload={"kind": "vllm", "model": "llama3.1-70b"}
    )
    assert "[secret]" not in config.model_dump_json()


def test_config_workload_section_must_match_kind() -> None:
    (msg,) = problems(workload={"vllm": {}})
    assert msg.startswith("gke-tpu-llm:workload.vllm: '(set)' applies to kind vllm, not jetstream-pathways")


def workload_problems(workload: Any) -> list[str]:
    """Problems of a stack that is BASE with exactly this ``gke-tpu-llm:workload`` value."""
    from components.config.loader import parse_stack_config
    from tests.conftest import BASE

    with pytest.raises(ConfigError) as info:
        parse_stack_config({**{k: v for k, v in BASE.items() if k != "workload"}, "workload": workload}, "test")
    return [str(v) for v in info.value.violations]


def test_config_workload_kind_is_one_of_the_registered_kinds() -> None:
    from components.workloads.registry import KINDS

    (msg,) = workload_problems({"kind": "tgi", "model": "llama3.1-70b", "maxTargetLength": 4096})
    assert msg.startswith("gke-tpu-llm:workload.kind: 'tgi' is not an allowed value. Allowed: ")
    assert all(repr(info.kind) in msg for info in KINDS)
    (msg,) = workload_problems({"kind": None, "model": "llama3.1-70b", "maxTargetLength": 4096})
    assert msg.startswith("gke-tpu-llm:workload.kind: None is not an allowed value")


def test_config_a_missing_or_unknown_kind_does_not_hide_the_other_workload_problems() -> None:
    # pydantic stops at the union's tag; the keys every kind shares are still checked.
    msgs = workload_problems({"Kind": "vllm", "model": "llama3.1-70b", "maxTargetLength": 4096})
    assert msgs[0].startswith("gke-tpu-llm:workload.kind: None is required")
    assert msgs[1].startswith("gke-tpu-llm:workload.Kind: 'vllm' is an unknown key (did you mean kind?)")
    msgs = workload_problems({})
    assert [m.split(":")[1] for m in msgs] == ["workload.kind", "workload.model", "workload.maxTargetLength"]
    msgs = workload_problems({"kind": 3, "model": "llama3.1-70b", "maxTargetLength": 0})
    assert msgs[0].startswith("gke-tpu-llm:workload.kind: 3 is not an allowed value")  # the value as written
    assert msgs[1].startswith("gke-tpu-llm:workload.maxTargetLength: 0 is out of range")


def test_config_unknown_workload_key_lists_the_kinds_own_keys() -> None:
    (msg,) = problems(workload={"kind": "vllm", "model": "llama3.1-70b", "vllm": {"imag": "x"}})
    assert msg.startswith("gke-tpu-llm:workload.vllm.imag: 'x' is an unknown key (did you mean image?)")
    (msg,) = problems(workload={"kind": "vllm", "model": "llama3.1-70b", "modle": "x"})
    allowed = msg.split("Allowed:")[1]
    assert msg.startswith("gke-tpu-llm:workload.modle")
    assert "maxTargetLength" in allowed
    assert "vllm" in allowed
    assert "jetstream" not in allowed


def test_config_prod_forbids_spot() -> None:
    (msg,) = problems(environment="prod", tpu={"spot": True})
    assert msg.startswith("gke-tpu-llm:tpu.spot: True is not allowed in prod")
    assert make_config(tpu={"spot": True}).tpu.spot


def test_config_allow_replacement_lifts_protection_and_labels() -> None:
    prod = make_config(environment="prod", tpu={"allowReplacement": True})
    assert prod.cluster_protected
    assert not prod.pools_protected
    assert prod.labels_for(True)["gke-tpu-llm-allow-replace"] == "true"


def test_config_allow_teardown_lifts_cluster_and_pool_protection_but_keeps_buckets() -> None:
    prod = make_config(environment="prod")
    assert prod.cluster_protected
    assert prod.pools_protected
    assert prod.deletion_protection
    ready = make_config(environment="prod", allowTeardown=True)
    assert not ready.cluster_protected
    assert not ready.pools_protected
    assert not ready.deletion_protection
    assert ready.policy.protect
    assert ready.policy.retain_on_delete
    assert ready.cluster_allowed_to_go
    assert ready.pools_allowed_to_go
    (msg,) = problems(environment="prod", allowTeardown=True, cluster={"deletionProtection": True})
    assert msg.startswith("gke-tpu-llm:cluster.deletionProtection: True contradicts allowTeardown")
    assert make_config(environment="prod", allowTeardown=True, cluster={"deletionProtection": False})


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


# ---- config as a Pulumi user writes it (namespaces, flat keys) and values that fail only at apply time


def full(**values: Any) -> dict[str, Any]:
    """BASE as full keys (``gke-tpu-llm:tpu``), as a stack file or the Pulumi runtime holds it."""
    from tests.conftest import BASE

    return {k if k.startswith("gcp:") else f"gke-tpu-llm:{k}": v for k, v in BASE.items()} | values


def full_problems(**values: Any) -> list[str]:
    from components.config.loader import parse_full_config

    with pytest.raises(ConfigError) as info:
        parse_full_config(full(**values), "test")
    return [str(v) for v in info.value.violations]


def test_config_flat_dotted_key_prints_the_path_commands() -> None:
    (msg,) = full_problems(**{"gke-tpu-llm:tpu.topology": "4x8"})
    assert msg.startswith("gke-tpu-llm:tpu.topology: '4x8' is a flat key")
    assert "pulumi config rm gke-tpu-llm:tpu.topology; then pulumi config set --path 'gke-tpu-llm:tpu.topology' 4x8" in msg


def test_config_unknown_namespaces_are_errors_with_did_you_mean() -> None:
    (msg,) = full_problems(**{"gke-tpu-lm:environment": "prod"})
    assert msg.startswith("gke-tpu-lm:environment: 'prod' is under the namespace 'gke-tpu-lm'")
    assert "did you mean gke-tpu-llm:environment?" in msg
    assert "pulumi config set gke-tpu-llm:environment prod" in msg
    (msg,) = full_problems(**{"datadog:apiKey": "x"})
    assert "did you mean" not in msg
    from components.config.loader import parse_full_config

    ok = full(**{"gcp:zone": "us-east5-b", "kubernetes:context": "c", "pulumi:tags": {"a": "b"}})
    assert parse_full_config(ok, "test").stack == "test"


def test_config_namespace_problems_are_reported_with_the_others() -> None:
    found = full_problems(**{"gke-tpu-lm:environment": "prod", "gke-tpu-llm:tpu": {"generation": "v6e", "zone": "x"}})
    assert any(m.startswith("gke-tpu-lm:environment") for m in found)
    assert any(m.startswith("gke-tpu-llm:tpu.zone") for m in found)


def test_config_runtime_loader_sees_every_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi.runtime import config as runtime_config

    from components.program.runtime import raw_config_from_runtime

    env = {"gke-tpu-lm:environment": "prod", "gke-tpu-llm:tpu": '{"a": 1}'}
    monkeypatch.setattr(runtime_config, "get_config_env", lambda: env)
    token = runtime_config.CONFIG.set({})  # not the config of an earlier offline run in this process
    try:
        raw = raw_config_from_runtime()
    finally:
        runtime_config.CONFIG.reset(token)
    assert raw["gke-tpu-lm:environment"] == "prod"  # kept, so split_namespaces can report it
    assert raw["gke-tpu-llm:tpu"] == {"a": 1}  # our structured values are decoded


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"workload": {"perDeviceBatchSize": float("inf")}}, "workload.perDeviceBatchSize"),
        ({"workload": {"reserveFraction": float("nan")}}, "workload.reserveFraction"),
        ({"workload": {"maxTargetLength": 131073}}, "workload.maxTargetLength"),
        ({"workload": {"perDeviceBatchSize": 1025}}, "workload.perDeviceBatchSize"),
        ({"tpu": {"slices": 65}}, "tpu.slices"),
        ({"workload": {"parallelism": {"tensor": 0}}}, "workload.parallelism.tensor"),
        ({"workload": {"parallelism": {"tensor": 512}}}, "workload.parallelism.tensor"),
        ({"workload": {"parallelism": {"mdl": 16}}}, "workload.parallelism.mdl"),
        ({"cluster": {"version": "2.0"}}, "cluster.version"),
        ({"cluster": {"version": "1.31.2-gke"}}, "cluster.version"),
        ({"cluster": {"systemPool": {"machineType": "e2-standard-3"}}}, "cluster.systemPool.machineType"),
        ({"tpu": {"reservation": "Res_1"}}, "tpu.reservation"),
        ({"identity": {"serviceAccount": "default"}}, "identity.serviceAccount"),
        ({"identity": {"namespace": "jobset-system"}}, "identity.namespace"),
        ({"gcp:region": "mars-north1"}, "gcp:region"),
    ],
)
def test_config_rejects_values_that_would_fail_later(override: dict[str, Any], key: str) -> None:
    found = problems(**override)
    prefix = key if key.startswith("gcp:") else f"gke-tpu-llm:{key}"
    assert any(m.startswith(f"{prefix}: ") for m in found), found


def test_config_escape_hatches_accept_what_the_catalogs_do_not_list_yet() -> None:
    assert make_config(cluster={"systemPool": {"machineType": "n5-standard-4", "allowUndocumentedMachineType": True}})
    assert make_config(tpu={"reservation": "projects/other-proj-1/reservations/tpu-r1"}).tpu.reservation
    region: dict[str, Any] = {"gcp:region": "us-east9"}
    new_region = make_config(**region, tpu={"zone": "us-east9-a", "allowUndocumentedZone": True})
    assert new_region.region == "us-east9"


def test_config_zone_outside_region_is_blamed_on_the_zone_when_topology_is_unset() -> None:
    (msg,) = problems(tpu={"topology": None, "zone": "us-central1-b"})
    assert msg.startswith("gke-tpu-llm:tpu.zone: 'us-central1-b' is not in gcp:region us-east5")


def test_config_bucket_needs_are_checked_the_same_way_for_every_workload() -> None:
    vllm = {"tpu": {"topology": "2x4", "machineType": "ct6e-standard-8t"}, "workload": {"kind": "vllm", "model": "llama3.1-70b"}}
    (msg,) = problems(**vllm, identity={"bucketRoles": {"models": "roles/storage.objectViewer"}})
    assert msg.startswith("gke-tpu-llm:identity.bucketRoles.models: 'roles/storage.objectViewer' does not let vLLM write")
    assert "Allowed: roles/storage.objectUser, roles/storage.objectAdmin" in msg
    ok = make_config(
        tpu=vllm["tpu"],
        workload={**vllm["workload"], "vllm": {"bucket": "weights"}},
        buckets={"models": None, "weights": {"purpose": "w"}},
        identity={"bucketRoles": {"models": None, "weights": "roles/storage.objectAdmin"}},
    )
    assert vllm_settings(ok).bucket == "weights"


def test_config_generated_names_are_checked_and_shared_names_detected() -> None:
    found = problems(buckets={"train_logs": {"purpose": "a"}, "train-logs": {"purpose": "b"}})
    assert any(m.startswith("gke-tpu-llm:buckets.train-logs: 'test-project-123-test-train-logs'") for m in found)
    found = problems(identity={"mode": "gsa", "serviceAccount": "tpu-nodes"}, tpu={"workloadMetadata": "GCE_METADATA"})
    assert any(m.startswith("gke-tpu-llm:identity.serviceAccount: 'tpu-nodes' gives the workload service account") for m in found)
    with pytest.raises(ConfigError) as info:
        make_config("kube-llm")
    (msg,) = (str(v) for v in info.value.violations)
    assert msg.startswith("gke-tpu-llm:identity.namespace: 'kube-llm' (derived from the stack name 'kube-llm')")
    assert make_config("kube-llm", identity={"namespace": "llm"}).namespace == "llm"
    long = make_config("x" * 40, identity={"mode": "gsa"})  # display name would be 40 + 40 + ... bytes
    assert long.stack == "x" * 40


# ---- tpu.generation unset: the planner picks across the zone's generations ----


def test_config_unset_generation_is_valid_in_a_documented_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    config = make_config(tpu={"generation": None, "topology": None, "zone": "us-east5-a"})
    assert config.tpu.generation is None
    assert config.tpu.zone_generations() == ("v5e", "v5p", "v6e")  # us-east5-a: no tpu7x
    with pytest.raises(ValueError, match="no resolved slice"):
        config.tpu.slice  # noqa: B018 - the planner has not chosen yet
    region: dict[str, Any] = {"gcp:region": "us-central1"}
    central = make_config(**region, tpu={"generation": None, "topology": None, "zone": "us-central1-c"})
    assert central.tpu.zone_generations() == ("tpu7x",)


def test_config_topology_without_generation_names_both_keys() -> None:
    (msg,) = problems(tpu={"generation": None})
    assert msg.startswith("gke-tpu-llm:tpu.topology: '4x4' is set but generation is not")
    assert "set tpu.generation too, or remove tpu.topology" in msg


def test_config_unset_generation_needs_a_zone_of_some_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)
    (msg,) = problems(tpu={"generation": None, "topology": None, "zone": "us-east5-z"})
    assert msg.startswith("gke-tpu-llm:tpu.zone: 'us-east5-z' is not a documented zone of any TPU generation")
    assert "us-central1-c" in msg  # the tpu7x zone is among the allowed ones
    allowed = make_config(tpu={"generation": None, "topology": None, "zone": "us-east5-z", "allowUndocumentedZone": True})
    # An undocumented zone falls back to the generations of its region.
    assert allowed.tpu.zone_generations() == ("v5e", "v5p", "v6e")
    (outside,) = problems(tpu={"generation": None, "topology": None, "zone": "us-central1-c"})
    assert outside.startswith("gke-tpu-llm:tpu.zone: 'us-central1-c' is not in gcp:region us-east5")


def test_config_unset_generation_checks_the_machine_type_against_every_generation() -> None:
    (msg,) = problems(tpu={"generation": None, "topology": None, "machineType": "ct9-standard-4t"})
    assert msg.startswith("gke-tpu-llm:tpu.machineType: 'ct9-standard-4t' is not a TPU machine type in the catalog")
    assert "ct5p-hightpu-4t" in msg
    assert "tpu7x-standard-4t" in msg
    assert make_config(tpu={"generation": None, "topology": None, "machineType": "ct5p-hightpu-4t", "zone": "us-east5-a"})
