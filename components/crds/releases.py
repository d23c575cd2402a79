"""Every custom resource kind the project renders, declared once, with what serves it.

:data:`CONTROLLERS` are the in-cluster controllers this project installs itself (``HelmController``):
upstream repository and chart CRD directory (what ``components.crds.vendor`` copies), the vendored
releases, the Helm chart and namespace, and the kinds they serve. Those kinds are validated against
the CRDs of the configured release (``components/crds/<controller>/<version>``).

:data:`MANAGED` are the custom resources whose CRDs GKE installs (a managed add-on or a cluster
feature ``GkeCluster`` turns on); only their schema is vendored, under ``components/schemas``.

For every kind: where its pod templates sit (``components.render.core.pod_template_paths`` adds the
baseline security there, ``components.tools.scan`` lifts them out for checkov, the network policies read
their labels) and the rule its controller applies to ``metadata.name`` (``components.tools.validate``).

Deliberately light (no Pulumi, no config import): the config, the validator and the pure renderers
read it. ``components.config.platform.ControllersSpec`` has one ``<name>_version`` field per
controller here (tests/test_controllers.py checks they agree).

Kueue (``CONTROLLERS["kueue"]``), for the engineer who deploys it: instantiate it like LWS in
``components/workloads/vllm/component.py``::

    kueue = HelmController(
        "kueue", controller="kueue", version=config.controllers.kueue_version,
        provider=cluster.provider, opts=pulumi.ResourceOptions(parent=self),
    )

Its Helm values come from :func:`kueue_values` (the integrations our workload kinds need; the
ProvisioningRequest admission check needs no feature gate in the vendored releases), so pass no
``values`` unless overriding. Every ResourceFlavor, ClusterQueue, LocalQueue, AdmissionCheck and
ProvisioningRequestConfig must depend on ``kueue.release``: the release creates the Kueue CRDs (its
chart renders them from templates, see :attr:`Controller.crds_in_templates`) and the webhooks that
admit those objects, and ``skip_await=False`` makes it wait for the controller Deployment. Name
the release ``kueue`` (HelmController does: ``name=controller``) in ``kueue-system``: the CRDs'
conversion webhook points at Service ``kueue-webhook-service`` there. Workload objects (JobSet,
LeaderWorkerSet, RayCluster/RayJob) join a queue by the label ``kueue.x-k8s.io/queue-name:
<LocalQueue>``; a queued-provisioning ClusterQueue names an AdmissionCheck whose ``controllerName``
is ``kueue.x-k8s.io/provisioning-request`` and whose parameters name a ProvisioningRequestConfig
with ``provisioningClassName: queued-provisioning.gke.io`` (tests/data/kueue has GKE's sample).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from ..catalog import images
from ..catalog.images import ImagePin

__all__ = [
    "CONTROLLERS",
    "CUSTOM_RESOURCES",
    "KUEUE_FRAMEWORKS",
    "MANAGED",
    "MANAGER_CONFIG",
    "Controller",
    "ControllerChart",
    "CustomResource",
    "ManagedCustomResources",
    "TemplatePath",
    "kueue_values",
    "pod_template_paths",
]

TemplatePath = tuple[str | int, ...]
"""Keys and list indexes from an object's root to one pod template (``{metadata, spec}``)."""

PodTemplates = Callable[[Mapping[str, Any]], list[TemplatePath]]
"""The paths to every pod template of one object of a kind (those present in that object)."""

HelmValues = Callable[[str], Mapping[str, Any]]
"""The Helm values a controller's release is installed with, given the release (``0.19.2``)."""

MANAGER_CONFIG = "manager-config.json"
"""Vendored beside a templated chart's CRDs: the release's default controller Configuration."""

_CRD_DIR = Path(__file__).parent


@dataclass(frozen=True)
class CustomResource:
    """One ``(apiVersion, kind)``: its pod templates, its name rule and (managed kinds) its schema."""

    api_version: str
    kind: str
    pod_templates: PodTemplates
    name_max_length: int | None
    """``metadata.name`` must be a DNS-1035 label of at most this length (``None``: only the generic
    DNS-1123 subdomain rule of every custom resource)."""
    name_rule: str
    """Who enforces the name rule, and why (quoted in validation messages)."""
    schema: str | None = None
    """Vendored ``openAPIV3Schema`` relative to ``components/schemas`` (managed kinds only; a
    controller's kinds use the CRD of the configured release)."""
    group_size: Callable[[Mapping[str, Any]], int | None] = lambda obj: None
    """Pods that form one slice's process group in an object of this kind, where it has one
    (LeaderWorkerSet size, a JobSet job's parallelism, a Ray worker group's hosts)."""


@dataclass(frozen=True)
class ControllerChart:
    """Where an upstream controller's chart lives and the namespace it is installed into."""

    chart: str
    namespace: str
    source: str


@dataclass(frozen=True)
class Controller:
    """An in-cluster controller installed by this project with a pinned, vendored release."""

    name: str
    """Helm release name and ``gke-tpu-llm:controllers`` key stem (``<name>Version``)."""
    repository: str
    """Upstream GitHub repository (``owner/name``)."""
    chart_crds: str
    """The chart's CRD directory in ``repository``: what ``helm install`` creates, and what is vendored."""
    chart: ControllerChart
    versions: tuple[str, ...]
    """Vendored releases, oldest first: exactly the directories ``components/crds/<name>/<version>``."""
    resources: tuple[CustomResource, ...]
    crds_in_templates: bool = False
    """The chart renders its CRDs from ``templates/`` instead of shipping a ``crds/`` directory.

    Helm then applies (and upgrades, and on uninstall deletes) them as part of the release itself,
    so ``HelmController`` must not also register them: a second owner would fight Helm on every
    upgrade, and the Helm install fails on CRDs that exist without its ownership annotations. The
    vendored copies (rendered by ``components.crds.vendor``) still serve validation, and a version
    bump still upgrades the cluster's CRDs (through the release). ``False``: the chart's ``crds/``,
    which Helm installs once and never upgrades, so ``HelmController`` registers them itself."""
    values: HelmValues = lambda version: {}
    """Helm values of the release at a given version (typed per controller; default: the chart's)."""
    image_values: tuple[str, ...] = ()
    """Where the chart's values hold its controller image (``{repository, tag}``); :meth:`helm_values`
    sets it to the catalog's image of the release, by tag and digest. Empty: the chart's image."""
    adopts: tuple[tuple[str, str], ...] = ()
    """Earlier homes of the release's Pulumi state: (type token of the top-level component a workload
    kind registered this controller's ``HelmController`` under, its resource name). The release is
    cluster-wide (one fixed name per cluster), so a ``HelmController`` of this controller under any
    other parent adopts that state by an alias (``components.platform.addons.controllers``): a stack
    whose kind changes keeps its release instead of creating a second one, which Helm refuses."""

    def __post_init__(self) -> None:
        for resource in self.resources:
            if resource.schema is not None:
                raise ValueError(f"{self.name}: {resource.kind} is validated against the vendored CRDs, not a schema file")

    def image(self, version: str) -> ImagePin:
        """The controller image of release ``version``: the catalog row ``<name>`` at tag ``v<version>``."""
        return images.image(self.name, f"v{version}")

    def helm_values(self, version: str) -> dict[str, Any]:
        """The values the release is installed with: :attr:`values` plus the controller image pinned by
        tag and digest (``components/catalog/images.json``).

        The charts write their image as ``"{{ repository }}:{{ tag | default .Chart.AppVersion }}"``
        (lws ``charts/lws/templates/manager/deployment.yaml``, jobset
        ``charts/jobset/templates/controller/deployment.yaml``, kueue
        ``charts/kueue/templates/manager/manager.yaml``, at every vendored release), so a tag value of
        ``v<version>@sha256:<digest>`` renders ``<repository>:v<version>@sha256:<digest>``.
        The repository is set too: the published charts point at registry.k8s.io only because the
        release scripts rewrite values.yaml while packaging (``hack/push-chart.sh``,
        ``hack/helm-chart-package.sh``), and release artifacts have shipped pointing at the staging
        registry, whose images expire after 90 days (kubernetes-sigs/jobset#1216 for v0.11.1,
        kubernetes-sigs/lws#823 for v0.8.0)."""
        values = dict(self.values(version))
        if not self.image_values:
            return values
        pin = self.image(version)
        node = values
        *parents, leaf = self.image_values
        for key in parents:
            node[key] = dict(node.get(key) or {})
            node = node[key]
        node[leaf] = {**(node.get(leaf) or {}), "repository": pin.repository, "tag": pin.tag_and_digest}
        return values


@dataclass(frozen=True)
class ManagedCustomResources:
    """Custom resources whose CRDs and controller GKE provides; their schemas are vendored."""

    name: str
    provided_by: str
    """What installs the CRDs and runs the controller in the cluster."""
    addon: str | None
    """``WorkloadKindInfo.addons`` key that turns it on (``None``: ``GkeCluster`` always does)."""
    resources: tuple[CustomResource, ...]

    def __post_init__(self) -> None:
        for resource in self.resources:
            if resource.schema is None:
                raise ValueError(f"{self.name}: {resource.kind} needs its vendored schema file")


# --------------------------------------------------------------------------- pod templates


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _leader_worker_set_templates(obj: Mapping[str, Any]) -> list[TemplatePath]:
    # workerTemplate is required; leaderTemplate only when the leader differs from the workers.
    lwt = _spec(obj).get("leaderWorkerTemplate") or {}
    return [("spec", "leaderWorkerTemplate", key) for key in ("leaderTemplate", "workerTemplate") if key in lwt]


def _job_set_templates(obj: Mapping[str, Any]) -> list[TemplatePath]:
    return [
        ("spec", "replicatedJobs", i, "template", "spec", "template")
        for i, _ in enumerate(_spec(obj).get("replicatedJobs") or [])
    ]


def _ray_cluster_spec_templates(cluster: Mapping[str, Any], prefix: TemplatePath) -> list[TemplatePath]:
    paths: list[TemplatePath] = []
    if "headGroupSpec" in cluster:
        paths.append((*prefix, "headGroupSpec", "template"))
    paths += [(*prefix, "workerGroupSpecs", i, "template") for i, _ in enumerate(cluster.get("workerGroupSpecs") or [])]
    return paths


def _ray_cluster_templates(obj: Mapping[str, Any]) -> list[TemplatePath]:
    return _ray_cluster_spec_templates(_spec(obj), ("spec",))


def _ray_job_templates(obj: Mapping[str, Any]) -> list[TemplatePath]:
    spec = _spec(obj)
    paths = _ray_cluster_spec_templates(spec.get("rayClusterSpec") or {}, ("spec", "rayClusterSpec"))
    if "submitterPodTemplate" in spec:
        paths.append(("spec", "submitterPodTemplate"))
    return paths


def _no_templates(obj: Mapping[str, Any]) -> list[TemplatePath]:
    return []


# --------------------------------------------------------------------------- Helm values


KUEUE_FRAMEWORKS: tuple[str, ...] = (
    "jobset.x-k8s.io/jobset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "ray.io/raycluster",
    "ray.io/rayjob",
)
"""Kueue integrations (``integrations.frameworks``) for the kinds our workloads render: JobSet
(Saxml), LeaderWorkerSet (JetStream, vLLM multi-host), RayCluster/RayJob (MaxText on Ray). Names as
in Kueue's charts/kueue/values.yaml at v0.19.2. ``pod`` is left out: since Kueue 0.15 the
LeaderWorkerSet integration no longer needs it (site/content/en/docs/tasks/run/leaderworkerset.md),
and none of our kinds creates bare pods to queue; the chart default's other frameworks (batch/job,
Kubeflow, AppWrapper, Deployment, StatefulSet, ...) are left out because nothing here queues them."""


def kueue_values(version: str) -> dict[str, Any]:
    """Helm values of the Kueue release ``version``: its chart's default controller Configuration
    (vendored per release as ``manager-config.json``) with :data:`KUEUE_FRAMEWORKS` as integrations.

    The chart takes the whole Configuration as one YAML string (``managerConfig.
    controllerManagerConfigYaml``, read with ``fromYaml`` by templates/manager/manager-config.yaml),
    so overriding the integrations means passing the complete document; starting from the release's
    own default keeps every other setting as that release ships it (the defaults differ between
    0.18 and 0.19: client QPS, per-kind concurrency). JSON is written because it is YAML.

    No feature gate is set: the ProvisioningRequest admission check controller
    (``kueue.x-k8s.io/provisioning-request``) was the ``ProvisioningACC`` gate, GA and locked on in
    0.14 and removed in 0.15 (pkg/features/kube_features.go at v0.14.0 / v0.15.0), so it is always
    on in every vendored release and naming the gate would be rejected as unknown."""
    config = json.loads((_CRD_DIR / "kueue" / version / MANAGER_CONFIG).read_text(encoding="utf-8"))
    config["integrations"] = {**config.get("integrations", {}), "frameworks": list(KUEUE_FRAMEWORKS)}
    return {"managerConfig": {"controllerManagerConfigYaml": json.dumps(config, indent=2, ensure_ascii=False) + "\n"}}


def _kueue_resource(kind: str, name_rule: str) -> CustomResource:
    return CustomResource("kueue.x-k8s.io/v1beta2", kind, _no_templates, name_max_length=None, name_rule=name_rule)


# --------------------------------------------------------------------------- the table


_Group = TypeVar("_Group", Controller, ManagedCustomResources)


def _by_name(entries: Iterable[_Group]) -> Mapping[str, _Group]:
    table: dict[str, _Group] = {}
    for entry in entries:
        if table.setdefault(entry.name, entry) is not entry:
            raise ValueError(f"{entry.name!r} is declared twice")
    return MappingProxyType(table)


CONTROLLERS: Mapping[str, Controller] = _by_name(
    [
        Controller(
            name="lws",
            repository="kubernetes-sigs/lws",
            chart_crds="charts/lws/crds",
            # The chart's LWS CRD names its conversion webhook Service "lws-webhook-service" in
            # "lws-system": the release must stay named "lws" in that namespace.
            chart=ControllerChart(
                chart="oci://registry.k8s.io/lws/charts/lws",
                namespace="lws-system",
                source="kubernetes-sigs/lws charts/lws (chart version = release version)",
            ),
            versions=("0.9.0", "0.10.0"),
            image_values=("image", "manager"),
            # The JetStream kind installed LWS first; a stack moved to vLLM (multi-host) keeps its release.
            # vLLM's own home is not listed: that would add an alias to every JetStream stack's plan,
            # and a move from vLLM to JetStream has not been asked for.
            adopts=(("gke-tpu-llm:jetstream:JetstreamServer", "lws"),),
            resources=(
                CustomResource(
                    "leaderworkerset.x-k8s.io/v1",
                    "LeaderWorkerSet",
                    _leader_worker_set_templates,
                    name_max_length=63,
                    name_rule="LWS webhook: the name is the headless Service name",
                    group_size=lambda obj: obj.get("spec", {}).get("leaderWorkerTemplate", {}).get("size"),
                ),
            ),
        ),
        Controller(
            name="jobset",
            repository="kubernetes-sigs/jobset",
            chart_crds="charts/jobset/crds",
            chart=ControllerChart(
                chart="oci://registry.k8s.io/jobset/charts/jobset",
                namespace="jobset-system",
                source="kubernetes-sigs/jobset charts/jobset (chart version = release version)",
            ),
            versions=("0.8.1", "0.11.1", "0.12.0"),
            image_values=("image",),
            resources=(
                CustomResource(
                    "jobset.x-k8s.io/v1alpha2",
                    "JobSet",
                    _job_set_templates,
                    name_max_length=63,
                    name_rule="JobSet webhook: child Job and Pod names start with it",
                    group_size=lambda obj: next(
                        (j["template"]["spec"].get("parallelism") for j in obj.get("spec", {}).get("replicatedJobs", [])), None
                    ),
                ),
            ),
        ),
        Controller(
            name="kueue",
            repository="kubernetes-sigs/kueue",
            # The chart has no crds/ directory: its CRDs are templates (kept in sync with
            # config/components/crd by `make update-helm`), so the release applies them itself.
            chart_crds="charts/kueue/templates/crd",
            crds_in_templates=True,
            # The CRDs' conversion webhook is Service "<fullname>-webhook-service" in the release
            # namespace; fullname is "kueue" for a release named "kueue" (templates/_helpers.tpl).
            chart=ControllerChart(
                chart="oci://registry.k8s.io/kueue/charts/kueue",
                namespace="kueue-system",
                source="kubernetes-sigs/kueue charts/kueue/README.md (helm install kueue "
                "oci://registry.k8s.io/kueue/charts/kueue --version=<release without v> --namespace=kueue-system); "
                "hack/helm-chart-package.sh sets the image to registry.k8s.io/kueue/kueue:<tag> in the pushed chart",
            ),
            versions=("0.18.6", "0.19.2"),
            values=kueue_values,
            image_values=("controllerManager", "manager", "image"),
            # v1beta2 is the storage version in both releases (v1beta1 is still served); Kueue's
            # webhooks add no name rule beyond the generic one for these kinds.
            resources=(
                _kueue_resource("ResourceFlavor", "generic custom resource name (ClusterQueue flavors reference it)"),
                _kueue_resource("ClusterQueue", "generic custom resource name (a pod label if a DNS-1123 label)"),
                _kueue_resource("LocalQueue", "generic custom resource name (the workloads' queue-name label)"),
                _kueue_resource("AdmissionCheck", "generic custom resource name"),
                _kueue_resource("ProvisioningRequestConfig", "generic custom resource name"),
            ),
        ),
    ]
)
"""Controllers this project installs (``components.platform.addons.controllers.HelmController``), by name."""

def _ray_worker_hosts(cluster_spec: Mapping[str, Any]) -> int | None:
    """Hosts of a Ray cluster spec's (first) worker group: one slice's pods."""
    return next((g.get("numOfHosts") for g in cluster_spec.get("workerGroupSpecs", [])), None)


MANAGED: Mapping[str, ManagedCustomResources] = _by_name(
    [
        ManagedCustomResources(
            name="kuberay",
            provided_by="GKE's Ray Operator add-on (managed KubeRay)",
            addon="rayOperator",
            resources=(
                CustomResource(
                    "ray.io/v1",
                    "RayCluster",
                    _ray_cluster_templates,
                    name_max_length=53,
                    name_rule="KubeRay MaxRayClusterNameLength: '<name>-serve-svc' <= 63",
                    schema="ray.io/RayCluster-v1.json",
                    group_size=lambda obj: _ray_worker_hosts(obj.get("spec", {})),
                ),
                CustomResource(
                    "ray.io/v1",
                    "RayJob",
                    _ray_job_templates,
                    name_max_length=47,
                    name_rule="KubeRay MaxRayJobNameLength: RayCluster '<name>-xxxxx' <= 53",
                    schema="ray.io/RayJob-v1.json",
                    # A RayJob that brings its own cluster (rayClusterSpec): that cluster's worker group.
                    group_size=lambda obj: _ray_worker_hosts(obj.get("spec", {}).get("rayClusterSpec") or {}),
                ),
            ),
        ),
        ManagedCustomResources(
            name="managed-prometheus",
            provided_by="Google Cloud Managed Service for Prometheus (GkeCluster enables it on every cluster)",
            addon=None,
            resources=(
                CustomResource(
                    "monitoring.googleapis.com/v1",
                    "PodMonitoring",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="monitoring.googleapis.com/PodMonitoring-v1.json",
                ),
            ),
        ),
        ManagedCustomResources(
            name="gke-autoscaling",
            provided_by="GKE's cluster autoscaler: the ComputeClass CRD on every cluster since 1.30.3-gke.1451000, and "
            "the ProvisioningRequest CRD for queued provisioning (GKE docs: about-custom-compute-classes, "
            "provisioningrequest)",
            addon=None,
            resources=(
                CustomResource(
                    "cloud.google.com/v1",
                    "ComputeClass",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name (pods select it by node label cloud.google.com/compute-class)",
                    schema="cloud.google.com/ComputeClass-v1.json",
                ),
                CustomResource(
                    "autoscaling.x-k8s.io/v1",
                    "ProvisioningRequest",
                    _no_templates,  # podSets reference PodTemplate objects by name, no inline template
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="autoscaling.x-k8s.io/ProvisioningRequest-v1.json",
                ),
            ),
        ),
        ManagedCustomResources(
            name="gke-autoscaling-metrics",
            provided_by="GKE's managed metrics adapter: AutoscalingMetric (autoscaling.gke.io/v1beta1), GA from "
            "1.37.0-gke.3100000 with the cluster's HPA performance profile (GKE autoscale-using-metrics). No published "
            "CRD: the schema is hand-written (components/schemas/autoscaling.gke.io/README.md). Used by "
            "workload.vllm.autoscaling.via: autoscalingMetric (components/workloads/vllm/autoscaling.py)",
            addon="hpaPerformanceProfile",
            resources=(
                CustomResource(
                    "autoscaling.gke.io/v1beta1",
                    "AutoscalingMetric",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name (the HPA names it in autoscaling.gke.io|<name>|<metric>)",
                    schema="autoscaling.gke.io/AutoscalingMetric-v1beta1.json",
                ),
            ),
        ),
        ManagedCustomResources(
            name="gke-checkpointing",
            provided_by="GKE's Multi-Tier Checkpointing (the cluster's highScaleCheckpointing add-on, GKE "
            "1.32.4-gke.1415000 or later; components/platform/addons/multi_tier_checkpointing.py)",
            addon=None,
            resources=(
                CustomResource(
                    "checkpointing.gke.io/v1",
                    "CheckpointConfiguration",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="checkpointing.gke.io/CheckpointConfiguration-v1.json",
                ),
            ),
        ),
        ManagedCustomResources(
            name="gke-gateway",
            provided_by="GKE: the Gateway API add-on (cluster gatewayApiConfig CHANNEL_STANDARD) serves Gateway and "
            "HTTPRoute, and from 1.34.0-gke.1626000 GKE installs the GA Gateway API Inference Extension CRDs "
            "(InferencePool) itself (llm-d GKE gateway guide); the networking.gke.io policies come with GKE's "
            "Gateway controller (GoogleCloudPlatform/gke-gateway-api config/crd). Used by workload.frontDoor.type: "
            "gateway (components/render/gateway.py)",
            addon=None,
            resources=(
                CustomResource(
                    "gateway.networking.k8s.io/v1",
                    "Gateway",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="gateway.networking.k8s.io/Gateway-v1.json",
                ),
                CustomResource(
                    "gateway.networking.k8s.io/v1",
                    "HTTPRoute",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="gateway.networking.k8s.io/HTTPRoute-v1.json",
                ),
                CustomResource(
                    "inference.networking.k8s.io/v1",
                    "InferencePool",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="inference.networking.k8s.io/InferencePool-v1.json",
                ),
                CustomResource(
                    "networking.gke.io/v1",
                    "HealthCheckPolicy",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="networking.gke.io/HealthCheckPolicy-v1.json",
                ),
                CustomResource(
                    "networking.gke.io/v1",
                    "GCPBackendPolicy",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="networking.gke.io/GCPBackendPolicy-v1.json",
                ),
                CustomResource(
                    "networking.gke.io/v1",
                    "GCPRoutingExtension",
                    _no_templates,
                    name_max_length=None,
                    name_rule="generic custom resource name",
                    schema="networking.gke.io/GCPRoutingExtension-v1.json",
                ),
            ),
        ),
    ]
)
"""Custom resources GKE serves, with vendored schemas (``components/schemas``), by group name."""


def _index() -> tuple[Mapping[tuple[str, str], CustomResource], Mapping[str, CustomResource]]:
    by_type: dict[tuple[str, str], CustomResource] = {}
    by_kind: dict[str, CustomResource] = {}
    groups: list[Controller | ManagedCustomResources] = [*CONTROLLERS.values(), *MANAGED.values()]
    for group in groups:
        for resource in group.resources:
            # Pod templates are found by kind alone (objects in tests and tools may omit apiVersion).
            if resource.kind in by_kind:
                raise ValueError(f"custom resource kind {resource.kind!r} is declared twice")
            by_type[(resource.api_version, resource.kind)] = by_kind[resource.kind] = resource
    return MappingProxyType(by_type), MappingProxyType(by_kind)


CUSTOM_RESOURCES, _BY_KIND = _index()
"""Every declared ``(apiVersion, kind)``: the controllers' kinds first, then the managed ones."""


def pod_template_paths(obj: Mapping[str, Any]) -> list[TemplatePath]:
    """Paths to the pod templates of a declared custom resource (by ``kind``); ``[]`` for any other object."""
    kind = obj.get("kind")
    resource = _BY_KIND.get(kind) if isinstance(kind, str) else None
    return resource.pod_templates(obj) if resource is not None else []


def group_size(obj: Mapping[str, Any]) -> int | None:
    """Pods of one slice's process group in a declared custom resource (by ``kind``), or None."""
    kind = obj.get("kind")
    resource = _BY_KIND.get(kind) if isinstance(kind, str) else None
    return resource.group_size(obj) if resource is not None else None
