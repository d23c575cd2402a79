"""Cluster hardening: typed settings, each updated in place on a live cluster."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.errors import ConfigError
from components.platform.gke import GkeCluster
from components.program.build import cluster_args
from components.tools import replacement
from tests.conftest import make_config
from tests.test_components import one, run


def cluster_inputs(**hardening: Any) -> dict[str, Any]:
    config = make_config(cluster={"hardening": hardening})
    return one(run(config, lambda c: GkeCluster(c.cluster_name, cluster_args(c))), "gcp:container/cluster:Cluster").inputs


def test_defaults_keep_shielded_nodes_and_add_nothing_that_needs_a_nat_or_a_policy() -> None:
    inputs = cluster_inputs()
    assert inputs["enableShieldedNodes"] is True
    for absent in ("privateClusterConfig", "masterAuthorizedNetworksConfig", "binaryAuthorization"):
        assert absent not in inputs


def test_every_setting_reaches_the_cluster() -> None:
    inputs = cluster_inputs(
        privateNodes=True, authorizedNetworks=["203.0.113.0/24"], binaryAuthorization=True, shieldedNodes=False
    )
    assert inputs["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    assert inputs["masterAuthorizedNetworksConfig"] == {"cidrBlocks": [{"cidrBlock": "203.0.113.0/24"}]}
    assert inputs["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
    assert inputs["enableShieldedNodes"] is False


def test_turning_hardening_on_never_replaces_the_cluster() -> None:
    paths = ["privateClusterConfig", "masterAuthorizedNetworksConfig", "binaryAuthorization", "enableShieldedNodes"]
    assert replacement.replacing_paths("gcp:container/cluster:Cluster", paths) == []


@pytest.mark.parametrize(
    ("hardening", "message"),
    [
        ({"authorizedNetworks": []}, "gke-tpu-llm:cluster.hardening.authorizedNetworks: [] would lock every client"),
        ({"authorizedNetworks": ["0.0.0.0/1", "128.0.0.0/1"]}, "gke-tpu-llm:cluster.hardening.authorizedNetworks: ['0.0.0.0/1'"),
        (
            {"authorizedNetworks": ["10.0.0.1/8"]},
            "gke-tpu-llm:cluster.hardening.authorizedNetworks.0: '10.0.0.1/8' has host bits set after the prefix "
            "(the range is 10.0.0.0/8)",
        ),
    ],
)
def test_bad_authorized_networks_name_the_key(hardening: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_config(cluster={"hardening": hardening})
    assert any(str(v).startswith(message) for v in info.value.violations)


def test_cpu_pools_boot_securely_and_tpu_pools_keep_gke_defaults() -> None:
    from tests.conftest import planned

    for res in planned("llama-405b").resources:
        if res.type != "gcp:container/nodePool:NodePool":
            continue
        shielding = res.inputs["nodeConfig"].get("shieldedInstanceConfig")
        if res.inputs["name"].startswith("tpu-"):
            assert shielding is None
        else:  # system and ckpt-convert
            assert shielding == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}


def test_review_warns_that_enabling_calico_recreates_every_node() -> None:
    from components.tools.review import compare_stack
    from tests.test_day2 import variant
    from tests.test_netpol import before_network_policies

    legacy = variant("llama-405b", cluster__dataplane="legacy")
    change = compare_stack("llama-405b", before_network_policies(legacy), legacy)
    assert any("GKE then recreates every node of the cluster, TPU slices included" in w for w in change.warnings)
    assert not any("recreates every node" in w for w in compare_stack("llama-405b", legacy, legacy).warnings)
