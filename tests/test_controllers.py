"""Controller CRDs managed from the pinned release (issue: Helm never upgrades ``crds/``), and the
Kubernetes provider without a permanent ``deleteUnreachable``."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import crds
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.platform import ControllersSpec
from components.crds.releases import CONTROLLERS, CUSTOM_RESOURCES, MANAGED
from components.platform.addons.controllers import CRD_ANNOTATIONS, HelmController, crd_object
from components.tools import mockengine, report
from components.tools.review import compare
from components.tools.validate import validate_all, validate_object
from tests.conftest import STACKS, planned, planned_built, planned_file

CRD_PATCH = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch"
RELEASE = "kubernetes:helm.sh/v3:Release"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"

#: stack -> (controller, CR type, key in gke-tpu-llm:controllers, an older vendored release)
USERS: Mapping[str, tuple[str, str, str, str]] = {
    "llama-405b": ("lws", LWS, "lwsVersion", "0.9.0"),
    "llama-405b-prod": ("lws", LWS, "lwsVersion", "0.9.0"),
    "llama2-70b-disagg": ("lws", LWS, "lwsVersion", "0.9.0"),
    "saxml-175b": ("jobset", JOBSET, "jobsetVersion", "0.11.1"),
    "llama-405b-vllm": ("lws", LWS, "lwsVersion", "0.9.0"),
    "llama3-8b-train-multislice": ("jobset", JOBSET, "jobsetVersion", "0.11.1"),
}


def plan_with_controllers(tmp_path: Path, stack: str, controllers: dict[str, str]) -> report.PlanResult:
    """The plan of ``stack`` after a commit that sets ``gke-tpu-llm:controllers``."""
    doc = yaml.safe_load(stacks.stack_path(stack).read_text())
    doc["config"]["gke-tpu-llm:controllers"] = controllers
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return planned_file(stacks.read_stack_file(path))


def of_type(result: report.PlanResult, typ: str) -> list[mockengine.Registration]:
    return [r for r in result.resources if r.type == typ]


def crd_by_name(result: report.PlanResult) -> dict[str, mockengine.Registration]:
    return {r.inputs["metadata"]["name"]: r for r in of_type(result, CRD_PATCH)}


# --------------------------------------------------------------------------- vendored data


def test_vendored_versions_include_the_defaults_and_an_older_release() -> None:
    defaults = ControllersSpec().by_controller
    assert set(defaults) == set(CONTROLLERS)  # one gke-tpu-llm:controllers field per declared controller
    for controller, default in defaults.items():
        versions = crds.versions(controller)
        assert default in versions
        assert versions.index(default) > 0, "keep an older release vendored so a bump is testable"
    assert crds.versions("lws") == ("0.9.0", "0.10.0")
    assert crds.versions("jobset") == ("0.8.1", "0.11.1", "0.12.0")


@pytest.mark.parametrize("controller", sorted(CONTROLLERS))
def test_declared_versions_are_exactly_the_vendored_directories(controller: str) -> None:
    declared = CONTROLLERS[controller].versions
    on_disk = [p.name for p in (crds.CRD_DIR / controller).iterdir() if p.is_dir()]
    assert sorted(on_disk) == sorted(declared)
    assert list(declared) == sorted(declared, key=lambda v: tuple(int(n) for n in v.split("."))), "oldest first"
    for version in declared:
        assert list((crds.CRD_DIR / controller / version).glob("*.json.gz")), version


@pytest.mark.parametrize("controller", sorted(CONTROLLERS))
def test_declared_kinds_are_served_by_the_vendored_crds(controller: str) -> None:
    # Every kind the table gives the controller has a CRD in each vendored release (the validator's
    # schema source), and the chart's CRDs name the Service namespace the table installs into.
    declared = CONTROLLERS[controller]
    for version in declared.versions:
        for resource in declared.resources:
            assert crds.schema(controller, version, resource.api_version, resource.kind)["type"] == "object"
        for crd in crds.crds(controller, version):
            service = ((crd["spec"].get("conversion") or {}).get("webhook") or {}).get("clientConfig", {}).get("service")
            if service:  # the chart names it after the release, which HelmController names after the controller
                assert (service["name"], service["namespace"]) == (f"{controller}-webhook-service", declared.chart.namespace)


@pytest.mark.parametrize("controller", sorted(CONTROLLERS))
def test_vendored_crds_match_their_source_record(controller: str) -> None:
    repository, chart_dir = CONTROLLERS[controller].repository, CONTROLLERS[controller].chart_crds
    for version in crds.versions(controller):
        directory = crds.CRD_DIR / controller / version
        source = json.loads((directory / "SOURCE.json").read_text())
        assert source["repository"] == repository
        assert source["tag"] == f"v{version}"
        assert len(source["commit"]) == 40
        assert source["license"] == "Apache-2.0"
        assert sorted(f["vendored"] for f in source["files"]) == sorted(p.name for p in directory.glob("*.json.gz"))
        for entry in source["files"]:
            assert entry["path"] == f"{chart_dir}/{entry['vendored'].removesuffix('.json.gz')}.yaml"
            text = gzip.decompress((directory / entry["vendored"]).read_bytes())
            assert hashlib.sha256(text).hexdigest() == entry["sha256"]
            crd = json.loads(text)
            assert (crd["apiVersion"], crd["kind"]) == ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            assert crd["metadata"]["name"] == entry["name"] == f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
        assert [c["metadata"]["name"] for c in crds.crds(controller, version)] == sorted(f["name"] for f in source["files"])
    assert (crds.CRD_DIR / "README.md").is_file()


def test_crds_loader_returns_fresh_copies_and_rejects_unknown_versions() -> None:
    first = crds.crds("jobset", "0.12.0")
    first[0]["spec"]["group"] = "mutated"
    assert crds.crds("jobset", "0.12.0")[0]["spec"]["group"] == "jobset.x-k8s.io"
    with pytest.raises(KeyError, match=r"no vendored CRDs for lws '0.8.0'; vendored: 0.9.0, 0.10.0"):
        crds.crds("lws", "0.8.0")
    with pytest.raises(KeyError, match="no CRD serving"):
        crds.schema("lws", "0.10.0", "leaderworkerset.x-k8s.io/v2", "LeaderWorkerSet")


def test_crd_object_only_adds_the_pulumi_annotations() -> None:
    (crd,) = crds.crds("jobset", "0.12.0")
    obj = crd_object(crd)
    assert obj["metadata"]["annotations"] == {**crd["metadata"]["annotations"], **CRD_ANNOTATIONS}
    assert {k: v for k, v in obj.items() if k != "metadata"} == {k: v for k, v in crd.items() if k != "metadata"}
    assert "pulumi.com/patchForce" not in crd["metadata"]["annotations"]  # the input is not mutated


# --------------------------------------------------------------------------- the table and the stacks


def test_every_managed_addon_is_opted_into_by_some_stack() -> None:
    """A GKE add-on the table names (``ManagedCustomResources.addon``) is one a committed stack's kind
    asks for with its settings (``WorkloadKindInfo.addons``): no stale entry."""
    managed_addons = {m.addon for m in MANAGED.values() if m.addon is not None}
    assert managed_addons <= {addon for stack in STACKS for addon in planned(stack).config.addons}


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_custom_resource_is_declared_and_its_controller_installed(stack: str) -> None:
    result = planned_built(stack)
    info = result.config.kind_info
    served_by = {(r.api_version, r.kind): c.name for c in CONTROLLERS.values() for r in c.resources}
    needs_addon = {(r.api_version, r.kind): m.addon for m in MANAGED.values() for r in m.resources}
    for obj in result.manifests:
        key = (obj["apiVersion"], obj["kind"])
        group = obj["apiVersion"].rpartition("/")[0]
        if "." not in group or group.endswith(".k8s.io"):
            continue  # a built-in API group
        assert key in CUSTOM_RESOURCES, key
    releases = {r.inputs["name"] for r in of_type(result, RELEASE)}
    for obj in result.manifests:
        key = (obj["apiVersion"], obj["kind"])
        if key in served_by:
            assert served_by[key] in releases, (key, info.kind)  # installed with the stack
        elif key in needs_addon and needs_addon[key] is not None:
            assert needs_addon[key] in result.config.addons, (key, info.kind)
    # A stack installs exactly the controllers its kind's settings ask for (WorkloadKindInfo.addons: vLLM
    # needs LWS on multi-host slices only), plus Kueue exactly when it renders queue objects (a
    # queued-provisioning tier: components/platform/addons/capacity_scheduling.py).
    queues = {"kueue"} & {served_by.get((m["apiVersion"], m["kind"])) for m in result.manifests}
    assert releases == (result.config.addons & set(CONTROLLERS)) | queues, info.kind
    assert ("kueue" in releases) == bool(queues)


# --------------------------------------------------------------------------- registration


@pytest.mark.parametrize("stack", sorted(USERS))
def test_controller_crds_are_registered_and_ordered(stack: str) -> None:
    controller, cr_type, _, _ = USERS[stack]
    result = planned_built(stack)
    version = result.config.controllers.by_controller[controller]
    (component,) = of_type(result, HelmController.TYPE)
    (release,) = of_type(result, RELEASE)
    registered = crd_by_name(result)
    vendored = {c["metadata"]["name"]: c for c in crds.crds(controller, version)}
    assert set(registered) == set(vendored)
    for name, res in registered.items():
        plural = vendored[name]["spec"]["names"]["plural"]
        assert res.name == f"{component.name}-crd-{plural}"
        assert res.parent == component.urn
        assert res.provider == f"{stack}-k8s"
        assert res.options["retainOnDelete"] is True  # deleting a CRD deletes every CR of its kind
        assert res.inputs["spec"] == vendored[name]["spec"]
        assert res.inputs["metadata"] == crd_object(vendored[name])["metadata"]
        assert res.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    # The release skips the chart's crds/ and waits for ours; the custom resources wait for the release.
    assert release.inputs["skipCrds"] is True
    assert release.inputs["version"] == version
    assert {r.urn for r in registered.values()} <= set(release.dependencies)
    crs = of_type(result, cr_type)
    assert crs
    for cr in crs:
        assert release.urn in cr.dependencies
    # CRDs are upstream data, not rendered manifests: the goldens stay small.
    assert not [m for m in result.manifests if m["kind"] == "CustomResourceDefinition"]


def test_stacks_without_these_controllers_register_no_crds() -> None:
    for stack in stacks.list_stacks():
        if stack not in USERS:
            assert not of_type(planned(stack), CRD_PATCH), stack
            # Only Kueue, whose chart applies its own CRDs (tests/test_kueue.py), for queued stacks.
            assert {r.inputs["name"] for r in of_type(planned(stack), RELEASE)} <= {"kueue"}, stack


@pytest.mark.parametrize("stack", ["llama-405b", "saxml-175b"])
def test_version_bump_changes_the_crds_and_the_release_in_the_plan(stack: str, tmp_path: Path) -> None:
    controller, _, key, older = USERS[stack]
    base = planned(stack)
    head = plan_with_controllers(tmp_path, stack, {key: older})
    (base_release,) = of_type(base, RELEASE)
    (head_release,) = of_type(head, RELEASE)
    assert base_release.inputs["version"] == ControllersSpec().by_controller[controller]
    assert head_release.inputs["version"] == older
    base_crds, head_crds = crd_by_name(base), crd_by_name(head)
    changed = [name for name in set(base_crds) & set(head_crds) if base_crds[name].inputs != head_crds[name].inputs]
    assert changed, "the older release's CRD schema differs"
    for name in changed:
        assert base_crds[name].urn == head_crds[name].urn  # same resource, updated in place
        assert base_crds[name].inputs["spec"]["versions"] != head_crds[name].inputs["spec"]["versions"]
    # The review comment (the same comparison CI runs) lists the CRDs and the release as changed.
    (change,) = compare({stack: report.plan_json(base)}, {stack: report.plan_json(head)})
    reviewed = {(c.type, c.name) for c in change.changed}
    assert {(CRD_PATCH, base_crds[name].name) for name in changed} <= reviewed
    assert (RELEASE, base_release.name) in reviewed
    # The custom resources validate against the schema of the release they will run on.
    assert validate_all(head.manifests, controller_versions=head.config.controllers.by_controller) == []


def test_lws_bump_adds_the_crds_of_the_new_release(tmp_path: Path) -> None:
    older = crd_by_name(plan_with_controllers(tmp_path, "llama-405b", {"lwsVersion": "0.9.0"}))
    current = crd_by_name(planned("llama-405b"))
    assert set(current) - set(older) == {"disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"}


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [("lwsVersion", "0.8.0", "0.9.0, 0.10.0"), ("jobsetVersion", "0.13.0", "0.8.1, 0.11.1, 0.12.0")],
)
def test_non_vendored_version_is_a_config_error_naming_the_key(key: str, value: str, allowed: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        plan_with_controllers(tmp_path, "llama-405b", {key: value})
    (violation,) = info.value.violations
    assert violation.key == f"gke-tpu-llm:controllers.{key}"
    assert violation.value == value
    assert violation.allowed == allowed
    assert "components/crds/README.md" in violation.fix
    assert f"gke-tpu-llm:controllers.{key}: '{value}' is not a supported" in str(info.value)


# --------------------------------------------------------------------------- validation


def _lws(replicas: int) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox:1.37"}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "srv", "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [container]}}},
        },
    }


def test_validation_follows_the_configured_release() -> None:
    # LWS 0.10.0 added bounds to spec.replicas; 0.9.0 had none.
    assert validate_object(_lws(-1), controller_versions={"lws": "0.9.0"}) == []
    (problem,) = validate_object(_lws(-1), controller_versions={"lws": "0.10.0"})
    assert problem.startswith("LeaderWorkerSet/srv: spec.replicas: -1 is less than the minimum of 0")
    assert validate_object(_lws(-1)) == [problem]  # default: the gke-tpu-llm:controllers default
    # JobSet 0.12.0 added the RestartJob failure-policy action the Saxml render uses from 0.12.0 on.
    jobset = next(m for m in planned("saxml-175b").manifests if m["kind"] == "JobSet")
    assert jobset["spec"]["failurePolicy"]["rules"][0]["action"] == "RestartJob"
    assert validate_object(jobset, controller_versions={"jobset": "0.12.0"}) == []
    problems = validate_object(jobset, controller_versions={"jobset": "0.11.1"})
    assert any("spec.failurePolicy.rules[0].action: 'RestartJob' is not one of" in p for p in problems), problems
    assert validate_object(_lws(1), controller_versions={"lws": "0.8.0"}) == [
        "LeaderWorkerSet/srv: <root>: no vendored CRDs for lws '0.8.0'; vendored: 0.9.0, 0.10.0 "
        "(components/crds/README.md explains how to add a release)"
    ]


def test_validation_schema_is_the_strictified_vendored_crd() -> None:
    obj = _lws(1)
    obj["spec"]["leaderWorkerTemplate"]["sizee"] = 2
    assert validate_object(obj) == ["LeaderWorkerSet/srv: spec.leaderWorkerTemplate.sizee: unknown field 'sizee'"]


# --------------------------------------------------------------------------- provider


def test_kubernetes_provider_has_no_permanent_delete_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_K8S_DELETE_UNREACHABLE", raising=False)
    providers = [r for r in planned("llama-70b").resources if r.type == "pulumi:providers:kubernetes"]
    assert providers
    for provider in providers:
        assert "deleteUnreachable" not in provider.inputs


def test_delete_unreachable_env_var_is_copied_into_the_provider_when_the_program_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Why the one-off is `PULUMI_K8S_DELETE_UNREACHABLE=true pulumi destroy` (no program run) and never
    # `up`: the SDK reads the variable while the program runs and stores it in the provider's inputs.
    monkeypatch.setenv("PULUMI_K8S_DELETE_UNREACHABLE", "true")
    result = report.plan(stacks.read_stack_file(stacks.stack_path("llama-70b")))
    (provider,) = [r for r in result.resources if r.type == "pulumi:providers:kubernetes"]
    assert provider.inputs["deleteUnreachable"] == "true"  # provider inputs travel as strings
