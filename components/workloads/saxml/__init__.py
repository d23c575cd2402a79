"""Workload kind ``saxml``: Saxml admin server, JobSet model servers and HTTP server.

spec.py (settings), render.py (pure Kubernetes objects), component.py (Pulumi components), README.md
(notes and deliberate differences from the upstream sample).
"""

from components.workloads.kind import WorkloadKindInfo
from components.workloads.saxml.spec import SaxmlWorkload, serving_server

KIND = WorkloadKindInfo(
    workload=SaxmlWorkload,
    engine="saxml",
    mode="serve",
    serving_server=serving_server,
    deploy="components.workloads.saxml.component:deploy",
    summary="Saxml admin server, JobSet model servers and HTTP server",
    addons=frozenset(),
    controllers=('jobset',),
)
