"""Settings of the Saxml admin server, JobSet model servers and HTTP server workload (``gke-tpu-llm:workload.<section>``)."""

from __future__ import annotations

from components.specs.base import Spec


class SaxmlSpec(Spec):
    """Saxml admin server, JobSet model servers and HTTP server."""
