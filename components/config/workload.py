"""The workload section's common settings (``gke-tpu-llm:workload``): model, dtypes, lengths, batch, parallelism.

What a kind adds (its ``kind`` literal and settings section) lives in the kind's package; the
registry (``components.workloads.registry``) joins them, and ``components.config.stack`` checks the
rules that need the kind's engine or the rest of the stack (mesh axis names, slice, buckets).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, model_validator

from ..catalog import tpu as tpu_catalog
from ..catalog.models import MODELS
from .base import Spec
from .errors import closest, raise_rules, rule
from .front_door import FrontDoorSpec

MAX_TARGET_LENGTH = 131072
"""The longest context window of a catalog model (Llama 3.1: 128K tokens)."""
MAX_CHIPS = max(s.chips for s in tpu_catalog.all_slices())
"""Chips of the largest catalog slice: no mesh axis can be larger."""
FP8_GENERATIONS = ", ".join(g.name for g in tpu_catalog.GENERATIONS.values() if g.peak_fp8_flops_per_chip is not None)
"""Generations with an fp8 path in the TPU catalog (a published ``peak_fp8_flops_per_chip``), for the docs."""


KIND_DESCRIPTION = "Which serving/training system runs on the slices."
MAX_CONCURRENCY = 65536
"""Most concurrent requests a scenario may name: the same bound as ``batchSize`` (far beyond any
engine's scheduler on the largest catalog slice; a larger value is a typo)."""
MAX_LATENCY_MS = 600_000.0
"""Longest latency target in milliseconds (10 minutes): beyond any interactive or batch SLO, so a
larger value is a unit mistake."""


class ServingSpec(Spec):
    """``gke-tpu-llm:workload.serving``: the traffic a serving stack is sized for. The planner's
    performance model (``components/planner/perf.py``) predicts output tokens/s, TTFT, TPOT and $ per
    million output tokens for it, and with ``tpu.topology`` or ``tpu.generation`` unset picks the
    slice with the lowest $ per million output tokens that meets the latency targets.

    The three sizes are required, not defaulted: every prediction depends on them and no single
    scenario is typical (chat, summarisation and batch jobs differ by 10x in each)."""

    input_tokens: Annotated[int, Field(ge=1, le=MAX_TARGET_LENGTH)] = Field(
        description="Prompt tokens per request (vLLM benchmark_serving --random-input-len). At most 131072; "
        "inputTokens + outputTokens must fit maxTargetLength."
    )
    output_tokens: Annotated[int, Field(ge=1, le=MAX_TARGET_LENGTH)] = Field(
        description="Generated tokens per request (vLLM benchmark_serving --random-output-len). At most 131072."
    )
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = Field(
        description="Requests in flight per replica (vLLM benchmark_serving --max-concurrency). The model serves "
        "min(concurrency, the sequences the KV cache holds). At most 65536."
    )
    ttft_ms: Annotated[float, Field(gt=0, le=MAX_LATENCY_MS)] | None = Field(
        None,
        description="Time-to-first-token target in milliseconds (queueing excluded). Unset: no TTFT target. "
        "Slices predicted above it are not chosen.",
    )
    tpot_ms: Annotated[float, Field(gt=0, le=MAX_LATENCY_MS)] | None = Field(
        None,
        description="Time-per-output-token target in milliseconds (after the first token). Unset: no TPOT "
        "target. Slices predicted above it are not chosen.",
    )
    benchmark: bool = Field(
        False,
        description="Run the engine's benchmark client against the deployed server after up with this scenario. "
        "Off by default because it loads the server with synthetic traffic.",
    )


class WorkloadBase(Spec):
    """The settings every workload kind has. Each kind subclasses it once in its own package
    (``components/workloads/<kind>/spec.py``) with ``kind`` as a literal and its settings section;
    the stack config takes the union of those, discriminated on ``kind``."""

    kind: str = Field(description=KIND_DESCRIPTION)
    model: str = Field(description="Model key from the model catalog (components/catalog/models.py).")
    weights: Literal["bfloat16", "int8", "fp8"] | None = Field(
        None,
        description="Weight dtype in HBM. Unset: the servable's own (Saxml int8) or bfloat16. int8 keeps one "
        "float32 scale per output channel. fp8 (FP8 E4M3, 1 byte per element, with one scale per output "
        "channel) applies to the transformer blocks' matmul weights while embeddings, lm_head and norms stay "
        "bf16; vLLM serves the model's FP8 checkpoint (components/workloads/vllm/spec.py HF_FP8_MODELS). "
        f"Allowed with kind vllm only, on a generation with an fp8 path in the TPU catalog ({FP8_GENERATIONS}).",
    )
    kv_cache: Literal["bfloat16", "int8", "fp8"] | None = Field(
        None,
        description="KV-cache dtype. Unset follows the weights when they are int8, else bfloat16. fp8 stores "
        "K and V at 1 byte per element (vLLM --kv-cache-dtype=fp8): kind vllm only, on a generation with an "
        f"fp8 path in the TPU catalog ({FP8_GENERATIONS}).",
    )
    max_target_length: Annotated[int, Field(ge=1, le=MAX_TARGET_LENGTH)] = Field(
        description="Tokens cached per sequence (MaxText max_target_length, vLLM --max-model-len, Saxml input "
        "length + decode steps; for training, the sequence length). At most 131072, the longest context of any "
        "catalog model (Llama 3.1)."
    )
    max_prefill_length: Annotated[int, Field(ge=1, le=MAX_TARGET_LENGTH)] | None = Field(
        None, description="MaxText max_prefill_predict_length (serving); below maxTargetLength."
    )
    per_device_batch_size: Annotated[float, Field(gt=0, le=1024)] | None = Field(
        None,
        description="Sequences per chip (MaxText per_device_batch_size); the cache holds this x chips. At most "
        "1024 (a chip's HBM holds far fewer sequences of any useful length; a larger value is a typo).",
    )
    batch_size: Annotated[int, Field(ge=1, le=65536)] | None = Field(
        None,
        description="Sequences per slice, where the engine counts per slice (Saxml, vLLM). At most 65536 "
        "(1024 per chip on the largest single-host slice, and far beyond any engine's scheduler).",
    )
    parallelism: dict[str, int] | None = Field(
        None,
        description="Mesh axes pinned by name (MaxText serving: fsdp/autoregressive/tensor; training: "
        "fsdp/tensor; vLLM: pipeline/tensor; Saxml: replica/data/mdl). Unset derives them from the slice; set, they are "
        "verified (product = chips, tensor divides the heads).",
    )
    reserve_fraction: Annotated[float, Field(ge=0, lt=1)] | None = Field(
        None,
        description="HBM share kept free for activations and the runtime. Unset: the engine's default "
        "(vLLM 0.10, because vLLM claims 90% of HBM; MaxText/Saxml 0.05), see components/planner/engines.py.",
    )
    serving: ServingSpec | None = Field(
        None,
        description="Serving scenario (input/output tokens, concurrency, optional TTFT/TPOT targets) the planner "
        "predicts throughput, latency and $ per million output tokens for, and sizes the slice by when "
        "tpu.topology or tpu.generation is unset. Serving kinds only (vllm, jetstream, saxml). Unset: no "
        "prediction, and the slice is the cheapest that fits by $/h.",
    )
    front_door: FrontDoorSpec = Field(
        default_factory=FrontDoorSpec,
        description="How clients reach the servers: the kind's Service (default) or the GKE Inference Gateway "
        "(components/config/front_door.py).",
    )


    @model_validator(mode="after")
    def _workload_rules(self) -> WorkloadBase:
        rules: list[dict[str, Any]] = []
        if self.max_prefill_length is not None and self.max_prefill_length >= self.max_target_length:
            rules.append(
                rule(
                    "maxPrefillLength",
                    self.max_prefill_length,
                    f"is not below maxTargetLength ({self.max_target_length}); the prefill and decode caches "
                    "together span maxTargetLength",
                    f"1..{self.max_target_length - 1}",
                    "lower maxPrefillLength or raise maxTargetLength",
                )
            )
        if self.serving is not None and self.serving.input_tokens + self.serving.output_tokens > self.max_target_length:
            rules.append(
                rule(
                    "serving.outputTokens",
                    self.serving.output_tokens,
                    f"plus inputTokens ({self.serving.input_tokens}) exceeds maxTargetLength ({self.max_target_length}); "
                    "a request's prompt and output share one cached sequence",
                    f"1..{max(self.max_target_length - self.serving.input_tokens, 0)}",
                    "shorten the scenario or raise maxTargetLength",
                )
            )
        if self.model not in MODELS:
            near = closest(self.model, MODELS)
            hint, fix = (f" (did you mean {near!r}?)", f"write {near!r}") if near else ("", "use a catalog model key")
            rules.append(rule("model", self.model, "is not in the model catalog" + hint, ", ".join(MODELS), fix))
        if self.per_device_batch_size is not None and self.batch_size is not None:
            rules.append(
                rule("batchSize", self.batch_size, "cannot be combined with perDeviceBatchSize", "one of the two", "remove one")
            )
        raise_rules(rules)
        return self

    @property
    def section(self) -> Spec:
        """The settings section of this workload's kind (``jetstream``, ``vllm``, …): the one field
        a kind adds to this base."""
        section: Spec = getattr(self, section_field(type(self)))
        return section


def section_field(kind: type[WorkloadBase]) -> str:
    """The one field a kind's spec adds to :class:`WorkloadBase`: its settings section."""
    (name,) = (n for n in kind.model_fields if n not in WorkloadBase.model_fields)
    return name


def serving_scenario(config: Any) -> ServingSpec | None:
    """The stack's serving scenario (``gke-tpu-llm:workload.serving``), None when unset. Takes the
    ``StackConfig`` (typed ``Any`` because the stack config imports this module)."""
    workload: WorkloadBase = config.workload
    return workload.serving


MAXTEXT_KEY = re.compile(r"[a-z_][a-z0-9_]*")
"""A MaxText config key as its base.yml spells it."""


def maxtext_arg_rules(
    prefix: str, args: Mapping[str, object], derived: Collection[str], *, derived_fix: str, parallelism_fix: str
) -> list[dict[str, Any]]:
    """One rule per ``maxtextArgs`` key (at ``prefix``.key) a MaxText kind refuses: not a MaxText key, a key
    the stack derives (``derived``: setting it would configure one fact twice), or an ici_*/dcn_*
    parallelism degree, which the capacity planner derives and verifies."""
    rules: list[dict[str, Any]] = []
    for key in sorted(args):
        if not MAXTEXT_KEY.fullmatch(key):
            rules.append(
                rule(
                    f"{prefix}.{key}",
                    key,
                    "is not a MaxText config key",
                    "lowercase letters, digits and '_'",
                    "use the key as MaxText's base.yml spells it",
                )
            )
        elif key in derived:
            rules.append(
                rule(
                    f"{prefix}.{key}",
                    args[key],
                    "is derived by the stack",
                    "keys other than " + ", ".join(sorted(derived)),
                    derived_fix,
                )
            )
        elif key.startswith(("ici_", "dcn_")):
            rules.append(
                rule(
                    f"{prefix}.{key}",
                    args[key],
                    "is parallelism, which the capacity planner derives and verifies",
                    "no ici_*/dcn_* keys",
                    parallelism_fix,
                )
            )
    return rules


W = TypeVar("W", bound=WorkloadBase)


def workload_as(workload: WorkloadBase, kind: type[W]) -> W:
    """``workload`` as the given kind's spec (typed access for that kind's render and component
    code); a TypeError when the stack runs another kind."""
    if not isinstance(workload, kind):
        raise TypeError(f"the stack's workload kind is {workload.kind}, not {kind.__name__}'s")
    return workload
