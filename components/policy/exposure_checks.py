"""Policy rules on what a stack exposes: public load balancers and VPC firewalls admit a bounded,
summed public address space and are authenticated; Ingresses are internal; Gateways are internal, or
GKE external ones serving HTTPS only with every backend their routes reach behind Identity-Aware
Proxy; routes attach only to the stack's own Gateways. Registered by ``components.policy.checks`` (``RULES``,
``STACK_RULES``); the module docstring there says how rules read a resource.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .resource_props import Resource, annotations_of, as_mapping, get, indexed, k8s_kind, known_items

INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
"""GKE annotation (value ``Internal``) that makes a LoadBalancer Service VPC-internal."""
AUTH_ANNOTATION = "gke-tpu-llm/auth"
"""Annotation the workloads set on a Service whose server authenticates its clients; the value names
the mechanism (``api-key``, ``iap``, ...). Same key as ``components.tools.endpoints`` (compared in a test)."""


# --------------------------------------------------------------------------- address space

MAX_PUBLIC_IPV4 = 2**16
"""Most public IPv4 addresses a client list may admit in total: a /16 (65,536), the largest block one
organisation's offices, NAT gateways or partners typically hold. A list admitting more is not a
list of clients but the internet in pieces (``0.0.0.0/1`` + ``128.0.0.0/1``, or 256 /8s)."""
MAX_PUBLIC_IPV6 = 2**96
"""Most public IPv6 addresses a client list may admit in total: a /32, the allocation a regional
registry gives a whole provider (RIPE NCC "IPv6 Address Allocation and Assignment Policy", Minimum
Allocation)."""
_NON_PUBLIC_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network" (RFC 791)
        "10.0.0.0/8",  # private (RFC 1918)
        "100.64.0.0/10",  # shared address space, carrier-grade NAT (RFC 6598)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local (RFC 3927)
        "172.16.0.0/12",  # private (RFC 1918)
        "192.168.0.0/16",  # private (RFC 1918)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved (RFC 1112)
    )
)
"""IPv4 space no internet client connects from: admitting it widens nothing beyond the VPC."""
_NON_PUBLIC_V6 = tuple(ipaddress.IPv6Network(n) for n in ("::1/128", "fc00::/7", "fe80::/10", "ff00::/8"))
_V4_EMBEDDING = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::ffff:0:0/96",  # IPv4-mapped (RFC 4291 §2.5.5.2)
        "::/96",  # IPv4-compatible, deprecated (RFC 4291 §2.5.5.1)
        "64:ff9b::/96",  # NAT64 well-known prefix (RFC 6052)
    )
)
"""IPv6 prefixes whose last 32 bits are an IPv4 address: a range inside one admits those IPv4
clients too, so it is counted as IPv4 space as well (``::ffff:0:0/96`` is the whole IPv4 internet)."""


@dataclass(frozen=True)
class AddressSpace:
    """What a list of client CIDRs admits, overlaps collapsed."""

    public_v4: int
    public_v6: int
    not_cidrs: tuple[str, ...]
    """Entries that are not CIDR networks (a bare address included: the APIs want ``/32``)."""

    def problems(self, where: str) -> list[str]:
        out = [f"{where}: {entry!r} is not a CIDR" for entry in self.not_cidrs]
        if self.public_v4 > MAX_PUBLIC_IPV4:
            out.append(
                f"{where} admit {self.public_v4:,} public IPv4 addresses in total, more than a /16 "
                f"({MAX_PUBLIC_IPV4:,}); list the client CIDRs"
            )
        if self.public_v6 > MAX_PUBLIC_IPV6:
            # IPv6 counts are too long to read: say which prefix they are at least as large as.
            size = 128 - (self.public_v6.bit_length() - 1)
            out.append(f"{where} admit at least a /{size} of public IPv6 space in total, more than a /32; list the client CIDRs")
        return out


def _public_count(networks: Sequence[Any], excluded: Sequence[Any]) -> int:
    total = 0
    for network in ipaddress.collapse_addresses(networks):
        remaining = [network]
        for block in excluded:
            kept = []
            for net in remaining:
                if net.subnet_of(block):
                    continue
                if block.subnet_of(net):
                    kept.extend(net.address_exclude(block))
                else:
                    kept.append(net)  # disjoint: CIDR blocks either nest or do not meet
            remaining = kept
        total += sum(net.num_addresses for net in remaining)
    return total


def public_address_space(cidrs: Iterable[Any]) -> AddressSpace:
    """The public address space a client list admits: every entry summed, overlaps collapsed
    (``ipaddress.collapse_addresses``), private and special-purpose space left out, IPv6 ranges that
    embed IPv4 addresses counted as IPv4 too."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    bad: list[str] = []
    for entry in cidrs:
        text = str(entry).strip()
        try:
            if "/" not in text:
                raise ValueError(text)
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            bad.append(text)
            continue
        if isinstance(network, ipaddress.IPv4Network):
            v4.append(network)
            continue
        v6.append(network)
        for embedding in _V4_EMBEDDING:
            if network.overlaps(embedding):
                inner = network if network.subnet_of(embedding) else embedding
                v4.append(ipaddress.IPv4Network((int(inner.network_address) & 0xFFFFFFFF, inner.prefixlen - 96)))
    return AddressSpace(_public_count(v4, _NON_PUBLIC_V4), _public_count(v6, _NON_PUBLIC_V6), tuple(bad))


# --------------------------------------------------------------------------- exposure

_NO_AUTH = frozenset({"", "none", "no", "false", "off", "disabled"})
_SERVICE_EXPOSURE_FIELDS = ("ports", "loadBalancerSourceRanges", "externalIPs")


def check_public_load_balancer(res: Resource) -> list[str]:
    """A LoadBalancer Service (or a ServicePatch making one) without GKE's internal annotation gets a
    public IP: it must name the client CIDRs allowed in (``spec.loadBalancerSourceRanges``, whose
    public address space, summed, stays within ``MAX_PUBLIC_IPV4``/``MAX_PUBLIC_IPV6``) and carry the
    auth marker (``gke-tpu-llm/auth: <mechanism>``) the workloads set on servers that authenticate.
    ``spec.externalIPs`` is refused on every Service: kube-proxy captures traffic to those
    addresses from every pod of the cluster (CVE-2020-8554)."""
    kind = k8s_kind(res.type)
    if kind is None or (kind.group, kind.kind) != ("core", "Service"):
        return []
    spec = as_mapping(get(res.props, "spec"))
    annotations = annotations_of(res.props)
    out = []
    if known_items(get(spec, "externalIPs")):
        out.append("spec.externalIPs is not allowed: kube-proxy would capture traffic to those addresses cluster-wide")
    service_type = get(spec, "type")
    if "type" in list(spec) and service_type is None:
        return out  # unknown during preview
    if kind.patch and service_type is None:
        touched = [f"spec.{key}" for key in _SERVICE_EXPOSURE_FIELDS if key in list(spec)]
        touched += [f"annotation {key}" for key in (INTERNAL_LB_ANNOTATION, AUTH_ANNOTATION) if key in list(annotations)]
        if touched:
            out.append(
                f"a ServicePatch that sets {', '.join(touched)} must also state spec.type: the pack cannot see the "
                "Service it patches, so it cannot tell whether the result is public"
            )
        return out
    if service_type != "LoadBalancer" or annotations.get(INTERNAL_LB_ANNOTATION) == "Internal":
        return out
    ranges = [str(r) for r in known_items(get(spec, "loadBalancerSourceRanges"))]
    if not ranges:
        out.append("public LoadBalancer without spec.loadBalancerSourceRanges is open to the internet; list the client CIDRs")
    out += public_address_space(ranges).problems("spec.loadBalancerSourceRanges")
    auth = annotations.get(AUTH_ANNOTATION)
    if not isinstance(auth, str) or auth.strip().lower() in _NO_AUTH:
        out.append(
            f"public LoadBalancer without authentication: serve it from a server that authenticates clients and mark it "
            f"with the annotation {AUTH_ANNOTATION}: <mechanism> (e.g. api-key, iap), or make it internal "
            f"({INTERNAL_LB_ANNOTATION}: Internal)"
        )
    return out


INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
INTERNAL_INGRESS_CLASS = "gce-internal"
"""GKE's internal Application Load Balancer Ingress class. An Ingress without a class, or of class
``gce``, gets an external one (ingress-gce docs/annotations.md "Ingress Class"; GKE reads the
annotation, not ``spec.ingressClassName``); any other class belongs to another controller whose
exposure the pack cannot see."""
INTERNAL_GATEWAY_CLASSES = frozenset({"gke-l7-rilb", "gke-l7-rilb-mc", "gke-l7-cross-regional-internal-managed-mc"})
"""GKE's internal GatewayClasses (GKE "GatewayClass capabilities"). The external ones
(``gke-l7-global-external-managed``, ``gke-l7-regional-external-managed``, ``gke-l7-gxlb`` and
their ``-mc`` forms) and any class of another controller count as public."""
IAP_GATEWAY_CLASSES = frozenset({"gke-l7-global-external-managed", "gke-l7-regional-external-managed", "gke-l7-gxlb"})
"""GKE's single-cluster external GatewayClasses, whose backends GKE can put behind Identity-Aware Proxy
(``GCPBackendPolicy`` ``default.iap``, GKE "Configure Gateway resources using Policies"). A Gateway of
one of them is allowed with HTTPS listeners only and IAP on every backend (``check_public_gateway_iap``);
every other non-internal class (multi-cluster ``-mc`` forms, other controllers) is refused: the pack
cannot see what authenticates it."""
GATEWAY_GROUP = "gateway.networking.k8s.io"
GKE_POLICY_GROUP = "networking.gke.io"
ROUTE_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"})
_EXPOSE_INSTEAD = (
    "the pack cannot check who reaches a public Ingress or Gateway of this class (its Cloud Armor policy and IAP "
    "live in other objects), so expose a model through a LoadBalancer Service (loadBalancerSourceRanges + the "
    f"{AUTH_ANNOTATION} marker), a GKE external Gateway ({', '.join(sorted(IAP_GATEWAY_CLASSES))}) behind "
    "Identity-Aware Proxy, or keep it internal"
)


def check_ingress_and_gateway(res: Resource) -> list[str]:
    """An Ingress or Gateway is internal (its class says so) or refused; a patch that leaves the
    class out is judged by what it may patch, so it must state the internal class too."""
    kind = k8s_kind(res.type)
    if kind is None:
        return []
    spec = as_mapping(get(res.props, "spec"))
    if kind.kind == "Ingress" and kind.group in ("networking.k8s.io", "extensions"):
        annotated = annotations_of(res.props).get(INGRESS_CLASS_ANNOTATION)
        class_name = get(spec, "ingressClassName")
        if kind.patch and not spec and annotated is None:
            return []  # metadata only (labels): no change to what it exposes
        if annotated == INTERNAL_INGRESS_CLASS and class_name in (None, INTERNAL_INGRESS_CLASS):
            return []
        shown = annotated if annotated is not None else class_name if class_name is not None else "unset (gce)"
        return [
            f"Ingress of class {shown!r} is public: set the annotation {INGRESS_CLASS_ANNOTATION}: "
            f"{INTERNAL_INGRESS_CLASS} for an internal one; {_EXPOSE_INSTEAD}"
        ]
    if kind.kind == "Gateway" and kind.group == GATEWAY_GROUP:
        gateway_class = get(spec, "gatewayClassName")
        if (kind.patch and not spec) or ("gatewayClassName" in list(spec) and gateway_class is None):
            return []  # metadata only, or a class unknown during preview
        if gateway_class in INTERNAL_GATEWAY_CLASSES:
            return []
        if gateway_class in IAP_GATEWAY_CLASSES and not kind.patch:
            return _public_listener_problems(spec)
        return [
            f"Gateway of class {gateway_class!r} is public (internal classes: {', '.join(sorted(INTERNAL_GATEWAY_CLASSES))}); "
            f"{_EXPOSE_INSTEAD}"
        ]
    return []


def _public_listener_problems(spec: Any) -> list[str]:
    """A public Gateway terminates TLS on every listener (IAP's sign-in and the model's prompts never
    cross the internet in clear text) and takes routes from its own namespace only (a route of another
    namespace, from another stack, would reach backends this stack's IAP policies do not cover)."""
    out = []
    for i, listener in indexed(get(spec, "listeners")):
        protocol = get(listener, "protocol")
        if "protocol" in list(as_mapping(listener)) and protocol is None:
            continue  # unknown during preview
        mode = get(get(listener, "tls"), "mode")
        if protocol != "HTTPS" or mode not in (None, "Terminate"):
            shown = f"{protocol}" + (f" (tls.mode {mode})" if mode not in (None, "Terminate") else "")
            out.append(
                f"spec.listeners[{i}] of a public Gateway is {shown}: serve HTTPS only (protocol HTTPS, TLS terminated "
                "at the load balancer with a certificate), never plain HTTP"
            )
        allowed = get(get(get(listener, "allowedRoutes"), "namespaces"), "from")
        if allowed not in (None, "Same"):
            out.append(
                f"spec.listeners[{i}].allowedRoutes.namespaces.from is {allowed!r}: a public Gateway takes routes from its "
                "own namespace only (Same), so every route it serves is one this stack declares and checks for IAP"
            )
    return out


def _k8s_name(res: Resource) -> tuple[str, str]:
    metadata = get(res.props, "metadata")
    return str(get(metadata, "namespace") or ""), str(get(metadata, "name") or "")


def _declared_gateways(resources: Sequence[Resource]) -> dict[tuple[str, str], Any] | None:
    """The stack's Gateways (not patches) by (namespace, name), with their ``gatewayClassName``; None while
    a name is unknown (during preview: the rules that need every Gateway stay undecided there)."""
    out: dict[tuple[str, str], Any] = {}
    for res in resources:
        kind = k8s_kind(res.type)
        if kind is None or (kind.group, kind.kind) != (GATEWAY_GROUP, "Gateway") or kind.patch:
            continue
        if not isinstance(get(get(res.props, "metadata"), "name"), str):
            return None
        out[_k8s_name(res)] = get(get(res.props, "spec"), "gatewayClassName")
    return out


def _gateway_parents(res: Resource) -> list[tuple[int, tuple[str, Any]]]:
    """A route's ``parentRefs`` that name a Gateway: (index, (namespace, name)), the namespace defaulting
    to the route's own (the name as given: unknown during preview)."""
    namespace, _ = _k8s_name(res)
    return [
        (i, (str(get(ref, "namespace") or namespace), get(ref, "name")))
        for i, ref in indexed(get(get(res.props, "spec"), "parentRefs"))
        if (get(ref, "kind") or "Gateway") == "Gateway" and get(ref, "group") in (None, GATEWAY_GROUP)
    ]


def check_routes(resources: Sequence[Resource]) -> list[tuple[Resource, str]]:
    """A route (HTTPRoute, GRPCRoute, ...) attaches only to a Gateway of the same stack, which the
    Gateway rule has judged: a Gateway made elsewhere may be public, and the pack cannot see it.
    Routes whose parent is a Service (the GAMMA mesh form) stay in the cluster and pass. A name
    unknown during preview leaves the rule undecided there; the stack is analyzed again after the
    update, with every name known."""
    gateways = _declared_gateways(resources)
    if gateways is None:
        return []
    out = []
    for res in resources:
        kind = k8s_kind(res.type)
        if kind is None or kind.group != GATEWAY_GROUP or kind.kind not in ROUTE_KINDS:
            continue
        for i, target in _gateway_parents(res):
            if not isinstance(target[1], str):
                continue  # required by the API; unknown during preview
            if target not in gateways:
                out.append(
                    (
                        res,
                        f"spec.parentRefs[{i}] attaches {kind.kind} to Gateway {'/'.join(filter(None, target))!r}, "
                        "which this stack does not declare: the pack cannot tell whether it is public; declare the "
                        "Gateway (of an internal class) in the stack",
                    )
                )
    return out


def _iap_enabled(policy: Resource) -> bool:
    iap = get(get(get(policy.props, "spec"), "default"), "iap")
    secret = get(get(iap, "oauth2ClientSecret"), "name")
    client = get(iap, "clientID")
    return get(iap, "enabled") is True and isinstance(client, str) and bool(client) and isinstance(secret, str) and bool(secret)


def _backend_policies(resources: Sequence[Resource]) -> dict[tuple[str, str, str, str], list[Resource]]:
    """GCPBackendPolicies (not patches) by the (group, kind, namespace, name) of their target."""
    out: dict[tuple[str, str, str, str], list[Resource]] = {}
    for res in resources:
        kind = k8s_kind(res.type)
        if kind is None or (kind.group, kind.kind) != (GKE_POLICY_GROUP, "GCPBackendPolicy") or kind.patch:
            continue
        namespace, _ = _k8s_name(res)
        target = get(get(res.props, "spec"), "targetRef")
        key = (
            str(get(target, "group") or ""),
            str(get(target, "kind") or ""),
            str(get(target, "namespace") or namespace),
            str(get(target, "name") or ""),
        )
        out.setdefault(key, []).append(res)
    return out


def check_public_gateway_iap(resources: Sequence[Resource]) -> list[tuple[Resource, str]]:
    """Every backend that a route attached to a public GKE Gateway (``IAP_GATEWAY_CLASSES``) reaches, an
    InferencePool or a Service, is the target of a GCPBackendPolicy with ``default.iap.enabled: true``, a
    ``clientID`` and an ``oauth2ClientSecret``, and of no policy without them (GKE's conflict resolution
    between two policies on one target is not documented, so a second one could switch IAP off). A
    name or class unknown during preview leaves the rule undecided there; the update analyzes it again."""
    gateways = _declared_gateways(resources)
    if gateways is None or any(gateway_class is None for gateway_class in gateways.values()):
        return []
    public = {name for name, gateway_class in gateways.items() if gateway_class in IAP_GATEWAY_CLASSES}
    policies = _backend_policies(resources)
    out = []
    for res in resources:
        kind = k8s_kind(res.type)
        if kind is None or kind.group != GATEWAY_GROUP or kind.kind not in ROUTE_KINDS:
            continue
        namespace, _ = _k8s_name(res)
        spec = get(res.props, "spec")
        exposed = [f"{ns}/{name}" for _, (ns, name) in _gateway_parents(res) if (ns, name) in public]
        if not exposed:
            continue
        for i, rule in indexed(get(spec, "rules")):
            for j, ref in indexed(get(rule, "backendRefs")):
                name = get(ref, "name")
                if not isinstance(name, str):
                    continue  # required by the API; unknown during preview
                group = str(get(ref, "group") or "")
                ref_kind = str(get(ref, "kind") or "Service")
                key = (group, ref_kind, str(get(ref, "namespace") or namespace), name)
                found = policies.get(key, [])
                if found and all(_iap_enabled(p) for p in found):
                    continue
                why = (
                    "no GCPBackendPolicy targets it"
                    if not found
                    else "a GCPBackendPolicy targeting it does not enable IAP with a clientID and an oauth2ClientSecret"
                )
                out.append(
                    (
                        res,
                        f"spec.rules[{i}].backendRefs[{j}] sends public Gateway {', '.join(exposed)}'s traffic to "
                        f"{ref_kind} {key[2]}/{name} without Identity-Aware Proxy: {why}; add a GCPBackendPolicy "
                        "(networking.gke.io/v1) targeting it with default.iap {enabled: true, clientID, "
                        "oauth2ClientSecret: {name}}, or make the Gateway internal",
                    )
                )
    return out


def check_firewall(res: Resource) -> list[str]:
    """A VPC firewall rule that allows ingress admits a bounded public address space, summed like a
    load balancer's. An ingress rule with no source at all applies to 0.0.0.0/0
    (hashicorp/terraform-provider-google#6789), so it is refused too."""
    if res.type != "gcp:compute/firewall:Firewall":
        return []
    props = res.props
    direction = str(get(props, "direction") or "INGRESS").upper()
    if direction != "INGRESS" or get(props, "disabled") is True or not known_items(get(props, "allows")):
        return []
    ranges = [str(r) for r in known_items(get(props, "sourceRanges"))]
    if not ranges:
        if known_items(get(props, "sourceTags")) or known_items(get(props, "sourceServiceAccounts")):
            return []  # sources are the VMs with those tags or accounts
        return [
            "an ingress rule without sourceRanges, sourceTags or sourceServiceAccounts applies to 0.0.0.0/0; list the sources"
        ]
    return public_address_space(ranges).problems("sourceRanges")
