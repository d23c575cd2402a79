"""``gke-tpu-llm:observability``: the stack's Cloud Monitoring dashboard and alert policies
(``components.platform.addons.observability``; queries and thresholds in ``components.render.dashboards``).

What is configured here is only what an operator chooses: whether the stack gets them and who is
notified. Thresholds are not keys: they come from the stack's own spec (``workload.serving`` targets,
``tpu.capacity[].maxRunHours``) or are stated once, with their reason, beside the query that uses them.
"""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from .base import Spec
from .errors import raise_rules, rule

CHANNEL_PATTERN = r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/notificationChannels/[0-9]+$"
"""A Cloud Monitoring notification channel's resource name (``gcloud beta monitoring channels list``:
``projects/<project>/notificationChannels/<id>``), the form ``AlertPolicy.notification_channels`` takes."""


class ObservabilitySpec(Spec):
    """``gke-tpu-llm:observability``."""

    enabled: bool = Field(
        True,
        description="Create the stack's Cloud Monitoring dashboard (engine, TPU, capacity and live $ per million "
        "output tokens) and its alert policies (latency against workload.serving, HBM, idle billed capacity, "
        "flex-start expiry, no ready endpoint). Defaults to on: an SRE taking over the stack needs them on day one; "
        "off removes them (a prod serving stack keeps at least the availability alert: the policy pack requires it).",
    )
    notification_channels: list[str] = Field(
        [],  # pydantic copies the default per instance
        description="Cloud Monitoring notification channels every alert policy notifies, by resource name "
        "(projects/<project>/notificationChannels/<id>; create them once per project, e.g. `gcloud beta monitoring "
        "channels create`). Empty: the policies open incidents in the console only.",
    )

    @model_validator(mode="after")
    def _channels(self) -> ObservabilitySpec:
        bad = [c for c in self.notification_channels if not re.match(CHANNEL_PATTERN, c)]
        raise_rules(
            [
                rule(
                    "notificationChannels",
                    c,
                    "is not a notification channel's resource name",
                    "projects/<project>/notificationChannels/<numeric id>",
                    "copy the name from `gcloud beta monitoring channels list --format='value(name)'`",
                )
                for c in bad
            ]
        )
        return self
