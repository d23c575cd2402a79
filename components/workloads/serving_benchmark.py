"""``ServingBenchmark``: after ``up``, the engine's own benchmark client against the deployed server.

Created for a serving stack with ``workload.serving.benchmark: true`` (``components.workloads.deploy``
wires it after the kind's own components). The objects come from ``components.render.benchmark``
and the kind's ``benchmark`` render function (``WorkloadKindInfo.benchmark``); this component
registers them in order:

* the benchmark's own KSA (``<server>-benchmark``) in the workload namespace;
* its only Google access: ``roles/storage.objectUser`` on the stack's bucket for the KSA's own
  ``principal://`` identity, conditioned on the ``benchmarks/<stack>/`` prefix (IAM Conditions on
  a uniform-access bucket). Why not the workload's KSA: that one already holds read-write on the
  whole bucket (the weights, the compile cache), which the benchmark needs no part of; why not
  ``roles/storage.objectCreator``: GCS FUSE looks objects up and lists directories before it writes
  (the GCS FUSE CSI driver documents ``roles/storage.objectUser`` for read-write mounts);
* the NetworkPolicy that admits the benchmark pod to the server's serving port;
* the Job, after all of the above and after the workload's server (``after``: the Outputs the
  kind's ``deploy`` returned, whose resources include the server's Service, which Pulumi waits on
  until a ready server pod backs it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp

from ..config.errors import rules_error
from ..config.resolve import StackPlan
from ..config.workload import ServingSpec, serving_scenario
from ..platform import k8s as k8s_objects
from ..platform.gke import GkeCluster
from ..platform.identity import principal_member
from ..platform.network_policies import NetworkPolicies
from ..platform.storage import StackBucket
from ..render import benchmark as render
from .kind import benchmark_rules
from .registry import BY_KIND

BUCKET_ROLE = "roles/storage.objectUser"
"""Read-write objects (the GCS FUSE CSI driver's documented role for a read-write mount), narrowed to
the results prefix by the binding's condition (``components.render.benchmark.iam_condition``)."""

ClientFunction = Callable[..., render.BenchmarkClient]


def benchmark_client(stack: StackPlan, *, namespace: str, service_account: str) -> render.BenchmarkClient:
    """The kind's benchmark client (``WorkloadKindInfo.benchmark``). The stack config refuses
    ``benchmark: true`` for a kind without one (``components.workloads.kind.benchmark_rules``); the
    same rule is raised here as a ``ConfigError`` (``plan`` exits 2 naming the key) should a config
    ever get this far."""
    target = stack.config.kind_info.benchmark
    if target is None:
        problems = benchmark_rules(stack.config.workload, BY_KIND)
        raise rules_error(problems)
    module_name, _, function = target.partition(":")
    client: ClientFunction = getattr(importlib.import_module(module_name), function)
    return client(stack, namespace=namespace, service_account=service_account)


@dataclass(frozen=True, kw_only=True)
class ServingBenchmarkArgs:
    """What a ``ServingBenchmark`` needs."""

    stack: StackPlan
    """The resolved stack (its scenario is ``workload.serving``)."""
    cluster: GkeCluster
    """The cluster: its provider creates the Kubernetes objects, its workload pool federates the KSA."""
    namespace: str
    """The workload namespace (the server's, where its default-deny NetworkPolicy already is)."""
    server_service_account: str
    """The server's KSA (the server's rendered pods, which the NetworkPolicy is compiled against, name it)."""
    buckets: Mapping[str, StackBucket]
    """The stack's buckets; the kind's client names the one results go to."""
    namespace_from: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """What creates the namespace (the workload's ``WorkloadIdentity``): the KSA and policy follow it."""
    after: Sequence[pulumi.Input[Any]] = field(default_factory=tuple)
    """Resources, or Outputs whose resources, the Job is created after: the workload's server."""

    @property
    def scenario(self) -> ServingSpec:
        scenario = serving_scenario(self.stack.config)
        if scenario is None:
            raise ValueError("workload.serving is unset: nothing to benchmark")
        return scenario


class ServingBenchmark(pulumi.ComponentResource):
    """The benchmark Job of a serving stack, its KSA, bucket role and NetworkPolicy."""

    TYPE = "gke-tpu-llm:benchmark:ServingBenchmark"

    job: pulumi.CustomResource
    results: pulumi.Output[str]

    def __init__(self, name: str, args: ServingBenchmarkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        config = args.stack.config
        cluster = args.cluster
        namespace = args.namespace
        client = benchmark_client(args.stack, namespace=namespace, service_account=args.server_service_account)
        bucket = args.buckets[client.bucket]
        # Deterministic (StackConfig.bucket_name), so the Job renders without Outputs; the Job depends on the bucket.
        bucket_name = config.bucket_name(client.bucket)
        # Outputs carry their resources: depending on them waits for what produced them (the server).
        after = [a.apply(lambda _: None) if isinstance(a, pulumi.Output) else a for a in args.after]

        def k8s_opts(depends_on: Sequence[Any]) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=list(depends_on))

        ksa = k8s_objects.create(
            render.render_benchmark_service_account(client, namespace, stack=config.stack),
            f"{name}-ksa",
            k8s_opts(args.namespace_from),
        )
        number = gcp.organizations.get_project_output(project_id=config.project).number
        member = number.apply(lambda n: principal_member(str(n), config.project, namespace, render.service_account_name(client)))
        condition = render.iam_condition(bucket_name, config.stack)
        grant = gcp.storage.BucketIAMMember(
            f"{name}-results-access",
            bucket=bucket.bucket_name,
            role=BUCKET_ROLE,
            member=member,
            condition=gcp.storage.BucketIAMMemberConditionArgs(
                title=condition["title"], description=condition["description"], expression=condition["expression"]
            ),
            # The principal exists once the cluster's Workload Identity pool does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.cluster]),
        )
        job = render.render_job(args.stack, args.scenario, client, namespace=namespace, bucket_name=bucket_name)
        policies = NetworkPolicies(
            f"{name}-network-policies",
            render.render_network_policies(job, client, namespace=namespace, stack=config.stack),
            cluster=cluster,
            depends_on=[ksa],  # the namespace exists (the KSA is created after the workload's identity)
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.job = k8s_objects.create(job, f"{name}-job", k8s_opts([ksa, grant, policies, bucket, *args.namespace_from, *after]))
        self.results = bucket.bucket_name.apply(lambda b: f"gs://{b}/{render.results_prefix(config.stack)}")
        self.logs_command = f"kubectl -n {namespace} logs -f job/{render.job_name(client)} -c {render.ROLE}"
        self.register_outputs({"results": self.results, "job": render.job_name(client)})
