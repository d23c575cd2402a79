"""The cold start of a serving replica that lands on a node which did not exist: node provisioning,
weight load through the bucket (GCS FUSE), and XLA compilation. Pure arithmetic over the planner's
weight bytes and the stated figures below; ``components.tools.plan_operations`` prints it wherever a
capacity tier or the replica count can reach zero.

Every figure is a stated assumption with its source (issue 26's fact sheet); none is a measurement of
this stack. Measure them on the cluster with the metrics named in :data:`MEASURE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NODE_PROVISION_S = 300.0
"""ASSUMPTION: 5 minutes from the scale-up decision to a Ready TPU node. No public TPU figure exists
(GKE's "fast-starting nodes" list no TPU; a third-party 60-90 s boot figure is for CPU/GPU VMs), and a
TPU VM also waits for capacity. Measure: ``kubernetes.io/node/latencies/startup`` with
``accelerator_family="tpu"`` (GCE instance creation to first Ready)."""
GCSFUSE_READ_BYTES_PER_S = 13.3e9
"""GCS FUSE sequential read, 13.3-14.5 GB/s aggregate (gcsfuse v3.4.3 docs/benchmarks.md, 10 MiB-1 GiB
files, c4-standard-192 with 200 Gbps networking, same-region bucket, fio). The host's own network caps
the load too (the TPU catalog row's DCN bandwidth per host, ``TpuSlice.dcn_bandwidth_per_host``: 25-800
Gbps), though the single-stream rate below sits under every catalogued host's."""
GCSFUSE_STREAM_BYTES_PER_S = 1.7e9
"""One sequential reader of a large file, 1.7 GB/s (10 GB file with kernel read-ahead, GoogleCloudPlatform/gcsfuse
PR #4146). vLLM's safetensors loader reads the shards one after another, so this, not the many-file aggregate,
is the planning rate; parallel downloads (on in this stack's mount options) may approach the aggregate."""
COMPILE_S_8B = 120.0
"""XLA warm-up of an 8B model on one TPU host: 100-120 s (vllm-project/vllm#7533: Llama 3.1 8B 100.3 s on
v5e-8; pytorch/xla#9094: "llama3-8b single chip model needs 120s to warmup, larger models needs more time")."""
COMPILE_CAP_S = 1800.0
"""First-run compile upper end, 30 minutes (vllm-project/vllm#7533: "First run: 10~30 mins")."""
COMPILE_ASSUMPTION = (
    "ASSUMPTION: linear in parameters from the 8B figure (120 s), capped at 30 min; no published compile time "
    "for 70B-class models on tpu-inference exists, and its cache on gs:// showed no hits (marin-community/marin#2318), "
    "so every new node compiles again"
)
MEASURE: dict[str, str] = {
    "node": 'kubernetes.io/node/latencies/startup{accelerator_family="tpu"}',
    "pod": "kubernetes.io/pod/latencies/pod_first_ready (pod created to Ready: image pull, weight load, compile)",
    "weights": "kubernetes.io/gcsfusecsi/gcs_download_bytes_count over the load",
    "benchmark": "vllm bench startup (cold vs warm start, compilation included)",
}


@dataclass(frozen=True)
class ColdStart:
    weight_bytes: int
    node_s: float
    weights_s: float
    compile_s: float
    read_bytes_per_s: float
    host_network_bytes_per_s: float

    @property
    def total_s(self) -> float:
        return self.node_s + self.weights_s + self.compile_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "weight_bytes": self.weight_bytes,
            "node_seconds": round(self.node_s, 1),
            "weights_seconds": round(self.weights_s, 1),
            "compile_seconds": round(self.compile_s, 1),
            "total_seconds": round(self.total_s, 1),
            "read_bytes_per_second": self.read_bytes_per_s,
            "assumptions": {
                "node": NODE_PROVISION_S,
                "gcsfuse_stream_bytes_per_second": GCSFUSE_STREAM_BYTES_PER_S,
                "gcsfuse_aggregate_bytes_per_second": GCSFUSE_READ_BYTES_PER_S,
                "host_network_bytes_per_second": self.host_network_bytes_per_s,
                "compile": COMPILE_ASSUMPTION,
            },
            "measure": dict(MEASURE),
        }


def cold_start(weight_bytes: int, params: float, host_network_bytes_per_s: float) -> ColdStart:
    """A replica on a new node: the node, then every byte of the checkpoint from the bucket (a new node's
    RAM file cache is empty, and each host reads the whole checkpoint over its network, at
    ``host_network_bytes_per_s``), then compilation."""
    rate = min(GCSFUSE_STREAM_BYTES_PER_S, GCSFUSE_READ_BYTES_PER_S, host_network_bytes_per_s)
    compile_s = min(COMPILE_CAP_S, COMPILE_S_8B * params / 8e9)
    return ColdStart(weight_bytes, NODE_PROVISION_S, weight_bytes / rate, compile_s, rate, host_network_bytes_per_s)
