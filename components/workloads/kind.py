"""What a workload kind declares, once, in its package's ``__init__``: the facts every other layer
reads (the config union, the planner's engine and performance factors, the cluster add-ons its
settings opt into, its security-scan waivers, the secrets, the deploy function).
``components.workloads.registry`` lists the kinds; ``tests/test_kind_facts.py`` holds every kind to
declaring each fact."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from .. import planner
from ..catalog.calibration import FACTORS
from ..config.errors import NAMESPACE, Violation, rule
from ..config.workload import WorkloadBase, section_field

if TYPE_CHECKING:  # the stack config imports this module
    from ..catalog.tpu import TpuSlice
    from ..config.stack import StackConfig

ScanWaivers = Mapping[str, Mapping[str, str]]
"""checkov check id -> {``Kind/name`` of a rendered object (globs allowed): why it fails that check by
design} (``components.tools.scan``, which merges every kind's and add-on's)."""


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
    config and planner never load Pulumi). The kind's package writes it from its ``__name__``
    (``f"{__name__}.component:deploy"``), so it names the module under either import name of the
    package (``components`` here, ``gke_tpu_llm`` installed)."""
    summary: str
    """One line for the README and ``--help``."""
    addons: Callable[[StackConfig], frozenset[str]]
    """The cluster-level features a stack of this kind needs with its settings (the stack's
    ``StackConfig.addons``), each by its name in one of three tables: GKE add-ons the cluster enables
    (``components.platform.gke.ADDONS``), pinned controllers installed with vendored CRDs
    (``components.crds.releases.CONTROLLERS``, e.g. ``lws``; the kind's component registers them) and
    the add-on modules the program wires (``components.platform.addons``, e.g. ``metricsAdapter``).
    Called on resolved stacks and while a stack loads (its slice may not be chosen yet: a
    slice-dependent add-on is absent until it is)."""
    scan_waivers: ScanWaivers
    """The checkov checks this kind's rendered objects fail by design, per object, each with its reason
    (``components.tools.scan``). A listed object that no longer fails its check fails the scan test."""
    perf_key: str | None
    """Row of the serving model's efficiency factors (``components.catalog.calibration.FACTORS``) this
    kind's engine is estimated with; None for a training kind (nothing to estimate)."""
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


def perf_key_violation(info: WorkloadKindInfo) -> Violation | None:
    """Why the kind's ``perf_key`` cannot be estimated with (a serving kind without one, or one the
    calibration table has no row for), naming the kind and the key; None when it can. ``estimate``
    and ``plan`` report it as a configuration error (exit 2) instead of failing on the lookup."""
    key = info.perf_key
    where = info.workload.__module__.rpartition(".")[0].replace(".", "/") + "/__init__.py"  # the kind's package
    if info.mode == "train" or key in FACTORS:
        return None
    return Violation(
        f"{NAMESPACE}:workload.kind",
        info.kind,
        f"cannot be estimated: its perf_key {key!r} ({where}) is not a row of the efficiency-factor table "
        "(components/catalog/calibration.py FACTORS)",
        ", ".join(sorted(FACTORS)),
        f"set perf_key in {where} to one of these rows, or add the engine's factors to FACTORS",
    )


def always(*names: str) -> Callable[[StackConfig], frozenset[str]]:
    """``WorkloadKindInfo.addons`` of a kind that needs the same add-ons whatever its settings."""
    needed = frozenset(names)
    return lambda config: needed


# --------------------------------------------------------------------------- reasons several kinds' waivers share


def tpu_host_reason(what: str, resource: str) -> str:
    """Why a pod that takes a whole TPU host requests no CPU or memory (checkov CKV_K8S_10/12)."""
    return (
        f"{what} takes every TPU chip of its host (google.com/tpu = chips per VM), so the scheduler places one per TPU "
        f"VM and the VM's {resource} is the pod's; a {resource} request would change no placement"
    )


def image_user_reason(upstream: str) -> str:
    """Why a pod runs as its image's user (checkov CKV_K8S_23 runAsNonRoot and CKV_K8S_40 high UID)."""
    return f"runs as its image's user, which the upstream manifest ({upstream}) never overrides; not tested under another UID"
