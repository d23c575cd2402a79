"""gke-tpu-llm: large language models on Cloud TPU slices on GKE, as Pulumi components.

Flow (one way): ``catalog`` (facts) -> ``config`` (validated specs) -> ``planner`` (sizes and
shardings) -> ``render`` (Kubernetes objects as dicts) -> components (thin ComponentResources)
-> the root ``__main__.py``.
"""
