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
on that repository only (``components.maxtext_ray``).

TPU pools with ``tpu.workloadMetadata: GCE_METADATA`` (the mode the upstream Pathways tutorials
use) have no Workload Identity: pods on them act as the *node's* service account, and the KSA's
identity above is ignored there. So that such pods still reach exactly their buckets, the node
account then also holds the same per-bucket roles (granted here, by ``WorkloadIdentity``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components import k8s as k8s_objects
from components import naming
from components.config import StackConfig
from components.render import render_namespace, render_service_account

NODE_ROLE = "roles/container.defaultNodeServiceAccount"
"""GKE's least-privilege role for a node service account (logging, monitoring, metadata)."""
WORKLOAD_COMPONENT = "workload"
"""Name of the stack's ``WorkloadIdentity`` (``components.platform``); earlier releases created the
node account under it (see ``NodeServiceAccount``)."""


def node_service_account_id(config: StackConfig) -> str:
    """Account id of the nodes' GSA: ``<stack>-tpu-nodes`` for every stack. The id is create-only
    (a new id is a new account), and stacks with GCE_METADATA TPU pools already have this one, so it
    keeps the name it had when only TPU pools used it."""
    return naming.service_account_id(config.stack, "tpu-nodes")


def _urn(type_chain: str, name: str) -> str:
    return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_chain}::{name}"


class NodeServiceAccount(pulumi.ComponentResource):
    """The nodes' Google service account and its one project role (see the module docstring)."""

    TYPE = "gke-tpu-llm:identity:NodeServiceAccount"

    email: pulumi.Output[str]
    member: pulumi.Output[str]
    grants: list[pulumi.Resource]
    """What a pool depends on: created before the pool, deleted after it."""

    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        # Stacks with GCE_METADATA TPU pools got this account and role from WorkloadIdentity
        # ("workload-node-gsa", "workload-node-role"). The aliases keep that state: the account is not
        # replaced (same id, so a create-first replacement would collide, and a new account would lose
        # its bucket bindings), and the role binding is not created again and then deleted (deleting
        # the old IAMMember would remove the binding the new one shares).
        legacy = "gke-tpu-llm:identity:WorkloadIdentity"
        gce_metadata = config.tpu.workload_metadata == "GCE_METADATA"
        account = gcp.serviceaccount.Account(
            f"{name}-gsa",
            account_id=node_service_account_id(config),
            display_name=naming.node_gsa_display_name(config.stack, pods_act_as_it=gce_metadata),
            project=config.project,
            opts=pulumi.ResourceOptions(
                parent=self,
                aliases=[_urn(f"{legacy}$gcp:serviceaccount/account:Account", f"{WORKLOAD_COMPONENT}-node-gsa")],
            ),
        )
        self.email = account.email
        self.member = account.email.apply(lambda email: f"serviceAccount:{email}")
        role = gcp.projects.IAMMember(
            f"{name}-role",
            project=config.project,
            role=NODE_ROLE,
            member=self.member,
            opts=pulumi.ResourceOptions(
                parent=self,
                aliases=[_urn(f"{legacy}$gcp:projects/iAMMember:IAMMember", f"{WORKLOAD_COMPONENT}-node-role")],
            ),
        )
        self.grants = [role]
        self.register_outputs({"email": self.email})


def principal_member(project_number: str, project: str, namespace: str, ksa: str) -> str:
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
    )


class WorkloadIdentity(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:identity:WorkloadIdentity"

    namespace: str
    service_account_name: str
    member: pulumi.Output[str]
    gsa_email: pulumi.Output[str] | None
    node_gsa_email: pulumi.Input[str] | None
    """The nodes' GSA under GCE metadata (pods on the TPU pools act as it); None with GKE metadata."""
    node_grants: list[pulumi.Resource]
    """Bucket grants to the nodes' GSA under GCE metadata (TPU pools depend on them); else none."""

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        provider: k8s.Provider,
        bucket_names: Mapping[str, pulumi.Input[str]],
        cluster: pulumi.Resource,
        node_service_account: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)
        spec = config.identity
        self.namespace = namespace = config.namespace
        self.service_account_name = spec.service_account
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider)
        # The workload pool exists once a Workload-Identity cluster exists in the project.
        iam_opts = pulumi.ResourceOptions(parent=self, depends_on=[cluster])

        ns_deps: Sequence[pulumi.Resource] = []
        if namespace != "default":
            ns = k8s_objects.create(render_namespace(namespace, stack=config.stack), f"{name}-ns", k8s_opts)
            ns_deps = [ns]

        self.gsa_email = None
        if spec.mode == "gsa":
            gsa = gcp.serviceaccount.Account(
                f"{name}-gsa",
                account_id=naming.service_account_id(config.stack, spec.service_account),
                display_name=naming.workload_gsa_display_name(config.stack, namespace, spec.service_account),
                project=config.project,
                opts=pulumi.ResourceOptions(parent=self),
            )
            gcp.serviceaccount.IAMMember(
                f"{name}-wi-user",
                service_account_id=gsa.name,
                role="roles/iam.workloadIdentityUser",
                member=f"serviceAccount:{config.project}.svc.id.goog[{namespace}/{spec.service_account}]",
                opts=iam_opts,
            )
            self.gsa_email = gsa.email
            self.member = gsa.email.apply(lambda email: f"serviceAccount:{email}")
        else:
            number = gcp.organizations.get_project_output(project_id=config.project).number
            self.member = number.apply(lambda n: principal_member(str(n), config.project, namespace, spec.service_account))

        self.service_account = k8s_objects.create(
            render_service_account(spec.service_account, namespace, stack=config.stack, gsa_email=self.gsa_email),
            f"{name}-ksa",
            pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(ns_deps)),
        )

        for key, role in sorted(spec.bucket_roles.items()):
            gcp.storage.BucketIAMMember(
                f"{name}-{key}-access",
                bucket=bucket_names[key],
                role=role,
                member=self.member,
                opts=iam_opts,
            )

        self.node_gsa_email = None
        self.node_grants = []
        if config.tpu.workload_metadata == "GCE_METADATA":
            # Pods on the TPU pools act as the nodes' account (GkeCluster's NodeServiceAccount), so it
            # gets the same bucket roles; TpuSlicePool depends on these grants, so the pools are
            # created after and deleted before them.
            if node_service_account is None:
                raise ValueError("GCE_METADATA pools need the nodes' service account (GkeCluster.node_service_account)")
            node_member = pulumi.Output.from_input(node_service_account).apply(lambda email: f"serviceAccount:{email}")
            for key, role in sorted(spec.bucket_roles.items()):
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
