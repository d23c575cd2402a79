"""Policy rules: each with a passing and a failing case, each variant of a violation with its own
pair, the rules on the policy SDK's read-only proxies, and every stack's recorded resources pass."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from components.catalog.pinning import image_problem
from components.config import stack_files as stacks
from components.policy.checks import RULES, STACK_RULES, stack_violations, violations
from components.policy.resource_props import Resource, stack_environment
from tests.conftest import STACKS, planned, planned_built

RULE_NAMES = {rule.name for rule in RULES}
STACK_RULE_NAMES = {rule.name for rule in STACK_RULES}

POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
SERVICE = "kubernetes:core/v1:Service"
NODE_SA = "llama-405b-tpu-nodes@test-project-123.iam.gserviceaccount.com"
DEFAULT_SA = "123456789012-compute@developer.gserviceaccount.com"
PROD_LABELS = {"app": "gke-tpu-llm", "stack": "llama-405b-prod", "environment": "prod"}
TPU_POOL_PROPS = {"nodeConfig": {"machineType": "ct6e-standard-4t", "resourceLabels": PROD_LABELS, "serviceAccount": NODE_SA}}


def _pool(**node_config: Any) -> Resource:
    return Resource(POOL, "p", {"nodeConfig": {"machineType": "e2-standard-4", **node_config}})


def _iam(type_: str, **props: Any) -> Resource:
    return Resource(type_, "iam", props)


_SA = "serviceAccount:sa@p.iam.gserviceaccount.com"


def _policy_data(role: str) -> str:
    return json.dumps({"bindings": [{"role": role, "members": ["serviceAccount:sa@p.iam.gserviceaccount.com"]}]})


def _service(spec: Mapping[str, Any], annotations: Mapping[str, str] | None = None, type_: str = SERVICE) -> Resource:
    return Resource(
        type_,
        "svc",
        {"metadata": {"name": "svc", "annotations": dict(annotations or {})}, "spec": {"ports": [{"port": 8000}], **spec}},
    )


def _deployment(container: Mapping[str, Any] | None = None, **pod: Any) -> Resource:
    base = {"name": "server", "image": "vllm/vllm-tpu:v0.27.0", "securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}
    spec = {"containers": [{**base, **(container or {})}], **pod}
    return Resource("kubernetes:apps/v1:Deployment", "d", {"spec": {"template": {"metadata": {}, "spec": spec}}})


def _firewall(**props: Any) -> Resource:
    return Resource(
        "gcp:compute/firewall:Firewall", "fw", {"network": "default", "allows": [{"protocol": "tcp", "ports": ["8000"]}], **props}
    )


def _ingress(annotations: Mapping[str, str] | None = None, **spec: Any) -> Resource:
    return Resource(
        "kubernetes:networking.k8s.io/v1:Ingress",
        "ing",
        {
            "metadata": {"name": "ing", "annotations": dict(annotations or {})},
            "spec": {"defaultBackend": {"service": {"name": "svc"}}, **spec},
        },
    )


SAFE_BUCKET = {"uniformBucketLevelAccess": True, "publicAccessPrevention": "enforced"}


NAP_DEFAULTS = {"serviceAccount": NODE_SA}
LB = {"type": "LoadBalancer"}
RANGES = {"type": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/24"]}
AUTH = {"gke-tpu-llm/auth": "api-key"}
INTERNAL = {"networking.gke.io/load-balancer-type": "Internal"}

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
    "project-iam-allow-listed": (
        Resource("gcp:projects/iAMMember:IAMMember", "m", {"project": "p", "role": "roles/monitoring.viewer", "member": "x"}),
        Resource("gcp:projects/iAMMember:IAMMember", "m", {"project": "p", "role": "roles/storage.admin", "member": "x"}),
    ),
    "prod-resources-labelled": (
        Resource("gcp:storage/bucket:Bucket", "b", {**SAFE_BUCKET, "labels": PROD_LABELS}, environment="prod"),
        Resource("gcp:storage/bucket:Bucket", "b", {**SAFE_BUCKET, "labels": {"app": "gke-tpu-llm"}}, environment="prod"),
    ),
    "no-public-ingress-or-gateway": (_ingress({"kubernetes.io/ingress.class": "gce-internal"}), _ingress()),
    "firewall-ingress-restricted": (_firewall(sourceRanges=["203.0.113.0/24"]), _firewall(sourceRanges=["0.0.0.0/0"])),
    "pod-security-baseline": (_deployment(), _deployment({"securityContext": {"privileged": True}})),
    "no-service-account-keys": (
        Resource("gcp:serviceaccount/account:Account", "sa", {"accountId": "sa"}),
        Resource("gcp:serviceaccount/key:Key", "k", {"serviceAccountId": "sa"}),
    ),
    "secrets-stay-secret": (
        Resource("kubernetes:core/v1:Secret", "s", {"stringData": {"token": "x"}}, secret_outputs=("data", "stringData")),
        Resource("kubernetes:core/v1:Secret", "s", {"stringData": {"token": "x"}}),
    ),
    "no-default-compute-service-account": (_pool(serviceAccount=NODE_SA), _pool()),
    "public-load-balancers-restricted-and-authenticated": (_service(RANGES, AUTH), _service(LB)),
}

# Variants of each violation: (rule, a resource that passes, one that fails), each pair as close as
# possible, so the failing one fails for exactly the variant named.
_PROJECT, _FOLDER, _ORG = "gcp:projects/iAM{0}:IAM{0}", "gcp:folder/iAM{0}:IAM{0}", "gcp:organizations/iAM{0}:IAM{0}"
_SCOPES = (("project", _PROJECT, "project"), ("folder", _FOLDER, "folder"), ("organization", _ORG, "orgId"))
IAM_RULE = "project-iam-allow-listed"
SA_RULE = "no-default-compute-service-account"
LB_RULE = "public-load-balancers-restricted-and-authenticated"
VARIANTS = [
    *[
        pytest.param(
            IAM_RULE,
            _iam(
                _PROJECT.format("Member"),
                project="p",
                role="roles/container.defaultNodeServiceAccount",
                member="serviceAccount:x",
            ),
            _iam(_PROJECT.format("Member"), project="p", role=role, member="serviceAccount:x"),
            id=f"project-member-{role}",
        )
        for role in ("roles/storage.objectAdmin", "roles/storage.legacyBucketOwner", "roles/owner", "roles/editor")
    ],
    *[
        pytest.param(
            IAM_RULE,
            _iam(_PROJECT.format("Member"), project="1", role="roles/monitoring.viewer", member="user:a@example.com"),
            _iam(template.format("Member"), **{key: "1", "role": role, "member": "user:a@example.com"}),
            id=f"{scope}-member-{role}",
        )
        for scope, template, key in _SCOPES[1:]
        for role in ("roles/storage.admin", "roles/viewer")  # nothing is granted above a project
    ],
    *[
        pytest.param(
            IAM_RULE,
            _iam(_PROJECT.format("Member"), project="1", role="roles/monitoring.viewer", member="group:g@example.com"),
            _iam(template.format("Binding"), **{key: "1", "role": "roles/monitoring.viewer", "members": ["group:g@example.com"]}),
            id=f"{scope}-binding-authoritative",
        )
        for scope, template, key in _SCOPES
    ],
    *[
        pytest.param(
            IAM_RULE,
            _iam(_PROJECT.format("Member"), project="1", role="roles/monitoring.viewer", member=_SA),
            _iam(template.format("Policy"), **{key: "1", "policyData": _policy_data(role)}),
            id=f"{scope}-policy-{role}",
        )
        for scope, template, key in _SCOPES
        for role in ("roles/storage.admin", "roles/editor", "roles/monitoring.viewer")
    ],
    pytest.param(
        IAM_RULE,
        _iam(_PROJECT.format("Member"), project="p", role="roles/container.defaultNodeServiceAccount", member=_SA),
        _iam(_PROJECT.format("Policy"), project="p", policyData="{not json"),
        id="project-policy-unreadable",
    ),
    *[
        pytest.param(
            IAM_RULE,
            _iam(_PROJECT.format("Member"), project="p", role="roles/container.defaultNodeServiceAccount", member=_SA),
            _iam(_PROJECT.format("Member"), project="p", role=role, member=_SA),
            id=f"project-role-not-listed-{role}",
        )
        for role in ("roles/iam.serviceAccountTokenCreator", "projects/p/roles/nodeHelper", "organizations/1/roles/helper")
    ],
    pytest.param(  # the same role on one bucket is the intended grant
        IAM_RULE,
        _iam("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="b", role="roles/storage.objectAdmin", member="x"),
        _iam(_PROJECT.format("Member"), project="p", role="roles/storage.objectAdmin", member="x"),
        id="bucket-level-is-fine",
    ),
    pytest.param(  # removing a grant is not granting it
        IAM_RULE,
        _iam("gcp:projects/iamMemberRemove:IamMemberRemove", project="p", role="roles/storage.admin", member="x"),
        _iam(_PROJECT.format("Member"), project="p", role="roles/storage.admin", member="x"),
        id="member-remove-is-fine",
    ),
    pytest.param(
        "no-service-account-keys",
        Resource("gcp:serviceaccount/account:Account", "sa", {"accountId": "sa"}),
        Resource("gcp:storage/hmacKey:HmacKey", "k", {"serviceAccountEmail": "sa@p.iam.gserviceaccount.com"}),
        id="hmac-key",
    ),
    pytest.param(SA_RULE, _pool(serviceAccount=NODE_SA), _pool(serviceAccount="default"), id="pool-default"),
    pytest.param(SA_RULE, _pool(serviceAccount=NODE_SA), _pool(serviceAccount=DEFAULT_SA), id="pool-compute-sa"),
    pytest.param(SA_RULE, _pool(serviceAccount=NODE_SA), Resource(POOL, "p", {"nodeCount": 1}), id="pool-without-node-config"),
    pytest.param(  # the default pool is kept: it runs on the cluster's nodeConfig
        SA_RULE,
        Resource(CLUSTER, "c", {"initialNodeCount": 1, "nodeConfig": {"serviceAccount": NODE_SA}}),
        Resource(CLUSTER, "c", {"initialNodeCount": 1}),
        id="cluster-default-pool",
    ),
    pytest.param(  # removed right after creation: no workload lands on it (as tfsec's rule)
        SA_RULE,
        Resource(CLUSTER, "c", {"initialNodeCount": 1, "removeDefaultNodePool": True}),
        Resource(CLUSTER, "c", {"removeDefaultNodePool": False, "nodeConfig": {"serviceAccount": DEFAULT_SA}}),
        id="cluster-default-pool-removed",
    ),
    pytest.param(
        SA_RULE,
        Resource(CLUSTER, "c", {"nodePools": [{"name": "a", "nodeConfig": {"serviceAccount": NODE_SA}}]}),
        Resource(CLUSTER, "c", {"nodePools": [{"name": "a", "nodeConfig": {"serviceAccount": NODE_SA}}, {"name": "b"}]}),
        id="cluster-inline-pools",
    ),
    pytest.param(
        SA_RULE,
        Resource(CLUSTER, "c", {"enableAutopilot": True, "clusterAutoscaling": {"autoProvisioningDefaults": NAP_DEFAULTS}}),
        Resource(CLUSTER, "c", {"enableAutopilot": True}),
        id="cluster-autopilot",
    ),
    pytest.param(
        SA_RULE,
        Resource(
            CLUSTER,
            "c",
            {"removeDefaultNodePool": True, "clusterAutoscaling": {"enabled": True, "autoProvisioningDefaults": NAP_DEFAULTS}},
        ),
        Resource(CLUSTER, "c", {"removeDefaultNodePool": True, "clusterAutoscaling": {"enabled": True}}),
        id="cluster-node-auto-provisioning",
    ),
    pytest.param(
        LB_RULE,
        _service(RANGES, AUTH),
        _service({**RANGES, "loadBalancerSourceRanges": ["203.0.113.0/24", "0.0.0.0/0"]}, AUTH),
        id="lb-ranges-everyone",
    ),
    pytest.param(
        LB_RULE,
        _service(RANGES, AUTH),
        _service({**RANGES, "loadBalancerSourceRanges": ["::/0"]}, AUTH),
        id="lb-ranges-everyone-ipv6",
    ),
    pytest.param(
        LB_RULE,
        _service(RANGES, AUTH),
        _service({**RANGES, "loadBalancerSourceRanges": ["203.0.113.0/33", "198.51.100.7"]}, AUTH),
        id="lb-ranges-not-cidr",
    ),
    pytest.param(LB_RULE, _service(RANGES, AUTH), _service(LB, AUTH), id="lb-auth-without-ranges"),
    pytest.param(LB_RULE, _service(RANGES, AUTH), _service(RANGES), id="lb-ranges-without-auth"),
    pytest.param(LB_RULE, _service(RANGES, AUTH), _service(RANGES, {"gke-tpu-llm/auth": "none"}), id="lb-auth-none"),
    pytest.param(LB_RULE, _service(LB, INTERNAL), _service(LB), id="lb-internal"),  # the VPC is the boundary
    pytest.param(
        LB_RULE,
        _service({"type": "ClusterIP"}),
        _service(LB, {"networking.gke.io/load-balancer-type": "External"}),
        id="lb-cluster-ip-vs-external",
    ),
]


GATEWAY_TYPE = "kubernetes:gateway.networking.k8s.io/v1:Gateway"


def gateway(name: str = "gw", gateway_class: str = "gke-l7-rilb", namespace: str = "llm") -> Resource:
    return Resource(
        GATEWAY_TYPE,
        name,
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"gatewayClassName": gateway_class, "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        },
    )


def route(*parents: Mapping[str, Any], kind: str = "HTTPRoute", namespace: str = "llm") -> Resource:
    return Resource(
        f"kubernetes:gateway.networking.k8s.io/v1:{kind}",
        "route",
        {
            "metadata": {"name": "route", "namespace": namespace},
            "spec": {"parentRefs": [dict(p) for p in parents], "rules": [{"backendRefs": [{"name": "svc", "port": 8000}]}]},
        },
    )


PUBLIC_CLASS = "gke-l7-regional-external-managed"
HTTPS = [{"name": "https", "port": 443, "protocol": "HTTPS", "tls": {"mode": "Terminate"}}]
IAP = {"enabled": True, "clientID": "123.apps.googleusercontent.com", "oauth2ClientSecret": {"name": "vllm-iap-client"}}


def public_gateway(listeners: list[dict[str, Any]] | None = None, namespace: str = "llm") -> Resource:
    """A GKE regional external Gateway (the public front door's class) serving HTTPS."""
    return Resource(
        GATEWAY_TYPE,
        "gw",
        {
            "metadata": {"name": "gw", "namespace": namespace},
            "spec": {"gatewayClassName": PUBLIC_CLASS, "listeners": listeners if listeners is not None else HTTPS},
        },
    )


def pool_route(*pools: str, namespace: str = "llm", parent: Mapping[str, Any] | None = None, name: str = "route") -> Resource:
    """An HTTPRoute from Gateway gw to InferencePools."""
    refs = [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": p} for p in pools]
    return Resource(
        "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
        name,
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"parentRefs": [dict(parent or {"name": "gw"})], "rules": [{"backendRefs": refs}]},
        },
    )


def backend_policy(
    target: str = "vllm",
    iap: Mapping[str, Any] | None = IAP,
    namespace: str = "llm",
    kind: str = "InferencePool",
    name: str = "p",
) -> Resource:
    """A GCPBackendPolicy on an InferencePool (``iap`` None: a timeout-only policy)."""
    group = "inference.networking.k8s.io" if kind == "InferencePool" else ""
    default: dict[str, Any] = {"timeoutSec": 600, **({"iap": dict(iap)} if iap is not None else {})}
    return Resource(
        "kubernetes:networking.gke.io/v1:GCPBackendPolicy",
        name,
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"targetRef": {"group": group, "kind": kind, "name": target}, "default": default},
        },
    )


# stack rule -> (a stack that passes, one that fails)
def _prod_service() -> Resource:
    props = {"metadata": {"name": "vllm", "namespace": "llm"}, "spec": {"type": "ClusterIP", "ports": [{"port": 8000}]}}
    return Resource("kubernetes:core/v1:Service", "svc", props, environment="prod")


def _alert_policy(key: str) -> Resource:
    labels = {"gke-tpu-llm-alert": key, "environment": "prod"}
    return Resource("gcp:monitoring/alertPolicy:AlertPolicy", f"alert-{key}", {"userLabels": labels}, environment="prod")


STACK_CASES: dict[str, tuple[list[Resource], list[Resource]]] = {
    "routes-attach-to-stack-gateways": ([gateway(), route({"name": "gw"})], [gateway(), route({"name": "shared-public"})]),
    "public-gateways-behind-iap": (
        [public_gateway(), pool_route("vllm"), backend_policy()],
        [public_gateway(), pool_route("vllm"), backend_policy(iap=None)],
    ),
    # A prod serving stack keeps its availability alert (components/render/dashboards.py labels it).
    "prod-serving-availability-alert": (
        [_prod_service(), _alert_policy("availability")],
        [_prod_service(), _alert_policy("hbm")],
    ),
}


def test_policy_public_gateway_messages_name_the_backend_and_the_listener() -> None:
    ((rule, res, message),) = stack_violations([public_gateway(), pool_route("vllm")])
    assert (rule, res.name) == ("public-gateways-behind-iap", "route")
    assert message.startswith(
        "spec.rules[0].backendRefs[0] sends public Gateway llm/gw's traffic to InferencePool llm/vllm without "
        "Identity-Aware Proxy: no GCPBackendPolicy targets it"
    )
    http = public_gateway([{"name": "http", "port": 80, "protocol": "HTTP"}, *HTTPS])
    assert [m for _, m in violations(http)] == [
        "spec.listeners[0] of a public Gateway is HTTP: serve HTTPS only (protocol HTTPS, TLS terminated at the load "
        "balancer with a certificate), never plain HTTP"
    ]
    # An internal Gateway needs neither IAP nor HTTPS.
    assert stack_violations([gateway(), pool_route("vllm")]) == []


def test_policy_every_rule_has_cases() -> None:
    assert set(CASES) == RULE_NAMES
    assert set(STACK_CASES) == STACK_RULE_NAMES


@pytest.mark.parametrize("rule", sorted(STACK_CASES))
def test_policy_stack_rule_passes_and_fails(rule: str) -> None:
    good, bad = STACK_CASES[rule]
    for resources in (good, [_through_sdk(res) for res in good]):
        assert stack_violations(resources) == []
        assert [v for res in resources for v in violations(res)] == []
    for resources in (bad, [_through_sdk(res) for res in bad]):
        found = stack_violations(resources)
        assert found
        assert {name for name, _, _ in found} == {rule}


@pytest.mark.parametrize(
    ("parents", "ok"),
    [
        ([{"name": "gw"}], True),
        ([{"name": "gw", "namespace": "llm", "kind": "Gateway", "group": "gateway.networking.k8s.io"}], True),
        ([{"name": "gw", "namespace": "other"}], False),  # same name, another namespace: not this stack's
        ([{"name": "svc", "kind": "Service", "group": ""}], True),  # GAMMA: a mesh route stays in the cluster
        ([{"name": "gw"}, {"name": "infra-gateway", "namespace": "gateways"}], False),
    ],
)
def test_policy_routes_attach_only_to_the_stack_gateways(parents: list[dict[str, str]], ok: bool) -> None:
    for kind in ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"):
        found = stack_violations([gateway(), route(*parents, kind=kind)])
        assert (found == []) is ok, (kind, found)
    # A Gateway outside the stack is a Patch at most: patching one does not declare it.
    patched = Resource(GATEWAY_TYPE + "Patch", "gw", {"metadata": {"name": "gw", "namespace": "llm"}})
    assert stack_violations([patched, route({"name": "gw"})]) != []


def test_policy_route_message_names_the_gateway() -> None:
    ((rule, res, message),) = stack_violations([route({"name": "shared", "namespace": "gateways"})])
    assert (rule, res.name) == ("routes-attach-to-stack-gateways", "route")
    assert message.startswith(
        "spec.parentRefs[0] attaches HTTPRoute to Gateway 'gateways/shared', which this stack does not declare"
    )


@pytest.mark.parametrize("rule", sorted(CASES))
def test_policy_rule_passes_and_fails(rule: str) -> None:
    good, bad = CASES[rule]
    assert [name for name, _ in violations(good)] == []
    found = violations(bad)
    assert found
    assert {name for name, _ in found} == {rule}, found


@pytest.mark.parametrize(("rule", "good", "bad"), VARIANTS)
def test_policy_variant_passes_and_fails(rule: str, good: Resource, bad: Resource) -> None:
    assert violations(good) == []
    found = violations(bad)
    assert found
    assert {name for name, _ in found} == {rule}, found


def test_policy_iam_messages_name_the_scope_role_and_members() -> None:
    binding = _iam(_FOLDER.format("Binding"), folder="folders/1", role="roles/storage.objectAdmin", members=["group:g@x.com"])
    assert [m for _, m in violations(binding)] == [
        "folder-level IAMBinding replaces the role's binding, removing grants other stacks and owners hold; use IAMMember",
        "folder-wide roles/storage.objectAdmin (to group:g@x.com) is not allowed; grant object roles on the bucket instead",
    ]
    policy = _iam(
        _ORG.format("Policy"),
        orgId="1",
        policyData=json.dumps(
            {
                "bindings": [
                    {"role": "roles/owner", "members": ["user:a@x.com"]},
                    {"role": "roles/viewer", "members": ["user:b@x.com"]},
                ]
            }
        ),
    )
    assert [m for _, m in violations(policy)] == [
        "organization-level IAMPolicy replaces every binding of the policy, removing grants other stacks and owners hold; "
        "use IAMMember",
        "organization-wide roles/owner (to user:a@x.com) includes storage admin on every bucket; grant the narrow roles needed",
        "organization-wide roles/viewer (to user:b@x.com): the project grants nothing on a organization; grant it on the "
        "resource it is about",
    ]
    custom = _iam(_PROJECT.format("Member"), project="p", role="projects/p/roles/x", member="user:a@x.com")
    (message,) = [m for _, m in violations(custom)]
    assert message.startswith("project-wide custom role projects/p/roles/x (to user:a@x.com) is not on the allow-list")
    assert "roles/container.defaultNodeServiceAccount, roles/monitoring.viewer" in message


def test_policy_load_balancer_reports_every_gap_at_once() -> None:
    messages = [m for _, m in violations(_service({**LB, "loadBalancerSourceRanges": ["0.0.0.0/1", "128.0.0.0/1", "10.0.0.1"]}))]
    assert messages[:2] == [
        "spec.loadBalancerSourceRanges: '10.0.0.1' is not a CIDR",
        # 2**32 less the non-public blocks (0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.168/16, 224/4, 240/4)
        "spec.loadBalancerSourceRanges admit 3,702,390,784 public IPv4 addresses in total, more than a /16 (65,536); "
        "list the client CIDRs",
    ]
    assert messages[2].startswith("public LoadBalancer without authentication")
    assert len(messages) == 3


def test_policy_prod_allowance_label_lifts_protection_rule() -> None:
    allowed = {
        "nodeConfig": {
            **TPU_POOL_PROPS["nodeConfig"],
            "resourceLabels": {**PROD_LABELS, "gke-tpu-llm-allow-replace": "true"},
        }
    }
    assert violations(Resource(POOL, "p", allowed)) == []
    dev = {"nodeConfig": {"machineType": "ct6e-standard-4t", "resourceLabels": {"environment": "dev"}, "serviceAccount": NODE_SA}}
    assert violations(Resource(POOL, "p", dev)) == []


def test_policy_prod_cluster_needs_deletion_protection() -> None:
    cluster = Resource(
        "gcp:container/cluster:Cluster",
        "c",
        {"resourceLabels": PROD_LABELS, "deletionProtection": False, "removeDefaultNodePool": True},
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
        ("gcr.io/x/y:rolling@sha256:" + "a" * 64, True),  # the digest pins whatever the tag says
        ("gcr.io/x/y:latest", False),
        # A version tag has a major.minor version number and no word naming a moving target.
        ("us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.5.3", True),
        ("gcr.io/google.com/cloudsdktool/google-cloud-cli:525.0.0-slim", True),
        ("gcr.io/gke-release/custom-metrics-stackdriver-adapter:v0.16.10-gke.0", True),
        ("us-east5-docker.pkg.dev/p/r/ray-maxtext:ray2.49.1-maxtext0.1.0-fcc470b70831", True),
        ("gcr.io/x/y:rolling", False),
        ("gcr.io/x/y:latest-tpu", False),
        ("gcr.io/x/y:stable-v2", False),
        ("gcr.io/x/y:v2", False),  # major-only: moves to every minor release
        ("gcr.io/x/y:1.2-nightly", False),
        ("gcr.io/x/y:fcc470b70831", False),  # a commit tag pins nothing a registry enforces: add the digest
        ("x:rolling", False),  # a one-letter repository is still split from its tag
    ],
)
def test_policy_image_pinning(image: str, ok: bool) -> None:
    assert (image_problem(image) is None) is ok


def test_policy_image_problem_names_the_tag_and_the_definition() -> None:
    assert image_problem("gcr.io/x/y:latest-tpu") == "uses the floating tag 'latest-tpu'"
    assert image_problem("gcr.io/x/y:v2") == (
        "uses the tag 'v2', which has no major.minor version number (a version tag has one, like v1.2 or 0.5.3)"
    )


def test_policy_every_image_default_is_a_version_tag() -> None:
    """The workload specs' defaults (PinnedImage fields) pass the definition the pack enforces."""
    from pydantic import BaseModel

    from components.workloads.jetstream import spec as jetstream
    from components.workloads.saxml import spec as saxml
    from components.workloads.vllm import spec as vllm

    def images(model: type[BaseModel]) -> list[str]:
        found = []
        for field in model.model_fields.values():
            if isinstance(field.default, str) and "/" in field.default and ":" in field.default:
                found.append(field.default)
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                found += images(field.annotation)
        return found

    defaults = [
        image
        for module in (jetstream, saxml, vllm)
        for model in vars(module).values()
        if isinstance(model, type) and issubclass(model, BaseModel) and model.__module__ == module.__name__
        for image in images(model)
    ]
    assert len(defaults) >= 10
    assert {image: image_problem(image) for image in defaults if image_problem(image)} == {}


def test_policy_allowance_label_is_the_one_the_program_sets() -> None:
    # checks.py stays import-free for the policy pack's own virtualenv, so the label is compared here.
    from components.config import environments
    from components.policy import checks as rules

    assert rules.ALLOW_REPLACE_LABEL == environments.ALLOW_REPLACE_LABEL


def test_policy_prod_markers_are_the_ones_the_program_sets() -> None:
    from components.config.stack import StackConfig
    from components.policy import checks as rules
    from components.policy import resource_props
    from tests.conftest import make_config

    assert resource_props.ENVIRONMENT_CONFIG_KEY == "gke-tpu-llm:" + "environment"
    assert resource_props.DEFAULT_ENVIRONMENT == StackConfig.model_fields["environment"].default.value
    prod = make_config("s", environment="prod")
    assert set(prod.labels) == set(rules.REQUIRED_LABELS)
    assert all(prod.labels[key] == value for key, value in rules.REQUIRED_LABELS.items() if value is not None)


def test_policy_project_roles_are_the_ones_the_components_grant() -> None:
    """The allow-list is exactly what the project grants on a project: every stack's project grants
    are on it, and every role on it is granted by some stack (no stale entry)."""
    from components.platform.addons.metrics_adapter import MONITORING_VIEWER
    from components.platform.identity import NODE_ROLE
    from components.policy.checks import PROJECT_ROLES

    assert PROJECT_ROLES == {NODE_ROLE, MONITORING_VIEWER}
    granted = {
        str(res.inputs["role"])
        for stack in STACKS
        for res in planned_built(stack).resources
        if res.type == "gcp:projects/iAMMember:IAMMember"
    }
    assert granted == PROJECT_ROLES


def test_policy_labelled_types_cover_every_labelled_resource_of_the_stacks() -> None:
    from components.policy.checks import LABELLED_TYPES

    labelled = {
        res.type
        for stack in STACKS
        for res in planned_built(stack).resources
        if res.type.startswith("gcp:")
        and ({"labels", "resourceLabels"} & set(res.inputs) or "resourceLabels" in (res.inputs.get("nodeConfig") or {}))
    }
    assert labelled == set(LABELLED_TYPES)


def test_policy_stack_environment_is_read_from_the_stack_configuration() -> None:
    assert stack_environment(None) is None
    assert stack_environment({}) is None
    assert stack_environment({"gcp:project": "p"}) == "dev"
    assert stack_environment({"gke-tpu-llm:environment": "prod"}) == "prod"
    prod_stacks = {s for s in STACKS if stack_environment(stacks.read_stack_file(stacks.stack_path(s)).values) == "prod"}
    assert prod_stacks == {s for s in STACKS if planned(s).config.environment.value == "prod"}
    assert prod_stacks


def test_policy_load_balancer_markers_are_the_ones_the_workloads_set() -> None:
    from components.policy import exposure_checks
    from components.tools import endpoints

    assert exposure_checks.AUTH_ANNOTATION == endpoints.AUTH_ANNOTATION
    assert exposure_checks.INTERNAL_LB_ANNOTATION == endpoints.INTERNAL_LB_ANNOTATION


# --- The rules on what the policy SDK really passes ------------------------------------------------
# pulumi_policy (sdk/python/lib/pulumi_policy/proxy.py) wraps a resource's inputs in read-only
# proxies: a Mapping that is not a dict, a Sequence that is not a list, and an UnknownValueError
# when a rule reads a value that is unknown during preview (the pack then reports the rule as not
# run, advisory, and enforces it on `up`). A stand-in with the same behaviour:

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi_policy's unknown-string sentinel


class UnknownValueError(Exception):
    pass


def _known(value: Any) -> Any:
    if isinstance(value, str) and value == UNKNOWN:
        raise UnknownValueError(value)
    return value


class _DictProxy(Mapping[str, Any]):
    def __init__(self, target: dict[str, Any]) -> None:
        self._target = target

    def __getitem__(self, key: str) -> Any:
        return _known(self._target[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._target)

    def __len__(self) -> int:
        return len(self._target)


class _ListProxy(Sequence[Any]):
    def __init__(self, target: list[Any]) -> None:
        self._target = target

    def __getitem__(self, index: Any) -> Any:
        return _known(self._target[index])

    def __len__(self) -> int:
        return len(self._target)


def proxied(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _DictProxy({str(k): proxied(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return _ListProxy([proxied(v) for v in value])
    return value


def _through_sdk(res: Resource) -> Resource:
    return Resource(
        res.type,
        res.name,
        proxied(res.props),
        protect=res.protect,
        secret_outputs=res.secret_outputs,
        environment=res.environment,
    )


ALL_PAIRS = [
    *[pytest.param(rule, good, bad, id=f"basic-{rule}") for rule, (good, bad) in sorted(CASES.items())],
    *VARIANTS,
]


@pytest.mark.parametrize(("rule", "good", "bad"), ALL_PAIRS)
def test_policy_rules_give_the_same_verdict_on_the_sdk_proxies(rule: str, good: Resource, bad: Resource) -> None:
    assert violations(_through_sdk(good)) == violations(good) == []
    assert violations(_through_sdk(bad)) == violations(bad)


def test_policy_unknown_image_does_not_hide_the_other_containers() -> None:
    deployment = Resource(
        "kubernetes:apps/v1:Deployment",
        "d",
        {"spec": {"template": {"spec": {"containers": [{"image": UNKNOWN}, {"image": "vllm/vllm-tpu:latest"}]}}}},
    )
    assert [m for _, m in violations(_through_sdk(deployment))] == [
        "spec.template.spec.containers[1].image: image 'vllm/vllm-tpu:latest' uses the floating tag 'latest'; "
        "pin a version tag or a digest"
    ]


def test_policy_unknown_pod_fields_do_not_hide_the_known_ones() -> None:
    pod_spec = {
        "hostNetwork": UNKNOWN,
        "volumes": [UNKNOWN, {"name": "dev", "hostPath": {"path": "/dev"}}],
        "containers": [{"name": "a", "securityContext": UNKNOWN}, {"name": "b", "securityContext": {"privileged": True}}],
    }
    deployment = Resource("kubernetes:apps/v1:Deployment", "d", {"spec": {"template": {"spec": pod_spec}}})
    assert [m for _, m in violations(_through_sdk(deployment))] == [
        "spec.template.spec.volumes[1] (dev) mounts the node's '/dev' (hostPath)",
        "spec.template.spec.containers[1] (b) runs privileged",
    ]


def test_policy_unknown_ranges_and_route_names_are_left_to_the_update() -> None:
    service = _service({**RANGES, "loadBalancerSourceRanges": [UNKNOWN, "0.0.0.0/1", "128.0.0.0/1"]}, AUTH)
    (message,) = [m for _, m in violations(_through_sdk(service))]
    assert message.startswith("spec.loadBalancerSourceRanges admit 3,702,390,784 public IPv4 addresses")
    unknown_gateway = Resource(GATEWAY_TYPE, "gw", {"metadata": {"name": UNKNOWN, "namespace": "llm"}, "spec": {}})
    assert stack_violations([_through_sdk(unknown_gateway), _through_sdk(route({"name": "gw"}))]) == []
    assert stack_violations([_through_sdk(gateway()), _through_sdk(route({"name": UNKNOWN}))]) == []


def test_policy_unknown_node_account_is_left_to_the_update() -> None:
    """A dedicated account created in the same stack has an unknown email during the first preview:
    the rule cannot decide, so it raises the SDK's error (reported as not run) instead of failing."""
    with pytest.raises(UnknownValueError):
        violations(_through_sdk(_pool(serviceAccount=UNKNOWN)))


def stack_resources(stack: str) -> list[Resource]:
    """A stack's recorded resources as the pack sees them, with the environment of its stack file."""
    environment = stack_environment(stacks.read_stack_file(stacks.stack_path(stack)).values)
    return [
        Resource(
            res.type,
            res.name,
            res.inputs,
            protect=res.options["protect"],
            secret_outputs=tuple(res.options["additionalSecretOutputs"]),
            environment=environment,
        )
        for res in planned(stack).resources
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_policy_every_stack_passes(stack: str) -> None:
    resources = stack_resources(stack)
    found = [(res.name, rule, message) for res in resources for rule, message in violations(res)]
    found += [(res.name, rule, message) for rule, res, message in stack_violations(resources)]
    assert found == []
    proxied_resources = [_through_sdk(res) for res in resources]
    assert [v for res in proxied_resources for v in violations(res)] == []
    assert stack_violations(proxied_resources) == []


def test_policy_pack_wraps_every_rule_and_reports_through_pulumi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pack's __main__ (run by Pulumi in its own virtualenv) adapts each rule; checked here with a
    stand-in for pulumi_policy that records what the pack registers, and Pulumi's PULUMI_CONFIG (the
    stack configuration it passes every analyzer) for the stack's environment."""
    import runpy
    import sys
    import types
    from dataclasses import dataclass

    registered: dict[str, Any] = {}
    fake = types.ModuleType("pulumi_policy")

    class EnforcementLevel:
        MANDATORY = "mandatory"
        ADVISORY = "advisory"

    @dataclass
    class Policy:
        name: str
        description: str
        validate: Any
        enforcement_level: str

    class ResourceValidationPolicy(Policy):
        pass

    class StackValidationPolicy(Policy):
        pass

    def policy_pack(name: str, enforcement_level: str, policies: list[Policy]) -> None:
        registered.update(name=name, enforcement_level=enforcement_level, policies=policies)

    fake.EnforcementLevel = EnforcementLevel  # type: ignore[attr-defined]
    fake.PolicyPack = policy_pack  # type: ignore[attr-defined]
    fake.ResourceValidationPolicy = ResourceValidationPolicy  # type: ignore[attr-defined]
    fake.StackValidationPolicy = StackValidationPolicy  # type: ignore[attr-defined]
    for name in ("ResourceValidationArgs", "StackValidationArgs", "ReportViolation"):
        setattr(fake, name, object)
    monkeypatch.setitem(sys.modules, "pulumi_policy", fake)
    runpy.run_path(str(stacks.ROOT / "components" / "policy" / "__main__.py"), run_name="__main__")

    assert registered["name"] == "gke-tpu-llm"
    assert registered["enforcement_level"] == "mandatory"
    by_name = {p.name: p for p in registered["policies"]}
    assert {p.name for p in registered["policies"] if isinstance(p, ResourceValidationPolicy)} == RULE_NAMES
    assert {p.name for p in registered["policies"] if isinstance(p, StackValidationPolicy)} == STACK_RULE_NAMES
    assert {p.enforcement_level for p in registered["policies"]} == {"mandatory"}

    def args_of(res: Resource) -> Any:
        return types.SimpleNamespace(
            resource_type=res.type,
            name=res.name,
            props=proxied(res.props),
            urn=f"urn:{res.name}",
            opts=types.SimpleNamespace(protect=res.protect, additional_secret_outputs=list(res.secret_outputs)),
        )

    for rule, (good, bad) in sorted(CASES.items()):
        reports: list[tuple[str, str]] = []
        for res in (good, bad):
            if res.environment is None:
                monkeypatch.delenv("PULUMI_CONFIG", raising=False)
            else:
                monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gcp:project": "p", "gke-tpu-llm:environment": res.environment}))
            by_name[rule].validate(args_of(res), lambda message, urn: reports.append((message, urn)))  # noqa: B023
        assert reports == [(m, f"urn:{bad.name}") for _, m in violations(bad)], rule

    # A prod stack (from its configuration) whose pool lost every label is still judged as prod.
    unlabelled = Resource(POOL, "pool", {"nodeConfig": {**TPU_POOL_PROPS["nodeConfig"], "resourceLabels": {}}}, protect=True)
    reports = []
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gcp:project": "p", "gke-tpu-llm:environment": "prod"}))
    by_name["prod-resources-labelled"].validate(args_of(unlabelled), lambda message, urn: reports.append((message, urn)))
    assert len(reports) == 3
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gcp:project": "p"}))  # dev by default
    by_name["prod-resources-labelled"].validate(args_of(unlabelled), lambda message, urn: reports.append((message, urn)))
    assert len(reports) == 3

    for rule, (good_stack, bad_stack) in sorted(STACK_CASES.items()):
        reports = []
        for resources in (good_stack, bad_stack):
            environment = next((res.environment for res in resources if res.environment), "dev")  # the stack's config
            monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gcp:project": "p", "gke-tpu-llm:environment": environment}))
            stack_args = types.SimpleNamespace(resources=[args_of(res) for res in resources])
            by_name[rule].validate(stack_args, lambda message, urn: reports.append((message, urn)))  # noqa: B023
        assert reports == [(m, f"urn:{res.name}") for _, res, m in stack_violations(bad_stack)], rule
        assert reports
