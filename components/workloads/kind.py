"""What a workload kind declares, once, in its package's ``__init__``: the facts every other layer
reads (the config union, the planner's engine, the cluster's add-ons, the controllers and their
CRDs, the secrets, the deploy function). ``components.workloads.registry`` lists the kinds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from components import planner
from components.config.errors import rule
from components.config.workload import WorkloadBase, section_field

if TYPE_CHECKING:  # the stack config imports this module
    from components.catalog.tpu import TpuSlice
    from components.config.stack import StackConfig


@dataclass(frozen=True)
class WorkloadKindInfo:
    workload: type[WorkloadBase]
    """The kind's workload spec: :class:`WorkloadBase` plus ``kind: Literal[...]`` and one settings
    section (``gke-tpu-llm:workload.<section>``)."""
    engine: str
    """Planner engine profile (``components.planner`` engine table): mesh axes, flags, reserve."""
    mode: Literal["serve", "train"]
    deploy: str
    """``module:function`` that creates the kind's components (imported only by the program, so the
    config and planner never load Pulumi)."""
    summary: str
    """One line for the README and ``--help``."""
    addons: frozenset[str] = frozenset()
    """GKE add-ons the cluster enables for this kind (``GkeCluster``)."""
    controllers: tuple[str, ...] = ()
    """In-cluster controllers installed with pinned versions and vendored CRDs (``components.crds``)."""
    secrets: Mapping[str, str] = field(default_factory=dict)
    """Secret config keys the kind may need and what each holds; the section's
    ``required_secrets()`` says which its current settings need."""
    benchmark: str | None = None
    """``module:function`` in the kind's render module returning its ``BenchmarkClient``
    (``components.render.benchmark``): the engine's own benchmark client for
    ``workload.serving.benchmark: true``. None: the engine has no client here, and the key is refused."""
    serving_server: Callable[[StackConfig, TpuSlice], planner.perf.Server] | None = None
    """How the engine runs one replica on a slice (batch limit, step token budget, slices per replica),
    from the settings its renderer reads too: the serving model's input (``components.config.resolve``).
    Every serving kind declares one."""

    @property
    def kind(self) -> str:
        """The ``kind`` value in stack files (the literal on the workload spec)."""
        (value,) = get_args(self.workload.model_fields["kind"].annotation)
        return str(value)

    @property
    def section(self) -> str:
        """Python name of the kind's settings section (its stack-file key is the camelCase form)."""
        return section_field(self.workload)

    @property
    def section_key(self) -> str:
        """Stack-file key of the settings section (``maxtextRay``)."""
        return self.workload.model_fields[self.section].alias or self.section

    @property
    def single_host_only(self) -> bool:
        """The engine runs on single-host slices only (the planner's engine profile decides)."""
        return planner.single_host_only(self.engine)


def benchmark_rules(workload: WorkloadBase, kinds: Mapping[str, WorkloadKindInfo]) -> list[dict[str, Any]]:
    """``workload.serving.benchmark: true`` needs a kind whose engine has a benchmark client
    (``WorkloadKindInfo.benchmark``); ``kinds`` is the registry (passed in: this module is below it)."""
    if workload.serving is None or not workload.serving.benchmark:
        return []
    info = kinds[workload.kind]
    if info.benchmark is not None:
        return []
    supported = sorted(k for k, i in kinds.items() if i.benchmark is not None)
    return [
        rule(
            "workload.serving.benchmark",
            True,
            f"is not supported for kind {workload.kind}: the {info.engine} engine has no benchmark client here",
            f"false, or a kind with one: {', '.join(supported) or 'none'}",
            "remove workload.serving.benchmark (measure the server with your own client)",
        )
    ]
