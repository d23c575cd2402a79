"""Capacity tiers on the Kubernetes side: what makes a stack's TPU pools and its workload's pods meet.

A stack's slices each get one node pool per capacity tier (``tpu.capacity``, first preferred;
``components.config.naming.node_pool_name``). Pure functions (no Pulumi) for the three cases:

* **One tier** (every stack before capacity tiers): nothing here. No object, no label, no taint, so
  those stacks plan exactly as before.
* **A fallback ladder** (several tiers, none queued; ``rules.is_fallback_ladder``): one custom
  ComputeClass (``cloud.google.com/v1``) whose ``priorities`` name the tier pools in order
  (``nodepools: [...]``, one rule per tier). The pools join the class by a node label and a
  ``NoSchedule`` taint (``pool_scheduling``) and the workload's TPU pods select it
  (``apply_scheduling``). Why a ComputeClass rather than "one pool per tier with preferred node
  affinity weights": preferred affinity only ranks nodes that already exist, while every fallback
  pool scales from zero; the cluster autoscaler would scale up whichever pool it picks (its expander,
  not our order) and the weights would never be consulted. A ComputeClass's priorities are what
  the autoscaler itself reads when it scales up, trying the next rule when a pool cannot be grown
  (GKE docs, "About custom compute classes": fallback priorities; the ``nodepools`` rule type
  references manually created Standard pools: ComputeClass CRD reference,
  https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass). TPU slices are
  supported there (the CRD has a ``tpu`` rule type, and Google's "Streamline TPU provisioning with
  custom compute class", https://discuss.google.dev/t/347616, presents ComputeClasses as the way to
  mix on-demand, spot, flex-start and reservation pools of multi-host TPU slices).
* **Queued provisioning** (a ``queuedProvisioning`` tier): Kueue objects modelled on GKE's sample
  ``ai-ml/gke-ray/tpu/dws/dws-tpu-queue.yaml`` (GoogleCloudPlatform/kubernetes-engine-samples, commit
  aa1e155; copied in tests/data/kueue): ResourceFlavors for the system pool and the queued pools, a
  ClusterQueue with the stack's TPU quota whose queued flavor carries an AdmissionCheck
  (``kueue.x-k8s.io/provisioning-request``) naming a ProvisioningRequestConfig
  (``queued-provisioning.gke.io``), and a LocalQueue in the stack's namespace. The workload's object
  is labelled with the LocalQueue (``kueue.x-k8s.io/queue-name``) and its TPU pods tolerate the
  ``cloud.google.com/gke-queued`` taint GKE puts on queued nodes (the sample's
  ``rayjob-tpu-v6e-dws.yaml``).

Multi-host groups must never straddle two pools (a slice's hosts talk over its ICI; a group spread
over two half-used pools cannot initialise). LeaderWorkerSet and JobSet place each group alone in
one ``cloud.google.com/gke-nodepool`` through their exclusive-topology annotations, which every
multi-host kind here already sets; ``apply_scheduling`` adds the annotation if an object lacks it.
KubeRay has no such annotation: a multi-host worker group gets a required pod affinity on the node
pool, scoped to its own replica by ``matchLabelKeys`` on the replica label KubeRay sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..catalog import tpu as tpu_catalog
from ..config import naming
from ..config.gke_rules import QUEUED_PROVISIONING, is_fallback_ladder
from ..crds.releases import group_size
from .core import (
    JOBSET_EXCLUSIVE,
    LWS_EXCLUSIVE,
    LWS_SUBGROUP_EXCLUSIVE,
    common_labels,
    get_path,
    pod_template_paths,
    with_path,
)

if TYPE_CHECKING:
    from ..config.stack import StackConfig

COMPUTE_CLASS_API = "cloud.google.com/v1"
COMPUTE_CLASS_KEY = "cloud.google.com/compute-class"
"""Node label and taint key, and pod nodeSelector key, of a custom ComputeClass. A manually created
node pool belongs to class ``C`` when it carries the label ``cloud.google.com/compute-class=C`` and the
taint ``cloud.google.com/compute-class=C:NoSchedule`` (GKE docs, "About custom compute classes",
section "Manually created node pools",
https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes#manual-node-pools)."""

KUEUE_API = "kueue.x-k8s.io/v1beta2"
"""The Kueue API the queue objects are written in: the storage version of the vendored releases
(0.18, 0.19: ``components/crds/kueue``), where v1beta1, the version of GKE's sample, is deprecated
("This version is deprecated. Use v1beta2 instead." in the CRDs). The fields used here are the same
in both."""
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that submits a workload object to a LocalQueue, on the object itself (Kueue docs,
site/content/en/docs/tasks/run/*.md of kubernetes-sigs/kueue; GKE's sample ``rayjob-tpu-v6e-dws.yaml``)."""
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
"""``AdmissionCheck.spec.controllerName`` of Kueue's ProvisioningRequest admission check."""
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
"""``ProvisioningRequestConfig.spec.provisioningClassName`` of GKE's queued provisioning (DWS)."""
QUEUED_NODE_KEY = tpu_catalog.QUEUED_NODE_LABEL
"""Taint key GKE puts on queued-provisioning nodes (the sample's workers tolerate it), and the node
label (value "true") the stack's queued pools carry (``components/platform/tpu_pool.py`` QUEUED_LABEL, after
GoogleCloudPlatform/cluster-toolkit modules/compute/gke-node-pool/main.tf)."""

TPU_RESOURCE = tpu_catalog.TPU_RESOURCE
NODEPOOL_LABEL = tpu_catalog.NODEPOOL_LABEL
UNBOUNDED_QUOTA = "1000000000"
"""CPU and memory quota of every flavor: not a limit (the sample's "Infinite" quota). Kueue must cover
every resource a pod requests, but what bounds the stack is its TPU quota and its pools' nodes."""

EXCLUSIVE_ANNOTATIONS: Mapping[str, tuple[str, ...]] = {
    # LeaderWorkerSet: one group per topology domain (kubernetes-sigs/lws api/leaderworkerset/v1/
    # leaderworkerset_types.go ExclusiveKeyAnnotationKey, SubGroupExclusiveKeyAnnotationKey; the sub-group
    # form is the JetStream kind's one sub-group per slice, KEP 115).
    "LeaderWorkerSet": (LWS_EXCLUSIVE, LWS_SUBGROUP_EXCLUSIVE),
    # JobSet: one child Job per topology domain (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go
    # ExclusiveKey).
    "JobSet": (JOBSET_EXCLUSIVE,),
}
"""Per kind, the exclusive-placement annotations; the first is the one added where none is set."""
RAY_CLUSTER_LABEL = "ray.io/cluster"
"""Pod label KubeRay sets to the RayCluster's name (RayClusterLabelKey, below)."""
RAY_REPLICA_LABEL = "ray.io/worker-group-replica-name"
"""Pod label KubeRay gives each replica of a multi-host worker group (ray-project/kuberay
``ray-operator/controllers/ray/utils/constant.go`` RayWorkerReplicaNameKey; feature RayMultiHostIndexing,
Beta and on by default since KubeRay v1.6, ``ray-operator/pkg/features/features.go`` at feeaf72). The
affinity also selects ``ray.io/cluster`` and ``ray.io/group``, the labels KubeRay puts on every pod
(same file: RayClusterLabelKey, RayNodeGroupLabelKey). Caveat: under an older KubeRay the replica label
is missing and Kubernetes ignores a ``matchLabelKeys`` key the pod lacks, so the affinity holds the
whole worker group in one pool: still right for one slice, unschedulable for a ladder with
``tpu.slices`` > 1."""

TaintEffect = Literal["NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE"]
"""Node-pool taint effects as the GKE API and the provider spell them
(``gcp.container.NodePoolNodeConfigTaintArgs.effect``; GKE API ``NodeTaint.Effect``)."""

KubernetesEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
"""The same effects as a Kubernetes Node, a toleration and ``TpuSlicePoolArgs.node_taints`` spell them."""

KUBERNETES_EFFECT: Mapping[str, KubernetesEffect] = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
"""The same effects as a Kubernetes Node/Toleration spells them."""


@dataclass(frozen=True)
class PoolTaint:
    """One node-pool taint; the fields are ``NodePoolNodeConfigTaintArgs(key=, value=, effect=)``."""

    key: str
    value: str
    effect: TaintEffect = "NO_SCHEDULE"

    @property
    def kubernetes_effect(self) -> KubernetesEffect:
        """``NoSchedule`` etc.: the effect as a Node, a toleration and ``TpuSlicePoolArgs.node_taints`` spell it."""
        return KUBERNETES_EFFECT[self.effect]

    def toleration(self) -> dict[str, str]:
        """The pod toleration that matches this taint exactly."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.kubernetes_effect}


@dataclass(frozen=True)
class PoolScheduling:
    """Kubernetes node labels and taints one (slice, tier) pool carries (``node_config.labels`` /
    ``node_config.taints``). Empty for a stack with one tier, so existing pools are unchanged."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: list[PoolTaint] = field(default_factory=list)


# --------------------------------------------------------------------------- which case


def _types(config: StackConfig) -> list[str]:
    return [t.type for t in config.tpu.tiers]


def has_ladder(config: StackConfig) -> bool:
    """Several tiers, none queued: the stack gets a ComputeClass ordering its pools."""
    return is_fallback_ladder(_types(config))


def has_queue(config: StackConfig) -> bool:
    """A queued-provisioning tier: the stack gets Kueue queue objects and a ProvisioningRequest check."""
    return QUEUED_PROVISIONING in _types(config)


def _name(config: StackConfig, suffix: str) -> str:
    """``<stack>-<suffix>``, at most 63 characters: cluster-scoped objects are named per stack (two stacks
    could share a cluster's API one day; today a stack is a cluster), and the names are label values."""
    return naming.fit(f"{naming.dns_label(config.stack)}-{suffix}", naming.LABEL_VALUE_MAX)


def compute_class_name(config: StackConfig) -> str:
    """The stack's ComputeClass: ``<stack>-tpu``."""
    return _name(config, "tpu")


def pool_scheduling(config: StackConfig, tier_index: int) -> PoolScheduling:
    """Node labels and taints of every slice's pool for tier ``tier_index`` of ``config.tpu.tiers``.

    Under a fallback ladder each pool carries the ComputeClass label and ``NoSchedule`` taint that make
    it one of the class's manually created pools (``COMPUTE_CLASS_KEY``); the taint also keeps pods that
    did not select the class off the fallback pools. A queued-provisioning pool gets nothing here: GKE
    taints its nodes itself (``QUEUED_NODE_KEY``). One tier: nothing, so an existing stack's pools stay
    exactly as they are."""
    if not has_ladder(config):
        return PoolScheduling()
    if not 0 <= tier_index < len(config.tpu.tiers):
        raise IndexError(f"pool_scheduling: tier {tier_index} of {len(config.tpu.tiers)}")
    name = compute_class_name(config)
    return PoolScheduling(labels={COMPUTE_CLASS_KEY: name}, taints=[PoolTaint(COMPUTE_CLASS_KEY, name)])


# --------------------------------------------------------------------------- the fallback ladder


def render_compute_class(config: StackConfig) -> dict[str, Any]:
    """The ComputeClass whose priorities are the stack's tier pools, first tier first.

    * ``priorities``: one ``nodepools`` rule per tier (all slices' pools of that tier), so GKE tries
      every slice of the preferred tier before any pool of the next.
    * ``nodePoolAutoCreation.enabled: false``: only the stack's own pools (sized, placed, priced and
      pre-flighted by the plan) may serve; GKE must not create TPU pools the plan never showed.
    * ``whenUnsatisfiable: DoNotScaleUp``: when no tier can be obtained the pods stay Pending (and the
      autoscaler retries the tiers after its backoff) instead of ``ScaleUpAnyway`` scaling up a node
      outside the listed rules: the tier list is the complete set of capacity the stack accepts.
    * ``activeMigration.optimizeRulePriority: false``: with it on, GKE would move running pods to a
      higher tier as soon as that capacity appears, by draining the lower-tier nodes. For a serving
      group that is an outage: LeaderWorkerSet recreates the whole group when one pod goes, and a
      multi-host model takes minutes to load onto the new slice; for training it kills the step in
      flight. So a group stays on the tier it got; to move back, delete the group's pods (or scale
      the fallback pool to zero) in a maintenance window, and the autoscaler removes the idle
      fallback pool on its own. (Field semantics: ComputeClass CRD reference, ``activeMigration``;
      GKE docs "About custom compute classes", "Active migration".)
    """
    if not has_ladder(config):
        raise ValueError("render_compute_class: the stack has no fallback ladder (one tier, or a queued tier)")
    return {
        "apiVersion": COMPUTE_CLASS_API,
        "kind": "ComputeClass",
        "metadata": {"name": compute_class_name(config), "labels": common_labels(config.stack, "capacity")},
        "spec": {
            "priorities": [{"nodepools": config.pools_of_tier(i)} for i in range(len(config.tpu.tiers))],
            "nodePoolAutoCreation": {"enabled": False},
            "whenUnsatisfiable": "DoNotScaleUp",
            "activeMigration": {"optimizeRulePriority": False},
        },
    }


# --------------------------------------------------------------------------- queued provisioning


def cluster_queue_name(config: StackConfig) -> str:
    return _name(config, "tpu")


def local_queue_name(config: StackConfig) -> str:
    """The LocalQueue in the stack's namespace (namespaced, so a fixed name)."""
    return "tpu"


def admission_check_name(config: StackConfig) -> str:
    return _name(config, "queued-provisioning")


def system_flavor_name(config: StackConfig) -> str:
    return _name(config, naming.SYSTEM_POOL)


def queued_flavor_name(config: StackConfig) -> str:
    return _name(config, "queued")


def _flavor(config: StackConfig, name: str, node_labels: Mapping[str, str]) -> dict[str, Any]:
    # nodeLabels: Kueue adds them to the nodeSelector of the pods it admits on the flavor.
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": common_labels(config.stack, "capacity")},
        "spec": {"nodeLabels": dict(node_labels)},
    }


def _quota(cpu: str, memory: str, tpu: int) -> list[dict[str, Any]]:
    return [
        {"name": "cpu", "nominalQuota": cpu},
        {"name": "memory", "nominalQuota": memory},
        {"name": TPU_RESOURCE, "nominalQuota": str(tpu)},  # a quantity: a string, as cpu and memory
    ]


def render_queue(config: StackConfig) -> list[dict[str, Any]]:
    """Kueue objects for the queued-provisioning tier, in dependency order (flavors, the
    ProvisioningRequestConfig and AdmissionCheck, the ClusterQueue, the LocalQueue).

    The ClusterQueue covers cpu, memory and ``google.com/tpu`` (Kueue admits a pod only if every
    resource it requests is covered). Its flavors, tried in order: the system pool (TPU quota 0: the
    CPU pods of a workload object, such as a Ray head, land there; the sample's ``default-cpu``) and
    the queued pools, with the TPU quota of all the stack's slices, so no more than ``tpu.slices``
    slices are ever requested. The sample keys a flavor on one pool's name; one flavor for all the
    stack's queued pools, keyed on the ``cloud.google.com/gke-queued`` label they carry
    (``QUEUED_NODE_KEY``, set by ``components/platform/tpu_pool.py``), is what lets a workload object whose
    one pod set spans several slices (a JobSet or a Ray worker group with ``tpu.slices`` > 1) be
    admitted at all: Kueue puts a pod set in a single flavor. Only the queued flavor carries the
    admission check (``admissionChecksStrategy.onFlavors``), so only TPU pods wait for a
    ProvisioningRequest. ``namespaceSelector`` admits the stack's namespace only."""
    if not has_queue(config):
        raise ValueError("render_queue: the stack has no queuedProvisioning tier")
    labels = common_labels(config.stack, "capacity")
    system, queued = system_flavor_name(config), queued_flavor_name(config)
    chips = config.tpu.slice.chips * config.tpu.slices
    tier = next(t for t in config.tpu.tiers if t.type == QUEUED_PROVISIONING)
    prc_spec: dict[str, Any] = {"provisioningClassName": QUEUED_PROVISIONING_CLASS, "managedResources": [TPU_RESOURCE]}
    if tier.max_run_hours is not None:
        # The ProvisioningRequest parameter GKE reads as the nodes' run limit (maxRunDurationSeconds:
        # GoogleCloudPlatform/ai-on-gke tutorials-and-examples/workflow-orchestration/dws-examples); a
        # ProvisioningRequestConfig's parameters go to every request it creates (Kueue docs,
        # site/content/en/v0.19/docs/concepts/admission_check/provisioning_request.md).
        prc_spec["parameters"] = {"maxRunDurationSeconds": str(tier.max_run_hours * 3600)}
    return [
        _flavor(config, system, {NODEPOOL_LABEL: naming.SYSTEM_POOL}),
        _flavor(config, queued, {QUEUED_NODE_KEY: "true"}),
        {
            "apiVersion": KUEUE_API,
            "kind": "ProvisioningRequestConfig",
            "metadata": {"name": admission_check_name(config), "labels": labels},
            "spec": prc_spec,
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": {"name": admission_check_name(config), "labels": labels},
            "spec": {
                "controllerName": PROVISIONING_CONTROLLER,
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": admission_check_name(config),
                },
            },
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue_name(config), "labels": labels},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": config.namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", TPU_RESOURCE],
                        "flavors": [
                            {"name": system, "resources": _quota(UNBOUNDED_QUOTA, f"{UNBOUNDED_QUOTA}Gi", 0)},
                            {"name": queued, "resources": _quota(UNBOUNDED_QUOTA, f"{UNBOUNDED_QUOTA}Gi", chips)},
                        ],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": admission_check_name(config), "onFlavors": [queued]}]},
            },
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": local_queue_name(config), "namespace": config.namespace, "labels": labels},
            "spec": {"clusterQueue": cluster_queue_name(config)},
        },
    ]


def render_scheduling(config: StackConfig) -> list[dict[str, Any]]:
    """Every object the stack's capacity tiers need: the ComputeClass, or the Kueue queue, or none."""
    if has_ladder(config):
        return [render_compute_class(config)]
    if has_queue(config):
        return render_queue(config)
    return []


# --------------------------------------------------------------------------- the workload's side


def _requests_tpu(template: Mapping[str, Any]) -> bool:
    spec = template.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        if any(TPU_RESOURCE in (resources.get(k) or {}) for k in ("requests", "limits")):
            return True
    return False


def _add_toleration(spec: dict[str, Any], toleration: Mapping[str, str]) -> None:
    tolerations = list(spec.get("tolerations") or [])
    if dict(toleration) not in tolerations:
        tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations


def _ladder_template(template: Mapping[str, Any], class_name: str) -> dict[str, Any]:
    """Select the ComputeClass. GKE would add the matching toleration itself (it mutates every pod that
    selects a class: kubernetes-engine-samples ``autoscaling/custom-compute-classes/vap/
    restrict-toleration.yaml``); it is written here too so the rendered object is what runs."""
    spec = dict(template.get("spec") or {})
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), COMPUTE_CLASS_KEY: class_name}
    _add_toleration(spec, PoolTaint(COMPUTE_CLASS_KEY, class_name).toleration())
    return {**template, "spec": spec}


def _queued_template(template: Mapping[str, Any]) -> dict[str, Any]:
    spec = dict(template.get("spec") or {})
    _add_toleration(spec, {"key": QUEUED_NODE_KEY, "operator": "Exists", "effect": "NoSchedule"})
    return {**template, "spec": spec}


def _ray_group_affinity(obj: Mapping[str, Any], path: tuple[str | int, ...], template: dict[str, Any]) -> dict[str, Any]:
    """A multi-host Ray worker group's pods share one node pool, replica by replica."""
    group = get_path(obj, path[:-1])
    if not isinstance(group, Mapping) or (group.get("numOfHosts") or 1) <= 1:
        return template
    if obj.get("kind") == "RayJob":
        # A RayJob's own cluster is named by KubeRay ("<rayjob>-<5 random characters>", ray-operator
        # utils/util.go GenerateRayClusterName), unknown here: the cluster label's value comes from each
        # pod itself (matchLabelKeys; a key may not be in both it and the labelSelector).
        term: dict[str, Any] = {
            "labelSelector": {"matchLabels": {"ray.io/group": group.get("groupName")}},
            "matchLabelKeys": [RAY_CLUSTER_LABEL, RAY_REPLICA_LABEL],
            "topologyKey": NODEPOOL_LABEL,
        }
    else:
        cluster = (obj.get("metadata") or {}).get("name")
        term = {
            "labelSelector": {"matchLabels": {RAY_CLUSTER_LABEL: cluster, "ray.io/group": group.get("groupName")}},
            "matchLabelKeys": [RAY_REPLICA_LABEL],
            "topologyKey": NODEPOOL_LABEL,
        }
    spec = dict(template.get("spec") or {})
    affinity = dict(spec.get("affinity") or {})
    pod_affinity = dict(affinity.get("podAffinity") or {})
    required = list(pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    if term not in required:
        required.append(term)
    pod_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["podAffinity"] = pod_affinity
    spec["affinity"] = affinity
    return {**template, "spec": spec}


def apply_scheduling(obj: Mapping[str, Any], config: StackConfig) -> dict[str, Any]:
    """``obj`` as the stack's capacity tiers need it; any other object, and every object of a one-tier
    stack, is returned unchanged (an equal copy).

    Only pod templates that request ``google.com/tpu`` change (CPU pods such as a Ray head or a
    converter Job keep their pools). Under a ladder they select the ComputeClass; a LeaderWorkerSet
    or JobSet of multi-host groups keeps (or gets) its exclusive-topology annotation on the node
    pool, and a multi-host Ray worker group a per-replica pod affinity on it. Under queued
    provisioning the object joins the stack's LocalQueue and its TPU pods tolerate queued nodes."""
    out: dict[str, Any] = dict(obj)
    ladder, queue = has_ladder(config), has_queue(config)
    if not (ladder or queue):
        return out
    paths = [p for p in pod_template_paths(obj) if _requests_tpu(get_path(obj, p))]
    if not paths:
        return out
    class_name = compute_class_name(config)
    for path in paths:
        template = get_path(out, path)
        if ladder:
            template = _ladder_template(template, class_name)
            if obj.get("kind") in ("RayCluster", "RayJob"):
                template = _ray_group_affinity(obj, path, template)
        if queue:
            template = _queued_template(template)
        out = dict(with_path(out, path, lambda _old, new=template: new))
    metadata = dict(out.get("metadata") or {})
    if ladder and obj.get("kind") in EXCLUSIVE_ANNOTATIONS and (group_size(obj) or 1) > 1:
        annotations = dict(metadata.get("annotations") or {})
        choices = EXCLUSIVE_ANNOTATIONS[str(obj["kind"])]
        if not any(a in annotations for a in choices):
            annotations[choices[0]] = NODEPOOL_LABEL
        metadata["annotations"] = annotations
    if queue:
        metadata["labels"] = {**(metadata.get("labels") or {}), QUEUE_NAME_LABEL: local_queue_name(config)}
    out["metadata"] = metadata
    return out
