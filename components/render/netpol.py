"""NetworkPolicies of a workload namespace, compiled from its rendered objects and its flow intents.

Every workload namespace gets ``default-deny-ingress`` plus one ``allow-<flow>`` policy per flow the
workload declares. A workload declares *who talks to whom and why* once, in its own render module
(``network_intents``); the pods, their labels and the port numbers are read here from the rendered
objects, never typed twice:

* ``Flow`` — a role (the ``app.kubernetes.io/component`` label of a pod template) receives traffic
  on container ports chosen by *name* (``PortNames``) or on every port (``ALL_PORTS``: runtimes
  that open ports no container declares) from the listed sources.
* ``ServiceClients`` — a Service's clients reach the ports it targets (``targetPort`` resolved against
  the selected pods' container ports). A ``ClusterIP`` Service's clients are the pods of its
  namespace; a ``LoadBalancer`` Service's are the addresses its load balancer admits (below).
* ``Scrapes`` — Managed Prometheus collectors reach the ports a ``PodMonitoring`` scrapes.

Sources: ``Roles`` (pods of this workload), ``SAME_NAMESPACE``, ``InNamespace`` (pods of another
namespace, by namespace name and optional pod labels), ``IpBlock`` (addresses outside the cluster)
and ``ANYWHERE`` (no ``from``: kept for the metrics adapter, which the control plane calls from an
address no selector names; a serving port never gets it).

How a load-balanced port names its clients: a GKE passthrough load balancer delivers the client's
packet to a node, and with ``externalTrafficPolicy: Cluster`` (the default) the node that forwards it
to the pod replaces the client's address with its own (SNAT), so no policy could tell clients apart.
Every load-balanced Service is therefore rendered with ``externalTrafficPolicy: Local``
(:func:`load_balanced_service_fields`): the node delivers only to its own pods and keeps the
client's address (Kubernetes ServiceSpec: "without masquerading the client source IP"), and the
policy admits the Service's ``loadBalancerSourceRanges`` as ``ipBlock``s; with no ranges, every
address outside the cluster (``0.0.0.0/0``), which an internal load balancer and the VPC's routes
bound to the VPC and the networks connected to it. In-cluster clients are admitted by their pod
labels only (the benchmark Job: ``components.render.benchmark``), because an ipBlock never admits a
pod of the cluster on GKE Dataplane V2 (``components.tools.reach``). The same fields turn off node ports
(``allocateLoadBalancerNodePorts: false``): GKE's passthrough load balancers forward to the Service
``port`` and health-check ``healthCheckNodePort``, never a node port (kubernetes/ingress-gce
``pkg/l4/resources/forwarding_rules.go``: ``utils.GetPorts`` lists ``ServicePort.Port``;
kubernetes/cloud-provider-gcp ``providers/gce/gce_loadbalancer_internal.go``, ``getPortsAndProtocol``).
The health checks (35.191.0.0/16, 130.211.0.0/22) probe that health-check port, which the node
itself answers (kube-proxy, or GKE Dataplane V2's agent), not the pod, so they need no rule.

Kubelet probes need no rule either: traffic from the node a pod runs on is always allowed
(Kubernetes "Network Policies": "traffic to and from the node where a Pod is running is always
allowed"), and ``kubectl port-forward`` enters the pod's network namespace through the kubelet.

Pure functions; no Pulumi import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..config.errors import rules_error
from ..config.gke_rules import load_balancer_dataplane_rules
from .core import common_labels, get_path, pod_template_paths

API_VERSION = "networking.k8s.io/v1"
ROLE_LABEL = "app.kubernetes.io/component"
INSTANCE_LABEL = "app.kubernetes.io/instance"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace (immutable, equal to the name)."""
FLOW_ANNOTATION = "gke-tpu-llm/flow"
"""Why a policy exists, in words, on the object (review and goldens show it)."""
DEFAULT_DENY = "default-deny-ingress"

GMP_NAMESPACE = "gmp-system"
GMP_COLLECTOR_LABELS: Mapping[str, str] = {"app.kubernetes.io/name": "collector"}
"""Managed Prometheus collectors: the ``collector`` DaemonSet in ``gmp-system``, pod network (not
hostNetwork), pod label ``app.kubernetes.io/name: collector`` (GoogleCloudPlatform/prometheus-engine
``manifests/operator.yaml``, collector DaemonSet, whose selector label "DO NOT MODIFY")."""
KUBE_SYSTEM = "kube-system"


# ---------------------------------------------------------------- vocabulary


@dataclass(frozen=True)
class Roles:
    """Pods of this workload whose ``app.kubernetes.io/component`` is one of ``names``."""

    names: tuple[str, ...]


def roles(*names: str) -> Roles:
    return Roles(tuple(names))


@dataclass(frozen=True)
class InNamespace:
    """Pods of another namespace (all of them, or those with ``pod_labels``)."""

    namespace: str
    pod_labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class IpBlock:
    """Addresses outside the cluster (how a CIDR matches pod or node addresses is up to the dataplane)."""

    cidr: str


@dataclass(frozen=True)
class _SameNamespace:
    """Every pod of the policy's namespace."""


@dataclass(frozen=True)
class _Anywhere:
    """Any source: pods of every namespace, nodes and addresses outside the cluster."""


ALL_ADDRESSES = "0.0.0.0/0"
"""The ipBlock of a load-balanced Service without source ranges: every address outside the cluster."""
SAME_NAMESPACE: Final = _SameNamespace()
ANYWHERE: Final = _Anywhere()
GMP_COLLECTORS: Final = InNamespace(GMP_NAMESPACE, tuple(sorted(GMP_COLLECTOR_LABELS.items())))

Source = Roles | InNamespace | IpBlock | _SameNamespace | _Anywhere


@dataclass(frozen=True)
class PortNames:
    """Container ports, by their ``name``, of the receiving pods."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class PortNamesAndRange:
    """Container ports by name plus one numeric range (a policy ``port`` with ``endPort``): sockets a
    runtime binds to port 0 land in the kernel's ephemeral range, which no container port can name."""

    names: tuple[str, ...]
    first: int
    last: int


@dataclass(frozen=True)
class _AllPorts:
    """Every port, declared or not (runtimes that open ports of their own choosing)."""


ALL_PORTS: Final = _AllPorts()
PortSelection = PortNames | PortNamesAndRange | _AllPorts


@dataclass(frozen=True)
class Flow:
    name: str
    """Policy name suffix (``allow-<name>``)."""
    to: Roles
    ports: PortSelection
    sources: tuple[Source, ...]
    why: str


@dataclass(frozen=True)
class ServiceClients:
    """The clients of Service ``service`` reach the pods it selects on the ports it targets."""

    name: str
    service: str
    why: str
    sources: tuple[Source, ...] | None = None
    """None derives them from the Service: ClusterIP → the namespace's pods; LoadBalancer or NodePort
    (``externalTrafficPolicy: Local`` required, see the module docstring) → the Service's
    ``loadBalancerSourceRanges`` as ``IpBlock``s, or every address outside the cluster without them."""


@dataclass(frozen=True)
class Scrapes:
    """Managed Prometheus collectors reach the endpoints of PodMonitoring ``monitoring``."""

    name: str
    monitoring: str
    why: str


Intent = Flow | ServiceClients | Scrapes


# ---------------------------------------------------------------- rendered pods


@dataclass(frozen=True)
class PodTemplate:
    """A pod template found in the rendered objects: where it came from, its labels and ports."""

    owner: str
    labels: Mapping[str, str]
    ports: tuple[Mapping[str, Any], ...]
    """Every container port the template declares."""

    @property
    def role(self) -> str:
        return self.labels.get(ROLE_LABEL, "")


def pod_templates(objects: Iterable[Mapping[str, Any]], namespace: str) -> list[PodTemplate]:
    """Every pod template of the objects in ``namespace`` (Deployments, Jobs, LWS, JobSet, Ray, …)."""
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != namespace:
            continue
        for path in pod_template_paths(obj):
            template = get_path(obj, path)
            spec = template.get("spec") or {}
            ports = [p for container in spec.get("containers") or [] for p in container.get("ports") or []]
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            owner = f"{obj.get('kind')}/{meta.get('name')}:{'.'.join(str(p) for p in path[1:])}"
            out.append(PodTemplate(owner=owner, labels=labels, ports=tuple(ports)))
    return out


# ---------------------------------------------------------------- load-balanced Services


LOAD_BALANCED_FIELDS: Mapping[str, Any] = {"externalTrafficPolicy": "Local", "allocateLoadBalancerNodePorts": False}


def load_balanced_service_fields(dataplane: str) -> dict[str, Any]:
    """The ``spec`` fields every load-balanced serving Service gets, so that its NetworkPolicy can
    name the load balancer's clients and no node port opens beside it (module docstring).

    The stack config refuses such a Service on the ``legacy`` dataplane
    (``components.config.gke_rules.load_balancer_dataplane_rules``, in the kinds' ``stack_rules``); the
    same rule is raised here as a ``ConfigError`` should a config ever get this far."""
    problems = load_balancer_dataplane_rules("cluster.dataplane", dataplane)
    if problems:
        raise rules_error(problems)
    return dict(LOAD_BALANCED_FIELDS)


# ---------------------------------------------------------------- compiling


class NetworkPolicyError(ValueError):
    """An intent names a role, port, Service or PodMonitoring the rendered objects do not have."""


def _find(objects: Iterable[Mapping[str, Any]], kind: str, name: str, namespace: str) -> Mapping[str, Any]:
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == kind and meta.get("name") == name and meta.get("namespace") == namespace:
            return obj
    raise NetworkPolicyError(f"no {kind} {namespace}/{name} among the rendered objects")


def _templates_of(templates: Sequence[PodTemplate], role_names: Iterable[str]) -> list[PodTemplate]:
    out = []
    for role in role_names:
        found = [t for t in templates if t.role == role]
        if not found:
            known = sorted({t.role for t in templates})
            raise NetworkPolicyError(f"no pod template with {ROLE_LABEL}={role!r} (rendered roles: {known})")
        out += found
    return out


def _selector(templates: Sequence[PodTemplate], role_names: Sequence[str]) -> dict[str, Any]:
    """Label selector for the pods of these roles: their shared instance label and the roles."""
    instances = {t.labels.get(INSTANCE_LABEL) for t in _templates_of(templates, role_names)}
    if len(instances) != 1 or None in instances:
        raise NetworkPolicyError(f"roles {list(role_names)} do not share one {INSTANCE_LABEL} label: {instances}")
    instance = str(next(iter(instances)))
    names = sorted(set(role_names))
    if len(names) == 1:
        return {"matchLabels": {INSTANCE_LABEL: instance, ROLE_LABEL: names[0]}}
    return {
        "matchLabels": {INSTANCE_LABEL: instance},
        "matchExpressions": [{"key": ROLE_LABEL, "operator": "In", "values": names}],
    }


def _port(number: int, protocol: str | None) -> dict[str, Any]:
    return {"protocol": protocol or "TCP", "port": number}


def _resolve_ports(templates: Sequence[PodTemplate], selection: PortSelection) -> list[dict[str, Any]] | None:
    """Policy ``ports`` for a selection against the receiving pods (None = every port)."""
    if isinstance(selection, _AllPorts):
        return None
    extra = (
        [{"protocol": "TCP", "port": selection.first, "endPort": selection.last}]
        if isinstance(selection, PortNamesAndRange)
        else []
    )
    declared = [p for t in templates for p in t.ports]
    chosen = []
    for name in selection.names:
        match = [p for p in declared if p.get("name") == name]
        if not match:
            raise NetworkPolicyError(f"no container port named {name!r} on {[t.owner for t in templates]}")
        chosen += match
    return _unique([*(_port(int(p["containerPort"]), p.get("protocol")) for p in chosen), *extra])


def _unique(ports: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for p in ports:
        seen.setdefault((p["protocol"], p["port"]), p)
    return sorted(seen.values(), key=lambda p: (p["port"], p["protocol"]))


def _target_port(templates: Sequence[PodTemplate], target: Any, where: str) -> int:
    """A Service or PodMonitoring port reference (number or container-port name) as a number."""
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    numbers = {int(p["containerPort"]) for t in templates for p in t.ports if p.get("name") == target}
    if len(numbers) != 1:
        raise NetworkPolicyError(f"{where} targets port {target!r}, which the selected pods declare {len(numbers)} times")
    return numbers.pop()


def _selected(templates: Sequence[PodTemplate], selector: Mapping[str, str], where: str) -> list[PodTemplate]:
    found = [t for t in templates if all(t.labels.get(k) == v for k, v in selector.items())]
    if not found:
        raise NetworkPolicyError(f"{where} selects no rendered pod ({dict(selector)})")
    return found


def _peer(source: Source, templates: Sequence[PodTemplate]) -> dict[str, Any] | None:
    if isinstance(source, _Anywhere):
        return None
    if isinstance(source, _SameNamespace):
        return {"podSelector": {}}
    if isinstance(source, Roles):
        return {"podSelector": _selector(templates, source.names)}
    if isinstance(source, IpBlock):
        return {"ipBlock": {"cidr": source.cidr}}
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: source.namespace}},
        "podSelector": {"matchLabels": dict(source.pod_labels)} if source.pod_labels else {},
    }


def _policy(
    name: str,
    namespace: str,
    stack: str,
    why: str,
    selector: Mapping[str, Any],
    sources: Sequence[Source],
    ports: list[dict[str, Any]] | None,
    templates: Sequence[PodTemplate],
) -> dict[str, Any]:
    if not sources:
        raise NetworkPolicyError(f"flow {name!r} has no sources")
    rule: dict[str, Any] = {}
    if not any(isinstance(s, _Anywhere) for s in sources):
        peers = [_peer(s, templates) for s in sources]
        rule["from"] = [p for p in peers if p is not None]
    if ports is not None:
        rule["ports"] = ports
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": f"allow-{name}",
            "namespace": namespace,
            "labels": common_labels(stack, "network-policy"),
            "annotations": {FLOW_ANNOTATION: why},
        },
        "spec": {"podSelector": dict(selector), "policyTypes": ["Ingress"], "ingress": [rule]},
    }


def _service_clients(spec: Mapping[str, Any], where: str) -> tuple[Source, ...]:
    kind = spec.get("type", "ClusterIP")
    if kind not in ("LoadBalancer", "NodePort"):
        return (SAME_NAMESPACE,)
    if spec.get("externalTrafficPolicy") != "Local":
        raise NetworkPolicyError(
            f"{where} is a {kind} with externalTrafficPolicy {spec.get('externalTrafficPolicy', 'Cluster')}: the "
            "forwarding node replaces its clients' addresses with its own, so no policy can name them; render it with "
            "load_balanced_service_fields (externalTrafficPolicy: Local)"
        )
    return tuple(IpBlock(cidr) for cidr in spec.get("loadBalancerSourceRanges") or [ALL_ADDRESSES])


def _compile(
    intent: Intent, objects: Sequence[Mapping[str, Any]], templates: Sequence[PodTemplate], namespace: str, stack: str
) -> dict[str, Any]:
    if isinstance(intent, Flow):
        receivers = _templates_of(templates, intent.to.names)
        return _policy(
            intent.name,
            namespace,
            stack,
            intent.why,
            _selector(templates, intent.to.names),
            intent.sources,
            _resolve_ports(receivers, intent.ports),
            templates,
        )
    if isinstance(intent, ServiceClients):
        service = _find(objects, "Service", intent.service, namespace)
        spec = service.get("spec") or {}
        where = f"Service {namespace}/{intent.service}"
        receivers = _selected(templates, spec.get("selector") or {}, where)
        ports = _unique(
            _port(_target_port(receivers, p.get("targetPort", p.get("port")), where), p.get("protocol"))
            for p in spec.get("ports") or []
        )
        sources = intent.sources if intent.sources is not None else _service_clients(spec, where)
        role_names = sorted({t.role for t in receivers})
        return _policy(
            intent.name, namespace, stack, intent.why, _selector(templates, role_names), sources, ports, templates
        )
    monitoring = _find(objects, "PodMonitoring", intent.monitoring, namespace)
    spec = monitoring.get("spec") or {}
    where = f"PodMonitoring {namespace}/{intent.monitoring}"
    receivers = _selected(templates, (spec.get("selector") or {}).get("matchLabels") or {}, where)
    ports = _unique(_port(_target_port(receivers, e.get("port"), where), "TCP") for e in spec.get("endpoints") or [])
    role_names = sorted({t.role for t in receivers})
    return _policy(
        intent.name, namespace, stack, intent.why, _selector(templates, role_names), (GMP_COLLECTORS,), ports, templates
    )


def render_default_deny(namespace: str, *, stack: str) -> dict[str, Any]:
    """Isolate every pod of the namespace for ingress: only the ``allow-*`` flows get through."""
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": DEFAULT_DENY,
            "namespace": namespace,
            "labels": common_labels(stack, "network-policy"),
            "annotations": {
                FLOW_ANNOTATION: "every pod of the namespace is isolated for ingress; the allow-* policies admit its flows"
            },
        },
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def render_network_policies(
    objects: Sequence[Mapping[str, Any]], intents: Sequence[Intent], *, namespace: str, stack: str
) -> list[dict[str, Any]]:
    """The default deny of ``namespace`` followed by one policy per intent (raises
    ``NetworkPolicyError`` when an intent names something the rendered objects do not have)."""
    templates = pod_templates(objects, namespace)
    policies = [_compile(intent, objects, templates, namespace, stack) for intent in intents]
    names = [p["metadata"]["name"] for p in policies]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates or DEFAULT_DENY in names:
        raise NetworkPolicyError(f"policy names must be unique per namespace: {duplicates or [DEFAULT_DENY]}")
    return [render_default_deny(namespace, stack=stack), *policies]
