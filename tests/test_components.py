"""Each component under the recording mock engine: type tokens, parents, inputs, options."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.config import stack_files as stacks
from components.config.stack import StackConfig
from components.platform.gke import GkeCluster
from components.platform.identity import NodeServiceAccount, WorkloadIdentity
from components.platform.storage import StackBucket
from components.platform.tpu_pool import TpuSlicePool
from components.program.build import bucket_args, build_platform, cluster_args, identity_args, pool_args
from components.tools import mockengine
from tests.conftest import make_config

COMPONENTS: list[Any] = [GkeCluster, TpuSlicePool, StackBucket, WorkloadIdentity, NodeServiceAccount]


def run(config: StackConfig, build: Any) -> list[mockengine.Registration]:
    records, _ = mockengine.record(lambda: build(config), stack=config.stack, project=config.project)
    return records


def of_type(records: list[mockengine.Registration], typ: str) -> list[mockengine.Registration]:
    return [r for r in records if r.type == typ]


def one(records: list[mockengine.Registration], typ: str) -> mockengine.Registration:
    (found,) = of_type(records, typ)
    return found


NODE_SA = "nodes@test-project-123.iam.gserviceaccount.com"


def build_pools(config: StackConfig) -> None:
    for i, pool in enumerate(config.pool_names()):
        TpuSlicePool(pool, pool_args(config, i, cluster="c", node_service_account=NODE_SA))


def test_component_type_tokens_have_three_segments_and_are_unique() -> None:
    tokens = [c.TYPE for c in COMPONENTS]
    assert len(set(tokens)) == len(tokens)
    for cls, token in zip(COMPONENTS, tokens, strict=True):
        assert re.fullmatch(r"gke-tpu-llm:[a-z_]+:[A-Z][A-Za-z]+", token)
        assert token.endswith(f":{cls.__name__}")
        assert token.split(":")[1] == cls.__module__.rsplit(".", 1)[1].replace("tpu_pool", "tpu")


def test_tpu_pool_multi_host_sets_compact_topology_and_host_count() -> None:
    records = run(make_config(), build_pools)
    pool = one(records, "gcp:container/nodePool:NodePool")
    comp = one(records, TpuSlicePool.TYPE)
    assert pool.parent == comp.urn
    assert pool.inputs["name"] == "tpu-slice-0"
    assert pool.name == "tpu-slice-0-pool"
    assert comp.name == "tpu-slice-0"
    assert pool.inputs["nodeCount"] == 4
    assert pool.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    assert pool.inputs["nodeLocations"] == ["us-east5-b"]
    assert pool.inputs["nodeConfig"]["machineType"] == "ct6e-standard-4t"
    assert pool.inputs["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert pool.inputs["nodeConfig"]["serviceAccount"] == NODE_SA
    assert "autoscaling" not in pool.inputs
    assert pool.options["deleteBeforeReplace"] is True
    assert pool.options["replaceOnChanges"] == ["placementPolicy", "nodeConfig.machineType", "nodeLocations"]
    assert pool.options["protect"] is False
    # Every shape-named URN of earlier releases finds this pool again (no create + delete on upgrade).
    assert "urn:pulumi:test::gke-tpu-llm::gke-tpu-llm:tpu:TpuSlicePool::tpu-v6e-4x4-0" in comp.options["aliases"]
    legacy = "urn:pulumi:test::gke-tpu-llm::gke-tpu-llm:tpu:TpuSlicePool$gcp:container/nodePool:NodePool::tpu-v5e-4x8-0-pool"
    assert legacy in pool.options["aliases"]
    assert "name" in pool.options["ignoreChanges"]


def test_tpu_pool_single_host_omits_placement_policy() -> None:
    config = make_config(tpu={"topology": "2x4", "machineType": "ct6e-standard-8t"})
    pool = one(run(config, build_pools), "gcp:container/nodePool:NodePool")
    assert "placementPolicy" not in pool.inputs
    assert pool.inputs["nodeCount"] == 1


def test_tpu_pool_autoscaled_single_host_has_no_perpetual_diff() -> None:
    config = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-8t", "autoscaling": {"minNodes": 1, "maxNodes": 2}}
    )
    pool = one(run(config, build_pools), "gcp:container/nodePool:NodePool")
    assert "nodeCount" not in pool.inputs
    assert pool.inputs["initialNodeCount"] == 1
    assert pool.inputs["autoscaling"] == {"totalMinNodeCount": 1, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}
    assert set(pool.options["ignoreChanges"]) == {"name", "initialNodeCount", "nodeCount"}


def test_tpu_pool_n_slices_make_n_pools_with_deterministic_names() -> None:
    config = make_config(
        tpu={"topology": "2x4", "machineType": "ct6e-standard-4t", "slices": 2},
        workload={"model": "llama2-70b", "perDeviceBatchSize": 27, "jetstream": {"mode": "disaggregated"}},
    )
    pools = of_type(run(config, build_pools), "gcp:container/nodePool:NodePool")
    assert sorted(p.inputs["name"] for p in pools) == ["tpu-slice-0", "tpu-slice-1"]
    assert all(p.inputs["nodeCount"] == 2 and p.inputs["placementPolicy"]["tpuTopology"] == "2x4" for p in pools)


def test_tpu_pool_spot_reservation_threads_and_metadata_options() -> None:
    spot = one(
        run(make_config(tpu={"spot": True, "threadsPerCore": 1, "workloadMetadata": "GCE_METADATA"}), build_pools),
        "gcp:container/nodePool:NodePool",
    )
    assert spot.inputs["nodeConfig"]["spot"] is True
    assert spot.inputs["nodeConfig"]["advancedMachineFeatures"] == {"threadsPerCore": 1}
    assert spot.inputs["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GCE_METADATA"}
    reserved = one(run(make_config(tpu={"reservation": "res-1"}), build_pools), "gcp:container/nodePool:NodePool")
    assert reserved.inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["res-1"],
    }
    assert "spot" not in reserved.inputs["nodeConfig"]


def test_tpu_pool_is_protected_in_prod() -> None:
    pool = one(run(make_config(environment="prod"), build_pools), "gcp:container/nodePool:NodePool")
    assert pool.options["protect"] is True


def test_gke_cluster_dev_defaults() -> None:
    records = run(make_config(), lambda c: GkeCluster("c", cluster_args(c)))
    cluster = one(records, "gcp:container/cluster:Cluster")
    comp = one(records, GkeCluster.TYPE)
    assert cluster.parent == comp.urn
    assert cluster.inputs["workloadIdentityConfig"] == {"workloadPool": "test-project-123.svc.id.goog"}
    assert cluster.inputs["removeDefaultNodePool"] is True
    assert cluster.inputs["deletionProtection"] is False
    assert cluster.inputs["location"] == "us-east5"
    assert cluster.inputs["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": False}}
    system = one(records, "gcp:container/nodePool:NodePool")
    assert system.inputs["name"] == "system"
    assert system.inputs["nodeConfig"]["machineType"] == "e2-standard-4"
    assert cluster.urn in system.dependencies
    provider = one(records, "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == stacks.SECRET_PLACEHOLDER
    assert provider.parent == comp.urn


def test_gke_cluster_prod_and_addons() -> None:
    config = make_config(
        environment="prod",
        workload={"kind": "maxtext-ray", "model": "llama3-8b"},
        buckets={"checkpoints": {"purpose": "out"}},
        identity={"bucketRoles": {"checkpoints": "roles/storage.objectUser"}},
    )
    cluster = one(run(config, lambda c: GkeCluster("c", cluster_args(c))), "gcp:container/cluster:Cluster")
    assert cluster.inputs["deletionProtection"] is True
    assert cluster.options["protect"] is True
    assert cluster.inputs["addonsConfig"] == {
        "gcsFuseCsiDriverConfig": {"enabled": True},
        "rayOperatorConfigs": [{"enabled": True}],
    }


def test_gke_cluster_zonal_lives_in_the_tpu_zone() -> None:
    config = make_config(cluster={"locationType": "zonal"})
    cluster = one(run(config, lambda c: GkeCluster("c", cluster_args(c))), "gcp:container/cluster:Cluster")
    assert cluster.inputs["location"] == "us-east5-b"


@pytest.mark.parametrize(("environment", "force_destroy", "protect"), [("dev", True, False), ("prod", False, True)])
def test_bucket_safety_rules(environment: str, force_destroy: bool, protect: bool) -> None:
    config = make_config(environment=environment, buckets={"ckpt": {"purpose": "checkpoints", "holdsCheckpoints": True}})
    records = run(config, lambda c: StackBucket("b", bucket_args(c, "ckpt")))
    bucket = one(records, "gcp:storage/bucket:Bucket")
    assert bucket.parent == one(records, StackBucket.TYPE).urn
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["location"] == "US-EAST5"
    assert bucket.inputs["forceDestroy"] is force_destroy
    assert bucket.inputs["versioning"] == {"enabled": True}
    assert bucket.options["protect"] is protect
    assert bucket.options["retainOnDelete"] is protect


def build_identity(config: StackConfig) -> None:
    cluster = GkeCluster("c", cluster_args(config))
    buckets = {k: StackBucket(f"b-{k}", bucket_args(config, k)) for k in config.buckets}
    WorkloadIdentity("wi", identity_args(config, cluster, buckets))


def workload_accounts(records: list[mockengine.Registration]) -> list[mockengine.Registration]:
    """Google service accounts other than the nodes' (which every stack has)."""
    return [r for r in of_type(records, "gcp:serviceaccount/account:Account") if not r.inputs["accountId"].endswith("-tpu-nodes")]


def test_workload_identity_principal_mode_binds_bucket_roles_to_the_ksa_principal() -> None:
    config = make_config(
        buckets={"models": {"purpose": "m"}, "other": {"purpose": "o"}},
        identity={"namespace": "serving", "serviceAccount": "vllm", "bucketRoles": {"models": "roles/storage.objectUser"}},
    )
    records = run(config, build_identity)
    assert not workload_accounts(records)
    # (the base config's JetStream buckets carry their own grants; this test is about `models`)
    (binding,) = [
        b for b in of_type(records, "gcp:storage/bucketIAMMember:BucketIAMMember") if b.inputs["bucket"].endswith("-models")
    ]
    assert binding.inputs["bucket"] == "test-project-123-test-models"
    assert binding.inputs["role"] == "roles/storage.objectUser"
    assert binding.inputs["member"] == (
        f"principal://iam.googleapis.com/projects/{mockengine.MOCK_PROJECT_NUMBER}/locations/global/"
        "workloadIdentityPools/test-project-123.svc.id.goog/subject/ns/serving/sa/vllm"
    )
    cluster = one(records, "gcp:container/cluster:Cluster")
    assert cluster.urn in binding.dependencies
    ksa = one(records, "kubernetes:core/v1:ServiceAccount")
    assert ksa.inputs["metadata"]["name"] == "vllm"
    assert ksa.inputs["metadata"]["namespace"] == "serving"
    assert "annotations" not in ksa.inputs["metadata"]
    assert ksa.provider == "c-k8s"
    ns = one(records, "kubernetes:core/v1:Namespace")
    assert ns.urn in ksa.dependencies
    # nothing project-wide but the nodes' minimal role
    project_roles = [r.inputs["role"] for r in records if r.type.startswith("gcp:projects/iAM")]
    assert project_roles == ["roles/container.defaultNodeServiceAccount"]


def test_workload_identity_gsa_mode_annotates_the_ksa() -> None:
    config = make_config(
        buckets={"ckpt": {"purpose": "c"}},
        identity={"mode": "gsa", "serviceAccount": "sax-sa", "bucketRoles": {"ckpt": "roles/storage.objectAdmin"}},
    )
    records = run(config, build_identity)
    (gsa,) = workload_accounts(records)
    email = f"{gsa.inputs['accountId']}@test-project-123.iam.gserviceaccount.com"
    wi_user = one(records, "gcp:serviceaccount/iAMMember:IAMMember")
    assert wi_user.inputs["role"] == "roles/iam.workloadIdentityUser"
    assert wi_user.inputs["member"] == "serviceAccount:test-project-123.svc.id.goog[test/sax-sa]"
    (binding,) = [
        b for b in of_type(records, "gcp:storage/bucketIAMMember:BucketIAMMember") if b.inputs["bucket"].endswith("-ckpt")
    ]
    assert binding.inputs["member"] == f"serviceAccount:{email}"
    ksa = one(records, "kubernetes:core/v1:ServiceAccount")
    assert ksa.inputs["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": email}


def test_workload_identity_default_namespace_is_not_created() -> None:
    records = run(make_config(identity={"namespace": "default"}), build_identity)
    assert not of_type(records, "kubernetes:core/v1:Namespace")


def build_identity_and_pools(config: StackConfig) -> None:
    build_platform(config)


def test_workload_identity_gce_metadata_pools_run_as_a_node_gsa_with_only_bucket_roles() -> None:
    """GCE metadata (as the Pathways tutorials) hides Workload Identity from pods: the pool's own GSA
    must reach the same buckets, with the minimal node role and nothing project-wide beyond it."""
    config = make_config(
        tpu={"workloadMetadata": "GCE_METADATA"},
        buckets={"ckpt": {"purpose": "c"}, "scratch": {"purpose": "s"}},
        identity={"bucketRoles": {"ckpt": "roles/storage.objectViewer", "scratch": "roles/storage.objectUser"}},
    )
    records = run(config, build_identity_and_pools)
    (node_gsa,) = of_type(records, "gcp:serviceaccount/account:Account")
    assert node_gsa.inputs["accountId"] == "test-tpu-nodes"
    assert node_gsa.inputs["displayName"] == "test GKE nodes (GCE metadata: TPU pods act as this account)"
    email = "test-tpu-nodes@test-project-123.iam.gserviceaccount.com"
    (project_role,) = of_type(records, "gcp:projects/iAMMember:IAMMember")
    assert project_role.inputs["role"] == "roles/container.defaultNodeServiceAccount"
    assert project_role.inputs["member"] == f"serviceAccount:{email}"
    node_bindings = {
        (b.inputs["bucket"], b.inputs["role"])
        for b in of_type(records, "gcp:storage/bucketIAMMember:BucketIAMMember")
        if b.inputs["member"] == f"serviceAccount:{email}"
    }
    assert node_bindings == {
        ("test-project-123-test-ckpt", "roles/storage.objectViewer"),
        ("test-project-123-test-scratch", "roles/storage.objectUser"),
        # the base config's JetStream buckets
        ("test-project-123-test-checkpoints", "roles/storage.objectUser"),
        ("test-project-123-test-pathways", "roles/storage.objectUser"),
    }
    tpu_pool = next(p for p in of_type(records, "gcp:container/nodePool:NodePool") if p.inputs["name"].startswith("tpu-"))
    assert tpu_pool.inputs["nodeConfig"]["serviceAccount"] == email
    assert tpu_pool.inputs["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GCE_METADATA"}
    # created after (and deleted before) the account, its role and its bucket grants
    assert node_gsa.urn in tpu_pool.dependencies
    assert project_role.urn in tpu_pool.dependencies
    node_grants = [
        b.urn for b in of_type(records, "gcp:storage/bucketIAMMember:BucketIAMMember") if b.inputs["member"].endswith(email)
    ]
    assert set(node_grants) <= set(tpu_pool.dependencies)


def test_every_node_pool_runs_as_the_stack_node_gsa_with_only_the_node_role() -> None:
    """With GKE metadata the node account holds GKE's node role and nothing else: no bucket, no
    project-wide storage. The system pool, the TPU pools and the converter pool all run as it."""
    config = make_config(buckets={"ckpt": {"purpose": "c"}}, identity={"bucketRoles": {"ckpt": "roles/storage.objectUser"}})
    records = run(config, build_identity_and_pools)
    (node_gsa,) = of_type(records, "gcp:serviceaccount/account:Account")
    assert node_gsa.inputs["accountId"] == "test-tpu-nodes"
    assert node_gsa.inputs["displayName"] == "test GKE nodes"
    assert node_gsa.parent == one(records, NodeServiceAccount.TYPE).urn
    email = "test-tpu-nodes@test-project-123.iam.gserviceaccount.com"
    (role,) = of_type(records, "gcp:projects/iAMMember:IAMMember")
    assert role.inputs["role"] == "roles/container.defaultNodeServiceAccount"
    assert role.inputs["member"] == f"serviceAccount:{email}"
    assert not [b for b in of_type(records, "gcp:storage/bucketIAMMember:BucketIAMMember") if b.inputs["member"].endswith(email)]
    pools = {p.inputs["name"]: p for p in of_type(records, "gcp:container/nodePool:NodePool")}
    assert set(pools) == {"system", "tpu-slice-0"}
    for pool in pools.values():
        assert pool.inputs["nodeConfig"]["serviceAccount"] == email
        assert role.urn in pool.dependencies  # created after, deleted before the node role
        # the service account is create-only: a replacement of a fixed-name pool must delete first
        assert pool.options["deleteBeforeReplace"] is True


def test_node_gsa_keeps_the_state_of_the_gce_metadata_account_of_earlier_releases() -> None:
    """Earlier releases created the account and its role under WorkloadIdentity ("workload"); the
    aliases keep both, so neither is replaced nor the role binding created twice."""
    records = run(make_config(tpu={"workloadMetadata": "GCE_METADATA"}), build_identity_and_pools)
    prefix = "urn:pulumi:test::gke-tpu-llm::gke-tpu-llm:identity:WorkloadIdentity$"
    (account,) = of_type(records, "gcp:serviceaccount/account:Account")
    assert account.options["aliases"] == [f"{prefix}gcp:serviceaccount/account:Account::workload-node-gsa"]
    (role,) = of_type(records, "gcp:projects/iAMMember:IAMMember")
    assert role.options["aliases"] == [f"{prefix}gcp:projects/iAMMember:IAMMember::workload-node-role"]


def test_tpu_pool_prod_allowance_lifts_protection_and_marks_the_pool() -> None:
    pool = one(
        run(make_config(environment="prod", tpu={"allowReplacement": True}), build_pools), "gcp:container/nodePool:NodePool"
    )
    assert pool.options["protect"] is False
    assert pool.inputs["nodeConfig"]["resourceLabels"]["gke-tpu-llm-allow-replace"] == "true"


# ---- the rollout cost is the catalog's price, and the docstrings cite what exists


def test_the_rollout_cost_of_a_pool_is_the_catalog_price_of_its_chips(monkeypatch: pytest.MonkeyPatch) -> None:
    """``steps`` prices a pool with ``TpuSlice.hourly_price`` (the one place prices are multiplied)."""
    from components.catalog import tpu as tpu_catalog
    from components.tools import plan_resources, steps

    def pool(spot: bool) -> plan_resources.Res:
        inputs = {"nodeConfig": {"machineType": "ct6e-standard-4t", "spot": spot}, "nodeCount": 4}
        return plan_resources.Res("urn:p", steps.NODE_POOL, "p", "", True, inputs)

    v6e = tpu_catalog.find_slice("v6e", "4x4", None)
    assert v6e is not None
    assert steps.pool_usd_per_hour(pool(False), "us-east5") == v6e.hourly_price("us-east5", chips=16) == 43.2
    assert steps.pool_usd_per_hour(pool(True), "us-east5") == v6e.hourly_price("us-east5", spot=True, chips=16) == 19.44
    assert steps.pool_usd_per_hour(pool(False), None) is None
    calls: list[tuple[str | None, bool, int | None]] = []

    def priced(self: tpu_catalog.TpuSlice, region: str | None, *, spot: bool = False, chips: int | None = None) -> float:
        calls.append((region, spot, chips))
        return 1.5

    monkeypatch.setattr(tpu_catalog.TpuSlice, "hourly_price", priced)
    assert steps.pool_usd_per_hour(pool(True), "us-east5") == 1.5
    assert calls == [("us-east5", True, 16)]


def _resolves(dotted: str) -> bool:
    """``components.x.y`` names a module, or an attribute of the longest module prefix."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[i:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_component_docstrings_cite_modules_and_readme_sections_that_exist() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    headings = {
        path.name: {line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")}
        for path in [root / "README.md", *(root / "components").glob("README*.md")]
    }
    stale: list[str] = []
    for path in sorted((root / "components").rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(root).as_posix()
        stale += [f"{where}: {m[1]}" for m in re.finditer(r"``(components(?:\.\w+)+)``", text) if not _resolves(m[1])]
        # "(components/README-day2.md: Changing a slice)", possibly wrapped over two lines
        for m in re.finditer(r"(?:components/)?(README[-\w]*)(\.md)?:\s+([A-Z][^)]*)\)", text):
            name, heading = f"{m[1]}.md", re.sub(r"\s+", " ", m[3]).strip()
            if heading not in headings.get(name, set()):
                stale.append(f"{where}: {m[0]}")
    assert stale == []


def test_legacy_pool_aliases_name_only_the_shapes_of_releases_before_stable_names() -> None:
    """A generation added to the catalog later never had a shape-encoded pool name: no alias for it
    (and no change to every stack's plan when the catalog grows)."""
    from components.catalog import tpu as tpu_catalog
    from components.platform.tpu_pool import LEGACY_GENERATIONS, legacy_aliases

    names = [name for name, _ in legacy_aliases(0)]
    assert "tpu-v6e-4x4-0" in names
    assert "tpu-v5e-2x4-8t-0" in names
    expected = {f"tpu-{s.key}-0" for s in tpu_catalog.all_slices() if s.generation.name in LEGACY_GENERATIONS}
    assert set(names) == expected
