"""Policy rules: each with a passing and a failing case, and every stack's recorded resources pass."""

from __future__ import annotations

import pytest

from components import engine
from components.policy.rules import RULES, Resource, image_problem, violations
from tests.conftest import STACKS, planned

RULE_NAMES = {rule.name for rule in RULES}

POOL = "gcp:container/nodePool:NodePool"
TPU_POOL_PROPS = {"nodeConfig": {"machineType": "ct6e-standard-4t", "resourceLabels": {"environment": "prod"}}}

# rule -> (a resource that passes, a resource that fails)
CASES: dict[str, tuple[Resource, Resource]] = {
    "no-unpinned-images": (
        Resource(
            "kubernetes:apps/v1:Deployment",
            "d",
            {"spec": {"template": {"spec": {"containers": [{"image": "vllm/vllm-tpu:v0.11.1"}]}}}},
        ),
        Resource(
            "kubernetes:apps/v1:Deployment",
            "d",
            {"spec": {"template": {"spec": {"containers": [{"image": "vllm/vllm-tpu:latest"}]}}}},
        ),
    ),
    "prod-tpu-pools-and-cluster-protected": (
        Resource(POOL, "p", TPU_POOL_PROPS, protect=True),
        Resource(POOL, "p", TPU_POOL_PROPS, protect=False),
    ),
    "bucket-uniform-access-and-pap": (
        Resource("gcp:storage/bucket:Bucket", "b", {"uniformBucketLevelAccess": True, "publicAccessPrevention": "enforced"}),
        Resource("gcp:storage/bucket:Bucket", "b", {"uniformBucketLevelAccess": True, "publicAccessPrevention": "inherited"}),
    ),
    "no-project-wide-storage-roles": (
        Resource("gcp:projects/iAMMember:IAMMember", "m", {"role": "roles/monitoring.viewer", "member": "x"}),
        Resource("gcp:projects/iAMMember:IAMMember", "m", {"role": "roles/storage.admin", "member": "x"}),
    ),
    "no-service-account-keys": (
        Resource("gcp:serviceaccount/account:Account", "sa", {"accountId": "sa"}),
        Resource("gcp:serviceaccount/key:Key", "k", {"serviceAccountId": "sa"}),
    ),
    "secrets-stay-secret": (
        Resource("kubernetes:core/v1:Secret", "s", {"stringData": {"token": "x"}}, secret_outputs=("data", "stringData")),
        Resource("kubernetes:core/v1:Secret", "s", {"stringData": {"token": "x"}}),
    ),
}


def test_policy_every_rule_has_cases() -> None:
    assert set(CASES) == RULE_NAMES


@pytest.mark.parametrize("rule", sorted(CASES))
def test_policy_rule_passes_and_fails(rule: str) -> None:
    good, bad = CASES[rule]
    assert [name for name, _ in violations(good)] == []
    assert [name for name, _ in violations(bad)] == [rule]


def test_policy_prod_allowance_label_lifts_protection_rule() -> None:
    allowed = {
        "nodeConfig": {
            **TPU_POOL_PROPS["nodeConfig"],
            "resourceLabels": {"environment": "prod", "gke-tpu-llm-allow-replace": "true"},
        }
    }
    assert violations(Resource(POOL, "p", allowed)) == []
    dev = {"nodeConfig": {"machineType": "ct6e-standard-4t", "resourceLabels": {"environment": "dev"}}}
    assert violations(Resource(POOL, "p", dev)) == []


def test_policy_prod_cluster_needs_deletion_protection() -> None:
    cluster = Resource(
        "gcp:container/cluster:Cluster",
        "c",
        {"resourceLabels": {"environment": "prod"}, "deletionProtection": False},
        protect=True,
    )
    assert [m for _, m in violations(cluster)] == ["prod clusters need GKE deletion protection"]


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("us-docker.pkg.dev/cloud-tpu-images/inference/jetstream-http:v0.2.3", True),
        ("busybox", False),
        ("registry:5000/team/app", False),
        ("registry:5000/team/app:1.2", True),
        ("gcr.io/x/y@sha256:" + "a" * 64, True),
        ("gcr.io/x/y:latest", False),
    ],
)
def test_policy_image_pinning(image: str, ok: bool) -> None:
    assert (image_problem(image) is None) is ok


@pytest.mark.parametrize("stack", STACKS)
def test_policy_every_stack_passes(stack: str) -> None:
    found = [
        (res.name, rule, message)
        for res in planned(stack).resources
        for rule, message in violations(
            Resource(
                res.type,
                res.name,
                res.inputs,
                protect=res.options["protect"],
                secret_outputs=tuple(res.options["additionalSecretOutputs"]),
            )
        )
    ]
    assert found == []


def test_policy_allowance_label_is_the_one_the_program_sets() -> None:
    # rules.py stays import-free for the policy pack's own virtualenv, so the label is compared here.
    from components import config
    from components.policy import rules

    assert rules.ALLOW_REPLACE_LABEL == config.ALLOW_REPLACE_LABEL


def test_policy_pack_wraps_every_rule_and_reports_through_pulumi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pack's __main__ (run by Pulumi in its own virtualenv) adapts each rule; checked here with a
    stand-in for pulumi_policy that records what the pack registers."""
    import runpy
    import sys
    import types
    from dataclasses import dataclass
    from typing import Any

    registered: dict[str, Any] = {}
    fake = types.ModuleType("pulumi_policy")

    class EnforcementLevel:
        MANDATORY = "mandatory"
        ADVISORY = "advisory"

    @dataclass
    class ResourceValidationPolicy:
        name: str
        description: str
        validate: Any
        enforcement_level: str

    def policy_pack(name: str, enforcement_level: str, policies: list[ResourceValidationPolicy]) -> None:
        registered.update(name=name, policies=policies)

    fake.EnforcementLevel = EnforcementLevel  # type: ignore[attr-defined]
    fake.PolicyPack = policy_pack  # type: ignore[attr-defined]
    fake.ResourceValidationPolicy = ResourceValidationPolicy  # type: ignore[attr-defined]
    fake.ResourceValidationArgs = object  # type: ignore[attr-defined]
    fake.ReportViolation = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pulumi_policy", fake)
    runpy.run_path(str(engine.ROOT / "components" / "policy" / "__main__.py"), run_name="__main__")

    assert registered["name"] == "gke-tpu-llm"
    by_name = {p.name: p for p in registered["policies"]}
    assert set(by_name) == RULE_NAMES
    good, bad = CASES["bucket-uniform-access-and-pap"]
    reports: list[tuple[str, str]] = []
    for res in (good, bad):
        args = types.SimpleNamespace(
            resource_type=res.type,
            name=res.name,
            props=res.props,
            urn=f"urn:{res.name}",
            opts=types.SimpleNamespace(protect=False, additional_secret_outputs=[]),
        )
        by_name["bucket-uniform-access-and-pap"].validate(args, lambda message, urn: reports.append((message, urn)))
    assert reports == [("publicAccessPrevention must be 'enforced'", "urn:b")]
