"""Workload kind ``vllm``: vLLM serving on a TPU slice (single-host: Deployment, HPA on vLLM metrics;
multi-host: LeaderWorkerSet whose leader runs the Ray head and ``vllm serve``).

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from the upstream sample).
"""

from components.workloads.kind import WorkloadKindInfo
from components.workloads.vllm.spec import VllmWorkload, serving_server

KIND = WorkloadKindInfo(
    workload=VllmWorkload,
    engine="vllm",
    mode="serve",
    serving_server=serving_server,
    deploy="components.workloads.vllm.component:deploy",
    summary="vLLM serving: single-host Deployment with an HPA on vLLM metrics, or multi-host LeaderWorkerSet + Ray",
    addons=frozenset({"gcsFuseCsiDriver"}),
    controllers=("lws",),  # installed only for a multi-host slice (VllmServer)
    benchmark="components.workloads.vllm.render:benchmark_client",  # vllm bench serve
    secrets={
        "hfToken": "Hugging Face access token of an account that accepted the model's license",
        "vllmApiKey": "API key clients of the vLLM endpoint send as `Authorization: Bearer <key>` (required while "
        "workload.vllm.service.auth is api-key)",
    },
)
