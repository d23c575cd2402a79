"""Serving performance model: output tokens/s, TTFT, TPOT and $ per million output tokens for a
scenario (input tokens, output tokens, concurrency) on one planned slice (one replica).

It reads the planner's exact per-chip byte counts (``Plan.memory``: weights, KV cache) and the
catalog's HBM bandwidth and peak FLOPs per chip, with the efficiency factors of
``components/catalog/calibration.py`` (calibrated on published vLLM-TPU results, each with its source).

Steady state with ``c`` sequences in flight (``c`` = min(requested, what the KV cache holds as the
engine allocates it: vLLM pages of the tokens in use, ``input + output / 2`` on average, JetStream and
Saxml a whole ``max_target_length`` slot each (``kv_room``); the engine's batch limit: vLLM
``--max-num-seqs``, JetStream's decode slots, Saxml's batch; ``Server``): every engine step (one output token per sequence) reads
each chip's weights and the KV cache of its sequences (average context ``input + output / 2``),
and runs the matmuls of ``c`` decode tokens plus the prefill tokens chunked prefill interleaves
into the same step (``c x input / output`` on average: one new prompt per finished request). The
step costs the longer of the HBM time and the compute time plus the share of the shorter the fitted
overlap does not hide (``EfficiencyFactors.overlap``) plus the prefill attention kernel (the prompt
tokens' QK^T and AV at the rate a published kernel benchmark gives, scaled by the share of the MXU
a head fills: ``attention_rate``; quadratic in the prompt, it weighs on long prompts) plus the
tensor-parallel all-reduces over ICI (two per layer) plus, with pipeline stages, the DCN hand-offs,
plus the host's per-step overhead. With ``p`` pipeline stages each stage runs ``c / p`` sequences and a token passes all
``p`` stages. TTFT is the prompt's prefill (FLOPs at the prefill utilisation) plus half a step (a
request waits for the running step), and at least one step (the first token is sampled at the end
of the step that runs the prompt's last chunk). Throughput is ``c x output / (TTFT + (output - 1) x TPOT)``,
the request loop of ``vllm bench serve``.

vLLM's per-step token budget (``--max-num-batched-tokens`` B): when ``c x (1 + input / output)``
exceeds B, a step runs B tokens and admits only what is left after the decode tokens, so requests
complete at B / (input + output) per step at most (Little's law on the steady state: the decoding
sequences are B x output / (input + output), the rest wait in the prefill queue) and TTFT grows
by that queueing.

Disaggregated serving (JetStream: a replica is a prefill slice and a decode slice of the same
type): the decode slice runs decode-only steps of ``c`` sequences; the prefill slice runs one
prompt at a time at the step compute utilisation (no decode batch shares it), then hands the
prompt's KV cache to the decode slice over DCN; requests complete no faster than the prefill slice
admits them (one per prefill), and the replica's price is both slices'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..catalog.calibration import (
    FACTORS,
    EfficiencyFactors,
    calibration_of,
)
from ..catalog.models import ModelArch
from .engines import profile
from .params import param_count
from .plan_errors import PlanError
from .results import Plan

ACTIVATION_BYTES = 2
"""Activations cross the interconnect in bf16 (2 bytes per element) whatever the weight dtype."""


@dataclass(frozen=True)
class Scenario:
    """The traffic one replica serves."""

    input_tokens: int
    output_tokens: int
    concurrency: int
    ttft_ms: float | None = None
    tpot_ms: float | None = None

    def __post_init__(self) -> None:
        if min(self.input_tokens, self.output_tokens, self.concurrency) < 1:
            raise PlanError(f"a scenario needs at least one input token, output token and request: {self}", "tokens")


ConcurrencyLimit = Literal["requested", "kv_cache", "batch_limit"]
"""What bounds the sequences in flight: the scenario's own concurrency, the KV cache room the memory
plan leaves, or the engine's batch limit (``Server.batch_limit``)."""


@dataclass(frozen=True)
class Server:
    """How the engine runs one replica, from the stack's settings (each kind's spec module:
    ``serving_server``): what bounds its batch and which slices one replica occupies."""

    batch_limit: int
    """Most sequences the engine runs at once whatever the KV cache room: vLLM ``--max-num-seqs``,
    JetStream's decode slots (``per_device_batch_size`` x devices of the decode slice), Saxml's
    servable batch."""
    batch_limit_source: str
    """Where the limit comes from, for the report (e.g. ``vLLM --max-num-seqs (workload.batchSize)``)."""
    step_token_budget: int | None = None
    """Tokens one engine step schedules at most (vLLM ``--max-num-batched-tokens``); None: no
    per-step token budget (JetStream and Saxml prefill a prompt whole)."""
    disaggregated: bool = False
    """A replica is a prefill slice plus a decode slice, both of the planned slice's type."""

    def __post_init__(self) -> None:
        if self.batch_limit < 1 or (self.step_token_budget is not None and self.step_token_budget < 1):
            raise PlanError(f"a server runs at least one sequence and one token per step: {self}", "batch")

    @property
    def slices_per_replica(self) -> int:
        return 2 if self.disaggregated else 1


@dataclass(frozen=True)
class StepTimes:
    """One engine step (one output token for every sequence in flight), seconds."""

    hbm: float
    compute: float
    collectives: float
    overhead: float
    hbm_floor: float
    """Bytes read per step per chip / the catalog bandwidth (no efficiency): no TPOT is below it."""
    overlap: float = 0.0
    """Share of the shorter of HBM and compute time hidden under the longer (the engine family's
    fitted ``EfficiencyFactors.overlap``): 0 adds them, 1 is the roofline max."""
    attention: float = 0.0
    """The prefill attention kernel (QK^T and AV of the step's prompt tokens): a kernel of its own
    between the layer's matmuls, so added, not overlapped (``attention_rate``)."""

    @property
    def total(self) -> float:
        longer, shorter = max(self.hbm, self.compute), min(self.hbm, self.compute)
        return longer + (1 - self.overlap) * shorter + self.attention + self.collectives + self.overhead


@dataclass(frozen=True)
class TierPrice:
    """One replica's price obtained as one capacity type (every slice it occupies)."""

    capacity: str
    """A ``tpu.capacity[].type``: onDemand, spot, reservation, flexStart or queuedProvisioning."""
    usd_per_hour: float | None
    """The catalog's rate for it (``TpuSlice.capacity_price``); None where the catalog has none."""


@dataclass(frozen=True)
class ServingEstimate:
    """What one replica (one slice) serves for a scenario."""

    plan: Plan
    scenario: Scenario
    server: Server
    concurrency: int
    """Sequences the clients keep in flight: min(requested, max_concurrent_sequences)."""
    concurrency_limited_by: ConcurrencyLimit
    kv_room: KvRoom
    decoding: float
    """Sequences decoding in a step: ``concurrency``, or fewer while the rest wait for prefill
    (the step token budget or the prefill slice binds)."""
    step: StepTimes
    ttft_s: float
    output_tokens_per_s: float
    prices: tuple[TierPrice, ...]
    """The replica's price at each of the stack's capacity tiers, preferred first (only those: a
    stack on on-demand VMs is not shown a spot price it does not pay)."""
    calibrated: bool
    """The engine's factors were fitted on its own published results on this generation."""
    calibration: str = ""
    """What the prediction stands on (``calibration.calibration_of``): "calibrated on ..." or
    "uncalibrated: ...", and whether the deployed engine version is one the points measured."""
    refused_by_config: str | None = None
    """Why the stack's own rules refuse this slice (``estimate`` lists it anyway, marked); None: accepted."""

    @property
    def kv_cache_sequences(self) -> int:
        """Sequences the KV cache the memory plan leaves holds, as the engine allocates it (``kv_room``)."""
        return self.kv_room.sequences

    @property
    def max_concurrent_sequences(self) -> int:
        """Sequences the replica runs at once: min(KV cache room, the engine's batch limit)."""
        return min(self.kv_cache_sequences, self.server.batch_limit)

    @property
    def step_token_budget_binds(self) -> bool:
        """The scenario asks more tokens per step than vLLM's --max-num-batched-tokens admits."""
        budget = self.server.step_token_budget
        s = self.scenario
        return (
            budget is not None
            and not self.server.disaggregated
            and (self.concurrency * (1 + s.input_tokens / s.output_tokens) > budget)
        )

    @property
    def tpot_ms(self) -> float:
        return 1000 * self.step.total

    @property
    def ttft_ms(self) -> float:
        return 1000 * self.ttft_s

    @property
    def hbm_floor_ms(self) -> float:
        return 1000 * self.step.hbm_floor

    def _per_million(self, usd_per_hour: float | None) -> float | None:
        if usd_per_hour is None or self.output_tokens_per_s <= 0:
            return None
        return usd_per_hour / (self.output_tokens_per_s * 3600) * 1e6

    @property
    def usd_per_hour(self) -> float | None:
        """One replica's $/h at the preferred (first) tier: what ranks the slices."""
        return self.prices[0].usd_per_hour if self.prices else None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """$ per million output tokens at the preferred tier; None where the catalog has no price."""
        return self._per_million(self.usd_per_hour)

    @property
    def meets_targets(self) -> bool:
        """Predicted TTFT and TPOT at or under the scenario's targets (unset targets always met)."""
        s = self.scenario
        return (s.ttft_ms is None or self.ttft_ms <= s.ttft_ms) and (s.tpot_ms is None or self.tpot_ms <= s.tpot_ms)

    @property
    def binding_limit(self) -> str:
        """What bounds the sequences in flight, in words (plan text and JSON)."""
        room = self.kv_room.describe()
        if self.concurrency_limited_by == "requested":
            limit = f"{self.server.batch_limit_source} {self.server.batch_limit}"
            return f"the requested concurrency {self.scenario.concurrency} (KV cache room: {room}; {limit})"
        if self.concurrency_limited_by == "kv_cache":
            return f"the KV cache: {room} (under {self.server.batch_limit_source} {self.server.batch_limit})"
        return f"{self.server.batch_limit_source} {self.server.batch_limit} (KV cache room: {room})"

    def to_dict(self) -> dict[str, Any]:
        # Unrounded: the text views round once, where they print (a value rounded here and again
        # there can differ from the prediction's own rounding by one).
        tpu = self.plan.slice
        return {
            "slice": tpu.key,
            "generation": tpu.generation.name,
            "topology": tpu.topology,
            "hosts": tpu.hosts,
            "chips": tpu.chips,
            "input_tokens": self.scenario.input_tokens,
            "output_tokens": self.scenario.output_tokens,
            "concurrency": self.concurrency,
            "requested_concurrency": self.scenario.concurrency,
            "max_concurrent_sequences": self.max_concurrent_sequences,
            "kv_cache_sequences": self.kv_cache_sequences,
            "batch_limit": self.server.batch_limit,
            "batch_limit_source": self.server.batch_limit_source,
            "concurrency_limited_by": self.concurrency_limited_by,
            "binding_limit": self.binding_limit,
            "kv_tokens_per_sequence": self.kv_room.tokens_per_sequence,
            "kv_page_tokens": self.kv_room.page_tokens,
            "step_token_budget": self.server.step_token_budget,
            "step_token_budget_binds": self.step_token_budget_binds,
            "slices_per_replica": self.server.slices_per_replica,
            "output_tokens_per_s": self.output_tokens_per_s,
            "ttft_ms": self.ttft_ms,
            "tpot_ms": self.tpot_ms,
            "hbm_floor_ms": self.hbm_floor_ms,
            # The preferred tier's, then every configured tier's (one replica: every slice it occupies).
            "usd_per_hour": self.usd_per_hour,
            "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
            "prices": [
                {
                    "capacity": t.capacity,
                    "usd_per_hour": t.usd_per_hour,
                    "usd_per_million_output_tokens": self._per_million(t.usd_per_hour),
                }
                for t in self.prices
            ],
            "meets_targets": self.meets_targets,
            "calibrated": self.calibrated,
            "calibration": self.calibration,
            "refused_by_config": self.refused_by_config,
        }


def kv_bytes_per_token_per_chip(p: Plan) -> float:
    """KV-cache bytes one cached token costs each chip (scales included), averaged over the
    batch split: the plan's KV bytes per chip over the tokens it was planned for."""
    return p.memory.kv_cache / (p.global_batch * p.max_target_length)


def max_concurrent_sequences(p: Plan, context_tokens: int) -> int:
    """Sequences of ``context_tokens`` the HBM left after weights and reserve holds (0 if none)."""
    per_token = kv_bytes_per_token_per_chip(p)
    free = p.memory.hbm - p.memory.weights - p.memory.reserve
    if per_token <= 0:
        return 0
    return max(0, int(free // (per_token * context_tokens)))


@dataclass(frozen=True)
class KvRoom:
    """What the KV cache the memory plan leaves holds, as the engine allocates it."""

    sequences: int
    tokens_per_sequence: int
    """Tokens one sequence holds on average: with paging, ``input + output / 2`` (the steady state's
    mean, half the answer written) rounded up to whole pages; without, ``max_target_length`` (a slot
    is reserved whole)."""
    page_tokens: int | None
    """The engine's page (vLLM block) size; None: slots reserved whole (JetStream, Saxml)."""

    def describe(self) -> str:
        if self.page_tokens is None:
            return f"{self.sequences} slots of {self.tokens_per_sequence} tokens"
        return f"{self.sequences} sequences of ~{self.tokens_per_sequence} tokens in use ({self.page_tokens}-token pages)"


def kv_room(p: Plan, s: Scenario) -> KvRoom:
    """Sequences the KV cache holds: an engine that pages (vLLM) fits the pages in use, input plus
    half the output on average, rounded up to its page size; one that reserves slots (JetStream's
    decode slots, Saxml's batch) a whole ``max_target_length`` per sequence."""
    pages = profile(p.sharding.engine, p.mode).kv_page_tokens
    if pages is None:
        return KvRoom(max_concurrent_sequences(p, p.max_target_length), p.max_target_length, None)
    page = pages(p.max_target_length)
    tokens = math.ceil((s.input_tokens + s.output_tokens / 2) / page) * page
    return KvRoom(max_concurrent_sequences(p, tokens), tokens, page)


def weight_read_bytes(arch: ModelArch, p: Plan) -> tuple[int, int]:
    """(bytes per chip of the decoder layers each pipeline stage reads every step, bytes per chip
    read once per step by one stage: the output projection and final norm), from the plan's
    per-array layout. An untied input embedding is a row gather, not a read of the table, so it
    is in neither (it still occupies HBM: ``Plan.memory.weights``)."""
    layers = once = 0
    for name, a in p.arrays.items():
        if a.kind not in ("weight", "scale"):
            continue
        if name.startswith("decoder/"):
            layers += a.bytes_per_chip
        elif not name.startswith("embed/") or arch.tied_embeddings:
            once += a.bytes_per_chip
    return layers, once


def _axis_product(p: Plan, logical: str) -> int:
    rules = profile(p.sharding.engine, p.mode).rules
    return math.prod(p.sharding.mesh_axes.get(a, 1) for a in rules.get(logical, ()))


def matmul_params(arch: ModelArch) -> int:
    """Parameters that take part in a token's matmuls: all but the embedding lookup table (an
    untied embedding is a gather, not a matmul; a tied one is also the output projection)."""
    total = param_count(arch)
    return total if arch.tied_embeddings else total - arch.vocab * arch.d_model


def _attention_flops(arch: ModelArch, tokens: float, context: float) -> float:
    """QK^T and AV for ``tokens`` queries against ``context`` keys: 2 matmuls x 2 FLOPs per MAC."""
    return 4 * arch.layers * arch.q_heads * arch.head_dim * tokens * context


def attention_rate(arch: ModelArch, p: Plan, f: EfficiencyFactors) -> float:
    """FLOP/s per chip the prefill attention kernel achieves: the bf16 peak (the benchmark the share
    comes from ran bf16; an fp8 KV cache halves its reads, not its matmuls) times the kernel's share
    (``EfficiencyFactors.attention_kernel_share``) times the share of the MXU columns a head fills
    (QK^T contracts over ``head_dim`` and AV writes it: head_dim 128 fills half of v6e's and tpu7x's
    256 columns, all of v5e's and v5p's 128)."""
    gen = p.slice.generation
    return gen.peak_bf16_flops_per_chip * f.attention_kernel_share * gen.mxu_fill(arch.head_dim)


def _peak_flops(p: Plan) -> float:
    gen = p.slice.generation
    if p.weight_dtype == "fp8" and gen.peak_fp8_flops_per_chip is not None:
        return float(gen.peak_fp8_flops_per_chip)
    return float(gen.peak_bf16_flops_per_chip)


def _allreduce_seconds(arch: ModelArch, p: Plan, tokens: float, f: EfficiencyFactors) -> float:
    """Tensor-parallel all-reduces of one pass over ``tokens`` (two per layer of the stage), ring
    algorithm: each chip sends 2 (n-1)/n of the activation bytes."""
    n = _axis_product(p, "mlp")
    if n <= 1:
        return 0.0
    stages = _axis_product(p, "layers")
    layers = math.ceil(arch.layers / stages)
    size = tokens * arch.d_model * ACTIVATION_BYTES
    bandwidth = p.slice.generation.ici_bandwidth_per_chip * f.collective_efficiency
    per = 2 * (n - 1) / n * size / bandwidth + f.collective_latency_s
    return 2 * layers * per


def _gather_seconds(p: Plan, f: EfficiencyFactors) -> float:
    """Weights sharded over an ``embed`` axis (MaxText fsdp, Saxml data) are all-gathered every
    step: each chip receives (g - 1) shards of its own size."""
    g = _axis_product(p, "embed")
    if g <= 1:
        return 0.0
    bandwidth = p.slice.generation.ici_bandwidth_per_chip * f.collective_efficiency
    return (g - 1) * p.memory.weights / bandwidth


def step_times(
    arch: ModelArch, p: Plan, s: Scenario, decoding: float, f: EfficiencyFactors, *, prefill_tokens: float | None = None
) -> StepTimes:
    """One token for each of ``decoding`` sequences plus ``prefill_tokens`` prompt tokens (default:
    chunked prefill's steady share, ``decoding x input / output``; 0 on a decode-only slice):
    every pipeline stage runs its share."""
    gen = p.slice.generation
    stages = _axis_product(p, "layers")
    per_stage = decoding / stages
    prefill = (decoding * s.input_tokens / s.output_tokens if prefill_tokens is None else prefill_tokens) / stages
    context = s.input_tokens + s.output_tokens / 2
    layer_weights, once = weight_read_bytes(arch, p)
    # Per stage: its layers' weights and its sequences' KV; once per step: the output projection.
    read = stages * (layer_weights + per_stage * context * kv_bytes_per_token_per_chip(p)) + once
    tokens = per_stage + prefill  # decode + interleaved prefill
    prompt_context = s.input_tokens / 2  # causal prefill: a prompt token sees half the prompt on average
    # Decode attention reads the KV cache (in ``read``); its FLOPs ride with the matmuls'.
    flops = 2 * matmul_params(arch) * tokens + _attention_flops(arch, per_stage, context)
    # A stage's chips share its work: total FLOPs of the stage's layers over the stage's chips.
    chips_per_stage = p.slice.chips / stages
    stage_flops = flops / stages / chips_per_stage
    attention = _attention_flops(arch, prefill, prompt_context) / stages / chips_per_stage / attention_rate(arch, p, f)
    hbm = read / (gen.hbm_bandwidth_per_chip * f.hbm_efficiency)  # already summed over the stages
    compute = stage_flops / (_peak_flops(p) * f.step_compute_utilisation)
    collectives = _allreduce_seconds(arch, p, tokens, f) + _gather_seconds(p, f)
    handoff = 0.0
    if stages > 1:
        handoff = tokens * arch.d_model * ACTIVATION_BYTES / p.slice.dcn_bandwidth_per_host + f.dcn_latency_s
    return StepTimes(
        hbm=hbm,
        compute=stages * compute,
        collectives=stages * (collectives + handoff),
        overhead=f.step_overhead_s,
        hbm_floor=read / gen.hbm_bandwidth_per_chip,
        overlap=f.overlap,
        attention=stages * attention,
    )


def prefill_seconds(arch: ModelArch, p: Plan, s: Scenario, f: EfficiencyFactors, utilisation: float | None = None) -> float:
    """One prompt through every stage: its matmuls at ``utilisation`` of peak FLOPs (default: the
    prefill utilisation, calibrated with a decode batch sharing the slice), its attention at the
    attention kernel's rate (``attention_rate``), with its all-reduces."""
    stages = _axis_product(p, "layers")
    used = f.prefill_utilisation if utilisation is None else utilisation
    compute = stages * (2 * matmul_params(arch) * s.input_tokens / p.slice.chips) / (_peak_flops(p) * used)
    attention = stages * _attention_flops(arch, s.input_tokens, s.input_tokens / 2) / p.slice.chips / attention_rate(arch, p, f)
    return compute + attention + stages * _allreduce_seconds(arch, p, s.input_tokens, f)


def kv_handoff_seconds(p: Plan, s: Scenario, f: EfficiencyFactors) -> float:
    """A prompt's KV cache from the prefill slice to the decode slice over DCN: every host of the
    slice sends its chips' share at once."""
    total = s.input_tokens * kv_bytes_per_token_per_chip(p) * p.slice.chips
    return total / (p.slice.dcn_bandwidth_per_host * p.slice.hosts) + f.dcn_latency_s


def estimate(
    arch: ModelArch,
    p: Plan,
    s: Scenario,
    *,
    server: Server,
    region: str | None,
    perf_key: str,
    factors: EfficiencyFactors | None = None,
    capacities: Sequence[str] = ("onDemand",),
) -> ServingEstimate:
    """The serving estimate of scenario ``s`` on planned slice ``p`` (one replica of ``server``:
    with disaggregation, ``p`` is each of its two slices), with the efficiency factors of row
    ``perf_key`` of the calibration table (``WorkloadKindInfo.perf_key``), or ``factors`` when given
    (a calibration run trying other values; ``calibrated`` still says whether the row was), priced
    at each of ``capacities`` (the stack's ``tpu.capacity`` types, preferred first)."""
    if not capacities:
        raise ValueError("an estimate is priced at one capacity type at least")
    if p.mode != "serve":
        raise PlanError(f"a serving estimate needs a serving plan, not {p.mode}", "engine")
    if perf_key not in FACTORS:  # a programming error: the config reports a kind's unknown key first
        raise ValueError(f"no efficiency factors for perf key {perf_key!r}; rows: {', '.join(sorted(FACTORS))}")
    f = factors if factors is not None else FACTORS[perf_key]
    kv = kv_room(p, s)
    room = kv.sequences
    if max_concurrent_sequences(p, s.input_tokens + s.output_tokens) < 1:
        raise PlanError(
            f"{p.slice.key}: the KV cache left after weights and reserve holds no sequence of "
            f"{s.input_tokens + s.output_tokens} tokens",
            "tokens",
        )
    concurrency = min(s.concurrency, room, server.batch_limit)
    limited_by: ConcurrencyLimit = (
        "requested" if concurrency == s.concurrency else "kv_cache" if room <= server.batch_limit else "batch_limit"
    )
    in_out = s.input_tokens + s.output_tokens
    budget = server.step_token_budget
    if server.disaggregated:
        step = step_times(arch, p, s, concurrency, f, prefill_tokens=0.0)
        prefill = prefill_seconds(arch, p, s, f, f.step_compute_utilisation)
        ttft = prefill + kv_handoff_seconds(p, s, f) + step.total / 2
        request = ttft + (s.output_tokens - 1) * step.total
        # The prefill slice admits one request per prefill: past that, requests queue for it.
        request = max(request, concurrency * prefill)
        decoding = concurrency * min(1.0, s.output_tokens * step.total / request)
    elif budget is not None and concurrency * in_out / s.output_tokens > budget:
        # The budget binds: B tokens a step, B / (input + output) requests completed per step.
        decoding = budget * s.output_tokens / in_out
        step = step_times(arch, p, s, decoding, f, prefill_tokens=budget - decoding)
        ttft = max(prefill_seconds(arch, p, s, f) + step.total / 2, step.total)
        request = max(ttft + (s.output_tokens - 1) * step.total, concurrency * in_out / budget * step.total)
    else:
        decoding = concurrency
        step = step_times(arch, p, s, concurrency, f)
        ttft = max(prefill_seconds(arch, p, s, f) + step.total / 2, step.total)
        request = ttft + (s.output_tokens - 1) * step.total
    ttft = request - (s.output_tokens - 1) * step.total  # queueing for prefill lands before the first token
    throughput = concurrency * s.output_tokens / request
    tpu = p.slice
    status = calibration_of(perf_key, tpu.generation.name)

    def per_replica(price: float | None) -> float | None:
        return None if price is None else price * server.slices_per_replica

    return ServingEstimate(
        plan=p,
        scenario=s,
        server=server,
        concurrency=concurrency,
        kv_room=kv,
        concurrency_limited_by=limited_by,
        decoding=decoding,
        step=step,
        ttft_s=ttft,
        output_tokens_per_s=throughput,
        prices=tuple(TierPrice(c, per_replica(tpu.capacity_price(region, c))) for c in capacities),
        calibrated=status.calibrated,
        calibration=status.note,
    )


def rank_key(e: ServingEstimate) -> tuple[bool, bool, float, float, int, str]:
    """Best first: meets the targets, priced, lowest $ per million output tokens at the preferred
    tier, then highest throughput, fewer hosts, slice key."""
    cost = e.usd_per_million_output_tokens
    priced = cost if cost is not None else 0.0
    return (not e.meets_targets, cost is None, priced, -e.output_tokens_per_s, e.plan.slice.hosts, e.plan.slice.key)
