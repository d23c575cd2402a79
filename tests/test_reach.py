"""Reach as stated: no pod of an unrelated namespace reaches a serving port, declared clients do, and
the plan's endpoint line lists exactly who the NetworkPolicies admit.

``components.tools.reach`` reads the policies two ways: :func:`reach.clients` lists who a pod admits (the
plan's endpoint lines print that list) and :func:`reach.admits` answers one connection at a time.
Here the list is held against the answers for a universe of sources — every rendered pod, strangers
in unrelated namespaces (bare, and wearing the labels of every listed client), unlabelled pods of
every namespace, and addresses outside the cluster inside and outside every listed range — so a
list that says more, or less, than the policies do fails. The evaluator's own Kubernetes semantics
are pinned by hand-written cases first.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from components.config.front_door import HEALTH_CHECK_RANGES
from components.render import custom_metrics, netpol
from components.tools import endpoints, reach, report
from components.workloads.vllm import spec as vllm_spec
from tests.conftest import STACKS, planned
from tests.test_benchmark import planned_benchmark

UNRELATED = "someone-else"
"""A namespace no stack renders and no policy names."""
PROBE_ADDRESSES = ("10.128.0.5", "10.200.3.4", "172.16.0.9", "192.168.10.1", "100.64.0.1", "203.0.113.7", "8.8.8.8")
"""Addresses outside the cluster: the default VPC's auto-mode subnets (10.128.0.0/9), the other
private ranges, shared address space, documentation and public addresses."""
SERVING_PORTS = {8000, 8888}
"""vLLM's and Saxml's HTTP ports (the issue's :8000 on four stacks and :8888)."""


def _policy(name: str, selector: Mapping[str, Any], ingress: list[dict[str, Any]] | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"podSelector": dict(selector), **spec}
    if ingress is not None:
        body["ingress"] = ingress
    meta = {"name": name, "namespace": "ns"}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta, "spec": body}


SERVER = reach.Pod("ns", (("app", "api"), ("tier", "web")), (("http", 8080, "TCP"), ("dns", 53, "UDP")))
CLIENT = reach.Source(namespace="ns", labels=(("app", "client"),))
OTHER_NS_CLIENT = reach.Source(namespace="other", labels=(("app", "client"),), namespace_labels=(("team", "a"),))


# ---------------------------------------------------------------- the evaluator's semantics


def test_a_pod_no_ingress_policy_selects_admits_everything() -> None:
    unrelated = _policy("p", {"matchLabels": {"app": "db"}}, [])
    egress_only = _policy("e", {}, None, policyTypes=["Egress"], egress=[])
    for policies in ([], [unrelated], [egress_only]):
        assert reach.admits(policies, reach.Source(address="8.8.8.8"), SERVER, 8080)
        assert reach.clients(policies, SERVER, 8080).everyone
    deny = _policy("deny", {}, None, policyTypes=["Ingress"])
    assert not reach.admits([deny], CLIENT, SERVER, 8080)
    assert reach.clients([deny], SERVER, 8080) == reach.NOBODY
    # policyTypes unset: Ingress, whatever the rules (the API server's default)
    assert not reach.admits([_policy("d", {}, None)], CLIENT, SERVER, 8080)


def test_rules_add_up_and_an_absent_or_empty_from_admits_every_source() -> None:
    only_port = _policy("p", {}, [{"ports": [{"port": 8080}]}])
    empty_from = _policy("q", {}, [{"from": [], "ports": [{"port": 9090}]}])
    for port in (8080, 9090):
        assert reach.admits([only_port, empty_from], reach.Source(address="8.8.8.8"), SERVER, port)
        assert reach.clients([only_port, empty_from], SERVER, port).everyone
    assert not reach.admits([only_port, empty_from], CLIENT, SERVER, 7070)


def test_peers_pod_namespace_and_both_in_one_peer() -> None:
    same_ns = _policy("a", {}, [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}]}])
    assert reach.admits([same_ns], CLIENT, SERVER, 8080)
    assert not reach.admits([same_ns], OTHER_NS_CLIENT, SERVER, 8080), "podSelector alone: the policy's namespace"
    team = {"namespaceSelector": {"matchLabels": {"team": "a"}}}
    both = _policy("b", {}, [{"from": [{**team, "podSelector": {"matchLabels": {"app": "server"}}}]}])
    assert not reach.admits([both], OTHER_NS_CLIENT, SERVER, 8080), "one peer: namespace AND pod"
    either = _policy("c", {}, [{"from": [team, {"podSelector": {"matchLabels": {"app": "server"}}}]}])
    assert reach.admits([either], OTHER_NS_CLIENT, SERVER, 8080), "two peers: namespace OR pod"
    by_name = _policy("d", {}, [{"from": [{"namespaceSelector": {"matchLabels": {netpol.NAMESPACE_NAME_LABEL: "other"}}}]}])
    assert reach.admits([by_name], OTHER_NS_CLIENT, SERVER, 8080)
    assert not reach.admits([by_name], CLIENT, SERVER, 8080)
    every_ns = _policy("e", {}, [{"from": [{"namespaceSelector": {}}]}])
    assert reach.admits([every_ns], OTHER_NS_CLIENT, SERVER, 8080)
    assert not reach.admits([every_ns], reach.Source(address="10.0.0.1"), SERVER, 8080), "selectors never admit addresses"


def test_label_selector_operators() -> None:
    def selects(*expressions: dict[str, Any]) -> bool:
        policy = _policy("x", {"matchExpressions": list(expressions)}, [])
        return bool(reach.isolating([policy], SERVER))

    assert selects({"key": "app", "operator": "In", "values": ["api", "x"]})
    assert not selects({"key": "app", "operator": "In", "values": ["x"]})
    assert selects({"key": "app", "operator": "NotIn", "values": ["x"]})
    assert selects({"key": "missing", "operator": "NotIn", "values": ["x"]}), "NotIn holds for an absent key"
    assert selects({"key": "tier", "operator": "Exists"})
    assert not selects({"key": "tier", "operator": "DoesNotExist"})
    assert not selects({"key": "app", "operator": "In", "values": ["api"]}, {"key": "x", "operator": "Exists"})
    with pytest.raises(ValueError, match="unknown label selector operator"):
        selects({"key": "app", "operator": "Gt", "values": ["1"]})


def test_ip_blocks_with_except_admit_addresses_outside_the_cluster_never_pods() -> None:
    block = _policy("i", {}, [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.4.0.0/14"]}}]}])
    assert reach.admits([block], reach.Source(address="10.128.0.5"), SERVER, 8080)
    assert not reach.admits([block], reach.Source(address="10.5.0.1"), SERVER, 8080), "in except"
    assert not reach.admits([block], reach.Source(address="192.168.0.1"), SERVER, 8080)
    assert not reach.admits([block], reach.Source(address="2001:db8::1"), SERVER, 8080), "another address family"
    pod_in_range = reach.Source(namespace="other", labels=(("app", "x"),), address="10.128.0.9")
    assert not reach.admits([block], pod_in_range, SERVER, 8080), "Dataplane V2: CIDR rules never match pods"
    (listed,) = reach.clients([block], SERVER, 8080).addresses
    assert listed.describe() == "10.0.0.0/8 except 10.4.0.0/14"


def test_ports_by_number_range_name_and_protocol() -> None:
    def admitted(ports: list[dict[str, Any]], port: int, protocol: str = "TCP") -> bool:
        return reach.admits([_policy("p", {}, [{"ports": ports}])], CLIENT, SERVER, port, protocol)

    assert admitted([{"port": 8080}], 8080)
    assert not admitted([{"port": 8080, "protocol": "UDP"}], 8080)
    assert admitted([{"port": 8000, "endPort": 8100}], 8080)
    assert not admitted([{"port": 8000, "endPort": 8079}], 8080)
    assert admitted([{"port": "http"}], 8080), "a name is the receiving pod's container port"
    assert not admitted([{"port": "http"}], 8081)
    assert admitted([{"port": "dns", "protocol": "UDP"}], 53, "UDP")
    assert not admitted([{"port": "dns"}], 53, "UDP"), "the entry's protocol defaults to TCP"
    assert admitted([{"protocol": "TCP"}], 1234), "no port: every port of the protocol"


def test_clients_lists_the_peers_of_the_rules_for_that_port_only() -> None:
    metrics = _policy("m", {}, [{"from": [{"podSelector": {"matchLabels": {"app": "scraper"}}}], "ports": [{"port": 9090}]}])
    api = _policy("a", {}, [{"from": [{"ipBlock": {"cidr": "10.8.0.0/16"}}, {"podSelector": {}}], "ports": [{"port": 8080}]}])
    narrower = _policy("n", {}, [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}]}])
    listed = reach.clients([metrics, api, narrower], SERVER, 8080)
    assert not listed.everyone
    assert [a.describe() for a in listed.addresses] == ["10.8.0.0/16"]
    assert [g.describe() for g in listed.groups] == ["every pod of namespace ns"], "every pod subsumes app=client"


# ---------------------------------------------------------------- every stack: the reach


def _serving(manifests: Sequence[Mapping[str, Any]]) -> list[tuple[reach.Pod, int]]:
    """(pod, port) of every Service target and of the serving ports wherever a pod declares them."""
    out = set()
    for svc in (m for m in manifests if m["kind"] == "Service"):
        for pod in reach.service_pods(manifests, svc):
            for port in svc["spec"]["ports"]:
                number = pod.port_number(port.get("targetPort", port["port"]))
                assert number is not None
                out.add((pod, number))
    for pod in reach.pods(manifests):
        out |= {(pod, number) for _, number, _ in pod.ports if number in SERVING_PORTS}
        out |= {(pod, number) for number in SERVING_PORTS}
    return sorted(out, key=lambda pair: (pair[0].owner, pair[1]))


def _strangers(manifests: Sequence[Mapping[str, Any]], pod: reach.Pod) -> list[reach.Source]:
    """Pods of an unrelated namespace: bare, with the target's own labels, and with the labels of
    every pod rendered anywhere (a stranger cannot pass for a client by copying labels)."""
    wearing = {p.labels for p in reach.pods(manifests)} | {pod.labels, (("run", "debug"),), ()}
    return [reach.Source(namespace=UNRELATED, labels=labels, address="10.128.0.77") for labels in sorted(wearing)]


@pytest.mark.parametrize("stack", STACKS)
def test_no_pod_of_an_unrelated_namespace_reaches_a_serving_port(stack: str) -> None:
    manifests = planned(stack).manifests
    policies = reach.network_policies(manifests)
    serving = _serving(manifests)
    # A training stack renders no pod until its image is built (components.workloads.maxtext_ray).
    assert serving or not any(m["kind"] == "Service" for m in manifests)
    reached = [
        f"{pod.owner}:{port} from {dict(s.labels)}"
        for pod, port in serving
        if pod.namespace != "custom-metrics"  # the metrics adapter: the control plane calls it (test below)
        for s in _strangers(manifests, pod)
        if reach.admits(policies, s, pod, port)
    ]
    assert not reached, "\n".join(reached)


def test_the_control_planes_adapter_is_the_one_open_port_and_it_authenticates() -> None:
    """The metrics adapter answers kube-apiserver, whose address no selector names: its port admits
    every source, and the endpoint line says so, with the API server's delegated authentication."""
    (adapter,) = [e for e in endpoints.endpoints(planned("llama-70b-fallback").manifests) if e.namespace == "custom-metrics"]
    assert adapter.clients.everyone
    assert adapter.describe() == (
        "ClusterIP Service custom-metrics/custom-metrics-stackdriver-adapter :443 is reachable from inside the cluster, "
        f"and from the VPC at its pods' addresses by: any source — authenticated by {custom_metrics.ADAPTER_AUTH}"
    )


@pytest.mark.parametrize("stack", STACKS)
def test_no_rule_on_a_serving_port_admits_every_source(stack: str) -> None:
    manifests = planned(stack).manifests
    # A gateway's listener is its load balancer's (the VPC, or the internet behind IAP); its backends'
    # pods, and every Service in front of them, admit the proxies and health checks by address.
    behind_gateway = {
        p.owner
        for e in endpoints.endpoints(manifests)
        for b in e.backends
        for m in manifests
        if m["kind"] == b.kind and m["metadata"]["name"] == b.name
        for p in reach.pool_pods(manifests, m)
    }
    behind_gateway |= {p.owner for p in reach.pods(manifests) if dict(p.labels).get("app.kubernetes.io/component") == "vllm-epp"}
    for endpoint in endpoints.endpoints(manifests):
        if endpoint.kind == "Gateway":
            assert endpoint.backends, endpoint.describe()
            assert not any(b.clients.everyone for b in endpoint.backends), endpoint.describe()
            continue
        if endpoint.namespace != "custom-metrics":
            assert not endpoint.clients.everyone, endpoint.describe()
        if endpoint.kind == "ClusterIP" and {p.owner for p in _backends(manifests, endpoint)} <= behind_gateway:
            continue
        if endpoint.kind == "LoadBalancer":
            assert endpoint.client_addresses_kept, endpoint.describe()
            assert not endpoint.node_ports, endpoint.describe()
        else:
            assert not endpoint.clients.addresses, f"only a load balancer's clients are named by address: {endpoint.describe()}"


def _backends(manifests: Sequence[Mapping[str, Any]], endpoint: endpoints.Endpoint) -> list[reach.Pod]:
    (svc,) = [
        m
        for m in manifests
        if m["kind"] == "Service" and (m["metadata"]["namespace"], m["metadata"]["name"]) == (endpoint.namespace, endpoint.name)
    ]
    return reach.service_pods(manifests, svc)


def test_declared_clients_reach_the_serving_ports() -> None:
    """The benchmark Job (by its labels), Managed Prometheus (on vLLM's serving port, which serves
    /metrics), the Saxml publish Job, and addresses in the load balancer's ranges."""
    vllm = planned_benchmark().manifests
    policies = reach.network_policies(vllm)
    (server,) = [p for p in reach.pods(vllm) if dict(p.labels).get("app.kubernetes.io/component") == "vllm"]
    (bench,) = [p for p in reach.pods(vllm) if dict(p.labels).get("app.kubernetes.io/component") == "benchmark"]
    collector = reach.Source(namespace="gmp-system", labels=(("app.kubernetes.io/name", "collector"),))
    # llama-70b serves behind the internal gateway: its proxies (10.129.0.0/23) reach the server, the VPC at large does not.
    for source in (reach.Source.of(bench), collector, reach.Source(address="10.129.0.5")):
        assert reach.admits(policies, source, server, 8000), source
        assert not reach.admits(policies, source, server, 8001), source
    assert not reach.admits(policies, reach.Source(address="10.128.0.5"), server, 8000)
    unlabelled = reach.Source(namespace=server.namespace, labels=(("run", "debug"),))
    assert not reach.admits(policies, unlabelled, server, 8000), "in-namespace clients are admitted by label only"

    sax = planned("saxml-175b").manifests
    policies = reach.network_policies(sax)
    (http,) = [p for p in reach.pods(sax) if dict(p.labels).get("app.kubernetes.io/component") == "sax-http"]
    (publish,) = [p for p in reach.pods(sax) if dict(p.labels).get("app.kubernetes.io/component") == "sax-publish"]
    assert reach.admits(policies, reach.Source.of(publish), http, 8888)
    assert reach.admits(policies, reach.Source(address="10.128.0.5"), http, 8888)
    assert not reach.admits(policies, reach.Source(namespace=http.namespace, labels=(("run", "debug"),)), http, 8888)


def test_source_ranges_become_the_only_addresses_admitted() -> None:
    from tests.test_day2 import variant

    plan = variant("llama-70b", workload__frontDoor={"type": "service"}, workload__vllm__service__sourceRanges=["10.128.0.0/20"])
    (svc,) = [m for m in plan["manifests"] if m["kind"] == "Service" and m["metadata"]["name"] == "vllm"]
    assert svc["spec"]["loadBalancerSourceRanges"] == ["10.128.0.0/20"]
    (vllm,) = [e for e in endpoints.endpoints(plan["manifests"]) if e.name == "vllm"]
    assert [a.cidr for a in vllm.clients.addresses] == ["10.128.0.0/20"]
    assert "by: addresses in 10.128.0.0/20; " in vllm.describe()
    _agrees(plan["manifests"])


# ---------------------------------------------------------------- the endpoint text equals the evaluation


def _inside(cidr: str) -> list[str]:
    network = ipaddress.ip_network(cidr)
    return [str(network.network_address), str(network.broadcast_address)]


def _addresses(clients: reach.Clients) -> list[str]:
    """Probe addresses: the listed ranges' first and last addresses and excepts, and PROBE_ADDRESSES."""
    found = set(PROBE_ADDRESSES)
    for block in clients.addresses:
        found |= set(_inside(block.cidr))
        for excluded in block.excepts:
            found |= set(_inside(excluded))
    return sorted(found)


def _sample(selector: reach.Selector) -> dict[str, str]:
    """Labels that satisfy ``selector`` (the first value of each In)."""
    labels = dict(selector.match_labels)
    for key, op, values in selector.match_expressions:
        if op == "In":
            labels[key] = values[0]
        elif op == "Exists":
            labels[key] = "x"
    return labels


def _pod_sources(manifests: Sequence[Mapping[str, Any]], clients: reach.Clients) -> list[reach.Source]:
    """Every rendered pod, an unlabelled pod of every namespace, each listed group's sample pod (in
    its namespace and in an unrelated one), and strangers."""
    out = [reach.Source.of(p) for p in reach.pods(manifests)]
    namespaces = {p.namespace for p in reach.pods(manifests)} | {"gmp-system", "kube-system", UNRELATED}
    out += [reach.Source(namespace=ns, labels=(("run", "debug"),)) for ns in sorted(namespaces)]
    for group in clients.groups:
        labels = reach.as_labels(_sample(group.pods))
        home = dict(group.namespaces.match_labels).get(netpol.NAMESPACE_NAME_LABEL, UNRELATED)
        out += [reach.Source(namespace=home, labels=labels), reach.Source(namespace=UNRELATED, labels=labels)]
    return out


def _listed(clients: reach.Clients, source: reach.Source) -> bool:
    """Whether the endpoint's list names ``source`` (read from the list, not from the policies)."""
    if clients.everyone:
        return True
    if source.namespace is None:
        address = ipaddress.ip_address(source.address or "")
        return any(
            address in ipaddress.ip_network(a.cidr) and not any(address in ipaddress.ip_network(e) for e in a.excepts)
            for a in clients.addresses
        )
    namespace = {**dict(source.namespace_labels), netpol.NAMESPACE_NAME_LABEL: source.namespace}
    return any(g.namespaces.matches(namespace) and g.pods.matches(dict(source.labels)) for g in clients.groups)


def _agrees(manifests: Sequence[Mapping[str, Any]]) -> None:
    policies = reach.network_policies(manifests)
    for endpoint in endpoints.endpoints(manifests):
        if endpoint.kind == "Gateway":
            continue  # its backends: _agrees_gateway
        where = (endpoint.namespace, endpoint.name)
        (svc,) = [m for m in manifests if m["kind"] == "Service" and (m["metadata"]["namespace"], m["metadata"]["name"]) == where]
        text = endpoint.describe()
        for group in endpoint.clients.groups:
            assert group.describe() in text
        if not endpoint.clients.everyone and endpoint.clients.addresses and "any address in the VPC" not in text:
            assert all(a.describe() in text for a in endpoint.clients.addresses), text
        sources = [*_pod_sources(manifests, endpoint.clients), *(reach.Source(address=a) for a in _addresses(endpoint.clients))]
        wrong = []
        for source in sources:
            listed = _listed(endpoint.clients, source)
            # A source the line lists reaches some backend on some port of the Service; one it does not list reaches none.
            reaches = any(
                reach.admits(policies, source, pod, number)
                for pod in reach.service_pods(manifests, svc)
                for port in svc["spec"]["ports"]
                if (number := pod.port_number(port.get("targetPort", port["port"]))) is not None
            )
            if listed != reaches:
                wrong.append(f"{'listed' if listed else 'not listed'} but {'reaches' if reaches else 'refused'}: {source}")
        assert not wrong, f"{text}\n" + "\n".join(wrong)


@pytest.mark.parametrize("stack", STACKS)
def test_every_endpoint_line_lists_exactly_who_the_policies_admit(stack: str) -> None:
    _agrees(planned(stack).manifests)
    _agrees_gateway(planned(stack).manifests)


def test_endpoint_lines_of_the_serving_stacks() -> None:
    """The issue's two lies, corrected: the clients are the VPC's addresses and named pods (not any
    pod), and the API key covers some paths only."""
    (line,) = [e.describe() for e in endpoints.endpoints(planned("llama-70b").manifests) if e.kind == "Gateway"]
    assert line == (
        "Gateway llama-70b/vllm-gateway (gke-l7-rilb) HTTP :80 is reachable from inside the VPC only by: any address in "
        "the VPC or a network connected to it and any pod of the cluster — without authentication; routes: PathPrefix / "
        "-> InferencePool llama-70b/vllm; backends: InferencePool llama-70b/vllm, whose pods admit on :8000 only: "
        "addresses in 10.129.0.0/23, 130.211.0.0/22 (Google health checks), 35.191.0.0/16 (Google health checks); pods "
        "with app.kubernetes.io/component=vllm-epp,app.kubernetes.io/instance=llama-70b of namespace llama-70b; pods "
        "with app.kubernetes.io/name=collector of namespace gmp-system"
    )
    (sax,) = [e.describe() for e in endpoints.endpoints(planned("saxml-175b").manifests) if e.kind == "LoadBalancer"]
    assert sax == (
        "LoadBalancer Service saxml-175b/sax-http-lb :8888 is reachable from inside the VPC only by: any address in the "
        "VPC or a network connected to it; pods with app.kubernetes.io/component=sax-publish,app.kubernetes.io/instance="
        "saxml-175b of namespace saxml-175b — without authentication"
    )
    keyed = planned_benchmark("api-key")
    _agrees(keyed.manifests)
    (vllm,) = [e for e in endpoints.endpoints(keyed.manifests) if e.name == "vllm"]
    assert vllm.auth_paths == vllm_spec.API_KEY_PATHS == ("/v1", "/v2", "/inference")
    assert "/invocations" in vllm.open_paths
    assert vllm.describe().endswith(
        "— authenticated by api-key on /v1/*, /v2/*, /inference/* only; every other path answers without it, e.g. "
        + ", ".join(vllm_spec.API_KEY_OPEN_PATHS)
    )
    assert (
        "pods with app.kubernetes.io/component=benchmark,app.kubernetes.io/instance=llama-70b of namespace llama-70b"
        in vllm.describe()
    )
    plan = report.plan_json(keyed)
    (listed,) = [e for e in plan["endpoints"] if e["name"] == "vllm"]
    assert listed["clients"] == vllm.clients.to_dict()
    assert listed["auth_paths"] == ["/v1", "/v2", "/inference"]


# ---------------------------------------------------------------- the gateway front door (issue 25)

GATEWAY_STACKS = ("llama-70b", "llama-405b-vllm")
"""Committed stacks whose front door is the internal GKE Inference Gateway."""


def _role(pod: reach.Pod) -> str:
    return dict(pod.labels).get("app.kubernetes.io/component", "")


@pytest.mark.parametrize("stack", GATEWAY_STACKS)
def test_only_the_gateway_proxies_and_the_endpoint_picker_reach_the_model_servers(stack: str) -> None:
    """:8000 of the pods the InferencePool selects admits the proxy-only subnet, Google's health checks
    and the endpoint picker; nothing else in the VPC (node subnets, other private ranges, the internet)
    and no other pod of the cluster, except the two declared scrapers/peers: Managed Prometheus (vLLM's
    /metrics for the HPA, on the serving port) and, multi-host, the group's own pods."""
    plan = planned(stack)
    manifests = plan.manifests
    door = plan.config.workload.front_door
    assert door.gateway
    assert door.proxy_subnet is not None
    policies = reach.network_policies(manifests)
    (pool,) = [m for m in manifests if m["kind"] == "InferencePool"]
    servers = reach.pool_pods(manifests, pool)
    assert servers
    assert reach.pool_ports(pool) == (8000,)
    (picker,) = [p for p in reach.pods(manifests) if _role(p) == "vllm-epp"]
    proxies = ipaddress.ip_network(str(door.proxy_subnet.cidr))
    admitted = [reach.Source(address=a) for a in _inside(str(proxies))]
    admitted += [reach.Source(address=a) for cidr in HEALTH_CHECK_RANGES for a in _inside(cidr)]
    admitted.append(reach.Source.of(picker))
    for server in servers:
        for source in admitted:
            assert reach.admits(policies, source, server, 8000), (server.owner, source)
    outside = [
        a
        for a in (*PROBE_ADDRESSES, "10.129.4.1", str(proxies.network_address - 1), str(proxies.broadcast_address + 1))
        if ipaddress.ip_address(a) not in proxies
        and not any(ipaddress.ip_address(a) in ipaddress.ip_network(c) for c in HEALTH_CHECK_RANGES)
    ]
    group = {"vllm", "vllm-worker"} if any(_role(p) == "vllm-worker" for p in reach.pods(manifests)) else set()
    refused = [reach.Source(address=a) for a in outside]
    refused += [reach.Source.of(p) for p in reach.pods(manifests) if _role(p) not in {"vllm-epp", *group}]
    refused += [reach.Source(namespace=servers[0].namespace, labels=(("run", "debug"),))]
    refused += _strangers(manifests, servers[0])
    reached = [f"{s.owner}: {src}" for s in servers for src in refused if reach.admits(policies, src, s, 8000)]
    assert not reached, "\n".join(reached)
    collector = reach.Source(namespace="gmp-system", labels=(("app.kubernetes.io/name", "collector"),))
    assert all(reach.admits(policies, collector, s, 8000) for s in servers)  # the declared scrape


def _agrees_gateway(manifests: Sequence[Mapping[str, Any]]) -> int:
    """Each gateway backend's listed clients are exactly the sources that reach one of its pods on one
    of its target ports (the same universe as the Services' check). Returns the backends checked."""
    policies = reach.network_policies(manifests)
    checked = 0
    for endpoint in endpoints.endpoints(manifests):
        for backend in endpoint.backends:
            (pool,) = [m for m in manifests if m["kind"] == backend.kind and m["metadata"]["name"] == backend.name]
            assert backend.describe() in endpoint.describe()
            sources = [*_pod_sources(manifests, backend.clients), *(reach.Source(address=a) for a in _addresses(backend.clients))]
            wrong = []
            for source in sources:
                listed = _listed(backend.clients, source)
                reaches = any(
                    reach.admits(policies, source, pod, port)
                    for pod in reach.pool_pods(manifests, pool)
                    for port in backend.ports
                )
                if listed != reaches:
                    wrong.append(f"{'listed' if listed else 'not listed'} but {'reaches' if reaches else 'refused'}: {source}")
            assert not wrong, endpoint.describe() + "\n" + "\n".join(wrong)
            checked += 1
    return checked


@pytest.mark.parametrize("stack", GATEWAY_STACKS)
def test_the_gateway_line_lists_exactly_who_reaches_its_backends(stack: str) -> None:
    manifests = planned(stack).manifests
    assert _agrees_gateway(manifests) == 1
    (gateway,) = [e for e in endpoints.endpoints(manifests) if e.kind == "Gateway"]
    (backend,) = gateway.backends
    assert [a.cidr for a in backend.clients.addresses] == sorted(
        [str(planned(stack).config.workload.front_door.proxy_subnet.cidr), *HEALTH_CHECK_RANGES]  # type: ignore[union-attr]
    )
    assert gateway.scope == endpoints.VPC
    assert gateway.routes == (f"PathPrefix / -> InferencePool {stack}/vllm",)
