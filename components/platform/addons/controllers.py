"""``HelmController``: a pinned upstream controller (LWS, JobSet, Kueue): its CRDs, then its Helm release.

What each controller is (repository, chart, namespace, vendored releases, kinds, Helm values) is
declared once in ``components.crds.releases``; this module only registers it. Use::

    controller = HelmController(
        "kueue", controller="kueue", version=config.controllers.kueue_version,
        provider=cluster.provider, opts=pulumi.ResourceOptions(parent=self),
    )
    ...  # every custom resource of a kind it serves: depends_on=[controller.release]

(LWS: ``components/workloads/vllm/component.py``.) Which controllers a stack installs follows its
settings (``WorkloadKindInfo.addons``: LWS for JetStream and for multi-host vLLM, JobSet for Saxml;
Kueue with a queued-provisioning tier, ``components.platform.addons.capacity_scheduling``). The
release is cluster-wide, so where a kind registers it is adopted by the others: a controller's
``adopts`` (the table) lists its earlier homes, and a ``HelmController`` under any other parent
aliases them (:func:`adopted_homes`). The release's values are the table's
``Controller.helm_values(version)``: its ``values`` (Kueue: ``components.crds.releases.kueue_values``,
the integrations our workload kinds need) plus the controller image pinned by tag and digest from
``components/catalog/images.json``; a top-level key of ``values`` given here replaces the
table's value for that key. A custom
resource of a Kueue kind (ResourceFlavor, ClusterQueue, LocalQueue, AdmissionCheck,
ProvisioningRequestConfig) must depend on ``release``: the release creates both the CRDs and the
admission webhooks. The cluster-scoped ones (all but LocalQueue) need no namespace; a LocalQueue
lives in the workload's namespace, so it also depends on that Namespace.

Why a Helm release (``kubernetes:helm.sh/v3:Release``) rather than ``yaml/v2`` or ``helm.v4.Chart``:
the release previews while the cluster does not exist yet (pulumi-kubernetes#1794, fixed by #1886),
whereas ``helm.v4.Chart`` fails to parse an unknown kubeconfig at preview (#3027) and ``yaml/v2``
cannot tell whether a kind is namespaced when its CRD arrives in the same run (#3176). The chart is
taken from the project's OCI registry at the configured version, so an upgrade is one reviewed
change of ``gke-tpu-llm:controllers``. Custom resources of the controller must depend on this
component's ``release`` so they are created after the CRDs and the webhook.

CRDs are not left to Helm. Helm installs a chart's ``crds/`` directory on first install only and
never upgrades (or deletes) it, so bumping ``lwsVersion``/``jobsetVersion`` used to upgrade the
controller while the cluster kept the old CRD schema. Instead the release runs with ``skip_crds``
and this component registers the chart's CRDs of the configured version from the copies vendored
in ``components/crds`` (byte-for-byte the ``charts/<chart>/crds`` documents of the release tag; see
its README): a version bump changes these resources in the plan and upgrades them in the cluster.

Kueue is the exception (``Controller.crds_in_templates``): its chart renders the CRDs from
``templates/crd``, so Helm applies and upgrades them with the release like any other manifest, and
this component registers none (a second owner would conflict with Helm, whose install refuses
objects it does not own). A Kueue version bump is the release's ``version`` in the plan; the
vendored, rendered copies of those templates are what ``components.tools.validate`` checks against. One
consequence to know: deleting the Kueue release (``helm uninstall`` or removing it from the stack)
deletes its CRDs and with them every Kueue object in the cluster, which the ``retain_on_delete``
below prevents for LWS and JobSet.

How the CRDs are registered, and why (pulumi-kubernetes 4.34, the version pinned in
requirements.txt; sources are pulumi/pulumi-kubernetes at v4.32.0 and its CHANGELOG):

* ``CustomResourceDefinitionPatch``, not ``CustomResourceDefinition``. Every existing cluster
  already has these CRDs (created by Helm). Since 4.29.0 (#2926) a plain resource is *created*
  with a client-side create, which fails with AlreadyExists unless the provider-wide
  ``upsertExistingObjects`` option is set (provider/pkg/await/await.go ``Creation``; that option
  would re-enable silent upserts for every object of the stack). Patch resources are always sent
  as a Server-Side Apply patch, which adopts an existing object and creates a missing one, so the
  first ``up`` after this change works on old and new clusters alike. The patch carries the whole
  upstream CRD, so the result is the full object, not a partial edit.
* ``pulumi.com/patchForce: "true"``. Helm created the CRDs with an Update, so its field manager
  owns every field. Server-Side Apply reports a conflict when an apply changes a field another
  manager owns (equal values are merely co-owned); that is the case on every version bump and on
  clusters whose CRDs are already stale from an earlier bump (the bug this fixes). The annotation
  makes the provider send ``force=true`` (await.go ``patchForce``), so Pulumi takes those fields
  over. ``spec.versions`` (all schemas) is an atomic list (``x-kubernetes-list-type: atomic`` in
  the Kubernetes OpenAPI), so once taken over it is exactly the vendored list; nothing of the old
  schema survives under Helm's ownership.
* ``pulumi.com/patchFieldManager``: a fixed, readable field-manager name instead of a random
  ``pulumi-kubernetes-<id>`` per resource (provider.go ``fieldManagerName``).
* ``retain_on_delete``. Deleting a CRD deletes every custom resource of that kind in the cluster,
  including ones this stack does not manage, so removing the workload (or a CRD a later release
  dropped) must not delete it; Helm never deletes ``crds/`` either. It is also required: deleting a
  Patch resource that owns required fields fails and the provider's error asks for
  ``retainOnDelete`` (provider.go ``Delete``). To really remove a CRD, ``kubectl delete crd <name>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from ... import crds as vendored_crds
from ..identity import stack_urn

CRD_FIELD_MANAGER = "gke-tpu-llm"
"""Server-Side Apply field manager of the CRDs (``kubectl get crd NAME --show-managed-fields``)."""

CRD_ANNOTATIONS: Mapping[str, str] = {
    "pulumi.com/patchForce": "true",
    "pulumi.com/patchFieldManager": CRD_FIELD_MANAGER,
}
"""Added to each vendored CRD's annotations; see the module docstring for why."""


def crd_resource_name(name: str, crd: Mapping[str, Any]) -> str:
    """Pulumi name of a CRD of the component ``name``: ``<name>-crd-<plural>`` (stable across versions)."""
    return f"{name}-crd-{crd['spec']['names']['plural']}"


def crd_object(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The vendored CRD with :data:`CRD_ANNOTATIONS` added to its metadata (other fields unchanged)."""
    metadata = dict(crd["metadata"])
    metadata["annotations"] = {**metadata.get("annotations", {}), **CRD_ANNOTATIONS}
    return {**crd, "metadata": metadata}


def adopted_homes(controller: str, parent_type: str | None) -> list[tuple[str, str]]:
    """The earlier homes (type chain, name) whose state a ``HelmController`` of ``controller`` under a
    parent of type ``parent_type`` (None: top level) adopts: the table's ``adopts`` except its own."""
    return [
        (f"{home}${HelmController.TYPE}", name)
        for home, name in vendored_crds.CONTROLLERS[controller].adopts
        if home != parent_type
    ]


class HelmController(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:controllers:HelmController"

    crds: Sequence[k8s.apiextensions.v1.CustomResourceDefinitionPatch]
    release: k8s.helm.v3.Release
    status: pulumi.Output[Any]

    def __init__(
        self,
        name: str,
        *,
        controller: str,
        version: str,
        provider: k8s.Provider,
        values: Mapping[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        parent = opts.parent if opts is not None else None
        homes = adopted_homes(controller, parent.pulumi_resource_type if parent is not None else None)
        if homes:  # the cluster's one release keeps its state wherever another kind registered it
            adopt = pulumi.ResourceOptions(aliases=[stack_urn(chain, old) for chain, old in homes])
            opts = pulumi.ResourceOptions.merge(opts, adopt)
        super().__init__(self.TYPE, name, None, opts)
        declared = vendored_crds.CONTROLLERS[controller]
        chart = declared.chart  # URL, namespace: components/crds/releases.py
        self.crds = [
            k8s.apiextensions.v1.CustomResourceDefinitionPatch(
                crd_resource_name(name, crd),
                metadata=obj["metadata"],
                spec=obj["spec"],
                opts=pulumi.ResourceOptions(parent=self, provider=provider, retain_on_delete=True),
            )
            for crd in ([] if declared.crds_in_templates else vendored_crds.crds(controller, version))
            for obj in [crd_object(crd)]
        ]
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=controller,
            chart=chart.chart,
            version=version,
            namespace=chart.namespace,
            create_namespace=True,
            # The table's values, with the controller image pinned by tag and digest (Controller.helm_values).
            values={**declared.helm_values(version), **(values or {})},
            # The CRDs above are the release's; Helm would only ever install (never upgrade) its own.
            # (No effect on a chart whose CRDs are templates: Helm applies those with the release.)
            skip_crds=True,
            # Wait for the controller's Deployment (and so its webhook) before dependents apply.
            skip_await=False,
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(self.crds)),
        )
        self.status = self.release.status
        self.register_outputs({"status": self.status})
