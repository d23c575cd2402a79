"""Model endpoints: internal by default; outside the VPC only with source ranges and authentication."""

from __future__ import annotations

from typing import Any

import pytest

from components import engine
from components.__main__ import print_plan
from components.endpoints import EVERYONE, endpoints, warnings
from components.review import compare_stack, render_comment
from tests.conftest import STACKS, planned
from tests.test_day2 import variant


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_exposes_an_endpoint_without_ranges_and_auth(stack: str) -> None:
    for endpoint in endpoints(planned(stack).manifests):
        if endpoint.outside_vpc:
            assert endpoint.source_ranges
            assert not set(endpoint.source_ranges) & EVERYONE
            assert endpoint.auth


def test_internal_endpoints_are_listed_without_a_warning() -> None:
    (vllm,) = [e for e in endpoints(planned("llama-70b").manifests) if e.name == "vllm"]
    assert not vllm.outside_vpc
    assert vllm.who == "anyone in the VPC, without authentication"
    assert not warnings(planned("llama-70b").manifests)


def test_external_vllm_is_warned_in_plan_and_review(capsys: Any) -> None:
    external = {"type": "external", "sourceRanges": ["203.0.113.0/24"], "auth": "api-key"}
    head = variant("llama-70b", workload__vllm__service=external)
    (line,) = warnings(head["manifests"])
    assert line == (
        "LoadBalancer Service llama-70b/vllm :8000 is reachable from outside the VPC by clients in 203.0.113.0/24, "
        "authenticated by api-key"
    )
    assert [e["outside_vpc"] for e in head["endpoints"] if e["name"] == "vllm"] == [True]
    comment = render_comment([compare_stack("llama-70b", engine.plan_json(planned("llama-70b")), head)])
    assert f"> Endpoint: {line}." in comment
    print_plan(planned("llama-70b"))
    assert "endpoint: LoadBalancer Service llama-70b/vllm :8000 is reachable from inside the VPC only" in capsys.readouterr().out


def test_a_node_port_or_public_lb_without_annotation_is_outside_the_vpc() -> None:
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
    assert found[1].who == "anyone on the internet, without authentication"
