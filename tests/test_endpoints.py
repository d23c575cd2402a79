"""Model endpoints: internal by default; outside the VPC only with source ranges and authentication."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.tools.endpoints import IAP, covers_everyone, endpoints, warnings
from components.tools.plan_view import print_plan
from components.tools.review import render_comment
from tests.conftest import STACKS, planned, planned_built
from tests.test_day2 import variant


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_exposes_an_endpoint_without_ranges_and_auth(stack: str) -> None:
    """A Service outside the VPC names its client ranges and authenticates; a Gateway outside it puts
    every backend behind Identity-Aware Proxy (its listener is the internet's: IAP is the gate)."""
    for endpoint in endpoints(planned_built(stack).manifests):
        if endpoint.outside_vpc and endpoint.kind == "Gateway":
            assert endpoint.auth == IAP, endpoint.describe()
            assert all(b.iap for b in endpoint.backends)
            assert all(listener.startswith("HTTPS ") for listener in endpoint.listeners)
        elif endpoint.outside_vpc:
            assert endpoint.source_ranges
            assert not covers_everyone(endpoint.source_ranges)
            assert endpoint.auth


def test_internal_endpoints_are_listed_without_a_warning() -> None:
    manifests = planned("llama-70b").manifests
    (gateway,) = [e for e in endpoints(manifests) if e.kind == "Gateway"]
    assert not gateway.outside_vpc
    assert gateway.who == "any address in the VPC or a network connected to it and any pod of the cluster"
    assert gateway.authentication == "without authentication"
    # Behind the gateway the Service is ClusterIP: its clients are the proxies, health checks and named pods.
    (vllm,) = [e for e in endpoints(manifests) if e.name == "vllm"]
    assert vllm.kind == "ClusterIP"
    assert not warnings(manifests)


def test_an_endpoint_outside_the_vpc_is_warned_in_plan_and_review_even_when_unchanged(capsys: Any) -> None:
    """vLLM refuses external (tests/test_vllm.py); a Service made public by any other means is still
    reported, in every comment, whether or not its stack changed."""
    head = copy.deepcopy(variant("llama-70b", workload__frontDoor={"type": "service"}))
    (svc,) = [m for m in head["manifests"] if m["kind"] == "Service" and m["metadata"]["name"] == "vllm"]
    del svc["metadata"]["annotations"]["networking.gke.io/load-balancer-type"]
    svc["spec"]["loadBalancerSourceRanges"] = ["0.0.0.0/1", "128.0.0.0/1"]  # everyone, in two halves
    (line,) = warnings(head["manifests"])
    assert line == (
        "LoadBalancer Service llama-70b/vllm :8000 is reachable from outside the VPC by: anyone on the internet; pods "
        "with app.kubernetes.io/name=collector of namespace gmp-system — without authentication"
    )
    comment = render_comment([], {"llama-70b": head})
    assert f"> - `llama-70b`: {line}" in comment
    assert "No stack changes" in comment
    print_plan(planned("llama-70b"))
    printed = capsys.readouterr().out
    assert (
        "endpoint: Gateway llama-70b/vllm-gateway (gke-l7-rilb) HTTP :80 is reachable from inside the VPC only by: any" in printed
    )
    # AutoscalingMetric: no adapter, so no control-plane endpoint (llama-70b-fallback keeps it).
    assert "custom-metrics-stackdriver-adapter" not in printed
    print_plan(planned("llama-70b-fallback"))
    assert "endpoint: ClusterIP Service custom-metrics/custom-metrics-stackdriver-adapter :443" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("cidrs", "everyone"),
    [
        (["0.0.0.0/0"], True),
        (["::0/0"], True),
        (["0.0.0.0/1", "128.0.0.0/1"], True),
        (["10.0.0.0/8", "203.0.113.0/24"], False),
        (["not-a-cidr"], False),
    ],
)
def test_covers_everyone_parses_ranges(cidrs: list[str], everyone: bool) -> None:
    assert covers_everyone(cidrs) is everyone


def test_a_node_port_or_public_lb_without_annotation_is_outside_the_vpc() -> None:
    """Services the workloads do not render (no selector, no policy) are reported at their widest."""
    objs = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "namespace": "n"}, "spec": {"type": "NodePort"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "b", "namespace": "n"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}], "loadBalancerSourceRanges": ["0.0.0.0/0"]},
        },
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c", "namespace": "n"}, "spec": {"type": "ClusterIP"}},
    ]
    found = endpoints(objs)
    assert [(e.name, e.outside_vpc) for e in found] == [("a", True), ("b", True)]
    assert found[1].who == "anyone on the internet and any pod of the cluster"
    assert found[1].describe() == (
        "LoadBalancer Service n/b :80 is reachable from outside the VPC by: anyone on the internet and any pod of the "
        "cluster (externalTrafficPolicy Cluster: the pods see node addresses, so their policies cannot name the "
        "clients; a node port is open on every node) — without authentication"
    )


def test_a_service_whose_pods_no_policy_isolates_admits_any_source() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "n"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "ports": [{"name": "web", "containerPort": 8080}]}]},
            }
        },
    }
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "d", "namespace": "n"},
        "spec": {"selector": {"app": "d"}, "ports": [{"port": 80, "targetPort": "web"}]},
    }
    (open_,) = endpoints([deployment, svc])
    assert open_.describe() == (
        "ClusterIP Service n/d :80 is reachable from inside the cluster, and from the VPC at its pods' addresses by: "
        "any source — without authentication"
    )
    deny = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "deny", "namespace": "n"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    (closed,) = endpoints([deployment, svc, deny])
    assert closed.who == "no one (every connection is refused; kubectl port-forward still works)"


# ---------------------------------------------------------------- gateways, from objects of the front door's shapes

NS = "llm"


def _obj(api: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _front_door(gateway_class: str, iap: dict[str, Any] | None, *, pool_target: str = "vllm") -> list[dict[str, Any]]:
    """A Gateway, its HTTPRoute to an InferencePool of the server's pods, the pool's GCPBackendPolicy
    (with ``iap`` when given, targeting ``pool_target``) and the server's Deployment and policies."""
    https = gateway_class != "gke-l7-rilb"
    listener = {"name": "https", "protocol": "HTTPS", "port": 443} if https else {"name": "http", "protocol": "HTTP", "port": 80}
    server_labels = {"app.kubernetes.io/component": "vllm", "app.kubernetes.io/instance": NS}
    default: dict[str, Any] = {"timeoutSec": 600, **({"iap": iap} if iap else {})}
    return [
        _obj(
            "gateway.networking.k8s.io/v1",
            "Gateway",
            "vllm-gateway",
            {"gatewayClassName": gateway_class, "listeners": [listener]},
        ),
        _obj(
            "gateway.networking.k8s.io/v1",
            "HTTPRoute",
            "vllm",
            {
                "parentRefs": [{"name": "vllm-gateway"}],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                        "backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "vllm"}],
                    }
                ],
            },
        ),
        _obj(
            "inference.networking.k8s.io/v1",
            "InferencePool",
            "vllm",
            {
                "selector": {"matchLabels": server_labels},
                "targetPorts": [{"number": 8000}],
                "endpointPickerRef": {"name": "vllm-epp"},
            },
        ),
        _obj(
            "networking.gke.io/v1",
            "GCPBackendPolicy",
            "vllm",
            {
                "targetRef": {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool_target},
                "default": default,
            },
        ),
        _obj(
            "apps/v1",
            "Deployment",
            "vllm",
            {
                "template": {
                    "metadata": {"labels": server_labels},
                    "spec": {"containers": [{"name": "vllm", "ports": [{"name": "http", "containerPort": 8000}]}]},
                }
            },
        ),
        _obj(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            "allow-gateway",
            {
                "podSelector": {"matchLabels": server_labels},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"ipBlock": {"cidr": "10.129.0.0/23"}}], "ports": [{"port": "http"}]}],
            },
        ),
    ]


IAP_ON = {"enabled": True, "clientID": "1.apps.googleusercontent.com", "oauth2ClientSecret": {"name": "vllm-iap-client"}}


def test_a_public_gateway_behind_iap_is_outside_the_vpc_and_authenticated_on_every_path() -> None:
    (gateway,) = [e for e in endpoints(_front_door("gke-l7-regional-external-managed", IAP_ON)) if e.kind == "Gateway"]
    assert gateway.outside_vpc
    assert gateway.auth == IAP
    assert gateway.describe() == (
        "Gateway llm/vllm-gateway (gke-l7-regional-external-managed) HTTPS :443 is reachable from outside the VPC by: "
        "anyone on the internet and any pod of the cluster — authenticated by Identity-Aware Proxy (Google sign-in, OAuth "
        "client of the GCPBackendPolicy) on every path; routes: PathPrefix /v1 -> InferencePool llm/vllm; backends: "
        "InferencePool llm/vllm, whose pods admit on :8000 only: addresses in 10.129.0.0/23"
    )
    assert gateway.to_dict()["backends"][0]["iap"] is True
    # Reported in every review, like any endpoint outside the VPC.
    assert warnings(_front_door("gke-l7-regional-external-managed", IAP_ON)) == [gateway.describe()]


@pytest.mark.parametrize(
    ("iap", "target"),
    [
        (None, "vllm"),  # no IAP in the policy
        ({**IAP_ON, "enabled": False}, "vllm"),
        ({"enabled": True, "clientID": "c"}, "vllm"),  # no secret: GKE would refuse it
        (IAP_ON, "another-pool"),  # IAP on a different backend
    ],
)
def test_a_public_gateway_without_iap_on_its_backend_is_reported_unauthenticated(iap: dict[str, Any] | None, target: str) -> None:
    (gateway,) = [
        e for e in endpoints(_front_door("gke-l7-regional-external-managed", iap, pool_target=target)) if e.kind == "Gateway"
    ]
    assert gateway.outside_vpc
    assert gateway.auth is None
    assert "— without authentication; routes:" in gateway.describe()


def test_an_internal_gateway_is_the_vpcs() -> None:
    (gateway,) = [e for e in endpoints(_front_door("gke-l7-rilb", None)) if e.kind == "Gateway"]
    assert not gateway.outside_vpc
    assert gateway.listeners == ("HTTP :80",)
    assert gateway.where == "inside the VPC only"
