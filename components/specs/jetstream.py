"""Settings of the JetStream + MaxText + Pathways serving on LeaderWorkerSet workload (``gke-tpu-llm:workload.<section>``)."""

from __future__ import annotations

from components.specs.base import Spec


class JetstreamSpec(Spec):
    """JetStream + MaxText + Pathways serving on LeaderWorkerSet."""
