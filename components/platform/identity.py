"""``WorkloadIdentity``: the Kubernetes ServiceAccount a workload runs as, and its Google access.

Two modes (chosen per stack, ``identity.mode``), never both:
* ``principal`` — bucket roles are granted to the KSA's own federated identity
  ``principal://iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<project>.svc.id.goog/subject/ns/<ns>/sa/<ksa>``;
  no Google service account exists.
* ``gsa`` — a dedicated Google service account gets the bucket roles, the KSA may impersonate it
  (``roles/iam.workloadIdentityUser`` on the GSA) and carries the ``iam.gke.io/gcp-service-account``
  annotation. Use it where a workload also runs on nodes with GCE metadata (the identity is then
  the GSA when attached to the pool) or needs an email.

Roles are always granted on each bucket (``BucketIAMMember``), never project-wide; the allowed
roles are object-level only (viewer/user/admin), so ``roles/storage.admin`` cannot be expressed.
No service-account keys are ever created.

``NodeServiceAccount``: the Google service account every node pool of the stack runs as (system,
TPU and converter pools), with ``roles/container.defaultNodeServiceAccount`` (GKE's least-privilege
node role: logs, metrics, autoscaler metrics) and nothing else project-wide, instead of the Compute
Engine default account (shared by every VM of the project, and project Editor wherever the
organization does not enforce ``iam.automaticIamGrantsForDefaultServiceAccounts``). ``GkeCluster``
creates it before its pools; every pool depends on the role grant, so pools are created after it
and deleted before it. Where a pool pulls the stack's own image, the workload grants it read access
on that repository only (``components.workloads.maxtext_ray.component``).

TPU pools with ``tpu.workloadMetadata: GCE_METADATA`` (the mode the upstream Pathways tutorials
use) have no Workload Identity: pods on them act as the *node's* service account, and the KSA's
identity above is ignored there. So that such pods still reach exactly their buckets, the node
account then also holds the same per-bucket roles (granted here, by ``WorkloadIdentity``).

As a library (no stack config)::

    from components import StackBucket, StackBucketArgs, WorkloadIdentity, WorkloadIdentityArgs

    weights = StackBucket("weights", StackBucketArgs(project="my-project", region="us-east5", purpose="weights"))
    identity = WorkloadIdentity(
        "serving",
        WorkloadIdentityArgs(
            cluster=cluster,  # a GkeCluster
            namespace="serving",
            buckets={"weights": weights},
            bucket_roles={"weights": "roles/storage.objectViewer"},
        ),
    )

Pods that run as ``identity.service_account_name`` in ``identity.namespace`` then read that bucket.
``GkeCluster`` creates a ``NodeServiceAccount`` itself; create one directly only to share it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp

from ..config import gke_rules as rules
from ..config import naming
from ..config.base import BucketRole
from ..config.errors import Violation
from ..config.platform import IdentityMode, IdentitySpec
from ..config.tpu_spec import TpuSpec, WorkloadMetadata
from ..render import render_namespace, render_service_account
from . import k8s as k8s_objects
from .args import args_class, check, check_types, default_of, meta, own, validate, violations
from .storage import StackBucket

if TYPE_CHECKING:
    # components.platform.gke imports this module (GkeCluster creates the NodeServiceAccount).
    from .gke import GkeCluster

NODE_ROLE = "roles/container.defaultNodeServiceAccount"
"""GKE's least-privilege role for a node service account (logging, monitoring, metadata)."""
WORKLOAD_COMPONENT = "workload"
"""Name of the stack's ``WorkloadIdentity`` (``components.program.build``); earlier releases created the
node account under it (see ``NodeServiceAccount``)."""


def node_service_account_id(stack: str) -> str:
    """Account id of a stack's node GSA: ``<stack>-tpu-nodes`` for every stack. The id is create-only
    (a new id is a new account), and stacks with GCE_METADATA TPU pools already have this one, so it
    keeps the name it had when only TPU pools used it."""
    return naming.service_account_id(stack, "tpu-nodes")


def stack_urn(type_chain: str, name: str) -> str:
    """The URN ``name`` of type chain ``type_chain`` (``<parent type>$<type>``) has in this stack and
    project: aliases to the names earlier releases gave resources (a parent that no longer exists
    cannot be named any other way)."""
    return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_chain}::{name}"


@args_class
@dataclass(frozen=True, kw_only=True)
class NodeServiceAccountArgs:
    """The Google service account node pools run as (see ``NodeServiceAccount``)."""

    project: str = field(metadata=own("GCP project id of the account (and of its project role)."))
    account_id: str = field(
        metadata=own(
            "Account id: 6-30 lowercase letters, digits and '-', starting with a letter. Create-only: a new id "
            "is a new account, and every pool running as the old one is replaced."
        )
    )
    display_name: str | None = field(default=None, metadata=own("Display name; unset: '<account_id> GKE nodes'."))
    legacy_aliases: bool = field(
        default=False,
        metadata=own(
            "Alias the account and its role to the names releases before this component gave them (children "
            "of the stack's WorkloadIdentity 'workload'), so stacks created then keep both. For the stack "
            "program; off by default."
        ),
    )

    def __post_init__(self) -> None:
        check_types(self)
        problems = violations(rules.project_rules("project", self.project))
        problems += [
            Violation("account_id", self.account_id, p, "6-30 of a-z, 0-9 and '-', a letter first", "choose another id")
            for p in naming.service_account_id_problems(self.account_id)
        ]
        problems += [
            Violation("display_name", self.display_name, p, "at most 100 bytes", "shorten it")
            for p in naming.display_name_problems(self.display_name or "")
        ]
        check(self, problems)


class NodeServiceAccount(pulumi.ComponentResource):
    """The nodes' Google service account and its one project role (see the module docstring)."""

    TYPE = "gke-tpu-llm:identity:NodeServiceAccount"

    email: pulumi.Output[str]
    member: pulumi.Output[str]
    grants: list[pulumi.Resource]
    """What a pool depends on: created before the pool, deleted after it."""

    def __init__(self, name: str, args: NodeServiceAccountArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        # Stacks with GCE_METADATA TPU pools got this account and role from WorkloadIdentity
        # ("workload-node-gsa", "workload-node-role"). The aliases keep that state: the account is not
        # replaced (same id, so a create-first replacement would collide, and a new account would lose
        # its bucket bindings), and the role binding is not created again and then deleted (deleting
        # the old IAMMember would remove the binding the new one shares).
        legacy = "gke-tpu-llm:identity:WorkloadIdentity"
        account = gcp.serviceaccount.Account(
            f"{name}-gsa",
            account_id=args.account_id,
            display_name=args.display_name or naming.node_gsa_display_name(args.account_id),
            project=args.project,
            opts=pulumi.ResourceOptions(
                parent=self,
                aliases=(
                    [stack_urn(f"{legacy}$gcp:serviceaccount/account:Account", f"{WORKLOAD_COMPONENT}-node-gsa")]
                    if args.legacy_aliases
                    else None
                ),
            ),
        )
        self.email = account.email
        self.member = account.email.apply(lambda email: f"serviceAccount:{email}")
        role = gcp.projects.IAMMember(
            f"{name}-role",
            project=args.project,
            role=NODE_ROLE,
            member=self.member,
            opts=pulumi.ResourceOptions(
                parent=self,
                aliases=(
                    [stack_urn(f"{legacy}$gcp:projects/iAMMember:IAMMember", f"{WORKLOAD_COMPONENT}-node-role")]
                    if args.legacy_aliases
                    else None
                ),
            ),
        )
        self.grants = [role]
        self.register_outputs({"email": self.email})


def principal_member(project_number: str, project: str, namespace: str, ksa: str) -> str:
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
    )


@args_class
@dataclass(frozen=True, kw_only=True)
class WorkloadIdentityArgs:
    """What a ``WorkloadIdentity`` needs: the cluster, and which buckets its workloads reach with which role."""

    cluster: GkeCluster = field(
        metadata=own(
            "The GkeCluster the workloads run on: its Kubernetes provider creates the namespace and ServiceAccount, "
            "its project's workload pool federates them, and its node service account gets the bucket roles "
            "under GCE_METADATA."
        )
    )
    namespace: str | None = field(default=default_of(IdentitySpec, "namespace"), metadata=meta(IdentitySpec, "namespace"))
    service_account: str = field(
        default=default_of(IdentitySpec, "service_account"), metadata=meta(IdentitySpec, "service_account")
    )
    mode: IdentityMode = field(default=default_of(IdentitySpec, "mode"), metadata=meta(IdentitySpec, "mode"))
    bucket_roles: Mapping[str, BucketRole] = field(default_factory=dict, metadata=meta(IdentitySpec, "bucket_roles"))
    buckets: Mapping[str, StackBucket | pulumi.Input[str]] = field(
        default_factory=dict,
        metadata=own("Buckets by key, each a StackBucket or a bucket name; every key of bucket_roles must be one."),
    )
    workload_metadata: WorkloadMetadata = field(
        default=default_of(TpuSpec, "workload_metadata"),
        metadata=meta(
            TpuSpec,
            "workload_metadata",
            validated=False,
            extra="Give the node metadata mode of the pools the workloads run on: with GCE_METADATA their pods act "
            "as the cluster's node service account, which then gets the same bucket roles.",
        ),
    )
    stack: str | None = field(
        default=None,
        metadata=own(
            "Stack name in the Kubernetes objects' app.kubernetes.io/instance label and in the gsa mode's Google "
            "service-account id (<stack>-<service_account>); unset: the Pulumi stack's name."
        ),
    )

    def __post_init__(self) -> None:
        validate(self, IdentitySpec)
        problems = [
            Violation(
                f"bucket_roles.{key}",
                key,
                "names no bucket in buckets",
                ", ".join(self.buckets) or "no buckets given",
                "add the bucket to buckets, or remove its role",
            )
            for key in self.bucket_roles
            if key not in self.buckets
        ]
        check(self, problems)


class WorkloadIdentity(pulumi.ComponentResource):
    """A namespace, the KSA its workloads run as, and that KSA's roles on each bucket (see the module docstring)."""

    TYPE = "gke-tpu-llm:identity:WorkloadIdentity"

    namespace: str
    service_account_name: str
    member: pulumi.Output[str]
    gsa_email: pulumi.Output[str] | None
    node_gsa_email: pulumi.Input[str] | None
    """The nodes' GSA under GCE metadata (pods on the TPU pools act as it); None with GKE metadata."""
    node_grants: list[pulumi.Resource]
    """Bucket grants to the nodes' GSA under GCE metadata (TPU pools depend on them); else none."""

    def __init__(self, name: str, args: WorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        stack = args.stack or pulumi.get_stack()
        namespace = args.namespace or naming.dns_label(stack)
        # A namespace derived from the stack name is checked here (a set one by the spec).
        check(
            args,
            [
                Violation("namespace", namespace, f"(derived from the stack name {stack!r}) {p}", "", "set namespace")
                for p in (naming.namespace_problems(namespace) if args.namespace is None else [])
            ],
        )
        super().__init__(self.TYPE, name, None, opts)
        cluster = args.cluster
        project = cluster.project
        self.namespace = namespace
        self.service_account_name = ksa = args.service_account
        provider = cluster.provider
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider)
        # The workload pool exists once a Workload-Identity cluster exists in the project.
        iam_opts = pulumi.ResourceOptions(parent=self, depends_on=[cluster.cluster])
        bucket_names = {
            key: bucket.bucket_name if isinstance(bucket, StackBucket) else bucket for key, bucket in args.buckets.items()
        }

        ns_deps: Sequence[pulumi.Resource] = []
        if namespace != "default":
            ns = k8s_objects.create(render_namespace(namespace, stack=stack), f"{name}-ns", k8s_opts)
            ns_deps = [ns]

        self.gsa_email = None
        if args.mode == "gsa":
            gsa = gcp.serviceaccount.Account(
                f"{name}-gsa",
                account_id=naming.service_account_id(stack, ksa),
                display_name=naming.workload_gsa_display_name(stack, namespace, ksa),
                project=project,
                opts=pulumi.ResourceOptions(parent=self),
            )
            gcp.serviceaccount.IAMMember(
                f"{name}-wi-user",
                service_account_id=gsa.name,
                role="roles/iam.workloadIdentityUser",
                member=f"serviceAccount:{project}.svc.id.goog[{namespace}/{ksa}]",
                opts=iam_opts,
            )
            self.gsa_email = gsa.email
            self.member = gsa.email.apply(lambda email: f"serviceAccount:{email}")
        else:
            number = gcp.organizations.get_project_output(project_id=project).number
            self.member = number.apply(lambda n: principal_member(str(n), project, namespace, ksa))

        self.service_account = k8s_objects.create(
            render_service_account(ksa, namespace, stack=stack, gsa_email=self.gsa_email),
            f"{name}-ksa",
            pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(ns_deps)),
        )

        for key, role in sorted(args.bucket_roles.items()):
            gcp.storage.BucketIAMMember(
                f"{name}-{key}-access",
                bucket=bucket_names[key],
                role=role,
                member=self.member,
                opts=iam_opts,
            )

        self.node_gsa_email = None
        self.node_grants = []
        if args.workload_metadata == "GCE_METADATA":
            # Pods on the TPU pools act as the nodes' account (GkeCluster's NodeServiceAccount), so it
            # gets the same bucket roles; TpuSlicePool depends on these grants, so the pools are
            # created after and deleted before them.
            node_service_account = cluster.node_service_account
            node_member = pulumi.Output.from_input(node_service_account).apply(lambda email: f"serviceAccount:{email}")
            for key, role in sorted(args.bucket_roles.items()):
                grant = gcp.storage.BucketIAMMember(
                    f"{name}-{key}-node-access",
                    bucket=bucket_names[key],
                    role=role,
                    member=node_member,
                    opts=iam_opts,
                )
                self.node_grants.append(grant)
            self.node_gsa_email = node_service_account

        self.register_outputs(
            {
                "namespace": self.namespace,
                "service_account": self.service_account_name,
                "member": self.member,
                "gsa_email": self.gsa_email,
                "node_gsa_email": self.node_gsa_email,
            }
        )
