"""``CapacityScheduling``: the in-cluster side of a stack's capacity tiers (``tpu.capacity``).

What is rendered, and why, is in :mod:`components.render.tiers`: a ComputeClass ordering the tier
pools (a fallback ladder), or Kueue with a ProvisioningRequest admission check (queued provisioning).
This component registers those objects (the Kueue controller first, pinned like LWS and JobSet:
``components.platform.addons.controllers.HelmController``) and gives the workload what it needs through
:meth:`CapacityScheduling.attach`: every Kubernetes object registered afterwards passes through
``render.capacity.apply_scheduling`` (ComputeClass selector and toleration, exclusive placement, queue
label) and, where that changed it, depends on this component, so no kind needs code of its own.

A stack with one tier creates nothing here (``needed`` is false): its plan is what it was. An add-on
module (``components.platform.addons.Addon``): the program installs it, first, when ``needed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from ...config.stack import StackConfig
from ...render import tiers as capacity
from .. import k8s as k8s_objects
from .controllers import HelmController

if TYPE_CHECKING:
    from ..gke import GkeCluster

NAME = "capacityScheduling"
"""The add-on's name (a stack opts in through its capacity tiers, not its kind)."""
SCAN_WAIVERS: Mapping[str, Mapping[str, str]] = {}
"""None: the ComputeClass and Kueue queue objects run no pods (Kueue's own chart is not scanned)."""


@dataclass(frozen=True)
class CapacitySchedulingArgs:
    """Inputs of :class:`CapacityScheduling`."""

    config: StackConfig
    """The stack (its capacity planner already resolved the slice: the queue's TPU quota is one slice's chips)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider (``GkeCluster.provider``)."""
    namespace_ready: Sequence[pulumi.Resource] = ()
    """What creates the stack's namespace (``WorkloadIdentity``): the LocalQueue lives in it."""
    pools: Sequence[pulumi.Resource] = ()
    """The stack's TPU pools: the ComputeClass (and so every workload object, which depends on this
    component) comes after them, so on the ``up`` that turns a one-tier stack into a ladder the first
    tier's pool carries the class's label and taint before the pods select the class (else the
    autoscaler would grow a fallback tier and, with no active migration, the pods would stay there)."""


def needed(config: StackConfig) -> bool:
    """The stack's tiers need in-cluster objects (a fallback ladder or a queued-provisioning tier)."""
    return bool(capacity.render_scheduling(config))


def _resource_name(name: str, obj: Mapping[str, Any]) -> str:
    return f"{name}-{str(obj['kind']).lower()}-{obj['metadata']['name']}"


class CapacityScheduling(pulumi.ComponentResource):
    """The ComputeClass, or the Kueue controller and queue objects, of a stack with capacity tiers."""

    TYPE = "gke-tpu-llm:scheduling:CapacityScheduling"

    controller: HelmController | None
    """The pinned Kueue release (queued provisioning only)."""
    objects: list[pulumi.CustomResource]

    def __init__(self, name: str, args: CapacitySchedulingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self._config = args.config
        rendered = capacity.render_scheduling(args.config)
        if not rendered:
            raise ValueError(f"{name}: the stack has one capacity tier; create CapacityScheduling only when needed(config)")
        self.controller = None
        after: list[pulumi.Resource] = []
        if capacity.has_queue(args.config):
            # Kueue's CRDs and admission webhooks come with its release (components/platform/addons/controllers.py): every
            # queue object depends on it.
            self.controller = HelmController(
                "kueue",
                controller="kueue",
                version=args.config.controllers.kueue_version,
                provider=args.provider,
                opts=pulumi.ResourceOptions(parent=self),
            )
            after.append(self.controller.release)
        self.objects = []
        for obj in rendered:
            namespaced = "namespace" in obj["metadata"]
            deps = [*after, *(args.namespace_ready if namespaced else ()), *args.pools]
            self.objects.append(
                k8s_objects.create(
                    obj,
                    _resource_name(name, obj),
                    pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=deps),
                )
            )
        self.register_outputs({"objects": [o.urn for o in self.objects]})

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj`` with what the stack's tiers need (``render.capacity.apply_scheduling``)."""
        return capacity.apply_scheduling(obj, self._config)

    def transformation(self, args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        """A Pulumi resource transformation: a Kubernetes object that :meth:`apply` changes is registered
        changed, and after this component's objects (the ComputeClass must exist before its pods are
        scheduled; Kueue must hold the queue before the workload is created, or the workload would not
        be suspended for admission). Every other resource passes untouched."""
        if not args.type_.startswith("kubernetes:"):
            return None
        props = args.props
        metadata, spec = props.get("metadata"), props.get("spec")
        if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
            return None  # an object without a plain spec has no pod template to change
        obj = {
            "apiVersion": props.get("api_version", props.get("apiVersion")),
            "kind": props.get("kind"),
            "metadata": metadata,
            "spec": spec,
        }
        changed = self.apply(obj)
        if changed == obj:
            return None
        new_props = {**props, "metadata": changed["metadata"], "spec": changed["spec"]}
        return pulumi.ResourceTransformationResult(
            new_props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(depends_on=[self]))
        )

    def attach(self) -> None:
        """Apply :meth:`transformation` to every resource the program registers from now on (the workload's)."""
        pulumi.runtime.register_stack_transformation(self.transformation)


def install(
    config: StackConfig,
    *,
    cluster: GkeCluster,
    namespace_ready: Sequence[pulumi.Resource] = (),
    pools: Sequence[pulumi.Resource] = (),
) -> CapacityScheduling:
    """The stack's scheduling objects, attached: every resource registered afterwards (the workload's)
    gets the selectors or queue label its tiers need and depends on them."""
    scheduling = CapacityScheduling(
        "capacity-scheduling",
        CapacitySchedulingArgs(config=config, provider=cluster.provider, namespace_ready=namespace_ready, pools=pools),
    )
    scheduling.attach()
    return scheduling
