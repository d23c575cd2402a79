"""Workload kind ``jetstream-pathways``: JetStream + MaxText + Pathways serving on LeaderWorkerSet.

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from the upstream sample).
"""

from components.workloads.jetstream.spec import JetstreamWorkload, serving_server
from components.workloads.kind import WorkloadKindInfo

KIND = WorkloadKindInfo(
    workload=JetstreamWorkload,
    engine="maxtext",
    mode="serve",
    serving_server=serving_server,
    deploy="components.workloads.jetstream.component:deploy",
    summary="JetStream + MaxText + Pathways serving on LeaderWorkerSet (multi-host slices; archived upstream)",
    addons=frozenset(),
    controllers=('lws',),
    secrets={
        "metaCheckpointUrl": "Meta's signed Llama download URL (from the license e-mail), for the checkpoint "
        "conversion Job (required while workload.jetstream.conversion.enabled is true)",
    },
)
