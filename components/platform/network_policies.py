"""``NetworkPolicies``: register a namespace's NetworkPolicies (``components.render.netpol``).

Each workload's ``deploy`` calls ``network_policies`` with the objects it rendered and the flow
intents its render module declares (``network_intents``); the policies depend on what creates the
namespace. The ``allow-*`` policies are created before ``default-deny-ingress`` (which depends on
them) and deleted after it, so adding policies to a running workload never isolates a pod before its
flows are admitted. Enforcement needs the cluster's ``cluster.dataplane`` setting (``components.platform.gke``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from ..render import netpol as render
from . import k8s as k8s_objects
from .gke import GkeCluster


class NetworkPolicies(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:netpol:NetworkPolicies"

    policies: list[pulumi.CustomResource]

    def __init__(
        self,
        name: str,
        policies: Sequence[Mapping[str, Any]],
        *,
        cluster: GkeCluster,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(self.TYPE, name, None, opts)

        def create(policy: Mapping[str, Any], after: Sequence[pulumi.Resource]) -> pulumi.CustomResource:
            opts = pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[*depends_on, *after])
            return k8s_objects.create(policy, f"{name}-{policy['metadata']['name']}", opts)

        allows = [create(p, []) for p in policies if p["metadata"]["name"] != render.DEFAULT_DENY]
        denies = [create(p, allows) for p in policies if p["metadata"]["name"] == render.DEFAULT_DENY]
        self.policies = [*allows, *denies]
        self.register_outputs({"policies": [p["metadata"]["name"] for p in policies]})


def network_policies(
    name: str,
    objects: Sequence[Mapping[str, Any]],
    intents: Sequence[render.Intent],
    *,
    namespace: str,
    stack: str,
    cluster: GkeCluster,
    depends_on: Sequence[pulumi.Resource],
) -> NetworkPolicies:
    """Render the namespace's policies from the workload's objects and intents, and register them."""
    policies = render.render_network_policies(objects, intents, namespace=namespace, stack=stack)
    return NetworkPolicies(name, policies, cluster=cluster, depends_on=depends_on)
