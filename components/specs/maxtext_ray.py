"""Settings of the MaxText training with Ray Train on KubeRay workload (``gke-tpu-llm:workload.<section>``)."""

from __future__ import annotations

from components.specs.base import Spec


class MaxTextRaySpec(Spec):
    """MaxText training with Ray Train on KubeRay."""
