"""Workload kind ``maxtext-ray``: MaxText training with Ray Train on KubeRay.

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from the upstream sample).
"""

from ..kind import WorkloadKindInfo, always
from .spec import MaxTextRayWorkload

# The RayCluster's groups, or those of a RayJob's own cluster (rayClusterSpec, queued provisioning):
# lifted pod templates.
HEAD = "Pod/*headgroupspec-template"
WORKER = "Pod/*workergroupspecs-*-template"
SUBMITTER = "Pod/*-submitterpodtemplate"
_RAY_SESSION = "Ray writes its session directory (logs, sockets, spilled objects) under /tmp/ray"
_RAY_PROBES = (
    "KubeRay adds liveness and readiness probes to a Ray container whose template has none "
    "(ray-operator common/pod.go initLivenessAndReadinessProbe)"
)
_SUBMITTER = "batch pod: `ray job submit`, then it follows the job's logs; it serves nothing"
_RAY_USER = (
    "runs as the image's non-root user ray (UID 1000, the USER of components/workloads/maxtext_ray/image/Dockerfile, as "
    "rayproject/ray); the pod does not restate it (runAsNonRoot cannot verify a named USER) and 1000 is below 10000"
)
_PROBES = {HEAD: _RAY_PROBES, WORKER: _RAY_PROBES, SUBMITTER: _SUBMITTER}

KIND = WorkloadKindInfo(
    workload=MaxTextRayWorkload,
    engine="maxtext",
    mode="train",
    perf_key=None,  # training: no serving estimate
    deploy=f"{__name__}.component:deploy",
    summary="MaxText training with Ray Train on KubeRay",
    addons=always("gcsFuseCsiDriver", "rayOperator"),
    scan_waivers={
        "CKV_K8S_22": {  # read-only root filesystem
            HEAD: _RAY_SESSION,
            WORKER: _RAY_SESSION,
            SUBMITTER: "the Ray CLI writes its session and log files under /tmp/ray",
        },
        "CKV_K8S_23": {HEAD: _RAY_USER, WORKER: _RAY_USER, SUBMITTER: _RAY_USER},  # runAsNonRoot
        "CKV_K8S_40": {HEAD: _RAY_USER, WORKER: _RAY_USER, SUBMITTER: _RAY_USER},  # UID >= 10000
        "CKV_K8S_8": _PROBES,  # liveness probe on every container
        "CKV_K8S_9": _PROBES,  # readiness probe on every container
    },
)
