"""Who can reach each Service and Gateway a stack renders, and how it authenticates: read from the
rendered objects.

One line per Service and per Gateway (``plan`` prints them, the review repeats the ones reachable from
outside the VPC as warnings), each stating:

* where it is reachable from: a ``LoadBalancer`` without GKE's internal annotation, or a
  ``NodePort``, from outside the VPC; an internal one from the VPC and networks connected to it; a
  ``ClusterIP`` from inside the cluster only;
* who can connect: the sources the NetworkPolicies of the Service's pods admit on its ports
  (``components.tools.reach.service_clients``): address ranges (ipBlocks) and pods by namespace and labels;
* which paths are authenticated: the ``gke-tpu-llm/auth`` annotation the workloads set on a Service
  whose server checks credentials, and ``gke-tpu-llm/auth-paths`` when it checks them on some paths
  only (vLLM's API key: ``/v1``, ``/v2`` and ``/inference``), with the notable open paths in
  ``gke-tpu-llm/unauthenticated-paths``.

A Gateway (``gateway.networking.k8s.io/v1``) is a load balancer of GKE's: internal for GKE's internal
classes (the VPC), public for any other. Its line adds the HTTPRoute rules attached to it (their
matches: which paths, headers and hostnames reach which backend), the authentication in front of its
backends (Identity-Aware Proxy when every backend's ``GCPBackendPolicy`` enables it with an OAuth
client, else the model server's own, read from the Service in front of the same pods), and, for each
backend (an InferencePool or a Service), who its pods admit on the target ports: the gateway's
proxies (the proxy-only subnet), Google's health checks and the endpoint picker, as the
NetworkPolicies say (:func:`components.tools.reach.pool_clients`).

Pure functions over manifests; no Pulumi import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.addresses import EVERYONE, covers_everyone
from ..config.front_door import HEALTH_CHECK_RANGES
from ..policy.exposure_checks import INTERNAL_GATEWAY_CLASSES
from ..render.core import AUTH_ANNOTATION, AUTH_PATHS_ANNOTATION, INTERNAL_LB_ANNOTATION, OPEN_PATHS_ANNOTATION
from .reach import Clients, pool_clients, pool_pods, pool_ports, selected_pods, service_clients

__all__ = [
    "AUTH_ANNOTATION",
    "AUTH_PATHS_ANNOTATION",
    "EVERYONE",
    "IAP",
    "INTERNAL_LB_ANNOTATION",
    "OPEN_PATHS_ANNOTATION",
    "Backend",
    "Endpoint",
    "attached_routes",
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


GATEWAY_API = "gateway.networking.k8s.io/v1"
INFERENCE_GROUP = "inference.networking.k8s.io"
GKE_POLICY_API = "networking.gke.io/v1"
IAP = "iap"
"""``Endpoint.auth`` of a Gateway whose every backend is behind Identity-Aware Proxy."""
_RANGE_NAMES = {cidr: "Google health checks" for cidr in HEALTH_CHECK_RANGES}


def _named(cidr: str) -> str:
    return f" ({_RANGE_NAMES[cidr]})" if cidr in _RANGE_NAMES else ""


@dataclass(frozen=True)
class Backend:
    """One backend of a Gateway's routes: the pods behind it and who they admit on its ports."""

    kind: str
    """``InferencePool`` or ``Service``."""
    namespace: str
    name: str
    ports: tuple[int, ...]
    clients: Clients
    iap: bool
    """A ``GCPBackendPolicy`` targeting it enables IAP with an OAuth client id and secret."""

    def describe(self) -> str:
        ports = ",".join(map(str, self.ports))
        if self.clients.everyone:
            who = "any source"
        else:
            parts = []
            if self.clients.addresses:
                parts.append("addresses in " + ", ".join(a.describe() + _named(a.cidr) for a in self.clients.addresses))
            parts += [g.describe() for g in self.clients.groups]
            who = "; ".join(parts) or "no one"
        return f"{self.kind} {self.namespace}/{self.name}, whose pods admit on :{ports} only: {who}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "ports": list(self.ports),
            "clients": self.clients.to_dict(),
            "iap": self.iap,
        }


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
    gateway_class: str = ""
    """A Gateway's class (empty for a Service)."""
    listeners: tuple[str, ...] = ()
    """A Gateway's listeners as ``PROTOCOL :port``."""
    routes: tuple[str, ...] = ()
    """A Gateway's route rules: ``<matches> -> <backends>``."""
    backends: tuple[Backend, ...] = ()
    """What a Gateway's routes reach, with who their pods admit."""

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
        if self.auth == IAP and self.kind == "Gateway":
            return "authenticated by Identity-Aware Proxy (Google sign-in, OAuth client of the GCPBackendPolicy) on every path"
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
        if self.kind == "Gateway":
            return self._describe_gateway()
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

    def _describe_gateway(self) -> str:
        routes = "; ".join(self.routes) or "none attached"
        backends = "; ".join(b.describe() for b in self.backends) or "none"
        return (
            f"Gateway {self.namespace}/{self.name} ({self.gateway_class}) {', '.join(self.listeners)} is reachable from "
            f"{self.where} by: {self.who} — {self.authentication}; routes: {routes}; backends: {backends}"
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
            "gateway_class": self.gateway_class,
            "listeners": list(self.listeners),
            "routes": list(self.routes),
            "backends": [b.to_dict() for b in self.backends],
        }


def endpoints(manifests: Iterable[Mapping[str, Any]]) -> list[Endpoint]:
    """Every Service that selects pods, with who can reach it (ClusterIP ones included: their
    clients are pods, and the line says which), and every Gateway, with its routes and backends."""
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
    out += [_gateway(objects, obj) for obj in objects if obj.get("kind") == "Gateway" and obj.get("apiVersion") == GATEWAY_API]
    return sorted(out, key=lambda e: (e.namespace, e.name, e.kind))


# ---------------------------------------------------------------- gateways


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "default")), str(meta.get("name", ""))


def attached_routes(objects: Sequence[Mapping[str, Any]], gateway: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The HTTPRoutes whose ``parentRefs`` name ``gateway`` (a ref's namespace defaults to the route's)."""
    namespace, name = _meta(gateway)
    out = []
    for route in objects:
        if route.get("kind") != "HTTPRoute" or route.get("apiVersion") != GATEWAY_API:
            continue
        home, _ = _meta(route)
        for ref in (route.get("spec") or {}).get("parentRefs") or ():
            if ref.get("kind", "Gateway") == "Gateway" and (ref.get("namespace") or home, ref.get("name")) == (namespace, name):
                out.append(route)
                break
    return out


def _match(match: Mapping[str, Any]) -> str:
    path = match.get("path") or {"type": "PathPrefix", "value": "/"}
    parts = [f"{path.get('type', 'PathPrefix')} {path.get('value', '/')}"]
    parts += [f"header {h['name']}={h['value']}" for h in match.get("headers") or ()]
    if match.get("method"):
        parts.append(f"method {match['method']}")
    return " and ".join(parts)


def _backend_key(route_namespace: str, ref: Mapping[str, Any]) -> tuple[str, str, str]:
    pool = ref.get("group") == INFERENCE_GROUP and ref.get("kind") == "InferencePool"
    kind = "InferencePool" if pool else str(ref.get("kind", "Service"))
    return kind, str(ref.get("namespace") or route_namespace), str(ref.get("name", ""))


def _iap_targets(objects: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every backend a GCPBackendPolicy puts behind IAP: ``default.iap``
    enabled, with a client id and a secret (GKE rejects IAP without both: the CRD's ``iap`` text)."""
    out = set()
    for policy in objects:
        if policy.get("kind") != "GCPBackendPolicy" or policy.get("apiVersion") != GKE_POLICY_API:
            continue
        spec = policy.get("spec") or {}
        iap = (spec.get("default") or {}).get("iap") or {}
        if iap.get("enabled") is True and iap.get("clientID") and (iap.get("oauth2ClientSecret") or {}).get("name"):
            target = spec.get("targetRef") or {}
            namespace, _ = _meta(policy)
            out.add((str(target.get("kind", "")), str(target.get("namespace") or namespace), str(target.get("name", ""))))
    return out


def _find(objects: Sequence[Mapping[str, Any]], kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
    return next((o for o in objects if o.get("kind") == kind and _meta(o) == (namespace, name)), None)


def _backend(objects: Sequence[Mapping[str, Any]], key: tuple[str, str, str], iap: bool) -> Backend:
    kind, namespace, name = key
    obj = _find(objects, kind, namespace, name)
    if obj is None:  # not rendered here: assume anyone gets through
        return Backend(kind, namespace, name, (), Clients(everyone=True), iap)
    if kind == "InferencePool":
        return Backend(kind, namespace, name, pool_ports(obj), pool_clients(objects, obj), iap)
    ports = tuple(int(p.get("port", 0)) for p in (obj.get("spec") or {}).get("ports") or ())
    return Backend(kind, namespace, name, ports, service_clients(objects, obj), iap)


def _server_auth(objects: Sequence[Mapping[str, Any]], backends: Sequence[Backend]) -> Mapping[str, Any]:
    """The auth annotations of a Service in front of the same pods as one of the gateway's pools: the
    model server's own authentication, which requests through the gateway meet too."""
    for backend in backends:
        pool = _find(objects, backend.kind, backend.namespace, backend.name)
        if pool is None or backend.kind != "InferencePool":
            continue
        owners = {p.owner for p in pool_pods(objects, pool)}
        for svc in objects:
            if svc.get("kind") != "Service" or _meta(svc)[0] != backend.namespace:
                continue
            annotations = (svc.get("metadata") or {}).get("annotations") or {}
            selector = (svc.get("spec") or {}).get("selector")
            if AUTH_ANNOTATION in annotations and owners & {p.owner for p in selected_pods(objects, backend.namespace, selector)}:
                return annotations
    return {}


def _gateway(objects: Sequence[Mapping[str, Any]], gateway: Mapping[str, Any]) -> Endpoint:
    namespace, name = _meta(gateway)
    spec = gateway.get("spec") or {}
    gateway_class = str(spec.get("gatewayClassName", ""))
    listeners = spec.get("listeners") or ()
    iap_targets = _iap_targets(objects)
    routes: list[str] = []
    keys: list[tuple[str, str, str]] = []
    for route in attached_routes(objects, gateway):
        home, _ = _meta(route)
        hostnames = (route.get("spec") or {}).get("hostnames") or ()
        host = f"host {'|'.join(hostnames)} and " if hostnames else ""
        for rule in (route.get("spec") or {}).get("rules") or ():
            refs = [_backend_key(home, ref) for ref in rule.get("backendRefs") or ()]
            keys += [k for k in refs if k not in keys]
            # No matches: the API's default, every path (PathPrefix /).
            given: Sequence[Mapping[str, Any]] = rule.get("matches") or ({},)
            matches = " or ".join(host + _match(m) for m in given)
            targets = ", ".join(f"{k} {ns}/{n}" for k, ns, n in refs)
            routes.append(f"{matches} -> {targets}")
    backends = tuple(_backend(objects, key, key in iap_targets) for key in keys)
    behind_iap = bool(backends) and all(b.iap for b in backends)
    annotations = {} if behind_iap else _server_auth(objects, backends)
    return Endpoint(
        namespace=namespace,
        name=name,
        kind="Gateway",
        ports=tuple(int(listener.get("port", 0)) for listener in listeners),
        scope=VPC if gateway_class in INTERNAL_GATEWAY_CLASSES else OUTSIDE,
        source_ranges=(),
        # The load balancer's address: anyone who can route to it (the VPC, or the internet), pods included.
        clients=Clients(everyone=True),
        client_addresses_kept=True,  # the pods see the proxies; the client is in X-Forwarded-For
        node_ports=False,  # GKE's Gateway sends to pods through NEGs, not node ports
        auth=IAP if behind_iap else annotations.get(AUTH_ANNOTATION),
        auth_paths=() if behind_iap else _split(annotations.get(AUTH_PATHS_ANNOTATION)),
        open_paths=() if behind_iap else _split(annotations.get(OPEN_PATHS_ANNOTATION)),
        gateway_class=gateway_class,
        listeners=tuple(f"{listener.get('protocol', 'HTTP')} :{listener.get('port', 0)}" for listener in listeners),
        routes=tuple(routes),
        backends=backends,
    )


def warnings(manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per endpoint reachable from outside the VPC."""
    return [e.describe() for e in endpoints(manifests) if e.outside_vpc]
