"""Stacks are walled off from each other: no shared name or Workload Identity namespace, and no
non-prod stack in a prod project (components/config/isolation.py, checked by plan, render, review
and the program itself before anything registers)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.isolation import stack_claims, workload_pool
from components.tools import mockengine, report
from components.tools.cli import main
from tests.conftest import STACKS, planned, planned_built


def _stack_file(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(stacks.stack_path(name).read_text())
    return data


@pytest.fixture
def stacks_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``stacks/`` (copies of the committed files), so a test can write clashing stacks."""
    directory = tmp_path / "stacks"
    directory.mkdir()
    for name in STACKS:
        (directory / f"Pulumi.{name}.yaml").write_text(stacks.stack_path(name).read_text())
    monkeypatch.setattr(stacks, "STACKS_DIR", directory)
    return directory


def _write(directory: Path, name: str, data: dict[str, Any]) -> None:
    (directory / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(data))


def _plan_errors(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["plan", *argv])
    return code, capsys.readouterr().err


def test_committed_stacks_are_isolated() -> None:
    """Every committed stack passes against every other (the check runs inside each plan too)."""
    for name in STACKS:
        stacks.check_isolation(planned(name).config)


def test_dev_stack_cannot_take_prods_workload_identity(stacks_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's takeover: dev `llama-405b` names prod's namespace in prod's project. Prod opting into
    a shared project (unsafe) does not open its identity: the namespace clash still exits 2."""
    prod = _stack_file("llama-405b-prod")
    prod["config"]["gke-tpu-llm:unsafeShareProjectWithNonProd"] = True
    _write(stacks_dir, "llama-405b-prod", prod)
    dev = _stack_file("llama-405b")
    dev["config"]["gcp:project"] = prod["config"]["gcp:project"]
    dev["config"]["gke-tpu-llm:identity"]["namespace"] = "llama-405b-prod"
    _write(stacks_dir, "llama-405b", dev)

    code, err = _plan_errors(capsys, "llama-405b")
    assert code == 2
    assert "gke-tpu-llm:identity.namespace: 'llama-405b-prod' is the Workload Identity namespace" in err
    assert "'llama-405b'" in err
    assert "'llama-405b-prod'" in err
    assert workload_pool(prod["config"]["gcp:project"]) in err
    assert "(its identity.namespace, unset: the stack name)" in err  # prod never wrote the key
    assert "gcp:project" not in err  # prod allowed the shared project; only the identity is refused
    # And from prod's side, naming the dev stack.
    code, err = _plan_errors(capsys, "llama-405b-prod")
    assert code == 2
    assert "stack 'llama-405b' (" in err
    assert "identity.namespace" in err


def test_shared_bucket_name_across_projects(stacks_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bucket names are global: project `acme-ml` + stack `llm-one` and project `acme-ml-llm` + stack
    `one` both make `acme-ml-llm-one-models`."""
    base = _stack_file("llama-70b")
    first = json.loads(json.dumps(base))
    first["config"]["gcp:project"] = "acme-ml"
    _write(stacks_dir, "llm-one", first)
    second = json.loads(json.dumps(base))
    second["config"]["gcp:project"] = "acme-ml-llm"
    _write(stacks_dir, "one", second)
    code, err = _plan_errors(capsys, "one")
    assert code == 2
    assert "gke-tpu-llm:buckets.models: 'acme-ml-llm-one-models' is the bucket of this stack ('one')" in err
    assert "stack 'llm-one'" in err
    assert "in global" in err


def test_shared_cluster_name(stacks_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _stack_file("llama3-8b-train")
    data["config"]["gke-tpu-llm:cluster"] = {"name": "llama-70b"}  # the dev stack llama-70b's cluster
    _write(stacks_dir, "llama3-8b-train", data)
    code, err = _plan_errors(capsys, "llama3-8b-train")
    assert code == 2
    assert "gke-tpu-llm:cluster.name: 'llama-70b' is the GKE cluster of this stack ('llama3-8b-train')" in err
    assert "stack 'llama-70b' (" in err
    assert "(its cluster.name, unset: the stack name)" in err


def test_prod_and_non_prod_in_one_project_refused(stacks_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prod = _stack_file("llama-405b-prod")
    dev = _stack_file("llama-70b")
    dev["config"]["gcp:project"] = prod["config"]["gcp:project"]
    _write(stacks_dir, "llama-70b", dev)
    for stack, other in (("llama-70b", "llama-405b-prod"), ("llama-405b-prod", "llama-70b")):
        code, err = _plan_errors(capsys, stack)
        assert code == 2, stack
        assert f"gcp:project: '{prod['config']['gcp:project']}' is the project of prod stack 'llama-405b-prod'" in err
        assert f"'{other}'" in err
        assert "unsafeShareProjectWithNonProd" in err
    # The escape hatch is prod's to set, and it is named unsafe where it is documented.
    prod["config"]["gke-tpu-llm:unsafeShareProjectWithNonProd"] = True
    _write(stacks_dir, "llama-405b-prod", prod)
    code, err = _plan_errors(capsys, "llama-70b")
    assert code == 0, err
    dev["config"]["gke-tpu-llm:unsafeShareProjectWithNonProd"] = True
    _write(stacks_dir, "llama-70b", dev)
    code, err = _plan_errors(capsys, "llama-70b")
    assert code == 2
    assert "gke-tpu-llm:unsafeShareProjectWithNonProd: True is for prod stacks only" in err


def test_unsafe_escape_hatch_says_unsafe() -> None:
    from components.config.stack import StackConfig

    description = StackConfig.model_fields["unsafe_share_project_with_non_prod"].description or ""
    assert description.startswith("UNSAFE")
    assert "unsafeShareProjectWithNonProd" in (stacks.ROOT / "stacks" / "CONFIGURATION.md").read_text()


def test_one_autoscaled_vllm_stack_per_project(stacks_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The Custom Metrics adapter's KSA (custom-metrics/custom-metrics-stackdriver-adapter) is one
    principal per project: a second autoscaled vLLM stack in the project is refused, naming the key
    that installs it and the way out."""
    # llama-70b autoscales through AutoscalingMetric (no adapter): put it back on the adapter first.
    seventy = _stack_file("llama-70b")
    seventy["config"]["gke-tpu-llm:workload"]["vllm"]["autoscaling"]["via"] = "adapter"
    _write(stacks_dir, "llama-70b", seventy)
    data = _stack_file("llama-70b-fallback")
    data["config"]["gcp:project"] = seventy["config"]["gcp:project"]
    _write(stacks_dir, "llama-70b-fallback", data)
    code, err = _plan_errors(capsys, "llama-70b-fallback")
    assert code == 2
    assert "gke-tpu-llm:workload.vllm.autoscaling.enabled: True gives the Workload Identity namespace 'custom-metrics'" in err
    assert "one autoscaled vLLM stack per project" in err
    # On AutoscalingMetric (no adapter) the two stacks share the project without a clash.
    del seventy["config"]["gke-tpu-llm:workload"]["vllm"]["autoscaling"]["via"]
    _write(stacks_dir, "llama-70b", seventy)
    assert _plan_errors(capsys, "llama-70b-fallback")[0] == 0


def test_plan_all_reports_every_clashing_stack(stacks_dir: Path, capsys: pytest.CaptureFixture[str], shared_engine: None) -> None:
    data = _stack_file("llama3-8b-train")
    data["config"]["gke-tpu-llm:cluster"] = {"name": "llama-70b"}
    _write(stacks_dir, "llama3-8b-train", data)
    code = main(["plan", "--all", "--json"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Pulumi.llama3-8b-train.yaml: invalid" in err
    assert "Pulumi.llama-70b.yaml: invalid" in err


def test_the_program_itself_refuses_a_clash(stacks_dir: Path) -> None:
    """`pulumi up` runs the same check before registering anything (components/program/runtime.py)."""
    data = _stack_file("llama3-8b-train")
    data["config"]["gke-tpu-llm:cluster"] = {"name": "llama-70b"}
    _write(stacks_dir, "llama3-8b-train", data)
    records: list[mockengine.Registration] = []
    with pytest.raises(Exception, match="is the GKE cluster of this stack"):
        mockengine.run_program(stacks.read_stack_file(stacks_dir / "Pulumi.llama3-8b-train.yaml"), records=records)
    assert not [r for r in records if r.custom]


def test_review_refuses_clashing_head_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = {name: report.plan_json(planned(name)) for name in ("llama-70b", "llama3-8b-train")}
    head = json.loads(json.dumps(base))
    tenancy = head["llama3-8b-train"]["tenancy"]
    for claim in tenancy["claims"]:
        if claim["what"] == "GKE cluster":
            claim["name"] = "llama-70b"
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "head.json").write_text(json.dumps(head))
    code = main(["review", str(tmp_path / "base.json"), str(tmp_path / "head.json")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "Refused: stacks that are not isolated" in out
    assert "llama3-8b-train: gke-tpu-llm:cluster.name: 'llama-70b' is the GKE cluster" in out
    assert "not isolated" in err


# Physical names in what the program registers, by resource type: the claims must cover every one,
# so a resource type added without its claim fails here, naming it.
NAME_INPUTS = {
    "gcp:container/cluster:Cluster": "name",
    "gcp:storage/bucket:Bucket": "name",
    "gcp:serviceaccount/account:Account": "accountId",
    "gcp:artifactregistry/repository:Repository": "repositoryId",
    "gcp:compute/subnetwork:Subnetwork": "name",
    "gcp:certificatemanager/certificate:Certificate": "name",
    "gcp:certificatemanager/dnsAuthorization:DnsAuthorization": "name",
}
# Types whose names live inside another claimed resource (a pool in its cluster, a member on its
# bucket/account/repository/project): unique as long as their parent is.
SCOPED_INSIDE = {
    "gcp:container/nodePool:NodePool",
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:serviceaccount/iAMMember:IAMMember",
    "gcp:projects/iAMMember:IAMMember",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
    # Server-side ids (projects/…/dashboards/<id>): no name to share; display names carry the stack's.
    "gcp:monitoring/dashboard:Dashboard",
    "gcp:monitoring/alertPolicy:AlertPolicy",
}
_PRINCIPAL = re.compile(r"svc\.id\.goog(?:\[(?P<ns1>[^/\]]+)/|/subject/ns/(?P<ns2>[^/]+)/sa/)")


@pytest.mark.parametrize("stack", STACKS)
def test_claims_cover_every_registered_name_and_principal(stack: str) -> None:
    result = planned_built(stack)
    claims = stack_claims(result.config)
    names = {c.name for c in claims}
    namespaces = {c.name for c in claims if c.what == "Workload Identity namespace"}
    for res in result.resources:
        if not res.custom or not res.type.startswith("gcp:"):
            continue
        assert res.type in NAME_INPUTS or res.type in SCOPED_INSIDE, (
            f"{stack}: {res.type} is registered but neither claimed (components/config/isolation.py stack_claims or "
            "a kind's section.claims) nor listed as scoped inside a claimed resource here"
        )
        if res.type in NAME_INPUTS:
            name = res.inputs[NAME_INPUTS[res.type]]
            assert name in names, f"{stack}: {res.type} {name!r} is not among the stack's claims"
        for match in _PRINCIPAL.finditer(json.dumps(res.inputs)):
            namespace = match.group("ns1") or match.group("ns2")
            assert namespace in namespaces, (
                f"{stack}: {res.type} grants Google access to a KSA in namespace {namespace!r}, which the stack does not claim"
            )


def test_claims_change_with_the_keys_they_name() -> None:
    """A claim's key is the one that moves it: set it and the name follows."""
    from tests.conftest import make_config

    config = make_config("claims", identity={"namespace": "elsewhere"}, cluster={"name": "other-cluster"})
    by_key = {c.key: c.name for c in stack_claims(config)}
    assert by_key["identity.namespace"] == "elsewhere"
    assert by_key["cluster.name"] == "other-cluster"
    assert by_key["buckets.checkpoints"] == config.bucket_name("checkpoints")


def test_sibling_stack_that_does_not_validate_is_skipped(stacks_dir: Path) -> None:
    """A broken neighbour cannot be deployed (its own plan says why), so it blocks no other stack."""
    (stacks_dir / "Pulumi.broken.yaml").write_text("config:\n  gcp:project: x\n")
    assert "broken" not in {t.stack for t in stacks.stack_file_tenancies()}
    stacks.check_isolation(planned("llama-70b").config)


def test_conflict_is_a_config_error_listing_all(stacks_dir: Path) -> None:
    data = _stack_file("llama-405b")
    prod = _stack_file("llama-405b-prod")
    data["config"]["gcp:project"] = prod["config"]["gcp:project"]
    data["config"]["gke-tpu-llm:identity"]["namespace"] = "llama-405b-prod"
    _write(stacks_dir, "llama-405b", data)
    config = stacks.config_of(stacks.read_stack_file(stacks_dir / "Pulumi.llama-405b.yaml")).config
    with pytest.raises(ConfigError) as error:
        stacks.check_isolation(config)
    keys = [v.key for v in error.value.violations]
    assert keys == ["gke-tpu-llm:identity.namespace", "gcp:project"]
