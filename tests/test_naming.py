"""Physical names stay within GCP/Kubernetes limits, deterministically."""

from __future__ import annotations

import re

import pytest

from components.config import naming


@pytest.mark.parametrize(
    ("stack", "expected"),
    [("llama-405b", "llama-405b"), ("Llama_405B", "llama-405b"), ("405b", "c-405b")],
)
def test_naming_gke_name(stack: str, expected: str) -> None:
    assert naming.gke_name(stack) == expected
    assert re.fullmatch(naming.GKE_NAME_PATTERN, expected)


def test_naming_long_names_are_truncated_with_a_stable_hash() -> None:
    long = "a" * 80
    first, second = naming.gke_name(long), naming.gke_name(long)
    assert first == second
    assert len(first) == naming.GKE_NAME_MAX
    assert naming.gke_name(long + "x") != first


@pytest.mark.parametrize("stack", ["s", "llama-405b-prod", "x" * 50])
def test_naming_service_account_id_limits(stack: str) -> None:
    sa = naming.service_account_id(stack, "jetstream-pathways")
    assert naming.GSA_ID_MIN <= len(sa) <= naming.GSA_ID_MAX
    assert re.fullmatch(r"[a-z][-a-z0-9]*[a-z0-9]", sa)


def test_naming_bucket_name_limits_and_no_goog() -> None:
    name = naming.bucket_name("google-proj-1", "llama-405b-prod-with-a-very-long-stack-name", "checkpoints")
    assert len(name) <= naming.BUCKET_NAME_MAX
    assert "goog" not in name


def test_naming_node_pool_name() -> None:
    assert naming.node_pool_name(0) == "tpu-slice-0"
    assert re.fullmatch(naming.GKE_NAME_PATTERN, naming.node_pool_name(63))
    assert naming.legacy_node_pool_name("v6e-4x4", 0) == "tpu-v6e-4x4-0"
    assert re.fullmatch(naming.GKE_NAME_PATTERN, naming.legacy_node_pool_name("v6e-2x4-4t", 12))


# ---- validators and the names that must not change


@pytest.mark.parametrize(
    ("project", "stack", "key", "expected"),
    [
        # Names that were valid keep their exact form: no existing bucket is renamed.
        ("your-project-id", "llama-405b", "checkpoints", "your-project-id-llama-405b-checkpoints"),
        ("goog-team-proj", "llama", "models", "g00g-team-proj-llama-models"),
        ("my-proj", "googly", "sax", "my-proj-g00gly-sax"),
        # Names that were invalid ('google' became the forbidden 'g00gle') are mapped anew.
        ("my-proj", "google-llm", "models", "my-proj-ggl-llm-models"),
        ("my-proj", "Google", "models", "my-proj-ggl-models"),
        ("my-proj", "g00gle", "models", "my-proj-ggl-models"),
    ],
)
def test_naming_bucket_names_keep_valid_legacy_names_and_fix_invalid_ones(
    project: str, stack: str, key: str, expected: str
) -> None:
    name = naming.bucket_name(project, stack, key)
    assert name == expected
    assert naming.bucket_name_problems(name) == []


def test_naming_bucket_name_validator_applies_the_gcs_rules() -> None:
    assert naming.bucket_name_problems("ok-name_1") == []
    assert any("starts with 'goog'" in p for p in naming.bucket_name_problems("goog-x"))
    for bad in ("my-google-x", "my-g00gle-x", "my-goog1e-x"):
        assert any("google" in p for p in naming.bucket_name_problems(bad)), bad
    assert naming.bucket_name_problems("ab")
    assert naming.bucket_name_problems("x" * 64)
    assert naming.bucket_name_problems("-x-")
    assert naming.bucket_name_problems("UPPER")


@pytest.mark.parametrize("stack", ["s", "llama-405b-prod", "a" * 35, "ü" * 60, "google-" + "x" * 80])
def test_naming_generated_service_account_names_are_valid(stack: str) -> None:
    assert naming.service_account_id_problems(naming.service_account_id(stack, "tpu-nodes")) == []
    assert naming.display_name_problems(naming.workload_gsa_display_name(stack, "n" * 63, "k" * 63)) == []
    assert naming.display_name_problems(naming.node_gsa_display_name(stack)) == []


def test_naming_display_names_that_fit_are_unchanged() -> None:
    # The display names of existing stacks stay exactly as they were.
    assert naming.workload_gsa_display_name("llama-405b", "llama-405b", "jetstream-pathways") == (
        "llama-405b workloads (llama-405b/jetstream-pathways)"
    )
    long = naming.workload_gsa_display_name("s" * 40, "s" * 40, "jetstream-pathways")
    assert len(long.encode()) <= naming.DISPLAY_NAME_MAX_BYTES
    assert long.endswith("…")


@pytest.mark.parametrize(
    "namespace", ["kube-system", "kube-public", "gke-managed-system", "gmp-system", "lws-system", "custom-metrics"]
)
def test_naming_reserved_namespaces(namespace: str) -> None:
    assert naming.namespace_problems(namespace)
    assert naming.namespace_problems("llama-405b") == []
    assert naming.namespace_problems("default") == []  # exists; the stack only uses it


def test_naming_default_service_account_and_odd_names() -> None:
    assert naming.service_account_name_problems("default")
    assert naming.service_account_name_problems("llm-workload") == []
    assert naming.dns_label("---") == "ns"
    assert naming.stack_name_problems("bad name!")
    assert naming.stack_name_problems("llama-405b") == []


def test_naming_collisions_list_every_shared_name() -> None:
    assert naming.collisions({"a": "x", "b": "y", "c": "x"}) == {"x": ["a", "c"]}
    assert naming.collisions({"a": "x"}) == {}
