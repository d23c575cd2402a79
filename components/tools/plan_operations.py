"""What ``plan`` says about operating a stack (issue 26): the cold start wherever a capacity tier or the
replica count can reach zero (``components.planner.cold_start``), how the HPA gets its metric, and the
dashboard and alert policies the stack gets (``components.render.dashboards``). ``operations`` is the
plan JSON's ``operations`` entry; ``operations_lines`` is what the human plan prints."""

from __future__ import annotations

from typing import Any

from ..catalog.models import MODELS
from ..config.resolve import StackPlan
from ..planner.cold_start import cold_start
from ..render import dashboards


def _zero_points(plan: StackPlan) -> list[str]:
    """Where the stack can reach zero: replicas (``minReplicas: 0``) and capacity tiers scaling from zero."""
    config = plan.config
    out = []
    section = config.workload.section
    autoscaling = getattr(section, "autoscaling", None)
    if getattr(autoscaling, "enabled", False) and getattr(autoscaling, "min_replicas", None) == 0:
        out.append("replicas (workload.vllm.autoscaling.minReplicas: 0)")
    for t, tier in enumerate(config.tpu.tiers):
        if config.tpu.tier_nodes(t)[0] == 0:
            out.append(f"capacity tier {t} ({tier.type}: {', '.join(config.pools_of_tier(t))})")
    return out


def operations(plan: StackPlan) -> dict[str, Any]:
    config = plan.config
    data: dict[str, Any] = {}
    if config.kind_info.mode == "serve":
        zero = _zero_points(plan)
        if zero:
            weights = plan.capacity.memory.weights * plan.capacity.slice.chips
            params = MODELS[config.workload.model].published_params or 0
            host_network = plan.capacity.slice.dcn_bandwidth_per_host
            data["cold_start"] = {"reaches_zero": zero, **cold_start(weights, params, host_network).to_dict()}
    if "hpaPerformanceProfile" in config.addons:
        data["autoscaling"] = "AutoscalingMetric (autoscaling.gke.io), HPA performance profile; no metrics adapter"
    elif "metricsAdapter" in config.addons:
        data["autoscaling"] = "Custom Metrics Stackdriver Adapter (one per project; roles/monitoring.viewer on the project)"
    if config.observability.enabled:
        data["observability"] = {
            "dashboard": dashboards.dashboard(config)["displayName"],
            "alerts": [a.key for a in dashboards.alerts(config)],
            "notification_channels": list(config.observability.notification_channels),
        }
    return data


def operations_lines(data: dict[str, Any]) -> list[str]:
    out = []
    cold = data.get("cold_start")
    if cold:
        out.append(
            f"Cold start (reaches zero: {'; '.join(cold['reaches_zero'])}): ~{cold['total_seconds'] / 60:.0f} min = node "
            f"{cold['node_seconds']:.0f} s (assumed) + weights {cold['weight_bytes'] / 1e9:.0f} GB from the bucket at "
            f"{cold['read_bytes_per_second'] / 1e9:.1f} GB/s {cold['weights_seconds']:.0f} s + "
            f"compile {cold['compile_seconds']:.0f} s"
        )
        out.append(f"  {cold['assumptions']['compile']}; measure: {cold['measure']['node']}, {cold['measure']['pod']}")
    if "autoscaling" in data:
        out.append(f"Autoscaling metric: {data['autoscaling']}")
    obs = data.get("observability")
    if obs:
        channels = ", ".join(obs["notification_channels"]) or "none (console incidents only)"
        out.append(f"Observability: dashboard '{obs['dashboard']}', alerts {', '.join(obs['alerts'])}; notifies {channels}")
    return out
