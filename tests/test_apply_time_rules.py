"""Inputs the providers and GKE would accept at preview and refuse half-way through `pulumi up` are
refused at plan time (exit 2, key and value) or normalised to what the API takes (shown so)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.platform import MAX_AUTHORIZED_NETWORKS
from components.tools import report
from components.tools.cli import main
from tests.conftest import make_config


def _violations(**override: Any) -> list[str]:
    with pytest.raises(ConfigError) as error:
        make_config(**override)
    return [str(v) for v in error.value.violations]


def test_more_authorized_networks_than_gke_takes() -> None:
    ranges = [f"198.51.{i}.0/24" for i in range(MAX_AUTHORIZED_NETWORKS + 1)]
    (message,) = _violations(cluster={"hardening": {"authorizedNetworks": ranges}})
    assert message.startswith("gke-tpu-llm:cluster.hardening.authorizedNetworks: '51 ranges' is more than the 50")
    assert "Allowed: at most 50 CIDR ranges" in message
    # Adjacent /24s merge: the error says into what.
    assert "merged, they are" in message
    # 50 is accepted.
    make_config(cluster={"hardening": {"authorizedNetworks": ranges[:MAX_AUTHORIZED_NETWORKS]}})


@pytest.mark.parametrize(
    ("given", "normalised"),
    [("203.0.113.7", "203.0.113.7/32"), ("2001:db8::1", "2001:db8::1/128"), ("10.0.0.0/8", "10.0.0.0/8")],
)
def test_bare_address_becomes_its_host_range(given: str, normalised: str) -> None:
    config = make_config(cluster={"hardening": {"authorizedNetworks": [given]}})
    assert config.cluster.hardening.authorized_networks == [normalised]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("10.0.0.1/8", "has host bits set after the prefix (the range is 10.0.0.0/8)"),
        ("not-an-ip", "is not a CIDR range"),
        ("300.1.1.1", "is not a CIDR range"),
    ],
)
def test_bad_ranges_name_the_key_and_the_fix(given: str, expected: str) -> None:
    (message,) = _violations(cluster={"hardening": {"authorizedNetworks": ["192.0.2.0/24", given]}})
    assert message.startswith(f"gke-tpu-llm:cluster.hardening.authorizedNetworks.1: {given!r} {expected}")
    assert "Fix:" in message


def test_normalised_ranges_are_what_the_plan_shows(tmp_path: Path) -> None:
    """The bare address reaches the provider (and the plan) as CIDR, on the cluster and the Service."""
    data = yaml.safe_load(stacks.stack_path("llama-70b").read_text())
    data["config"]["gke-tpu-llm:cluster"]["hardening"] = {"authorizedNetworks": ["203.0.113.7"]}
    data["config"]["gke-tpu-llm:workload"].pop("frontDoor", None)  # the Service's own load balancer
    data["config"]["gke-tpu-llm:workload"]["vllm"]["service"]["sourceRanges"] = ["10.128.0.9"]
    path = tmp_path / "Pulumi.llama-70b.yaml"
    path.write_text(yaml.safe_dump(data))
    plan = report.plan_json(report.plan(stacks.read_stack_file(path)))
    (cluster,) = [r for r in plan["resources"] if r["type"] == "gcp:container/cluster:Cluster"]
    blocks = cluster["inputs"]["masterAuthorizedNetworksConfig"]["cidrBlocks"]
    assert [b["cidrBlock"] for b in blocks] == ["203.0.113.7/32"]
    services = [m for m in plan["manifests"] if m["kind"] == "Service" and m["spec"].get("type") == "LoadBalancer"]
    assert services
    assert all(s["spec"]["loadBalancerSourceRanges"] == ["10.128.0.9/32"] for s in services)


PROD: dict[str, Any] = {"environment": "prod"}


def test_prod_allow_replacement_with_deletion_protection_on_is_refused() -> None:
    (message,) = _violations(**PROD, cluster={"allowReplacement": True, "deletionProtection": True})
    assert message.startswith("gke-tpu-llm:cluster.deletionProtection: True contradicts cluster.allowReplacement")
    # Unset is prod's default (on): the same failure at apply time, and the error says it is the default.
    (message,) = _violations(**PROD, cluster={"allowReplacement": True})
    assert message.startswith("gke-tpu-llm:cluster.deletionProtection: '(unset: on in prod)' contradicts")
    # The documented pair is accepted.
    config = make_config(**PROD, cluster={"allowReplacement": True, "deletionProtection": False})
    assert config.deletion_protection is False


def test_cli_exits_2_for_apply_time_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(stacks.stack_path("llama-405b-prod").read_text())
    data["config"]["gke-tpu-llm:cluster"].update({"allowReplacement": True, "deletionProtection": True})
    path = tmp_path / "Pulumi.prod-copy.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["plan", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "gke-tpu-llm:cluster.deletionProtection: True contradicts cluster.allowReplacement" in err
