"""gke-tpu-llm: large language models on Cloud TPU slices on GKE, as Pulumi components.

Flow (one way): ``catalog`` (facts) -> ``config`` (validated specs) -> ``planner`` (sizes and
shardings) -> ``render`` (Kubernetes objects as dicts) -> components (thin ComponentResources)
-> the root ``__main__.py``.

The platform components are a library for Pulumi programs of one's own, each with a typed Args
class whose fields the configuration reference describes. Installed (``pip install .``: the
distribution ``gke-tpu-llm``) this package is ``gke_tpu_llm``; in this repository it is
``components``. Its modules import each other relatively, so both names work::

    from gke_tpu_llm import GkeCluster, GkeClusterArgs, TpuSlicePool, TpuSlicePoolArgs

    cluster = GkeCluster("demo", GkeClusterArgs(project="my-project", region="us-east5"))
    pool = TpuSlicePool("slice", TpuSlicePoolArgs(cluster=cluster, generation="v6e", topology="4x4", zone="us-east5-b"))

They are exported lazily (PEP 562): importing this package, or its config, planner or policy
modules, does not import the Pulumi SDKs; the first use of a component's name does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.3.0"
"""The distribution's version (pyproject.toml reads it here); components/CHANGELOG.md says what each changed."""

if TYPE_CHECKING:
    # Explicit re-exports ("X as X"): the type checkers' view of the lazy exports below.
    from .platform.args import ArgsError as ArgsError
    from .platform.gke import GkeCluster as GkeCluster
    from .platform.gke import GkeClusterArgs as GkeClusterArgs
    from .platform.identity import NodeServiceAccount as NodeServiceAccount
    from .platform.identity import NodeServiceAccountArgs as NodeServiceAccountArgs
    from .platform.identity import WorkloadIdentity as WorkloadIdentity
    from .platform.identity import WorkloadIdentityArgs as WorkloadIdentityArgs
    from .platform.storage import StackBucket as StackBucket
    from .platform.storage import StackBucketArgs as StackBucketArgs
    from .platform.tpu_pool import Autoscaling as Autoscaling
    from .platform.tpu_pool import TpuSlicePool as TpuSlicePool
    from .platform.tpu_pool import TpuSlicePoolArgs as TpuSlicePoolArgs

_EXPORTS: dict[str, str] = {
    "ArgsError": ".platform.args",
    "Autoscaling": ".platform.tpu_pool",
    "GkeCluster": ".platform.gke",
    "GkeClusterArgs": ".platform.gke",
    "NodeServiceAccount": ".platform.identity",
    "NodeServiceAccountArgs": ".platform.identity",
    "StackBucket": ".platform.storage",
    "StackBucketArgs": ".platform.storage",
    "TpuSlicePool": ".platform.tpu_pool",
    "TpuSlicePoolArgs": ".platform.tpu_pool",
    "WorkloadIdentity": ".platform.identity",
    "WorkloadIdentityArgs": ".platform.identity",
}
"""Public name -> the module that defines it (relative to this package, whatever its name)."""

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # Not an export: the import system then looks for a submodule (``from components import tools``).
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
