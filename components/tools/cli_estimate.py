"""``python -m components estimate STACK``: the serving model's what-if of a stack's scenario on
every slice it could use (``components.planner.perf``; components/README-offline.md).
"""

from __future__ import annotations

import json
import sys

from ..config import stack_files as stacks
from ..config.errors import ConfigError
from .plan_view import print_serving


def command(
    stack_file: stacks.StackFile,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    concurrency: int | None,
    as_json: bool,
) -> int:
    """``estimate``: the stack's serving scenario (flags override ``workload.serving``) on every
    slice it could use, best first (lowest $ per million output tokens that meets the targets)."""
    from .. import planner
    from ..config import resolve as capacity
    from ..config.workload import serving_scenario

    try:
        config = stacks.config_of(stack_file).config
    except ConfigError as error:
        print(f"{stack_file.path}: {error}", file=sys.stderr)
        return 2
    if config.kind_info.mode != "serve":
        print(f"estimate: {config.workload.kind} trains; estimate needs a serving kind (vllm, jetstream, saxml)", file=sys.stderr)
        return 2
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
    try:
        estimates, rejected = capacity.estimate_slices(config, scenario)
    except ConfigError as error:
        print(f"{stack_file.path}: {error}", file=sys.stderr)
        return 2
    rows = [e.to_dict() for e in estimates]
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
            "slices": rows,
            "rejected": list(rejected),
        }
        print(json.dumps(out, separators=(",", ":")))
        return 0
    from rich.console import Console

    console = Console(width=200)
    if not rows:
        console.print(f"no slice holds one sequence of {input_tokens + output_tokens} tokens: " + "; ".join(rejected))
        return 0
    print_serving(
        console,
        rows,
        title=f"{config.workload.model} ({config.workload.kind}), {input_tokens} in / {output_tokens} out, concurrency "
        f"{concurrency}, {config.region}: best $ per million output tokens first",
    )
    return 0
