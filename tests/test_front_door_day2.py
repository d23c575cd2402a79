"""Day 2 of the front door (issue 25): moving a serving stack from its Service to the GKE Inference
Gateway is a review with no TPU pool and no cluster replaced (the Gateway API add-on is an in-place
cluster update), and moving it back removes the gateway objects with deletes, replacing nothing. The
new resource types' replacement rules and the deployer's rows come from the provider source, and
pre-flight checks the proxy-only subnet a stack expects."""

from __future__ import annotations

from typing import Any

from google.cloud import compute_v1

from components.tools import deployer_rows, preflight, preflight_online, replacement, steps
from components.tools.review import compare_stack, render_comment
from tests.conftest import planned
from tests.test_day2 import base, variant

GATEWAY_KINDS = {
    "kubernetes:gateway.networking.k8s.io/v1:Gateway",
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
    "kubernetes:inference.networking.k8s.io/v1:InferencePool",
    "kubernetes:networking.gke.io/v1:GCPBackendPolicy",
    "kubernetes:networking.gke.io/v1:HealthCheckPolicy",
}
SUBNET = "gcp:compute/subnetwork:Subnetwork"


def _service_form(stack: str) -> dict[str, Any]:
    return variant(stack, workload__frontDoor={"type": "service"})


def _types(change: Any, op: str) -> set[str]:
    return {s.type for s in change.prediction.of(op)}


def test_service_to_gateway_replaces_no_pool_and_no_cluster() -> None:
    for stack in ("llama-70b", "llama-405b-vllm"):
        change = compare_stack(stack, _service_form(stack), base(stack))
        assert not change.prediction.of("replace"), [s.name for s in change.prediction.of("replace")]
        assert not {steps.CLUSTER, steps.NODE_POOL} & (_types(change, "delete") | _types(change, "create"))
        (cluster,) = [s for s in change.prediction.steps if s.type == steps.CLUSTER]
        assert cluster.op == "update"  # gatewayApiConfig and addonsConfig.httpLoadBalancing, in place
        assert not cluster.replacing
        assert GATEWAY_KINDS <= _types(change, "create"), stack
        assert not change.refused
        comment = render_comment([change])
        assert "replace NodePool" not in comment
        assert "replace Cluster" not in comment


def test_gateway_back_to_service_deletes_the_gateway_objects_and_replaces_nothing() -> None:
    change = compare_stack("llama-70b", base("llama-70b"), _service_form("llama-70b"))
    assert not change.prediction.of("replace")
    deleted = _types(change, "delete")
    assert deleted >= GATEWAY_KINDS
    assert not {steps.CLUSTER, steps.NODE_POOL} & deleted
    assert not GATEWAY_KINDS & (_types(change, "create") | _types(change, "update"))
    # A stack that created the region's proxy-only subnet deletes it with its gateway (its claim says so).
    created_subnet = any(r["type"] == SUBNET for r in base("llama-70b")["resources"])
    assert (SUBNET in deleted) == created_subnet


def test_cluster_gateway_api_and_subnet_purpose_update_in_place() -> None:
    # terraform-provider-google-beta: gateway_api_config has no ForceNew (resource_container_cluster.go:2774).
    assert not replacement.replacing_paths(steps.CLUSTER, ["gatewayApiConfig", "gatewayApiConfig.channel"])
    assert not replacement.replacing_paths(steps.CLUSTER, ["addonsConfig.httpLoadBalancing.disabled"])
    # purpose and role are PATCHed (resource_compute_subnetwork.go:1509, :1577); region, network, name replace.
    assert not replacement.replacing_paths(SUBNET, ["purpose", "role"])
    assert replacement.replacing_paths(SUBNET, ["region", "network", "name", "ipCidrRange"]) == [
        "region",
        "network",
        "name",
        "ipCidrRange",
    ]
    assert replacement.replacing_paths("gcp:certificatemanager/certificate:Certificate", ["managed.domains"])
    assert not replacement.replacing_paths("gcp:certificatemanager/certificate:Certificate", ["labels"])


def test_new_resource_types_have_deployer_rows_with_sources() -> None:
    for type_ in (
        SUBNET,
        "gcp:certificatemanager/certificate:Certificate",
        "gcp:certificatemanager/dnsAuthorization:DnsAuthorization",
    ):
        row = deployer_rows.ROWS[type_]
        assert all(row.phases().values())
        assert replacement.TF in row.source
    assert "compute.subnetworks.create" in deployer_rows.ROWS[SUBNET].create


# ---------------------------------------------------------------- pre-flight: the expected proxy-only subnet


class _Subnets:
    def __init__(self, *subnets: compute_v1.Subnetwork) -> None:
        self.subnets = subnets
        self.calls: list[dict[str, str]] = []

    def list(self, *, project: str, region: str) -> list[compute_v1.Subnetwork]:
        self.calls.append({"project": project, "region": region})
        return list(self.subnets)


def _subnet(cidr: str, *, role: str = "ACTIVE", purpose: str = "REGIONAL_MANAGED_PROXY", network: str = "default") -> Any:
    return compute_v1.Subnetwork(
        name="proxy-only",
        ip_cidr_range=cidr,
        purpose=purpose,
        role=role,
        network=f"https://www.googleapis.com/compute/v1/projects/p/global/networks/{network}",
    )


def test_preflight_lists_and_checks_the_expected_proxy_only_subnet() -> None:
    """llama-405b-vllm expects us-east5's proxy-only subnet (llama-70b creates it): the offline checklist
    lists it, and the online check passes only on an ACTIVE REGIONAL_MANAGED_PROXY subnet of the default
    network with the configured range."""
    checklist = preflight.checklist(planned("llama-405b-vllm").config)
    need = checklist.gateway
    assert need is not None
    assert not need.create_proxy_subnet
    assert any("purpose REGIONAL_MANAGED_PROXY, role ACTIVE, range 10.129.0.0/23" in line for line in checklist.lines())
    assert checklist.to_dict()["gateway"]["proxy_cidr"] == "10.129.0.0/23"
    # A stack that creates the subnet does not expect it.
    created = preflight.checklist(planned("llama-70b").config).gateway
    assert created is not None
    assert created.create_proxy_subnet

    def result(*subnets: Any) -> preflight_online.Result:
        none: Any = None
        clients = preflight_online.Clients(none, none, none, none, none, subnetworks=_Subnets(*subnets))
        return preflight_online._Checker(checklist, clients).proxy_subnet(need)

    assert result(_subnet("10.129.0.0/23")).status == "pass"
    wrong = result(_subnet("10.130.0.0/23"))
    assert wrong.status == "fail"
    assert "proxy-only 10.130.0.0/23" in wrong.fix
    for other in (
        _subnet("10.129.0.0/23", role="BACKUP"),
        _subnet("10.129.0.0/23", purpose="PRIVATE"),
        _subnet("10.129.0.0/23", network="other"),
    ):
        missing = result(other)
        assert missing.status == "fail"
        assert "--purpose=REGIONAL_MANAGED_PROXY" in missing.fix
