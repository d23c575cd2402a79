"""gke-tpu-llm: large language models on Cloud TPU slices on GKE, as Pulumi components.

Flow (one way): ``catalog`` (facts) -> ``config`` (validated specs) -> ``planner`` (sizes and
shardings) -> ``render`` (Kubernetes objects as dicts) -> components (thin ComponentResources)
-> the root ``__main__.py``.

The platform components are a library for Pulumi programs of one's own, each with a typed Args
class whose fields the configuration reference describes::

    from components import GkeCluster, GkeClusterArgs, TpuSlicePool, TpuSlicePoolArgs

    cluster = GkeCluster("demo", GkeClusterArgs(project="my-project", region="us-east5"))
    pool = TpuSlicePool("slice", TpuSlicePoolArgs(cluster=cluster, generation="v6e", topology="4x4", zone="us-east5-b"))

They are exported lazily (PEP 562): importing this package, or its config, planner or policy
modules, does not import the Pulumi SDKs; the first use of a component's name does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Explicit re-exports ("X as X"): the type checkers' view of the lazy exports below.
    from components.platform.args import ArgsError as ArgsError
    from components.platform.gke import GkeCluster as GkeCluster
    from components.platform.gke import GkeClusterArgs as GkeClusterArgs
    from components.platform.identity import NodeServiceAccount as NodeServiceAccount
    from components.platform.identity import NodeServiceAccountArgs as NodeServiceAccountArgs
    from components.platform.identity import WorkloadIdentity as WorkloadIdentity
    from components.platform.identity import WorkloadIdentityArgs as WorkloadIdentityArgs
    from components.platform.storage import StackBucket as StackBucket
    from components.platform.storage import StackBucketArgs as StackBucketArgs
    from components.platform.tpu_pool import Autoscaling as Autoscaling
    from components.platform.tpu_pool import TpuSlicePool as TpuSlicePool
    from components.platform.tpu_pool import TpuSlicePoolArgs as TpuSlicePoolArgs

_EXPORTS: dict[str, str] = {
    "ArgsError": "components.platform.args",
    "Autoscaling": "components.platform.tpu_pool",
    "GkeCluster": "components.platform.gke",
    "GkeClusterArgs": "components.platform.gke",
    "NodeServiceAccount": "components.platform.identity",
    "NodeServiceAccountArgs": "components.platform.identity",
    "StackBucket": "components.platform.storage",
    "StackBucketArgs": "components.platform.storage",
    "TpuSlicePool": "components.platform.tpu_pool",
    "TpuSlicePoolArgs": "components.platform.tpu_pool",
    "WorkloadIdentity": "components.platform.identity",
    "WorkloadIdentityArgs": "components.platform.identity",
}
"""Public name -> the module that defines it."""

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # Not an export: the import system then looks for a submodule (``from components import report``).
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
