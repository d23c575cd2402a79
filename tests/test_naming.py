"""Physical names stay within GCP/Kubernetes limits, deterministically."""

from __future__ import annotations

import re

import pytest

from components import naming


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
    assert naming.node_pool_name("v6e-4x4", 0) == "tpu-v6e-4x4-0"
    assert re.fullmatch(naming.GKE_NAME_PATTERN, naming.node_pool_name("v6e-2x4-4t", 12))
