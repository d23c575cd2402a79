"""Prefill/decode disaggregation of the vLLM kind (``workload.vllm.disaggregation``): the settings,
the rules that need the rest of the stack, and the KV connector the engine catalog gives.

How it runs (llm-d's P/D guide, ``guides/pd-disaggregation`` TPU overlays, and llm-d-router v0.10.0):
two Deployments, ``vllm-prefill`` on the first TPU pool (``tpu-slice-0``) and ``vllm-decode`` on the
second (``tpu-slice-1``), as the JetStream disaggregated stack puts one role on each of its two
``tpu.slices`` pools. The gateway's endpoint picker chooses a decode pod and, for prompts it does
not hold cached, a prefill pod (``disagg-profile-handler`` with ``prefix-based-pd-decider``); the
routing sidecar on the decode pod sends the prompt to that prefill pod, whose vLLM (``kv_producer``)
keeps its KV cache for the decode vLLM (``kv_consumer``) to pull over the network with the TPU KV
connector. Objects: ``components.workloads.vllm.disagg_render``; the hand-off cost:
``components.planner.kv_handoff``.

Only single-host slices: one vLLM server per TPU VM per role (the LeaderWorkerSet form has no
per-role variant yet, and llm-d publishes no multi-host TPU P/D recipe).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from ...catalog.models import MODELS
from ...config import naming
from ...config.base import Spec
from ...config.errors import rule

if TYPE_CHECKING:
    from ...config.stack import StackConfig

Role = Literal["prefill", "decode"]
ROLES: tuple[Role, ...] = ("prefill", "decode")
POOL_OF_ROLE: dict[Role, int] = {"prefill": 0, "decode": 1}
"""Slice index (``naming.node_pool_name``) of each role's pool: the first pool prefills, the second
decodes, as the JetStream disaggregated stack orders its two slices."""
KEY = "workload.vllm.disaggregation"


@dataclass(frozen=True)
class Connector:
    """A TPU KV connector of tpu-inference, as vLLM's ``--kv-transfer-config`` names it."""

    name: str
    module: str
    feature: str
    """Its ``engine_releases`` feature key (the catalog's supported/untested/broken spans)."""
    extra_args: tuple[str, ...] = ()


CONNECTORS: dict[str, Connector] = {
    # llm-d guides/pd-disaggregation/modelserver/tpu/v6/vllm (TPUConnector, Qwen3-32B, dense) and
    # tpu/v7/vllm (TPUConnectorHMA with --no-disable-hybrid-kv-cache-manager, Qwen3.5, hybrid attention).
    "dense": Connector("TPUConnector", "tpu_inference.distributed.tpu_connector", "kvConnector.TPUConnector"),
    "hybrid": Connector(
        "TPUConnectorHMA",
        "tpu_inference.distributed.tpu_connector_hma",
        "kvConnector.TPUConnectorHMA",
        ("--no-disable-hybrid-kv-cache-manager",),
    ),
}


class VllmRoleSpec(Spec):
    replicas: Annotated[int, Field(ge=1, le=1000)] = Field(
        1,
        description="vLLM servers of this role, one per single-host TPU VM of the role's pool. Defaults to 1. At most "
        "the pool's nodes (tpu.autoscaling.maxNodes, else one per slice).",
    )


class VllmDisaggregationSpec(Spec):
    prefill: VllmRoleSpec = Field(
        default_factory=VllmRoleSpec,
        description="The prefill servers (kv_producer), on the first TPU pool (tpu-slice-0).",
    )
    decode: VllmRoleSpec = Field(
        default_factory=VllmRoleSpec,
        description="The decode servers (kv_consumer, behind llm-d's routing sidecar), on the second TPU pool (tpu-slice-1).",
    )


def spec_of(config: StackConfig) -> VllmDisaggregationSpec | None:
    """The stack's disaggregation settings (None: aggregated serving or another kind)."""
    vllm = getattr(config.workload, "vllm", None)
    found = getattr(vllm, "disaggregation", None)
    return found if isinstance(found, VllmDisaggregationSpec) else None


def connector(config: StackConfig) -> Connector:
    """The KV connector for the model's attention type (``ModelArch.attention``)."""
    return CONNECTORS[MODELS[config.workload.model].attention]


def selected_features(config: StackConfig) -> tuple[str, ...]:
    """The engine-catalog features disaggregation selects (the connector), for the engine rules."""
    return (connector(config).feature,) if spec_of(config) is not None else ()


def pool_name(role: Role) -> str:
    """The GKE node pool a role's pods run on (the first capacity tier's pool of its slice)."""
    return naming.node_pool_name(POOL_OF_ROLE[role])


def rules(config: StackConfig) -> list[dict[str, Any]]:
    """What disaggregation needs from the rest of the stack (paths relative to ``gke-tpu-llm:``)."""
    spec = spec_of(config)
    if spec is None:
        return []
    found: list[dict[str, Any]] = []
    tpu = config.tpu
    if not config.workload.front_door.gateway:
        found.append(
            rule(
                KEY,
                "set",
                "needs the gateway front door: the endpoint picker decides which prefill pod serves a prompt "
                "(workload.frontDoor.type is not gateway)",
                "workload.frontDoor.type: gateway",
                "set workload.frontDoor.type: gateway (with its proxySubnet), or remove workload.vllm.disaggregation",
            )
        )
    if tpu.slices != len(ROLES):
        found.append(
            rule(
                "tpu.slices",
                tpu.slices,
                "is not one pool per role: disaggregation runs prefill on the first TPU pool and decode on the second",
                "2",
                "set tpu.slices: 2",
            )
        )
    if tpu.pinned_multi_host:
        found.append(
            rule(
                "tpu.topology",
                tpu.topology,
                f"is a multi-host slice ({tpu.slice.hosts} hosts): disaggregation runs one single-host vLLM server "
                "per TPU VM and role",
                "a single-host slice (one TPU VM, e.g. v6e 2x4 on ct6e-standard-8t)",
                "pick a single-host topology or machine type, or remove workload.vllm.disaggregation",
            )
        )
    if len(tpu.tiers) > 1:
        found.append(
            rule(
                "tpu.capacity",
                [t.type for t in tpu.tiers],
                "is a fallback ladder: each role is pinned to its slice's first pool, so no later tier would be used",
                "one capacity tier",
                "keep one entry in tpu.capacity, or remove workload.vllm.disaggregation",
            )
        )
    autoscaling = getattr(getattr(config.workload, "vllm", None), "autoscaling", None)
    if autoscaling is not None and autoscaling.enabled:
        found.append(
            rule(
                "workload.vllm.autoscaling.enabled",
                True,
                "scales one Deployment; disaggregation has two (prefill and decode) with their own replicas",
                "false",
                "set workload.vllm.autoscaling.enabled: false and size workload.vllm.disaggregation.{prefill,decode}.replicas",
            )
        )
    serving = config.workload.serving
    if serving is not None and serving.benchmark:
        found.append(
            rule(
                "workload.serving.benchmark",
                True,
                "runs vLLM's benchmark client against the aggregated server's Service, which a prefill/decode split "
                "does not have (its entry is the gateway)",
                "false",
                "set workload.serving.benchmark: false, and benchmark through the gateway's address instead",
            )
        )
    if tpu.topology is not None or tpu.autoscaling is not None:
        per_pool = tpu.nodes_max
        where = "tpu.autoscaling.maxNodes" if tpu.autoscaling else "the slice's hosts"
        for role in ROLES:
            replicas = getattr(spec, role).replicas
            if replicas > per_pool:
                found.append(
                    rule(
                        f"{KEY}.{role}.replicas",
                        replicas,
                        f"is more {role} servers than its pool ({pool_name(role)}) has nodes ({per_pool}, from {where})",
                        f"1..{per_pool}",
                        f"lower it or raise {where}",
                    )
                )
    return found
