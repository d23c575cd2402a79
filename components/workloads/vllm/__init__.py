"""Workload kind ``vllm``: vLLM serving on a TPU slice (single-host: Deployment, HPA on vLLM metrics;
multi-host: LeaderWorkerSet whose leader runs the Ray head and ``vllm serve``).

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from the upstream sample).
"""

from ..kind import WorkloadKindInfo, image_user_reason, tpu_host_reason
from .spec import VllmWorkload, addons, serving_server

SERVER = "Deployment/vllm"
LEADER = "Pod/vllm-group-leaderworkertemplate-leadertemplate"  # multi-host (LWS + Ray): lifted pod templates
WORKER = "Pod/vllm-group-leaderworkertemplate-workertemplate"
ROLES = ("Deployment/vllm-prefill", "Deployment/vllm-decode")
"""A prefill/decode split's two servers (workload.vllm.disaggregation): each is a single-host server."""


def _as_server(reasons: dict[str, str]) -> dict[str, str]:
    """``reasons`` with the P/D roles' servers given the single-host server's reason (the same container)."""
    return {**reasons, **{role: reasons[SERVER] for role in ROLES}}


_RAY_WORKER = (
    "a vLLM Ray worker (`ray start --block`) serves no endpoint and backs no Service; a failed worker breaks the "
    "leader's /health (the pipeline loses a stage) and the group is recreated (RecreateGroupOnPodRestart)"
)
_GROUP_RAM = (
    "a pod owns its TPU VM's RAM (the GCS FUSE file cache lives there too); an OOM kill recreates the whole group and "
    "restarts the load of every stage"
)


def _no_request(resource: str) -> dict[str, str]:
    return _as_server(
        {
            SERVER: tpu_host_reason("each vLLM replica", resource),
            LEADER: tpu_host_reason("the vLLM leader (Ray head and server, one pipeline stage)", resource),
            WORKER: tpu_host_reason("each vLLM Ray worker (one pipeline stage)", resource),
        }
    )


_IMAGE_USER = _as_server(
    {
        SERVER: image_user_reason("vllm-llama3-70b.yaml"),
        LEADER: image_user_reason("tpu-inference multi-host deploy-baseline.yaml"),
        WORKER: image_user_reason("tpu-inference multi-host deploy-baseline.yaml"),
    }
)

KIND = WorkloadKindInfo(
    workload=VllmWorkload,
    engine="vllm",
    mode="serve",
    serving_server=serving_server,
    perf_key="vllm",
    deploy=f"{__name__}.component:deploy",
    summary="vLLM serving: single-host Deployment with an HPA on vLLM metrics, or multi-host LeaderWorkerSet + Ray",
    addons=addons,  # GCS FUSE; the metrics adapter with autoscaling; LWS on a multi-host slice
    benchmark=f"{__name__}.clients:benchmark_client",  # vllm bench serve
    secrets={
        "hfToken": "Hugging Face access token of an account that accepted the model's license",
        "vllmApiKey": "API key clients of the vLLM endpoint send as `Authorization: Bearer <key>` (required while "
        "workload.vllm.service.auth is api-key)",
        # The public gateway's Identity-Aware Proxy (components/config/front_door.py IAP_SECRETS).
        "iapClientId": "OAuth 2.0 client ID of the public gateway's Identity-Aware Proxy (required while "
        "workload.frontDoor.exposure is public)",
        "iapClientSecret": "OAuth 2.0 client secret of that client, handed to IAP through a Kubernetes Secret (required "
        "while workload.frontDoor.exposure is public)",
    },
    scan_waivers={
        "CKV_K8S_35": _as_server(
            {  # Secret values in environment variables (by secretKeyRef, never in the spec or argv)
                SERVER: "HF_TOKEN (and VLLM_API_KEY when service.auth is api-key): huggingface_hub reads the token from "
                "HF_TOKEN and vLLM its API key from VLLM_API_KEY, each from the Secret by reference",
                LEADER: "HF_TOKEN (and VLLM_API_KEY when service.auth is api-key), from the Secrets by reference, as for the "
                "single-host server",
                WORKER: "HF_TOKEN, from the Secret by reference: each pipeline stage downloads its own shards",
            }
        ),
        "CKV_K8S_10": _no_request("CPU"),  # CPU requests
        "CKV_K8S_12": _no_request("memory"),  # memory requests
        "CKV_K8S_13": _as_server(
            {  # memory limits
                SERVER: "a replica owns its TPU VM's RAM (the GCS FUSE file cache lives there too); an OOM kill during a 70B "
                "load costs the whole load again",
                LEADER: _GROUP_RAM,
                WORKER: _GROUP_RAM,
            }
        ),
        "CKV_K8S_22": _as_server(
            {  # read-only root filesystem
                SERVER: "vLLM and huggingface_hub write caches under the image's home directory and /tmp",
                LEADER: "vLLM and huggingface_hub write caches under the image's home directory, Ray its session under /tmp/ray",
                WORKER: "Ray writes its session directory (logs, sockets, spilled objects) under /tmp/ray",
            }
        ),
        "CKV_K8S_23": _IMAGE_USER,  # runAsNonRoot
        "CKV_K8S_40": _IMAGE_USER,  # UID >= 10000
        "CKV_K8S_38": {  # service account token mounted: the gateway's pods that watch the Kubernetes API
            "Deployment/vllm-epp": "the endpoint picker calls the Kubernetes API: it watches the pods and the InferencePool "
            "it routes to (its Role: get, watch, list on pods, inferencepools, inferenceobjectives), as llm-d-router's "
            "chart runs it",
            # Deployment/body-based-router fails it too (it watches ConfigMaps); listed once a committed stack
            # enables bodyBasedRouting (tests/test_scan.py refuses a waiver no stack's objects need).
        },
        "CKV_K8S_8": {WORKER: _RAY_WORKER},  # liveness probe on every container
        "CKV_K8S_9": {WORKER: _RAY_WORKER},  # readiness probe on every container
    },
)
