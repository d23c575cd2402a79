"""Workload kind ``saxml``: Saxml admin server, JobSet model servers and HTTP server.

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from the upstream sample).
"""

from ..kind import WorkloadKindInfo, always, image_user_reason, tpu_host_reason
from .spec import SaxmlWorkload, serving_server

ADMIN = "Deployment/sax-admin-server"
HTTP = "Deployment/sax-http"
MODEL_SERVER = "Pod/sax-model-server-set-replicatedjobs-*-template-spec-template"  # lifted JobSet pod templates
_READ_WRITE_ROOT = "upstream Saxml image run as published; it is neither documented nor tested on a read-only root"

_IMAGE_USER = {
    ADMIN: image_user_reason("sax-admin-server.yaml"),
    HTTP: image_user_reason("sax-http.yaml"),
    MODEL_SERVER: image_user_reason("sax-model-server-set.yaml"),
}

KIND = WorkloadKindInfo(
    workload=SaxmlWorkload,
    engine="saxml",
    mode="serve",
    serving_server=serving_server,
    # No published Saxml serving result to calibrate on: vLLM's factors under the engine's own row.
    perf_key="saxml",
    deploy=f"{__name__}.component:deploy",
    summary="Saxml admin server, JobSet model servers and HTTP server",
    addons=always("jobset"),
    scan_waivers={
        "CKV_K8S_10": {MODEL_SERVER: tpu_host_reason("each Saxml model server", "CPU")},  # CPU requests
        "CKV_K8S_12": {MODEL_SERVER: tpu_host_reason("each Saxml model server", "memory")},  # memory requests
        "CKV_K8S_13": {  # memory limits
            MODEL_SERVER: "a model server owns its TPU VM's RAM; an OOM kill fails the slice's Job and reloads the model",
            ADMIN: "memory use is not documented upstream; a limit guessed too low would OOM-kill the cell's only admin "
            "server (requests reserve 512Mi)",
            HTTP: "memory use is not documented upstream; a limit guessed too low would OOM-kill the only HTTP server "
            "(requests reserve 512Mi)",
        },
        "CKV_K8S_22": {  # read-only root filesystem
            MODEL_SERVER: "the model server's TPU runtime writes its logs under /tmp (/tmp/tpu_logs)",
            ADMIN: _READ_WRITE_ROOT,
            HTTP: _READ_WRITE_ROOT,
        },
        "CKV_K8S_23": _IMAGE_USER,  # runAsNonRoot
        "CKV_K8S_40": _IMAGE_USER,  # UID >= 10000
        "CKV_K8S_8": {  # liveness probe on every container
            MODEL_SERVER: "the Saxml model server speaks gRPC only (no health endpoint); one failed host fails the "
            "slice's Job, which the JobSet recreates",
            ADMIN: "the Saxml admin server speaks gRPC only (no health endpoint); readiness checks its TCP port",
            HTTP: "sax-http has no health endpoint that reflects its Sax client; readiness checks that it serves HTTP",
        },
        "CKV_K8S_9": {  # readiness probe on every container
            MODEL_SERVER: "model servers back no Service (the admin server assigns them models over gRPC) and have no "
            "health endpoint",
        },
    },
)
