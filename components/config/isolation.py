"""What one stack owns in the cloud, and the rules that keep stacks sharing a GCP project apart.

Every stack claims the physical names it creates (cluster, buckets, service accounts, a repository)
and the Workload Identity namespaces whose ServiceAccounts it grants Google access to. Two stacks
may never hold the same claim: a shared name means one stack's ``pulumi up`` or ``destroy`` changes
the other's resource, and a shared Workload Identity namespace means one stack's pods *are* the
other's principal (``PROJECT.svc.id.goog[namespace/ksa]`` is the same in every cluster of a
project), so a dev stack could read prod's checkpoints. And a prod stack's project hosts no
non-prod stack, so the dev deployer never needs rights on prod's project.

Pure data and functions over it: the offline tools and the running program compare the stack at
hand with every other stack file (``components.config.stack_files.check_isolation``), and ``review``
compares the stacks of a plan document (their ``tenancy`` entries).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from . import naming
from .errors import NAMESPACE, Violation

if TYPE_CHECKING:  # the stack config imports this module
    from .stack import StackConfig

UNSAFE_SHARED_PROJECT_KEY = "unsafeShareProjectWithNonProd"
"""The escape hatch a prod stack sets to let non-prod stacks into its project (named unsafe)."""
PROD = "prod"


@dataclass(frozen=True)
class Claim:
    """One physical name (or identity) a stack owns, in the scope where it must be unique."""

    what: str
    """What the name is, as the error says it (``bucket``, ``Workload Identity namespace``)."""
    scope: str
    """Where it must be unique: ``global`` (bucket names), ``project P``, ``project P, region R``,
    ``workload pool P.svc.id.goog``."""
    name: str
    key: str
    """The stack-file key that changes it (``(stack name)`` where only the stack name does)."""
    value: str | bool | None = None
    """The key's value, where it is not the name itself (``autoscaling.enabled: true`` installs the
    adapter whose namespace is claimed)."""
    fix: str = ""
    """How to resolve a clash, where changing the key to another value is not the whole answer."""
    default: str = ""
    """Where the name comes from when the key is unset (``the stack name``), so an error about the
    other stack does not blame a key its file never wrote."""
    detail: str = ""
    """A property of the claimed thing that every stack relying on it must agree on (a proxy-only
    subnet's range: :func:`proxy_subnet_claims`)."""


@dataclass(frozen=True)
class Tenancy:
    """A stack as its neighbours see it: where it lives and what it claims."""

    stack: str
    environment: str
    project: str
    unsafe_shared_project: bool
    claims: tuple[Claim, ...]
    source: str = ""
    """Where the stack is defined (a stack file), for the error."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "environment": self.environment,
            "project": self.project,
            "unsafe_shared_project": self.unsafe_shared_project,
            "claims": [asdict(c) for c in self.claims],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "") -> Tenancy:
        return cls(
            stack=str(data["stack"]),
            environment=str(data["environment"]),
            project=str(data["project"]),
            unsafe_shared_project=bool(data.get("unsafe_shared_project", False)),
            claims=tuple(Claim(**c) for c in data["claims"]),
            source=source,
        )


def workload_pool(project: str) -> str:
    """GKE's Workload Identity pool of a project: one per project, shared by all of its clusters."""
    return f"{project}.svc.id.goog"


def identity_namespace_claim(
    project: str, namespace: str, key: str, value: str | bool | None = None, fix: str = "", default: str = ""
) -> Claim:
    """A namespace whose ServiceAccounts hold Google access: the principal is pool + namespace +
    KSA in every cluster of the project, so the namespace itself is what must not be shared."""
    return Claim("Workload Identity namespace", f"workload pool {workload_pool(project)}", namespace, key, value, fix, default)


NETWORK = "default"
"""The VPC network of every stack's cluster: ``GkeCluster`` sets no ``network``, so GKE uses the
project's ``default`` network."""
PROXY_SUBNET = "proxy-only subnet"
"""A proxy-only subnet a stack creates (``workload.frontDoor.proxySubnet.create: true``)."""
PROXY_SUBNET_EXPECTED = "proxy-only subnet (expected)"
"""A proxy-only subnet a stack expects to exist (``create: false``; pre-flight checks it). Shared by
design: any number of stacks may expect the same one, so it is never a clash by itself."""
SHARED = frozenset({PROXY_SUBNET_EXPECTED})
"""Claims several stacks may hold at once (compared by :func:`_shared_conflicts` instead)."""


def proxy_subnet_name(network: str = NETWORK) -> str:
    """The name of the proxy-only subnet a stack creates in ``network`` (one per project, region and
    network, whichever stack creates it: names are unique per project and region)."""
    return f"gke-tpu-llm-proxy-only-{network}"


def proxy_subnet_scope(project: str, region: str, network: str = NETWORK) -> str:
    return f"project {project}, region {region}, network {network}"


def proxy_subnet_claims(config: StackConfig) -> list[Claim]:
    """A gateway front door's proxy-only subnet: GCP allows one ACTIVE ``REGIONAL_MANAGED_PROXY``
    subnet per region and VPC network, shared by every regional Envoy load balancer in it (Google
    "Proxy-only subnets for Envoy-based load balancers"; terraform-provider-google-beta
    compute/resource_compute_subnetwork.go:731 ``purpose``). A stack that creates it claims it (a
    second creator would fight over it, and the first one's destroy would delete it under the
    other); a stack that expects it states the range it expects, which must be the range a creator
    gives it (:func:`_shared_conflicts`)."""
    door = config.workload.front_door
    subnet = door.proxy_subnet
    if not door.gateway or subnet is None:
        return []
    scope = proxy_subnet_scope(config.project, config.region)
    cidr = str(subnet.cidr)
    if subnet.create:
        return [
            Claim(
                PROXY_SUBNET,
                scope,
                proxy_subnet_name(),
                "workload.frontDoor.proxySubnet.create",
                True,
                fix="let one stack create the region's proxy-only subnet (proxySubnet.create: true) and the others "
                "expect it with the same cidr (create: false)",
                detail=cidr,
            )
        ]
    return [Claim(PROXY_SUBNET_EXPECTED, scope, cidr, "workload.frontDoor.proxySubnet.cidr", detail=cidr)]


def stack_claims(config: StackConfig) -> tuple[Claim, ...]:
    """Every name and identity ``config`` owns. Names come from the same properties the components
    use (``StackConfig.cluster_name``, ``bucket_name``, ``naming.service_account_id``); a kind adds
    its own (``section.claims``). ``tests/test_isolation.py`` holds this list to every name the
    program registers, so a new resource type cannot be missed silently."""
    project = config.project
    claims = [
        # Workload policies and pools are named after the cluster in its region.
        Claim(
            "GKE cluster",
            f"project {project}, region {config.region}",
            config.cluster_name,
            "cluster.name",
            default="" if config.cluster.name else "the stack name",
        ),
        identity_namespace_claim(
            project, config.namespace, "identity.namespace", default="" if config.identity.namespace else "the stack name"
        ),
        Claim("node service account", f"project {project}", naming.service_account_id(config.stack, "tpu-nodes"), "(stack name)"),
    ]
    if config.identity.mode == "gsa":
        account = naming.service_account_id(config.stack, config.identity.service_account)
        claims.append(Claim("workload service account", f"project {project}", account, "identity.serviceAccount"))
    claims += [Claim("bucket", "global", config.bucket_name(key), f"buckets.{key}") for key in config.buckets]
    claims += proxy_subnet_claims(config)
    if config.workload.front_door.public:
        # The public gateway's certificate and its DNS authorization, both named after the stack
        # (components.render.gateway.certificate_name), unique per project and Certificate Manager location.
        scope = f"project {project}, location {config.region}"
        name = f"{config.stack}-gateway"
        claims += [
            Claim("Certificate Manager certificate", scope, name, "(stack name)"),
            Claim("Certificate Manager DNS authorization", scope, name, "(stack name)"),
        ]
    claims += config.workload.section.claims(config)
    return tuple(claims)


def tenancy(config: StackConfig, source: str = "") -> Tenancy:
    return Tenancy(
        stack=config.stack,
        environment=config.environment.value,
        project=config.project,
        unsafe_shared_project=config.unsafe_share_project_with_non_prod,
        claims=stack_claims(config),
        source=source,
    )


def _where(other: Tenancy) -> str:
    return f"stack {other.stack!r}" + (f" ({other.source})" if other.source else "")


def conflicts(own: Tenancy, others: Iterable[Tenancy]) -> list[Violation]:
    """Every rule ``own`` breaks against ``others`` (stacks of other names), as violations of
    ``own``'s keys, each naming the other stack."""
    out: list[Violation] = []
    for other in others:
        if other.stack == own.stack:
            continue
        theirs = {(c.what, c.scope, c.name): c for c in other.claims if c.what not in SHARED}
        for claim in own.claims:
            match = theirs.get((claim.what, claim.scope, claim.name))
            if match is None:
                continue
            gives = "is" if claim.value is None else f"gives the {claim.what} {claim.name!r}, which is"
            out.append(
                Violation(
                    claim.key if claim.key.startswith(("(", "gcp:")) else f"{NAMESPACE}:{claim.key}",
                    claim.name if claim.value is None else claim.value,
                    f"{gives} the {claim.what} of this stack ({own.stack!r}) and of {_where(other)} too (its "
                    f"{match.key}{f', unset: {match.default}' if match.default else ''}), in {claim.scope}: "
                    + (
                        "pods of either stack would hold the other's Google access"
                        if claim.what.startswith("Workload Identity")
                        else "each stack's up and destroy would change the other's resource"
                    ),
                    f"a {claim.what} no other stack in {claim.scope} uses",
                    claim.fix or f"change {claim.key} in this stack (or {match.key} in {other.stack!r})",
                )
            )
        out += _shared_conflicts(own, other)
        out += _environment_conflicts(own, other)
    return out


def _proxy_subnets(tenancy: Tenancy) -> list[Claim]:
    return [c for c in tenancy.claims if c.what in (PROXY_SUBNET, PROXY_SUBNET_EXPECTED)]


def _shared_conflicts(own: Tenancy, other: Tenancy) -> list[Violation]:
    """The proxy-only subnet of a region and network has one range: a stack that expects it with a
    range other than the one another stack creates (or expects) it with clashes with that stack.
    (Two creators clash as a shared name, in :func:`conflicts`.)"""
    out: list[Violation] = []
    for claim in _proxy_subnets(own):
        for match in _proxy_subnets(other):
            if match.scope != claim.scope or match.detail == claim.detail:
                continue
            if claim.what == PROXY_SUBNET and match.what == PROXY_SUBNET:
                continue  # already a clash of names
            theirs = "creates" if match.what == PROXY_SUBNET else "expects"
            out.append(
                Violation(
                    f"{NAMESPACE}:workload.frontDoor.proxySubnet.cidr",
                    claim.detail,
                    f"is the range this stack ({own.stack!r}) "
                    f"{'creates' if claim.what == PROXY_SUBNET else 'expects'} for the proxy-only subnet of "
                    f"{claim.scope}, but {_where(other)} {theirs} it with {match.detail}: the region and network have "
                    "one active proxy-only subnet, so one of the two stacks' gateways would have no proxies in the range "
                    "its NetworkPolicies admit",
                    match.detail,
                    f"use the proxy-only subnet's one range in both stacks (this stack's or {other.stack!r}'s "
                    "workload.frontDoor.proxySubnet.cidr)",
                )
            )
    return out


def _environment_conflicts(own: Tenancy, other: Tenancy) -> list[Violation]:
    """A prod project hosts no non-prod stack, unless the prod stack opts out (unsafe)."""
    if own.project != other.project or (own.environment == PROD) == (other.environment == PROD):
        return []
    prod = own if own.environment == PROD else other
    if prod.unsafe_shared_project:
        return []
    non_prod = other if prod is own else own
    return [
        Violation(
            "gcp:project",
            own.project,
            f"is the project of prod stack {prod.stack!r} and of {non_prod.environment} stack {non_prod.stack!r}"
            f"{f' ({other.source})' if other.source else ''}: a {non_prod.environment} deployer would need IAM "
            "rights on prod's project, and its grants and names would sit beside prod's",
            "a project no stack of the other environment uses",
            f"give {non_prod.stack!r} its own gcp:project (prod and non-prod in separate projects); only if that "
            f"is impossible, set gke-tpu-llm:{UNSAFE_SHARED_PROJECT_KEY}: true in prod's stack file (unsafe)",
        )
    ]
