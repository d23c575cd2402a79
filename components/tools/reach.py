"""Who can open a connection to a pod: Kubernetes NetworkPolicy ingress, evaluated over rendered objects.

The plan's endpoint lines (``components.tools.endpoints``) list the clients of a Service's pods, and of
the pods behind a Gateway's InferencePool, with :func:`clients`,
and the tests probe the same policies with :func:`admits`: two readings of one set of semantics,
compared in ``tests/test_reach.py``. The semantics (Kubernetes "Network Policies" and the
``networking.k8s.io/v1`` API reference):

* A pod is isolated for ingress when a NetworkPolicy of its namespace selects it (``podSelector``)
  with ``Ingress`` in ``policyTypes`` (unset: ``Ingress``, plus ``Egress`` when the policy has egress
  rules). A pod that no such policy selects admits every connection.
* An isolated pod admits a connection when some ingress rule of some selecting policy admits it
  (policies add up, none subtracts): the rule's ``from`` is absent or empty, or one of its peers
  matches the source; and its ``ports`` is absent or empty, or one entry matches (a number, a range
  up to ``endPort``, or a name resolved on the receiving pod's own container ports; TCP unless set).
* Peers: ``podSelector`` alone selects pods of the policy's namespace; ``namespaceSelector`` alone,
  every pod of the namespaces it selects; both in one peer, pods matching both; ``ipBlock``, source
  addresses in ``cidr`` and in none of ``except``. Namespaces match on their labels, among which the
  API server always sets ``kubernetes.io/metadata.name`` to the name.
* An ipBlock names addresses outside the cluster. GKE Dataplane V2 is Cilium, whose CIDR rules "do
  not apply to traffic where both sides of the connection are either managed by Cilium or use an IP
  belonging to a node in the cluster" (Cilium docs, ``Documentation/policy/language.rst``): a pod of
  the cluster is admitted by pod and namespace selectors only, whatever its address. Calico (the
  ``legacy`` dataplane) also matches ipBlocks against pod addresses (projectcalico/calico#6634), so
  a stack with a load-balanced Service, whose policy is made of ipBlocks, is refused there
  (``components.config.gke_rules.load_balancer_dataplane_rules``).
* Traffic from the node a pod runs on (kubelet probes) is always admitted; it is not modelled.

Pure functions; no Pulumi import.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..render.core import pod_template_paths
from ..render.netpol import NAMESPACE_NAME_LABEL, pod_templates

Labels = tuple[tuple[str, str], ...]
"""Labels as sorted (key, value) pairs: hashable, comparable."""


def as_labels(mapping: Mapping[str, str] | None) -> Labels:
    return tuple(sorted((mapping or {}).items()))


# ---------------------------------------------------------------- label selectors


@dataclass(frozen=True)
class Selector:
    """A Kubernetes label selector (``matchLabels`` AND ``matchExpressions``); the empty one matches all."""

    match_labels: Labels = ()
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """(key, operator, values): In, NotIn, Exists, DoesNotExist."""

    @classmethod
    def parse(cls, selector: Mapping[str, Any]) -> Selector:
        expressions = tuple(
            (str(e["key"]), str(e["operator"]), tuple(sorted(str(v) for v in e.get("values") or ())))
            for e in selector.get("matchExpressions") or ()
        )
        return cls(as_labels(selector.get("matchLabels")), tuple(sorted(expressions)))

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for key, op, values in self.match_expressions:
            present = key in labels
            if op == "In" and not (present and labels[key] in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise ValueError(f"unknown label selector operator {op!r}")
        return True

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.match_labels]
        for key, op, values in self.match_expressions:
            listed = "|".join(values)
            parts.append({"In": f"{key} in {listed}", "NotIn": f"{key} not in {listed}", "Exists": key}.get(op, f"no {key}"))
        return ",".join(parts)


# ---------------------------------------------------------------- pods and sources


@dataclass(frozen=True)
class Pod:
    """The pods of one rendered pod template: their namespace, labels and container ports."""

    namespace: str
    labels: Labels
    ports: tuple[tuple[str, int, str], ...] = ()
    """(name, containerPort, protocol) of every container port."""
    owner: str = ""
    """``Kind/name:path`` of the object whose template this is."""

    def port_number(self, target: Any) -> int | None:
        """A Service ``targetPort`` or a policy port (number or container-port name) on these pods."""
        if isinstance(target, int):
            return target
        if isinstance(target, str) and target.isdigit():
            return int(target)
        found = {number for name, number, _ in self.ports if name == target}
        return found.pop() if len(found) == 1 else None


@dataclass(frozen=True)
class Source:
    """Who opens the connection: a pod of the cluster (``namespace`` set) or an address outside it."""

    namespace: str | None = None
    labels: Labels = ()
    address: str | None = None
    """An address outside the cluster (ignored for a pod: see the module docstring)."""
    namespace_labels: Labels = ()
    """Labels of the pod's namespace besides ``kubernetes.io/metadata.name``."""

    @classmethod
    def of(cls, pod: Pod) -> Source:
        return cls(namespace=pod.namespace, labels=pod.labels)


def pods(objects: Iterable[Mapping[str, Any]]) -> list[Pod]:
    """Every pod template of the objects (Deployments, Jobs, LeaderWorkerSets, JobSets, Ray, …)."""
    objects = list(objects)
    namespaces = sorted({str((o.get("metadata") or {}).get("namespace")) for o in objects if pod_template_paths(o)})
    return [
        Pod(
            namespace=namespace,
            labels=as_labels(template.labels),
            ports=tuple((str(p.get("name", "")), int(p["containerPort"]), str(p.get("protocol", "TCP"))) for p in template.ports),
            owner=template.owner,
        )
        for namespace in namespaces
        for template in pod_templates(objects, namespace)
    ]


def network_policies(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [o for o in objects if o.get("kind") == "NetworkPolicy" and o.get("apiVersion") == "networking.k8s.io/v1"]


# ---------------------------------------------------------------- evaluation


def _ingress_types(spec: Mapping[str, Any]) -> bool:
    types = spec.get("policyTypes")
    if types is None:  # the API server's default
        return True
    return "Ingress" in types


def isolating(policies: Sequence[Mapping[str, Any]], pod: Pod) -> list[Mapping[str, Any]]:
    """The policies that select ``pod`` for ingress (none: the pod admits everything)."""
    labels = dict(pod.labels)
    return [
        p
        for p in policies
        if (p.get("metadata") or {}).get("namespace") == pod.namespace
        and _ingress_types(p.get("spec") or {})
        and Selector.parse((p.get("spec") or {}).get("podSelector") or {}).matches(labels)
    ]


def _in_block(address: str, block: Mapping[str, Any]) -> bool:
    ip = ipaddress.ip_address(address)
    network = ipaddress.ip_network(block["cidr"], strict=False)
    if ip.version != network.version or ip not in network:
        return False
    return not any(
        ip.version == (ex := ipaddress.ip_network(e, strict=False)).version and ip in ex for e in block.get("except") or ()
    )


def _peer_admits(peer: Mapping[str, Any], policy_namespace: str, source: Source) -> bool:
    if "ipBlock" in peer:
        # Addresses outside the cluster only: a pod never matches an ipBlock (module docstring).
        return source.namespace is None and source.address is not None and _in_block(source.address, peer["ipBlock"])
    if source.namespace is None:
        return False
    if "namespaceSelector" in peer:
        namespace_labels = {**dict(source.namespace_labels), NAMESPACE_NAME_LABEL: source.namespace}
        if not Selector.parse(peer["namespaceSelector"] or {}).matches(namespace_labels):
            return False
    elif source.namespace != policy_namespace:
        return False
    return "podSelector" not in peer or Selector.parse(peer["podSelector"] or {}).matches(dict(source.labels))


def _port_admits(rule_ports: Sequence[Mapping[str, Any]] | None, pod: Pod, port: int, protocol: str) -> bool:
    if not rule_ports:
        return True
    for entry in rule_ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        if "port" not in entry:
            return True
        wanted = entry["port"]
        if isinstance(wanted, str) and not wanted.isdigit():
            # A named port is the receiving pod's container port of that name and protocol.
            if any(name == wanted and number == port and proto == protocol for name, number, proto in pod.ports):
                return True
        elif int(wanted) <= port <= int(entry.get("endPort", wanted)):
            return True
    return False


def _rules(policies: Sequence[Mapping[str, Any]], pod: Pod) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for policy in isolating(policies, pod):
        for rule in (policy.get("spec") or {}).get("ingress") or ():
            yield str(policy["metadata"]["namespace"]), rule


def admits(policies: Sequence[Mapping[str, Any]], source: Source, pod: Pod, port: int, protocol: str = "TCP") -> bool:
    """Whether ``source`` may open a connection to ``pod`` on ``port``."""
    if not isolating(policies, pod):
        return True
    for namespace, rule in _rules(policies, pod):
        peers = rule.get("from")
        if peers and not any(_peer_admits(peer, namespace, source) for peer in peers):
            continue
        if _port_admits(rule.get("ports"), pod, port, protocol):
            return True
    return False


# ---------------------------------------------------------------- who is admitted, as a list


@dataclass(frozen=True)
class AddressRange:
    """Addresses outside the cluster that a policy admits: ``cidr`` minus ``excepts``."""

    cidr: str
    excepts: tuple[str, ...] = ()

    def describe(self) -> str:
        return self.cidr + (f" except {', '.join(self.excepts)}" if self.excepts else "")


@dataclass(frozen=True)
class PodGroup:
    """Pods a policy admits: those matching ``pods`` in the namespaces matching ``namespaces``."""

    namespaces: Selector
    pods: Selector

    def describe(self) -> str:
        names = dict(self.namespaces.match_labels)
        if set(names) == {NAMESPACE_NAME_LABEL} and not self.namespaces.match_expressions:
            where = f"namespace {names[NAMESPACE_NAME_LABEL]}"
        elif self.namespaces.empty:
            where = "every namespace"
        else:
            where = f"namespaces with {self.namespaces.describe()}"
        who = "every pod" if self.pods.empty else f"pods with {self.pods.describe()}"
        return f"{who} of {where}"


@dataclass(frozen=True)
class Clients:
    """Every source a pod (or the pods behind a Service) admits on a port."""

    everyone: bool
    """Some selected pod is not isolated, or a rule admitting the port has no ``from``."""
    addresses: tuple[AddressRange, ...] = ()
    groups: tuple[PodGroup, ...] = ()

    def union(self, other: Clients) -> Clients:
        groups = set(self.groups) | set(other.groups)
        # Every pod of some namespaces already includes any narrower group of the same namespaces.
        whole = {g.namespaces for g in groups if g.pods.empty}
        groups = {g for g in groups if g.pods.empty or g.namespaces not in whole}
        return Clients(
            self.everyone or other.everyone,
            tuple(sorted(set(self.addresses) | set(other.addresses), key=lambda a: (a.cidr, a.excepts))),
            tuple(sorted(groups, key=lambda g: g.describe())),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "everyone": self.everyone,
            "addresses": [{"cidr": a.cidr, "except": list(a.excepts)} for a in self.addresses],
            "pods": [g.describe() for g in self.groups],
        }


NOBODY = Clients(everyone=False)


def _group(peer: Mapping[str, Any], policy_namespace: str) -> PodGroup:
    if "namespaceSelector" in peer:
        namespaces = Selector.parse(peer["namespaceSelector"] or {})
    else:
        namespaces = Selector(((NAMESPACE_NAME_LABEL, policy_namespace),))
    return PodGroup(namespaces, Selector.parse(peer.get("podSelector") or {}))


def clients(policies: Sequence[Mapping[str, Any]], pod: Pod, port: int, protocol: str = "TCP") -> Clients:
    """Who ``pod`` admits on ``port``: the peers of every rule that admits the port, in one list."""
    if not isolating(policies, pod):
        return Clients(everyone=True)
    out = NOBODY
    for namespace, rule in _rules(policies, pod):
        if not _port_admits(rule.get("ports"), pod, port, protocol):
            continue
        peers = rule.get("from")
        if not peers:
            return Clients(everyone=True)
        addresses = tuple(
            AddressRange(str(p["ipBlock"]["cidr"]), tuple(str(e) for e in p["ipBlock"].get("except") or ()))
            for p in peers
            if "ipBlock" in p
        )
        groups = tuple(_group(p, namespace) for p in peers if "ipBlock" not in p)
        out = out.union(Clients(False, addresses, groups))
    return out


def selected_pods(objects: Iterable[Mapping[str, Any]], namespace: str, match_labels: Mapping[str, str] | None) -> list[Pod]:
    """The rendered pods of ``namespace`` whose labels include ``match_labels`` (a Service's or an
    InferencePool's selector; none without one)."""
    if not match_labels:
        return []
    wanted = Selector(as_labels(match_labels))
    return [p for p in pods(objects) if p.namespace == namespace and wanted.matches(dict(p.labels))]


def service_pods(objects: Iterable[Mapping[str, Any]], service: Mapping[str, Any]) -> list[Pod]:
    """The rendered pods a Service selects (none without a selector)."""
    meta = service.get("metadata") or {}
    return selected_pods(objects, str(meta.get("namespace", "default")), (service.get("spec") or {}).get("selector"))


def pool_pods(objects: Iterable[Mapping[str, Any]], pool: Mapping[str, Any]) -> list[Pod]:
    """The rendered pods an InferencePool (``inference.networking.k8s.io/v1``) selects: its
    ``spec.selector.matchLabels``, in its own namespace (the API allows no other)."""
    meta = pool.get("metadata") or {}
    selector = ((pool.get("spec") or {}).get("selector") or {}).get("matchLabels")
    return selected_pods(objects, str(meta.get("namespace", "default")), selector)


def pool_ports(pool: Mapping[str, Any]) -> tuple[int, ...]:
    """An InferencePool's ``spec.targetPorts`` (the endpoint picker addresses each as podIP:port)."""
    return tuple(int(p["number"]) for p in (pool.get("spec") or {}).get("targetPorts") or ())


def pool_clients(objects: Sequence[Mapping[str, Any]], pool: Mapping[str, Any]) -> Clients:
    """Who can connect to the pods an InferencePool selects on its target ports (those admitted by at
    least one of them), as :func:`service_clients` reads a Service."""
    policies = network_policies(objects)
    out = NOBODY
    for pod in pool_pods(objects, pool):
        for number in pool_ports(pool):
            out = out.union(clients(policies, pod, number))
    return out


def service_clients(objects: Sequence[Mapping[str, Any]], service: Mapping[str, Any]) -> Clients:
    """Who can connect to the pods behind ``service`` on the ports it targets (those admitted by at
    least one of its pods: a client that reaches one backend reaches the Service)."""
    policies = network_policies(objects)
    out = NOBODY
    for pod in service_pods(objects, service):
        for port in (service.get("spec") or {}).get("ports") or ():
            number = pod.port_number(port.get("targetPort", port.get("port")))
            if number is not None:
                out = out.union(clients(policies, pod, number, str(port.get("protocol", "TCP"))))
    return out
