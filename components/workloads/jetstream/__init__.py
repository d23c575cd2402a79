"""Workload kind ``jetstream-pathways``: JetStream + MaxText + Pathways serving on LeaderWorkerSet.

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from the upstream sample).
"""

from ..kind import WorkloadKindInfo, always, image_user_reason, tpu_host_reason
from .spec import JetstreamWorkload, serving_server

LEADER = "Pod/jetstream-pathways-leaderworkertemplate-leadertemplate"  # lifted LWS pod templates
WORKER = "Pod/jetstream-pathways-leaderworkertemplate-workertemplate"
CONVERTER = "Job/checkpoint-converter"


def _no_request(resource: str) -> dict[str, str]:
    return {
        WORKER: tpu_host_reason("each Pathways worker", resource),
        LEADER: "the LWS leader (Pathways proxy and resource manager, JetStream) holds no TPU and shares a TPU VM with a "
        "worker; the group has its node pool to itself (exclusive topology) and upstream sizes none of its containers, "
        f"so no {resource} request is invented",
        CONVERTER: "alone on its own tainted node (ckpt-convert, scaled 0-1 for this Job), sized by the machine type "
        f"(about 2 TB of RAM for 405B), not by a {resource} request",
    }


_IMAGE_USER = {
    LEADER: image_user_reason("jetstream-pathways-*.yaml"),
    WORKER: image_user_reason("jetstream-pathways-*.yaml"),
    CONVERTER: "runs as root, the image's user: its entrypoint downloads into /root/.llama",
}

KIND = WorkloadKindInfo(
    workload=JetstreamWorkload,
    engine="maxtext",
    mode="serve",
    serving_server=serving_server,
    # No published JetStream serving result to calibrate on: vLLM's factors under the engine's own row.
    perf_key="maxtext",
    deploy=f"{__name__}.component:deploy",
    summary="JetStream + MaxText + Pathways serving on LeaderWorkerSet (multi-host slices; archived upstream)",
    addons=always("lws"),
    secrets={
        "metaCheckpointUrl": "Meta's signed Llama download URL (from the license e-mail), for the checkpoint "
        "conversion Job (required while workload.jetstream.conversion.enabled is true)",
    },
    scan_waivers={
        "CKV_K8S_35": {  # Secret values in environment variables (by secretKeyRef, never in the spec or argv)
            CONVERTER: "META_URL: the converter image's entrypoint reads the Meta URL only from --meta_url or $META_URL "
            "(and pipes it to `llama download` on stdin); the variable keeps it out of argv",
        },
        "CKV_K8S_10": _no_request("CPU"),  # CPU requests
        "CKV_K8S_12": _no_request("memory"),  # memory requests
        "CKV_K8S_13": {  # memory limits
            LEADER: "an OOM kill of the leader recreates the whole group (RecreateGroupOnPodRestart) and restarts a "
            "10-20 minute checkpoint restore; its peak use is not documented upstream",
            WORKER: "a worker owns its TPU VM's RAM; an OOM kill recreates the group and restarts the checkpoint restore",
            CONVERTER: "the conversion holds the whole checkpoint in RAM (about 2 TB for 405B) on a node of its own; an "
            "OOM kill after hours of work is worse than using the node's memory",
        },
        "CKV_K8S_22": {  # read-only root filesystem
            LEADER: "the Pathways proxy, resource manager and JetStream write runtime logs and compilation artefacts "
            "under /tmp",
            WORKER: "the Pathways worker's TPU runtime writes its logs under /tmp (/tmp/tpu_logs)",
            CONVERTER: "downloads the Meta checkpoint to /root/.llama/checkpoints inside the container before converting",
        },
        "CKV_K8S_23": _IMAGE_USER,  # runAsNonRoot
        "CKV_K8S_40": _IMAGE_USER,  # UID >= 10000
        "CKV_K8S_8": {  # liveness probe on every container
            LEADER: "jax-tpu has the liveness probe (jetstream-http's /healthcheck covers the serving path); the proxy, "
            "resource manager and HTTP front end have no health endpoint, and any container's failure recreates the "
            "group",
            WORKER: "Pathways workers have no health endpoint; a failed worker fails the leader's /healthcheck and the "
            "group is recreated (RecreateGroupOnPodRestart)",
        },
        "CKV_K8S_9": {  # readiness probe on every container
            LEADER: "the pod's readiness is jax-tpu's probe (jetstream-http's /healthcheck, the whole serving path); "
            "the proxy, resource manager and HTTP front end have no endpoint of their own",
            WORKER: "Pathways workers back no Service; the leader's readiness covers them",
        },
    },
)
