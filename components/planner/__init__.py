"""Capacity planner: which TPU slice a model needs, and the parallelism flags to serve or train it.

The planner rebuilds a model's parameter tree abstractly (``jax.eval_shape``: shapes and dtypes,
no memory), lays every array out on a ``jax.sharding.AbstractMesh`` whose axes are the engine's
parallelism, and sums the shard shapes per chip. A dimension that a mesh axis does not divide is
an error (no ceil division, no padding). jax is imported only when a plan is first made.

Modules, each with one reason to change (they import one another, never this package):

* ``errors``: ``PlanError`` and the closed set of fields it blames (``PLAN_FIELDS``);
* ``inputs``: the workload asked for (``ServingWorkload``, ``TrainingWorkload``);
* ``results``: what is answered (``Plan``, ``MemoryPlan``, ``ShardingPlan``, ``ArrayPlan``);
* ``params``: model architectures as abstract arrays with logical axes (a new architecture);
* ``engines``: the engine-profile table (a new engine is one entry): mesh axes, sharding rules,
  flags, default reserve, default meshes, single-host rule;
* ``mesh``: meshes, pinned axes resolved against a slice, default mesh strategies;
* ``layout``: arrays on a mesh, shard shapes and bytes per chip;
* ``fit``: one workload on one slice, and the memory model (``plan``);
* ``select``: choosing or verifying a slice, ranked by the catalog's price (``rank_slices`` keeps
  every fitting alternative and the reasons the others were rejected), or by $ per million output
  tokens for a serving scenario (``rank_by_token_cost``);
* ``perf``: the serving performance model (throughput, TTFT, TPOT, $ per token) of a plan.
"""

from __future__ import annotations

from .engines import DEFAULT_RESERVE_FRACTION, Engine, EngineProfile, Mode, mesh_axis_names, single_host_only
from .fit import derive_parallelism, plan, training_activation_bytes
from .inputs import (
    KvDtype,
    KvQuantAxis,
    ParamDtype,
    ServingWorkload,
    TrainingWorkload,
    WeightDtype,
    Workload,
)
from .mesh import build_mesh
from .params import SCALE_SUFFIX, param_count, param_shapes
from .perf import Scenario, ServingEstimate, TierPrice, estimate
from .plan_errors import PLAN_FIELDS, PlanError, PlanField
from .results import GB, ArrayPlan, MemoryPlan, Plan, ShardingPlan, SpecEntry
from .select import Ranking, rank_by_token_cost, rank_slices, select_slice, smallest_fitting_slice, verify_slice

__all__ = [
    "DEFAULT_RESERVE_FRACTION",
    "GB",
    "PLAN_FIELDS",
    "SCALE_SUFFIX",
    "ArrayPlan",
    "Engine",
    "EngineProfile",
    "KvDtype",
    "KvQuantAxis",
    "MemoryPlan",
    "Mode",
    "ParamDtype",
    "Plan",
    "PlanError",
    "PlanField",
    "Ranking",
    "Scenario",
    "ServingEstimate",
    "ServingWorkload",
    "ShardingPlan",
    "SpecEntry",
    "TierPrice",
    "TrainingWorkload",
    "WeightDtype",
    "Workload",
    "build_mesh",
    "derive_parallelism",
    "estimate",
    "mesh_axis_names",
    "param_count",
    "param_shapes",
    "plan",
    "rank_by_token_cost",
    "rank_slices",
    "select_slice",
    "single_host_only",
    "smallest_fitting_slice",
    "training_activation_bytes",
    "verify_slice",
]
