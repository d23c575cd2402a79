"""Secure by default, items 3 and 4: every node pool runs as the stack's own node account, and every
pod gets only what it needs (bucket roles, capabilities, API token, secrets outside argv); each
checkov skip's reason is checked against the resources it covers."""

from __future__ import annotations

import copy
import fnmatch
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from components.config import naming
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.render.core import API_TOKEN, render_service_account
from components.tools import report, steps
from components.tools.review import compare_stack
from components.tools.scan import SCOPED_SKIPS, SKIPS, scanned_objects, scoped_reason
from components.workloads.jetstream import checkpoint as jetstream_checkpoint
from tests.conftest import STACKS, make_config, planned, planned_built

NODE_ROLE = "roles/container.defaultNodeServiceAccount"


def plan(stack: str) -> dict[str, Any]:
    return report.plan_json(planned(stack))


def of_type(data: Mapping[str, Any], typ: str) -> list[dict[str, Any]]:
    return [r for r in data["resources"] if r["type"] == typ]


def pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec of a scanned object (a Pod, or a Deployment/Job template); None for other kinds."""
    spec: Mapping[str, Any] | None = None
    if obj.get("kind") == "Pod":
        spec = obj["spec"]
    elif obj.get("kind") in ("Deployment", "Job") and (obj.get("spec") or {}).get("template"):
        spec = obj["spec"]["template"]["spec"]
    return spec


def workloads(stack: str) -> list[tuple[str, Mapping[str, Any]]]:
    """``(Kind/name, pod spec)`` of every pod the stack runs, as checkov sees them (a training stack's once
    its image is built)."""
    out = []
    for key, obj in scanned_objects(planned_built(stack).manifests):
        spec = pod_spec(obj)
        if spec is not None:
            out.append((key, spec))
    return out


def containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


# ---------------------------------------------------------------- 3. node identity


@pytest.mark.parametrize("stack", STACKS)
def test_every_node_pool_runs_as_the_stack_node_account_after_its_role(stack: str) -> None:
    data = plan(stack)
    config = planned(stack).config
    account_id = naming.service_account_id(stack, "tpu-nodes")
    (account,) = [a for a in of_type(data, "gcp:serviceaccount/account:Account") if a["inputs"]["accountId"] == account_id]
    email = f"{account_id}@{config.project}.iam.gserviceaccount.com"
    (role,) = [r for r in of_type(data, "gcp:projects/iAMMember:IAMMember") if r["inputs"]["role"] == NODE_ROLE]
    assert role["inputs"]["member"] == f"serviceAccount:{email}"
    assert account["urn"] in role["dependencies"]
    pools = of_type(data, "gcp:container/nodePool:NodePool")
    names = {p["inputs"]["name"] for p in pools}
    assert "system" in names
    assert any(n.startswith("tpu-") for n in names)
    for pool in pools:
        # never the Compute Engine default account (what an unset serviceAccount means)
        assert pool["inputs"]["nodeConfig"]["serviceAccount"] == email, pool["name"]
        # created after (and deleted before) the role its nodes need for logs and metrics
        assert role["urn"] in pool["dependencies"], pool["name"]
        # serviceAccount is create-only and every pool has a fixed name: a replacement deletes first
        assert pool["options"]["deleteBeforeReplace"] is True, pool["name"]
    # Nothing else project-wide for the nodes: under GKE metadata they hold no bucket role either.
    assert not [b for b in of_type(data, "gcp:storage/bucketIAMMember:BucketIAMMember") if b["inputs"]["member"].endswith(email)]


def test_the_converter_pool_runs_as_the_node_account_too() -> None:
    data = plan("llama-405b")
    (pool,) = [p for p in of_type(data, "gcp:container/nodePool:NodePool") if p["inputs"]["name"] == "ckpt-convert"]
    assert pool["inputs"]["nodeConfig"]["serviceAccount"] == "llama-405b-tpu-nodes@your-project-id.iam.gserviceaccount.com"


def test_the_training_image_is_readable_by_the_node_account_on_its_repository_only() -> None:
    data = plan("llama3-8b-train")
    (grant,) = of_type(data, "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    assert grant["inputs"]["role"] == "roles/artifactregistry.reader"
    assert grant["inputs"]["member"] == "serviceAccount:llama3-8b-train-tpu-nodes@your-project-id.iam.gserviceaccount.com"
    assert grant["inputs"]["repository"] == "llama3-8b-train"


def test_node_account_id_is_kept_for_every_stack_and_collides_with_no_workload_account() -> None:
    with pytest.raises(ConfigError, match=r"identity\.serviceAccount: 'tpu-nodes' gives the workload service account"):
        make_config(identity={"mode": "gsa", "serviceAccount": "tpu-nodes"})


# ---------------------------------------------------------------- 4. least privilege in the pods


def test_saxml_gets_object_user_on_its_bucket_and_nothing_weaker_passes() -> None:
    data = plan("saxml-175b")
    (grant,) = of_type(data, "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert grant["inputs"]["role"] == "roles/storage.objectUser"
    values: dict[str, Any] = {
        "gcp:region": "us-west4",
        "tpu": {"generation": "v5e", "topology": "4x8", "slices": 2, "zone": "us-west4-a"},
        "buckets": {"sax": {"purpose": "saxml-admin-state"}},
        "identity": {"bucketRoles": {"sax": "roles/storage.objectViewer"}},
        "workload": {"kind": "saxml", "model": "saxml-175b-32test", "maxTargetLength": 256, "maxPrefillLength": 128},
    }
    with pytest.raises(ConfigError, match=r"bucketRoles\.sax: 'roles/storage\.objectViewer' does not let the admin"):
        make_config("saxml-test", **values)


@pytest.mark.parametrize("stack", STACKS)
def test_no_container_adds_a_capability(stack: str) -> None:
    """Upstream's disaggregated JetStream adds SYS_PTRACE/NET_ADMIN/SYS_TIME with no stated need; no
    workload here needs any capability beyond the runtime's defaults (less NET_RAW)."""
    for key, spec in workloads(stack):
        for container in containers(spec):
            caps = (container.get("securityContext") or {}).get("capabilities") or {}
            assert not caps.get("add"), (key, container["name"], caps)
            assert "NET_RAW" in caps["drop"] or "ALL" in caps["drop"]


@pytest.mark.parametrize("stack", STACKS)
def test_only_pods_that_call_the_kubernetes_api_mount_a_token(stack: str) -> None:
    """Each pod says whether it mounts its KSA token; only those CKV_K8S_38 lists, with their reason, do."""
    for key, spec in workloads(stack):
        assert isinstance(spec.get(API_TOKEN), bool), f"{key} leaves {API_TOKEN} to its ServiceAccount"
        reason = scoped_reason("CKV_K8S_38", key)
        if spec[API_TOKEN]:
            assert reason is not None, key
            assert "calls the Kubernetes API" in reason, key
        else:
            assert reason is None, f"{key} mounts no token, but the CKV_K8S_38 skip still covers it"


def test_the_workload_service_account_mounts_no_token_by_default() -> None:
    assert render_service_account("ksa", "ns", stack="s")[API_TOKEN] is False
    for stack in STACKS:
        ksas = [m for m in planned(stack).manifests if m["kind"] == "ServiceAccount"]
        workload_ksa = planned(stack).config.identity.service_account
        (ksa,) = [m for m in ksas if m["metadata"]["name"] == workload_ksa]
        assert ksa[API_TOKEN] is False


def secret_env(container: Mapping[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env", []) if "secretKeyRef" in (e.get("valueFrom") or {})]


@pytest.mark.parametrize("stack", STACKS)
def test_secrets_reach_containers_by_reference_never_through_argv(stack: str) -> None:
    for key, spec in workloads(stack):
        names = [name for c in containers(spec) for name in secret_env(c)]
        for container in containers(spec):
            argv = " ".join(str(a) for a in [*container.get("command", []), *container.get("args", [])])
            # Kubernetes expands $(VAR) in command and args: that would put the value on the command line.
            assert not [n for n in names if f"$({n})" in argv], (key, argv)
            assert stacks.SECRET_PLACEHOLDER not in argv, key
            assert not re.search(r"--(meta_url|hf_token|api[-_]key|token)\b", argv), (key, argv)
        reason = scoped_reason("CKV_K8S_35", key)
        if names:
            assert reason is not None, f"{key} reads {names} from the environment without a CKV_K8S_35 reason"
            assert all(name in reason for name in names), (key, names, reason)
        else:
            assert reason is None, f"{key} has no Secret-backed variable, but the CKV_K8S_35 skip covers it"


def test_the_converter_wrapper_keeps_the_url_out_of_argv_and_logs(tmp_path: Path) -> None:
    """Run the Job's command against a stand-in for the image's entrypoint that echoes the URL, as
    the real checkpoint_converter.sh does, and records every command line it can see."""
    url = "https://llama3-1.llamameta.net/*?Policy=eyJ[a]*&Signature=s~x&Key-Pair-Id=K"
    seen = tmp_path / "cmdlines"
    entry = tmp_path / "checkpoint_converter.sh"
    entry.write_text(
        "#!/bin/bash\n"
        f'for p in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$p" 2>/dev/null; echo; done > "{seen}"\n'
        'echo "args: $*"\n'
        'echo "Meta url=${META_URL}"\n'
        'echo "META_URL: $META_URL" >&2\n'
        'echo "GET https://llama3-1.llamameta.net/405b/consolidated.00.pth?Policy=eyJ2&Signature=abc~d&Key-Pair-Id=K2 403"\n'
        "exit 3\n"
    )
    entry.chmod(0o755)
    job = jetstream_checkpoint.render_conversion_job(
        planned("llama-405b").stack_plan, namespace="ns", service_account="ksa", checkpoint_bucket="b", node_pool="p"
    )
    (container,) = job["spec"]["template"]["spec"]["containers"]
    command = [*container["command"][:-1], str(entry)]
    proc = subprocess.run(
        [*command, *container["args"]], env={**os.environ, "META_URL": url}, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 3  # the converter's exit status, through the pipe
    assert "args: --bucket_name=b --inference_server=jetstream-maxtext" in proc.stdout
    assert url not in proc.stdout + proc.stderr
    assert "Meta url=[meta-url redacted]" in proc.stdout
    assert "META_URL: [meta-url redacted]" in proc.stdout  # stderr is merged and masked too
    # A per-file URL derived from it keeps its path but loses every signed part.
    assert (
        "consolidated.00.pth?[signed-url part redacted]&[signed-url part redacted]&[signed-url part redacted] 403"
        in proc.stdout
    )
    assert url not in seen.read_text()


# ---------------------------------------------------------------- the skips' reasons


def test_every_skip_reason_is_specific() -> None:
    assert not set(SKIPS) & set(SCOPED_SKIPS)
    # no capability is added anywhere, so nothing may skip the check for added capabilities
    assert "CKV_K8S_25" not in {*SKIPS, *SCOPED_SKIPS}
    for check, resources in SCOPED_SKIPS.items():
        assert check.startswith("CKV")
        assert resources
        for pattern, reason in resources.items():
            assert re.fullmatch(r"[A-Za-z]+/[-a-z0-9.*]+", pattern), pattern
            assert len(reason) > 30, (check, pattern)


def test_every_scoped_skip_names_resources_some_stack_renders() -> None:
    """A pattern that matches nothing is a reason nobody checks any more."""
    keys = {key for stack in STACKS for key, _ in scanned_objects(planned_built(stack).manifests)}
    for check, resources in SCOPED_SKIPS.items():
        for pattern in resources:
            assert fnmatch.filter(sorted(keys), pattern), f"{check}: {pattern} matches no rendered object"


# ---------------------------------------------------------------- day 2: existing stacks move onto the node account


def before_node_identity(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` as the release before the node account recorded it: no NodeServiceAccount, and no
    pool naming a service account (GKE ran them as the Compute Engine default account)."""
    old = copy.deepcopy(plan)
    gone = {r["urn"] for r in old["resources"] if "NodeServiceAccount" in r["urn"]}
    old["resources"] = [r for r in old["resources"] if r["urn"] not in gone]
    for res in old["resources"]:
        res["dependencies"] = [d for d in res["dependencies"] if d not in gone]
        if res["type"] == "gcp:container/nodePool:NodePool":
            res["inputs"]["nodeConfig"].pop("serviceAccount")
    return old


@pytest.mark.parametrize("stack", ["llama-405b", "llama2-70b-disagg", "saxml-175b"])
def test_moving_onto_the_node_account_replaces_every_pool_once_delete_first(stack: str) -> None:
    """serviceAccount is create-only (GKE cannot change a pool's account), so every existing pool is
    replaced once; each is deleted before its replacement (fixed names, scarce TPU capacity), after
    the account and its role exist, and the TPU peak stays what the stack already runs."""
    head = plan(stack)
    change = compare_stack(stack, before_node_identity(head), head)
    prediction = change.prediction
    replaced = [s for s in prediction.of("replace") if s.type == steps.NODE_POOL]
    assert {s.name for s in replaced} == {r["name"] for r in of_type(head, steps.NODE_POOL)}
    for step in replaced:
        assert step.delete_first, step.name
        assert step.replacing == ("nodeConfig.serviceAccount",), step.name
    order = [s.name for s in prediction.steps]
    created = [s.name for s in prediction.of("create")]
    assert {f"{stack}-nodes-gsa", f"{stack}-nodes-role"} <= set(created)
    assert order.index(f"{stack}-nodes-role") < min(order.index(s.name) for s in replaced)
    assert prediction.rollout is not None
    rollout = prediction.rollout
    assert rollout.chips_before == rollout.chips_peak == rollout.chips_after
    assert not change.refused


def test_moving_prod_onto_the_node_account_needs_the_allowance_first() -> None:
    head = plan("llama-405b-prod")
    change = compare_stack("llama-405b-prod", before_node_identity(head), head)
    assert change.refused
    (blocker,) = change.prediction.blockers
    assert blocker.step.name == "tpu-slice-0-pool"
    assert "protected" in blocker.why
    assert "allowReplacement: true` with the current shape first" in blocker.fix
