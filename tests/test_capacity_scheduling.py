"""Capacity tiers in the cluster (components/render/tiers.py, components/platform/addons/capacity_scheduling.py): the
ComputeClass of a fallback ladder, the Kueue queue of queued provisioning, what every kind's pods
get, and that a one-tier stack has none of it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import naming
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.gke_rules import COMPUTE_CLASS_MIN_GKE_VERSION, compute_class_version_rules
from components.config.stack import StackConfig
from components.config.tpu_spec import CapacityTierSpec
from components.crds.releases import group_size
from components.platform.addons.capacity_scheduling import needed
from components.render import tiers as capacity
from components.render.core import get_path, pod_template_paths
from components.tools import report
from components.tools.manifests import MANIFESTS_DIR
from components.tools.validate import validate_all, validate_object
from components.workloads.registry import KINDS
from tests.conftest import BUILD_DIGEST, STACKS, make_config, planned_built, planned_file

DATA = Path(__file__).parent / "data" / "kueue"
LADDER = ({"type": "reservation", "reservation": "my-res"}, {"type": "spot"}, {"type": "onDemand"})


def with_tiers(config: StackConfig, *tiers: dict[str, Any], slices: int | None = None) -> StackConfig:
    """``config`` with ``tpu.capacity`` replaced (the shorthands cleared), as a stack file would give it;
    ``slices`` too where given (the kinds' own slice rules are not what these renders test)."""
    update: dict[str, Any] = {"capacity": [CapacityTierSpec.model_validate(t) for t in tiers], "spot": False, "reservation": None}
    if slices is not None:
        update["slices"] = slices
    tpu = config.tpu.model_copy(update=update)
    return config.model_copy(update={"tpu": tpu})


ONE_TIER = [s for s in STACKS if (MANIFESTS_DIR / s).is_dir() and len(stacks.stack_path(s).read_text().split("capacity:")) == 1]
"""Stacks with one capacity tier and committed manifests: what the pure functions are applied to."""


def stack_config(stack: str) -> StackConfig:
    return stacks.config_of(stacks.read_stack_file(stacks.stack_path(stack))).config


def tpu_templates(obj: dict[str, Any]) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    out = []
    for path in pod_template_paths(obj):
        template = get_path(obj, path)
        containers = template["spec"].get("containers", []) + template["spec"].get("initContainers", [])
        if any(capacity.TPU_RESOURCE in (c.get("resources", {}).get("limits") or {}) for c in containers):
            out.append((path, template))
    return out


def sample(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]


# --------------------------------------------------------------------------- pools


def test_one_tier_pools_get_nothing() -> None:
    for config in (make_config(), make_config(tpu={"spot": True}), make_config(tpu={"reservation": "r"})):
        assert capacity.pool_scheduling(config, 0) == capacity.PoolScheduling()
        assert not needed(config)
        assert capacity.render_scheduling(config) == []


def test_ladder_pools_join_the_compute_class() -> None:
    config = with_tiers(make_config(), *LADDER)
    name = capacity.compute_class_name(config)
    for t in range(len(LADDER)):
        sched = capacity.pool_scheduling(config, t)
        assert sched.labels == {"cloud.google.com/compute-class": name}
        [taint] = sched.taints
        assert (taint.key, taint.value, taint.effect, taint.kubernetes_effect) == (
            "cloud.google.com/compute-class",
            name,
            "NO_SCHEDULE",
            "NoSchedule",
        )
    with pytest.raises(IndexError):
        capacity.pool_scheduling(config, len(LADDER))


def test_queued_pools_get_no_class() -> None:
    config = with_tiers(make_config(tpu={"zone": "us-east5-a"}), {"type": "queuedProvisioning"})
    assert capacity.pool_scheduling(config, 0) == capacity.PoolScheduling()
    assert not capacity.has_ladder(config)
    assert capacity.has_queue(config)


# --------------------------------------------------------------------------- the fallback ladder


def test_compute_class_priorities_follow_tier_order_and_pool_names() -> None:
    config = with_tiers(make_config(), *LADDER, slices=2)
    cc = capacity.render_compute_class(config)
    expected = [[naming.node_pool_name(i, t, tier["type"]) for i in range(2)] for t, tier in enumerate(LADDER)]
    assert [p["nodepools"] for p in cc["spec"]["priorities"]] == expected
    assert expected[0] == ["tpu-slice-0", "tpu-slice-1"]  # the first tier keeps the pools' names
    # The same pools the platform creates (StackConfig.tier_pools: slice by slice, tier by tier).
    assert sorted(p for ps in expected for p in ps) == sorted(config.pool_names())
    assert cc["spec"]["whenUnsatisfiable"] == "DoNotScaleUp"
    assert cc["spec"]["activeMigration"] == {"optimizeRulePriority": False}
    assert cc["spec"]["nodePoolAutoCreation"] == {"enabled": False}
    assert validate_object(cc) == []
    # Shaped as GKE's sample of a class over manually created pools (one nodepools list per rule).
    [upstream] = sample("ccc-inference-1x8x24.yaml")
    assert {k for p in upstream["spec"]["priorities"] for k in p} == {k for p in cc["spec"]["priorities"] for k in p}
    assert upstream["spec"]["whenUnsatisfiable"] == cc["spec"]["whenUnsatisfiable"]


def test_compute_class_is_named_per_stack() -> None:
    a = with_tiers(make_config("stack-a"), *LADDER)
    b = with_tiers(make_config("stack-b"), *LADDER)
    assert capacity.compute_class_name(a) != capacity.compute_class_name(b)
    # Deterministic: a second config of the same stack renders the same object.
    assert capacity.render_compute_class(a) == capacity.render_compute_class(with_tiers(make_config("stack-a"), *LADDER))
    long = with_tiers(make_config("s" * 60), *LADDER)
    assert len(capacity.compute_class_name(long)) <= 63


def test_compute_class_version_floor() -> None:
    tiers = [t["type"] for t in LADDER]
    assert compute_class_version_rules("cluster.version", "1.30.2-gke.1000", tiers)
    assert not compute_class_version_rules("cluster.version", COMPUTE_CLASS_MIN_GKE_VERSION, tiers)
    assert not compute_class_version_rules("cluster.version", "1.30.2-gke.1000", ["onDemand"])
    assert not compute_class_version_rules("cluster.version", None, tiers)
    with pytest.raises(ConfigError) as info:
        make_config(cluster={"version": "1.30.2-gke.1000"}, tpu={"capacity": list(LADDER)})
    problems = [v for v in info.value.violations if "ComputeClass" in str(v)]
    assert [v.key for v in problems] == ["gke-tpu-llm:cluster.version"]


# --------------------------------------------------------------------------- every kind's pods


def test_every_kind_is_exercised_by_a_stack() -> None:
    assert {stack_config(s).workload.kind for s in ONE_TIER} == {k.kind for k in KINDS}


@pytest.mark.parametrize("stack", ONE_TIER)
def test_every_kind_gets_the_class_under_a_ladder(stack: str) -> None:
    # The stack's objects once running (a training stack with its image build recorded: its Ray objects).
    one_tier = planned_built(stack).config
    objects = planned_built(stack).manifests
    # One tier: every object is left exactly as it is.
    assert [capacity.apply_scheduling(o, one_tier) for o in objects] == objects
    assert not any(o["apiVersion"] in (capacity.COMPUTE_CLASS_API, capacity.KUEUE_API) for o in objects)

    config = with_tiers(one_tier, *LADDER)
    name = capacity.compute_class_name(config)
    toleration = {"key": "cloud.google.com/compute-class", "operator": "Equal", "value": name, "effect": "NoSchedule"}
    snapshot = copy.deepcopy(objects)
    changed = [capacity.apply_scheduling(o, config) for o in objects]
    assert objects == snapshot  # the rendered objects are not modified in place
    tpu_objects = 0
    for before, after in zip(objects, changed, strict=True):
        templates = tpu_templates(before)
        if not templates:
            assert after == before
            continue
        tpu_objects += 1
        for path in pod_template_paths(before):
            spec_after = get_path(after, path)["spec"]
            if path in [p for p, _ in templates]:
                assert spec_after["nodeSelector"]["cloud.google.com/compute-class"] == name
                assert toleration in spec_after["tolerations"]
                # The slice's own selectors stay: the class chooses among this shape's pools.
                assert get_path(before, path)["spec"]["nodeSelector"].items() <= spec_after["nodeSelector"].items()
            else:  # CPU pods (Ray head, submitter) keep their pools
                assert spec_after == get_path(before, path)["spec"]
        # Multi-host groups never straddle two pools.
        if after["kind"] in capacity.EXCLUSIVE_ANNOTATIONS and (group_size(after) or 1) > 1:
            annotations = after["metadata"]["annotations"]
            keys = capacity.EXCLUSIVE_ANNOTATIONS[after["kind"]]
            assert any(annotations.get(k) == "cloud.google.com/gke-nodepool" for k in keys)
        if after["kind"] == "RayCluster":
            for group in after["spec"]["workerGroupSpecs"]:
                terms = group["template"]["spec"].get("affinity", {}).get("podAffinity", {})
                required = terms.get("requiredDuringSchedulingIgnoredDuringExecution", [])
                if group.get("numOfHosts", 1) > 1:
                    assert [t["topologyKey"] for t in required] == ["cloud.google.com/gke-nodepool"]
                    assert required[0]["matchLabelKeys"] == [capacity.RAY_REPLICA_LABEL]
    assert tpu_objects >= 1
    assert validate_all(changed, controller_versions=config.controllers.by_controller) == []


@pytest.mark.parametrize("stack", ONE_TIER)
def test_every_kind_joins_the_queue(stack: str) -> None:
    base = planned_built(stack).config
    config = with_tiers(base, {"type": "queuedProvisioning"})
    objects = planned_built(stack).manifests
    changed = [capacity.apply_scheduling(o, config) for o in objects]
    queued = {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}
    for before, after in zip(objects, changed, strict=True):
        if not tpu_templates(before):
            assert after == before
            continue
        assert after["metadata"]["labels"][capacity.QUEUE_NAME_LABEL] == capacity.local_queue_name(config)
        for path, _ in tpu_templates(before):
            assert queued in get_path(after, path)["spec"]["tolerations"]
            assert "cloud.google.com/compute-class" not in get_path(after, path)["spec"].get("nodeSelector", {})
    assert validate_all(changed, controller_versions=config.controllers.by_controller) == []


def test_one_tier_stacks_need_no_scheduling() -> None:
    assert ONE_TIER
    for stack in ONE_TIER:
        assert not needed(stack_config(stack)), stack


# --------------------------------------------------------------------------- queued provisioning


def queued_config(slices: int = 2, **tier: Any) -> StackConfig:
    return with_tiers(make_config(tpu={"zone": "us-east5-a"}), {"type": "queuedProvisioning", **tier}, slices=slices)


def test_queue_objects_match_the_upstream_sample() -> None:
    config = queued_config()
    objs = capacity.render_queue(config)
    upstream = sample("dws-tpu-queue.yaml")
    ours = {o["kind"]: [x for x in objs if x["kind"] == o["kind"]] for o in objs}
    theirs = {o["kind"]: [x for x in upstream if x["kind"] == o["kind"]] for o in upstream}
    assert set(ours) == set(theirs)
    [check], [their_check] = ours["AdmissionCheck"], theirs["AdmissionCheck"]
    assert check["spec"]["controllerName"] == their_check["spec"]["controllerName"] == capacity.PROVISIONING_CONTROLLER
    assert check["spec"]["parameters"].keys() == their_check["spec"]["parameters"].keys()
    [prc], [their_prc] = ours["ProvisioningRequestConfig"], theirs["ProvisioningRequestConfig"]
    assert prc["spec"] == their_prc["spec"]  # queued-provisioning.gke.io, managedResources [google.com/tpu]
    assert check["spec"]["parameters"]["name"] == prc["metadata"]["name"]
    [cq], [their_cq] = ours["ClusterQueue"], theirs["ClusterQueue"]
    [group], [their_group] = cq["spec"]["resourceGroups"], their_cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == their_group["coveredResources"]
    flavors = {f["metadata"]["name"]: f["spec"]["nodeLabels"] for f in ours["ResourceFlavor"]}
    assert [f["name"] for f in group["flavors"]] == list(flavors)
    # The system pool first (no TPU: a Ray head lands there), then the queued pools with every slice's chips.
    chips = {
        f["name"]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "google.com/tpu") for f in group["flavors"]
    }
    assert list(flavors.values()) == [{"cloud.google.com/gke-nodepool": "system"}, {"cloud.google.com/gke-queued": "true"}]
    assert list(chips.values()) == ["0", str(2 * config.tpu.slice.chips)]
    [strategy] = cq["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert strategy == {"name": check["metadata"]["name"], "onFlavors": [capacity.queued_flavor_name(config)]}
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": config.namespace}}
    [lq] = ours["LocalQueue"]
    assert lq["metadata"]["namespace"] == config.namespace
    assert lq["spec"] == {"clusterQueue": cq["metadata"]["name"]}
    # Cluster-scoped objects are named per stack; only the LocalQueue is namespaced.
    for obj in objs:
        if obj["kind"] != "LocalQueue":
            assert "namespace" not in obj["metadata"]
            assert obj["metadata"]["name"].startswith(config.stack)
    assert validate_all(objs, controller_versions=config.controllers.by_controller) == []


def test_max_run_hours_reaches_the_provisioning_request() -> None:
    [prc] = [o for o in capacity.render_queue(queued_config(maxRunHours=24)) if o["kind"] == "ProvisioningRequestConfig"]
    assert prc["spec"]["parameters"] == {"maxRunDurationSeconds": "86400"}
    [prc] = [o for o in capacity.render_queue(queued_config()) if o["kind"] == "ProvisioningRequestConfig"]
    assert "parameters" not in prc["spec"]


# --------------------------------------------------------------------------- through the engine


def plan_with(tmp_path: Path, source: str, name: str, tiers: str, zone: str) -> report.PlanResult:
    text = stacks.stack_path(source).read_text().replace("    zone: us-east5-b\n", f"    zone: {zone}\n{tiers}", 1)
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(text)
    return planned_file(stacks.read_stack_file(path, name))


@pytest.mark.slow
def test_ladder_plan(tmp_path: Path) -> None:
    tiers = "    capacity:\n      - type: reservation\n        reservation: my-res\n      - type: onDemand\n"
    result = plan_with(tmp_path, "llama-405b-vllm", "cap-ladder", tiers, "us-east5-b")
    by_kind = {r.type.rsplit(":", 1)[-1]: r for r in result.resources if r.custom}
    cc, lws = by_kind["ComputeClass"], by_kind["LeaderWorkerSet"]
    # The first tier (the reservation) keeps the slice's pool name; the fallback is named by its type.
    assert cc.inputs["spec"]["priorities"] == [{"nodepools": ["tpu-slice-0"]}, {"nodepools": ["tpu-slice-0-ondemand"]}]
    assert cc.urn in lws.dependencies  # the class exists before its pods are scheduled
    name = capacity.compute_class_name(result.config)
    worker = lws.inputs["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert worker["nodeSelector"]["cloud.google.com/compute-class"] == name
    assert validate_all(result.manifests, controller_versions=result.config.controllers.by_controller) == []


@pytest.mark.slow
def test_ladder_pools_carry_the_class(tmp_path: Path) -> None:
    """Every tier pool the ComputeClass names carries its label and taint (pool_scheduling through
    components/program/build.py into the node pools), so the class's priorities point at pools of the class."""
    tiers = "    capacity:\n      - type: reservation\n        reservation: my-res\n      - type: onDemand\n"
    result = plan_with(tmp_path, "llama-405b-vllm", "cap-ladder", tiers, "us-east5-b")
    name = capacity.compute_class_name(result.config)
    pools = {r.inputs["name"]: r.inputs for r in result.resources if r.type == "gcp:container/nodePool:NodePool"}
    [cc] = [r for r in result.resources if r.type.endswith(":ComputeClass")]
    for rule in cc.inputs["spec"]["priorities"]:
        for pool in rule["nodepools"]:
            node_config = pools[pool]["nodeConfig"]
            assert node_config["labels"]["cloud.google.com/compute-class"] == name
            assert {"key": "cloud.google.com/compute-class", "value": name, "effect": "NO_SCHEDULE"} in node_config["taints"]


@pytest.mark.slow
def test_queue_plan(tmp_path: Path) -> None:
    tiers = "    capacity:\n      - type: queuedProvisioning\n"
    result = plan_with(tmp_path, "llama-405b-vllm", "cap-queue", tiers, "us-east5-a")
    resources = [r for r in result.resources if r.custom]
    [release] = [r for r in resources if r.type == "kubernetes:helm.sh/v3:Release" and r.name == "kueue-release"]
    queue = [r for r in resources if r.type.startswith("kubernetes:kueue.x-k8s.io/")]
    assert {r.type.rsplit(":", 1)[-1] for r in queue} == {
        "ResourceFlavor",
        "ProvisioningRequestConfig",
        "AdmissionCheck",
        "ClusterQueue",
        "LocalQueue",
    }
    assert all(release.urn in r.dependencies for r in queue)  # CRDs and webhooks first
    # The queued flavor's node labels are on the queued pool's nodes (components/platform/tpu_pool.py).
    [flavor] = [r for r in queue if r.name.endswith(capacity.queued_flavor_name(result.config))]
    [pool] = [r for r in resources if r.type == "gcp:container/nodePool:NodePool" and r.name == "tpu-slice-0-pool"]
    assert flavor.inputs["spec"]["nodeLabels"].items() <= pool.inputs["nodeConfig"]["labels"].items()
    [lws] = [r for r in resources if r.type.endswith(":LeaderWorkerSet")]
    assert lws.inputs["metadata"]["labels"][capacity.QUEUE_NAME_LABEL] == "tpu"
    assert {r.urn for r in queue} <= set(lws.dependencies)
    assert validate_all(result.manifests, controller_versions=result.config.controllers.by_controller) == []


def test_component_token_and_one_tier_guard() -> None:
    from components.platform.addons.capacity_scheduling import CapacityScheduling

    assert CapacityScheduling.TYPE == "gke-tpu-llm:scheduling:CapacityScheduling"
    with pytest.raises(ValueError, match="one tier"):
        capacity.render_compute_class(make_config())
    with pytest.raises(ValueError, match="no queuedProvisioning"):
        capacity.render_queue(make_config())


def test_ray_job_with_its_own_cluster_keeps_each_slice_in_one_pool() -> None:
    """A RayJob that embeds its cluster (the maxtext-ray kind under queued provisioning) under a ladder:
    the worker group's affinity cannot name the cluster (KubeRay names it), so the pod's own
    ``ray.io/cluster`` label scopes it, like the replica label."""
    from components.config.resolve import resolve
    from components.workloads.maxtext_ray import render as ray_render

    train: dict[str, Any] = {
        "workload": {"kind": "maxtext-ray", "model": "llama3-8b", "maxTargetLength": 4096, "perDeviceBatchSize": 1},
        "buckets": {"checkpoints": {"purpose": "train-output", "holdsCheckpoints": True}},
        "identity": {"serviceAccount": "maxtext-trainer", "bucketRoles": {"checkpoints": "roles/storage.objectUser"}},
        "tpu": {"zone": "us-east5-a", "capacity": [{"type": "queuedProvisioning"}]},
    }
    built = f"{ray_render.image_tag(make_config(**train))}@{BUILD_DIGEST}"  # the image's build is recorded
    train["workload"] = {**train["workload"], "maxtextRay": {"image": {"built": built}}}
    (job,) = ray_render.render_objects(resolve(make_config(**train)))
    assert "rayClusterSpec" in job["spec"]
    config = with_tiers(make_config(**train), *LADDER)
    after = capacity.apply_scheduling(job, config)
    (group,) = after["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    (term,) = group["template"]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {
        "labelSelector": {"matchLabels": {"ray.io/group": ray_render.WORKER_GROUP}},
        "matchLabelKeys": [capacity.RAY_CLUSTER_LABEL, capacity.RAY_REPLICA_LABEL],
        "topologyKey": "cloud.google.com/gke-nodepool",
    }
    head = after["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert "affinity" not in head  # the CPU head is not part of a slice
    assert validate_all([after], controller_versions=config.controllers.by_controller) == []
