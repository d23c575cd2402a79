"""JetStream's checkpoint: where it lives in the checkpoint bucket, and the Job that converts Meta's
checkpoint into it (ai-on-gke tutorials-and-examples inference-servers/checkpoints: the converter
image and its ``checkpoint-converter.yaml``).

Pure functions, like ``render`` (which renders the server and lists these objects in ``manifests``):
a ``StackPlan`` and plain names in, Kubernetes objects (dicts) out.
"""

from __future__ import annotations

from typing import Any

from ...catalog.tpu import NODEPOOL_LABEL
from ...config.resolve import StackPlan
from ...render.core import common_labels, with_baseline_security
from .spec import settings

# pulumi-kubernetes waits for a Service to have ready endpoints and for a Job to finish, 10 minutes
# by default; the server becomes ready only after the checkpoint restore and the Job runs for hours.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}

# Orbax writes this file into a checkpoint directory on GCS once the save is committed (GCS has no
# atomic rename); its presence means the converter finished writing the directory.
COMMIT_MARKER = "commit_success.txt"

CONVERTER_JOB_NAME = "checkpoint-converter"
META_URL_SECRET = "meta-checkpoint-url"
META_URL_KEY = "url"
META_URL_ENV = "META_URL"
CONVERTER_ENTRYPOINT = "/usr/bin/checkpoint_converter.sh"
"""The converter image's ENTRYPOINT (ai-on-gke tutorials-and-examples inference-servers/checkpoints/Dockerfile)."""
# The Meta URL is a bearer credential (a signed download URL). The entrypoint reads it from $META_URL
# when --meta_url is not given (the variable is never reset before its option loop) and feeds it to
# `llama download` on stdin, so passing it through the environment keeps it out of every process's
# argv (/proc/<pid>/cmdline, visible to anything that lists processes on the node). The script also
# echoes it ("Meta url=...", "META_URL: ..."), so this wrapper runs the entrypoint with the Job's
# args and masks the URL in its log lines (bash builtins only: the value never becomes an argument).
CONVERTER_WRAPPER = """set -o pipefail
shopt -s extglob
"$0" "$@" 2>&1 | while IFS= read -r line || [ -n "$line" ]; do
  line="${line//"$META_URL"/[meta-url redacted]}"
  printf '%s\\n' "${line//@(Policy|Signature|Key-Pair-Id)=+([^&[:space:]])/[signed-url part redacted]}"
done
"""
# The second substitution masks the signed parts of any per-file URL the downloader derives from
# META_URL and might print (its query carries the same Policy/Signature/Key-Pair-Id).
CONVERTER_TAINT_KEY = "gke-tpu-llm/checkpoint-converter"


def gcs(bucket: str, *path: str) -> str:
    """``gs://<bucket>/<path>``; empty path parts are skipped."""
    return "".join(("gs://", bucket, *(f"/{p}" for p in path if p)))


def checkpoint_path(stack: StackPlan, bucket: str) -> str:
    """What the server loads: the converter's int8 output, or its unscanned bf16 items."""
    spec = settings(stack.config)
    directory = spec.checkpoint_dir(stack.config.workload.model)
    if stack.config.workload.weights == "int8":
        return gcs(bucket, directory, "int8")
    return gcs(bucket, directory, "bf16/unscanned/checkpoints/0/items")


def checkpoint_marker(stack: StackPlan, bucket: str) -> str:
    """The object whose presence means the checkpoint is committed (Orbax's GCS commit file).

    The int8 checkpoint is one PyTree directory (marker inside it); the bf16 one is step 0 of a
    CheckpointManager, which commits the step directory that holds ``items``.
    """
    spec = settings(stack.config)
    directory = spec.checkpoint_dir(stack.config.workload.model)
    if stack.config.workload.weights == "int8":
        return gcs(bucket, directory, "int8", COMMIT_MARKER)
    return gcs(bucket, directory, "bf16/unscanned/checkpoints/0", COMMIT_MARKER)


def render_meta_url_secret(stack: StackPlan, *, namespace: str, url: Any) -> dict[str, Any]:
    """The Meta download URL; the Job reads it by reference, so the URL never appears in the Job."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": META_URL_SECRET,
            "namespace": namespace,
            "labels": common_labels(stack.config.stack, "checkpoint-converter"),
        },
        "type": "Opaque",
        "stringData": {META_URL_KEY: url},
    }


def converter_args(stack: StackPlan, bucket: str) -> list[str]:
    """Arguments of the converter (ai-on-gke checkpoint-converter.yaml, in its order)."""
    spec = settings(stack.config)
    model = stack.config.workload.model
    profile = spec.model_profile(model)
    if profile is None:  # stack_rules reports it; unreachable for a validated stack
        raise ValueError(f"no JetStream profile for {model}")
    conversion = spec.conversion
    int8 = stack.config.workload.weights == "int8"
    args = [
        f"--bucket_name={bucket}",
        "--inference_server=jetstream-maxtext",
        # no --meta_url: the entrypoint reads $META_URL (CONVERTER_WRAPPER), never argv
        f"--model_name={profile.converter_model_name}",
        f"--model_path={conversion.meta_model_id or profile.meta_model_id}",
        f"--output_directory={gcs(bucket, spec.checkpoint_dir(model))}",
    ]
    if int8:
        args += ["--quantize_type=int8", "--quantize_weights=True"]
    return args


def render_conversion_job(
    stack: StackPlan,
    *,
    namespace: str,
    service_account: str,
    checkpoint_bucket: str,
    node_pool: str,
) -> dict[str, Any]:
    """The Job that converts Meta's checkpoint into the bucket, on the converter's tainted CPU pool."""
    conversion = settings(stack.config).conversion
    labels = common_labels(stack.config.stack, "checkpoint-converter")
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": CONVERTER_JOB_NAME, "namespace": namespace, "labels": labels, "annotations": dict(SKIP_AWAIT)},
        "spec": {
            # One retry for a real failure; evictions and node preemption do not count (podFailurePolicy).
            "backoffLimit": 1,
            "activeDeadlineSeconds": conversion.deadline_hours * 3600,
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
            },
            # No ttlSecondsAfterFinished: a garbage-collected Job would be re-created (and re-run) by Pulumi.
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": service_account,
                    "restartPolicy": "Never",
                    "nodeSelector": {NODEPOOL_LABEL: node_pool},
                    "tolerations": [{"key": CONVERTER_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "inference-checkpoint",
                            "image": conversion.image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/bash", "-c", CONVERTER_WRAPPER, CONVERTER_ENTRYPOINT],
                            "args": converter_args(stack, checkpoint_bucket),
                            "env": [
                                {
                                    "name": META_URL_ENV,
                                    "valueFrom": {"secretKeyRef": {"name": META_URL_SECRET, "key": META_URL_KEY}},
                                }
                            ],
                        }
                    ],
                },
            },
        },
    }
    return with_baseline_security(job)


def conversion_logs_command(namespace: str) -> str:
    return f"kubectl logs -f job/{CONVERTER_JOB_NAME} -n {namespace}"
