"""``InferenceGateway``: the cluster's and the VPC's side of a gateway front door
(``workload.frontDoor.type: gateway``, ``components.config.front_door``).

GKE's Inference Gateway runs on GKE's own Gateway controller: the cluster gets the Gateway API add-on
(``GkeClusterArgs.gateway_api``, set by the program from the same setting), and GKE installs the
Gateway API and InferencePool CRDs itself from ``front_door.GKE_VERSION_FLOOR`` (so nothing here
applies them). What is left for the stack is the VPC's **proxy-only subnet**: both gateway classes
the front door uses (``gke-l7-rilb``, ``gke-l7-regional-external-managed``) are regional Envoy-based
load balancers, whose proxies run in, and reach the pods from, the region's ``REGIONAL_MANAGED_PROXY``
subnet (GKE "Deploy GKE Inference Gateway", requirements: "You must enable a proxy-only subnet").

That subnet is one per region and VPC network, shared by every regional Envoy load balancer in it.
So by default (``proxySubnet.create: false``) the stack only *expects* it: pre-flight checks it exists
with the configured range (``components.tools.preflight``), and nothing is registered here but this
component, which the workload's gateway objects depend on. With ``create: true`` the stack creates it
(``gke-tpu-llm-proxy-only-default``, claimed in ``components.config.isolation`` so a second creator, or
a stack expecting another range, is refused), and owns its deletion: only one stack of a region should.

The public form (``exposure: public``) serves HTTPS only, with a Google-managed regional Certificate
Manager certificate for ``frontDoor.hostname`` (a regional Gateway names it in its listener's
``tls.options`` ``networking.gke.io/cert-manager-certs``: GKE "Secure a Gateway"; certificate maps are
for the global class). Google issues it once the domain's DNS holds the CNAME of the certificate's DNS
authorization (its ``dnsResourceRecords`` output, exported here): a regional authorization is of type
``PER_PROJECT_RECORD`` (the provider's default outside ``global``).

An add-on module (``components.platform.addons.Addon``), needed whenever the front door is a gateway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from ...config.isolation import NETWORK, proxy_subnet_name
from ...config.stack import StackConfig
from ...render.gateway import certificate_name
from ..gke import GkeCluster

NAME = "inferenceGateway"
"""The add-on's name (a stack opts in through ``workload.frontDoor``, not its kind)."""
COMPONENT = "inference-gateway"
SCAN_WAIVERS: Mapping[str, Mapping[str, str]] = {}
"""None: the add-on renders no Kubernetes object (the gateway objects are the workload's)."""
PURPOSE = "REGIONAL_MANAGED_PROXY"
"""The subnet purpose of regional Envoy-based load balancers (terraform-provider-google-beta
compute/resource_compute_subnetwork.go:731: "the preferred setting for all regional Envoy load
balancers")."""
ROLE = "ACTIVE"
"""The role of the subnet in use (``BACKUP`` is one being drained or ready to be promoted; :767)."""


@dataclass(frozen=True)
class InferenceGatewayArgs:
    """Inputs of :class:`InferenceGateway`."""

    project: str
    region: str
    """The cluster's region: the proxy-only subnet serves the regional load balancers of this region."""
    proxy_cidr: str
    """The proxy-only subnet's range (``workload.frontDoor.proxySubnet.cidr``); the model servers'
    NetworkPolicies admit it."""
    create_proxy_subnet: bool
    """Create the subnet (``proxySubnet.create``), or expect it (pre-flight checks it)."""
    network: str = NETWORK
    """The VPC network of the cluster (``GkeCluster`` leaves it to GKE: ``default``)."""
    protect: bool = False
    """Pulumi protect on a created subnet: every regional Envoy load balancer of the VPC and region uses it."""
    hostname: str | None = None
    """The public form's DNS name (``frontDoor.hostname``): a regional Google-managed certificate is
    issued for it. None: internal, no certificate."""
    certificate_name: str = ""
    """Name of the certificate and of its DNS authorization (``components.render.gateway.certificate_name``,
    which the Gateway's listener names)."""
    labels: Mapping[str, str] | None = None
    depends_on: Sequence[pulumi.Resource] = ()


def needed(config: StackConfig) -> bool:
    """The stack serves through a gateway front door."""
    return config.workload.front_door.gateway


class InferenceGateway(pulumi.ComponentResource):
    """The VPC side of a gateway front door: the proxy-only subnet, created or expected."""

    TYPE = "gke-tpu-llm:gateway:InferenceGateway"

    proxy_subnet: gcp.compute.Subnetwork | None
    """The created subnet (None when it is expected to exist: pre-flight checks it)."""
    dns_authorization: gcp.certificatemanager.DnsAuthorization | None
    certificate: gcp.certificatemanager.Certificate | None
    """The public form's certificate (None when internal)."""

    def __init__(self, name: str, args: InferenceGatewayArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.proxy_subnet = None
        if args.create_proxy_subnet:
            self.proxy_subnet = gcp.compute.Subnetwork(
                f"{name}-proxy-only-subnet",
                name=proxy_subnet_name(args.network),
                project=args.project,
                region=args.region,
                network=args.network,
                ip_cidr_range=args.proxy_cidr,
                purpose=PURPOSE,
                role=ROLE,
                description="Proxy-only subnet of the regional Envoy load balancers (GKE Gateway) of this VPC and "
                "region; created by gke-tpu-llm",
                opts=pulumi.ResourceOptions(parent=self, protect=args.protect, depends_on=list(args.depends_on)),
            )
        self.dns_authorization, self.certificate = None, None
        if args.hostname is not None:
            self.dns_authorization = gcp.certificatemanager.DnsAuthorization(
                f"{name}-dns-authorization",
                name=args.certificate_name,
                project=args.project,
                location=args.region,
                domain=args.hostname,
                type="PER_PROJECT_RECORD",
                labels=dict(args.labels or {}),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.certificate = gcp.certificatemanager.Certificate(
                f"{name}-certificate",
                name=args.certificate_name,
                project=args.project,
                # Regional: the location of the regional external Gateway that serves it.
                location=args.region,
                managed=gcp.certificatemanager.CertificateManagedArgs(
                    domains=[args.hostname], dns_authorizations=[self.dns_authorization.id]
                ),
                labels=dict(args.labels or {}),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs(
            {
                "proxy_cidr": args.proxy_cidr,
                "proxy_subnet": self.proxy_subnet.self_link if self.proxy_subnet is not None else None,
                # The CNAME to add to the hostname's DNS zone before Google can issue the certificate.
                "dns_records": self.dns_authorization.dns_resource_records if self.dns_authorization is not None else None,
            }
        )


def install(
    config: StackConfig,
    *,
    cluster: GkeCluster,
    namespace_ready: Sequence[pulumi.Resource] = (),
    pools: Sequence[pulumi.Resource] = (),
) -> InferenceGateway:
    """The front door's proxy-only subnet (created or expected); the workload's Gateway depends on it."""
    subnet = config.workload.front_door.proxy_subnet
    if subnet is None:  # the front door's own rule requires it for a gateway (components.config.front_door)
        raise ValueError("workload.frontDoor.type gateway without workload.frontDoor.proxySubnet")
    args = InferenceGatewayArgs(
        project=config.project,
        region=config.region,
        proxy_cidr=str(subnet.cidr),
        create_proxy_subnet=subnet.create,
        protect=config.policy.protect,
        hostname=config.workload.front_door.hostname if config.workload.front_door.public else None,
        certificate_name=certificate_name(config.stack),
        labels=config.labels,
    )
    return InferenceGateway(COMPONENT, args)
