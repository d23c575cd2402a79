"""The Custom Metrics Stackdriver Adapter as published upstream. Pure data.

What is fixed by its upstream production manifest
(GoogleCloudPlatform/k8s-stackdriver ``custom-metrics-stackdriver-adapter/deploy/production/
adapter_new_resource_model.yaml``): the namespace and KSA, and so the adapter's Google principal,
which is the same in every cluster of a project. Read by the add-on that installs it
(``components.platform.addons.metrics_adapter``, objects in ``components.render.custom_metrics``) and
by the settings of the kind that opts into it (vLLM's version default and its stack claim), so it
lives below both.
"""

from __future__ import annotations

from .images import image

ADAPTER_IMAGE = image("custom-metrics-stackdriver-adapter")
"""The default adapter image (tag and digest: components/catalog/images.json)."""
ADAPTER_NAMESPACE = "custom-metrics"
ADAPTER_NAME = "custom-metrics-stackdriver-adapter"
"""The adapter's namespace and KSA, fixed by its upstream manifest: its Google principal is the same in
every cluster of a project (a claim of the stack that installs it)."""
UPSTREAM_MANIFEST = "adapter_new_resource_model.yaml"
"""The upstream manifest the objects reproduce (k8s-stackdriver ``deploy/production``)."""
