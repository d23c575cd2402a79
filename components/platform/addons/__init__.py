"""Cluster-level features, one module each, that a stack or a workload kind opts into as a function
of its settings: Helm-installed controllers (``controllers``), capacity scheduling
(``capacity_scheduling``: ComputeClass, Kueue), the Custom Metrics Stackdriver Adapter
(``metrics_adapter``) and the VPC side of a gateway front door (``inference_gateway``: the proxy-only
subnet).

``controllers`` is the building block the others and the workload kinds register controllers with
(a kind's ``addons`` function names the ones its settings need: ``lws``, ``jobset``). Every other
module is an :class:`Addon` the program wires generically (``components.program.build.ADDONS``, in
order, after the platform and before the workload): it says whether a stack needs it and installs
it, and declares the checkov checks its objects fail by design. Adding one = a module with this
interface + one entry in that tuple (+ its name in the kind's ``addons`` function if a kind opts in).

Nothing is imported here at run time, so ``components.platform.addons.controllers`` stays a plain
library import (no stack config, no workload kind).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pulumi

    from ...config.stack import StackConfig
    from ..gke import GkeCluster


class Addon(Protocol):
    """The interface of an add-on module (a module satisfies it structurally)."""

    # Read-only (properties): a module's constants satisfy them with narrower types.
    @property
    def NAME(self) -> str:  # noqa: N802 (a module constant)
        """The add-on's name: what a kind's ``WorkloadKindInfo.addons`` returns to opt into it, and its
        key in the mapping the program hands the workload (``deploy(..., addons=)``)."""
        ...

    @property
    def SCAN_WAIVERS(self) -> Mapping[str, Mapping[str, str]]:  # noqa: N802 (a module constant)
        """checkov check -> {``Kind/name``: why the add-on's object fails it by design} (``components.tools.scan``)."""
        ...

    def needed(self, config: StackConfig) -> bool:
        """Whether the stack's settings need the add-on (False: nothing is registered)."""
        ...

    def install(
        self,
        config: StackConfig,
        *,
        cluster: GkeCluster,
        namespace_ready: Sequence[pulumi.Resource] = (),
        pools: Sequence[pulumi.Resource] = (),
    ) -> pulumi.ComponentResource:
        """Register the add-on for ``config`` on ``cluster`` (after what creates the workload's
        namespace and the TPU pools) and return its component, which the workload may depend on."""
        ...
