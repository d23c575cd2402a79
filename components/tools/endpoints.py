"""Who can reach each Service a stack renders, and how it authenticates: read from the rendered objects.

One line per Service (``plan`` prints them, the review repeats the ones reachable from outside the
VPC as warnings), each stating:

* where it is reachable from: a ``LoadBalancer`` without GKE's internal annotation, or a
  ``NodePort``, from outside the VPC; an internal one from the VPC and networks connected to it; a
  ``ClusterIP`` from inside the cluster only;
* who can connect: the sources the NetworkPolicies of the Service's pods admit on its ports
  (``components.tools.reach.service_clients``): address ranges (ipBlocks) and pods by namespace and labels;
* which paths are authenticated: the ``gke-tpu-llm/auth`` annotation the workloads set on a Service
  whose server checks credentials, and ``gke-tpu-llm/auth-paths`` when it checks them on some paths
  only (vLLM's API key: ``/v1``, ``/v2`` and ``/inference``), with the notable open paths in
  ``gke-tpu-llm/unauthenticated-paths``.

Pure functions over manifests; no Pulumi import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config.addresses import EVERYONE, covers_everyone
from ..render.core import AUTH_ANNOTATION, AUTH_PATHS_ANNOTATION, INTERNAL_LB_ANNOTATION, OPEN_PATHS_ANNOTATION
from .reach import Clients, service_clients

__all__ = [
    "AUTH_ANNOTATION",
    "AUTH_PATHS_ANNOTATION",
    "EVERYONE",
    "INTERNAL_LB_ANNOTATION",
    "OPEN_PATHS_ANNOTATION",
    "Endpoint",
    "covers_everyone",
    "endpoints",
    "warnings",
]


OUTSIDE = "outside"
VPC = "vpc"
CLUSTER = "cluster"
_WHERE = {OUTSIDE: "outside the VPC", VPC: "inside the VPC only", CLUSTER: "inside the cluster only"}
_ANY_ADDRESS = {OUTSIDE: "anyone on the internet", VPC: "any address in the VPC or a network connected to it"}


def _split(value: Any) -> tuple[str, ...]:
    return tuple(p.strip() for p in str(value or "").split(",") if p.strip())


@dataclass(frozen=True)
class Endpoint:
    namespace: str
    name: str
    kind: str
    """``LoadBalancer``, ``NodePort`` or ``ClusterIP``."""
    ports: tuple[int, ...]
    scope: str
    """``outside`` (the VPC), ``vpc`` or ``cluster``: where a client must be to reach the Service."""
    source_ranges: tuple[str, ...]
    """The load balancer's ``loadBalancerSourceRanges`` (its VPC firewall rule)."""
    clients: Clients
    """Who the Service's pods admit on its ports (their NetworkPolicies)."""
    client_addresses_kept: bool
    """False for a load-balanced or node port whose forwarding node replaces the client's address
    (``externalTrafficPolicy: Cluster``): the pods then see a node, and their policies cannot tell
    the load balancer's clients apart."""
    node_ports: bool
    """A node port is open on every node (a NodePort, or a LoadBalancer that allocates them)."""
    auth: str | None
    auth_paths: tuple[str, ...] = ()
    open_paths: tuple[str, ...] = ()

    @property
    def outside_vpc(self) -> bool:
        return self.scope == OUTSIDE

    def _addresses(self) -> list[str]:
        ranges = self.clients.addresses
        if not ranges:
            return []
        if covers_everyone(a.cidr for a in ranges if not a.excepts) and self.scope in _ANY_ADDRESS:
            return [_ANY_ADDRESS[self.scope]]
        return [f"addresses in {', '.join(a.describe() for a in ranges)}"]

    @property
    def where(self) -> str:
        if self.scope == CLUSTER and (self.clients.everyone or self.clients.addresses):
            return "inside the cluster, and from the VPC at its pods' addresses"
        return _WHERE[self.scope]

    @property
    def who(self) -> str:
        """Who can connect: the admitted sources, in words."""
        if self.clients.everyone:
            if self.scope in _ANY_ADDRESS:
                return f"{_ANY_ADDRESS[self.scope]} and any pod of the cluster"
            return "any source"
        parts = self._addresses() + [g.describe() for g in self.clients.groups]
        if not parts:
            return "no one (every connection is refused; kubectl port-forward still works)"
        return "; ".join(parts)

    @property
    def authentication(self) -> str:
        if not self.auth:
            return "without authentication"
        if not self.auth_paths:
            return f"authenticated by {self.auth}"
        open_paths = f", e.g. {', '.join(self.open_paths)}" if self.open_paths else ""
        return (
            f"authenticated by {self.auth} on {', '.join(p + '/*' for p in self.auth_paths)} only; every other path answers "
            f"without it{open_paths}"
        )

    def describe(self) -> str:
        ports = ",".join(map(str, self.ports))
        notes = []
        if not self.client_addresses_kept:
            notes.append("externalTrafficPolicy Cluster: the pods see node addresses, so their policies cannot name the clients")
        if self.node_ports:
            notes.append("a node port is open on every node")
        note = f" ({'; '.join(notes)})" if notes else ""
        return (
            f"{self.kind} Service {self.namespace}/{self.name} :{ports} is reachable from {self.where} by: "
            f"{self.who}{note} — {self.authentication}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "kind": self.kind,
            "ports": list(self.ports),
            "scope": self.scope,
            "outside_vpc": self.outside_vpc,
            "source_ranges": list(self.source_ranges),
            "clients": self.clients.to_dict(),
            "client_addresses_kept": self.client_addresses_kept,
            "node_ports": self.node_ports,
            "auth": self.auth,
            "auth_paths": list(self.auth_paths),
            "open_paths": list(self.open_paths),
            "who": self.who,
            "authentication": self.authentication,
        }


def endpoints(manifests: Iterable[Mapping[str, Any]]) -> list[Endpoint]:
    """Every Service that selects pods, with who can reach it (ClusterIP ones included: their
    clients are pods, and the line says which)."""
    objects = list(manifests)
    out = []
    for obj in objects:
        if obj.get("kind") != "Service" or obj.get("apiVersion") != "v1":
            continue
        spec = obj.get("spec") or {}
        kind = str(spec.get("type", "ClusterIP"))
        if kind not in ("LoadBalancer", "NodePort", "ClusterIP") or (kind == "ClusterIP" and not spec.get("selector")):
            continue  # ExternalName, or an in-cluster Service in front of hand-managed endpoints
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        internal = kind == "LoadBalancer" and annotations.get(INTERNAL_LB_ANNOTATION) == "Internal"
        # A NodePort is reachable wherever the nodes' firewall lets it: outside unless private.
        # A ClusterIP has no address outside the cluster, but a VPC-native cluster's pod addresses are
        # routable in the VPC: ``Endpoint.where`` says so when the pods' policies let such clients in.
        scope = CLUSTER if kind == "ClusterIP" else VPC if internal else OUTSIDE
        external = kind != "ClusterIP"
        out.append(
            Endpoint(
                namespace=str(meta.get("namespace", "default")),
                name=str(meta.get("name", "")),
                kind=kind,
                ports=tuple(int(p.get("port", 0)) for p in spec.get("ports") or ()),
                scope=scope,
                source_ranges=tuple(spec.get("loadBalancerSourceRanges") or ()),
                # Without a selector its backends are not rendered here: assume anyone gets through.
                clients=service_clients(objects, obj) if spec.get("selector") else Clients(everyone=True),
                client_addresses_kept=not external or spec.get("externalTrafficPolicy") == "Local",
                node_ports=kind == "NodePort" or (kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True)),
                auth=annotations.get(AUTH_ANNOTATION),
                auth_paths=_split(annotations.get(AUTH_PATHS_ANNOTATION)),
                open_paths=_split(annotations.get(OPEN_PATHS_ANNOTATION)),
            )
        )
    return sorted(out, key=lambda e: (e.namespace, e.name))


def warnings(manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per endpoint reachable from outside the VPC."""
    return [e.describe() for e in endpoints(manifests) if e.outside_vpc]
