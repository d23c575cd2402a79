"""Who can reach each endpoint a stack exposes: read from the rendered Kubernetes objects.

A ``LoadBalancer`` Service without GKE's internal annotation gets a public IP; a ``NodePort``
opens a port on every node. ``plan`` and the review print a warning line for every endpoint
reachable from outside the VPC, naming who can reach it (the source ranges, or anyone on the
internet) and how clients authenticate (the ``gke-tpu-llm/auth`` annotation the workloads set on
endpoints that enforce it). Pure functions over manifests; no Pulumi import.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
AUTH_ANNOTATION = "gke-tpu-llm/auth"
EVERYONE = frozenset({"0.0.0.0/0", "::/0"})


def covers_everyone(cidrs: Iterable[str]) -> bool:
    """True when the ranges together admit every IPv4 or every IPv6 address (``0.0.0.0/0``,
    ``::0/0``, or ``0.0.0.0/1`` + ``128.0.0.0/1``); unparsable entries are ignored (validated elsewhere)."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    for cidr in cidrs:
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            continue
        if isinstance(net, ipaddress.IPv4Network):
            v4.append(net)
        else:
            v6.append(net)
    return any(n.prefixlen == 0 for n in ipaddress.collapse_addresses(v4)) or any(
        n.prefixlen == 0 for n in ipaddress.collapse_addresses(v6)
    )


@dataclass(frozen=True)
class Endpoint:
    namespace: str
    name: str
    kind: str
    """``LoadBalancer`` or ``NodePort``."""
    ports: tuple[int, ...]
    outside_vpc: bool
    source_ranges: tuple[str, ...]
    auth: str | None

    @property
    def who(self) -> str:
        ranges = [] if covers_everyone(self.source_ranges) else list(self.source_ranges)
        if self.outside_vpc:
            scope = f"clients in {', '.join(ranges)}" if ranges else "anyone on the internet"
        else:
            scope = f"clients in {', '.join(ranges)} inside the VPC" if ranges else "anyone in the VPC"
        return f"{scope}, {f'authenticated by {self.auth}' if self.auth else 'without authentication'}"

    def describe(self) -> str:
        where = "outside the VPC" if self.outside_vpc else "inside the VPC only"
        ports = ",".join(map(str, self.ports))
        return f"{self.kind} Service {self.namespace}/{self.name} :{ports} is reachable from {where} by {self.who}"

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "who": self.who}


def endpoints(manifests: Iterable[Mapping[str, Any]]) -> list[Endpoint]:
    """Every Service that is reachable from beyond the cluster (LoadBalancer or NodePort)."""
    out = []
    for obj in manifests:
        if obj.get("kind") != "Service" or obj.get("apiVersion") != "v1":
            continue
        spec = obj.get("spec") or {}
        kind = spec.get("type", "ClusterIP")
        if kind not in ("LoadBalancer", "NodePort"):
            continue
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        internal = kind == "LoadBalancer" and annotations.get(INTERNAL_LB_ANNOTATION) == "Internal"
        out.append(
            Endpoint(
                namespace=str(meta.get("namespace", "default")),
                name=str(meta.get("name", "")),
                kind=kind,
                ports=tuple(int(p.get("port", 0)) for p in spec.get("ports") or ()),
                # A NodePort is reachable wherever the nodes' firewall lets it: outside unless private.
                outside_vpc=not internal,
                source_ranges=tuple(spec.get("loadBalancerSourceRanges") or ()),
                auth=annotations.get(AUTH_ANNOTATION),
            )
        )
    return sorted(out, key=lambda e: (e.namespace, e.name))


def warnings(manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per endpoint reachable from outside the VPC."""
    return [e.describe() for e in endpoints(manifests) if e.outside_vpc]
