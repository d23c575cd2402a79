"""NetworkPolicies: every flow the rendered workloads need is admitted, and nothing else is.

The flows a stack needs are derived here from its rendered objects, independently of
``components.render.netpol`` and of the workloads' ``network_intents``:

* a Service's clients reach the ports it targets (``targetPort`` resolved on the selected pods):
  the pods of its namespace for a ClusterIP Service; for a LoadBalancer, the addresses outside the
  cluster in its ``loadBalancerSourceRanges`` (every one without them) and no pod;
* behind a GKE Inference Gateway, an ``InferencePool``'s pods are reached on its ``targetPorts`` by the
  gateway's proxies (addresses in the stack's proxy-only subnet), Google's health checks and the endpoint
  picker's pods (they read the servers' metrics); the endpoint picker (``endpointPickerRef``) is reached
  on its ext-proc port by the proxies and health checks and on its ``grpc-health`` port by the health
  checks. Neither Service of a pool admits its namespace: the gateway is the way in;
* an APIService's backend Service is reached from the control plane (every source);
* Managed Prometheus collectors reach the ports a PodMonitoring scrapes;
* the pods one LeaderWorkerSet, JobSet replicated Job or RayCluster creates form one distributed
  program and reach each other on every port (TPU runtime, Pathways and Ray ports are not all
  declared);
* arguments and environment name the rest: Pathways workers' ``--resource_manager_address``, the
  Saxml admin's ``PORT`` and the model servers' ``--port`` (admin ↔ model servers ↔ HTTP server),
  the publish Job's ``SAX_HTTP_ADDRESS``, and a RayJob's submitter (and KubeRay, from kube-system)
  calling the head's ``dashboard`` port.

The evaluator of ``components.tools.reach`` applies the rendered NetworkPolicies and every
(source, pod, port) combination of a universe of sources — every rendered pod, a pod of another
namespace, an unlabelled pod of the workload's namespace, Managed Prometheus, kube-system, an
address outside the cluster — is checked: allowed exactly when needed.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.config.errors import ConfigError
from components.render import netpol
from components.render.core import get_path, pod_template_paths
from components.tools import mockengine, reach, steps
from components.tools.review import compare_stack
from components.workloads.registry import KINDS
from tests.conftest import STACKS, planned, planned_built
from tests.test_bad_inputs import cluster, run_cli, write_stack
from tests.test_day2 import variant

# ---------------------------------------------------------------- the evaluator (components.tools.reach)


@dataclass(frozen=True)
class Source:
    name: str
    namespace: str | None
    """None: not a pod (an address outside the cluster)."""
    labels: tuple[tuple[str, str], ...] = ()
    ip: str | None = None

    def as_reach(self) -> reach.Source:
        return reach.Source(namespace=self.namespace, labels=self.labels, address=self.ip)


@dataclass(frozen=True)
class Dest:
    name: str
    namespace: str
    labels: tuple[tuple[str, str], ...]
    ports: tuple[tuple[str, int, str], ...]
    """(name, containerPort, protocol) of every container port."""
    owner: str
    """Kind/name of the object whose template this is."""
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    @property
    def pod(self) -> reach.Pod:
        return reach.Pod(self.namespace, self.labels, self.ports, self.name)


def allowed(policies: Sequence[Mapping[str, Any]], source: Source, dest: Dest, port: int, protocol: str = "TCP") -> bool:
    """Kubernetes NetworkPolicy semantics, as ``components.tools.reach`` evaluates them (its own cases are
    in tests/test_reach.py)."""
    return reach.admits(policies, source.as_reach(), dest.pod, port, protocol)


# ---------------------------------------------------------------- rendered pods and the flows they need

GROUP_OWNERS = ("LeaderWorkerSet", "JobSet", "RayCluster")
UNDECLARED = (8471, 8476, 29999)
"""Ports no container declares: the TPU runtime, the JAX coordinator and an arbitrary one."""
STRANGER = Source("pod of another namespace", "someone-else", (("app", "stranger"),))
COLLECTOR = Source(
    "Managed Prometheus collector",
    "gmp-system",
    (("app", "managed-prometheus-collector"), ("app.kubernetes.io/name", "collector")),
)
KUBE_SYSTEM = Source("kube-system pod (GKE-hosted controllers)", "kube-system", (("k8s-app", "konnectivity-agent"),))
OUTSIDE = Source("address outside the cluster", None, ip="203.0.113.7")
VPC_CLIENT = Source("address in the VPC", None, ip="10.128.0.5")
HEALTH_CHECKS = (
    Source("Google health check (35.191.0.0/16)", None, ip="35.191.9.9"),
    Source("Google health check (130.211.0.0/22)", None, ip="130.211.1.1"),
)
"""Google's load-balancer health-check ranges (cloud.google.com/load-balancing/docs/firewall-rules)."""


def _plain(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str))


def dests(manifests: Sequence[Mapping[str, Any]]) -> list[Dest]:
    out = []
    for obj in manifests:
        meta = obj.get("metadata") or {}
        for path in pod_template_paths(obj):
            template = get_path(obj, path)
            containers = (template.get("spec") or {}).get("containers") or []
            out.append(
                Dest(
                    name=f"{obj['kind']}/{meta['name']}:{'.'.join(map(str, path[1:]))}",
                    namespace=meta["namespace"],
                    labels=tuple(sorted(((template.get("metadata") or {}).get("labels") or {}).items())),
                    ports=tuple(
                        (p.get("name", ""), int(p["containerPort"]), p.get("protocol", "TCP"))
                        for c in containers
                        for p in c.get("ports") or []
                    ),
                    # A RayJob's embedded cluster (rayClusterSpec) is a group like a RayCluster.
                    owner=f"{obj['kind']}/{meta['name']}" + (":rayClusterSpec" if path[1:2] == ("rayClusterSpec",) else ""),
                    args=_plain(a for c in containers for a in [*(c.get("command") or []), *(c.get("args") or [])]),
                    env=tuple(
                        (e["name"], e["value"]) for c in containers for e in c.get("env") or [] if isinstance(e.get("value"), str)
                    ),
                )
            )
    return out


def as_source(dest: Dest) -> Source:
    return Source(dest.name, dest.namespace, dest.labels)


def proxies(proxy_cidr: str | None) -> list[Source]:
    """A gateway proxy: an address of the stack's proxy-only subnet (from its config, not the policies)."""
    if proxy_cidr is None:
        return []
    return [Source(f"gateway proxy ({proxy_cidr})", None, ip=str(next(ipaddress.ip_network(proxy_cidr).hosts())))]


def universe(manifests: Sequence[Mapping[str, Any]], proxy_cidr: str | None = None) -> list[Source]:
    namespaces = sorted({d.namespace for d in dests(manifests)})
    unlabelled = [Source(f"unlabelled pod in {ns}", ns, (("run", "debug"),)) for ns in namespaces]
    return [
        *(as_source(d) for d in dests(manifests)),
        *unlabelled,
        STRANGER,
        COLLECTOR,
        KUBE_SYSTEM,
        OUTSIDE,
        VPC_CLIENT,
        *HEALTH_CHECKS,
        *proxies(proxy_cidr),
    ]


Need = tuple[str, str, int]
"""(source name, destination name, port)."""


def _resolve(dest: Dest, target: Any) -> int | None:
    if isinstance(target, int):
        return target
    found = [number for name, number, _ in dest.ports if name == target]
    return found[0] if found else None


def _selected(all_dests: Sequence[Dest], namespace: str, selector: Mapping[str, str]) -> list[Dest]:
    return [d for d in all_dests if d.namespace == namespace and all(dict(d.labels).get(k) == v for k, v in selector.items())]


def needed(manifests: Sequence[Mapping[str, Any]], proxy_cidr: str | None = None) -> set[Need]:
    all_dests = dests(manifests)
    sources = universe(manifests, proxy_cidr)
    need: set[Need] = set()

    def admit(who: Iterable[Source], targets: Iterable[Dest], ports: Iterable[int | None]) -> None:
        numbers = [p for p in ports if p is not None]
        for source in who:
            for dest in targets:
                for port in numbers:
                    need.add((source.name, dest.name, port))

    services = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in manifests if o["kind"] == "Service"}
    # A gateway's InferencePools: their pods and endpoint pickers are entered through the gateway only.
    gateway = [*proxies(proxy_cidr), *HEALTH_CHECKS]
    behind_gateway: set[str] = set()
    for pool in (o for o in manifests if o["kind"] == "InferencePool"):
        namespace, spec = pool["metadata"]["namespace"], pool["spec"]
        servers = _selected(all_dests, namespace, spec["selector"]["matchLabels"])
        picker_service = services[(namespace, spec["endpointPickerRef"]["name"])]
        pickers = _selected(all_dests, namespace, picker_service["spec"]["selector"])
        behind_gateway |= {d.name for d in [*servers, *pickers]}
        admit([*gateway, *map(as_source, pickers)], servers, [t["number"] for t in spec["targetPorts"]])
        ext_proc = next(p for p in picker_service["spec"]["ports"] if p["port"] == spec["endpointPickerRef"]["port"]["number"])
        for picker in pickers:
            admit(gateway, [picker], [_resolve(picker, ext_proc.get("targetPort", ext_proc["port"]))])
            admit(HEALTH_CHECKS, [picker], [_resolve(picker, "grpc-health")])
    control_plane_backends = {
        (o["spec"]["service"]["namespace"], o["spec"]["service"]["name"]) for o in manifests if o["kind"] == "APIService"
    }
    for (namespace, name), svc in services.items():
        spec = svc["spec"]
        targets = _selected(all_dests, namespace, spec.get("selector") or {})
        if (namespace, name) in control_plane_backends:
            clients = sources
        elif spec.get("type") in ("LoadBalancer", "NodePort"):
            # The load balancer's clients keep their addresses (externalTrafficPolicy: Local): the
            # addresses outside the cluster in its source ranges (all of them without ranges), no pod.
            assert spec.get("externalTrafficPolicy") == "Local", f"{namespace}/{name}"
            ranges = [ipaddress.ip_network(c) for c in spec.get("loadBalancerSourceRanges") or ["0.0.0.0/0"]]
            clients = [
                s for s in sources if s.namespace is None and s.ip and any(ipaddress.ip_address(s.ip) in r for r in ranges)
            ]
        elif all(d.name in behind_gateway for d in targets):
            clients = []  # the gateway is the way in (kubectl port-forward is not subject to policies)
        else:
            clients = [s for s in sources if s.namespace == namespace]
        for port in spec["ports"]:
            for dest in targets:
                admit(clients, [dest], [_resolve(dest, port.get("targetPort", port["port"]))])
    for mon in (o for o in manifests if o["kind"] == "PodMonitoring"):
        targets = _selected(all_dests, mon["metadata"]["namespace"], mon["spec"]["selector"]["matchLabels"])
        for endpoint in mon["spec"]["endpoints"]:
            for dest in targets:
                admit([COLLECTOR], [dest], [_resolve(dest, endpoint["port"])])

    # One distributed program: every member reaches every other on every port.
    for owner in {d.owner for d in all_dests if d.owner.split("/")[0] in GROUP_OWNERS or d.owner.endswith(":rayClusterSpec")}:
        members = [d for d in all_dests if d.owner == owner]
        for dest in members:
            admit(map(as_source, members), [dest], probes(dest))

    # Addresses the containers are given.
    by_role = {dict(d.labels).get(netpol.ROLE_LABEL): d for d in all_dests}
    for dest in all_dests:
        role = dict(dest.labels).get(netpol.ROLE_LABEL)
        env = dict(dest.env)
        for arg in dest.args:
            m = re.fullmatch(r"--resource_manager_address=\$\(LWS_LEADER_ADDRESS\):(\d+)", arg)
            if m:  # Pathways worker -> resource manager on the leader
                admit([as_source(dest)], [by_role["jetstream-leader"]], [int(m.group(1))])
            m = re.fullmatch(r"--port=(\d+)", arg)
            if m and role == "sax-model-server":  # admin and HTTP server -> model servers
                admit([as_source(by_role["sax-admin-server"]), as_source(by_role["sax-http"])], [dest], [int(m.group(1))])
        if role == "sax-admin-server":  # model servers and HTTP server -> admin (the image's PORT)
            admit([as_source(by_role["sax-model-server"]), as_source(by_role["sax-http"])], [dest], [int(env["PORT"])])
        if "SAX_HTTP_ADDRESS" in env:  # publish Job -> HTTP server
            admit([as_source(dest)], [by_role["sax-http"]], [int(env["SAX_HTTP_ADDRESS"].rsplit(":", 1)[1])])
        if role == "ray-job":  # submitter and KubeRay's RayJob controller -> the head's job API
            admit([as_source(dest), KUBE_SYSTEM], [by_role["ray-head"]], [_resolve(by_role["ray-head"], "dashboard")])

    # vLLM prefill/decode: every KV consumer of a namespace pulls from every producer there.
    kv_roles = {d.name: _kv_role(d) for d in all_dests}
    for producer in (d for d in all_dests if kv_roles[d.name] == "kv_producer"):
        consumers = [d for d in all_dests if d.namespace == producer.namespace and kv_roles[d.name] in ("kv_consumer", "kv_both")]
        env = dict(producer.env)
        serving = [int(m.group(1)) for a in producer.args if (m := re.fullmatch(r"--port=(\d+)", a))]
        # The routing sidecar posts the prompt to the producer's server; the connector's control and side
        # channel are tpu-inference's env ports (defaults 9100, 9600); its bulk sockets bind port 0.
        kv_ports = [int(env.get("TPU_KV_TRANSFER_PORT", "9100")), int(env.get("TPU_SIDE_CHANNEL_PORT", "9600"))]
        admit(map(as_source, consumers), [producer], [*serving, *kv_ports, *range(EPHEMERAL[0], EPHEMERAL[1] + 1)])
    return need


EPHEMERAL = (32768, 60999)
"""Linux's default net.ipv4.ip_local_port_range, where a port-0 socket lands (tpu-inference's transfer channels)."""


def _kv_role(dest: Dest) -> str | None:
    """``kv_role`` of a vLLM server's ``--kv-transfer-config`` (None: no KV connector)."""
    args = list(dest.args)
    for i, arg in enumerate(args):
        text = arg.split("=", 1)[1] if arg.startswith("--kv-transfer-config=") else (
            args[i + 1] if arg == "--kv-transfer-config" and i + 1 < len(args) else None
        )
        if text is not None:
            return str(json.loads(text)["kv_role"])
    return None


def probes(dest: Dest) -> list[int]:
    # A KV producer's ephemeral range is probed at its ends and just outside them.
    kv = (EPHEMERAL[0] - 1, *EPHEMERAL, EPHEMERAL[1] + 1, 9100, 9600) if _kv_role(dest) == "kv_producer" else ()
    return sorted({*(n for _, n, _ in dest.ports), *UNDECLARED, 443, 8000, 8265, *kv})


def policies_of(manifests: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [o for o in manifests if o["kind"] == "NetworkPolicy"]


# ---------------------------------------------------------------- every stack


@pytest.mark.parametrize("stack", STACKS)
def test_policies_admit_exactly_the_needed_flows(stack: str) -> None:
    result = planned_built(stack)  # a training stack's objects once its image is built
    manifests = result.manifests
    front_door = result.config.workload.front_door
    proxy_cidr = front_door.proxy_subnet.cidr if front_door.proxy_subnet else None
    policies = policies_of(manifests)
    need = needed(manifests, proxy_cidr)
    assert need, "no flows derived"
    wrong = []
    for dest in dests(manifests):
        for source in universe(manifests, proxy_cidr):
            for port in probes(dest):
                want = (source.name, dest.name, port) in need
                if allowed(policies, source, dest, port) != want:
                    wrong.append(f"{'denied' if want else 'allowed'}: {source.name} -> {dest.name}:{port}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("stack", STACKS)
def test_every_workload_namespace_denies_ingress_by_default(stack: str) -> None:
    manifests = planned_built(stack).manifests
    namespaces = {d.namespace for d in dests(manifests)}
    assert namespaces == {o["metadata"]["name"] for o in manifests if o["kind"] == "Namespace"}
    for namespace in namespaces:
        (deny,) = [p for p in policies_of(manifests) if p["metadata"]["namespace"] == namespace and not p["spec"].get("ingress")]
        assert deny["metadata"]["name"] == netpol.DEFAULT_DENY
        assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    for policy in policies_of(manifests):
        assert policy["metadata"]["annotations"][netpol.FLOW_ANNOTATION], "every policy says why it exists"
        assert "Egress" not in policy["spec"]["policyTypes"], "egress is not restricted (DNS, GCS, Hugging Face)"


@pytest.mark.parametrize("stack", STACKS)
def test_default_deny_is_created_after_the_flows_and_after_the_namespace(stack: str) -> None:
    resources = planned_built(stack).resources
    namespaces = {r.inputs["metadata"]["name"]: r.urn for r in resources if r.type == "kubernetes:core/v1:Namespace"}
    policies = [r for r in resources if r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"]
    assert policies
    for namespace in {r.inputs["metadata"]["namespace"] for r in policies}:
        here = [r for r in policies if r.inputs["metadata"]["namespace"] == namespace]
        (deny,) = [r for r in here if r.inputs["metadata"]["name"] == netpol.DEFAULT_DENY]
        assert {r.urn for r in here if r is not deny} <= set(deny.dependencies)
        for policy in here:
            assert namespaces[namespace] in policy.dependencies, policy.name


def _dest(manifests: Sequence[Mapping[str, Any]], role: str) -> Dest:
    (dest,) = [d for d in dests(manifests) if dict(d.labels).get(netpol.ROLE_LABEL) == role]
    return dest


def test_the_issue_flows_are_closed() -> None:
    """The issue: any pod could reach the Ray job API, the Saxml admin and publish endpoints, JetStream."""
    ray = planned_built("llama3-8b-train").manifests
    head, worker = _dest(ray, "ray-head"), _dest(ray, "ray-worker")
    for port in (8265, 6379, 10001, 8080, 52365):
        assert not allowed(policies_of(ray), STRANGER, head, port)
        assert not allowed(policies_of(ray), OUTSIDE, head, port)
        assert not allowed(policies_of(ray), STRANGER, worker, port)
    assert allowed(policies_of(ray), as_source(_dest(ray, "ray-job")), head, 8265)
    assert not allowed(policies_of(ray), as_source(_dest(ray, "ray-job")), head, 6379)

    sax = planned("saxml-175b").manifests
    admin = _dest(sax, "sax-admin-server")
    for source in (STRANGER, OUTSIDE, COLLECTOR, KUBE_SYSTEM, as_source(_dest(sax, "sax-publish"))):
        assert not allowed(policies_of(sax), source, admin, 10000), source.name
        assert not allowed(policies_of(sax), source, _dest(sax, "sax-model-server"), 10001), source.name
    assert allowed(policies_of(sax), as_source(_dest(sax, "sax-publish")), _dest(sax, "sax-http"), 8888)

    for stack in ("llama-405b", "llama2-70b-disagg"):
        js = planned_built(stack).manifests
        leader, pw = _dest(js, "jetstream-leader"), _dest(js, "pathways-worker")
        for port in (8000, 9000, *(n for _, n, _ in leader.ports)):
            assert not allowed(policies_of(js), STRANGER, leader, port)
        assert not allowed(policies_of(js), STRANGER, pw, pw.ports[0][1])
        assert not allowed(policies_of(js), COLLECTOR, leader, 8000)
        assert allowed(policies_of(js), as_source(pw), leader, 38677)  # the resource manager


def test_vllm_metrics_share_the_serving_port_nothing_else_is_open() -> None:
    """Managed Prometheus scrapes the serving port (PodMonitoring port = Service targetPort), so
    'external -> metrics' is the load balancer's flow; every other port of the pod stays closed."""
    manifests = planned("llama-70b").manifests
    (mon,) = [o for o in manifests if o["kind"] == "PodMonitoring" and o["metadata"]["name"] == "vllm"]
    (svc,) = [o for o in manifests if o["kind"] == "Service" and o["metadata"]["name"] == "vllm"]
    assert {e["port"] for e in mon["spec"]["endpoints"]} == {p["targetPort"] for p in svc["spec"]["ports"]}
    vllm = _dest(manifests, "vllm")
    assert allowed(policies_of(manifests), COLLECTOR, vllm, 8000)
    for source in (OUTSIDE, STRANGER, COLLECTOR):
        assert not allowed(policies_of(manifests), source, vllm, 8001)
    fallback = planned("llama-70b-fallback").manifests  # the adapter path (llama-70b uses AutoscalingMetric)
    adapter = _dest(fallback, "metrics-adapter")
    assert allowed(policies_of(fallback), KUBE_SYSTEM, adapter, 443)
    assert not allowed(policies_of(fallback), STRANGER, adapter, 8080)


# ---------------------------------------------------------------- the compiler


def test_every_workload_kind_declares_its_flows() -> None:
    import importlib

    for info in KINDS:
        render = importlib.import_module(info.deploy.partition(":")[0].replace(".component", ".render"))
        assert callable(getattr(render, "network_intents", None)), f"{info.kind}: {render.__name__}.network_intents"


def _deployment(ports: list[dict[str, Any]]) -> dict[str, Any]:
    labels = {netpol.INSTANCE_LABEL: "s", netpol.ROLE_LABEL: "api"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "ns"},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "ports": ports}]}}},
    }


def _service(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "api", "namespace": "ns"},
        "spec": {"selector": {netpol.ROLE_LABEL: "api"}, "ports": [{"port": 80, "targetPort": "web"}], **spec},
    }


def test_ports_and_peers_come_from_the_rendered_objects() -> None:
    objects = [_deployment([{"name": "web", "containerPort": 8080}]), _service(type="ClusterIP")]
    intents = [netpol.ServiceClients("api", "api", why="w")]
    deny, policy = netpol.render_network_policies(objects, intents, namespace="ns", stack="s")
    assert deny["metadata"]["name"] == netpol.DEFAULT_DENY
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {}}], "ports": [{"protocol": "TCP", "port": 8080}]}]
    assert policy["spec"]["podSelector"] == {"matchLabels": {netpol.INSTANCE_LABEL: "s", netpol.ROLE_LABEL: "api"}}


def test_a_local_traffic_load_balancer_admits_its_source_ranges_only() -> None:
    """With externalTrafficPolicy: Local nodes do not SNAT, so the clients' ranges can be named."""
    lb = _service(type="LoadBalancer", externalTrafficPolicy="Local", loadBalancerSourceRanges=["10.8.0.0/16"])
    _, policy = netpol.render_network_policies(
        [_deployment([{"name": "web", "containerPort": 8080}]), lb],
        [netpol.ServiceClients("api", "api", why="w")],
        namespace="ns",
        stack="s",
    )
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.8.0.0/16"}}]
    no_ranges = _service(type="LoadBalancer", externalTrafficPolicy="Local")
    _, policy = netpol.render_network_policies(
        [_deployment([{"name": "web", "containerPort": 8080}]), no_ranges],
        [netpol.ServiceClients("api", "api", why="w")],
        namespace="ns",
        stack="s",
    )
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "outside the cluster, no pod"


@pytest.mark.parametrize("kind", ["LoadBalancer", "NodePort"])
def test_a_load_balanced_port_that_hides_its_clients_fails_the_plan(kind: str) -> None:
    """externalTrafficPolicy: Cluster (the default): the forwarding node replaces the clients'
    addresses, so the only policy left would be one without ``from``, which no serving port gets."""
    with pytest.raises(netpol.NetworkPolicyError, match=f"is a {kind} with externalTrafficPolicy Cluster"):
        netpol.render_network_policies(
            [_deployment([{"name": "web", "containerPort": 8080}]), _service(type=kind, loadBalancerSourceRanges=["10.0.0.0/8"])],
            [netpol.ServiceClients("api", "api", why="w")],
            namespace="ns",
            stack="s",
        )


def test_load_balanced_services_keep_client_addresses_and_open_no_node_port() -> None:
    assert netpol.load_balanced_service_fields("v2") == {"externalTrafficPolicy": "Local", "allocateLoadBalancerNodePorts": False}
    for stack in STACKS:
        for svc in (m for m in planned_built(stack).manifests if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"):
            assert svc["spec"]["externalTrafficPolicy"] == "Local", f"{stack}: {svc['metadata']['name']}"
            assert svc["spec"]["allocateLoadBalancerNodePorts"] is False, f"{stack}: {svc['metadata']['name']}"


@pytest.mark.parametrize("stack", ["llama-70b", "saxml-175b"])
def test_the_legacy_dataplane_is_refused_for_a_load_balanced_service(
    stack: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calico matches ipBlocks against pod addresses: the load balancer's ranges would admit every pod
    in them. Refused by the config (exit 2, nothing registered), and by the renderer as a backstop."""
    monkeypatch.setattr(mockengine, "run_program", lambda *a, **k: pytest.fail("the program ran for a refused config"))
    code, err = run_cli(["plan", "--config", str(write_stack(tmp_path, stack, cluster(dataplane="legacy")))], capsys)
    assert code == 2
    assert "gke-tpu-llm:cluster.dataplane: 'legacy' enforces NetworkPolicies with Calico" in err
    assert "Fix: set cluster.dataplane: v2" in err
    with pytest.raises(ConfigError) as info:
        netpol.load_balanced_service_fields("legacy")
    (violation,) = info.value.violations
    assert (violation.key, violation.value) == ("gke-tpu-llm:cluster.dataplane", "legacy")
    assert "calico#6634" in violation.problem


@pytest.mark.parametrize(
    ("intent", "message"),
    [
        (netpol.Flow("x", netpol.roles("nobody"), netpol.ALL_PORTS, (netpol.SAME_NAMESPACE,), "w"), "no pod template"),
        (netpol.Flow("x", netpol.roles("api"), netpol.PortNames(("grpc",)), (netpol.SAME_NAMESPACE,), "w"), "named 'grpc'"),
        (netpol.Flow("x", netpol.roles("api"), netpol.ALL_PORTS, (), "w"), "no sources"),
        (netpol.ServiceClients("x", "missing", "w"), "no Service"),
        (netpol.Scrapes("x", "missing", "w"), "no PodMonitoring"),
    ],
)
def test_an_intent_naming_what_was_not_rendered_fails_the_plan(intent: netpol.Intent, message: str) -> None:
    objects = [_deployment([{"name": "web", "containerPort": 8080}])]
    with pytest.raises(netpol.NetworkPolicyError, match=message):
        netpol.render_network_policies(objects, [intent], namespace="ns", stack="s")


def test_policy_names_are_unique_per_namespace() -> None:
    objects = [_deployment([{"name": "web", "containerPort": 8080}])]
    flow = netpol.Flow("x", netpol.roles("api"), netpol.ALL_PORTS, (netpol.SAME_NAMESPACE,), "w")
    with pytest.raises(netpol.NetworkPolicyError, match="unique"):
        netpol.render_network_policies(objects, [flow, flow], namespace="ns", stack="s")


# ---------------------------------------------------------------- enforcement on the cluster, day 2


def _cluster_inputs(plan: Mapping[str, Any]) -> dict[str, Any]:
    (cluster,) = [r for r in plan["resources"] if r["type"] == steps.CLUSTER]
    return dict(cluster["inputs"])


def before_network_policies(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan of a stack created before NetworkPolicies existed: no dataplane choice, no policies."""
    old = copy.deepcopy(dict(plan))
    policy_types = {"kubernetes:networking.k8s.io/v1:NetworkPolicy", "gke-tpu-llm:netpol:NetworkPolicies"}
    old["resources"] = [r for r in old["resources"] if r["type"] not in policy_types]
    for r in old["resources"]:
        if r["type"] == steps.CLUSTER:
            for key in ("datapathProvider", "networkPolicy"):
                r["inputs"].pop(key, None)
            r["inputs"].get("addonsConfig", {}).pop("networkPolicyConfig", None)
    old["manifests"] = [m for m in old["manifests"] if m["kind"] != "NetworkPolicy"]
    return old


@pytest.mark.parametrize("stack", STACKS)
def test_new_clusters_enforce_policies_with_dataplane_v2(stack: str) -> None:
    inputs = _cluster_inputs(variant(stack, cluster__dataplane="v2"))  # the default (prod's file keeps legacy)
    assert inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    assert "networkPolicy" not in inputs, "Calico and Dataplane V2 are exclusive"
    assert "networkPolicyConfig" not in inputs["addonsConfig"]


def test_legacy_dataplane_enables_calico_and_its_addon() -> None:
    inputs = _cluster_inputs(variant("llama-405b", cluster__dataplane="legacy"))
    assert "datapathProvider" not in inputs, "unset keeps an existing cluster's dataplane (Optional+Computed)"
    assert inputs["networkPolicy"] == {"enabled": True, "provider": "CALICO"}
    assert inputs["addonsConfig"]["networkPolicyConfig"] == {"disabled": False}


def test_an_existing_cluster_is_replaced_by_v2_and_updated_in_place_by_legacy() -> None:
    head = variant("llama-405b")
    old = before_network_policies(head)
    replaced = compare_stack("llama-405b", old, head).prediction
    (cluster,) = [s for s in replaced.of("replace") if s.type == steps.CLUSTER]
    assert cluster.replacing == ("datapathProvider",)

    legacy = variant("llama-405b", cluster__dataplane="legacy")
    kept = compare_stack("llama-405b", before_network_policies(legacy), legacy).prediction
    assert not kept.of("replace")
    assert not kept.of("delete")
    (update,) = kept.of("update")
    assert update.type == steps.CLUSTER
    assert set(update.paths) == {"addonsConfig.networkPolicyConfig", "networkPolicy"}
    created = {s.name for s in kept.of("create") if s.kind == "NetworkPolicy"}
    flows = ("allow-jetstream-http", "allow-pathways-group", netpol.DEFAULT_DENY)
    assert created == {f"network-policies-{name}" for name in flows}


def test_prod_cannot_be_replaced_by_the_dataplane_by_accident() -> None:
    head = variant("llama-405b-prod", cluster__dataplane="v2")
    change = compare_stack("llama-405b-prod", before_network_policies(head), head)
    assert change.prediction.refused
    legacy = variant("llama-405b-prod", cluster__dataplane="legacy")
    assert not compare_stack("llama-405b-prod", before_network_policies(legacy), legacy).prediction.refused
