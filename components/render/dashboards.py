"""A stack's Cloud Monitoring dashboard and alert policies as plain data (pure functions, no Pulumi):
the PromQL of every panel and condition, derived from the stack's spec and the catalog's prices.
``components.platform.addons.observability`` registers them (``gcp.monitoring.Dashboard`` and
``AlertPolicy``); ``tests/test_operations.py`` parses every query with a PromQL parser.

Metric names (issue 26's fact sheet, with its sources):

* GKE system metrics in PromQL (Cloud Monitoring "Mapping metrics to PromQL": the first ``/`` becomes
  ``:``, other special characters ``_``): ``kubernetes_io:node_accelerator_{duty_cycle,
  tensorcore_utilization,memory_used,memory_total}`` on ``k8s_node`` (node-level, so idle nodes with no
  pod still report), labels ``cluster_name``, ``node_name``.
* Scraped by Managed Prometheus under their own names, with ``cluster`` and ``namespace`` target labels:
  vLLM v0.27 (``vllm/v1/metrics/loggers.py``): ``vllm:time_to_first_token_seconds``,
  ``vllm:inter_token_latency_seconds`` (TPOT/ITL; ``time_per_output_token_seconds`` is gone since 0.13),
  ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``, ``vllm:generation_tokens_total``;
  JetStream (``jetstream/core/metrics/prometheus.py``): ``jetstream_time_to_first_token``,
  ``jetstream_time_per_output_token``, ``jetstream_prefill_backlog_size``, ``kv_cache_utilization_perc``,
  ``jetstream_request_output_length`` (no generated-token counter: tokens/s is the rate of its sum).
* UNCONFIRMED: the node pool of a ``k8s_node`` series as the PromQL metadata label
  ``metadata_user_cloud_google_com_gke_nodepool`` (the node's Kubernetes label, by Cloud Monitoring's
  ``metadata_user_<label>`` rule; not seen in a Google example). The capacity panels and the $/h of the
  live tiers depend on it.
* UNCONFIRMED: coverage of GKE TPU VMs by ``compute_googleapis_com:instance_uptime_total`` (the
  flex-start expiry alert's workaround: GKE publishes no expiry signal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..catalog import tpu as tpu_catalog

if TYPE_CHECKING:
    from ..config.stack import StackConfig

WINDOW = "5m"
"""Rate and quantile window: 20 scrapes at the 15 s PodMonitoring interval."""
LATENCY_QUANTILE = 0.95
HBM_ALERT_FRACTION = 0.95
"""HBM used / total above which a node is about to fail allocations (issue 26: HBM above 95 %)."""
IDLE_DUTY_CYCLE_PERCENT = 1.0
IDLE_FOR = "1h"
"""A held TPU node whose duty cycle stays below 1 % for an hour is idle while billed."""
FLEX_EXPIRY_LEAD_HOURS = 2
"""How long before a flex-start node's maxRunHours the expiry alert fires: time to drain and move."""
BURN_WINDOWS = (("5m", "1h"),)
"""Burn-rate style latency conditions: the target must be missed over both the short and the long window."""
POOL_LABEL = "metadata_user_cloud_google_com_gke_nodepool"


@dataclass(frozen=True)
class Panel:
    title: str
    query: str
    unit: str = ""


@dataclass(frozen=True)
class Alert:
    key: str
    """Stable id: the policy's Pulumi name suffix and its ``gke-tpu-llm-alert`` user label."""
    display_name: str
    query: str
    duration: str
    severity: str
    documentation: str
    inputs: dict[str, Any] = field(default_factory=dict)
    """The spec fields the condition is derived from (tests trace thresholds to them)."""


@dataclass(frozen=True)
class EngineMetrics:
    ttft_bucket: str
    tpot_bucket: str
    queue: str
    kv_cache: str
    tokens: str
    """Generated tokens per second: PromQL with a ``{sel}`` placeholder (``str.format``)."""
    alive: str
    """A gauge every ready server exports (absent: no serving endpoint)."""


ENGINES: dict[str, EngineMetrics] = {
    "vllm": EngineMetrics(
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "sum(rate(vllm:generation_tokens_total{{{sel}}}[" + WINDOW + "]))",
        "vllm:num_requests_running",
    ),
    "jetstream-pathways": EngineMetrics(
        "jetstream_time_to_first_token_bucket",
        "jetstream_time_per_output_token_bucket",
        "jetstream_prefill_backlog_size",
        "kv_cache_utilization_perc",
        "sum(rate(jetstream_request_output_length_sum{{{sel}}}[" + WINDOW + "]))",
        "jetstream_slots_used_percentage",
    ),
}
"""Engine metrics per workload kind; a serving kind not listed (saxml) has hardware and capacity panels only."""


def gmp_selector(config: StackConfig) -> str:
    return f'cluster="{config.cluster_name}",namespace="{config.namespace}"'


def node_selector(config: StackConfig) -> str:
    return f'monitored_resource="k8s_node",cluster_name="{config.cluster_name}"'


def _tokens(engine: EngineMetrics, sel: str) -> str:
    return engine.tokens.format(sel=sel)


def _quantile(bucket: str, sel: str, window: str = WINDOW) -> str:
    return f"histogram_quantile({LATENCY_QUANTILE}, sum by (le) (rate({bucket}{{{sel}}}[{window}])))"


def tier_node_prices(config: StackConfig) -> list[tuple[str, list[str], float | None]]:
    """(capacity type, pool names, $/h of one node) per capacity tier, from the catalog's price function
    (``TpuSlice.capacity_price``), the one ``plan``'s costs use (``components.tools.report``)."""
    s, tpu = config.tpu.slice, config.tpu
    return [
        (tier.type, config.pools_of_tier(t), s.capacity_price(config.region, tier.type, chips=s.chips_per_host))
        for t, tier in enumerate(tpu.tiers)
    ]


def _nodes_of(pools: list[str], config: StackConfig) -> str:
    pattern = "|".join(pools)
    return (
        f"count(count by (node_name) (kubernetes_io:node_accelerator_memory_total{{{node_selector(config)},"
        f'{POOL_LABEL}=~"{pattern}"}}))'
    )


def billed_usd_per_hour(config: StackConfig) -> str:
    """$/h of the live TPU nodes: each tier's node count times its catalog price per node."""
    terms = [
        f"{price} * ({_nodes_of(pools, config)} or vector(0))"
        for _, pools, price in tier_node_prices(config)
        if price is not None
    ]
    return " + ".join(terms) or "vector(0)"


def panels(config: StackConfig) -> list[Panel]:
    sel, node = gmp_selector(config), node_selector(config)
    out: list[Panel] = []
    engine = ENGINES.get(config.workload.kind)
    if engine is not None:
        out += [
            Panel(f"TTFT p{int(LATENCY_QUANTILE * 100)}", _quantile(engine.ttft_bucket, sel), "s"),
            Panel(f"TPOT / ITL p{int(LATENCY_QUANTILE * 100)}", _quantile(engine.tpot_bucket, sel), "s"),
            Panel("Queued requests", f"sum({engine.queue}{{{sel}}})"),
            Panel("KV-cache use", f"avg({engine.kv_cache}{{{sel}}})", "10^2.%"),
            Panel("Generated tokens/s", _tokens(engine, sel), "1/s"),
            Panel(
                "$ per million output tokens (live)",
                f"({billed_usd_per_hour(config)}) / ({_tokens(engine, sel)} * 3600) * 1e6",
                "USD",
            ),
        ]
    out += [
        Panel(
            "Tensor-core utilisation per node",
            f"avg by (node_name) (kubernetes_io:node_accelerator_tensorcore_utilization{{{node}}})",
            "%",
        ),
        Panel("Duty cycle per node", f"avg by (node_name) (kubernetes_io:node_accelerator_duty_cycle{{{node}}})", "%"),
        Panel(
            "HBM used / total per node",
            f"sum by (node_name) (kubernetes_io:node_accelerator_memory_used{{{node}}}) / "
            f"sum by (node_name) (kubernetes_io:node_accelerator_memory_total{{{node}}})",
            "10^2.%",
        ),
        Panel("TPU $/h of the live nodes (catalog prices)", billed_usd_per_hour(config), "USD/h"),
    ]
    for kind, pools, _ in tier_node_prices(config):
        out.append(Panel(f"TPU nodes: {kind} ({', '.join(pools)})", _nodes_of(pools, config)))
    return out


def _tile(index: int, panel: Panel) -> dict[str, Any]:
    query: dict[str, Any] = {"prometheusQuery": panel.query, "outputFullDuration": False}
    if panel.unit:
        query["unitOverride"] = panel.unit
    return {
        "xPos": (index % 2) * 24,
        "yPos": (index // 2) * 16,
        "width": 24,
        "height": 16,
        "widget": {
            "title": panel.title,
            "xyChart": {"dataSets": [{"plotType": "LINE", "targetAxis": "Y1", "timeSeriesQuery": query}]},
        },
    }


def dashboard(config: StackConfig) -> dict[str, Any]:
    """The dashboard as the Cloud Monitoring API's JSON (``projects.dashboards``: mosaic layout, 48 columns)."""
    tiles = [_tile(i, p) for i, p in enumerate(panels(config))]
    if config.kind_info.mode == "train":
        tiles.append(
            {
                "xPos": 0,
                "yPos": (len(tiles) // 2 + 1) * 16,
                "width": 48,
                "height": 8,
                "widget": {"title": "Training signals", "text": {"content": TRAINING_NOTE, "format": "MARKDOWN"}},
            }
        )
    return {
        "displayName": display_name(config, "TPU serving" if config.kind_info.mode == "serve" else "TPU training"),
        "mosaicLayout": {"columns": 48, "tiles": tiles},
    }


TRAINING_NOTE = (
    "Step time, MFU and checkpoint age are not charted: MaxText writes them to its logs and TensorBoard, and no "
    "Prometheus endpoint of the training pods is scraped (UNCONFIRMED that one exists). MFU = the planner's FLOPs per "
    "step / (step time x chips x peak FLOP/s per chip); tensor-core utilisation above is the hardware-side proxy."
)


def dashboard_json(config: StackConfig) -> str:
    """Sorted keys, every field explicit: the provider suppresses remove-only diffs of this string
    (pulumi-gcp ``monitoring.Dashboard`` docs), so a stable serialisation keeps updates visible."""
    return json.dumps(dashboard(config), sort_keys=True, separators=(",", ":"))


def display_name(config: StackConfig, what: str) -> str:
    """Names carry the stack: dashboards and policies get server-side ids, so names are not claims."""
    return f"{config.stack}: {what}"


# ---------------------------------------------------------------- alert policies


def alerts(config: StackConfig) -> list[Alert]:
    """The stack's alert policies, each derived from a spec field or a stated constant."""
    sel, node = gmp_selector(config), node_selector(config)
    out: list[Alert] = []
    engine = ENGINES.get(config.workload.kind)
    serving = config.workload.serving
    if engine is not None and serving is not None:
        for key, bucket, target_ms, field_name in (
            ("ttft", engine.ttft_bucket, serving.ttft_ms, "workload.serving.ttftMs"),
            ("tpot", engine.tpot_bucket, serving.tpot_ms, "workload.serving.tpotMs"),
        ):
            if target_ms is None:
                continue
            seconds = target_ms / 1000
            short, long = BURN_WINDOWS[0]
            query = f"({_quantile(bucket, sel, short)} > {seconds}) and ({_quantile(bucket, sel, long)} > {seconds})"
            out.append(
                Alert(
                    key,
                    display_name(config, f"{key.upper()} p{int(LATENCY_QUANTILE * 100)} above {target_ms:g} ms"),
                    query,
                    "300s",
                    "WARNING",
                    f"{key.upper()} p{int(LATENCY_QUANTILE * 100)} exceeds the stack's target {field_name}: {target_ms:g} ms "
                    f"over both {short} and {long} (burn-rate style: a sustained miss, not a spike).",
                    {field_name: target_ms},
                )
            )
    if config.kind_info.mode == "serve":
        out.append(_availability(config, engine, sel))
    out.append(
        Alert(
            "hbm",
            display_name(config, f"TPU HBM above {HBM_ALERT_FRACTION:.0%}"),
            f"(sum by (node_name) (kubernetes_io:node_accelerator_memory_used{{{node}}}) / "
            f"sum by (node_name) (kubernetes_io:node_accelerator_memory_total{{{node}}})) > {HBM_ALERT_FRACTION}",
            "300s",
            "ERROR",
            "A TPU node's HBM is nearly full: the next allocation (a longer batch, a KV-cache block) fails with out of memory.",
        )
    )
    held = [(kind, pools) for kind, pools, _ in tier_node_prices(config) if kind in ("reservation", "flexStart")]
    for kind, pools in held:
        pattern = "|".join(pools)
        out.append(
            Alert(
                f"idle-{kind.lower()}",
                display_name(config, f"{kind} TPU node idle while billed"),
                f"avg by (node_name) (avg_over_time(kubernetes_io:node_accelerator_duty_cycle{{{node},"
                f'{POOL_LABEL}=~"{pattern}"}}[{IDLE_FOR}])) < {IDLE_DUTY_CYCLE_PERCENT}',
                "0s",
                "WARNING",
                f"A {kind} TPU node has run under {IDLE_DUTY_CYCLE_PERCENT}% duty cycle for {IDLE_FOR}: it is billed "
                "(a reservation whether used or not, flex-start while it runs) and serves nothing.",
                {"tpu.capacity.type": kind},
            )
        )
    for t, tier in enumerate(config.tpu.tiers):
        if tier.type not in tpu_catalog.DWS_CAPACITY_TYPES:
            continue
        hours = tier.max_run_hours or tpu_catalog.DWS_MAX_RUN_HOURS  # the pool's own default (pool_settings)
        fire_s = (hours - FLEX_EXPIRY_LEAD_HOURS) * 3600
        pattern = "|".join(config.pools_of_tier(t))
        out.append(
            Alert(
                f"expiry-{tier.type.lower()}",
                display_name(config, f"{tier.type} node within {FLEX_EXPIRY_LEAD_HOURS} h of maxRunHours"),
                f'max by (instance_name) (compute_googleapis_com:instance_uptime_total{{monitored_resource="gce_instance",'
                f'metadata_user_goog_k8s_cluster_name="{config.cluster_name}",{POOL_LABEL}=~"{pattern}"}}) > {fire_s}',
                "0s",
                "WARNING",
                f"WORKAROUND (GKE publishes no expiry signal for flex-start nodes): a VM of tier {t} has run longer than "
                f"maxRunHours ({hours}) minus {FLEX_EXPIRY_LEAD_HOURS} h, and GKE reclaims it at maxRunHours. Uptime resets "
                "on a VM restart, and TPU VM coverage of instance/uptime_total and its label names are UNCONFIRMED.",
                {f"tpu.capacity.{t}.maxRunHours": hours},
            )
        )
    return out


def _availability(config: StackConfig, engine: EngineMetrics | None, sel: str) -> Alert:
    """No ready serving endpoint: behind the gateway, the picker's ready endpoints (while requests arrive,
    so a stack scaled to zero on purpose is quiet); else the engine's gauge is absent (no running server)."""
    if config.workload.front_door.gateway:
        pool = f'{sel},name="vllm"'
        query = (
            f"(sum(llm_d_epp_ready_endpoints{{{pool}}}) < 1) and "
            f"(sum(rate(llm_d_epp_request_total{{{sel}}}[{WINDOW}])) + "
            f"sum(rate(llm_d_epp_request_error_total{{{sel}}}[{WINDOW}])) > 0)"
        )
    elif engine is not None:
        query = f"absent({engine.alive}{{{sel}}})"
    else:
        query = (
            f'absent(kubernetes_io:container_uptime{{monitored_resource="k8s_container",cluster_name="{config.cluster_name}",'
            f'namespace_name="{config.namespace}"}})'
        )
    return Alert(
        "availability",
        display_name(config, "no ready serving endpoint"),
        query,
        "600s",
        "CRITICAL",
        "No model server of the stack is ready (for 10 minutes): clients get errors. Check the pods, the TPU pools' "
        "capacity and the plan's cold start.",
    )


ALERT_LABEL = "gke-tpu-llm-alert"
"""User label naming an alert policy's key (the policy pack looks for ``availability`` on prod serving stacks)."""
