"""``PlanError``: a model/workload/slice combination that cannot work, and which input must change.

``PlanError.field`` is one of :data:`PLAN_FIELDS`, in the planner's own words, so a caller maps it
to its own setting (``components.config.resolve.blamed`` maps it to a stack key) without reading the
message:

* ``slice``: the slice cannot hold or split the model (the default);
* ``parallelism``: the mesh degrees (explicit, or the planner's own meshes when none fits);
* ``batch``: the batch does not split over the mesh's batch axes;
* ``tokens``: the tokens in flight (batch x length: KV cache, activations) outgrow the HBM;
* ``per_device_batch_size``, ``batch_size``, ``max_target_length``, ``max_prefill_length``,
  ``weight_dtype``, ``reserve_fraction``: that workload setting (``reserve_bytes`` reports as
  ``reserve_fraction``);
* ``engine``: no engine profile for that engine and mode.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

PlanField = Literal[
    "slice",
    "parallelism",
    "batch",
    "tokens",
    "per_device_batch_size",
    "batch_size",
    "max_target_length",
    "max_prefill_length",
    "weight_dtype",
    "reserve_fraction",
    "engine",
]
PLAN_FIELDS: frozenset[str] = frozenset(get_args(PlanField))


class PlanError(ValueError):
    """A combination that cannot work; the message names the numbers and a fix, ``field`` the input
    to change (one of :data:`PLAN_FIELDS`)."""

    def __init__(self, message: str, field: PlanField = "slice") -> None:
        if field not in PLAN_FIELDS:
            raise ValueError(f"PlanError field {field!r} is not one of {sorted(PLAN_FIELDS)}")
        super().__init__(message)
        self.field: PlanField = field


def one_of(names: Iterable[str]) -> str:
    """``a, b or c`` for a message."""
    *rest, last = names
    return f"{', '.join(rest)} or {last}" if rest else last
