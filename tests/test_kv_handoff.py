"""The planner's KV hand-off term and the aggregated-vs-disaggregated comparison of a P/D stack
(components/planner/kv_handoff.py): the bytes against a hand computation, the path's bandwidth,
the same term the serving model's disaggregated TTFT holds, and both in `plan` and `estimate`
(text and JSON) of llama-70b-disagg, and nothing of it for a stack that is not P/D."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from components.catalog.calibration import FACTORS
from components.catalog.models import MODELS
from components.planner import perf
from components.planner.kv_handoff import compare, handoff_path, kv_bytes_per_token
from components.tools import report
from tests.conftest import planned, run_cli_process

STACK = "llama-70b-disagg"


def _estimate() -> perf.ServingEstimate:
    (chosen,) = planned(STACK).stack_plan.serving
    return chosen


def test_kv_bytes_per_token_of_llama2_70b_bf16_is_320_kib() -> None:
    arch = MODELS["llama2-70b"]
    assert (arch.layers, arch.kv_heads, arch.head_dim) == (80, 8, 128)  # the catalog row the hand computation reads
    assert kv_bytes_per_token(arch, "bfloat16") == 80 * 2 * 8 * 128 * 2 == 320 * 1024
    assert kv_bytes_per_token(arch, "int8") == kv_bytes_per_token(arch, "fp8") == 160 * 1024
    with pytest.raises(ValueError, match="float32"):
        kv_bytes_per_token(arch, "float32")


def test_the_handoff_of_the_pd_stack_goes_over_dcn_and_is_the_term_in_its_ttft() -> None:
    e = _estimate()
    c = compare(MODELS["llama2-70b"], e, region="us-east5", perf_key="vllm")
    h = c.handoff
    assert h.path.link == "dcn"
    assert h.bytes_per_request == 1024 * 320 * 1024 == h.wire_bytes_per_request  # TP 8 over 8 KV heads: no copies
    # One host sends (ct6e-standard-8t): 8 chips x v6e's 100 Gbps per chip ("4 x 200 Gbps NIC" per 8-chip host).
    assert h.path.bandwidth == 8 * 100e9 / 8
    expected = 1024 * 320 * 1024 / (800e9 / 8) + FACTORS["vllm"].dcn_latency_s
    assert h.seconds == pytest.approx(expected)
    # The serving model's disaggregated TTFT already holds this very term: reported, not added again.
    assert h.seconds == pytest.approx(perf.kv_handoff_seconds(e.plan, e.scenario, FACTORS["vllm"]))
    assert h.ttft_s == e.ttft_s
    assert 0 < h.share_of_ttft < 1


def test_within_a_slice_the_handoff_would_run_over_ici_and_faster() -> None:
    tpu = _estimate().plan.slice
    dcn = handoff_path(tpu, separate_pools=True, perf_key="vllm")
    ici = handoff_path(tpu, separate_pools=False, perf_key="vllm")
    assert ici.link == "ici"
    assert ici.bandwidth == tpu.generation.ici_bandwidth_per_chip * FACTORS["vllm"].collective_efficiency * tpu.chips
    assert ici.bandwidth > dcn.bandwidth


def test_the_comparison_serves_the_same_requests_on_the_same_two_slices() -> None:
    e = _estimate()
    c = compare(MODELS["llama2-70b"], e, region="us-east5", perf_key="vllm")
    agg, dis = c.aggregated, c.disaggregated
    assert agg.concurrency_per_replica == (64, 64)
    assert sum(agg.concurrency_per_replica) == e.scenario.concurrency
    assert dis.concurrency_per_replica == (128,)
    assert agg.slices == dis.slices == 2
    # Both price two whole slices at the stack's tiers: the P/D replica's price.
    assert [t.usd_per_hour for t in agg.prices] == [t.usd_per_hour for t in dis.prices] == [e.usd_per_hour]
    one = perf.estimate(
        MODELS["llama2-70b"],
        e.plan,
        replace(e.scenario, concurrency=64),
        server=replace(e.server, disaggregated=False),
        region="us-east5",
        perf_key="vllm",
    )
    assert agg.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s)
    assert (agg.ttft_ms, agg.tpot_ms) == (one.ttft_ms, one.tpot_ms)
    assert (dis.output_tokens_per_s, dis.ttft_ms) == (e.output_tokens_per_s, e.ttft_ms)
    price = agg.prices[0].usd_per_hour
    assert price is not None
    assert agg.per_million(price) == pytest.approx(price / (agg.output_tokens_per_s * 3600) * 1e6)
    assert dis.per_million(price) == pytest.approx(e.usd_per_million_output_tokens)


def test_an_odd_concurrency_splits_unevenly_and_an_aggregated_estimate_is_refused() -> None:
    e = _estimate()
    odd = perf.estimate(
        MODELS["llama2-70b"], e.plan, replace(e.scenario, concurrency=1), server=e.server, region="us-east5", perf_key="vllm"
    )
    c = compare(MODELS["llama2-70b"], odd, region="us-east5", perf_key="vllm")
    assert c.aggregated.concurrency_per_replica == (1, 0)  # the second replica idles and is still paid for
    assert c.aggregated.prices == c.disaggregated.prices
    aggregated = replace(e, server=replace(e.server, disaggregated=False))
    with pytest.raises(ValueError, match="aggregated replica"):
        compare(MODELS["llama2-70b"], aggregated, region="us-east5", perf_key="vllm")


def test_plan_json_carries_the_comparison_only_for_pd_stacks() -> None:
    data = report.plan_json(planned(STACK))["disaggregation"]
    assert data["slice"] == "v6e-2x4-8t"
    assert data["kv_handoff"]["bytes_per_request"] == 1024 * 320 * 1024
    assert {m["mode"] for m in (data["aggregated"], data["disaggregated"])} == {"aggregated", "disaggregated"}
    assert all(m["prices"][0]["usd_per_million_output_tokens"] > 0 for m in (data["aggregated"], data["disaggregated"]))
    assert report.plan_json(planned("llama-70b"))["disaggregation"] is None


def test_plan_and_estimate_print_the_handoff_and_the_comparison() -> None:
    for command in (("plan", STACK), ("estimate", STACK)):
        out = run_cli_process(*command, check=True).stdout
        assert "KV hand-off per request: 1024 input tokens x 320.0 KiB = 320.0 MiB" in out, command
        assert "over the data-centre network" in out, command
        assert "ms per request" in out, command
        assert "aggregated vs disaggregated on 2 x v6e-2x4-8t" in out, command
        assert "  aggregated: 2 aggregated replicas, 64 + 64 in flight" in out, command
        assert "  disaggregated: 1 P/D replica" in out, command
        assert "$/M out: onDemand $" in out, command
    data = json.loads(run_cli_process("estimate", STACK, "--json", check=True).stdout)["disaggregation"]
    assert data["kv_handoff"]["link"] == "dcn"
    assert data["disaggregated"]["concurrency_per_replica"] == [128]


def test_estimate_flags_change_the_compared_scenario() -> None:
    data = json.loads(run_cli_process("estimate", STACK, "--input-tokens", "512", "--json", check=True).stdout)
    assert data["disaggregation"]["kv_handoff"]["bytes_per_request"] == 512 * 320 * 1024


def test_stacks_that_are_not_pd_print_nothing_of_it() -> None:
    for command in (("plan", "llama-70b"), ("estimate", "llama-70b")):
        out = run_cli_process(*command, check=True).stdout
        assert "KV hand-off" not in out, command
        assert "aggregated vs disaggregated" not in out, command
    assert json.loads(run_cli_process("estimate", "llama-70b", "--json", check=True).stdout)["disaggregation"] is None
