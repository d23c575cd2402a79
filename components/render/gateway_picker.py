"""The endpoint picker's configuration (``EndpointPickerConfig``, llm-d.ai/v1alpha1) of the gateway
front door (``components.render.gateway``): the chart's default profile, or the prefill/decode
profiles of a disaggregated vLLM stack (``workload.vllm.disaggregation``).

Plugin and profile names are llm-d-router v0.10.0's (71f4f0999f95b96c49a9d0c4afbd18dfdb943c26):
the default plugins of ``config/charts/routerlib/templates/_config.yaml``; for P/D, its sample
``deploy/config/pd-epp-config.yaml``: the ``prefill-filter`` and ``decode-filter`` keep pods by their
``llm-d.ai/role`` label, and the ``disagg-profile-handler`` runs the ``decode`` profile for every
request and the ``prefill`` profile only when the ``prefix-based-pd-decider`` says so (``pd-profile-handler``
is its deprecated alias). Pure data, no Pulumi.
"""

from __future__ import annotations

from typing import Any

SCORER_WEIGHTS: tuple[tuple[str, int], ...] = (
    # The chart's default-plugins.yaml (routerlib templates/_config.yaml at v0.10.0; GAIE v1.5.0 epplib the
    # same): queue 2, KV-cache utilization 2, prefix cache 3. Upstream cites no benchmark for these numbers;
    # they are the defaults every llm-d and GKE guide deploys, kept until this project measures its own.
    ("queue-scorer", 2),
    ("kv-cache-utilization-scorer", 2),
    ("prefix-cache-scorer", 3),
)
PICKER = "max-score-picker"  # the loader's default (pkg/epp/config/loader/defaults.go), written out so plan shows it

ROLE_LABEL = "llm-d.ai/role"
"""The label the P/D filters read (values ``prefill`` and ``decode``), set on each role's pods."""
PD_SCORER_WEIGHTS: tuple[tuple[str, int], ...] = (("prefix-cache-scorer", 2), ("queue-scorer", 1))
"""Each P/D profile's scorers, as pd-epp-config.yaml weighs them (no KV-cache utilization scorer there)."""
PD_PROFILE_HANDLER = "disagg-profile-handler"
PD_DECIDER = "prefix-based-pd-decider"
PD_NON_CACHED_TOKENS = 16
"""The decider sends a prompt to a prefill pod when more than this many of its tokens are not cached on
the chosen decode pod (pd-epp-config.yaml's value)."""
PD_FILTERS = {"prefill": "prefill-filter", "decode": "decode-filter"}

_METRICS_PLUGINS: tuple[dict[str, Any], ...] = (
    {"type": "metrics-data-source", "parameters": {"scheme": "http", "path": "/metrics", "insecureSkipVerify": True}},
    {"type": "core-metrics-extractor"},  # vLLM metric names: no defaultEngine (chart: only for other servers)
)


def endpoint_picker_config(disaggregated: bool = False) -> dict[str, Any]:
    """The EPP's ``EndpointPickerConfig``: the chart's default plugins (the three scorers, the metrics
    source that scrapes each server's ``/metrics``, the vLLM metric extractor) and one profile with
    :data:`SCORER_WEIGHTS` and :data:`PICKER`; ``disaggregated``: the P/D profile handler, its decider,
    the role filters and a ``prefill`` and a ``decode`` profile (module docstring)."""
    if not disaggregated:
        return {
            "apiVersion": "llm-d.ai/v1alpha1",
            "kind": "EndpointPickerConfig",
            "plugins": [*({"type": name} for name, _ in SCORER_WEIGHTS), {"type": PICKER}, *_METRICS_PLUGINS],
            "schedulingProfiles": [
                {
                    "name": "default",
                    "plugins": [*({"pluginRef": name, "weight": weight} for name, weight in SCORER_WEIGHTS),
                                {"pluginRef": PICKER}],
                }
            ],
        }
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            *({"type": name} for name, _ in PD_SCORER_WEIGHTS),
            *({"type": name} for name in PD_FILTERS.values()),
            {"type": PICKER},
            {"type": PD_PROFILE_HANDLER, "parameters": {"deciders": {"prefill": PD_DECIDER}}},
            {"type": PD_DECIDER, "parameters": {"nonCachedTokens": PD_NON_CACHED_TOKENS}},
            *_METRICS_PLUGINS,
        ],
        "schedulingProfiles": [
            {
                "name": role,
                "plugins": [
                    {"pluginRef": PD_FILTERS[role]},
                    {"pluginRef": PICKER},
                    *({"pluginRef": name, "weight": weight} for name, weight in PD_SCORER_WEIGHTS),
                ],
            }
            for role in ("prefill", "decode")
        ],
    }
