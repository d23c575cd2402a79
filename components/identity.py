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

TPU pools with ``tpu.workloadMetadata: GCE_METADATA`` (the mode the upstream Pathways tutorials
use) have no Workload Identity: pods on them act as the *node's* service account, and the KSA's
identity above is ignored there. So that such pods still reach exactly their buckets, those pools
run as a dedicated node GSA (``<stack>-tpu-nodes``) that holds the same per-bucket roles plus
``roles/container.defaultNodeServiceAccount`` (GKE's least-privilege node role: logs, metrics) and
nothing else, instead of the Compute Engine default account (project Editor in many projects).
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


def node_service_account_id(config: StackConfig) -> str:
    """Account id of the TPU nodes' GSA under GCE metadata (deterministic, so pools can name it)."""
    return naming.service_account_id(config.stack, "tpu-nodes")


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
    node_gsa_email: pulumi.Output[str] | None
    """The TPU nodes' GSA under GCE metadata (pods there act as it); None with GKE metadata."""

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        provider: k8s.Provider,
        bucket_names: Mapping[str, pulumi.Input[str]],
        cluster: pulumi.Resource,
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
        self.node_grants: list[pulumi.Resource] = []
        if config.tpu.workload_metadata == "GCE_METADATA":
            # The TPU pools run as this account (TpuSlicePool takes its email and depends on these
            # grants, so pools are created after and deleted before them).
            node_gsa = gcp.serviceaccount.Account(
                f"{name}-node-gsa",
                account_id=node_service_account_id(config),
                display_name=naming.node_gsa_display_name(config.stack),
                project=config.project,
                opts=pulumi.ResourceOptions(parent=self),
            )
            node_member = node_gsa.email.apply(lambda email: f"serviceAccount:{email}")
            node_role = gcp.projects.IAMMember(
                f"{name}-node-role",
                project=config.project,
                role=NODE_ROLE,
                member=node_member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.node_grants.append(node_role)
            for key, role in sorted(spec.bucket_roles.items()):
                grant = gcp.storage.BucketIAMMember(
                    f"{name}-{key}-node-access",
                    bucket=bucket_names[key],
                    role=role,
                    member=node_member,
                    opts=iam_opts,
                )
                self.node_grants.append(grant)
            self.node_gsa_email = node_gsa.email

        self.register_outputs(
            {
                "namespace": self.namespace,
                "service_account": self.service_account_name,
                "member": self.member,
                "gsa_email": self.gsa_email,
                "node_gsa_email": self.node_gsa_email,
            }
        )
