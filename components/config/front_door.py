"""The front door of a serving stack (``gke-tpu-llm:workload.frontDoor``): a plain Service, or the GKE
Inference Gateway (a Gateway, an InferencePool and its endpoint picker) in front of the model servers.

The objects are rendered by ``components.render.gateway``; the platform pieces (proxy-only subnet, the
Gateway API add-on, the version floor) and the reach evaluation read the constants here. Sources, for
the facts below: GKE "Deploy GKE Inference Gateway" (requirements), Google Cloud "Proxy-only subnets
for Envoy-based load balancers" (size, one ACTIVE subnet per VPC and region), "Load balancing firewall
rules" (who reaches the backends), llm-d's GKE gateway guide (the CRD floor).
"""

from __future__ import annotations

import ipaddress
import math
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from .base import Cidr, Spec
from .errors import raise_rules, rule

GATEWAY_CLASS: dict[str, str] = {"internal": "gke-l7-rilb", "public": "gke-l7-regional-external-managed"}
"""GatewayClass per exposure. Both are regional Envoy-based Application Load Balancers, the classes every
upstream inference sample uses (GAIE v1.5.0 ``config/manifests/gateway/gke``, llm-d's GKE guide): the
endpoint picker is wired as a routing extension, which GKE documents for the regional classes; the
global external class with an InferencePool is not documented, so the public form is regional too."""
HEALTH_CHECK_RANGES: tuple[str, ...] = ("35.191.0.0/16", "130.211.0.0/22")
"""Google Cloud load balancer health-check sources (Cloud Load Balancing "Load balancing firewall rules")."""
GKE_VERSION_FLOOR = "1.34.0-gke.1626000"
"""GKE installs the GA Gateway API and Inference Extension (InferencePool v1) CRDs from this version on
(llm-d docs, "Installing Gateway API CRDs": "GKE automatically installs all GA CRDs … on GKE versions
1.34.0-gke.1626000 or later")."""
IAP_SECRETS: tuple[str, str] = ("iapClientId", "iapClientSecret")
"""Secret config keys of the public form's OAuth client (Identity-Aware Proxy)."""
PROXY_SUBNET_MAX_PREFIX = 26
"""A proxy-only subnet needs at least 64 addresses, a /26 or shorter prefix ("Proxy-only subnets for
Envoy-based load balancers", "Plan the size of your proxy-only subnet"; /23 is the documented example)."""
MAX_BACKEND_TIMEOUT_SEC = 86_400
"""Longest backend timeout a stack may set (a day): GCPBackendPolicy accepts up to 2^31-1 s, but a
request held longer than a day is a stuck client, not a generation."""
HOSTNAME_PATTERN = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
"""A fully qualified lowercase DNS name (RFC 1123 labels, at least two): what a Google-managed
Certificate Manager certificate is issued for. No wildcard: the certificate is for one name."""

TIMEOUT_HEADROOM = 2.0
"""The derived backend timeout is twice the predicted request time: the prediction excludes queueing
behind a full batch and the model's error, and a timeout cuts a generation the client already paid for."""
TIMEOUT_FLOOR_SEC = 300
"""The chart's GCPBackendPolicy timeoutSec ("5-minute timeout"): no derived timeout is shorter."""
TIMEOUT_CEILING_SEC = 3600
"""No derived timeout is longer than an hour: beyond it a connection is more likely stuck than generating
(set ``backendTimeoutSec`` for longer batch jobs)."""
CONSERVATIVE_TPOT_S = 0.1
"""Without a scenario: 100 ms per output token, slower than any catalog model's predicted TPOT on its
smallest fitting slice, so a full ``maxTargetLength`` generation is covered (up to the ceiling)."""



class ProxySubnetSpec(Spec):
    """``workload.frontDoor.proxySubnet``: the region's proxy-only subnet in the cluster's VPC."""

    cidr: Cidr = Field(
        description="Primary range of the proxy-only subnet (purpose REGIONAL_MANAGED_PROXY) in the cluster's VPC and "
        "region: the source address of every request the gateway's Envoy proxies send to the model servers, so the "
        "NetworkPolicies admit exactly it. IPv4, a /26 or larger (at least 64 proxies' addresses); Google documents "
        "/23 as the example. It must not overlap the cluster's node, pod or service ranges.",
    )
    create: bool = Field(
        False,
        description="Create the subnet with this stack. Defaults to false because the subnet is shared: one ACTIVE "
        "proxy-only subnet serves every regional Envoy load balancer of the VPC and region, so a stack that owned it "
        "would delete it from under the others on destroy; false makes pre-flight check that it exists with this cidr. "
        "true: this stack creates it (and claims it, so no other stack of the project and region may).",
    )

    @model_validator(mode="after")
    def _range(self) -> ProxySubnetSpec:
        network = ipaddress.ip_network(self.cidr)
        rules: list[dict[str, Any]] = []
        if network.version != 4:
            rules.append(
                rule("cidr", self.cidr, "is IPv6; a proxy-only subnet's range is IPv4", "an IPv4 CIDR", "use e.g. 10.129.0.0/23")
            )
        elif network.prefixlen > PROXY_SUBNET_MAX_PREFIX:
            rules.append(
                rule(
                    "cidr",
                    self.cidr,
                    f"holds {network.num_addresses} addresses; a proxy-only subnet needs at least 64 (a /26)",
                    f"/{PROXY_SUBNET_MAX_PREFIX} or a shorter prefix",
                    "use a larger range, e.g. a /23",
                )
            )
        raise_rules(rules)
        return self


_GATEWAY_ONLY = ("exposure", "proxy_subnet", "hostname", "body_based_routing", "backend_timeout_sec")
"""Fields that mean nothing without ``type: gateway`` (python names; the key is their camelCase alias)."""


class FrontDoorSpec(Spec):
    """``gke-tpu-llm:workload.frontDoor``: how clients reach the model servers."""

    type: Literal["service", "gateway"] = Field(
        "service",
        description="'service' (default, because it needs no proxy-only subnet and no Gateway API on the cluster): "
        "the kind's own Service, balanced by kube-proxy. 'gateway': GKE Inference Gateway — a Gateway, an HTTPRoute "
        "and an InferencePool whose endpoint picker sends each request to the replica with the shortest queue, the "
        "most free KV cache and the longest cached prefix; the Service becomes ClusterIP. vLLM only.",
    )
    exposure: Literal["internal", "public"] = Field(
        "internal",
        description="With type gateway: 'internal' (default, because it is reachable from the VPC only) is a regional "
        "internal Application Load Balancer (gke-l7-rilb) on HTTP :80; 'public' is a regional external one "
        "(gke-l7-regional-external-managed) on HTTPS :443 only, behind Identity-Aware Proxy (the OAuth client is "
        "the secret config gke-tpu-llm:iapClientId and gke-tpu-llm:iapClientSecret), never without it.",
    )
    proxy_subnet: ProxySubnetSpec | None = Field(
        None, description="The region's proxy-only subnet (required with type gateway: both classes are Envoy-based)."
    )
    hostname: Annotated[str, Field(pattern=HOSTNAME_PATTERN, max_length=253)] | None = Field(
        None,
        description="With exposure public (required): the DNS name clients use. The HTTPS listener serves the regional "
        "Google-managed Certificate Manager certificate issued for it (DNS authorization); the HTTPRoute answers "
        "only this name.",
    )
    body_based_routing: bool = Field(
        False,
        description="With type gateway: route by the request body's 'model' field. A body-based router (an Envoy "
        "ext_proc routing extension) copies it into the X-Gateway-Model-Name header and the HTTPRoute matches the "
        "served model's name, so several models can share one gateway. Off by default because one stack serves one "
        "model and the extra hop adds latency.",
    )
    backend_timeout_sec: Annotated[int, Field(ge=1, le=MAX_BACKEND_TIMEOUT_SEC)] | None = Field(
        None,
        description="With type gateway: seconds the load balancer waits for a whole response (GCPBackendPolicy "
        "timeoutSec; GKE's default is 30 s, shorter than a long generation). Unset: derived from workload.serving "
        "(the predicted TTFT plus outputTokens at the predicted TPOT, doubled, 300..3600 s), or from maxTargetLength "
        f"at a conservative TPOT without a scenario. 1..{MAX_BACKEND_TIMEOUT_SEC}.",
    )

    @property
    def gateway(self) -> bool:
        return self.type == "gateway"

    @property
    def public(self) -> bool:
        return self.gateway and self.exposure == "public"

    def required_secrets(self) -> tuple[str, ...]:
        # The public form authenticates with IAP; its OAuth client comes from secret config only.
        return IAP_SECRETS if self.public else ()

    @model_validator(mode="after")
    def _front_door_rules(self) -> FrontDoorSpec:
        rules: list[dict[str, Any]] = []
        if not self.gateway:
            for name in _GATEWAY_ONLY:
                if name in self.model_fields_set:
                    key = type(self).model_fields[name].alias or name
                    rules.append(
                        rule(
                            key,
                            getattr(self, name),
                            "is a gateway setting, and type is service",
                            "only with type: gateway",
                            f"remove workload.frontDoor.{key}, or set workload.frontDoor.type: gateway",
                        )
                    )
            raise_rules(rules)
            return self
        if self.proxy_subnet is None:
            rules.append(
                rule(
                    "proxySubnet",
                    None,
                    "is required with type gateway: both gateway classes are regional Envoy-based load balancers, which "
                    "send every request from the region's proxy-only subnet",
                    "{cidr: <IPv4 /26 or larger>, create: false|true}",
                    "set workload.frontDoor.proxySubnet.cidr to the VPC's proxy-only subnet in the region (create: true "
                    "to create it with this stack)",
                )
            )
        if self.public and self.hostname is None:
            rules.append(
                rule(
                    "hostname",
                    None,
                    "is required with exposure public: the gateway serves HTTPS only, with a certificate for this name",
                    "a DNS name such as llm.example.com",
                    "set workload.frontDoor.hostname",
                )
            )
        if not self.public and self.hostname is not None:
            rules.append(
                rule(
                    "hostname",
                    self.hostname,
                    "is used only by the public gateway's certificate; the internal gateway answers on HTTP :80 for any name",
                    "only with exposure: public",
                    "remove workload.frontDoor.hostname, or set exposure: public",
                )
            )
        raise_rules(rules)
        return self


def refuse_gateway(config: Any, why: str) -> list[dict[str, Any]]:
    """The rule of a kind that cannot sit behind the gateway (paths relative to ``gke-tpu-llm:``), for
    its ``stack_rules``; none unless the stack asks for ``type: gateway``. ``config`` is the
    ``StackConfig`` (typed ``Any``: the stack config imports the workload specs)."""
    front_door: FrontDoorSpec = config.workload.front_door
    if not front_door.gateway:
        return []
    return [
        rule(
            "workload.frontDoor.type",
            "gateway",
            f"is not supported for kind {config.workload.kind}: {why}",
            "service (gateway: kind vllm)",
            "remove workload.frontDoor (the kind's own Service is its front door)",
        )
    ]


def backend_timeout(
    front_door: FrontDoorSpec, *, output_tokens: int | None, ttft_ms: float | None, tpot_ms: float | None, max_target_length: int
) -> tuple[int, str]:
    """GCPBackendPolicy ``timeoutSec`` and how it was chosen.

    ``backendTimeoutSec`` when set. Otherwise, with a scenario and its prediction,
    ``ceil(TIMEOUT_HEADROOM x (TTFT + outputTokens x TPOT))`` rounded up to a whole minute; without
    one, ``maxTargetLength`` tokens at :data:`CONSERVATIVE_TPOT_S` (no headroom: already
    conservative). Either way at least :data:`TIMEOUT_FLOOR_SEC` and at most
    :data:`TIMEOUT_CEILING_SEC`. GKE's default (30 s when the field is omitted: GCPBackendPolicy CRD)
    would cut any long generation."""
    if front_door.backend_timeout_sec is not None:
        return front_door.backend_timeout_sec, "workload.frontDoor.backendTimeoutSec"
    if output_tokens is not None and ttft_ms is not None and tpot_ms is not None:
        seconds = TIMEOUT_HEADROOM * (ttft_ms + output_tokens * tpot_ms) / 1000
        how = (f"{TIMEOUT_HEADROOM:g} x (predicted TTFT {ttft_ms:.0f} ms + {output_tokens} output tokens x predicted "
               f"TPOT {tpot_ms:.1f} ms)")
    else:
        seconds = max_target_length * CONSERVATIVE_TPOT_S
        how = f"maxTargetLength {max_target_length} tokens x a conservative {CONSERVATIVE_TPOT_S * 1000:.0f} ms TPOT"
    rounded = 60 * math.ceil(seconds / 60)
    bounded = min(max(rounded, TIMEOUT_FLOOR_SEC), TIMEOUT_CEILING_SEC)
    return bounded, f"{how} = {seconds:.0f} s, rounded up to {rounded} s, within {TIMEOUT_FLOOR_SEC}..{TIMEOUT_CEILING_SEC} s"
