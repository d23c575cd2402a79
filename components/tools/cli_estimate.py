"""``python -m components estimate STACK``: the serving model's what-if of a stack's scenario on
every slice it could use (``components.planner.perf``; components/README-offline.md).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from ..config import stack_files as stacks
from .plan_disagg import comparison_lines, estimate_json
from .plan_view import print_serving

if TYPE_CHECKING:
    from ..config.stack import StackConfig


def command(
    stack_file: stacks.StackFile,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    concurrency: int | None,
    as_json: bool,
    plot: str | None = None,
) -> int:
    """``estimate``: the stack's serving scenario (flags override ``workload.serving``) on every
    slice it could use, best first (lowest $ per million output tokens that meets the targets).

    A what-if: the stack is validated, not resolved, so latency targets no slice meets (which make
    ``plan`` exit 2) are marked ``missed`` in the table and the command exits 0; prices are the
    stack's capacity tiers' only, as in ``plan``. The row of the stack's own slice (its pinned
    topology, else the one ``plan`` chooses: the first the config accepts) is marked; ``plot`` writes
    the rows as an SVG (:func:`write_plot`)."""
    from .. import planner
    from ..config import resolve as capacity
    from ..config.workload import serving_scenario

    # A ConfigError goes to the CLI, which reports it as every command's (and as JSON with --json).
    config = capacity.validated(stack_file.values, stack_file.stack, stack_file.secret_keys)
    if config.kind_info.mode != "serve":
        return _training(stack_file, config, as_json=as_json)
    spec = serving_scenario(config)
    given: dict[str, int | None] = {
        "--input-tokens": input_tokens if input_tokens is not None else spec.input_tokens if spec else None,
        "--output-tokens": output_tokens if output_tokens is not None else spec.output_tokens if spec else None,
        "--concurrency": concurrency if concurrency is not None else spec.concurrency if spec else None,
    }
    missing = [flag for flag, value in given.items() if value is None]
    if missing:
        print(f"estimate: give {', '.join(missing)} (the stack sets no gke-tpu-llm:workload.serving)", file=sys.stderr)
        return 2
    input_tokens, output_tokens, concurrency = (int(v or 0) for v in given.values())
    if input_tokens + output_tokens > config.workload.max_target_length:
        print(
            f"estimate: --input-tokens {input_tokens} + --output-tokens {output_tokens} exceeds the stack's "
            f"workload.maxTargetLength ({config.workload.max_target_length}); shorten the scenario or raise maxTargetLength",
            file=sys.stderr,
        )
        return 2
    scenario = planner.Scenario(
        input_tokens, output_tokens, concurrency, spec.ttft_ms if spec else None, spec.tpot_ms if spec else None
    )
    estimates, rejected = capacity.estimate_slices(config, scenario)
    rows = [e.to_dict() for e in estimates]
    own = stack_slice(config, rows)
    disaggregation = estimate_json(config, estimates, own)  # P/D stacks: KV hand-off, aggregated vs disaggregated
    if plot is not None and rows:
        what = f"{config.workload.model} ({config.workload.kind}), {input_tokens} in / {output_tokens} out"
        write_plot(plot, rows, own, f"{what}, concurrency {concurrency}", scenario)
    if as_json:
        out = {
            "stack": stack_file.stack,
            "model": config.workload.model,
            "kind": config.workload.kind,
            "region": config.region,
            "scenario": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "concurrency": concurrency,
                "ttft_ms": scenario.ttft_ms,
                "tpot_ms": scenario.tpot_ms,
            },
            "stack_slice": own,
            "slices": rows,
            "rejected": list(rejected),
            "disaggregation": disaggregation,
        }
        print(json.dumps(out, separators=(",", ":")))
        return 0
    from rich.console import Console
    from rich.markup import escape

    console = Console(width=200)
    if not rows:
        console.print(f"no slice holds one sequence of {input_tokens + output_tokens} tokens: " + "; ".join(rejected))
        return 0
    print_serving(
        console,
        rows,
        title=f"{config.workload.model} ({config.workload.kind}), {input_tokens} in / {output_tokens} out, concurrency "
        f"{concurrency}, {config.region}: best $ per million output tokens first",
        marks=_marks(rows, own),
    )
    for line in comparison_lines(disaggregation):
        console.print(escape(line))
    targets = [k for k, v in (("ttftMs", scenario.ttft_ms), ("tpotMs", scenario.tpot_ms)) if v is not None]
    if targets and not any(e.meets_targets and e.refused_by_config is None for e in estimates):
        # A what-if exits 0 whatever it finds; the stack's own plan would not.
        console.print(
            f"note: no slice the stack accepts meets workload.serving's {' and '.join(targets)} here; "
            "`plan` refuses such a stack (exit 2)"
        )
    return 0


def stack_slice(config: StackConfig, rows: list[dict[str, Any]]) -> str | None:
    """The slice the stack runs on: its pinned topology's, else the one ``plan`` would choose (the
    first row the config accepts: ``plan`` ranks the same way); None when no row qualifies."""
    if config.tpu.topology is not None:
        return config.tpu.slice.key
    return next((r["slice"] for r in rows if r["refused_by_config"] is None), None)


def _marks(rows: list[dict[str, Any]], own: str | None) -> dict[str, str]:
    marks = {rows[0]["slice"]: "best"} if rows else {}
    if own is not None:
        marks[own] = "best, this stack" if marks.get(own) else "this stack"
    return marks


def pareto_front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The priced rows no other priced row beats on both axes (more output tokens/s at no higher $
    per million, or lower $ per million at no lower throughput), by throughput."""
    priced = [r for r in rows if r["usd_per_million_output_tokens"] is not None]

    def beaten(r: dict[str, Any]) -> bool:
        return any(
            o["output_tokens_per_s"] >= r["output_tokens_per_s"]
            and o["usd_per_million_output_tokens"] <= r["usd_per_million_output_tokens"]
            and (o["output_tokens_per_s"], o["usd_per_million_output_tokens"])
            != (r["output_tokens_per_s"], r["usd_per_million_output_tokens"])
            for o in priced
        )

    return sorted((r for r in priced if not beaten(r)), key=lambda r: r["output_tokens_per_s"])


def write_plot(path: str, rows: list[dict[str, Any]], own: str | None, title: str, scenario: Any) -> None:
    """Every estimated slice as $ per million output tokens (preferred tier) against output tokens/s:
    slices that meet the latency targets filled, misses hollow, the Pareto front as a line, the best
    slice and the stack's own labelled; the targets in the legend. A deterministic SVG (no date, a
    fixed hash salt), so a committed picture changes only when the prediction does."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "gke-tpu-llm"
    priced = [r for r in rows if r["usd_per_million_output_tokens"] is not None]
    if not priced:
        raise ValueError("no estimated slice has a catalog price: nothing to plot")
    tier = rows[0]["prices"][0]["capacity"] if rows[0]["prices"] else "onDemand"
    fig, ax = plt.subplots(figsize=(8, 5))
    for met in (True, False):
        group = [r for r in priced if r["meets_targets"] is met]
        if group:
            ax.scatter(
                [r["output_tokens_per_s"] for r in group],
                [r["usd_per_million_output_tokens"] for r in group],
                label="meets the latency targets" if met else "misses a latency target",
                facecolors="tab:blue" if met else "none",
                edgecolors="tab:blue" if met else "tab:red",
                zorder=3,
            )
    front = pareto_front(priced)
    ax.plot(
        [r["output_tokens_per_s"] for r in front],
        [r["usd_per_million_output_tokens"] for r in front],
        color="grey",
        linestyle="--",
        label="Pareto front",
        zorder=2,
    )
    for label, key in (("best", priced[0]["slice"]), ("this stack", own)):
        row = next((r for r in priced if r["slice"] == key), None)
        if row is not None:
            ax.annotate(
                f"{row['slice']} ({label})",
                (row["output_tokens_per_s"], row["usd_per_million_output_tokens"]),
                textcoords="offset points",
                xytext=(6, 6 if label == "best" else -14),
            )
            point = ([row["output_tokens_per_s"]], [row["usd_per_million_output_tokens"]])
            ax.scatter(*point, marker="*", s=160, color="black", zorder=4)
    limits = (("TTFT", scenario.ttft_ms), ("TPOT", scenario.tpot_ms))
    targets = [f"{name} <= {value:g} ms" for name, value in limits if value is not None]
    ax.set_title(f"{title}\nlatency targets: {', '.join(targets) if targets else 'none'}", fontsize=10)
    ax.set_xlabel("output tokens/s (one replica)")
    ax.set_ylabel(f"$ per million output tokens ({tier})")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def _training(stack_file: stacks.StackFile, config: StackConfig, *, as_json: bool) -> int:
    """``estimate`` of a training stack: tokens/s per chip and $ per billion training tokens at each
    candidate slice count (``components.tools.plan_training.estimate_rows``); a kind without a
    multislice model says so (exit 2)."""
    from ..config import resolve as capacity
    from .plan_training import estimate_rows

    rows = estimate_rows(capacity.resolve(config))
    if not rows:
        print(
            f"estimate: {config.workload.kind} has no training model here (estimate covers the serving kinds and "
            "maxtext-jobset)",
            file=sys.stderr,
        )
        return 2
    if as_json:
        print(json.dumps({"stack": stack_file.stack, "kind": config.workload.kind, "training": rows}))
        return 0
    print(f"training estimate of {stack_file.stack} ({config.workload.model} on {config.tpu.slice.key} slices):")
    for row in rows:
        per_billion = ", ".join(f"{tier} ${usd:,.2f}" for tier, usd in row["usd_per_billion_tokens"].items())
        print(
            f"  {row['slices']:>3} slice(s), {row['devices']} chips: step {row['step_seconds']} s, MFU "
            f"{100 * row['mfu']:.1f}%, {row['tokens_per_s_per_chip']:,.0f} tokens/s per chip; $ per billion tokens: {per_billion}"
        )
    return 0
