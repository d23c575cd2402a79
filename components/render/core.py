"""Core objects every stack renders: namespace, ServiceAccount, shared labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..catalog.tpu import TPU_RESOURCE
from ..crds.releases import pod_template_paths as custom_resource_pod_template_paths

PART_OF = "gke-tpu-llm"
# What a Service's annotations say about its reach, written by the kinds' renderers and read by the
# plan's endpoint lines (components.tools.endpoints) and the policy pack (same keys, compared in a test).
INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
AUTH_ANNOTATION = "gke-tpu-llm/auth"
AUTH_PATHS_ANNOTATION = "gke-tpu-llm/auth-paths"
"""Comma-separated path prefixes the server authenticates; absent: every path."""
OPEN_PATHS_ANNOTATION = "gke-tpu-llm/unauthenticated-paths"
"""Comma-separated examples of paths that answer without credentials (with ``auth-paths``)."""
WI_ANNOTATION = "iam.gke.io/gcp-service-account"


LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
"""The LWS and JobSet annotations that give each group or Job a topology domain of its own (one node
pool: a slice): the renderers set them, ``render.tiers`` reads them back."""


def tpu_toleration() -> dict[str, str]:
    """Tolerates the taint GKE puts on every TPU node (``google.com/tpu``, NoSchedule), which keeps pods
    that ask for no chips off them."""
    return {"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def tpu_host_resources(chips_per_host: int) -> dict[str, dict[str, str]]:
    """All of one host's chips, requested and limited alike (a TPU pod takes the whole host). A quantity
    is a string in the Kubernetes schema (pulumi-kubernetes types it so): "8", not 8."""
    chips = str(chips_per_host)
    return {"requests": {TPU_RESOURCE: chips}, "limits": {TPU_RESOURCE: chips}}


def slice_replicated_job(name: str, *, slices: int, hosts: int, pod_template: dict[str, Any]) -> dict[str, Any]:
    """A JobSet replicated Job for a program that spans whole slices: one Job per slice, one indexed pod per
    host. One failed host breaks the slice's program, so its Job fails at once (``backoffLimit: 0``) and the
    JobSet's failure policy restarts the set."""
    return {
        "name": name,
        "replicas": slices,
        "template": {
            "spec": {
                "parallelism": hosts,
                "completions": hosts,
                "backoffLimit": 0,
                "completionMode": "Indexed",
                "template": pod_template,
            }
        },
    }


def common_labels(stack: str, component: str) -> dict[str, str]:
    """Recommended Kubernetes labels; ``instance`` = stack so one selector finds a stack's objects."""
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/instance": stack,
        "app.kubernetes.io/component": component,
    }


def render_namespace(name: str, *, stack: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": common_labels(stack, "namespace")},
    }


def render_service_account(
    name: str,
    namespace: str,
    *,
    stack: str,
    gsa_email: Any | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A KSA; with ``gsa_email`` it carries the Workload Identity annotation that binds it to the GSA.

    No pod of the workloads calls the Kubernetes API (see ``API_TOKEN``), so the KSA does not mount
    its token by default either; a pod that needs it must say so on its own spec. Workload Identity
    does not need the mounted token: the GKE metadata server answers for the pod's KSA.
    """
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": common_labels(stack, "identity")}
    merged = dict(annotations or {})
    if gsa_email is not None:
        merged[WI_ANNOTATION] = gsa_email
    if merged:
        meta["annotations"] = merged
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": False}


# ---- pod templates and the baseline security every one of them gets

API_TOKEN = "automountServiceAccountToken"
"""Pod field: mount the KSA's Kubernetes API token into the containers. Off on every pod template
unless its renderer sets it to true, because none of the workload pods calls the Kubernetes API:

* Google APIs (GCS: checkpoints, Saxml state, Pathways scratch) go through Workload Identity, and
  on GKE that is the GKE metadata server answering for the pod's KSA; the pod's own token is not
  used (GKE docs, "About Workload Identity Federation for GKE": the metadata server intercepts the
  pod's credential requests). GCE_METADATA pods act as the node's account, no token either.
* GCS FUSE volumes (vLLM, Ray): the kubelet requests a KSA token for the CSI driver itself
  (CSIDriver ``tokenRequests``) and the sidecar gets credentials from the GKE metadata server
  (GoogleCloudPlatform/gcs-fuse-csi-driver#460; only host-network pods, which none of ours is, get
  an injected token volume, independently of this field).
* LeaderWorkerSet and JobSet pods: ``LWS_LEADER_ADDRESS``, ``TPU_WORKER_HOSTNAMES``/``TPU_WORKER_ID``
  are written into the pod by the controllers' admission webhooks (lws ``pkg/utils/accelerators/
  tpu.go`` AddTPUVariables; GKE's TPU webhook for Indexed Jobs), not read from the API by the pod.
* Ray head/workers and the RayJob submitter: the only Ray component that calls the API is the
  KubeRay autoscaler sidecar, which this RayCluster does not enable; ``ray job submit`` talks to the
  head's dashboard over HTTP. Saxml servers and the publish Job talk gRPC/HTTP to each other and GCS.
* The checkpoint converter downloads from Meta and writes to GCS.

The one pod that keeps its token is the Custom Metrics Stackdriver Adapter (an aggregated API
server: it reads pods/nodes and delegates authentication to the API server), rendered in
``components.workloads.vllm.render`` with the token set explicitly; ``components.tools.scan`` lists it, with that
reason, as the only pod allowed to fail checkov's CKV_K8S_38.
"""


_BUILTIN_TEMPLATE_KINDS = ("Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet")
"""Built-in kinds with one pod template at ``spec.template``."""


def override_value(value: object) -> str:
    """A ``key=value`` override's value as MaxText's config parser reads it: lower-case booleans and
    whole floats without a decimal point (``per_device_batch_size=2``, not ``2.0``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def pod_template_paths(obj: Mapping[str, Any]) -> list[tuple[str | int, ...]]:
    """Paths (keys and list indexes) to every pod template in a rendered object, built-in or CRD.

    Custom resources' paths are declared with their kind in ``components/crds/releases.py``."""
    if obj.get("kind") in _BUILTIN_TEMPLATE_KINDS:
        return [("spec", "template")] if "template" in (obj.get("spec") or {}) else []
    return custom_resource_pod_template_paths(obj)


def get_path(obj: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def with_path(obj: Any, path: tuple[str | int, ...], update: Any) -> Any:
    """A copy of ``obj`` with the value at ``path`` replaced by ``update(old)``; other values shared."""
    if not path:
        return update(obj)
    head, rest = path[0], path[1:]
    if isinstance(obj, list):
        copy_list = list(obj)
        copy_list[int(head)] = with_path(obj[int(head)], rest, update)
        return copy_list
    copy_dict = dict(obj)
    copy_dict[head] = with_path(obj[head], rest, update)
    return copy_dict


def _secure_container(container: Mapping[str, Any]) -> dict[str, Any]:
    ctx = dict(container.get("securityContext") or {})
    if not ctx.get("privileged"):
        ctx.setdefault("allowPrivilegeEscalation", False)
    caps = dict(ctx.get("capabilities") or {})
    drop = list(caps.get("drop") or [])
    if "NET_RAW" not in drop and "ALL" not in drop:
        drop.append("NET_RAW")
    caps["drop"] = drop
    ctx["capabilities"] = caps
    return {**container, "securityContext": ctx}


def _secure_template(template: Mapping[str, Any]) -> dict[str, Any]:
    spec = dict(template.get("spec") or {})
    spec.setdefault(API_TOKEN, False)  # see API_TOKEN: only a pod that calls the API sets it to true
    pod_ctx = dict(spec.get("securityContext") or {})
    pod_ctx.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    spec["securityContext"] = pod_ctx
    for key in ("containers", "initContainers"):
        if key in spec:
            spec[key] = [_secure_container(c) for c in spec[key]]
    return {**template, "spec": spec}


def with_baseline_security(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with GKE Autopilot's container baseline on every pod template: the runtime's default
    seccomp profile, no privilege escalation (unless the container is privileged) and no NET_RAW;
    and no Kubernetes API token unless the renderer asked for one (``API_TOKEN``).

    Autopilot applies exactly this to all pods, TPU workloads included, which is why it is safe to
    apply here to every workload without per-image testing; settings a renderer chose are kept.
    """
    out: dict[str, Any] = dict(obj)
    for path in pod_template_paths(obj):
        out = with_path(out, path, _secure_template)
    return out
