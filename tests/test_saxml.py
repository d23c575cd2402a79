"""Saxml: spec rules, pure renderers, the publish script against a fake sax-http server, the
component under mocks, and the issue's acceptance checks on the ``saxml-175b`` plan."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from components.catalog.images import image
from components.catalog.tpu import NODEPOOL_LABEL
from components.config import naming
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.resolve import StackPlan, resolve
from components.platform.addons.controllers import HelmController
from components.render.core import get_path, pod_template_paths
from components.tools import report
from components.tools.validate import validate_all
from components.workloads.saxml import component as saxml_component
from components.workloads.saxml import render
from components.workloads.saxml.spec import settings
from tests.conftest import make_config, planned

STACK = "saxml-175b"
BUCKET = "test-project-123-saxml-sax"

SAXML_BASE: dict[str, Any] = {
    "gcp:region": "us-west4",
    "tpu": {"generation": "v5e", "topology": "4x8", "slices": 2, "zone": "us-west4-a"},
    "buckets": {"sax": {"purpose": "saxml-admin-state"}},
    "identity": {"mode": "gsa", "serviceAccount": "sax-sa", "bucketRoles": {"sax": "roles/storage.objectUser"}},
    "workload": {
        "kind": "saxml",
        "model": "saxml-175b-32test",
        "maxTargetLength": 256,
        "maxPrefillLength": 128,
        "batchSize": 1,
    },
}


def sax_plan(**override: Any) -> StackPlan:
    values = dict(SAXML_BASE)
    for key, value in override.items():
        values[key] = {**values[key], **value} if isinstance(value, dict) and key in values else value
    return resolve(make_config("saxml-test", **values))


def with_saxml(**saxml: Any) -> StackPlan:
    return sax_plan(workload={"saxml": saxml})


def objs(stack: StackPlan) -> render.SaxmlObjects:
    return render.render_saxml(stack, namespace="llm", service_account="sax-sa", bucket_name=BUCKET)


def pod_spec_of_jobset(jobset: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return spec


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e["value"] for e in container["env"]}


# ---------------------------------------------------------------- spec


def test_spec_defaults_are_the_seed_images_and_ports() -> None:
    spec = settings(sax_plan().config)
    assert spec.admin_server_image.endswith("/sax-admin-server:v1.1.0")
    assert spec.model_server_image.endswith("/sax-model-server:v1.1.0")
    assert spec.http_server_image.endswith("/sax-http:v1.0.0")
    assert (spec.cell, spec.admin_port, spec.model_server_port, spec.max_restarts) == ("/sax/test", 10000, 10001, 4)
    assert spec.internal_load_balancer is True
    assert (spec.publish.enabled, spec.publish.model, spec.publish.checkpoint) == (True, "spmd", "None")


@pytest.mark.parametrize(
    ("saxml", "key", "problem"),
    [
        ({"modelServerImage": "us-docker.pkg.dev/x/sax-model-server:latest"}, "modelServerImage", "latest"),
        ({"adminServerImage": "us-docker.pkg.dev/x/sax-admin-server"}, "adminServerImage", "has no tag"),
        ({"publish": {"image": "curlimages/curl"}}, "publish.image", "has no tag"),
        ({"internalLoadBalancer": False}, "internalLoadBalancer", "has no authentication"),
        (
            {"internalLoadBalancer": False, "loadBalancerSourceRanges": ["203.0.113.0/24"]},
            "internalLoadBalancer",
            "outside the VPC",
        ),
        ({"loadBalancerSourceRanges": ["10.0.0.0/33"]}, "loadBalancerSourceRanges.0", "not a CIDR range"),
        ({"modelServerPort": 10000}, "modelServerPort", "equals adminPort"),
        ({"modelServerPort": 8471}, "modelServerPort", "TPU runtime"),
        ({"cell": "sax/test"}, "cell", "wrong format"),
        ({"publish": {"checkpoint": "gs://b/has space"}}, "publish.checkpoint", "wrong format"),
    ],
)
def test_spec_rejects_bad_settings_with_the_key(saxml: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        with_saxml(**saxml)
    text = str(info.value)
    assert f"gke-tpu-llm:workload.saxml.{key}" in text
    assert problem in text


def test_spec_accepts_internal_lb_narrowed_by_source_ranges() -> None:
    spec = settings(with_saxml(loadBalancerSourceRanges=["10.8.0.0/16"]).config)
    assert spec.load_balancer_source_ranges == ["10.8.0.0/16"]


# ---------------------------------------------------------------- renderers


def test_render_model_servers_derive_every_number_from_the_slice() -> None:
    stack = sax_plan()
    jobset = objs(stack).model_servers
    rjob = jobset["spec"]["replicatedJobs"][0]
    job = rjob["template"]["spec"]
    container = pod_spec_of_jobset(jobset)["containers"][0]
    assert rjob["replicas"] == stack.config.tpu.slices == 2
    assert job["parallelism"] == job["completions"] == stack.slice.hosts == 8
    assert job["backoffLimit"] == 0
    assert container["resources"] == {"requests": {"google.com/tpu": "4"}, "limits": {"google.com/tpu": "4"}}
    assert pod_spec_of_jobset(jobset)["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "4x8",
    }
    assert container["args"] == ["--port=10001", "--sax_cell=/sax/test", "--platform_chip=tpuv5e"]


def test_render_model_servers_exclusive_per_node_pool_with_tpu_toleration() -> None:
    jobset = objs(sax_plan()).model_servers
    assert jobset["metadata"]["annotations"] == {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
    assert pod_spec_of_jobset(jobset)["tolerations"] == [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_render_model_servers_megascale_num_slices_is_one_slice_per_server_not_empty() -> None:
    # Each replicated Job is an independent Saxml model server on one slice: "1", never "" and
    # never the stack's slice count (that would make libtpu wait for a multislice peer).
    for slices in (1, 2, 3):
        container = pod_spec_of_jobset(objs(sax_plan(tpu={"slices": slices})).model_servers)["containers"][0]
        assert env_of(container)["MEGASCALE_NUM_SLICES"] == "1"


def test_render_model_servers_use_pod_network_and_the_ksa_unprivileged() -> None:
    pod = pod_spec_of_jobset(objs(sax_plan()).model_servers)
    assert "hostNetwork" not in pod  # Workload Identity does not serve host-network pods
    assert pod["serviceAccountName"] == "sax-sa"
    no_raw = {"drop": ["NET_RAW"]}
    assert pod["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": no_raw}
    assert env_of(pod["containers"][0])["SAX_ROOT"] == f"gs://{BUCKET}/sax-root"
    privileged = pod_spec_of_jobset(objs(with_saxml(modelServerPrivileged=True)).model_servers)
    assert privileged["containers"][0]["securityContext"] == {"privileged": True, "capabilities": no_raw}


def test_render_model_servers_restart_only_the_failed_slice_when_jobset_supports_it() -> None:
    current = objs(sax_plan()).model_servers["spec"]["failurePolicy"]
    assert current["maxRestarts"] == 4
    assert current["rules"] == [
        {"name": "restartFailedModelServer", "action": "RestartJob", "targetReplicatedJobs": ["sax-model-server"]}
    ]
    old = objs(sax_plan(controllers={"jobsetVersion": "0.8.1"})).model_servers["spec"]["failurePolicy"]
    assert old == {"maxRestarts": 4}


def test_render_admin_server_keeps_the_cell_in_the_bucket_on_the_system_pool() -> None:
    admin = objs(sax_plan()).admin_server
    pod = admin["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert admin["spec"]["replicas"] == 1
    assert admin["spec"]["strategy"] == {"type": "Recreate"}
    assert pod["serviceAccountName"] == "sax-sa"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}
    assert env_of(container) == {"GSBUCKET": BUCKET, "SAX_CELL": "/sax/test", "PORT": "10000"}
    assert container["ports"][0]["containerPort"] == 10000
    assert "privileged" not in container["securityContext"]


def test_render_http_server_and_internal_load_balancer_on_8888() -> None:
    rendered = objs(sax_plan())
    pod = rendered.http_server["spec"]["template"]["spec"]
    assert env_of(pod["containers"][0]) == {"SAX_ROOT": f"gs://{BUCKET}/sax-root"}
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}
    svc = rendered.http_service
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8888, "targetPort": 8888, "protocol": "TCP"}]
    assert svc["metadata"]["annotations"] == {"networking.gke.io/load-balancer-type": "Internal"}
    assert svc["spec"]["selector"] == rendered.http_server["spec"]["selector"]["matchLabels"]


def test_render_http_service_stays_internal_with_source_ranges() -> None:
    svc = objs(with_saxml(loadBalancerSourceRanges=["10.8.0.0/16"])).http_service
    assert svc["metadata"]["annotations"] == {"networking.gke.io/load-balancer-type": "Internal"}
    assert svc["spec"]["loadBalancerSourceRanges"] == ["10.8.0.0/16"]


def test_render_publish_job_publishes_the_catalog_servable_with_one_replica_per_slice() -> None:
    job = objs(sax_plan(tpu={"slices": 3})).publish_job
    assert job is not None
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert env_of(container) == {
        "SAX_HTTP_ADDRESS": "sax-http-lb.llm.svc.cluster.local:8888",
        "SAX_MODEL": "/sax/test/spmd",
        "SAX_MODEL_PATH": "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd175B32Test",
        "SAX_CHECKPOINT": "None",
        "SAX_REPLICAS": "3",
    }
    assert container["image"] == image("curl").ref == f"curlimages/curl:8.11.1@{image('curl').digest}"
    assert job["spec"]["activeDeadlineSeconds"] == 900
    assert job["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == [render.PUBLISH_CONFLICT_EXIT]


def test_render_publish_disabled_renders_no_job() -> None:
    assert objs(with_saxml(publish={"enabled": False})).publish_job is None


VARIANTS: dict[str, dict[str, Any]] = {
    "seed": {},
    "one-slice": {"tpu": {"slices": 1}},
    "old-jobset": {"controllers": {"jobsetVersion": "0.8.1"}},
    "ranges-privileged": {
        "workload": {
            "saxml": {
                "loadBalancerSourceRanges": ["10.8.0.0/16"],
                "modelServerPrivileged": True,
                "publish": {"enabled": False},
            }
        }
    },
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_render_every_object_validates_strictly(variant: str) -> None:
    assert validate_all(objs(sax_plan(**VARIANTS[variant])).all()) == []


# ---------------------------------------------------------------- publish script (fake sax-http)


class FakeSaxHttp(BaseHTTPRequestHandler):
    """The sax-http v1.0.0 request handling: 200 + JSON, or 400 {"Error": ...} on a Saxml error."""

    published: dict[str, dict[str, Any]]
    calls: list[tuple[str, str, dict[str, Any]]]

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        self.send_response(code)
        self.end_headers()
        self.wfile.write(json.dumps(body, indent=4).encode() + b"\n")

    def _handle(self, method: str) -> None:
        if self.path == "/" and method == "GET":
            self._reply(200, {"message": "HTTP Server for SAX Client"})
            return
        params = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.calls.append((method, self.path, params))
        model = params["model"]
        if (method, self.path) == ("GET", "/listcell") and len(params) == 1:
            if model not in self.published:
                self._reply(400, {"Error": f"model {model} not found: not found"})
                return
            p = self.published[model]
            self._reply(
                200,
                {
                    "model": model,
                    "model_path": p["model_path"],
                    "checkpoint": p["checkpoint"],
                    "max_replicas": p["replicas"],
                    "active_replicas": 0,
                },
            )
        elif (method, self.path) in (("POST", "/publish"), ("PUT", "/update")) and len(params) == 4:
            if self.path == "/publish" and model in self.published:
                self._reply(400, {"Error": f"model {model} already exists: already exists"})
                return
            self.published[model] = {k: params[k] for k in ("model_path", "checkpoint", "replicas")}
            self._reply(200, {"model": model, "path": params["model_path"]})
        else:
            self._reply(400, {"message": "Invalid Request"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")


@pytest.fixture
def sax_http() -> Iterator[tuple[ThreadingHTTPServer, type[FakeSaxHttp]]]:
    handler = type("Handler", (FakeSaxHttp,), {"published": {}, "calls": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    server.server_close()


needs_sh_curl = pytest.mark.skipif(not (shutil.which("sh") and shutil.which("curl")), reason="needs sh and curl")
WANT = {"model_path": "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd175B32Test", "checkpoint": "None", "replicas": 2}


def run_publish(server: ThreadingHTTPServer) -> subprocess.CompletedProcess[str]:
    job = objs(sax_plan()).publish_job
    assert job is not None
    env = env_of(job["spec"]["template"]["spec"]["containers"][0])
    env["SAX_HTTP_ADDRESS"] = f"127.0.0.1:{server.server_address[1]}"
    return subprocess.run(
        ["sh", "-c", render.PUBLISH_SCRIPT],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )


@needs_sh_curl
def test_publish_script_publishes_an_absent_model(sax_http: tuple[ThreadingHTTPServer, type[FakeSaxHttp]]) -> None:
    server, handler = sax_http
    result = run_publish(server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert handler.published == {"/sax/test/spmd": WANT}
    assert [(m, p) for m, p, _ in handler.calls] == [("GET", "/listcell"), ("POST", "/publish")]


@needs_sh_curl
def test_publish_script_is_a_noop_when_published_as_wanted(
    sax_http: tuple[ThreadingHTTPServer, type[FakeSaxHttp]],
) -> None:
    server, handler = sax_http
    handler.published["/sax/test/spmd"] = dict(WANT)
    result = run_publish(server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "already published" in result.stdout
    assert [(m, p) for m, p, _ in handler.calls] == [("GET", "/listcell")]


@needs_sh_curl
def test_publish_script_updates_replicas_of_the_same_model(
    sax_http: tuple[ThreadingHTTPServer, type[FakeSaxHttp]],
) -> None:
    server, handler = sax_http
    handler.published["/sax/test/spmd"] = {**WANT, "replicas": 1}
    result = run_publish(server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert handler.published["/sax/test/spmd"]["replicas"] == 2
    assert [(m, p) for m, p, _ in handler.calls] == [("GET", "/listcell"), ("PUT", "/update")]


@needs_sh_curl
def test_publish_script_refuses_to_replace_another_model_path(
    sax_http: tuple[ThreadingHTTPServer, type[FakeSaxHttp]],
) -> None:
    server, handler = sax_http
    handler.published["/sax/test/spmd"] = {**WANT, "model_path": "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd2B"}
    result = run_publish(server)
    assert result.returncode == render.PUBLISH_CONFLICT_EXIT
    assert "unpublish it first" in result.stdout
    assert handler.published["/sax/test/spmd"]["model_path"].endswith("LmCloudSpmd2B")


# ---------------------------------------------------------------- component under mocks


def test_component_type_token_and_system_pool_name_agree_with_the_cluster() -> None:
    assert saxml_component.SaxmlServing.TYPE == "gke-tpu-llm:saxml:SaxmlServing"
    stack = planned(STACK)
    pools = {r.inputs["name"] for r in stack.resources if r.type == "gcp:container/nodePool:NodePool"}
    assert naming.SYSTEM_POOL in pools
    # Every pod pinned to a node pool by name is pinned to a pool the cluster creates.
    pinned = {
        selector[NODEPOOL_LABEL]
        for obj in stack.manifests
        for path in pod_template_paths(obj)
        if NODEPOOL_LABEL in (selector := (get_path(obj, path).get("spec", {}).get("nodeSelector") or {}))
    }
    assert naming.SYSTEM_POOL in pinned
    assert pinned <= pools


def test_component_children_are_parented_and_use_the_cluster_provider() -> None:
    result = planned(STACK)
    comp = next(r for r in result.resources if r.type == saxml_component.SaxmlServing.TYPE)
    children = [r for r in result.resources if r.parent == comp.urn]
    assert {r.type for r in children} == {
        HelmController.TYPE,
        "kubernetes:apps/v1:Deployment",
        "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
        "kubernetes:core/v1:Service",
        "kubernetes:batch/v1:Job",
    }
    for child in children:
        if child.custom:
            assert child.provider == f"{STACK}-k8s"


def test_config_requires_the_sax_bucket_with_write_access() -> None:
    # Checked when the stack loads, so `plan` exits 2 and nothing at all is registered.
    with pytest.raises(ConfigError, match=r"gke-tpu-llm:identity\.bucketRoles\.sax: 'roles/storage\.objectViewer' does not let"):
        sax_plan(identity={"bucketRoles": {"sax": "roles/storage.objectViewer"}})
    values = dict(SAXML_BASE)
    values["buckets"] = {"state": {"purpose": "x"}}
    values["identity"] = {**values.get("identity", {}), "bucketRoles": {"state": "roles/storage.objectUser"}}
    with pytest.raises(ConfigError, match=r"gke-tpu-llm:buckets\.sax: None is required"):
        resolve(make_config("saxml-test", **values))


# ---------------------------------------------------------------- acceptance (plan saxml-175b --json)


def by_type(plan: dict[str, Any], typ: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == typ]


def manifest(plan: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [m for m in plan["manifests"] if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1
    return found[0]


def test_acceptance_plan_shows_the_whole_saxml_stack() -> None:
    plan = report.plan_json(planned(STACK))
    pools = [p for p in by_type(plan, "gcp:container/nodePool:NodePool") if p["inputs"]["name"] != "system"]
    assert len(pools) == 2
    for pool in pools:
        assert pool["inputs"]["nodeCount"] == 8
        assert pool["inputs"]["nodeConfig"]["machineType"] == "ct5lp-hightpu-4t"
        assert pool["inputs"]["placementPolicy"]["tpuTopology"] == "4x8"

    (release,) = by_type(plan, "kubernetes:helm.sh/v3:Release")
    assert release["inputs"]["chart"] == "oci://registry.k8s.io/jobset/charts/jobset"
    assert release["inputs"]["version"] == "0.12.0"
    (jobset_res,) = by_type(plan, "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    assert release["urn"] in jobset_res["dependencies"]

    manifest(plan, "Deployment", "sax-admin-server")
    jobset = manifest(plan, "JobSet", "sax-model-server-set")
    rjob = jobset["spec"]["replicatedJobs"][0]
    assert rjob["replicas"] == 2
    assert rjob["template"]["spec"]["parallelism"] == rjob["template"]["spec"]["completions"] == 8
    assert pod_spec_of_jobset(jobset)["containers"][0]["resources"]["limits"] == {"google.com/tpu": "4"}
    manifest(plan, "Deployment", "sax-http")
    svc = manifest(plan, "Service", "sax-http-lb")
    assert (svc["spec"]["type"], svc["spec"]["ports"][0]["port"]) == ("LoadBalancer", 8888)
    job = manifest(plan, "Job", "sax-publish")
    assert env_of(job["spec"]["template"]["spec"]["containers"][0])["SAX_REPLICAS"] == "2"
    (job_res,) = by_type(plan, "kubernetes:batch/v1:Job")
    http_urn = next(r["urn"] for r in by_type(plan, "kubernetes:apps/v1:Deployment") if r["name"] == "saxml-http")
    assert http_urn in job_res["dependencies"]

    bucket = plan["outputs"]["buckets"]["sax"].removeprefix("gs://")
    (grant,) = by_type(plan, "gcp:storage/bucketIAMMember:BucketIAMMember")
    # objectUser is enough (create, overwrite, delete objects); objectAdmin would add object IAM
    assert (grant["inputs"]["bucket"], grant["inputs"]["role"]) == (bucket, "roles/storage.objectUser")
    project_roles = [r["inputs"]["role"] for r in plan["resources"] if r["type"].startswith("gcp:projects/")]
    assert project_roles == ["roles/container.defaultNodeServiceAccount"]  # the nodes' role only
    assert env_of(pod_spec_of_jobset(jobset)["containers"][0])["SAX_ROOT"] == f"gs://{bucket}/sax-root"
    assert validate_all(plan["manifests"]) == []


def test_acceptance_outputs_give_the_endpoint_and_the_calls() -> None:
    out = planned(STACK).outputs
    assert out["saxml_model"] == "/sax/test/spmd"
    assert out["saxml_endpoint"].startswith("pending")  # mocks assign no load-balancer address
    assert "internal" in out["saxml_endpoint_note"]
    assert out["saxml_port_forward_command"] == "kubectl -n saxml-175b port-forward svc/sax-http-lb 8888:8888"
    assert "/listcell" in out["saxml_listcell_command"]
    assert '"model": "/sax/test/spmd"' in out["saxml_listcell_command"]
    assert "/generate" in out["saxml_generate_command"]
    assert '"query"' in out["saxml_generate_command"]
    assert "/unpublish" in out["saxml_unpublish_command"]


def test_load_balancer_endpoint_reads_the_service_status() -> None:
    @dataclasses.dataclass
    class Ingress:
        ip: str | None = None
        hostname: str | None = None

    @dataclasses.dataclass
    class LB:
        ingress: list[Ingress]

    @dataclasses.dataclass
    class Status:
        load_balancer: LB

    endpoint = saxml_component._load_balancer_endpoint
    assert endpoint(Status(LB([Ingress(ip="10.1.2.3")]))) == "http://10.1.2.3:8888"
    assert endpoint(Status(LB([]))).startswith("pending")
    assert endpoint(None).startswith("pending")


def plan_variant(tpu: dict[str, Any]) -> report.PlanResult:
    stack_file = stacks.read_stack_file(stacks.stack_path(STACK))
    values = dict(stack_file.values)
    values["gke-tpu-llm:tpu"] = {**values["gke-tpu-llm:tpu"], **tpu}
    return report.plan(dataclasses.replace(stack_file, values=values))


@pytest.mark.parametrize("slices", [1, 3])
def test_acceptance_slice_count_changes_replicas_and_publish_consistently(slices: int) -> None:
    result = plan_variant({"slices": slices})
    pools = [r for r in result.resources if r.type == "gcp:container/nodePool:NodePool" and r.inputs["name"] != "system"]
    jobset = next(m for m in result.manifests if m["kind"] == "JobSet")
    job = next(m for m in result.manifests if m["kind"] == "Job")
    rjob = jobset["spec"]["replicatedJobs"][0]
    assert len(pools) == rjob["replicas"] == slices
    assert env_of(job["spec"]["template"]["spec"]["containers"][0])["SAX_REPLICAS"] == str(slices)
    assert rjob["template"]["spec"]["parallelism"] == 8
    assert validate_all(result.manifests) == []


@pytest.mark.parametrize("topology", ["4x4", "8x8"])
def test_acceptance_other_v5e_topology_fails_clearly_because_the_servable_mesh_is_32(topology: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan_variant({"topology": topology})
    text = str(info.value)
    assert "gke-tpu-llm:tpu.topology" in text
    assert "saxml-175b-32test" in text
