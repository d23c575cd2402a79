"""The predefined IAM roles a deployer's permissions are covered with (``components.tools.roles``).

Vendored from :data:`ROLES_SOURCE`, the IAM API's ``roles.get`` as the dataset records it
(``includedPermissions``): :data:`ROLES` keeps, per role, its title, its total number of permissions
and those of its permissions that some row of ``components.tools.deployer_rows`` needs. Re-vendor
when a row gains a permission (a permission no vendored role holds fails ``roles.cover``).
Pure data (no ``pulumi`` import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ROLES_SOURCE = "iann0036/iam-dataset@2073fa52ac (2026-08-22) gcp/roles/<role>.json includedPermissions"


@dataclass(frozen=True)
class Role:
    name: str
    title: str
    total: int
    """All permissions the role grants (what a cover pays for, not only what it needs)."""
    permissions: frozenset[str]
    """Those of its permissions some row of ``components.tools.deployer_rows.ROWS`` needs."""


def _role(name: str, title: str, total: int, permissions: str) -> Role:
    return Role(name, title, total, frozenset(permissions.split()))


ROLES: Mapping[str, Role] = {
    role.name: role
    for role in (
        _role(
            "roles/container.admin",
            "Kubernetes Engine Admin",
            434,
            """
            container.apiServices.create container.apiServices.delete container.apiServices.get
            container.apiServices.list container.apiServices.update container.clusterRoleBindings.create
            container.clusterRoleBindings.delete container.clusterRoleBindings.get container.clusterRoleBindings.list
            container.clusterRoleBindings.update container.clusterRoles.bind container.clusterRoles.create
            container.clusterRoles.delete container.clusterRoles.escalate container.clusterRoles.get
            container.clusterRoles.list container.clusterRoles.update container.clusters.create
            container.clusters.delete container.clusters.get container.clusters.update container.configMaps.create
            container.configMaps.delete container.configMaps.get container.configMaps.list container.configMaps.update
            container.customResourceDefinitions.create container.customResourceDefinitions.delete
            container.customResourceDefinitions.get container.customResourceDefinitions.list
            container.customResourceDefinitions.update container.deployments.create container.deployments.delete
            container.deployments.get container.deployments.list container.deployments.update container.endpoints.list
            container.horizontalPodAutoscalers.create container.horizontalPodAutoscalers.delete
            container.horizontalPodAutoscalers.get container.horizontalPodAutoscalers.list
            container.horizontalPodAutoscalers.update container.jobs.create container.jobs.delete container.jobs.get
            container.jobs.list container.jobs.update container.mutatingWebhookConfigurations.create
            container.mutatingWebhookConfigurations.delete container.mutatingWebhookConfigurations.get
            container.mutatingWebhookConfigurations.list container.mutatingWebhookConfigurations.update
            container.namespaces.create container.namespaces.delete container.namespaces.get container.namespaces.list
            container.namespaces.update container.networkPolicies.create container.networkPolicies.delete
            container.networkPolicies.get container.networkPolicies.list container.networkPolicies.update
            container.operations.get container.persistentVolumeClaims.list container.pods.list
            container.replicaSets.list container.roleBindings.create container.roleBindings.delete
            container.roleBindings.get container.roleBindings.list container.roleBindings.update container.roles.bind
            container.roles.create container.roles.delete container.roles.escalate container.roles.get
            container.roles.list container.roles.update container.secrets.create container.secrets.delete
            container.secrets.get container.secrets.list container.secrets.update container.serviceAccounts.create
            container.serviceAccounts.delete container.serviceAccounts.get container.serviceAccounts.list
            container.serviceAccounts.update container.services.create container.services.delete container.services.get
            container.services.list container.services.update container.thirdPartyObjects.create
            container.thirdPartyObjects.delete container.thirdPartyObjects.get container.thirdPartyObjects.list
            container.thirdPartyObjects.update container.validatingWebhookConfigurations.create
            container.validatingWebhookConfigurations.delete container.validatingWebhookConfigurations.get
            container.validatingWebhookConfigurations.list container.validatingWebhookConfigurations.update
            resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/container.clusterAdmin",
            "Kubernetes Engine Cluster Admin",
            15,
            """
            container.clusters.create container.clusters.delete container.clusters.get container.clusters.update
            container.operations.get resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/container.developer",
            "Kubernetes Engine Developer",
            386,
            """
            container.apiServices.create container.apiServices.delete container.apiServices.get
            container.apiServices.list container.apiServices.update container.clusterRoleBindings.get
            container.clusterRoleBindings.list container.clusterRoles.get container.clusterRoles.list
            container.clusters.get container.configMaps.create container.configMaps.delete container.configMaps.get
            container.configMaps.list container.configMaps.update container.customResourceDefinitions.create
            container.customResourceDefinitions.delete container.customResourceDefinitions.get
            container.customResourceDefinitions.list container.customResourceDefinitions.update
            container.deployments.create container.deployments.delete container.deployments.get
            container.deployments.list container.deployments.update container.endpoints.list
            container.horizontalPodAutoscalers.create container.horizontalPodAutoscalers.delete
            container.horizontalPodAutoscalers.get container.horizontalPodAutoscalers.list
            container.horizontalPodAutoscalers.update container.jobs.create container.jobs.delete container.jobs.get
            container.jobs.list container.jobs.update container.mutatingWebhookConfigurations.get
            container.mutatingWebhookConfigurations.list container.namespaces.create container.namespaces.delete
            container.namespaces.get container.namespaces.list container.namespaces.update
            container.networkPolicies.create container.networkPolicies.delete container.networkPolicies.get
            container.networkPolicies.list container.networkPolicies.update container.persistentVolumeClaims.list
            container.pods.list container.replicaSets.list container.roleBindings.get container.roleBindings.list
            container.roles.get container.roles.list container.secrets.create container.secrets.delete
            container.secrets.get container.secrets.list container.secrets.update container.serviceAccounts.create
            container.serviceAccounts.delete container.serviceAccounts.get container.serviceAccounts.list
            container.serviceAccounts.update container.services.create container.services.delete container.services.get
            container.services.list container.services.update container.thirdPartyObjects.create
            container.thirdPartyObjects.delete container.thirdPartyObjects.get container.thirdPartyObjects.list
            container.thirdPartyObjects.update container.validatingWebhookConfigurations.get
            container.validatingWebhookConfigurations.list resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/container.editor",
            "Kubernetes Engine Editor",
            401,
            """
            container.apiServices.create container.apiServices.delete container.apiServices.get
            container.apiServices.list container.apiServices.update container.clusterRoleBindings.get
            container.clusterRoleBindings.list container.clusterRoles.get container.clusterRoles.list
            container.clusters.create container.clusters.delete container.clusters.get container.clusters.update
            container.configMaps.create container.configMaps.delete container.configMaps.get container.configMaps.list
            container.configMaps.update container.customResourceDefinitions.create
            container.customResourceDefinitions.delete container.customResourceDefinitions.get
            container.customResourceDefinitions.list container.customResourceDefinitions.update
            container.deployments.create container.deployments.delete container.deployments.get
            container.deployments.list container.deployments.update container.endpoints.list
            container.horizontalPodAutoscalers.create container.horizontalPodAutoscalers.delete
            container.horizontalPodAutoscalers.get container.horizontalPodAutoscalers.list
            container.horizontalPodAutoscalers.update container.jobs.create container.jobs.delete container.jobs.get
            container.jobs.list container.jobs.update container.mutatingWebhookConfigurations.create
            container.mutatingWebhookConfigurations.delete container.mutatingWebhookConfigurations.get
            container.mutatingWebhookConfigurations.list container.mutatingWebhookConfigurations.update
            container.namespaces.create container.namespaces.delete container.namespaces.get container.namespaces.list
            container.namespaces.update container.networkPolicies.create container.networkPolicies.delete
            container.networkPolicies.get container.networkPolicies.list container.networkPolicies.update
            container.operations.get container.persistentVolumeClaims.list container.pods.list
            container.replicaSets.list container.roleBindings.get container.roleBindings.list container.roles.get
            container.roles.list container.secrets.create container.secrets.delete container.secrets.get
            container.secrets.list container.secrets.update container.serviceAccounts.create
            container.serviceAccounts.delete container.serviceAccounts.get container.serviceAccounts.list
            container.serviceAccounts.update container.services.create container.services.delete container.services.get
            container.services.list container.services.update container.thirdPartyObjects.create
            container.thirdPartyObjects.delete container.thirdPartyObjects.get container.thirdPartyObjects.list
            container.thirdPartyObjects.update container.validatingWebhookConfigurations.create
            container.validatingWebhookConfigurations.delete container.validatingWebhookConfigurations.get
            container.validatingWebhookConfigurations.list container.validatingWebhookConfigurations.update
            resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/storage.admin",
            "Storage Admin",
            104,
            """
            resourcemanager.projects.get storage.buckets.create storage.buckets.delete storage.buckets.get
            storage.buckets.getIamPolicy storage.buckets.setIamPolicy storage.buckets.update storage.objects.delete
            storage.objects.list
            """,
        ),
        _role(
            "roles/storage.editor",
            "Storage Editor",
            24,
            """
            resourcemanager.projects.get storage.buckets.create storage.buckets.delete
            """,
        ),
        _role(
            "roles/iam.serviceAccountAdmin",
            "Service Account Admin",
            19,
            """
            iam.serviceAccounts.create iam.serviceAccounts.delete iam.serviceAccounts.get
            iam.serviceAccounts.getIamPolicy iam.serviceAccounts.setIamPolicy iam.serviceAccounts.update
            resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/iam.serviceAccountUser",
            "Service Account User",
            5,
            """
            iam.serviceAccounts.actAs iam.serviceAccounts.get resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/resourcemanager.projectIamAdmin",
            "Project IAM Admin",
            9,
            """
            resourcemanager.projects.get resourcemanager.projects.getIamPolicy resourcemanager.projects.setIamPolicy
            """,
        ),
        _role(
            "roles/artifactregistry.admin",
            "Artifact Registry Administrator",
            67,
            """
            artifactregistry.repositories.create artifactregistry.repositories.delete artifactregistry.repositories.get
            artifactregistry.repositories.getIamPolicy artifactregistry.repositories.setIamPolicy
            artifactregistry.repositories.update resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/artifactregistry.editor",
            "Artifactregistry Editor",
            61,
            """
            artifactregistry.repositories.create artifactregistry.repositories.delete artifactregistry.repositories.get
            artifactregistry.repositories.getIamPolicy artifactregistry.repositories.update resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/compute.storageAdmin",
            "Compute Storage Admin",
            160,
            """
            compute.regionOperations.get compute.resourcePolicies.create compute.resourcePolicies.delete
            compute.resourcePolicies.get compute.resourcePolicies.update resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/compute.networkAdmin",
            "Compute Network Admin",
            965,
            """
            compute.regionOperations.get compute.subnetworks.create compute.subnetworks.delete
            compute.subnetworks.expandIpCidrRange compute.subnetworks.get compute.subnetworks.update
            resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/monitoring.editor",
            "Monitoring Editor",
            80,
            """
            monitoring.alertPolicies.create monitoring.alertPolicies.delete monitoring.alertPolicies.get
            monitoring.alertPolicies.update monitoring.dashboards.create monitoring.dashboards.delete
            monitoring.dashboards.get monitoring.dashboards.update resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/monitoring.dashboardEditor",
            "Monitoring Dashboard Configuration Editor",
            9,
            "monitoring.dashboards.create monitoring.dashboards.delete monitoring.dashboards.get monitoring.dashboards.update",
        ),
        _role(
            "roles/monitoring.alertPolicyEditor",
            "Monitoring AlertPolicy Editor",
            9,
            "monitoring.alertPolicies.create monitoring.alertPolicies.delete monitoring.alertPolicies.get "
            "monitoring.alertPolicies.update",
        ),
        _role(
            "roles/certificatemanager.owner",
            "Certificate Manager Owner",
            69,
            """
            certificatemanager.certs.create certificatemanager.certs.delete certificatemanager.certs.get
            certificatemanager.certs.update certificatemanager.dnsauthorizations.create
            certificatemanager.dnsauthorizations.delete certificatemanager.dnsauthorizations.get
            certificatemanager.dnsauthorizations.update certificatemanager.dnsauthorizations.use
            certificatemanager.operations.get resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/certificatemanager.editor",
            "Certificate Manager Editor",
            61,
            """
            certificatemanager.certs.create certificatemanager.certs.get certificatemanager.certs.update
            certificatemanager.dnsauthorizations.create certificatemanager.dnsauthorizations.get
            certificatemanager.dnsauthorizations.update certificatemanager.dnsauthorizations.use
            certificatemanager.operations.get resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/compute.instanceAdmin.v1",
            "Compute Instance Admin (v1)",
            531,
            """
            compute.regionOperations.get compute.resourcePolicies.create compute.resourcePolicies.delete
            compute.resourcePolicies.get compute.resourcePolicies.update compute.subnetworks.get
            resourcemanager.projects.get
            """,
        ),
        _role(
            "roles/container.clusterViewer",
            "Kubernetes Engine Cluster Viewer",
            5,
            """
            container.clusters.get resourcemanager.projects.get
            """,
        ),
    )
}
"""Candidate predefined roles, vendored from :data:`ROLES_SOURCE`: title, total permissions, and the
permissions any row here needs (whitespace-separated)."""
