"""``python -m components roles STACK``: the deployer's permissions and predefined roles, held to the
resource types every stack registers (components/tools/roles.py, deployer_rows.py, predefined_roles.py).

The CLI's printed permissions and roles are checked against each row of each registered type, for
every stack in stacks/; a type without a row, a bad stack name and conflicting flags exit 2; the
input-dependent permissions, the cover and the custom-role file are checked on their own.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import stack_files as stacks
from components.crds.releases import CONTROLLERS, CUSTOM_RESOURCES
from components.tools import deployer_rows, predefined_roles, report, roles
from components.tools.cli import main
from tests.conftest import STACKS, planned
from tests.test_purity import package_modules, violations


def _resources(stack: str) -> list[dict[str, Any]]:
    return [r.to_dict() for r in planned(stack).resources]


def _cli_json(stack: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``roles STACK --json`` as printed, on the session's plan of the stack (no second run)."""
    monkeypatch.setattr(report, "plan", lambda stack_file: planned(stack_file.stack))
    assert main(["roles", stack, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_type_a_stack_registers_has_a_row(stack: str) -> None:
    registered = {r["type"] for r in deployer_rows.registered(_resources(stack))}
    missing = sorted(registered - set(deployer_rows.ROWS))
    assert not missing, f"{stack} registers {missing} with no row in components/tools/deployer_rows.py ROWS"


@pytest.mark.parametrize("stack", STACKS)
def test_printed_roles_cover_every_row_of_every_registered_type(
    stack: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = _cli_json(stack, monkeypatch, capsys)
    permissions = set(printed["permissions"])
    granted = {p for role in printed["roles"] for p in predefined_roles.ROLES[role["role"]].permissions}
    resources = deployer_rows.registered(_resources(stack))
    assert set(printed["types"]) == {r["type"] for r in resources}
    for resource in resources:
        needs = deployer_rows.permissions_of(resource)
        assert needs, f"{stack}: {resource['type']} {resource['name']} needs no permission at all"
        not_printed = sorted(set(needs) - permissions)
        assert not not_printed, f"{stack}: {resource['type']} {resource['name']} needs {not_printed}, not printed"
        not_granted = sorted(set(needs) - granted)
        assert not not_granted, f"{stack}: {resource['type']} {resource['name']} needs {not_granted}, in no printed role"
        assert set(needs) <= set(printed["types"][resource["type"]]), f"{stack}: {resource['type']} lists too little"
    # Nothing printed that no registered resource needs: the list is derived, not a fixed superset.
    needed = {p for r in resources for p in deployer_rows.permissions_of(r)}
    assert permissions == needed, f"{stack}: printed but not needed: {sorted(permissions - needed)}"
    covered = {p for role in printed["roles"] for p in role["covers"]}
    assert covered == permissions, f"{stack}: the roles' 'covers' miss {sorted(permissions - covered)}"


@pytest.mark.parametrize("stack", STACKS)
def test_the_cover_is_the_fewest_roles_and_none_is_redundant(stack: str) -> None:
    result = roles.deployer_roles(stack, "dev", "p", _resources(stack))
    needed = set(result.permissions)
    for role in result.roles:
        rest = set().union(*(r.permissions for r in result.roles if r is not role))
        assert not needed <= rest, f"{stack}: {role.name} is redundant in {[r.name for r in result.roles]}"
    # No cover with fewer roles exists among the vendored candidates (brute force, independent of cover()).
    candidates = [r for r in predefined_roles.ROLES.values() if r.permissions & needed]
    for size in range(len(result.roles)):
        for combo in itertools.combinations(candidates, size):
            assert not needed <= set().union(*(r.permissions for r in combo)), (
                f"{stack}: {[r.name for r in combo]} covers with fewer roles than {[r.name for r in result.roles]}"
            )


def test_cover_prefers_fewer_roles_then_fewer_permissions_and_names_an_orphan() -> None:
    def role(name: str, total: int, *permissions: str) -> predefined_roles.Role:
        return predefined_roles.Role(name, name, total, frozenset(permissions))

    candidates = {
        r.name: r
        for r in (
            role("a", 5, "x.y.get", "x.y.list"),
            role("b", 5, "x.y.create"),
            role("wide", 400, "x.y.get", "x.y.list", "x.y.create"),
        )
    }
    assert [r.name for r in roles.cover({"x.y.get", "x.y.create"}, candidates)] == ["wide"]  # one role beats two
    narrow = {**candidates, "narrow": role("narrow", 9, "x.y.get", "x.y.create")}
    assert [r.name for r in roles.cover({"x.y.get", "x.y.create"}, narrow)] == ["narrow"]  # as few, fewer granted
    with pytest.raises(deployer_rows.RolesError, match=r"no vendored role holds z\.w\.delete"):
        roles.cover({"x.y.get", "z.w.delete"}, candidates)


def test_prod_and_dev_differ_where_their_inputs_do() -> None:
    """A retained prod bucket is never deleted by Pulumi; a dev bucket with forceDestroy empties itself."""
    bucket = {"type": "gcp:storage/bucket:Bucket", "custom": True, "inputs": {"forceDestroy": True}, "options": {}}
    dev = deployer_rows.permissions_of(bucket)
    assert {"storage.buckets.delete", "storage.objects.list", "storage.objects.delete"} <= set(dev)
    prod = deployer_rows.permissions_of({**bucket, "inputs": {"forceDestroy": False}, "options": {"retainOnDelete": True}})
    assert not {"storage.buckets.delete", "storage.objects.list", "storage.objects.delete"} & set(prod)
    assert {"storage.buckets.create", "storage.buckets.get", "storage.buckets.update"} <= set(prod)


@pytest.mark.parametrize(
    ("type_", "inputs", "needed", "absent"),
    [
        (
            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
            {"roleRef": {"kind": "Role", "name": "reader"}},
            "container.roles.bind",
            "container.clusterRoles.bind",
        ),
        (
            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
            {"roleRef": {"kind": "ClusterRole", "name": "view"}},
            "container.clusterRoles.bind",
            "container.roles.bind",
        ),
        (
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            {"member": "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/subject/ns/x/sa/y"},
            "resourcemanager.projects.get",
            None,
        ),
        (
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            {"member": "serviceAccount:a@p.iam.gserviceaccount.com"},
            None,
            "resourcemanager.projects.get",
        ),
        ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", {}, "container.clusterRoles.escalate", None),
        ("gcp:container/nodePool:NodePool", {}, "iam.serviceAccounts.actAs", None),
    ],
)
def test_input_dependent_permissions(type_: str, inputs: Mapping[str, Any], needed: str | None, absent: str | None) -> None:
    got = deployer_rows.permissions_of({"type": type_, "inputs": inputs, "options": {}})
    if needed:
        assert needed in got
    if absent:
        assert absent not in got


def test_a_helm_release_needs_what_its_chart_installs() -> None:
    kueue = deployer_rows.permissions_of(
        {"type": deployer_rows.HELM_RELEASE, "inputs": {"chart": CONTROLLERS["kueue"].chart.chart, "createNamespace": True}}
    )
    lws = deployer_rows.permissions_of({"type": deployer_rows.HELM_RELEASE, "inputs": {"chart": CONTROLLERS["lws"].chart.chart}})
    for permission in (
        "container.mutatingWebhookConfigurations.create",
        "container.clusterRoles.escalate",
        "container.secrets.create",
    ):
        assert permission in kueue
        assert permission in lws
    # Kueue's chart renders its CRDs and the visibility APIService; LWS's CRDs are registered beside it.
    assert "container.customResourceDefinitions.create" in kueue
    assert "container.apiServices.create" in kueue
    assert "container.customResourceDefinitions.create" not in lws
    with pytest.raises(deployer_rows.RolesError, match=r"oci://example\.com/charts/other"):
        deployer_rows.permissions_of({"type": deployer_rows.HELM_RELEASE, "inputs": {"chart": "oci://example.com/charts/other"}})


def test_every_kind_the_program_can_register_has_a_row() -> None:
    """Beyond what today's stacks register: every typed kind of components/platform/k8s.py, every custom
    resource kind, every controller chart, and the tpu7x workload policy."""
    from components.platform import k8s

    typed = {f"kubernetes:{'core/' + v if '/' not in v else v}:{kind}" for v, kind in k8s._TYPED}
    custom = {f"kubernetes:{api_version}:{kind}" for api_version, kind in CUSTOM_RESOURCES}
    missing = sorted((typed | custom | {"kubernetes:core/v1:Secret"}) - set(deployer_rows.ROWS))
    assert not missing, f"no row in components/tools/deployer_rows.py for {missing}"
    assert set(deployer_rows.HELM_CHART_KINDS) == set(CONTROLLERS), "HELM_CHART_KINDS must name every controller's chart kinds"
    for controller, kinds in deployer_rows.HELM_CHART_KINDS.items():
        unknown = [kind for kind in kinds if kind not in deployer_rows.KUBE_KINDS]
        assert not unknown, f"{controller}: chart kinds {unknown} have no KUBE_KINDS entry"


def test_the_tpu7x_workload_policy_is_covered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one Google Cloud type no committed stack registers: a multi-host tpu7x pool's workload policy."""
    source = stacks.stack_path("llama-405b-ironwood").read_text()
    assert "topology: 2x2x1" in source, "the ironwood seed changed; pick another single-host tpu7x line to vary"
    path = tmp_path / "Pulumi.ironwood-multihost.yaml"
    # A second stack in the project expects the seed's proxy-only subnet instead of creating it again.
    assert "create: true" in source
    path.write_text(source.replace("topology: 2x2x1", "topology: 2x2x2").replace("create: true", "create: false"))
    assert main(["roles", "--config", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "gcp:compute/resourcePolicy:ResourcePolicy" in printed["types"]
    needs = set(deployer_rows.ROWS["gcp:compute/resourcePolicy:ResourcePolicy"].create)
    assert needs <= set(printed["permissions"])
    assert needs <= {p for role in printed["roles"] for p in role["covers"]}


def test_vendored_roles_hold_only_permissions_some_row_needs() -> None:
    """ROLES keeps the subset of each role the rows need (so the cover is computed from vendored facts)."""
    universe = {p for row in deployer_rows.ROWS.values() for phase in row.phases().values() for p in phase}
    samples: list[Mapping[str, Any]] = [
        {"member": "principal://x"},
        {"forceDestroy": True},
        {"roleRef": {"kind": "Role"}},
        {"roleRef": {"kind": "ClusterRole"}},
        *({"chart": c.chart.chart, "createNamespace": True} for c in CONTROLLERS.values()),
    ]
    for row in deployer_rows.ROWS.values():
        for inputs in samples:
            try:
                universe |= set(row.extra(inputs))
            except deployer_rows.RolesError:
                continue  # a Helm extra given another resource's inputs
    for role in predefined_roles.ROLES.values():
        stray = sorted(role.permissions - universe)
        assert not stray, f"{role.name} vendors {stray}, which no row needs"
        assert role.total >= len(role.permissions)
    orphans = sorted(universe - set().union(*(r.permissions for r in predefined_roles.ROLES.values())))
    assert not orphans, f"no vendored role holds {orphans}"


def test_text_output_names_the_roles_every_permission_and_the_scope(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = "llama-70b"
    printed = _cli_json(stack, monkeypatch, capsys)
    assert main(["roles", stack]) == 0
    text = capsys.readouterr().out
    for role in printed["roles"]:
        assert role["role"] in text
    for permission in printed["permissions"]:
        assert permission in text, f"{permission} is in --json but not in the text output"
    assert f"project {printed['project']}" in text
    assert "prod's deployer must be a different identity" in text
    assert set(printed["scope"]["project"]) >= {"container.clusters.create", "storage.buckets.create"}
    assert "resourcemanager.projects.setIamPolicy" in printed["scope"]["project"]  # the stack grants project roles
    assert all(p.startswith("container.") for p in printed["scope"]["clusters"])


def test_custom_role_file_holds_exactly_the_permissions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = "llama-405b-prod"
    printed = _cli_json(stack, monkeypatch, capsys)
    assert main(["roles", stack, "--format", "custom-role"]) == 0
    role = yaml.safe_load(capsys.readouterr().out)
    assert set(role) == {"title", "description", "stage", "includedPermissions"}
    assert role["includedPermissions"] == printed["permissions"]
    assert role["stage"] == "GA"
    assert stack in role["title"]


def test_a_registered_type_without_a_row_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(report, "plan", lambda stack_file: planned(stack_file.stack))
    monkeypatch.setattr(deployer_rows, "ROWS", {k: v for k, v in deployer_rows.ROWS.items() if k != "gcp:storage/bucket:Bucket"})
    assert main(["roles", "llama-70b"]) == 2
    captured = capsys.readouterr()
    assert "gcp:storage/bucket:Bucket" in captured.err
    assert "add a row to components/tools/deployer_rows.py" in captured.err
    assert not captured.out
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["roles", "no-such-stack"], "no stack file"),
        (["roles"], "give a STACK name or --config FILE"),
        (["roles", "llama-70b", "--json", "--format", "custom-role"], "not allowed with argument"),
        (["roles", "llama-70b", "--format", "yaml"], "invalid choice: 'yaml'"),
    ],
)
def test_bad_arguments_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    if argv[1:] == ["no-such-stack"]:
        assert "llama-70b" in err  # the stacks there are


def test_roles_module_loads_no_pulumi_sdk() -> None:
    found = violations("components.tools.roles", package_modules())
    assert not found, "components/tools/roles.py and the rows and roles it loads must stay pure:\n  " + "\n  ".join(found)
