"""How the vLLM HorizontalPodAutoscaler gets its metric: through the Custom Metrics Stackdriver Adapter
(``via: adapter``, every GKE version) or through GKE's own ``AutoscalingMetric`` (``autoscaling.gke.io/v1beta1``,
``via: autoscalingMetric``), which needs no adapter, no APIService, no cluster role and no project-wide
``roles/monitoring.viewer`` grant, so it lifts the one-autoscaled-stack-per-project rule.

Facts (operations fact sheet of issue 26, its sources):

* GKE "Autoscale workloads using metrics" (docs.cloud.google.com/kubernetes-engine/docs/how-to/autoscale-using-metrics):
  in-cluster custom Pod metrics are GA from GKE 1.37.0-gke.3100000 (Preview from 1.36.4-gke.1247000), need
  the cluster's HPA *performance* profile, gauge metrics only, scraped from the autoscaled workload's
  own pods (HTTP, Prometheus format, default ``/metrics``), at most 50 unique metrics per node.
  A separate floor for the PromQL form (metrics read from Cloud Monitoring) is UNCONFIRMED: the same
  floor is required for both.
* GKE "Scale to and from zero with HPA" (…/tutorials/scale-to-from-zero-hpa): control plane and nodes
  at 1.37 or later; at least one External or Object metric, because Resource and Pods metrics come
  from pods and vanish at zero; AutoscalingMetric, HPA and Deployment in one namespace. Kubernetes
  HPAScaleToZero is Beta and on by default from v1.37 (kubernetes.io blog 2026-09-02); Services do not
  buffer requests while no pod is ready.
* Field names of the custom resource: public manifests only (no published CRD; see
  ``components/schemas/autoscaling.gke.io/README.md``); the HPA names a metric
  ``autoscaling.gke.io|<AutoscalingMetric>|<metric>``.
* The endpoint picker's pool gauges (llm-d/llm-d-router v0.10.0, the pinned picker,
  ``pkg/epp/metrics/llm_d_router_metrics.go``): ``llm_d_epp_average_queue_size``,
  ``llm_d_epp_average_kv_cache_utilization``, ``llm_d_epp_ready_endpoints`` (label ``name``: the
  InferencePool) and the counters ``llm_d_epp_request_total`` / ``llm_d_epp_request_error_total``; the
  ``inference_pool_*`` names the fact sheet quotes are deprecated aliases there. The picker keeps
  running at zero model servers, so its series exist at zero replicas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ...config.errors import rule
from ...config.gke_rules import pinned_at_least

if TYPE_CHECKING:
    from ...config.resolve import StackPlan
    from ...config.stack import StackConfig

Via = Literal["autoscalingMetric", "adapter"]

AUTOSCALING_METRIC_MIN_GKE_VERSION = "1.37.0-gke.3100000"
"""GA of in-cluster custom Pod metrics for the HPA (GKE "Autoscale workloads using metrics")."""
SCALE_TO_ZERO_MIN_GKE_VERSION = "1.37"
"""HPA to and from zero on GKE: control plane and nodes at 1.37 or later (GKE scale-to-from-zero-hpa)."""
API_VERSION = "autoscaling.gke.io/v1beta1"
KIND = "AutoscalingMetric"
NAME = "vllm"
"""Name of the AutoscalingMetric (the HPA's ``autoscaling.gke.io|vllm|<metric>``)."""
SERVER_PORT = 8000  # vLLM's port (render.PORT); repeated here so this module does not import the renderer

POD_GAUGES: dict[str, str] = {"num_requests_waiting": "num-requests-waiting", "kv_cache_usage_perc": "kv-cache-usage-perc"}
"""vLLM gauge -> the autoscaler-side name (lowercase, hyphens: a public blog's rule, UNCONFIRMED in Google docs)."""
EPP_GAUGES: dict[str, tuple[str, str]] = {
    # metric -> (autoscaler-side name, PromQL over the picker's pool gauges)
    "num_requests_waiting": (
        "pool-queue",
        "sum(llm_d_epp_average_queue_size{{{sel}}}) * sum(llm_d_epp_ready_endpoints{{{sel}}})",
    ),
    "kv_cache_usage_perc": ("pool-kv-cache", "max(llm_d_epp_average_kv_cache_utilization{{{sel}}})"),
}
"""The pool-level signal per ``metric``: the queue as a total over the pool (average x ready endpoints),
so an ``AverageValue`` target is per replica as for the server's gauge; the KV cache as the pool's
average fill, a ``Value`` target (HPA: desired = current x value / target)."""
DEMAND = "pool-demand"
DEMAND_QUERY = (
    "(sum(rate(llm_d_epp_request_total{{{sel}}}[2m])) or vector(0)) + "
    "(sum(rate(llm_d_epp_request_error_total{{{sel}}}[2m])) or vector(0))"
)
"""Requests reaching the picker per second, served or failed: what wakes a stack at zero replicas (with
no model server every request fails, and is still counted). UNCONFIRMED: that llm-d-router v0.10.0
counts a request it cannot schedule in ``request_error_total`` (its code names the counter; no test
at zero endpoints was found)."""
WAKE_REQUESTS_PER_SECOND = 1000
"""``AverageValue`` of the demand metric: so high that any traffic up to it asks for exactly one replica
(ceil(rate / 1000) = 1); the pool signal sizes the stack from there."""


def _auto(config: StackConfig) -> Any:
    """``workload.vllm.autoscaling`` (read by attribute: ``spec`` imports this module)."""
    return getattr(config.workload.section, "autoscaling")  # noqa: B009 (spec imports this module)


def via(config: StackConfig) -> Via:
    """``workload.vllm.autoscaling.via``, else derived from the pinned cluster version: AutoscalingMetric
    at or above its floor, the adapter otherwise. An unset version (the release channel's default) is
    not known offline, so it keeps the adapter, which works on every version: guessing AutoscalingMetric
    on an older cluster would leave the HPA without a metric, silently."""
    chosen: Via | None = _auto(config).via
    if chosen is not None:
        return chosen
    version = config.cluster.version
    at_floor = pinned_at_least(version, AUTOSCALING_METRIC_MIN_GKE_VERSION)
    return "autoscalingMetric" if at_floor else "adapter"


def autoscaled(config: StackConfig) -> bool:
    """An HPA scales the server (single-host slices only: multi-host refuses autoscaling)."""
    return bool(_auto(config).enabled) and not config.tpu.pinned_multi_host


def rules(config: StackConfig) -> list[dict[str, Any]]:
    """The autoscaling rules that need the rest of the stack (``VllmSpec.stack_rules`` runs them)."""
    auto = _auto(config)
    if not auto.enabled:
        return []
    out: list[dict[str, Any]] = []
    version, chosen = config.cluster.version, via(config)
    key = "workload.vllm.autoscaling"
    if chosen == "autoscalingMetric" and not pinned_at_least(version, AUTOSCALING_METRIC_MIN_GKE_VERSION):
        where = "unset (the release channel's default version is not known offline)" if version is None else version
        out.append(
            rule(
                f"{key}.via",
                "autoscalingMetric",
                f"needs GKE {AUTOSCALING_METRIC_MIN_GKE_VERSION} or later (AutoscalingMetric GA), and cluster.version is {where}",
                f"adapter, or cluster.version >= {AUTOSCALING_METRIC_MIN_GKE_VERSION}",
                f"set cluster.version: {AUTOSCALING_METRIC_MIN_GKE_VERSION} (or newer), "
                "or workload.vllm.autoscaling.via: adapter",
            )
        )
    gateway = config.workload.front_door.gateway
    if auto.source == "endpointPicker" and not gateway:
        out.append(
            rule(
                f"{key}.source",
                "endpointPicker",
                "reads the gateway's endpoint picker, and this stack has no gateway front door",
                "server, or endpointPicker with workload.frontDoor.type: gateway",
                "set workload.vllm.autoscaling.source: server, or workload.frontDoor.type: gateway",
            )
        )
    if auto.source == "endpointPicker" and chosen == "adapter":
        out.append(
            rule(
                f"{key}.source",
                "endpointPicker",
                "is read through an AutoscalingMetric (a PromQL External metric); this stack autoscales via the adapter",
                "server with via: adapter",
                "set workload.vllm.autoscaling.via: autoscalingMetric "
                f"(cluster.version >= {AUTOSCALING_METRIC_MIN_GKE_VERSION}), "
                "or source: server",
            )
        )
    if auto.min_replicas == 0:
        out += _zero_rules(config, auto.source)
    return out


def _zero_rules(config: StackConfig, source: str) -> list[dict[str, Any]]:
    """``minReplicas: 0``: a metric that exists at zero pods, pools that free their nodes, a 1.37 cluster."""
    out: list[dict[str, Any]] = []
    key = "workload.vllm.autoscaling.minReplicas"
    if source != "endpointPicker":
        out.append(
            rule(
                key,
                0,
                "needs a metric that exists at zero pods, and vLLM's own gauges are Pods metrics scraped from the "
                "servers: they vanish with the last replica, so nothing would ever scale it back up",
                "1 or more; or 0 with source: endpointPicker (the gateway's picker keeps running and counts demand)",
                "set minReplicas: 1, or workload.frontDoor.type: gateway with workload.vllm.autoscaling.source: endpointPicker",
            )
        )
    tpu = config.tpu
    held = [(t, tier.type) for t, tier in enumerate(tpu.tiers) if tpu.tier_nodes(t)[0] > 0]
    if held:
        t, kind = held[0]
        where = "tpu.autoscaling.minNodes" if tpu.autoscaling is not None and t == 0 else f"tpu.capacity.{t}"
        out.append(
            rule(
                key,
                0,
                f"frees no TPU: capacity tier {t} ({kind}) holds {tpu.tier_nodes(t)[0]} node(s) per slice whether or not a "
                f"replica runs ({where}), so zero replicas only adds a cold start",
                "0 only when every capacity tier scales from zero",
                "set tpu.autoscaling.minNodes: 0 (or a flexStart/spot ladder, whose pools scale from zero), or minReplicas: 1",
            )
        )
    version = config.cluster.version
    if not pinned_at_least(version, SCALE_TO_ZERO_MIN_GKE_VERSION):
        out.append(
            rule(
                "cluster.version",
                version,
                "is below GKE 1.37 or unset (not known offline): HPA scales to and from zero only from 1.37, and a "
                "workload at zero on an older node version can stay stuck there",
                f">= {SCALE_TO_ZERO_MIN_GKE_VERSION} (with AutoscalingMetric: >= {AUTOSCALING_METRIC_MIN_GKE_VERSION})",
                f"set cluster.version: {AUTOSCALING_METRIC_MIN_GKE_VERSION} (or newer), or minReplicas: 1",
            )
        )
    return out


# ---------------------------------------------------------------- objects


def _selector(plan: StackPlan, namespace: str) -> str:
    """PromQL label selector of the stack's picker series: Managed Prometheus adds ``cluster`` and
    ``namespace`` to what it scrapes; ``name`` is the InferencePool (llm-d-router poolLabels)."""
    return f'cluster="{plan.config.cluster_name}",namespace="{namespace}",name="{NAME}"'


def render_autoscaling_metric(
    plan: StackPlan, *, namespace: str, selector: dict[str, str], labels: dict[str, str]
) -> dict[str, Any]:
    """The AutoscalingMetric the HPA reads: the server's gauge scraped from its pods (``source: server``),
    or PromQL over the endpoint picker's pool gauges (``source: endpointPicker``, plus the demand metric
    when the stack may scale to zero)."""
    auto = _auto(plan.config)
    metrics: list[dict[str, Any]]
    if auto.source == "server":
        gauge = {"name": POD_GAUGES[auto.metric], "prometheusMetricName": f"vllm:{auto.metric}"}
        endpoint = {"path": "/metrics", "port": SERVER_PORT}
        metrics = [
            {
                "pod": {
                    "selector": {"matchLabels": dict(selector)},
                    "containers": [{"endpoint": endpoint, "metrics": [{"gauge": gauge}]}],
                }
            }
        ]
    else:
        sel = _selector(plan, namespace)
        name, query = EPP_GAUGES[auto.metric]
        metrics = [{"promql": {"name": name, "query": query.format(sel=sel)}}]
        if auto.min_replicas == 0:
            metrics.append({"promql": {"name": DEMAND, "query": DEMAND_QUERY.format(sel=sel)}})
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {"metrics": metrics},
    }


def _quantity(value: float) -> str:
    """A Kubernetes quantity: whole numbers as-is, fractions in milli-units (0.7 -> '700m')."""
    return str(int(value)) if float(value).is_integer() else f"{round(value * 1000)}m"


def hpa_metrics(plan: StackPlan) -> list[dict[str, Any]]:
    """The HPA's ``metrics``: the adapter's Managed Prometheus name, or the AutoscalingMetric's."""
    auto = _auto(plan.config)
    target = _quantity(auto.resolved_target)
    if via(plan.config) == "adapter":
        name = f"prometheus.googleapis.com|vllm:{auto.metric}|gauge"
        return [{"type": "Pods", "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": target}}}]
    if auto.source == "server":
        name = f"autoscaling.gke.io|{NAME}|{POD_GAUGES[auto.metric]}"
        return [{"type": "Pods", "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": target}}}]
    signal, _ = EPP_GAUGES[auto.metric]
    kind = "AverageValue" if auto.metric == "num_requests_waiting" else "Value"
    out = [_external(signal, {"type": kind, ("averageValue" if kind == "AverageValue" else "value"): target})]
    if auto.min_replicas == 0:
        out.append(_external(DEMAND, {"type": "AverageValue", "averageValue": str(WAKE_REQUESTS_PER_SECOND)}))
    return out


def _external(metric: str, target: dict[str, str]) -> dict[str, Any]:
    return {"type": "External", "external": {"metric": {"name": f"autoscaling.gke.io|{NAME}|{metric}"}, "target": target}}


def render_hpa(plan: StackPlan, *, namespace: str, low: int, high: int, labels: dict[str, str]) -> dict[str, Any]:
    """The HorizontalPodAutoscaler of the vLLM Deployment (``autoscaling/v2``, the version scale to zero needs)."""
    auto = _auto(plan.config)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": hpa_metrics(plan),
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": auto.scale_down_stabilization_seconds}},
        },
    }
