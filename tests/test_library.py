"""The platform components as a library: a program of one's own, no stack config, under Pulumi's mocks."""

from __future__ import annotations

import dataclasses
import functools
import runpy
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import components
from components import (
    ArgsError,
    GkeCluster,
    GkeClusterArgs,
    StackBucket,
    StackBucketArgs,
    TpuSlicePool,
    TpuSlicePoolArgs,
    WorkloadIdentity,
    WorkloadIdentityArgs,
)
from components.catalog import tpu as tpu_catalog
from components.config import naming
from components.config.platform import BucketSpec, ClusterSpec, IdentitySpec
from components.config.stack_files import SECRET_PLACEHOLDER
from components.config.tpu_spec import TpuSpec
from components.platform.args import DEFAULT_POLICY, field_types
from components.platform.identity import NODE_ROLE, NodeServiceAccount, NodeServiceAccountArgs
from components.platform.tpu_pool import Autoscaling
from components.tools import mockengine

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = Path(__file__).resolve().parent / "examples" / "library_program.py"
NODE_POOL = "gcp:container/nodePool:NodePool"


def run(program: Any, stack: str = "demo") -> tuple[list[mockengine.Registration], dict[str, Any]]:
    """``program`` under the offline engine's mocks (the recording the stack program's plan uses)."""
    return mockengine.record(program, stack=stack, project="my-project")


@functools.cache
def example() -> tuple[list[mockengine.Registration], dict[str, Any]]:
    # The example imports the installed name, gke_tpu_llm; in this repository that package is
    # `components` (tests/test_install.py runs the example against the installed wheel).
    sys.modules["gke_tpu_llm"] = components
    try:
        return run(lambda: runpy.run_path(str(EXAMPLE), run_name="__main__"))
    finally:
        del sys.modules["gke_tpu_llm"]


def of_type(records: list[mockengine.Registration], typ: str) -> list[mockengine.Registration]:
    return [r for r in records if r.type == typ]


def test_example_builds_one_cluster_and_a_single_host_and_a_multi_host_pool() -> None:
    records, outputs = example()
    (cluster,) = of_type(records, "gcp:container/cluster:Cluster")
    assert (cluster.inputs["name"], cluster.inputs["project"], cluster.inputs["location"]) == ("demo", "my-project", "us-east5")
    pools = {p.inputs["name"]: p for p in of_type(records, NODE_POOL)}
    assert set(pools) == {"system", "serve", "train"}
    serve, train = pools["serve"], pools["train"]
    # v6e 2x4 on one 8-chip VM: one host, and no placement policy (GKE rejects it on single-host pools).
    assert serve.inputs["nodeConfig"]["machineType"] == "ct6e-standard-8t"
    assert serve.inputs["nodeCount"] == 1
    assert "placementPolicy" not in serve.inputs
    assert serve.inputs["nodeLocations"] == ["us-east5-b"]
    # v5e 4x8 on 4-chip VMs: eight hosts in one COMPACT placement.
    assert train.inputs["nodeConfig"]["machineType"] == "ct5lp-hightpu-4t"
    assert train.inputs["nodeCount"] == 8
    assert train.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x8"}
    assert train.inputs["nodeLocations"] == ["us-east5-a"]
    (role,) = of_type(records, "gcp:projects/iAMMember:IAMMember")
    for pool in (serve, train):
        assert pool.inputs["cluster"] == "demo"
        assert pool.inputs["location"] == "us-east5"
        # Created after the cluster and the node account's role (and deleted before them).
        assert cluster.urn in pool.dependencies
        assert role.urn in pool.dependencies
        assert pool.options["aliases"] == []  # the stack program's old names are no library pool's
        assert pool.options["protect"] is False
    assert outputs["tpu_pools"] == ["serve", "train"]
    assert outputs["kubeconfig"] == SECRET_PLACEHOLDER
    assert outputs["node_selectors"]["train"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "4x8",
    }


def test_example_creates_nothing_but_the_cluster_its_node_account_and_the_pools() -> None:
    records, _ = example()
    assert sorted(r.type for r in records) == sorted(
        [
            GkeCluster.TYPE,
            NodeServiceAccount.TYPE,
            "gcp:serviceaccount/account:Account",
            "gcp:projects/iAMMember:IAMMember",
            "gcp:container/cluster:Cluster",
            NODE_POOL,  # system
            "pulumi:providers:kubernetes",
            TpuSlicePool.TYPE,
            NODE_POOL,
            TpuSlicePool.TYPE,
            NODE_POOL,
        ]
    )  # no bucket, secret, namespace, controller or workload


def test_the_cluster_creates_its_own_least_privilege_node_account() -> None:
    records, _ = example()
    (account,) = of_type(records, "gcp:serviceaccount/account:Account")
    assert account.inputs["accountId"] == "demo-nodes"
    assert account.inputs["displayName"] == "demo GKE nodes"
    assert account.options["aliases"] == []
    (role,) = of_type(records, "gcp:projects/iAMMember:IAMMember")
    assert role.inputs == {
        "project": "my-project",
        "role": NODE_ROLE,
        "member": "serviceAccount:demo-nodes@my-project.iam.gserviceaccount.com",
    }
    for pool in of_type(records, NODE_POOL):
        assert pool.inputs["nodeConfig"]["serviceAccount"] == "demo-nodes@my-project.iam.gserviceaccount.com"


def test_an_existing_node_account_is_used_as_given() -> None:
    email = "nodes@my-project.iam.gserviceaccount.com"

    def program() -> None:
        cluster = GkeCluster("c", GkeClusterArgs(project="my-project", region="us-east5", node_service_account=email))
        TpuSlicePool("p", TpuSlicePoolArgs(cluster=cluster, generation="v6e", topology="4x4", zone="us-east5-b"))

    records, _ = run(program)
    assert not of_type(records, "gcp:serviceaccount/account:Account")
    assert {p.inputs["nodeConfig"]["serviceAccount"] for p in of_type(records, NODE_POOL)} == {email}


def test_bucket_and_identity_work_without_a_stack_config() -> None:
    def program() -> None:
        cluster = GkeCluster("c", GkeClusterArgs(project="my-project", region="us-east5"))
        weights = StackBucket("weights", StackBucketArgs(project="my-project", region="us-east5", purpose="weights"))
        WorkloadIdentity(
            "serving",
            WorkloadIdentityArgs(
                cluster=cluster,
                namespace="serving",
                buckets={"weights": weights},
                bucket_roles={"weights": "roles/storage.objectViewer"},
            ),
        )

    records, _ = run(program)
    (bucket,) = of_type(records, "gcp:storage/bucket:Bucket")
    assert bucket.inputs["name"] == "my-project-demo-weights"  # <project>-<stack>-<name>, as stacks name theirs
    assert bucket.inputs["forceDestroy"] is DEFAULT_POLICY.force_destroy
    (grant,) = of_type(records, "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert grant.inputs["bucket"] == "my-project-demo-weights"
    assert grant.inputs["member"].endswith("/subject/ns/serving/sa/llm-workload")
    (ksa,) = of_type(records, "kubernetes:core/v1:ServiceAccount")
    assert ksa.inputs["metadata"]["labels"]["app.kubernetes.io/instance"] == "demo"


# ---- validation: the config's rules, reported against the Args' own field names


def pool(**override: Any) -> TpuSlicePoolArgs:
    values: dict[str, Any] = {
        "cluster": "c",
        "project": "my-project",
        "location": "us-east5",
        "node_service_account": "nodes@my-project.iam.gserviceaccount.com",
        "generation": "v6e",
        "topology": "4x4",
        "zone": "us-east5-b",
    }
    return TpuSlicePoolArgs(**(values | override))


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            {"generation": "v7x"},
            ["generation: 'v7x' is not a TPU generation in the catalog", f"Allowed: {', '.join(tpu_catalog.GENERATIONS)}."],
        ),
        ({"topology": "3x3"}, ["topology: '3x3' is not a v6e topology", "Allowed: 1x1, 2x2, 2x4, 4x4"]),
        (
            {"topology": "2x4"},
            [
                "machine_type: None is required: v6e 2x4 has 2 VM layouts",
                "ct6e-standard-8t (1 host(s)), ct6e-standard-4t (2 host(s))",
            ],
        ),
        ({"machine_type": "ct6e-standard-8t"}, ["machine_type: 'ct6e-standard-8t' does not build a v6e 4x4 slice"]),
        ({"zone": "us-east5-z"}, ["zone: 'us-east5-z' is not a documented v6e zone", "set allow_undocumented_zone=True"]),
        ({"autoscaling": Autoscaling(min_nodes=1, max_nodes=4)}, ["autoscaling: ", "is not allowed on a multi-host slice"]),
        ({"spot": True, "reservation": "res-1"}, ["reservation: 'res-1' cannot be combined with spot=True"]),
        ({"project": None, "location": None}, ["project: None is required when cluster is a name", "location: None is required"]),
        ({"pool_name": "Serve"}, ["pool_name: 'Serve' is not a GKE name"]),
    ],
)
def test_pool_args_are_checked_by_the_config_rules(override: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(ArgsError) as caught:
        pool(**override)
    assert str(caught.value).startswith("invalid TpuSlicePoolArgs")
    for text in expected:
        assert text in str(caught.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"region": "us-east-5"}, ["region: 'us-east-5' is not a Compute Engine region in the catalog (did you mean us-east5"]),
        ({"project": "My Project"}, ["project: 'My Project' is not a GCP project id"]),
        ({"release_channel": "BETA"}, ["release_channel: 'BETA' is not an allowed value", "'RAPID', 'REGULAR' or 'STABLE'"]),
        ({"system_machine_type": "e2-standard-3"}, ["system_machine_type: 'e2-standard-3' is not a Compute Engine machine type"]),
        ({"system_nodes_per_zone": 0}, ["system_nodes_per_zone: 0 is out of range"]),
        ({"authorized_networks": ["10.0.0.0/33"]}, ["authorized_networks.0: '10.0.0.0/33' is not a CIDR range"]),
        ({"location_type": "zonal"}, ["zone: None is required for a zonal cluster"]),
        ({"zone": "europe-west4-a"}, ["zone: 'europe-west4-a' is not in region us-east5", "zones of us-east5: us-east5-a"]),
        ({"addons": {"istio"}}, ["addons: ['istio'] are not add-ons this component enables", "gcsFuseCsiDriver, rayOperator"]),
        ({"version": "1.30"}, []),  # a valid version: the pool compares it with its generation's minimum
    ],
)
def test_cluster_args_are_checked_by_the_config_rules(override: dict[str, Any], expected: list[str]) -> None:
    values = {"project": "my-project", "region": "us-east5"} | override
    if not expected:
        GkeClusterArgs(**values)
        return
    with pytest.raises(ArgsError) as caught:
        GkeClusterArgs(**values)
    for text in expected:
        assert text in str(caught.value)


def test_bucket_identity_and_node_account_args_are_checked() -> None:
    with pytest.raises(ArgsError, match=r"storage_class: 'COLD' is not an allowed value"):
        StackBucketArgs(project="my-project", region="us-east5", purpose="x", storage_class="COLD")  # type: ignore[arg-type]
    with pytest.raises(ArgsError, match=r"bucket_name: 'goog-x' starts with 'goog'"):
        StackBucketArgs(project="my-project", region="us-east5", purpose="x", bucket_name="goog-x")
    with pytest.raises(ArgsError, match=r"account_id: 'n' has 1 characters"):
        NodeServiceAccountArgs(project="my-project", account_id="n")


def test_pool_zone_and_version_are_checked_against_its_cluster() -> None:
    errors: list[str] = []

    def program() -> None:
        cluster = GkeCluster("c", GkeClusterArgs(project="my-project", region="us-east5", version="1.30"))
        for zone in ("europe-west4-a", "us-east5-b"):
            try:
                TpuSlicePoolArgs(cluster=cluster, generation="v6e", topology="4x4", zone=zone)
            except ArgsError as error:
                errors.append(str(error))
        with pytest.raises(ArgsError, match=r"service_account: 'default' is the ServiceAccount Kubernetes creates"):
            WorkloadIdentityArgs(cluster=cluster, service_account="default")
        with pytest.raises(ArgsError, match=r"bucket_roles.models: 'models' names no bucket in buckets"):
            WorkloadIdentityArgs(cluster=cluster, bucket_roles={"models": "roles/storage.objectViewer"})

    run(program)
    assert "zone: 'europe-west4-a' is not in the cluster's region us-east5" in errors[0]
    assert "cluster.version: '1.30' is below the v6e minimum. Allowed: >= 1.31.2-gke.1115000" in errors[0]
    assert "zone:" not in errors[1]


def test_autoscaling_checks_its_own_bounds() -> None:
    with pytest.raises(ArgsError) as caught:
        Autoscaling(min_nodes=3, max_nodes=2)
    assert str(caught.value) == (
        "invalid Autoscaling (1 problem(s)):\n"
        "  - min_nodes: 3 is above max_nodes (2). Allowed: 0..2. Fix: lower min_nodes or raise max_nodes."
    )


CLUSTER = {"project": "my-project", "region": "us-east5"}
BUCKET = {"project": "my-project", "region": "us-east5", "purpose": "weights"}
NAMED_POOL = {
    "cluster": "c",
    "project": "my-project",
    "location": "us-east5",
    "node_service_account": "nodes@my-project.iam.gserviceaccount.com",
    "generation": "v6e",
    "topology": "2x2",
    "zone": "us-east5-b",
}
STACK_FILE_WORDING = ("gke-tpu-llm:", "quote it in YAML", ": true", ": false", "stacks/CONFIGURATION.md", "YAML")
"""What a stack file's errors say and a library error must not: the Args are Python arguments."""


@pytest.mark.parametrize(
    ("args_type", "values", "expected"),
    [
        (GkeClusterArgs, CLUSTER | {"project": 123}, ["project: 123 has the wrong type (int). Allowed: str."]),
        (GkeClusterArgs, CLUSTER | {"region": None}, ["region: None has the wrong type (NoneType). Allowed: str."]),
        (
            GkeClusterArgs,
            CLUSTER | {"location_type": "zonal", "zone": 5},
            ["zone: 5 has the wrong type (int). Allowed: str | None."],
        ),
        (
            GkeClusterArgs,
            CLUSTER | {"addons": "rayOperator"},
            ["addons: 'rayOperator' has the wrong type (str)", "Fix: pass a collection of strings, e.g. {'rayOperator'}"],
        ),
        (
            GkeClusterArgs,
            CLUSTER | {"labels": {"team": 7}},
            ["labels: {'team': 7} has the wrong type at ['team'] (int). Allowed: Mapping[str, str]."],
        ),
        (GkeClusterArgs, CLUSTER | {"labels": {"Bad Key": "x"}}, ["labels.Bad Key: 'Bad Key' is not a GCP label key"]),
        (GkeClusterArgs, CLUSTER | {"labels": {"team": "Ops"}}, ["labels.team: 'Ops' may hold only lowercase letters"]),
        (
            GkeClusterArgs,
            CLUSTER | {"region": "us-east-5"},
            ["region: 'us-east-5' is not a Compute Engine region", "or set allow_undocumented_region=True if Google"],
        ),
        (
            TpuSlicePoolArgs,
            NAMED_POOL | {"autoscaling": {"minNodes": 1, "maxNodes": 2}},
            [
                "autoscaling: {'minNodes': 1, 'maxNodes': 2} has the wrong type (dict). Allowed: Autoscaling | None.",
                "Fix: pass Autoscaling(min_nodes=..., max_nodes=...) instead of a mapping.",
            ],
        ),
        (
            TpuSlicePoolArgs,
            NAMED_POOL | {"autoscaling": {"min_nodes": 1, "max_nodes": 2}},
            ["autoscaling: {'min_nodes': 1, 'max_nodes': 2} has the wrong type (dict)"],
        ),
        (TpuSlicePoolArgs, NAMED_POOL | {"project": "My Project"}, ["project: 'My Project' is not a GCP project id"]),
        (
            TpuSlicePoolArgs,
            NAMED_POOL | {"location": "europe-west4"},
            [
                "zone: 'us-east5-b' is not in the region of location europe-west4",
                "Allowed: zones of europe-west4 where v6e exists: europe-west4-a.",
            ],
        ),
        (TpuSlicePoolArgs, NAMED_POOL | {"location": "mars"}, ["location: 'mars' is not a Compute Engine region"]),
        (TpuSlicePoolArgs, NAMED_POOL | {"labels": {"A B": "c"}}, ["labels.A B: 'A B' is not a GCP label key"]),
        (
            TpuSlicePoolArgs,
            NAMED_POOL | {"zone": "us-east5-z"},
            ["zone: 'us-east5-z' is not a documented v6e zone", "set allow_undocumented_zone=True if Google lists it now"],
        ),
        (
            TpuSlicePoolArgs,
            NAMED_POOL | {"machineType": "ct6e-standard-4t"},
            ["machineType: 'ct6e-standard-4t' is not a field of TpuSlicePoolArgs (did you mean machine_type?)"],
        ),
        (
            TpuSlicePoolArgs,
            {k: v for k, v in NAMED_POOL.items() if k != "zone"},
            ["zone: None is required. Allowed: str. Fix: pass zone=...."],
        ),
        (StackBucketArgs, BUCKET | {"project": "My Project"}, ["project: 'My Project' is not a GCP project id"]),
        (
            StackBucketArgs,
            BUCKET | {"region": "mars"},
            ["region: 'mars' is not a Compute Engine region in the catalog", "allow_undocumented_region=True"],
        ),
        (StackBucketArgs, BUCKET | {"labels": {"Bad": "x"}}, ["labels.Bad: 'Bad' is not a GCP label key"]),
        (
            NodeServiceAccountArgs,
            {"project": "My Project", "account_id": "demo-nodes"},
            ["project: 'My Project' is not a GCP project id"],
        ),
        (
            WorkloadIdentityArgs,
            {"cluster": "my-cluster", "namespace": "serving"},
            ["cluster: 'my-cluster' has the wrong type (str). Allowed: GkeCluster."],
        ),
    ],
)
def test_bad_args_are_one_args_error_in_the_args_own_words(
    args_type: type[Any], values: dict[str, Any], expected: list[str]
) -> None:
    """Never a traceback, never accepted, never two contradictory problems: one ArgsError naming the
    field (as Python spells it), the value, what is allowed and the fix."""
    with pytest.raises(ArgsError) as caught:
        args_type(**values)
    text = str(caught.value)
    assert text.startswith(f"invalid {args_type.__name__} (1 problem(s)):"), text
    for part in expected:
        assert part in text
    assert ". Allowed: " in text
    assert ". Fix: " in text
    for wording in STACK_FILE_WORDING:
        assert wording not in text


def test_each_shared_rule_is_written_once() -> None:
    """The checks a stack file and the Args share live in components/config/gke_rules.py only."""
    texts = (
        "is not a Compute Engine region in the catalog",
        "pick a zone in",
        "gke_version_at_least(",
        "is not a GCP project id",
        "is not a GCP label key",
    )
    sources = {
        path.relative_to(ROOT).as_posix(): path.read_text()
        for path in (ROOT / "components").rglob("*.py")
        if "catalog" not in path.parts  # the catalog defines the facts (gke_version_at_least) the rules use
    }
    for text in texts:
        assert [path for path, source in sources.items() if text in source] == ["components/config/gke_rules.py"], text


def test_the_stack_file_and_the_args_report_a_shared_rule_alike() -> None:
    from components.config.errors import ConfigError
    from tests.conftest import make_config

    region: dict[str, Any] = {"gcp:region": "us-east-5"}
    with pytest.raises(ConfigError) as stack:
        make_config(**region)
    with pytest.raises(ArgsError) as args:
        GkeClusterArgs(project="my-project", region="us-east-5")
    problem = "is not a Compute Engine region in the catalog (did you mean us-east5 or us-east4 or us-east1?)"
    assert f"gcp:region: 'us-east-5' {problem}" in str(stack.value)
    assert "or set tpu.allowUndocumentedZone: true if Google opened the region" in str(stack.value)
    assert f"region: 'us-east-5' {problem}" in str(args.value)


# ---- facts kept once


def test_bucket_roles_and_metadata_modes_are_one_type_each() -> None:
    from components.config import base, tpu_spec
    from components.platform import identity, tpu_pool

    assert base.STORAGE_ROLES == typing.get_args(base.BucketRole)
    assert IdentitySpec.model_fields["bucket_roles"].annotation == dict[str, base.BucketRole]
    assert vars(identity)["BucketRole"] is base.BucketRole
    assert vars(identity)["WorkloadMetadata"] is vars(tpu_pool)["WorkloadMetadata"] is tpu_spec.WorkloadMetadata
    # typing caches equal Literals, so identity alone cannot tell one alias from two copies: count them.
    sources = [path.read_text() for path in (ROOT / "components").rglob("*.py")]
    for literal in ('Literal["GKE_METADATA", "GCE_METADATA"]', '"roles/storage.objectViewer", "roles/storage.objectUser"'):
        assert sum(source.count(literal) for source in sources) == 1, literal


def test_one_urn_helper_one_workload_component_name_and_one_export_list() -> None:
    import inspect

    from components.platform import identity, tpu_pool
    from components.program import build as platform

    assert vars(tpu_pool)["stack_urn"] is identity.stack_urn
    assert not hasattr(tpu_pool, "_urn")
    assert not hasattr(identity, "_urn")
    assert '"workload"' not in inspect.getsource(platform)
    assert components.__all__ == list(components._EXPORTS)


def test_the_protect_fields_share_one_description() -> None:
    from components.platform.args import description, protect_description

    assert description(GkeClusterArgs, "protect") == protect_description("cluster", lifted_by="allow_replacement")
    assert description(TpuSlicePoolArgs, "protect") == protect_description("pool", lifted_by="allow_replacement")
    assert description(StackBucketArgs, "protect") == protect_description("bucket")


# ---- the Args document the config's keys: same descriptions, same defaults, same allowed values

SPECS: dict[type[Any], type[BaseModel]] = {
    GkeClusterArgs: ClusterSpec,
    TpuSlicePoolArgs: TpuSpec,
    StackBucketArgs: BucketSpec,
    WorkloadIdentityArgs: IdentitySpec,
}
FROM_ENVIRONMENT = {(GkeClusterArgs, "deletion_protection"), (StackBucketArgs, "force_destroy")}
"""Config defaults that are the environment's policy: the Args default to the dev policy's value."""


def _spec_field(spec: type[BaseModel], path: str) -> Any:
    model: Any = spec
    for part in path.split("."):
        name = next(n for n, f in model.model_fields.items() if (f.alias or n) == part)
        found = model.model_fields[name]
        model = found.annotation
    return found


def literal_values(annotation: Any) -> set[Any]:
    """Every value of every Literal anywhere in a resolved ``annotation`` (unions, Mapping values, ...)."""
    if typing.get_origin(annotation) is typing.Literal:
        return set(typing.get_args(annotation))
    return {v for arg in typing.get_args(annotation) for v in literal_values(arg)}


def test_literal_values_see_through_unions_and_mappings() -> None:
    """So the comparison below can fail: a drifted role or mode is a different set, not () == ()."""
    assert literal_values(typing.Mapping[str, typing.Literal["a", "b"]]) == {"a", "b"}
    assert literal_values(typing.Literal[1, 2] | None) == {1, 2}
    assert literal_values(typing.Mapping[str, typing.Literal["a"]]) != literal_values(typing.Mapping[str, str])


@pytest.mark.parametrize("args_type", list(SPECS))
def test_args_fields_carry_the_config_reference(args_type: type[Any]) -> None:
    keyed = [f for f in dataclasses.fields(args_type) if f.metadata.get("path")]
    assert keyed
    hints = field_types(args_type)
    for f in dataclasses.fields(args_type):
        assert f.metadata["description"], f"{args_type.__name__}.{f.name} is undocumented"
        assert f"{f.name}: " in (args_type.__doc__ or "")
    for f in keyed:
        spec_field = _spec_field(SPECS[args_type], f.metadata["path"])
        first = (spec_field.description or "").split(". ")[0]
        assert f.metadata["description"].startswith(first), f.name
        if (args_type, f.name) in FROM_ENVIRONMENT:
            assert f.default == getattr(DEFAULT_POLICY, f.name)
        elif f.default is not dataclasses.MISSING:
            assert f.default == spec_field.get_default(call_default_factory=True), f.name
        assert literal_values(hints[f.name]) == literal_values(spec_field.annotation), f.name


# ---- the package root


def test_components_exports_the_library_lazily() -> None:
    assert {"GkeCluster", "GkeClusterArgs", "TpuSlicePool", "TpuSlicePoolArgs"} <= set(components.__all__)
    assert all(getattr(components, name) is not None for name in components.__all__)
    with pytest.raises(AttributeError):
        _ = components.NotAComponent


@pytest.mark.parametrize(
    ("module", "absent"),
    [("components", "pulumi"), ("components.config.loader", "pulumi_gcp"), ("components.policy", "pulumi_gcp")],
)
def test_importing_the_package_does_not_import_the_pulumi_sdks(module: str, absent: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m == {absent!r} or m.startswith({absent!r} + '.')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_ironwood_multi_host_pool_is_placed_by_a_workload_policy() -> None:
    """tpu7x: a HIGH_THROUGHPUT workload policy in the pool's region, named by placement_policy
    (no COMPACT type, which GKE refuses for tpu7x); other generations keep COMPACT + topology."""
    zone = next(z for z in tpu_catalog.GENERATIONS["tpu7x"].zones)
    region = tpu_catalog.zone_region(zone)

    def program() -> None:
        TpuSlicePool("iron", pool(generation="tpu7x", topology="2x2x2", zone=zone, location=region))
        TpuSlicePool("iron-one", pool(generation="tpu7x", topology="2x2x1", zone=zone, location=region))

    records, _ = run(program)
    (policy,) = of_type(records, "gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["region"] == region
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x2"}
    pools = {p.inputs["name"]: p for p in of_type(records, NODE_POOL)}
    assert pools["iron"].inputs["placementPolicy"] == {"type": "", "tpuTopology": "2x2x2", "policyName": policy.inputs["name"]}
    # Resource policies are unique per project and region: the cluster's name scopes it.
    assert policy.inputs["name"] == naming.workload_policy_name("c", "iron", "2x2x2") == "c-iron-2x2x2"
    assert pools["iron"].inputs["nodeCount"] == 2
    assert pools["iron"].inputs["nodeConfig"]["machineType"] == "tpu7x-standard-4t"
    assert "placementPolicy" not in pools["iron-one"].inputs  # one VM: no placement, no policy
