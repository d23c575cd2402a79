"""Settings of the vLLM serving on a single-host TPU slice workload (``gke-tpu-llm:workload.<section>``)."""

from __future__ import annotations

from components.specs.base import Spec


class VllmSpec(Spec):
    """vLLM serving on a single-host TPU slice."""
