"""The whole stack config: ``gcp:project``/``gcp:region`` plus the ``gke-tpu-llm:*`` keys, and the
rules that need more than one section (region and zone, prod safety, bucket needs, names).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field, model_validator

from .. import planner
from ..workloads.kind import WorkloadKindInfo, benchmark_rules
from ..workloads.registry import BY_KIND, KINDS
from . import naming
from .base import PulumiBool, Spec, bucket_rules
from .environments import ALLOW_REPLACE_LABEL, ENVIRONMENTS, Environment, EnvironmentPolicy
from .errors import raise_rules, rule
from .gke_rules import (
    compute_class_version_rules,
    flex_start_version_rules,
    fp8_rules,
    gke_version_rules,
    inference_gateway_version_rules,
    ray_ladder_version_rules,
    region_rules,
    zone_in_region_rules,
)
from .isolation import UNSAFE_SHARED_PROJECT_KEY
from .observability_spec import ObservabilitySpec
from .platform import BUCKET_KEY_PATTERN, BucketSpec, ClusterSpec, ControllersSpec, IdentitySpec
from .tpu_spec import TpuSpec
from .workload import MAX_CHIPS, WorkloadBase

if TYPE_CHECKING:
    # Statically every kind's spec is a WorkloadBase; kind code narrows with isinstance.
    WorkloadSpec = WorkloadBase
else:
    WorkloadSpec = Annotated[Union[tuple(info.workload for info in KINDS)], Field(discriminator="kind")]  # noqa: UP007
"""``gke-tpu-llm:workload``: one spec per registered kind, chosen by ``kind``."""


class StackConfig(Spec):
    """A whole stack: ``gcp:project``/``gcp:region`` plus the ``gke-tpu-llm:*`` keys."""

    stack: str = Field(description="Pulumi stack name (not set in the file; taken from the engine).")
    project: str = Field(alias="gcp:project", pattern=naming.PROJECT_ID_PATTERN, description="GCP project id.")
    region: str = Field(alias="gcp:region", description="GCP region of the cluster and buckets.")
    # Top-level keys: `pulumi config set` without --path stores text; the enum's value is text anyway
    # (strict would take only an Environment member), and the booleans take "true"/"false" (PulumiBool).
    environment: Environment = Field(
        Environment.dev, strict=False, description="dev or prod; decides protection, retention and force-destroy."
    )
    cluster: ClusterSpec = Field(default_factory=ClusterSpec, description="The GKE cluster.")
    tpu: TpuSpec = Field(description="The TPU slices (one node pool each).")
    buckets: dict[str, BucketSpec] = Field(default_factory=dict, description="Buckets by key.")
    identity: IdentitySpec = Field(default_factory=IdentitySpec, description="Workload Identity.")
    workload: WorkloadSpec = Field(description="The workload that runs on the slices.")
    controllers: ControllersSpec = Field(
        default_factory=ControllersSpec, description="Pinned versions of the in-cluster controllers the workload needs."
    )
    observability: ObservabilitySpec = Field(
        default_factory=ObservabilitySpec, description="The stack's Cloud Monitoring dashboard and alert policies."
    )
    allow_teardown: PulumiBool = Field(
        False,
        description="Prepare a prod teardown: lift Pulumi protection from the cluster and TPU pools and switch GKE "
        "deletion protection off, so `pulumi destroy --exclude-protected` removes everything except the buckets, "
        "which stay protected and retained. Off by default because prod must not be deletable by accident; "
        "land it as its own reviewed change and `pulumi up` before the destroy (components/README-day2.md: Tearing down prod).",
    )

    unsafe_share_project_with_non_prod: PulumiBool = Field(
        False,
        description="UNSAFE: let non-prod stacks use this prod stack's gcp:project. Off by default because a dev "
        "deployer in prod's project needs IAM-admin rights there, and dev grants, names and Workload Identity "
        "namespaces then sit beside prod's (one typo away from prod's data). Prod only; every other isolation rule "
        "(no shared names or Workload Identity namespaces) still holds. Give each environment its own project instead.",
    )

    @model_validator(mode="after")
    def _cross_rules(self) -> StackConfig:
        rules: list[dict[str, Any]] = region_rules(
            "gcp:region",
            self.region,
            allow_undocumented=self.tpu.allow_undocumented_zone,
            escape="tpu.allowUndocumentedZone: true",
            generation=self.tpu.generation,
            set_region="pulumi config set gcp:region <region>",
        )
        if not rules:  # an unknown region is the one problem
            rules += zone_in_region_rules(
                "tpu.zone", self.tpu.zone, self.region, region_key="gcp:region", generation=self.tpu.generation
            )
        if self.tpu.generation is not None:  # else capacity.resolve re-validates with the chosen one
            rules += gke_version_rules("cluster.version", self.cluster.version, self.tpu.generation)
        # Several capacity tiers are ordered by a custom ComputeClass (components/render/tiers.py).
        tier_types, version = [t.type for t in self.tpu.tiers], self.cluster.version
        rules += compute_class_version_rules("cluster.version", version, tier_types)
        rules += flex_start_version_rules("cluster.version", version, tier_types)
        multi_host_ray = "rayOperator" in self.addons and (self.tpu.topology is None or self.tpu.slice.multi_host)
        rules += ray_ladder_version_rules("cluster.version", version, tier_types, multi_host_ray)
        rules += inference_gateway_version_rules("cluster.version", version, self.workload.front_door.gateway)
        w = self.workload
        rules += fp8_rules(w.weights, w.kv_cache, kind=w.kind, engine=self.kind_info.engine, generation=self.tpu.generation)
        if "gcsFuseCsiDriver" in self.addons and self.tpu.workload_metadata == "GCE_METADATA":
            rules.append(
                rule(
                    "tpu.workloadMetadata",
                    "GCE_METADATA",
                    f"breaks {self.workload.kind}: the GCS FUSE CSI driver authenticates through Workload "
                    "Identity, which GCE_METADATA nodes do not offer",
                    "GKE_METADATA",
                    "remove the key (GKE_METADATA is the default)",
                )
            )
        if self.tpu.spot and not self.policy.allow_spot:
            rules.append(
                rule(
                    "tpu.spot",
                    True,
                    f"is not allowed in {self.environment.value} (preemptible serving capacity)",
                    "false",
                    "use on-demand capacity or a reservation",
                )
            )
        for i, tier in enumerate(self.tpu.capacity or ()):
            if tier.type == "spot" and not self.policy.allow_spot:
                rules.append(
                    rule(
                        f"tpu.capacity.{i}.type",
                        "spot",
                        f"is not allowed in {self.environment.value} (preemptible serving capacity), not even as a fallback",
                        "onDemand, reservation, flexStart, queuedProvisioning",
                        "remove the spot tier, or use onDemand",
                    )
                )
        if self.environment is Environment.prod:
            if self.cluster.deletion_protection is False and not (self.cluster.allow_replacement or self.allow_teardown):
                rules.append(
                    rule(
                        "cluster.deletionProtection",
                        False,
                        "turns off protection in prod",
                        "true (or unset)",
                        "remove the key; to tear down prod, first switch it off in a reviewed change",
                    )
                )
            if self.cluster.allow_replacement and self.deletion_protection:
                # GKE refuses to delete a cluster with deletion protection on, so the replacement the
                # allowance exists for would fail half-way through `pulumi up` (after its pools went).
                explicit = self.cluster.deletion_protection is True
                rules.append(
                    rule(
                        "cluster.deletionProtection",
                        True if explicit else "(unset: on in prod)",
                        "contradicts cluster.allowReplacement: GKE would refuse to delete the cluster the change replaces",
                        "false, in the same change as cluster.allowReplacement",
                        ("set" if not explicit else "change")
                        + " cluster.deletionProtection: false beside cluster.allowReplacement: true, "
                        "or remove cluster.allowReplacement",
                    )
                )
            if self.allow_teardown and self.cluster.deletion_protection is True:
                rules.append(
                    rule(
                        "cluster.deletionProtection",
                        True,
                        "contradicts allowTeardown: GKE would refuse to delete the cluster",
                        "false (or unset)",
                        "remove cluster.deletionProtection, or remove allowTeardown",
                    )
                )
            for key, bucket in self.buckets.items():
                if bucket.force_destroy:
                    rules.append(
                        rule(
                            f"buckets.{key}.forceDestroy",
                            True,
                            "would delete prod data on teardown",
                            "false (or unset)",
                            "remove the key; prod buckets are retained",
                        )
                    )
        for key in self.identity.bucket_roles:
            if key not in self.buckets:
                rules.append(
                    rule(
                        f"identity.bucketRoles.{key}",
                        key,
                        "names no bucket of this stack",
                        ", ".join(self.buckets) or "no buckets defined",
                        "use a key under gke-tpu-llm:buckets",
                    )
                )
        # Workload rules that need the pools, buckets or model (e.g. HPA max <= pool nodes) live with
        # the workload's spec; this file only dispatches to the active section.
        rules += [_under("workload", r) for r in _parallelism_rules(self.workload, self.kind_info)]
        rules += self.workload.section.stack_rules(self)
        # Which buckets the workload reads or writes, and the least role on each, likewise.
        rules += bucket_rules(self.workload.section.bucket_needs(self), self.buckets, self.identity.bucket_roles)
        rules += self._name_rules()
        if self.unsafe_share_project_with_non_prod and self.environment is not Environment.prod:
            rules.append(
                rule(
                    UNSAFE_SHARED_PROJECT_KEY,
                    True,
                    f"is for prod stacks only (this stack is {self.environment.value}): it is prod's choice to host others",
                    "false (or unset)",
                    "remove the key; a non-prod stack needs no permission to live in its own project",
                )
            )
        rules += benchmark_rules(self.workload, BY_KIND)
        raise_rules(rules)
        return self

    def _name_rules(self) -> list[dict[str, Any]]:
        """Every physical name the stack generates meets its service's rules and belongs to one
        resource; each problem names the key that changes the name (the stack name is not a key)."""
        rules: list[dict[str, Any]] = []
        from_stack = f"(derived from the stack name {self.stack!r}) "
        for problem in naming.stack_name_problems(self.stack):
            rules.append(
                rule(
                    "(stack name)",
                    self.stack,
                    problem,
                    "letters, digits, '_', '.' and '-'",
                    "rename the stack (pulumi stack rename), or the --config file Pulumi.<stack>.yaml",
                )
            )
        for problem in naming.label_value_problems(self.labels["stack"]):
            problem = f"gives the label value {self.labels['stack']!r}, which {problem}"
            rules.append(rule("(stack name)", self.stack, problem, "", "rename the stack"))
        if self.cluster.name is None:
            for problem in naming.gke_name_problems(self.cluster_name):
                rules.append(
                    rule("cluster.name", self.cluster_name, from_stack + problem, naming.GKE_NAME_PATTERN, "set cluster.name")
                )
        for problem in naming.namespace_problems(self.namespace) if self.identity.namespace is None else []:
            rules.append(
                rule(
                    "identity.namespace",
                    self.namespace,
                    from_stack + problem,
                    "a namespace of this stack's own (not kube-*, gke-*, gmp-*, "
                    + ", ".join(sorted(naming.RESERVED_NAMESPACES))
                    + ")",
                    "set identity.namespace to another name (or rename the stack)",
                )
            )
        bucket_names: dict[str, str] = {}
        for key, bucket in self.buckets.items():
            if not re.match(BUCKET_KEY_PATTERN, key):
                rules.append(
                    rule(
                        f"buckets.{key}",
                        key,
                        "is not a bucket key (it becomes part of the bucket name)",
                        "lowercase letters, digits, '-' and '_', at most 63, alphanumeric at both ends",
                        "rename the key (and its identity.bucketRoles entry)",
                    )
                )
                continue
            name = bucket_names[key] = self.bucket_name(key)
            for problem in naming.bucket_name_problems(name):
                rules.append(
                    rule(
                        f"buckets.{key}",
                        name,
                        f"is the bucket name <project>-<stack>-<key> and {problem}",
                        "3-63 lowercase letters, digits, '-' or '_'; no 'goog' prefix; no 'google'",
                        "rename the key, or the stack",
                    )
                )
            for problem in naming.label_value_problems(naming.label_value(bucket.purpose)):
                rules.append(rule(f"buckets.{key}.purpose", bucket.purpose, problem, "a short label", "shorten it"))
        for name, keys in naming.collisions(bucket_names).items():
            for key in keys[1:]:
                rules.append(
                    rule(
                        f"buckets.{key}",
                        name,
                        f"is the bucket name of buckets.{keys[0]} too ('_' becomes '-' and long names are cut)",
                        "bucket keys that differ after that mapping",
                        f"rename buckets.{key} (and its identity.bucketRoles entry)",
                    )
                )
        accounts: dict[str, str] = {}
        if self.identity.mode == "gsa":
            accounts["identity.serviceAccount"] = naming.service_account_id(self.stack, self.identity.service_account)
            display = naming.workload_gsa_display_name(self.stack, self.namespace, self.identity.service_account)
            for problem in naming.display_name_problems(display):
                problem = f"is the service account's display name and {problem}"
                rules.append(rule("identity.serviceAccount", display, problem, "", "use shorter names"))
        # Every stack's node pools run as its own node service account (components/platform/identity.py).
        accounts["(stack name)"] = naming.service_account_id(self.stack, "tpu-nodes")
        node_display = naming.node_gsa_display_name(self.stack, pods_act_as_it=self.tpu.workload_metadata == "GCE_METADATA")
        for problem in naming.display_name_problems(node_display):
            problem = f"gives the node service account a display name that {problem}"
            rules.append(rule("(stack name)", self.stack, problem, "", "rename the stack"))
        for key, account_id in accounts.items():
            for problem in naming.service_account_id_problems(account_id):
                problem = f"{from_stack}is a Google service-account id and {problem}"
                rules.append(rule(key, account_id, problem, "", "rename the stack or the key"))
        for account_id in naming.collisions(accounts):
            rules.append(
                rule(
                    "identity.serviceAccount",
                    self.identity.service_account,
                    f"gives the workload service account the id {account_id!r}, which the stack's node service account "
                    "uses too",
                    f"any name other than {self.identity.service_account!r}",
                    "set identity.serviceAccount to another name",
                )
            )
        for pool in self.pool_names():
            for problem in naming.gke_name_problems(pool):
                problem = f"gives the node pool name {pool!r}, which {problem}"
                rules.append(rule("tpu.slices", self.tpu.slices, problem, "", "use fewer slices"))
        return rules

    # ---- derived values (never configured) ----

    @property
    def policy(self) -> EnvironmentPolicy:
        return ENVIRONMENTS[self.environment]

    @property
    def namespace(self) -> str:
        """The workloads' namespace: configured, or the stack name (see ``identity.namespace``)."""
        return self.identity.namespace or naming.dns_label(self.stack)

    @property
    def cluster_allowed_to_go(self) -> bool:
        """A reviewed change allows the cluster to be replaced or deleted (the policy pack's label)."""
        return self.cluster.allow_replacement or self.allow_teardown

    @property
    def pools_allowed_to_go(self) -> bool:
        """A reviewed change allows the TPU pools to be replaced or deleted (the policy pack's label)."""
        return self.tpu.allow_replacement or self.allow_teardown

    @property
    def cluster_protected(self) -> bool:
        return self.policy.protect and not self.cluster_allowed_to_go

    @property
    def pools_protected(self) -> bool:
        return self.policy.protect and not self.pools_allowed_to_go

    def labels_for(self, allow_replacement: bool) -> dict[str, str]:
        """Resource labels, with the allowance marker the policy pack reads when set."""
        return self.labels | ({ALLOW_REPLACE_LABEL: "true"} if allow_replacement else {})

    @property
    def cluster_name(self) -> str:
        return self.cluster.name or naming.gke_name(self.stack)

    @property
    def cluster_location(self) -> str:
        return self.region if self.cluster.location_type == "regional" else self.tpu.zone

    @property
    def deletion_protection(self) -> bool:
        dp = self.cluster.deletion_protection
        if dp is None:
            # A teardown must get past GKE's own guard as well as Pulumi's protect.
            return self.policy.deletion_protection and not self.allow_teardown
        return dp

    @property
    def kind_info(self) -> WorkloadKindInfo:
        """What the workload's kind declares (engine, add-ons, scan waivers, perf key, secrets)."""
        return BY_KIND[self.workload.kind]

    @property
    def addons(self) -> frozenset[str]:
        """The cluster-level features the stack's kind needs with these settings
        (``WorkloadKindInfo.addons``): GKE add-ons, pinned controllers and add-on modules by name."""
        return self.kind_info.addons(self)

    @property
    def labels(self) -> dict[str, str]:
        """GCP resource labels on everything the stack creates (teardown sweeps find them by these)."""
        return {"app": "gke-tpu-llm", "stack": naming.label_value(self.stack), "environment": self.environment.value}

    def bucket_name(self, key: str) -> str:
        return naming.bucket_name(self.project, self.stack, key)

    def bucket_force_destroy(self, key: str) -> bool:
        fd = self.buckets[key].force_destroy
        return self.policy.force_destroy if fd is None else fd

    def pool_names(self) -> list[str]:
        """Node-pool names, one per slice and capacity tier (``tpu-slice-0``, ``tpu-slice-0-flex``): the
        index only, never the shape, so a topology or machine-type change replaces the same pool instead
        of creating a second one (see ``tier_pools``)."""
        return [name for _, _, name in self.tier_pools()]

    def tier_pools(self) -> list[tuple[int, int, str]]:
        """(slice index, tier index, pool name) of every TPU pool, slice by slice in tier order; the
        first tier keeps ``tpu-slice-<i>`` (``naming.node_pool_name``)."""
        tiers = self.tpu.tiers
        return [
            (i, t, naming.node_pool_name(i, t, tier.type)) for i in range(self.tpu.slices) for t, tier in enumerate(tiers)
        ]

    def pools_of_tier(self, tier: int) -> list[str]:
        """Every slice's pool in capacity tier ``tier`` (``tpu-slice-0``, ``tpu-slice-1-flex``, …)."""
        return [name for _, t, name in self.tier_pools() if t == tier]



def _parallelism_rules(workload: WorkloadBase, info: WorkloadKindInfo) -> list[dict[str, Any]]:
    """Axis names and sizes; whether the degrees fit the slice and the model is the planner's check."""
    if workload.parallelism is None:
        return []
    names = planner.mesh_axis_names(info.engine, info.mode)
    rules: list[dict[str, Any]] = []
    for axis, size in workload.parallelism.items():
        if axis not in names:
            rules.append(
                rule(
                    f"parallelism.{axis}",
                    size,
                    f"is not a mesh axis of {info.kind} ({info.mode})",
                    ", ".join(names),
                    "use one of the allowed axes (missing axes are 1)",
                )
            )
        elif size == 0 or size < -1 or size > MAX_CHIPS:
            rules.append(
                rule(
                    f"parallelism.{axis}",
                    size,
                    "is not a mesh size",
                    f"1..{MAX_CHIPS}, or -1 for the chips the other axes leave (one axis at most)",
                    "use a degree that divides the slice's chips, or remove the axis",
                )
            )
    fill = [axis for axis, size in workload.parallelism.items() if size == -1]
    if len(fill) > 1:
        rules.append(
            rule(
                "parallelism",
                dict(workload.parallelism),
                f"has {len(fill)} axes set to -1 ({', '.join(fill)})",
                "at most one -1 axis",
                "give all but one of them a size",
            )
        )
    return rules


def _under(section: str, r: dict[str, Any]) -> dict[str, Any]:
    """A section's rule as a rule of the stack (its path prefixed with the section's key)."""
    return {**r, "path": f"{section}.{r['path']}"}
