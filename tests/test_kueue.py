"""Kueue as a pinned controller, and strict validation of Kueue, ComputeClass and
ProvisioningRequest objects against vendored schemas (issue 16: capacity that can be obtained).

Upstream objects live in ``tests/data/kueue`` (sources in its SOURCES.md)."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import string
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pydantic
import pytest
import yaml

from components import crds
from components.config.platform import ControllersSpec
from components.crds.releases import CONTROLLERS, KUEUE_FRAMEWORKS, MANAGED, MANAGER_CONFIG, kueue_values
from components.crds.vendor import render_crd_template
from components.platform.addons.controllers import HelmController
from components.tools import mockengine
from components.tools.validate import CONTROLLER_RESOURCES, CUSTOM_RESOURCE_SCHEMAS, validate_all, validate_object
from tests.conftest import STACKS, planned_built

DATA = Path(__file__).parent / "data" / "kueue"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
RELEASE = "kubernetes:helm.sh/v3:Release"
CRD_PATCH = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch"
DECLARED_KUEUE_KINDS = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck", "ProvisioningRequestConfig"}


def _docs(name: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    text = (DATA / name).read_text()
    if env is not None:
        text = string.Template(text).substitute(env)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def dws_queue_objects() -> list[dict[str, Any]]:
    """GKE's DWS TPU queue sample, placeholders filled, upgraded to the served v1beta2 (SOURCES.md)."""
    objs = _docs("dws-tpu-queue.yaml", {"ONDEMAND_NODEPOOL": "tpu-on-demand", "DWS_NODEPOOL": "tpu-dws"})
    for obj in objs:
        assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta1"
        obj["apiVersion"] = KUEUE_API
    return objs


def _one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == kind]
    return copy.deepcopy(found)


def compute_class() -> dict[str, Any]:
    (obj,) = _docs("custom-compute-tpu-v6e-2x4.yaml")
    return obj


# --------------------------------------------------------------------------- the table


def test_kueue_is_declared_like_lws_and_jobset() -> None:
    kueue = CONTROLLERS["kueue"]
    assert kueue.repository == "kubernetes-sigs/kueue"
    assert (kueue.chart.chart, kueue.chart.namespace) == ("oci://registry.k8s.io/kueue/charts/kueue", "kueue-system")
    assert kueue.crds_in_templates
    assert kueue.chart_crds == "charts/kueue/templates/crd"
    assert {r.kind for r in kueue.resources} == DECLARED_KUEUE_KINDS
    assert {r.api_version for r in kueue.resources} == {KUEUE_API}
    assert all(CONTROLLER_RESOURCES[(KUEUE_API, kind)] == "kueue" for kind in DECLARED_KUEUE_KINDS)
    # LWS and JobSet keep their chart's crds/ and the chart's default values but the image (tests/test_images.py).
    assert not CONTROLLERS["lws"].crds_in_templates
    assert not CONTROLLERS["jobset"].crds_in_templates
    assert CONTROLLERS["lws"].values("0.10.0") == {}
    assert CONTROLLERS["jobset"].values("0.12.0") == {}
    assert set(CONTROLLERS["jobset"].helm_values("0.12.0")) == {"image"}


def test_controllers_table_agrees_with_controllers_spec() -> None:
    spec = ControllersSpec()
    assert set(spec.by_controller) == set(CONTROLLERS)
    assert spec.kueue_version == CONTROLLERS["kueue"].versions[-1] == "0.19.2"  # the newest vendored
    assert crds.versions("kueue") == ("0.18.6", "0.19.2")
    field = ControllersSpec.model_fields["kueue_version"]
    assert field.alias == "kueueVersion"
    assert ControllersSpec.model_validate({"kueueVersion": "0.18.6"}).by_controller["kueue"] == "0.18.6"


def test_unvendored_kueue_version_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        ControllersSpec.model_validate({"kueueVersion": "0.17.0"})
    (error,) = info.value.errors()
    (rule,) = error["ctx"]["rules"]  # components.config.loader turns these into the exit-2 report
    assert (rule["path"], rule["value"], rule["allowed"]) == ("kueueVersion", "0.17.0", "0.18.6, 0.19.2")
    assert "components/crds/README.md" in rule["fix"]


def test_managed_schemas_are_declared_for_compute_class_and_provisioning_request() -> None:
    group = MANAGED["gke-autoscaling"]
    assert {(r.api_version, r.kind) for r in group.resources} == {
        ("cloud.google.com/v1", "ComputeClass"),
        ("autoscaling.x-k8s.io/v1", "ProvisioningRequest"),
    }
    assert CUSTOM_RESOURCE_SCHEMAS[("cloud.google.com/v1", "ComputeClass")] == "cloud.google.com/ComputeClass-v1.json"
    assert CUSTOM_RESOURCE_SCHEMAS[("autoscaling.x-k8s.io/v1", "ProvisioningRequest")] == (
        "autoscaling.x-k8s.io/ProvisioningRequest-v1.json"
    )


# --------------------------------------------------------------------------- vendored data


@pytest.mark.parametrize("version", ["0.18.6", "0.19.2"])
def test_vendored_kueue_crds_are_the_rendered_chart_templates(version: str) -> None:
    directory = crds.CRD_DIR / "kueue" / version
    source = json.loads((directory / "SOURCE.json").read_text())
    by_name = {c["metadata"]["name"]: c for c in crds.crds("kueue", version)}
    for kind in DECLARED_KUEUE_KINDS:
        assert crds.schema("kueue", version, KUEUE_API, kind)["type"] == "object"
    for crd in by_name.values():
        # What Helm renders for release "kueue" in "kueue-system": labels and the conversion webhook.
        labels = crd["metadata"]["labels"]
        assert labels["helm.sh/chart"] == f"kueue-{version}"
        assert labels["app.kubernetes.io/version"] == f"v{version}"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert "cert-manager.io/inject-ca-from" not in crd["metadata"].get("annotations", {})
        if "conversion" in crd["spec"]:  # ClusterQueue, LocalQueue, Workload, ...: v1beta1 <-> v1beta2 by webhook
            service = crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
            assert (service["name"], service["namespace"]) == ("kueue-webhook-service", "kueue-system")
        storage = [v["name"] for v in crd["spec"]["versions"] if v["storage"]]
        assert storage == ["v1beta2"]
    assert "conversion" in by_name["clusterqueues.kueue.x-k8s.io"]["spec"]
    manager = source["managerConfig"]
    assert manager["path"] == "charts/kueue/values.yaml"
    assert manager["vendored"] == MANAGER_CONFIG
    text = (directory / MANAGER_CONFIG).read_bytes()
    assert hashlib.sha256(text).hexdigest() == manager["sha256"]
    assert json.loads(text)["kind"] == "Configuration"


def test_template_renderer_refuses_directives_it_does_not_know() -> None:
    template = 'metadata:\n  name: {{ include "kueue.fullname" . }}\n  x: {{ .Values.somethingElse }}\n'
    with pytest.raises(SystemExit, match="unsupported template directive"):
        render_crd_template(template, chart="kueue", release="kueue", namespace="kueue-system", version="0.19.2")
    rendered = render_crd_template(
        'labels:\n  {{- include "kueue.labels" . | nindent 4 }}\nname: {{ include "kueue.fullname" . }}\n',
        chart="kueue",
        release="kueue",
        namespace="kueue-system",
        version="0.19.2",
    )
    assert yaml.safe_load(rendered)["name"] == "kueue"


def test_kueue_values_enable_our_integrations_on_the_release_defaults() -> None:
    for version in crds.versions("kueue"):
        values = kueue_values(version)
        config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
        default = json.loads((crds.CRD_DIR / "kueue" / version / MANAGER_CONFIG).read_text())
        assert config["integrations"]["frameworks"] == list(KUEUE_FRAMEWORKS)
        assert {k: v for k, v in config.items() if k != "integrations"} == {
            k: v for k, v in default.items() if k != "integrations"
        }
    assert set(KUEUE_FRAMEWORKS) == {
        "jobset.x-k8s.io/jobset",
        "leaderworkerset.x-k8s.io/leaderworkerset",
        "ray.io/raycluster",
        "ray.io/rayjob",
    }
    # Every framework we enable is one the release's own default configuration knows.
    for version in crds.versions("kueue"):
        default = json.loads((crds.CRD_DIR / "kueue" / version / MANAGER_CONFIG).read_text())
        assert set(KUEUE_FRAMEWORKS) <= set(default["integrations"]["frameworks"])


def test_vendored_managed_schemas_match_their_recorded_hashes() -> None:
    # Each group's README (sources, why, limits) lists the SHA-256 of its schema file.
    schemas = crds.CRD_DIR.parent / "schemas"
    for path in ("autoscaling.x-k8s.io/ProvisioningRequest-v1.json", "cloud.google.com/ComputeClass-v1.json"):
        readme = (schemas / path.split("/")[0] / "README.md").read_text()
        digest = hashlib.sha256((schemas / path).read_bytes()).hexdigest()
        assert f"{digest}  {path}" in readme


# --------------------------------------------------------------------------- strict validation accepts upstream objects


@pytest.mark.parametrize("version", ["0.18.6", "0.19.2"])
def test_gke_dws_tpu_queue_sample_validates(version: str) -> None:
    objs = dws_queue_objects()
    assert {o["kind"] for o in objs} == DECLARED_KUEUE_KINDS  # the sample exercises every declared kind
    for obj in objs:
        assert validate_object(obj, controller_versions={"kueue": version}) == [], obj["metadata"]["name"]


def test_the_sample_as_published_is_v1beta1_which_this_project_does_not_render() -> None:
    (flavor, *_) = _docs("dws-tpu-queue.yaml", {"ONDEMAND_NODEPOOL": "a", "DWS_NODEPOOL": "b"})
    (problem,) = validate_object(flavor)
    assert problem.startswith("ResourceFlavor/default-cpu: <root>: no schema for kueue.x-k8s.io/v1beta1 ResourceFlavor")


@pytest.mark.parametrize(
    "name", ["custom-compute-tpu-v6e-2x4.yaml", "ccc-inference-1x8x24.yaml", "ccc-specific-reservation.yaml"]
)
def test_upstream_compute_classes_validate(name: str) -> None:
    for obj in _docs(name):
        assert validate_object(obj) == []


def test_compute_class_expresses_every_capacity_tier_we_need() -> None:
    # The v6e sample: on-demand, flex-start (with max run duration), spot, node pool auto-creation,
    # active migration. Its commented-out first tier is a specific reservation with a block; the GKE
    # reference page adds the sub-block, manually created pools (nodepools) and whenUnsatisfiable
    # (https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass).
    obj = compute_class()
    tpu = obj["spec"]["priorities"][0]["tpu"]
    obj["spec"]["priorities"][:0] = [
        {
            "machineType": "ct6e-standard-8t",
            "reservations": {
                "affinity": "Specific",
                "specific": [
                    {
                        "name": "tpu-v6e-slice-specific",
                        "project": "reservation-project",
                        "reservationBlock": {"name": "block-1", "reservationSubBlock": {"name": "sub-block-1"}},
                    }
                ],
            },
            "spot": False,
            "tpu": tpu,
        },
        {"nodepools": ["tpu-slice-0", "tpu-slice-1"]},
    ]
    obj["spec"]["whenUnsatisfiable"] = "ScaleUpAnyway"
    assert validate_object(obj) == []
    assert obj["spec"]["priorities"][3]["flexStart"]["enabled"] is True
    assert obj["spec"]["activeMigration"] == {"optimizeRulePriority": True}
    assert obj["spec"]["nodePoolAutoCreation"] == {"enabled": True}


def test_provisioning_request_from_upstream_validates() -> None:
    for obj in _docs("provisioningrequest-faq.yaml"):
        assert validate_object(obj) == []
    queued = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "slice-0", "namespace": "llm"},
        "spec": {
            "provisioningClassName": "queued-provisioning.gke.io",
            "parameters": {"maxRunDurationSeconds": "86400"},
            "podSets": [{"count": 4, "podTemplateRef": {"name": "slice-0"}}],
        },
    }
    assert validate_object(queued) == []


# --------------------------------------------------------------------------- strict validation rejects, naming the path


def test_misspelled_kueue_field_is_rejected_with_its_path() -> None:
    queue = _one(dws_queue_objects(), "ClusterQueue")
    queue["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuotaa"] = 40
    problems = validate_object(queue)
    assert (
        "ClusterQueue/cluster-queue: spec.resourceGroups[0].flavors[1].resources[0].nominalQuotaa: "
        "unknown field 'nominalQuotaa'"
    ) in problems


def test_wrong_kueue_type_is_rejected_with_its_path() -> None:
    config = _one(dws_queue_objects(), "ProvisioningRequestConfig")
    config["spec"]["managedResources"] = "google.com/tpu"
    assert validate_object(config) == [
        "ProvisioningRequestConfig/dws-config: spec.managedResources: 'google.com/tpu' is not of type 'array'"
    ]
    check = _one(dws_queue_objects(), "AdmissionCheck")
    check["spec"]["parameters"]["kind"] = "1ProvisioningRequestConfig"  # the CRD's Go pattern ^(?i)[a-z]...
    (problem,) = validate_object(check)
    assert problem.startswith("AdmissionCheck/dws-prov: spec.parameters.kind: '1ProvisioningRequestConfig' does not match")


def test_misspelled_compute_class_field_is_rejected_with_its_path() -> None:
    obj = compute_class()
    obj["spec"]["priorities"][1]["flexstart"] = obj["spec"]["priorities"][1].pop("flexStart")
    assert validate_object(obj) == ["ComputeClass/tpu-v6e-2x4: spec.priorities[1].flexstart: unknown field 'flexstart'"]


def test_wrong_compute_class_types_and_values_are_rejected_with_their_paths() -> None:
    obj = compute_class()
    obj["spec"]["priorities"][0]["tpu"]["count"] = "8"
    obj["spec"]["whenUnsatisfiable"] = "ScaleUp"
    obj["spec"]["priorities"][0]["reservations"] = {"affinity": "Any"}
    problems = validate_object(obj)
    assert "ComputeClass/tpu-v6e-2x4: spec.priorities[0].tpu.count: '8' is not of type 'integer'" in problems
    assert any(p.startswith("ComputeClass/tpu-v6e-2x4: spec.whenUnsatisfiable: 'ScaleUp' is not one of") for p in problems)
    affinity = "ComputeClass/tpu-v6e-2x4: spec.priorities[0].reservations.affinity: 'Any' is not one of"
    assert any(p.startswith(affinity) for p in problems)
    assert len(problems) == 3


def test_wrong_provisioning_request_values_are_rejected_with_their_paths() -> None:
    (_, request) = _docs("provisioningrequest-faq.yaml")
    request["spec"]["podSets"][0]["count"] = 0
    request["spec"]["podSets"][0]["podTemplateRef"]["nmae"] = "x"
    problems = validate_object(request)
    assert "ProvisioningRequest/provider: spec.podSets[0].count: 0 is less than the minimum of 1" in problems
    assert "ProvisioningRequest/provider: spec.podSets[0].podTemplateRef.nmae: unknown field 'nmae'" in problems


# --------------------------------------------------------------------------- the Helm release


def _record_kueue(version: str) -> list[mockengine.Registration]:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        HelmController("kueue", controller="kueue", version=version, provider=provider)
        pulumi.export("done", True)

    records, _ = mockengine.record(program, stack="test", project="test-project")
    return records


def test_kueue_release_applies_its_own_crds_and_gets_our_values() -> None:
    records = _record_kueue("0.19.2")
    assert not [r for r in records if r.type == CRD_PATCH]  # the chart's templates are the release's
    (release,) = [r for r in records if r.type == RELEASE]
    assert release.inputs["name"] == "kueue"
    assert release.inputs["namespace"] == "kueue-system"
    assert release.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert release.inputs["version"] == "0.19.2"
    assert release.inputs["values"] == CONTROLLERS["kueue"].helm_values("0.19.2")
    assert release.inputs["values"]["managerConfig"] == kueue_values("0.19.2")["managerConfig"]
    assert release.inputs["skipAwait"] is False  # dependents wait for the controller and its webhooks


def test_kueue_version_bump_changes_the_release_and_the_crds_it_applies() -> None:
    older, newer = _record_kueue("0.18.6"), _record_kueue("0.19.2")
    (old_release,) = [r for r in older if r.type == RELEASE]
    (new_release,) = [r for r in newer if r.type == RELEASE]
    assert old_release.urn == new_release.urn  # the same release, upgraded in place
    assert (old_release.inputs["version"], new_release.inputs["version"]) == ("0.18.6", "0.19.2")
    # The release's defaults moved between 0.18 and 0.19 and our values follow them.
    old_config = yaml.safe_load(old_release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    new_config = yaml.safe_load(new_release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert old_config["clientConnection"] == {"qps": 50, "burst": 100}
    assert new_config["clientConnection"] == {"qps": 300, "burst": 500}
    # The CRDs the upgraded release applies: the same set, with the Workload and MultiKueueConfig
    # schemas changed (validation follows the configured release).
    old_crds = {c["metadata"]["name"]: c for c in crds.crds("kueue", "0.18.6")}
    new_crds = {c["metadata"]["name"]: c for c in crds.crds("kueue", "0.19.2")}
    assert set(old_crds) == set(new_crds)
    changed = {name for name in new_crds if old_crds[name]["spec"] != new_crds[name]["spec"]}
    assert changed == {"workloads.kueue.x-k8s.io", "multikueueconfigs.kueue.x-k8s.io"}


def test_stacks_that_queue_install_kueue_before_their_queue_objects() -> None:
    # Whatever stack renders Kueue objects (a queued-provisioning tier, components/platform/addons/capacity_scheduling.py):
    # the pinned release is installed, registers no CRDs of its own, and every Kueue object waits
    # for it; the objects validate against the configured release's CRDs.
    queued = 0
    for stack in STACKS:
        result = planned_built(stack)
        kueue_objects = [r for r in result.resources if r.type.startswith("kubernetes:kueue.x-k8s.io/")]
        releases = [r for r in result.resources if r.type == RELEASE and r.inputs["name"] == "kueue"]
        if not kueue_objects:
            assert not releases, stack
            continue
        queued += 1
        (release,) = releases
        assert release.inputs["version"] == result.config.controllers.kueue_version
        assert release.inputs["values"] == CONTROLLERS["kueue"].helm_values(release.inputs["version"])
        assert not [r for r in result.resources if r.type == CRD_PATCH and r.name.startswith("kueue-crd-")]
        for obj in kueue_objects:
            assert release.urn in obj.dependencies, (stack, obj.name)
        manifests = [m for m in result.manifests if m["apiVersion"] == KUEUE_API]
        assert {m["kind"] for m in manifests} <= DECLARED_KUEUE_KINDS
        assert validate_all(manifests, controller_versions=result.config.controllers.by_controller) == []
    assert queued, "no stack exercises queued provisioning (stacks/Pulumi.llama3-8b-train-queued.yaml did)"


def test_vendored_crd_files_are_gzip_json_with_fixed_mtime() -> None:
    for path in (crds.CRD_DIR / "kueue").glob("*/*.json.gz"):
        data = path.read_bytes()
        assert data[4:8] == b"\x00\x00\x00\x00"  # gzip MTIME = 0: reproducible bytes
        json.loads(gzip.decompress(data))
