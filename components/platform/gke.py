"""``GkeCluster``: a Standard GKE cluster ready for TPU slices.

Owns the cluster, its CPU system pool, the service account every node pool of the stack runs as
(``identity.NodeServiceAccount``), and a Kubernetes provider built from the cluster's endpoint
and CA. Does not own TPU pools (``TpuSlicePool``) or anything inside the cluster.

Choices, and why (the fields are decided by pure functions of the Args in
``components.platform.cluster_settings``):
* The default pool is removed and a small CPU system pool added, because every Standard cluster
  needs a non-TPU pool for kube-system and controllers, and the default pool cannot be managed
  without perpetual diffs.
* Workload Identity is always on (``<project>.svc.id.goog``) so pods never need key files.
* Add-ons (GCS FUSE CSI, Ray operator) are enabled only when the stack's workload needs them, and
  the Gateway API controller (with HTTP load balancing) only when its front door is a gateway.
* The kubeconfig uses ``gke-gcloud-auth-plugin`` (no static credentials) and is a secret output.
  While the cluster does not exist yet its endpoint is unknown, so the Kubernetes provider is
  unknown too and pulumi-kubernetes previews the in-cluster objects without contacting a server.
* Its nodes never run as the Compute Engine default account: unless ``node_service_account`` names
  an existing account, the cluster creates one (``identity.NodeServiceAccount``, id
  ``<cluster name>-nodes``) holding only GKE's node role, and ``TpuSlicePool`` runs as it too.

As a library (no stack config)::

    from components import GkeCluster, GkeClusterArgs

    cluster = GkeCluster("demo", GkeClusterArgs(project="my-project", region="us-east5"))
    pulumi.export("kubeconfig", cluster.kubeconfig)

``GkeClusterArgs`` documents every setting; their defaults are a stack file's. Add TPU pools with
``TpuSlicePool`` and deploy into the cluster with ``cluster.provider``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
from pydantic import BaseModel

from ..catalog import gce
from ..config import gke_rules as rules
from ..config import naming
from ..config.environments import ALLOW_REPLACE_LABEL
from ..config.errors import Violation, rule
from ..config.platform import ClusterHardeningSpec, ClusterSpec, Dataplane, LocationType, ReleaseChannel, SystemPoolSpec
from . import cluster_settings as settings
from .args import (
    DEFAULT_POLICY,
    args_class,
    check,
    default_of,
    meta,
    own,
    protect_description,
    validate,
    violations,
)
from .identity import NodeServiceAccount, NodeServiceAccountArgs

ADDONS: Mapping[str, str] = {
    "gcsFuseCsiDriver": "Cloud Storage FUSE CSI driver (pods mount buckets as volumes)",
    "rayOperator": "GKE's managed Ray operator (RayCluster, RayJob)",
    "hpaPerformanceProfile": "the HPA performance profile (pod_autoscaling.hpa_profile PERFORMANCE), which GKE's "
    "AutoscalingMetric (autoscaling.gke.io) needs; updated in place on a live cluster",
    "highScaleCheckpointing": "GKE's Multi-Tier Checkpointing (HighScaleCheckpointing: RAM-disk CSI driver, replicator)",
}
"""The GKE add-ons ``GkeClusterArgs.addons`` can enable, beyond what every cluster gets."""


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates through gcloud's GKE auth plugin (nothing secret stored)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate}}
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [
                {
                    "name": name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "gke-gcloud-auth-plugin",
                            "provideClusterInfo": True,
                            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
                        }
                    },
                }
            ],
        },
        indent=1,
    )


def _nested(section: str, spec: type[BaseModel], name: str) -> dict[str, object]:
    """Metadata of a flattened ``ClusterSpec.<section>.<name>`` key (``system_machine_type`` is ``systemPool.machineType``)."""
    return meta(spec, name, path=f"{ClusterSpec.model_fields[section].alias}.{spec.model_fields[name].alias}")


def _hardening(name: str) -> dict[str, object]:
    return _nested("hardening", ClusterHardeningSpec, name)


def _system(name: str) -> dict[str, object]:
    return _nested("system_pool", SystemPoolSpec, name)


@args_class
@dataclass(frozen=True, kw_only=True)
class GkeClusterArgs:
    """What a ``GkeCluster`` needs. Only project and region are required; every default is a stack file's."""

    project: str = field(metadata=own("GCP project id of the cluster."))
    region: str = field(
        metadata=own(
            "GCP region of the cluster: a regional cluster's control plane and system pool span its zones, and "
            "its TPU pools must be in one of them."
        )
    )
    allow_undocumented_region: bool = field(
        default=False,
        metadata=own(
            "Accept a region the Compute Engine catalog (components/catalog/gce.py) does not list. Off by default "
            "because a wrong region fails only when GKE creates the cluster; the stack program sets it with "
            "tpu.allowUndocumentedZone."
        ),
    )
    cluster_name: str | None = field(
        default=default_of(ClusterSpec, "name"),
        metadata=meta(ClusterSpec, "name", sentences=1, extra="Unset uses the component's name."),
    )
    location_type: LocationType = field(
        default=default_of(ClusterSpec, "location_type"), metadata=meta(ClusterSpec, "location_type")
    )
    zone: str | None = field(
        default=None,
        metadata=own(
            "Zone of a zonal cluster's control plane and system pool: required when location_type is zonal, unused "
            "when regional (the stack program passes its TPU zone)."
        ),
    )
    release_channel: ReleaseChannel = field(
        default=default_of(ClusterSpec, "release_channel"), metadata=meta(ClusterSpec, "release_channel")
    )
    version: str | None = field(default=default_of(ClusterSpec, "version"), metadata=meta(ClusterSpec, "version"))
    deletion_protection: bool = field(
        default=DEFAULT_POLICY.deletion_protection,
        metadata=meta(
            ClusterSpec,
            "deletion_protection",
            sentences=1,
            extra="Defaults to off, the dev environment's policy (a stack file's default); the stack program passes "
            "its environment's (on in prod).",
        ),
    )
    protect: bool = field(
        default=DEFAULT_POLICY.protect, metadata=own(protect_description("cluster", lifted_by="allow_replacement"))
    )
    allow_replacement: bool = field(
        default=default_of(ClusterSpec, "allow_replacement"),
        metadata=meta(
            ClusterSpec,
            "allow_replacement",
            extra=f"Also labels the cluster {ALLOW_REPLACE_LABEL}=true, which the policy pack reads.",
        ),
    )
    dataplane: Dataplane = field(default=default_of(ClusterSpec, "dataplane"), metadata=meta(ClusterSpec, "dataplane"))
    system_machine_type: str = field(default=default_of(SystemPoolSpec, "machine_type"), metadata=_system("machine_type"))
    system_allow_undocumented_machine_type: bool = field(
        default=default_of(SystemPoolSpec, "allow_undocumented_machine_type"),
        metadata=_system("allow_undocumented_machine_type"),
    )
    system_nodes_per_zone: int = field(default=default_of(SystemPoolSpec, "nodes_per_zone"), metadata=_system("nodes_per_zone"))
    system_disk_size_gb: int = field(default=default_of(SystemPoolSpec, "disk_size_gb"), metadata=_system("disk_size_gb"))
    shielded_nodes: bool = field(
        default=default_of(ClusterHardeningSpec, "shielded_nodes"), metadata=_hardening("shielded_nodes")
    )
    secure_boot: bool = field(default=default_of(ClusterHardeningSpec, "secure_boot"), metadata=_hardening("secure_boot"))
    private_nodes: bool = field(default=default_of(ClusterHardeningSpec, "private_nodes"), metadata=_hardening("private_nodes"))
    authorized_networks: Sequence[str] | None = field(
        default=default_of(ClusterHardeningSpec, "authorized_networks"), metadata=_hardening("authorized_networks")
    )
    binary_authorization: bool = field(
        default=default_of(ClusterHardeningSpec, "binary_authorization"), metadata=_hardening("binary_authorization")
    )
    addons: Collection[str] = field(
        default=frozenset(),
        metadata=own(
            "GKE add-ons to enable: "
            + "; ".join(f"{key}: {text}" for key, text in ADDONS.items())
            + ". The stack program enables those its workload kind declares."
        ),
    )
    gateway_api: bool = field(
        default=False,
        metadata=own(
            "Enable GKE's Gateway API controller (gateway_api_config channel CHANNEL_STANDARD) with the HTTP load "
            "balancing add-on it needs, for Gateways and InferencePools (GKE Inference Gateway). Both are updated in "
            "place on a live cluster (UpdateClusterRequest, no replacement); turning it off again leaves the "
            "controller on (the field is computed upstream). The pinned version must be at least "
            "components.config.front_door.GKE_VERSION_FLOOR, from which GKE installs the Gateway API and "
            "InferencePool CRDs. The stack program sets it when the workload's front door is a gateway "
            "(workload.frontDoor.type)."
        ),
    )
    labels: Mapping[str, str] = field(
        default_factory=dict, metadata=own("GCP resource labels on the cluster and its system pool.")
    )
    node_service_account: NodeServiceAccountArgs | pulumi.Input[str] | None = field(
        default=None,
        metadata=own(
            "The Google service account every node pool runs as: unset creates one (NodeServiceAccount, id "
            "<cluster name>-nodes, GKE's minimal node role only); NodeServiceAccountArgs create one as given; "
            "an email uses an existing account, which must hold roles/container.defaultNodeServiceAccount."
        ),
    )

    def __post_init__(self) -> None:
        validate(self, ClusterSpec)
        found = rules.project_rules("project", self.project)
        region = rules.region_rules(
            "region", self.region, allow_undocumented=self.allow_undocumented_region, escape="allow_undocumented_region=True"
        )
        found += region
        if self.location_type == "zonal" and self.zone is None:
            zones = ", ".join(gce.zones_of(self.region)) or "the region's zones"
            found.append(rule("zone", None, "is required for a zonal cluster", zones, "set zone, or location_type='regional'"))
        if self.zone is not None and not region:  # an unknown region is the one problem
            found += rules.zone_in_region_rules("zone", self.zone, self.region, region_key="region")
        unknown = sorted(set(self.addons) - set(ADDONS))
        if unknown:
            found.append(rule("addons", unknown, "are not add-ons this component enables", ", ".join(ADDONS), "remove them"))
        found += rules.inference_gateway_version_rules("version", self.version, self.gateway_api)
        found += rules.label_rules("labels", self.labels)
        check(self, violations(found))

    @property
    def location(self) -> str:
        """The cluster's GKE location: the region, or the zone of a zonal cluster."""
        return self.zone if self.location_type == "zonal" and self.zone is not None else self.region


class GkeCluster(pulumi.ComponentResource):
    """Standard GKE cluster + CPU system pool + its node service account + a Kubernetes provider for it."""

    TYPE = "gke-tpu-llm:gke:GkeCluster"

    project: str
    region: str
    location: str
    """GKE location of the cluster (and of its node pools): the region, or the zone of a zonal cluster."""
    version: str | None
    """The configured minimum control-plane version (None: the release channel's default)."""
    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    cluster: gcp.container.Cluster
    get_credentials_command: pulumi.Output[str]
    nodes: NodeServiceAccount | None
    """The node service account the cluster created (None when given an existing account's email)."""
    node_service_account: pulumi.Input[str]
    """Email of the account every node pool runs as."""
    node_grants: list[pulumi.Resource]
    """The account's project role: pools are created after it and deleted before it."""

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        cluster_name = args.cluster_name or name
        check(
            args,
            [
                Violation(
                    "cluster_name", cluster_name, f"(the component's name) {p}", naming.GKE_NAME_PATTERN, "set cluster_name"
                )
                for p in naming.gke_name_problems(cluster_name)
            ],
        )
        super().__init__(self.TYPE, name, None, opts)
        self.project, self.region, self.location, self.version = args.project, args.region, args.location, args.version
        account = settings.node_account(args, cluster_name)
        if isinstance(account, NodeServiceAccountArgs):
            self.nodes = NodeServiceAccount(f"{name}-nodes", account, opts=pulumi.ResourceOptions(parent=self))
            self.node_service_account = self.nodes.email
            self.node_grants = self.nodes.grants
        else:
            self.nodes, self.node_service_account, self.node_grants = None, account, []

        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=cluster_name,
            project=args.project,
            # A zonal cluster lives in one zone (the stack's TPU zone); a regional one spreads the system pool.
            location=args.location,
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=args.deletion_protection,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=args.release_channel),
            min_master_version=args.version,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(workload_pool=f"{args.project}.svc.id.goog"),
            addons_config=settings.addons_config(args),
            gateway_api_config=settings.gateway_api_config(args),
            datapath_provider=settings.datapath_provider(args),
            network_policy=settings.network_policy(args),
            monitoring_config=settings.monitoring_config(),
            pod_autoscaling=settings.pod_autoscaling(args),
            enable_shielded_nodes=args.shielded_nodes,
            private_cluster_config=settings.private_cluster_config(args),
            master_authorized_networks_config=settings.master_authorized_networks(args),
            binary_authorization=settings.binary_authorization(args),
            resource_labels=settings.resource_labels(args.labels, args.allow_replacement),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=args.protect and not args.allow_replacement,
                # The cluster has an explicit name, so a replacement created first would collide
                # with the old cluster: delete it first (only ever reached after a reviewed change).
                delete_before_replace=True,
                # The removed default pool's node_config and count are create-only inputs;
                # ignoring them avoids the well-known perpetual diff / replacement.
                ignore_changes=["nodeConfig", "initialNodeCount"],
            ),
        )

        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            name=naming.SYSTEM_POOL,
            project=args.project,
            cluster=self.cluster.name,
            location=args.location,
            node_count=args.system_nodes_per_zone,
            node_config=settings.system_node_config(args, self.node_service_account),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            opts=pulumi.ResourceOptions(
                parent=self,
                # Created after (and deleted before) the node account's role: nodes that start without
                # it cannot write logs or metrics.
                depends_on=self.node_grants,
                # The pool has a fixed name, so a replacement created first would collide with the old
                # pool ("system" already exists). Its create-only inputs (service account, scopes,
                # name) are rarely changed, and then the old pool must go first: kube-system and the
                # controllers are rescheduled once the new pool's nodes are up (a few minutes).
                delete_before_replace=True,
            ),
        )

        self.cluster_name = self.cluster.name
        self.endpoint = self.cluster.endpoint
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate).apply(
                lambda values: kubeconfig(str(values[0]), str(values[1]), str(values[2] or ""))
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # No permanent deleteUnreachable: with it, a `pulumi refresh` while the API server is
            # briefly unreachable silently drops every in-cluster object from state; its maintainers
            # advise it only as a one-off (pulumi/pulumi-kubernetes#2489). If the cluster is already
            # gone, run `PULUMI_K8S_DELETE_UNREACHABLE=true pulumi destroy` once (the provider reads
            # the variable itself, provider.go Configure). Do not set it for `up`/`preview`: the SDK
            # would copy it into this provider's stored inputs. Nor pass `False` here: an explicit
            # value overrides the variable.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool]),
        )
        self.get_credentials_command = pulumi.Output.concat(
            "gcloud container clusters get-credentials ",
            self.cluster.name,
            " --location ",
            args.location,
            " --project ",
            args.project,
        )
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "endpoint": self.endpoint,
                "kubeconfig": self.kubeconfig,
                "get_credentials_command": self.get_credentials_command,
            }
        )
