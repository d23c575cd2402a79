"""Model endpoints: internal by default; outside the VPC only with source ranges and authentication."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.tools import report
from components.tools.endpoints import covers_everyone, endpoints, warnings
from components.tools.plan_view import print_plan
from components.tools.review import render_comment
from tests.conftest import STACKS, planned, planned_built


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_exposes_an_endpoint_without_ranges_and_auth(stack: str) -> None:
    for endpoint in endpoints(planned_built(stack).manifests):
        if endpoint.outside_vpc:
            assert endpoint.source_ranges
            assert not covers_everyone(endpoint.source_ranges)
            assert endpoint.auth


def test_internal_endpoints_are_listed_without_a_warning() -> None:
    (vllm,) = [e for e in endpoints(planned("llama-70b").manifests) if e.name == "vllm"]
    assert not vllm.outside_vpc
    assert vllm.who == (
        "any address in the VPC or a network connected to it; pods with app.kubernetes.io/name=collector of namespace "
        "gmp-system"
    )
    assert vllm.authentication == "without authentication"
    assert not warnings(planned("llama-70b").manifests)


def test_an_endpoint_outside_the_vpc_is_warned_in_plan_and_review_even_when_unchanged(capsys: Any) -> None:
    """vLLM refuses external (tests/test_vllm.py); a Service made public by any other means is still
    reported, in every comment, whether or not its stack changed."""
    head = copy.deepcopy(report.plan_json(planned("llama-70b")))
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
    assert "endpoint: LoadBalancer Service llama-70b/vllm :8000 is reachable from inside the VPC only by: any" in printed
    assert "endpoint: ClusterIP Service custom-metrics/custom-metrics-stackdriver-adapter :443" in printed


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
