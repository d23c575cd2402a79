"""Security scan of the rendered manifests with checkov, including the pods checkov cannot see.

checkov's Kubernetes checks read Pods, Deployments, Jobs and the other built-in workload kinds,
but not the pod templates nested in LeaderWorkerSet, JobSet, RayCluster and RayJob objects — which
is where every TPU container of this project runs. ``pod_templates`` lifts each such template out
as a ``Pod`` (named after its owner and path) so that all of checkov's container checks apply to
it too. ``SKIPS`` lists the checks every workload fails on purpose, with a reason true for each of
them; ``SCOPED_SKIPS`` the checks only some fail, each resource (``Kind/name``, globs allowed) with
its own reason. Everything else must pass, and a scoped check failing on a resource it does not list
is a failure (tests/test_scan.py, tests/test_least_privilege.py).
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from components.crds.releases import pod_template_paths as custom_resource_pod_template_paths
from components.render.core import get_path


def pod_templates(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The nested pod templates of a custom resource, each as a standalone ``Pod`` (``[]`` for the
    built-in kinds: checkov reads those itself)."""
    meta = obj.get("metadata") or {}
    pods = []
    for template_path in custom_resource_pod_template_paths(obj):
        template = get_path(obj, template_path)
        path = ".".join(str(p) for p in template_path[1:])
        tmeta = dict(template.get("metadata") or {})
        slug = path.replace(".", "-")
        tmeta["name"] = f"{meta.get('name', 'unnamed')}-{slug}".lower()
        if "namespace" in meta:
            tmeta["namespace"] = meta["namespace"]
        tmeta.setdefault("annotations", {})
        tmeta["annotations"] = {**tmeta["annotations"], "gke-tpu-llm/lifted-from": f"{obj.get('kind')}/{meta.get('name')}:{path}"}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": tmeta, "spec": template.get("spec") or {}})
    return pods


# Checks every workload fails by design, with a reason that holds for each resource (checkov ids).
SKIPS: Mapping[str, str] = {
    "CKV_K8S_11": "CPU limits: a CPU limit throttles a process (CFS quota) even while the node's CPUs are idle, which "
    "only adds latency to servers and hours to loads; CPU is shared through requests instead (set on the CPU-pool "
    "pods), and the TPU pods and the converter run on nodes no other workload shares",
    "CKV_K8S_15": "imagePullPolicy Always: every image is pinned to a released tag or, for the stack's own image, a "
    "content-derived tag in a repository with immutable tags (the policy pack rejects untagged and :latest), so "
    "Always would only re-check the same manifest; IfNotPresent restarts pods without a registry round trip "
    "(minutes for the multi-GB TPU images)",
    "CKV_K8S_37": "drop ALL capabilities: each container runs as its image's user and no image documents the "
    "capabilities it needs, so only NET_RAW is dropped (the GKE Autopilot baseline, components/render/core.py); "
    "no container adds any (CKV_K8S_25 passes everywhere)",
    "CKV_K8S_43": "image digests: images are pinned to released tags (offline, digests cannot be resolved); the policy "
    "pack rejects untagged and :latest images",
}

# Reasons shared by several resources of one check.
_TPU_HOST = (
    "{what} takes every TPU chip of its host (google.com/tpu = chips per VM), so the scheduler places one per TPU VM "
    "and the VM's {resource} is the pod's; a {resource} request would change no placement"
)
_LEADER_ON_SLICE = (
    "the LWS leader (Pathways proxy and resource manager, JetStream) holds no TPU and shares a TPU VM with a worker; "
    "the group has its node pool to itself (exclusive topology) and upstream sizes none of its containers, so no "
    "{resource} request is invented"
)
_CONVERTER_NODE = (
    "alone on its own tainted node (ckpt-convert, scaled 0-1 for this Job), sized by the machine type "
    "(about 2 TB of RAM for 405B), not by a {resource} request"
)
_AS_PUBLISHED = (
    "the Custom Metrics Stackdriver Adapter is reproduced as published upstream "
    "(k8s-stackdriver adapter_new_resource_model.yaml)"
)
_RAY_PROBES = (
    "KubeRay adds liveness and readiness probes to a Ray container whose template has none "
    "(ray-operator common/pod.go initLivenessAndReadinessProbe)"
)
_SUBMITTER = "batch pod: `ray job submit`, then it follows the job's logs; it serves nothing"
_IMAGE_USER = "runs as its image's user, which the upstream manifest ({upstream}) never overrides; not tested under another UID"
_RAY_USER = (
    "runs as the image's non-root user ray (UID 1000, the USER of components/workloads/maxtext_ray/image/Dockerfile, as "
    "rayproject/ray); the pod does not restate it (runAsNonRoot cannot verify a named USER) and 1000 is below 10000"
)

ADAPTER = "Deployment/custom-metrics-stackdriver-adapter"
VLLM = "Deployment/vllm"
CONVERTER = "Job/checkpoint-converter"
SAX_ADMIN = "Deployment/sax-admin-server"
SAX_HTTP = "Deployment/sax-http"
LWS_LEADER = "Pod/jetstream-pathways-leaderworkertemplate-leadertemplate"
LWS_WORKER = "Pod/jetstream-pathways-leaderworkertemplate-workertemplate"
SAX_MODEL_SERVER = "Pod/sax-model-server-set-replicatedjobs-*-template-spec-template"
# The RayCluster's groups, or those of a RayJob's own cluster (rayClusterSpec, queued provisioning).
RAY_HEAD = "Pod/*headgroupspec-template"
RAY_WORKER = "Pod/*workergroupspecs-*-template"
RAY_SUBMITTER = "Pod/*-submitterpodtemplate"
VLLM_LEADER = "Pod/vllm-group-leaderworkertemplate-leadertemplate"  # multi-host vLLM (LWS + Ray)
VLLM_WORKER = "Pod/vllm-group-leaderworkertemplate-workertemplate"
_VLLM_RAY_WORKER = (
    "a vLLM Ray worker (`ray start --block`) serves no endpoint and backs no Service; a failed worker breaks the "
    "leader's /health (the pipeline loses a stage) and the group is recreated (RecreateGroupOnPodRestart)"
)

def _no_request(resource: str) -> Mapping[str, str]:
    """Pods with no request for ``resource`` (CPU or memory), and why: the same pods for both."""
    return {
        VLLM: _TPU_HOST.format(what="each vLLM replica", resource=resource),
        VLLM_LEADER: _TPU_HOST.format(what="the vLLM leader (Ray head and server, one pipeline stage)", resource=resource),
        VLLM_WORKER: _TPU_HOST.format(what="each vLLM Ray worker (one pipeline stage)", resource=resource),
        LWS_WORKER: _TPU_HOST.format(what="each Pathways worker", resource=resource),
        SAX_MODEL_SERVER: _TPU_HOST.format(what="each Saxml model server", resource=resource),
        LWS_LEADER: _LEADER_ON_SLICE.format(resource=resource),
        CONVERTER: _CONVERTER_NODE.format(resource=resource),
    }


# Pods that run as their image's (root) user, and why: the reason for runAsNonRoot and a high UID alike.
RUNS_AS_IMAGE_USER: Mapping[str, str] = {
    VLLM: _IMAGE_USER.format(upstream="vllm-llama3-70b.yaml"),
    VLLM_LEADER: _IMAGE_USER.format(upstream="tpu-inference multi-host deploy-baseline.yaml"),
    VLLM_WORKER: _IMAGE_USER.format(upstream="tpu-inference multi-host deploy-baseline.yaml"),
    LWS_LEADER: _IMAGE_USER.format(upstream="jetstream-pathways-*.yaml"),
    LWS_WORKER: _IMAGE_USER.format(upstream="jetstream-pathways-*.yaml"),
    SAX_ADMIN: _IMAGE_USER.format(upstream="sax-admin-server.yaml"),
    SAX_HTTP: _IMAGE_USER.format(upstream="sax-http.yaml"),
    SAX_MODEL_SERVER: _IMAGE_USER.format(upstream="sax-model-server-set.yaml"),
    CONVERTER: "runs as root, the image's user: its entrypoint downloads into /root/.llama",
    ADAPTER: _IMAGE_USER.format(upstream="adapter_new_resource_model.yaml"),
    RAY_HEAD: _RAY_USER,
    RAY_WORKER: _RAY_USER,
    RAY_SUBMITTER: _RAY_USER,
}

# Checks some resources fail by design: check -> {"Kind/name" (glob): why this resource fails it}.
SCOPED_SKIPS: Mapping[str, Mapping[str, str]] = {
    "CKV_K8S_38": {  # service-account token mounted (components/render/core.py API_TOKEN)
        ADAPTER: "calls the Kubernetes API: an aggregated API server (custom.metrics.k8s.io, external.metrics.k8s.io) "
        "that reads pods and nodes and delegates authentication and authorization to the API server",
    },
    "CKV_K8S_35": {  # Secret values in environment variables (by secretKeyRef, never in the spec or argv)
        VLLM: "HF_TOKEN (and VLLM_API_KEY when service.auth is api-key): huggingface_hub reads the token from HF_TOKEN "
        "and vLLM its API key from VLLM_API_KEY, each from the Secret by reference",
        VLLM_LEADER: "HF_TOKEN (and VLLM_API_KEY when service.auth is api-key), from the Secrets by reference, as for the "
        "single-host server",
        VLLM_WORKER: "HF_TOKEN, from the Secret by reference: each pipeline stage downloads its own shards",
        CONVERTER: "META_URL: the converter image's entrypoint reads the Meta URL only from --meta_url or $META_URL "
        "(and pipes it to `llama download` on stdin); the variable keeps it out of argv",
    },
    "CKV_K8S_10": _no_request("CPU"),  # CPU requests
    "CKV_K8S_12": _no_request("memory"),  # memory requests
    "CKV_K8S_13": {  # memory limits
        VLLM: "a replica owns its TPU VM's RAM (the GCS FUSE file cache lives there too); an OOM kill during a 70B load "
        "costs the whole load again",
        VLLM_LEADER: "a pod owns its TPU VM's RAM (the GCS FUSE file cache lives there too); an OOM kill recreates the "
        "whole group and restarts the load of every stage",
        VLLM_WORKER: "a pod owns its TPU VM's RAM (the GCS FUSE file cache lives there too); an OOM kill recreates the "
        "whole group and restarts the load of every stage",
        LWS_LEADER: "an OOM kill of the leader recreates the whole group (RecreateGroupOnPodRestart) and restarts a "
        "10-20 minute checkpoint restore; its peak use is not documented upstream",
        LWS_WORKER: "a worker owns its TPU VM's RAM; an OOM kill recreates the group and restarts the checkpoint restore",
        SAX_MODEL_SERVER: "a model server owns its TPU VM's RAM; an OOM kill fails the slice's Job and reloads the model",
        CONVERTER: "the conversion holds the whole checkpoint in RAM (about 2 TB for 405B) on a node of its own; an OOM "
        "kill after hours of work is worse than using the node's memory",
        SAX_ADMIN: "memory use is not documented upstream; a limit guessed too low would OOM-kill the cell's only admin "
        "server (requests reserve 512Mi)",
        SAX_HTTP: "memory use is not documented upstream; a limit guessed too low would OOM-kill the only HTTP server "
        "(requests reserve 512Mi)",
    },
    "CKV_K8S_22": {  # read-only root filesystem
        VLLM: "vLLM and huggingface_hub write caches under the image's home directory and /tmp",
        VLLM_LEADER: "vLLM and huggingface_hub write caches under the image's home directory, Ray its session under "
        "/tmp/ray",
        VLLM_WORKER: "Ray writes its session directory (logs, sockets, spilled objects) under /tmp/ray",
        LWS_LEADER: "the Pathways proxy, resource manager and JetStream write runtime logs and compilation artefacts "
        "under /tmp",
        LWS_WORKER: "the Pathways worker's TPU runtime writes its logs under /tmp (/tmp/tpu_logs)",
        SAX_MODEL_SERVER: "the model server's TPU runtime writes its logs under /tmp (/tmp/tpu_logs)",
        SAX_ADMIN: "upstream Saxml image run as published; it is neither documented nor tested on a read-only root",
        SAX_HTTP: "upstream Saxml image run as published; it is neither documented nor tested on a read-only root",
        CONVERTER: "downloads the Meta checkpoint to /root/.llama/checkpoints inside the container before converting",
        RAY_HEAD: "Ray writes its session directory (logs, sockets, spilled objects) under /tmp/ray",
        RAY_WORKER: "Ray writes its session directory (logs, sockets, spilled objects) under /tmp/ray",
        RAY_SUBMITTER: "the Ray CLI writes its session and log files under /tmp/ray",
        ADAPTER: f"{_AS_PUBLISHED}; not tested on a read-only root",
    },
    "CKV_K8S_23": RUNS_AS_IMAGE_USER,  # runAsNonRoot
    "CKV_K8S_40": RUNS_AS_IMAGE_USER,  # UID >= 10000
    "CKV_K8S_8": {  # liveness probe on every container
        VLLM_WORKER: _VLLM_RAY_WORKER,
        LWS_LEADER: "jax-tpu has the liveness probe (jetstream-http's /healthcheck covers the serving path); the proxy, "
        "resource manager and HTTP front end have no health endpoint, and any container's failure recreates the group",
        LWS_WORKER: "Pathways workers have no health endpoint; a failed worker fails the leader's /healthcheck and the "
        "group is recreated (RecreateGroupOnPodRestart)",
        SAX_MODEL_SERVER: "the Saxml model server speaks gRPC only (no health endpoint); one failed host fails the "
        "slice's Job, which the JobSet recreates",
        SAX_ADMIN: "the Saxml admin server speaks gRPC only (no health endpoint); readiness checks its TCP port",
        SAX_HTTP: "sax-http has no health endpoint that reflects its Sax client; readiness checks that it serves HTTP",
        RAY_HEAD: _RAY_PROBES,
        RAY_WORKER: _RAY_PROBES,
        RAY_SUBMITTER: _SUBMITTER,
        ADAPTER: f"{_AS_PUBLISHED}, without probes",
    },
    "CKV_K8S_9": {  # readiness probe on every container
        VLLM_WORKER: _VLLM_RAY_WORKER,
        LWS_LEADER: "the pod's readiness is jax-tpu's probe (jetstream-http's /healthcheck, the whole serving path); "
        "the proxy, resource manager and HTTP front end have no endpoint of their own",
        LWS_WORKER: "Pathways workers back no Service; the leader's readiness covers them",
        SAX_MODEL_SERVER: "model servers back no Service (the admin server assigns them models over gRPC) and have no "
        "health endpoint",
        RAY_HEAD: _RAY_PROBES,
        RAY_WORKER: _RAY_PROBES,
        RAY_SUBMITTER: _SUBMITTER,
        ADAPTER: f"{_AS_PUBLISHED}, without probes",
    },
    "CKV2_K8S_5": {
        "ClusterRoleBinding/external-metrics-reader": f"{_AS_PUBLISHED}: it lets the HPA controller read external metrics",
    },
    "CKV_K8S_49": {
        "ClusterRole/external-metrics-reader": f"{_AS_PUBLISHED}: the external metrics API's resources are the "
        "metric names, so the rule lists them as *",
    },
}


def resource_key(checkov_resource: str) -> str:
    """``Kind/name`` of a checkov resource id (``Kind.namespace.name``), the key of ``SCOPED_SKIPS``."""
    kind, _, rest = checkov_resource.partition(".")
    _, _, name = rest.partition(".")
    return f"{kind}/{name}"


def scoped_reason(check_id: str, key: str) -> str | None:
    """Why ``key`` (``Kind/name``) fails ``check_id`` by design, or None when it must not fail it."""
    for pattern, reason in (SCOPED_SKIPS.get(check_id) or {}).items():
        if fnmatch.fnmatchcase(key, pattern):
            return reason
    return None


def scanned_objects(manifests: Iterable[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(Kind/name, object)`` of what checkov checks: every manifest and every lifted pod template."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for obj in manifests:
        for doc in [obj, *pod_templates(obj)]:
            out.append((f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}", doc))
    return out


def scan_inputs(manifests: Mapping[str, list[dict[str, Any]]], out_dir: Path) -> list[Path]:
    """Write every stack's manifests plus the lifted pods to ``out_dir`` (one file per object)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stack, objs in manifests.items():
        for i, obj in enumerate(objs):
            for j, doc in enumerate([obj, *pod_templates(obj)]):
                path = out_dir / f"{stack}-{i:02d}-{j:02d}.yaml"
                path.write_text(yaml.safe_dump(doc, sort_keys=True))
                written.append(path)
    return written


def run_checkov(checkov: Path, directory: Path, *, scoped: bool = True) -> list[dict[str, Any]]:
    """Failed checks as checkov reports them (``--skip-download``: offline, no platform calls), less
    the ``SKIPS`` and, with ``scoped``, the failures ``SCOPED_SKIPS`` lists for their resource."""
    cmd = [
        str(checkov),
        "--directory",
        str(directory),
        "--framework",
        "kubernetes",
        "--output",
        "json",
        "--quiet",
        "--skip-download",
        "--compact",
    ]
    if SKIPS:
        cmd += ["--skip-check", ",".join(sorted(SKIPS))]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout or "{}")
    reports = report if isinstance(report, list) else [report]
    failed = [failed for r in reports for failed in r.get("results", {}).get("failed_checks", [])]
    if not scoped:
        return failed
    return [f for f in failed if scoped_reason(f["check_id"], resource_key(f["resource"])) is None]
