"""Prefill/decode disaggregation: the KV hand-off per request and the aggregated-vs-disaggregated
comparison of a stack's scenario on the same slices.

The hand-off: the prefill server writes a prompt's KV cache, every layer's key and value for every
input token, and the decode server reads it before its first step. Per token that is ``layers x 2 x
kv_heads x head_dim x`` the KV dtype's bytes (:func:`kv_bytes_per_token`; int8 scales excluded, a
few per cent). What crosses the wire is what each chip holds (``perf.kv_bytes_per_token_per_chip`` x
chips): the same figure unless tensor parallelism replicates KV heads (more chips than KV heads),
when each replica is sent. The path: prefill and decode on separate node pools (the P/D stacks: one
slice per role) talk over the data-centre network, every host of the prefill slice sending its
chips' share at once at its DCN bandwidth (the generation row's ``dcn_bandwidth_per_chip`` times the
host's chips); within one slice the chips would pass their shards over ICI.
Each transfer adds a fixed latency (``EfficiencyFactors.dcn_latency_s``, ASSUMED 50 us). Over DCN
this is exactly ``perf.kv_handoff_seconds``, the term the serving model's disaggregated TTFT
already holds, so the TTFT below is the model's, not the model's plus the hand-off again.

The comparison: the scenario's requests on the two slices of one P/D replica, served either by that
replica (``Server.disaggregated``: decode-only steps, prefills on their own slice, the hand-off in
TTFT) or by the same two slices as two independent aggregated replicas, each with half the requests
in flight (chunked prefill interleaved with decode). Both cost two slices at the stack's capacity
tiers; $ per million output tokens is that price over the pair's output tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from ..catalog.calibration import FACTORS
from ..catalog.models import ModelArch
from ..catalog.tpu import TpuSlice
from .perf import ServingEstimate, TierPrice, estimate, kv_bytes_per_token_per_chip
from .results import Plan

KV_DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "int8": 1, "fp8": 1}
"""Bytes per KV-cache element of each ``workload.kvCache`` dtype (``planner.inputs.KvDtype``)."""

Link = Literal["dcn", "ici"]


def kv_bytes_per_token(arch: ModelArch, kv_dtype: str) -> int:
    """One token's KV cache over the whole model: key and value of every layer and KV head."""
    if kv_dtype not in KV_DTYPE_BYTES:
        raise ValueError(f"no element size for KV dtype {kv_dtype!r}; known: {', '.join(KV_DTYPE_BYTES)}")
    return arch.layers * 2 * arch.kv_heads * arch.head_dim * KV_DTYPE_BYTES[kv_dtype]


@dataclass(frozen=True)
class HandoffPath:
    """Where a prompt's KV cache travels from the prefill server to the decode server."""

    link: Link
    bandwidth: float
    """Bytes/s the transfer runs at, all senders together."""
    latency_s: float
    """Fixed cost per transfer, seconds (ASSUMED: ``EfficiencyFactors.dcn_latency_s`` or
    ``collective_latency_s``)."""
    basis: str
    """How the bandwidth is made up, for the report."""


def handoff_path(tpu: TpuSlice, *, separate_pools: bool, perf_key: str) -> HandoffPath:
    """The hand-off's path from a prefill slice of ``tpu``'s type: over DCN between node pools (each
    host of the slice sends at its chips' DCN bandwidth, a TPU catalog fact), else over ICI within the slice (each chip
    at its ICI bandwidth times the all-reduce efficiency the serving model uses)."""
    f = FACTORS[perf_key]
    if separate_pools:
        gbps = tpu.dcn_bandwidth_per_host * 8 / 1e9
        return HandoffPath(
            "dcn",
            float(tpu.dcn_bandwidth_per_host * tpu.hosts),
            f.dcn_latency_s,
            f"{tpu.hosts} host(s) x {gbps:g} Gbps DCN ({tpu.generation.name} catalog row: dcn_bandwidth_per_chip)",
        )
    per_chip = tpu.generation.ici_bandwidth_per_chip * f.collective_efficiency
    return HandoffPath(
        "ici",
        float(per_chip * tpu.chips),
        f.collective_latency_s,
        f"{tpu.chips} chips x {per_chip / 1e9:g} GB/s ICI ({tpu.generation.name} catalog row x "
        f"collective efficiency {f.collective_efficiency:g})",
    )


@dataclass(frozen=True)
class KvHandoff:
    """One request's KV hand-off from the prefill server to the decode server."""

    input_tokens: int
    bytes_per_token: int
    """Logical bytes (:func:`kv_bytes_per_token`)."""
    wire_bytes_per_token: float
    """What the chips hold and send per token (KV heads replicated over tensor parallelism included)."""
    path: HandoffPath
    ttft_s: float
    """The disaggregated replica's TTFT, which holds the hand-off."""

    @property
    def bytes_per_request(self) -> int:
        return self.input_tokens * self.bytes_per_token

    @property
    def wire_bytes_per_request(self) -> float:
        return self.input_tokens * self.wire_bytes_per_token

    @property
    def seconds(self) -> float:
        return self.wire_bytes_per_request / self.path.bandwidth + self.path.latency_s

    @property
    def share_of_ttft(self) -> float:
        return self.seconds / self.ttft_s if self.ttft_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "bytes_per_token": self.bytes_per_token,
            "bytes_per_request": self.bytes_per_request,
            "wire_bytes_per_request": self.wire_bytes_per_request,
            "link": self.path.link,
            "bandwidth_bytes_per_s": self.path.bandwidth,
            "latency_s": self.path.latency_s,
            "bandwidth_basis": self.path.basis,
            "ms_per_request": 1000 * self.seconds,
            "share_of_ttft": self.share_of_ttft,
        }


@dataclass(frozen=True)
class ModeResult:
    """The scenario on the two slices served one way."""

    mode: Literal["aggregated", "disaggregated"]
    replicas: int
    concurrency_per_replica: tuple[int, ...]
    slices: int
    output_tokens_per_s: float
    ttft_ms: float
    """The slowest replica's (aggregated: the one with more requests in flight)."""
    tpot_ms: float
    prices: tuple[TierPrice, ...]
    """All the slices' price per tier, preferred first."""

    def per_million(self, usd_per_hour: float | None) -> float | None:
        if usd_per_hour is None or self.output_tokens_per_s <= 0:
            return None
        return usd_per_hour / (self.output_tokens_per_s * 3600) * 1e6

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "replicas": self.replicas,
            "concurrency_per_replica": list(self.concurrency_per_replica),
            "slices": self.slices,
            "output_tokens_per_s": self.output_tokens_per_s,
            "ttft_ms": self.ttft_ms,
            "tpot_ms": self.tpot_ms,
            "prices": [
                {
                    "capacity": t.capacity,
                    "usd_per_hour": t.usd_per_hour,
                    "usd_per_million_output_tokens": self.per_million(t.usd_per_hour),
                }
                for t in self.prices
            ],
        }


@dataclass(frozen=True)
class Comparison:
    """The hand-off and both ways of serving the scenario on one P/D replica's slices."""

    slice: str
    handoff: KvHandoff
    aggregated: ModeResult
    disaggregated: ModeResult

    def to_dict(self) -> dict[str, Any]:
        return {
            "slice": self.slice,
            "kv_handoff": self.handoff.to_dict(),
            "aggregated": self.aggregated.to_dict(),
            "disaggregated": self.disaggregated.to_dict(),
        }


def compare(
    arch: ModelArch,
    disaggregated: ServingEstimate,
    *,
    region: str | None,
    perf_key: str,
    separate_pools: bool = True,
) -> Comparison:
    """The comparison for ``disaggregated``, the serving model's estimate of one P/D replica
    (``Server.disaggregated``) of the stack's scenario: the same scenario with the same server
    settings as two aggregated replicas on its two slices, priced at the same tiers."""
    if not disaggregated.server.disaggregated:
        raise ValueError(f"{disaggregated.plan.slice.key}: the estimate is of an aggregated replica, not a P/D one")
    p: Plan = disaggregated.plan
    if p.kv_dtype is None:  # a serving plan always has one; a training plan is never estimated
        raise ValueError(f"{p.slice.key}: the plan has no KV cache")
    s = disaggregated.scenario
    capacities = tuple(t.capacity for t in disaggregated.prices)
    slices = disaggregated.server.slices_per_replica
    # Same requests in flight on the same slices: split over the aggregated replicas (one may idle).
    total = s.concurrency
    loads = tuple(total // slices + (1 if i < total % slices else 0) for i in range(slices))
    server = replace(disaggregated.server, disaggregated=False)
    aggregated = [
        estimate(arch, p, replace(s, concurrency=c), server=server, region=region, perf_key=perf_key, capacities=capacities)
        for c in loads
        if c > 0
    ]
    worst = max(aggregated, key=lambda e: e.ttft_ms + e.tpot_ms)
    handoff = KvHandoff(
        input_tokens=s.input_tokens,
        bytes_per_token=kv_bytes_per_token(arch, p.kv_dtype),
        wire_bytes_per_token=kv_bytes_per_token_per_chip(p) * p.slice.chips,
        path=handoff_path(p.slice, separate_pools=separate_pools, perf_key=perf_key),
        ttft_s=disaggregated.ttft_s,
    )
    return Comparison(
        slice=p.slice.key,
        handoff=handoff,
        aggregated=ModeResult(
            "aggregated",
            replicas=slices,
            concurrency_per_replica=loads,
            slices=slices,
            output_tokens_per_s=sum(e.output_tokens_per_s for e in aggregated),
            ttft_ms=worst.ttft_ms,
            tpot_ms=worst.tpot_ms,
            prices=disaggregated.prices,  # the same slices at the same tiers: one P/D replica's price
        ),
        disaggregated=ModeResult(
            "disaggregated",
            replicas=1,
            concurrency_per_replica=(disaggregated.concurrency,),
            slices=slices,
            output_tokens_per_s=disaggregated.output_tokens_per_s,
            ttft_ms=disaggregated.ttft_ms,
            tpot_ms=disaggregated.tpot_ms,
            prices=disaggregated.prices,
        ),
    )
