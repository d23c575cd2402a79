"""Replacement rules: which input changes make a provider replace a resource (components.tools.replacement)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import pytest

from components.tools import replacement as rp
from tests.conftest import STACKS, planned

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _leaf_paths(value: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Wire-input paths the way a plan records them: dotted through dicts, lists and scalars leaves;
    every enclosing object is yielded too, so a block rule (``placementPolicy``) can be found."""
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        yield path
        if isinstance(item, Mapping):
            yield from _leaf_paths(item, path)


@cache
def recorded_paths() -> dict[str, frozenset[str]]:
    """Every input path each type has in any stack's plan."""
    out: dict[str, set[str]] = {}
    for stack in STACKS:
        for reg in planned(stack).resources:
            out.setdefault(reg.type, set()).update(_leaf_paths(reg.inputs))
    return {typ: frozenset(paths) for typ, paths in out.items()}


def tpu_pool_inputs(stack: str = "llama-405b") -> dict[str, Any]:
    """The multi-host TPU pool's recorded inputs (a deep copy, safe to edit)."""
    for reg in planned(stack).resources:
        if reg.type == NODE_POOL and reg.inputs.get("placementPolicy"):
            return copy.deepcopy(reg.inputs)
    raise AssertionError(f"{stack} has no multi-host TPU pool")


# ------------------------------------------------------------------ node pools (scarce TPU capacity)


def test_tpu_topology_alone_is_updated_in_place_not_replaced() -> None:
    """placement_policy is a ForceNew *block*: only its count is RequiresNew (terraform-plugin-sdk
    diffList; pulumi-terraform-bridge#2753), and tpu_topology itself is not ForceNew."""
    old = tpu_pool_inputs()
    new = copy.deepcopy(old)
    new["placementPolicy"]["tpuTopology"] = "4x8"
    assert rp.input_changes(old, new) == ["placementPolicy.tpuTopology"]
    assert rp.replacing_changes(NODE_POOL, old, new) == []
    assert rp.replacing_paths(NODE_POOL, ["placementPolicy.tpuTopology", "placementPolicy.type"]) == []


@pytest.mark.parametrize("direction", ["multi-to-single-host", "single-to-multi-host"])
def test_adding_or_removing_the_placement_policy_replaces_the_pool(direction: str) -> None:
    multi = tpu_pool_inputs()
    single = {k: v for k, v in multi.items() if k != "placementPolicy"}
    old, new = (multi, single) if direction == "multi-to-single-host" else (single, multi)
    assert rp.replacing_changes(NODE_POOL, old, new) == ["placementPolicy"]
    assert rp.replacing_paths(NODE_POOL, ["placementPolicy"]) == ["placementPolicy"]


@pytest.mark.parametrize(
    "path",
    [
        "nodeCount",
        "nodeLocations",
        "autoscaling.totalMinNodeCount",
        "autoscaling.totalMaxNodeCount",
        "management.autoRepair",
        "nodeConfig.machineType",
        "nodeConfig.diskSizeGb",
        "nodeConfig.resourceLabels.environment",
        "nodeConfig.taints",
        "nodeConfig.workloadMetadataConfig.mode",
    ],
)
def test_node_pool_in_place_updates(path: str) -> None:
    assert rp.replacing_paths(NODE_POOL, [path]) == []


@pytest.mark.parametrize(
    "path",
    [
        "name",
        "cluster",
        "location",
        "project",
        "initialNodeCount",
        "nodeConfig.spot",
        "nodeConfig.serviceAccount",
        "nodeConfig.oauthScopes",
        "nodeConfig.reservationAffinity.values",
        "nodeConfig.reservationAffinity.consumeReservationType",
        "nodeConfig.advancedMachineFeatures.threadsPerCore",
    ],
)
def test_node_pool_force_new_fields(path: str) -> None:
    assert rp.replacing_paths(NODE_POOL, [path]) == [path]


def test_a_whole_sub_object_changing_replaces_when_it_holds_a_force_new_field() -> None:
    assert rp.replacing_paths(NODE_POOL, ["nodeConfig"]) == ["nodeConfig"]
    assert rp.replacing_paths(NODE_POOL, ["nodeConfig.reservationAffinity"]) == ["nodeConfig.reservationAffinity"]
    assert rp.replacing_paths(NODE_POOL, ["autoscaling", "management"]) == []


def test_replacing_paths_keeps_only_the_forcing_paths_in_order() -> None:
    changed = ["nodeCount", "nodeConfig.spot", "nodeConfig.machineType", "name"]
    assert rp.replacing_paths(NODE_POOL, changed) == ["nodeConfig.spot", "name"]


def test_real_plans_differ_only_in_place_between_identical_stacks() -> None:
    """llama-405b and its prod twin differ in labels/protection, not in anything that replaces
    (besides what names the stack itself: cluster, node service account, and prod's own project)."""
    dev, prod = tpu_pool_inputs("llama-405b"), tpu_pool_inputs("llama-405b-prod")
    changes = rp.input_changes(dev, prod)
    per_stack = ("name", "cluster", "nodeConfig.serviceAccount", "project")  # prod has its own project
    assert rp.replacing_paths(NODE_POOL, [p for p in changes if p not in per_stack]) == []


# ------------------------------------------------------------------ cluster, bucket, identity


@pytest.mark.parametrize(
    ("path", "replaces"),
    [
        ("name", True),
        ("location", True),
        ("project", True),
        ("releaseChannel.channel", False),
        ("deletionProtection", False),
        ("resourceLabels.stack", False),
        ("monitoringConfig.enableComponents", False),
        ("addonsConfig.gcsFuseCsiDriverConfig.enabled", False),
    ],
)
def test_cluster(path: str, replaces: bool) -> None:
    assert bool(rp.replacing_paths(CLUSTER, [path])) is replaces


@pytest.mark.parametrize(
    ("path", "replaces"),
    [
        ("name", True),
        ("location", True),
        ("project", True),
        ("labels.purpose", False),
        ("labels", False),
        ("storageClass", False),
        ("versioning.enabled", False),
        ("forceDestroy", False),
        ("uniformBucketLevelAccess", False),
    ],
)
def test_bucket(path: str, replaces: bool) -> None:
    assert bool(rp.replacing_paths(BUCKET, [path])) is replaces


@pytest.mark.parametrize(
    "token",
    [
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        "gcp:serviceaccount/iAMMember:IAMMember",
        "gcp:projects/iAMMember:IAMMember",
        "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
    ],
)
def test_iam_members_replace_on_role_and_member(token: str) -> None:
    assert rp.replacing_paths(token, ["role", "member", "condition.title"]) == ["role", "member", "condition.title"]


def test_service_account_and_repository() -> None:
    assert rp.replacing_paths("gcp:serviceaccount/account:Account", ["displayName", "accountId"]) == ["accountId"]
    repo = "gcp:artifactregistry/repository:Repository"
    assert rp.replacing_paths(repo, ["description", "labels.app", "dockerConfig.immutableTags"]) == []
    assert rp.replacing_paths(repo, ["format", "repositoryId"]) == ["format", "repositoryId"]


# ------------------------------------------------------------------ kubernetes


def k8s_object_types() -> list[str]:
    return sorted(t for t in recorded_paths() if rp.is_k8s_object(t))


def test_every_kubernetes_kind_replaces_on_name_and_namespace() -> None:
    kinds = [*k8s_object_types(), "kubernetes:example.com/v1:NotRegisteredAnywhere", "kubernetes:core/v1:NamespacePatch"]
    assert len(kinds) > 10
    for token in kinds:
        assert rp.replacing_paths(token, ["metadata.name"]) == ["metadata.name"], token
        assert rp.replacing_paths(token, ["metadata.namespace"]) == ["metadata.namespace"], token
        assert rp.replacing_paths(token, ["metadata.labels.app", "metadata.annotations.pulumi.com/skipAwait"]) == [], token


def test_job_template_is_immutable_but_deployment_template_is_not() -> None:
    containers = "spec.template.spec.containers"
    assert rp.replacing_paths(JOB, [containers, "spec.backoffLimit"]) == [containers]
    assert rp.replacing_paths(JOB, ["spec"]) == ["spec"]
    assert rp.replacing_paths(DEPLOYMENT, [containers, "spec.replicas"]) == []
    assert rp.replacing_paths(DEPLOYMENT, ["spec.selector.matchLabels.run"]) == ["spec.selector.matchLabels.run"]


def test_service_secret_and_role_binding() -> None:
    assert rp.replacing_paths(SERVICE, ["spec.type", "spec.ports"]) == []
    assert rp.replacing_paths(SERVICE, ["spec.clusterIP"]) == ["spec.clusterIP"]
    secret = "kubernetes:core/v1:Secret"
    assert rp.replacing_paths(secret, ["stringData.token"]) == ["stringData.token"]
    binding = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
    assert rp.replacing_paths(binding, ["subjects", "roleRef.name"]) == ["roleRef.name"]


def test_custom_resources_and_patch_kinds_only_replace_on_identity() -> None:
    lws = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    assert rp.replacing_paths(lws, ["spec.leaderWorkerTemplate.size", "spec.replicas"]) == []
    assert rp.replacing_paths("kubernetes:batch/v1:JobPatch", ["spec.template"]) == []


def test_helm_release_replaces_on_its_own_name_and_namespace_only() -> None:
    assert not rp.is_k8s_object(RELEASE)
    assert rp.replacing_paths(RELEASE, ["version", "values", "chart"]) == []
    assert rp.replacing_paths(RELEASE, ["name", "namespace"]) == ["name", "namespace"]
    assert rp.replacing_paths(RELEASE, ["metadata.name"]) == []


def test_kubernetes_provider_replacement_cascades() -> None:
    assert rp.replacing_paths(rp.K8S_PROVIDER, ["kubeconfig"]) == ["kubeconfig"]
    assert rp.replacing_paths(rp.K8S_PROVIDER, ["deleteUnreachable", "enableServerSideApply"]) == []


def test_who_asks_for_delete_before_replace() -> None:
    assert rp.provider_deletes_first("gcp:projects/iAMMember:IAMMember")
    assert rp.provider_deletes_first(JOB)
    assert not rp.provider_deletes_first(RELEASE)
    assert not rp.provider_deletes_first(NODE_POOL)


# ------------------------------------------------------------------ the tables themselves


def test_data_and_capacity_types() -> None:
    assert rp.DATA_TYPES == {BUCKET}
    assert rp.CAPACITY_TYPES == {NODE_POOL, CLUSTER}


def test_every_registered_gcp_type_has_rules() -> None:
    """A new GCP resource type needs its ForceNew fields vendored before it is planned."""
    gcp = {t for t in recorded_paths() if t.startswith("gcp:")}
    assert gcp, "no GCP resources planned"
    assert gcp <= set(rp.RULES), sorted(gcp - set(rp.RULES))
    assert rp.K8S_PROVIDER in recorded_paths()


@pytest.mark.parametrize("token", [NODE_POOL, CLUSTER, BUCKET])
def test_rule_paths_occur_in_some_plan_or_say_why_not(token: str) -> None:
    recorded = recorded_paths()[token]
    for rule in rp.RULES[token]:
        assert rule.path in recorded or rule.note, f"{token} {rule.path}: not in any plan and no note"


def test_rules_marked_not_set_are_really_not_set() -> None:
    """A stale NOT_SET note would hide that a stack now relies on a replacing input."""
    recorded = recorded_paths()
    for token, rules in rp.RULES.items():
        for rule in rules:
            if rule.note == rp.NOT_SET:
                assert rule.path not in recorded.get(token, frozenset()), f"{token} {rule.path} is set now"


def test_rules_are_wire_paths_with_sources() -> None:
    for token, rules in rp.RULES.items():
        assert rules, token
        paths = [r.path for r in rules]
        assert len(paths) == len(set(paths)), token
        for rule in rules:
            assert "_" not in rule.path, (token, rule.path)
            assert not rule.path.startswith("."), (token, rule.path)
            assert rule.source.startswith(("terraform-provider-google-beta", "pulumi-kubernetes")), rule.source
            assert ":" in rule.source


def test_input_changes() -> None:
    old = {"a": 1, "b": {"c": [1, 2], "d": None}, "e": {"f": 1}}
    new = {"a": 1, "b": {"c": [2, 1]}, "g": {"h": 1}}
    assert rp.input_changes(old, new) == ["b.c", "e", "g"]
    assert rp.input_changes(new, new) == []


@pytest.mark.parametrize(
    ("pattern", "path", "contained"),
    [
        ("spec", "spec.replicas", True),
        ("spec.replicas", "spec", False),
        ("*", "anything.at.all", True),
        ("placementPolicy", "placementPolicy.tpuTopology", True),
        ("nodeConfig.machineType", "nodeConfig.machineTypeX", False),
        ('metadata.labels["kubernetes.io/name"]', "metadata.labels.kubernetes.io/name", True),
        ("spec.template.spec.containers[0].image", "spec.template.spec.containers", True),
        ("spec.*.size", "spec.leaderWorkerTemplate.size", True),
        ("spec.*.size", "spec.leaderWorkerTemplate.restartPolicy", False),
    ],
)
def test_replace_on_changes_follows_the_engine(pattern: str, path: str, contained: bool) -> None:
    assert rp.replace_on_changes_contains(pattern, path) is contained


def test_replace_on_changes_makes_an_in_place_change_a_replacement() -> None:
    """What tpu_pool would need for a topology or machine-type change to replace the pool."""
    changed = ["placementPolicy.tpuTopology", "nodeConfig.machineType", "nodeCount"]
    assert rp.replacing_paths(NODE_POOL, changed) == []
    roc = ["placementPolicy", "nodeConfig.machineType"]
    assert rp.replacing_paths(NODE_POOL, changed, roc) == changed[:2]
    lws = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    assert rp.replacing_paths(lws, ["spec.replicas", "metadata.labels.app"], ["spec"]) == ["spec.replicas"]
