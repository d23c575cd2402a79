"""Cluster add-ons (``components/platform/addons``, issue 23): one module per feature a stack or kind
opts into as a function of its settings, wired by the program through one interface, and the
controllers' adoption of the release another kind registered. A name nothing installs, an add-on
registered when not needed (or missing when needed), and a stale adoption each fail naming it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from components.catalog.stackdriver_adapter import ADAPTER_IMAGE
from components.crds.releases import CONTROLLERS
from components.platform.addons import (
    capacity_scheduling,
    inference_gateway,
    metrics_adapter,
    multi_tier_checkpointing,
    observability,
)
from components.platform.addons.capacity_scheduling import CapacityScheduling
from components.platform.addons.controllers import HelmController, adopted_homes
from components.platform.addons.inference_gateway import InferenceGateway
from components.platform.addons.metrics_adapter import MetricsAdapter
from components.platform.addons.multi_tier_checkpointing import MultiTierCheckpointing
from components.platform.addons.observability import Observability
from components.platform.gke import ADDONS as GKE_ADDONS
from components.program.build import ADDONS, build_platform, unknown_addons
from components.tools import mockengine
from components.workloads.registry import BY_KIND
from components.workloads.vllm import component as vllm_component
from components.workloads.vllm.spec import settings
from tests.conftest import STACKS, make_config, planned

COMPONENTS = {
    capacity_scheduling.NAME: CapacityScheduling.TYPE,
    metrics_adapter.NAME: MetricsAdapter.TYPE,
    inference_gateway.NAME: InferenceGateway.TYPE,
    multi_tier_checkpointing.NAME: MultiTierCheckpointing.TYPE,
    observability.NAME: Observability.TYPE,
}
"""The component each add-on module registers (a new add-on is added here, or the next test fails)."""
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_the_program_wires_every_addon_module_once_capacity_scheduling_first() -> None:
    names = [addon.NAME for addon in ADDONS]
    assert sorted(names) == sorted(COMPONENTS)
    assert len(set(names)) == len(names)
    # A name means one thing: no add-on module shares it with a GKE add-on or a controller.
    assert not set(names) & (set(GKE_ADDONS) | set(CONTROLLERS))
    # Capacity scheduling attaches to every Kubernetes object registered after it (the other add-ons' too).
    assert ADDONS[0] is capacity_scheduling


@pytest.mark.parametrize("stack", STACKS)
def test_every_addon_a_stack_names_is_installed_by_something(stack: str) -> None:
    config = planned(stack).config
    assert unknown_addons(config) is None


def test_an_addon_name_nothing_installs_fails_naming_it_and_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    import components.config.stack as stack_module

    config = planned("llama-70b").config
    typo = dataclasses.replace(BY_KIND["vllm"], addons=lambda c: frozenset({"gcsFuseCsiDriver", "metricAdapter"}))
    monkeypatch.setattr(stack_module, "BY_KIND", {**BY_KIND, "vllm": typo})
    problem = unknown_addons(config)
    assert problem is not None
    assert problem.startswith("kind vllm opts into add-ons nothing installs: metricAdapter. Known: ")
    assert "add-on modules (components/program/build.py ADDONS): capacityScheduling, inferenceGateway, metricsAdapter" in problem
    assert "controllers (components/crds/releases.py CONTROLLERS): jobset, kueue, lws" in problem


@pytest.mark.parametrize("stack", STACKS)
def test_each_addon_is_registered_exactly_when_the_stack_needs_it(stack: str) -> None:
    result = planned(stack)
    registered = {r.type for r in result.resources}
    for addon in ADDONS:
        assert addon.needed(result.config) == (COMPONENTS[addon.NAME] in registered), (stack, addon.NAME)


ON_EVERY_STACK: dict[str, dict[str, Any]] = {observability.NAME: {"observability": {"enabled": False}}}
"""Add-ons every committed stack needs (on by default), with the override that turns each off."""


def test_the_committed_stacks_exercise_every_addon_both_ways() -> None:
    """Not vacuous: each add-on is needed by some committed stack and not by another (one on by default
    everywhere: by every committed stack, and not by a config that turns it off)."""
    for addon in ADDONS:
        seen = {addon.needed(planned(stack).config) for stack in STACKS}
        if addon.NAME in ON_EVERY_STACK:
            assert seen == {True}, addon.NAME
            assert not addon.needed(make_config(**ON_EVERY_STACK[addon.NAME])), addon.NAME
        else:
            assert seen == {True, False}, addon.NAME


# ---------------------------------------------------------------- the metrics adapter


def test_the_adapter_runs_the_version_the_opting_kinds_settings_give() -> None:
    result = planned("llama-70b-fallback")  # the adapter path (no cluster version pinned at the AutoscalingMetric floor)
    version = metrics_adapter.version(result.config)
    assert version == settings(result.config).metrics_adapter_version == ADAPTER_IMAGE.tag
    (adapter,) = [r for r in result.resources if r.type == MetricsAdapter.TYPE]
    assert adapter.name == "metrics-adapter"
    assert adapter.parent.endswith("pulumi:pulumi:Stack::gke-tpu-llm-llama-70b-fallback")  # the program's, not the server's
    (dep,) = [m for m in result.manifests if m["kind"] == "Deployment" and m["metadata"]["namespace"] == "custom-metrics"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"].startswith(f"{ADAPTER_IMAGE.repository}:{version}")


def test_a_kind_opting_into_the_adapter_without_its_version_setting_is_named() -> None:
    message = "kind jetstream-pathways opts into metricsAdapter but its settings have no metrics_adapter_version"
    with pytest.raises(TypeError, match=message):
        metrics_adapter.version(make_config())


def test_vllm_autoscaling_without_the_adapter_installed_is_an_error_not_a_missing_hpa() -> None:
    stack = planned("llama-70b-fallback").stack_plan

    def program() -> None:
        platform = build_platform(stack.config)
        vllm_component.deploy(stack, cluster=platform.cluster, identity=platform.identity, buckets=platform.buckets)

    with pytest.raises(ValueError, match="vLLM autoscaling needs the metricsAdapter add-on installed"):
        mockengine.record(
            program,
            stack="llama-70b-fallback",
            project=stack.config.project,
            config={"gke-tpu-llm:hfToken": "hf_x"},
            secret_keys=["gke-tpu-llm:hfToken"],
        )


# ---------------------------------------------------------------- controllers: installed by settings, adopted across kinds


def _homes(stack: str) -> list[tuple[str, str, list[str]]]:
    """(parent type, name, aliases) of every HelmController of ``stack``."""
    resources = planned(stack).resources
    types = {r.urn: r.type for r in resources}
    return [(types.get(r.parent, ""), r.name, list(r.options["aliases"])) for r in resources if r.type == HelmController.TYPE]


def test_vllm_adopts_the_lws_release_jetstream_registered_and_jetstream_keeps_its_own() -> None:
    ((parent, name, aliases),) = _homes("llama-405b-vllm")
    assert (parent, name) == ("gke-tpu-llm:vllm:VllmServer", "lws")
    assert aliases == [
        "urn:pulumi:llama-405b-vllm::gke-tpu-llm::gke-tpu-llm:jetstream:JetstreamServer$gke-tpu-llm:controllers:HelmController::lws"
    ]
    ((parent, name, aliases),) = _homes("llama-405b")
    assert (parent, name, aliases) == ("gke-tpu-llm:jetstream:JetstreamServer", "lws", [])
    assert adopted_homes("jobset", "gke-tpu-llm:saxml:SaxmlServing") == []


def test_every_adopted_home_is_where_a_committed_stack_registers_that_controller() -> None:
    """An ``adopts`` entry names a parent type and name some kind really uses: a renamed component
    would otherwise leave an alias that adopts nothing."""
    registered = {(parent, name) for stack in STACKS for parent, name, _ in _homes(stack)}
    declared = [(c.name, home, name) for c in CONTROLLERS.values() for home, name in c.adopts]
    assert declared  # LWS: the JetStream kind's release
    for controller, home, name in declared:
        assert (home, name) in registered, f"{controller}: adopts {home} {name!r}, which no committed stack registers"


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_installs_the_controllers_its_settings_name(stack: str) -> None:
    result = planned(stack)
    releases = {str(r.inputs["name"]) for r in result.resources if r.type == RELEASE}
    queued = capacity_scheduling.needed(result.config) and any(m["kind"] == "ClusterQueue" for m in result.manifests)
    expected: set[Any] = set(result.config.addons & set(CONTROLLERS)) | ({"kueue"} if queued else set())
    assert releases == expected, stack


# ---------------------------------------------------------------- the gateway front door's VPC side


SUBNET = "gcp:compute/subnetwork:Subnetwork"
CLUSTER = "gcp:container/cluster:Cluster"


def test_a_gateway_stack_creates_the_proxy_only_subnet_only_when_it_says_so() -> None:
    """llama-70b creates us-east5's proxy-only subnet; llama-405b-vllm expects the same one (pre-flight
    checks it). Both clusters get the Gateway API add-on and HTTP load balancing, in place."""
    created = planned("llama-70b")
    (subnet,) = [r for r in created.resources if r.type == SUBNET]
    spec = created.config.workload.front_door.proxy_subnet
    assert spec is not None
    assert spec.create
    assert subnet.inputs["purpose"] == "REGIONAL_MANAGED_PROXY"
    assert subnet.inputs["role"] == "ACTIVE"
    assert subnet.inputs["ipCidrRange"] == str(spec.cidr)
    assert subnet.inputs["network"] == "default"
    assert subnet.inputs["region"] == created.config.region
    assert subnet.inputs["name"] == "gke-tpu-llm-proxy-only-default"
    expected = planned("llama-405b-vllm")
    assert not [r for r in expected.resources if r.type == SUBNET]
    assert [r for r in expected.resources if r.type == InferenceGateway.TYPE]
    for result in (created, expected):
        (cluster,) = [r for r in result.resources if r.type == CLUSTER]
        assert cluster.inputs["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
        assert cluster.inputs["addonsConfig"]["httpLoadBalancing"] == {"disabled": False}


def test_a_service_stack_keeps_its_cluster_inputs() -> None:
    """No gateway: the cluster's Gateway API and HTTP load balancing fields stay unset (GKE's defaults)."""
    (cluster,) = [r for r in planned("llama-405b").resources if r.type == CLUSTER]
    assert "gatewayApiConfig" not in cluster.inputs
    assert "httpLoadBalancing" not in cluster.inputs["addonsConfig"]


def test_a_pinned_version_below_the_gateway_floor_is_refused_naming_the_key() -> None:
    from components.config.front_door import GKE_VERSION_FLOOR
    from components.config.gke_rules import inference_gateway_version_rules
    from components.platform.args import ArgsError
    from components.program.build import cluster_args

    assert inference_gateway_version_rules("cluster.version", "1.33", True)
    assert not inference_gateway_version_rules("cluster.version", GKE_VERSION_FLOOR, True)
    assert not inference_gateway_version_rules("cluster.version", "1.33", False)
    assert not inference_gateway_version_rules("cluster.version", None, True)  # the channel's default: pre-flight
    args = cluster_args(planned("llama-70b").config)
    with pytest.raises(ArgsError, match=r"version: '1\.33\.5' is below the GKE version that installs the Gateway API"):
        dataclasses.replace(args, version="1.33.5")


def test_proxy_subnet_claims_clash_between_two_creators_and_on_a_different_range() -> None:
    """llama-70b creates us-east5's proxy-only subnet and llama-405b-vllm expects it with the same range
    (no clash). A second creator clashes on the subnet's name; an expectation of another range clashes
    with the creator, naming both stacks; two expectations of one range never clash."""
    from components.config.isolation import PROXY_SUBNET_EXPECTED, conflicts, tenancy

    creator = tenancy(planned("llama-70b").config)
    expecter = tenancy(planned("llama-405b-vllm").config)
    assert conflicts(expecter, [creator]) == []
    second = dataclasses.replace(creator, stack="two")
    keys = [v.key for v in conflicts(second, [creator])]
    assert "gke-tpu-llm:workload.frontDoor.proxySubnet.create" in keys
    (clash,) = [v for v in conflicts(second, [creator]) if v.key.endswith("proxySubnet.create")]
    assert "this stack ('two')" in clash.problem
    assert "stack 'llama-70b'" in clash.problem
    other = dataclasses.replace(
        expecter,
        claims=tuple(
            dataclasses.replace(c, name="10.130.0.0/23", detail="10.130.0.0/23") if c.what == PROXY_SUBNET_EXPECTED else c
            for c in expecter.claims
        ),
    )
    (wrong_range,) = conflicts(other, [creator])
    assert wrong_range.key == "gke-tpu-llm:workload.frontDoor.proxySubnet.cidr"
    assert wrong_range.value == "10.130.0.0/23"
    assert "this stack ('llama-405b-vllm') expects" in wrong_range.problem
    assert "stack 'llama-70b' creates it with 10.129.0.0/23" in wrong_range.problem
    (from_creator,) = conflicts(creator, [other])
    assert "stack 'llama-405b-vllm' expects it with 10.130.0.0/23" in from_creator.problem
    # Same names otherwise (a copy of the stack), but the shared expectation itself is never a clash.
    assert not [v for v in conflicts(expecter, [dataclasses.replace(expecter, stack="three")]) if "proxySubnet" in v.key]
