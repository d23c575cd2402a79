"""What ``plan`` says about a gateway front door (``workload.frontDoor.type: gateway``): the gateway, the
InferencePool and whom it selects, the endpoint picker's scorers with the source of their weights, and
the backend timeout with its reason. Read from the rendered objects, so the text is what will be applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from ..render import gateway
from .report import PlanResult

WEIGHTS_SOURCE = (
    "the chart's defaults (llm-d-router v0.10.0 routerlib templates/_config.yaml; GAIE v1.5.0 epplib the same); "
    "upstream cites no benchmark behind them"
)
"""Where the scorer weights come from (``components.render.gateway_picker.SCORER_WEIGHTS`` says the same)."""


def _picker_config(manifests: Sequence[Mapping[str, Any]], name: str, namespace: str) -> dict[str, Any] | None:
    """The EndpointPickerConfig in the picker's ConfigMap (its one YAML key)."""
    for obj in manifests:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "ConfigMap" and meta.get("name") == name and meta.get("namespace") == namespace:
            for text in (obj.get("data") or {}).values():
                loaded = yaml.safe_load(text)
                if isinstance(loaded, dict) and loaded.get("kind") == "EndpointPickerConfig":
                    return loaded
    return None


def front_door_lines(result: PlanResult) -> list[str]:
    """One block per InferencePool of the plan: empty for a stack whose front door is its Service."""
    manifests = result.manifests
    out: list[str] = []
    for pool in (o for o in manifests if o.get("kind") == "InferencePool"):
        meta, spec = pool["metadata"], pool["spec"]
        namespace = meta["namespace"]
        gateways = [o for o in manifests if o.get("kind") == "Gateway" and o["metadata"]["namespace"] == namespace]
        for gw in gateways:
            listeners = ", ".join(f"{x['protocol']} :{x['port']}" for x in gw["spec"]["listeners"])
            name, gateway_class = gw["metadata"]["name"], gw["spec"]["gatewayClassName"]
            out.append(f"Front door: Gateway {namespace}/{name} ({gateway_class}; {listeners})")
        selector = ",".join(f"{k}={v}" for k, v in sorted(spec["selector"]["matchLabels"].items()))
        ports = ",".join(str(p["number"]) for p in spec["targetPorts"])
        leaders = " (group leaders only)" if "leaderworkerset.sigs.k8s.io/worker-index" in spec["selector"]["matchLabels"] else ""
        out.append(f"  InferencePool {namespace}/{meta['name']}: pods {selector}{leaders} on :{ports}")
        ref = spec["endpointPickerRef"]
        config = _picker_config(manifests, ref["name"], namespace)
        profile = (config or {}).get("schedulingProfiles", [{}])[0].get("plugins", [])
        scorers = ", ".join(f"{p['pluginRef']} x{p['weight']}" if "weight" in p else str(p["pluginRef"]) for p in profile)
        image = gateway.EPP_CHART
        out.append(
            f"  endpoint picker {namespace}/{ref['name']} :{ref['port']['number']} ({ref.get('failureMode', 'FailClose')}; "
            f"{image.chart} {image.version}): {scorers or 'no scheduling profile'}"
        )
        out.append(f"    weights: {WEIGHTS_SOURCE}")
        for policy in (o for o in manifests if o.get("kind") == "GCPBackendPolicy" and o["metadata"]["namespace"] == namespace):
            default = policy["spec"].get("default") or {}
            iap = "IAP on" if (default.get("iap") or {}).get("enabled") else "no IAP"
            timeout, name = default.get("timeoutSec", 30), policy["metadata"]["name"]
            out.append(f"  backend timeout {timeout} s, {iap} (GCPBackendPolicy {name})")
    reason = result.outputs.get("vllm_gateway_backend_timeout") if out else None
    if reason:
        out.append(f"    timeout: {reason}")
    return out
