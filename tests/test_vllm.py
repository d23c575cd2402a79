"""vLLM workload (issue 6): spec rules, pure renderers, components under mocks, the llama-70b plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.catalog.images import pinned
from components.catalog.pinning import image_problem
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.resolve import StackPlan, resolve
from components.platform.addons.metrics_adapter import MetricsAdapter
from components.render import custom_metrics
from components.tools import mockengine, report
from components.tools.cli import main as cli
from components.tools.validate import validate_all
from components.workloads.vllm import clients, render
from components.workloads.vllm.component import VllmServer
from components.workloads.vllm.spec import VllmSpec, settings
from tests import tpu_test_catalog
from tests.conftest import make_config, planned

VLLM: dict[str, Any] = {
    "tpu": {
        "topology": "2x4",
        "machineType": "ct6e-standard-8t",
        "zone": "us-east5-b",
        "autoscaling": {"minNodes": 1, "maxNodes": 2},
    },
    "buckets": {"models": {"purpose": "hf-weights-cache"}},
    "identity": {"serviceAccount": "vllm", "bucketRoles": {"models": "roles/storage.objectUser"}},
    "workload": {"kind": "vllm", "model": "llama3.1-70b", "maxTargetLength": 4096},
}


def vllm_plan(**workload_vllm: Any) -> StackPlan:
    override = json.loads(json.dumps(VLLM))
    if workload_vllm:
        override["workload"]["vllm"] = workload_vllm
    return resolve(make_config("llama-70b", **override))


def problems(**override: Any) -> list[str]:
    merged = json.loads(json.dumps(VLLM))
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    with pytest.raises(ConfigError) as info:
        make_config("llama-70b", **merged)
    return [str(v) for v in info.value.violations]


def deployment(plan: StackPlan) -> dict[str, Any]:
    return render.render_deployment(plan, namespace="llm", service_account="vllm", bucket_name="b")


def container(plan: StackPlan) -> dict[str, Any]:
    (found,) = deployment(plan)["spec"]["template"]["spec"]["containers"]
    assert isinstance(found, dict)
    return found


def of_kind(manifests: list[dict[str, Any]], kind: str, namespace: str | None = "llama-70b") -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind and m["metadata"].get("namespace") == namespace]


def one_of_kind(manifests: list[dict[str, Any]], kind: str, namespace: str | None = "llama-70b") -> dict[str, Any]:
    (found,) = of_kind(manifests, kind, namespace)
    return found


def named(manifests: list[dict[str, Any]], kind: str, name: str = "vllm", namespace: str = "llama-70b") -> dict[str, Any]:
    """The one object of ``kind`` called ``name`` (the gateway front door adds its endpoint picker's of each kind)."""
    (found,) = [m for m in of_kind(manifests, kind, namespace) if m["metadata"]["name"] == name]
    return found


def stack_file(tmp_path: Path, *, token: str | None, workload_vllm: dict[str, Any] | None = None) -> stacks.StackFile:
    """The llama-70b stack file, optionally with a real-looking token and a vllm section override."""
    doc = yaml.safe_load(stacks.stack_path("llama-70b").read_text())
    if workload_vllm is not None:
        doc["config"]["gke-tpu-llm:workload"]["vllm"] = workload_vllm
    path = tmp_path / "Pulumi.llama-70b.yaml"
    path.write_text(yaml.safe_dump(doc))
    parsed = stacks.read_stack_file(path, "llama-70b", fill_secrets=False)
    if token is None:
        return parsed
    values = {**parsed.values, "gke-tpu-llm:hfToken": token}
    return stacks.StackFile(parsed.stack, path, values, (*parsed.secret_keys, "gke-tpu-llm:hfToken"))


# ---------------------------------------------------------------- spec and config rules


def test_spec_image_must_be_pinned() -> None:
    assert image_problem("vllm/vllm-tpu:v0.27.0") is None
    assert image_problem("docker.io/vllm/vllm-tpu@sha256:" + "a" * 64) is None
    for floating in ("vllm/vllm-tpu:latest", "vllm/vllm-tpu", "vllm/vllm-tpu:nightly"):
        assert image_problem(floating) is not None
    assert VllmSpec().image is None  # the engine catalog's release image (components.workloads.vllm.engine)
    (msg,) = problems(workload={"vllm": {"image": "vllm/vllm-tpu:latest"}})
    assert msg.startswith("gke-tpu-llm:workload.vllm.image: 'vllm/vllm-tpu:latest' uses the floating tag 'latest'")


def test_config_hpa_max_above_pool_max_is_an_error() -> None:
    (msg,) = problems(workload={"vllm": {"autoscaling": {"maxReplicas": 3}}})
    assert msg.startswith("gke-tpu-llm:workload.vllm.autoscaling.maxReplicas: 3 is more replicas than the TPU pools can host")
    assert "tpu.autoscaling.maxNodes" in msg
    (low,) = problems(workload={"vllm": {"autoscaling": {"minReplicas": 3}}})
    assert "minReplicas: 3" in low
    # a pool without autoscaling hosts one replica per slice
    (fixed,) = problems(tpu={"autoscaling": None}, workload={"vllm": {"autoscaling": {"maxReplicas": 2}}})
    assert "from tpu.slices" in fixed


def test_config_hpa_bounds_default_to_the_pool() -> None:
    plan = vllm_plan()
    assert render.replicas(plan) == (1, 2)
    scaled = resolve(make_config("s", **{**VLLM, "tpu": {**VLLM["tpu"], "autoscaling": {"minNodes": 0, "maxNodes": 4}}}))
    assert render.replicas(scaled) == (1, 4)  # at least one replica even when the pool may be empty


def test_config_vllm_rules_report_every_problem() -> None:
    found = problems(
        workload={
            "weights": "int8",
            "vllm": {"gcsFuse": {"fileCacheGi": 900}, "autoscaling": {"metric": "kv_cache_usage_perc", "target": 5}},
        }
    )
    assert any("target: 5.0 is above 1 for kv_cache_usage_perc" in p for p in found)
    found = problems(workload={"weights": "int8", "vllm": {"gcsFuse": {"fileCacheGi": 900}}})
    assert any(p.startswith("gke-tpu-llm:workload.weights: 'int8' is not supported") for p in found)
    assert any(p.startswith("gke-tpu-llm:workload.vllm.gcsFuse.fileCacheGi: 900 GiB of RAM cache") for p in found)


def test_config_model_without_hf_repository_needs_a_model_id() -> None:
    (msg,) = problems(workload={"model": "saxml-175b-32test"})
    assert msg.startswith("gke-tpu-llm:workload.vllm.modelId: None is required: no Hugging Face repository")
    config = make_config("s", **{**VLLM, "workload": {**VLLM["workload"], "vllm": {"modelId": "org/model"}}})
    assert settings(config).hf_model("saxml-175b-32test") == "org/model"


# ---------------------------------------------------------------- pure renderers


def test_render_args_derive_tp_length_model_and_batch() -> None:
    plan = vllm_plan()
    args = container(plan)["args"]
    assert args[:6] == [
        "--host=0.0.0.0",
        "--port=8000",
        f"--tensor-parallel-size={plan.flags['tensor_parallel_size']}",
        "--max-model-len=4096",
        "--model=meta-llama/Llama-3.1-70B",
        "--download-dir=/data",
    ]
    assert plan.flags["tensor_parallel_size"] == 8
    assert "--max-num-seqs=128" in args
    assert args[-1] == "--gpu-memory-utilization=0.9"  # 1 - the plan's reserve share (vLLM's 0.10)
    batched = resolve(make_config("s", **{**VLLM, "workload": {**VLLM["workload"], "batchSize": 16}}))
    assert "--max-num-seqs=16" in container(batched)["args"]


def test_render_deployment_takes_tpu_numbers_from_the_slice() -> None:
    plan = vllm_plan()
    pod = deployment(plan)["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    assert box["resources"] == {"requests": {"google.com/tpu": "8"}, "limits": {"google.com/tpu": "8"}}
    assert pod["nodeSelector"] == plan.slice.node_selector
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["serviceAccountName"] == "vllm"
    assert box["env"][0] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}


def test_render_fuse_cache_is_used_bounded_and_in_memory() -> None:
    plan = vllm_plan()
    dep = deployment(plan)
    pod = dep["spec"]["template"]
    assert pod["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    assert pod["metadata"]["annotations"]["gke-gcsfuse/memory-limit"] == "0"
    assert pod["metadata"]["annotations"]["gke-gcsfuse/ephemeral-storage-limit"] == "50Gi"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    fuse = volumes["gcs-fuse-csi-ephemeral"]["csi"]
    assert fuse["driver"] == "gcsfuse.csi.storage.gke.io"
    options = dict(o.rsplit(":", 1) for o in fuse["volumeAttributes"]["mountOptions"].split(",") if ":" in o)
    cache_mb = int(options["file-cache:max-size-mb"])
    assert cache_mb > 0  # 0 disables the cache; -1 fills the volume until writes fail
    # the model's bf16 checkpoint (~141 GB) fits, with room
    assert cache_mb * 2**20 > 70_553_706_496 * 2
    assert options["file-cache:enable-parallel-downloads"] == "true"
    assert options["file-cache:cache-file-for-range-read"] == "true"
    cache = volumes["gke-gcsfuse-cache"]["emptyDir"]
    assert cache["medium"] == "Memory"
    assert int(cache["sizeLimit"].removesuffix("Gi")) * 1024 >= cache_mb
    mounts = {m["name"]: m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["gcs-fuse-csi-ephemeral"] == "/data"  # vLLM's --download-dir is the bucket
    assert "gke-gcsfuse-cache" not in mounts  # the sidecar mounts it, not vLLM


def test_render_probes_cover_a_70b_first_load() -> None:
    plan = vllm_plan()
    box = container(plan)
    startup = box["startupProbe"]
    assert startup["httpGet"] == {"path": "/health", "port": "http"}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600
    assert box["readinessProbe"].get("initialDelaySeconds", 0) != 15
    assert box["livenessProbe"]["periodSeconds"] * box["livenessProbe"]["failureThreshold"] >= 120
    # pulumi's rollout wait and the Deployment's progress deadline outlast the startup budget
    dep = deployment(plan)
    timeout = int(dep["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
    assert timeout == dep["spec"]["progressDeadlineSeconds"] > 3600
    shorter = vllm_plan(probes={"startupTimeoutSeconds": 600})
    assert container(shorter)["startupProbe"]["failureThreshold"] == 60


def test_render_service_internal_by_default_external_only_with_ranges_and_api_key() -> None:
    internal = render.render_service(vllm_plan(), namespace="llm")
    assert internal["spec"]["type"] == "LoadBalancer"
    assert internal["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    # Pulumi waits for a ready endpoint as long as for the Deployment's first load.
    assert internal["metadata"]["annotations"] == {
        "pulumi.com/timeoutSeconds": "5400",
        "networking.gke.io/load-balancer-type": "Internal",
    }
    narrowed = render.render_service(vllm_plan(service={"sourceRanges": ["10.0.0.0/8"]}), namespace="llm")
    assert narrowed["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    assert any("is not a CIDR range" in p for p in problems(workload={"vllm": {"service": {"sourceRanges": ["x"]}}}))
    # vLLM's API key leaves /invocations and others open, so nothing makes a public vLLM authenticated.
    external = {"type": "external", "sourceRanges": ["203.0.113.0/24"], "auth": "api-key"}
    (found,) = problems(workload={"vllm": {"service": external}})
    assert found.startswith("gke-tpu-llm:workload.vllm.service.type: 'external' would put vLLM outside the VPC")
    assert "/invocations" in found
    keyed = vllm_plan(service={"auth": "api-key"})  # defence in depth behind the internal load balancer
    svc = render.render_service(keyed, namespace="llm")
    assert svc["metadata"]["annotations"]["gke-tpu-llm/auth"] == "api-key"
    assert svc["metadata"]["annotations"]["networking.gke.io/load-balancer-type"] == "Internal"
    container = deployment(keyed)["spec"]["template"]["spec"]["containers"][0]
    key_env = {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "vllm-api-key", "key": "token"}}}
    assert key_env in container["env"]
    assert not any("api-key" in a or "api_key" in a for a in container["args"])  # never on the command line
    curl = clients.curl_example(keyed, "llm")
    assert curl.startswith("pulumi config get gke-tpu-llm:vllmApiKey | sed 's/^/Authorization: Bearer /' | curl ")
    assert curl.endswith(" -H @-")  # the key reaches curl on stdin, not in its argv


def test_render_hpa_metric_choice_and_replicas_left_to_it() -> None:
    plan = vllm_plan()
    hpa = render.render_hpa(plan, namespace="llm")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["pods"]["metric"]["name"] == "prometheus.googleapis.com|vllm:num_requests_waiting|gauge"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "10"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 2)
    assert "replicas" not in deployment(plan)["spec"]  # the HPA owns it; pulumi up must not reset it
    latency = render.render_hpa(vllm_plan(autoscaling={"metric": "kv_cache_usage_perc"}), namespace="llm")
    (metric,) = latency["spec"]["metrics"]
    assert metric["pods"]["metric"]["name"] == "prometheus.googleapis.com|vllm:kv_cache_usage_perc|gauge"
    assert metric["pods"]["target"]["averageValue"] == "700m"
    fixed = vllm_plan(autoscaling={"enabled": False, "minReplicas": 2})
    assert deployment(fixed)["spec"]["replicas"] == 2


def test_render_pod_monitoring_selects_the_server_pods() -> None:
    plan = vllm_plan()
    monitor = render.render_pod_monitoring(plan, namespace="llm")
    labels = deployment(plan)["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]


def test_render_every_object_validates() -> None:
    plan = vllm_plan(service={"type": "internal"}, autoscaling={"metric": "kv_cache_usage_perc"})
    objects = [
        render.render_hf_secret("llama-70b", "llm", stacks.SECRET_PLACEHOLDER),
        deployment(plan),
        render.render_service(plan, namespace="llm"),
        render.render_pod_monitoring(plan, namespace="llm"),
        render.render_hpa(plan, namespace="llm"),
        *custom_metrics.render_objects("llama-70b", "v0.16.10-gke.0"),
    ]
    assert validate_all(objects) == []
    broken = deployment(plan)
    broken["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["failureThreshold"] = 360.0
    assert validate_all([broken])  # the validator is strict enough to fail


def test_render_metrics_adapter_is_the_pinned_upstream_install() -> None:
    objects = custom_metrics.render_objects("s", "v0.16.10-gke.0")
    kinds = [o["kind"] for o in objects]
    assert kinds.count("APIService") == 3
    (dep,) = [o for o in objects if o["kind"] == "Deployment"]
    (box,) = dep["spec"]["template"]["spec"]["containers"]
    assert box["image"] == pinned("gcr.io/gke-release/custom-metrics-stackdriver-adapter", "v0.16.10-gke.0")
    assert "--use-new-resource-model=true" in box["command"]
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "custom-metrics-stackdriver-adapter"
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "APIService"} == {
        "v1beta1.custom.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
    }


# ---------------------------------------------------------------- the llama-70b plan (acceptance)


def test_plan_llama70b_pool_addon_and_deployment() -> None:
    data = report.plan_json(planned("llama-70b"))
    (pool,) = data["slices"]
    assert (pool["machine_type"], pool["hosts"], pool["nodes_min"], pool["nodes_max"]) == ("ct6e-standard-8t", 1, 1, 2)
    assert "gcsFuseCsiDriver" in data["cluster"]["addons"]
    (node_pool,) = [r for r in data["resources"] if r["type"] == "gcp:container/nodePool:NodePool" and "tpu" in r["name"]]
    assert node_pool["inputs"]["autoscaling"]["totalMaxNodeCount"] == 2
    dep = named(data["manifests"], "Deployment")
    box = dep["spec"]["template"]["spec"]["containers"][0]
    assert "--tensor-parallel-size=8" in box["args"]
    assert box["resources"]["limits"]["google.com/tpu"] == "8"
    assert dep["spec"]["template"]["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    (fuse,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if "csi" in v]
    assert fuse["csi"]["volumeAttributes"]["bucketName"] == "your-project-id-llama-70b-models"


def test_plan_llama70b_secret_service_monitoring_hpa_and_the_fallbacks_adapter() -> None:
    data = report.plan_json(planned("llama-70b"))
    manifests = data["manifests"]
    secret = one_of_kind(manifests, "Secret")
    assert secret["stringData"] == {"token": stacks.SECRET_PLACEHOLDER}
    dep = named(manifests, "Deployment")
    refs = [e["valueFrom"]["secretKeyRef"] for e in dep["spec"]["template"]["spec"]["containers"][0]["env"] if "valueFrom" in e]
    assert refs == [{"name": secret["metadata"]["name"], "key": "token"}]
    service = named(manifests, "Service")
    assert service["spec"]["type"] == "ClusterIP"  # the stack's front door is the internal gateway (tests/test_front_door.py)
    assert service["spec"]["ports"][0]["port"] == 8000
    assert named(manifests, "PodMonitoring")["spec"]["endpoints"][0]["path"] == "/metrics"
    hpa = one_of_kind(manifests, "HorizontalPodAutoscaler")
    assert (
        (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
        == (1, 2)
        == (
            data["slices"][0]["nodes_min"],
            data["slices"][0]["nodes_max"],
        )
    )
    assert validate_all(manifests) == []
    # The adapter: on llama-70b-fallback, whose cluster version is not pinned (llama-70b: AutoscalingMetric).
    data = report.plan_json(planned("llama-70b-fallback"))
    manifests = data["manifests"]
    assert one_of_kind(manifests, "Deployment", "custom-metrics")["metadata"]["name"] == "custom-metrics-stackdriver-adapter"
    (iam,) = [
        r
        for r in data["resources"]
        if r["type"] == "gcp:projects/iAMMember:IAMMember" and r["inputs"]["role"] != "roles/container.defaultNodeServiceAccount"
    ]
    assert iam["inputs"]["role"] == "roles/monitoring.viewer"
    assert iam["inputs"]["member"].endswith("/subject/ns/custom-metrics/sa/custom-metrics-stackdriver-adapter")
    assert iam["inputs"]["member"].startswith("principal://iam.googleapis.com/projects/123456789012/")
    assert validate_all(manifests) == []


def test_plan_llama70b_outputs_endpoint_and_curl() -> None:
    outputs = planned("llama-70b").outputs  # behind the internal gateway: its address, on :80
    assert outputs["vllm_endpoint_command"] == (
        "kubectl get gateway vllm-gateway -n llama-70b -o jsonpath='{.status.addresses[0].value}'"
    )
    assert outputs["vllm_curl"].startswith(f"curl http://$({outputs['vllm_endpoint_command']})/v1/completions")
    assert '"model": "meta-llama/Llama-3.1-70B"' in outputs["vllm_curl"]
    assert outputs["vllm_endpoint"] == "what vllm_endpoint_command prints"


def test_service_front_door_outputs_the_load_balancers_endpoint_and_curl() -> None:
    plan = vllm_plan()
    assert clients.endpoint_command("llm") == "kubectl get service vllm -n llm -o jsonpath='{.status.loadBalancer.ingress[0].ip}'"
    assert clients.curl_example(plan, "llm").startswith(f"curl http://$({clients.endpoint_command('llm')}):8000/v1/completions")


def test_plan_llama70b_component_structure() -> None:
    fallback = planned("llama-70b-fallback").resources  # the adapter path: the HPA after its APIService
    (adapter,) = [r for r in fallback if r.type == MetricsAdapter.TYPE]
    assert all(
        r.provider == "llama-70b-fallback-k8s"
        for r in fallback
        if r.custom and r.parent == adapter.urn and r.type.startswith("kubernetes:")
    )
    (old_hpa,) = [r for r in fallback if r.type == "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"]
    assert any(
        {r.urn: r for r in fallback}[d].type == "kubernetes:apiregistration.k8s.io/v1:APIService" for d in old_hpa.dependencies
    )
    resources = planned("llama-70b").resources
    by_urn = {r.urn: r for r in resources}
    (server,) = [r for r in resources if r.type == VllmServer.TYPE]
    assert not [r for r in resources if r.type == MetricsAdapter.TYPE]
    for r in resources:
        if r.type.startswith("kubernetes:") and r.custom and r.parent == server.urn:
            assert r.provider == "llama-70b-k8s"
    (hpa,) = [r for r in resources if r.type == "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"]
    assert hpa.parent == server.urn
    # After its AutoscalingMetric and the cluster (whose HPA performance profile it needs).
    assert {"kubernetes:autoscaling.gke.io/v1beta1:AutoscalingMetric", "gcp:container/cluster:Cluster"} <= {
        by_urn[d].type for d in hpa.dependencies
    }
    (dep,) = [r for r in resources if r.type == "kubernetes:apps/v1:Deployment" and r.parent == server.urn]
    dep_types = {by_urn[d].type for d in dep.dependencies}
    assert {"kubernetes:core/v1:Secret", "kubernetes:core/v1:ServiceAccount", "gcp:storage/bucket:Bucket"} <= dep_types


def test_endpoint_url_reads_the_load_balancer_address() -> None:
    from pulumi_kubernetes.core.v1 import outputs

    from components.workloads.vllm.component import _endpoint_url

    typed = outputs.ServiceStatus(
        load_balancer=outputs.LoadBalancerStatus(ingress=[outputs.LoadBalancerIngress(ip="198.51.100.7")])
    )
    assert _endpoint_url(typed) == "http://198.51.100.7:8000"
    assert _endpoint_url({"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}) == "http://198.51.100.7:8000"
    assert _endpoint_url(None).startswith("pending")
    assert _endpoint_url({"loadBalancer": {}}).startswith("pending")


def test_program_never_exposes_the_token(tmp_path: Path) -> None:
    token = "hf_Zq8LiveTokenValueThatMustNotLeak"
    records, outputs = mockengine.run_program(stack_file(tmp_path, token=token))
    dumped = json.dumps([r.to_dict() for r in records]) + json.dumps(outputs)
    assert token not in dumped
    (secret,) = [r for r in records if r.type == "kubernetes:core/v1:Secret"]
    assert secret.inputs["stringData"] == {"token": stacks.SECRET_PLACEHOLDER}


def test_program_without_token_errors_and_registers_nothing(tmp_path: Path) -> None:
    missing = stack_file(tmp_path, token=None)
    with pytest.raises(ConfigError, match="hfToken: None is required for vllm"):
        report.plan(missing)
    seen: list[mockengine.Registration] = []
    with pytest.raises(pulumi.RunError, match="pulumi config set --secret gke-tpu-llm:hfToken"):
        mockengine.run_program(missing, records=seen)
    assert seen == []


def test_cli_hpa_max_above_pool_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = stack_file(tmp_path, token=None, workload_vllm={"autoscaling": {"maxReplicas": 3}}).path
    assert cli(["plan", "--config", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "gke-tpu-llm:workload.vllm.autoscaling.maxReplicas: 3 is more replicas than the TPU pools can host" in err


def test_render_rollout_never_waits_for_a_node_that_cannot_exist() -> None:
    # Shipped stack: the HPA may run 2 replicas on a pool of at most 2 single-host nodes, so a surge
    # pod could stay Pending forever at full scale: replace one replica at a time.
    full = render.render_deployment(vllm_plan(), namespace="llm", service_account="vllm", bucket_name="b")
    assert full["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    # With a spare node beyond the HPA's maximum, surge first and never drop a serving replica.
    spare = render.render_deployment(
        vllm_plan(autoscaling={"maxReplicas": 1}), namespace="llm", service_account="vllm", bucket_name="b"
    )
    assert spare["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


# ---------------------------------------------------------------- multi-host: LeaderWorkerSet + Ray (issue 15)

MULTI: dict[str, Any] = {
    "tpu": {"generation": "v6e", "topology": "4x8", "zone": "us-east5-b"},
    "buckets": {"models": {"purpose": "hf-weights-cache"}},
    "identity": {"serviceAccount": "vllm", "bucketRoles": {"models": "roles/storage.objectUser"}},
    "workload": {
        "kind": "vllm",
        "model": "llama3.1-405b",
        "maxTargetLength": 4096,
        "batchSize": 8,
        "vllm": {"gcsFuse": {"fileCacheGi": 300}, "autoscaling": {"enabled": False}},
    },
}


def multi_config(topology: str = "4x8", **workload: Any) -> Any:
    override = json.loads(json.dumps(MULTI))
    override["tpu"]["topology"] = topology
    override["workload"].update(workload)
    return make_config("llama-405b-vllm", **override)


def lws_of(plan: StackPlan) -> dict[str, Any]:
    return render.render_server(plan, namespace="llm", service_account="vllm", bucket_name="b")


def test_multi_host_lws_group_size_is_the_slices_hosts() -> None:
    for topology, hosts in (("4x8", 8), ("8x8", 16)):
        plan = resolve(multi_config(topology))
        lws = lws_of(plan)
        assert (lws["apiVersion"], lws["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
        template = lws["spec"]["leaderWorkerTemplate"]
        assert template["size"] == hosts == plan.slice.hosts
        assert lws["spec"]["replicas"] == 1  # one group per slice
        for role in ("leaderTemplate", "workerTemplate"):
            pod = template[role]["spec"]
            (box,) = pod["containers"]
            assert box["resources"]["limits"]["google.com/tpu"] == str(plan.slice.tpu_per_host) == "4"
            assert pod["nodeSelector"] == dict(plan.slice.node_selector)
            env = {e["name"]: e.get("value") for e in box["env"]}
            assert env["TPU_MULTIHOST_BACKEND"] == "ray"
            assert env["VLLM_XLA_CACHE_PATH"] == "/data/xla-cache/$(POD_NAME)"  # persistent, one dir per pod
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            assert pod["automountServiceAccountToken"] is False
        leader = template["leaderTemplate"]["spec"]["containers"][0]
        worker = template["workerTemplate"]["spec"]["containers"][0]
        assert {"readinessProbe", "startupProbe", "livenessProbe"} <= set(leader)  # readiness on the leader only
        assert not {"readinessProbe", "startupProbe", "livenessProbe"} & set(worker)
        assert "ray start --head" in leader["command"][2]
        assert '"$LWS_GROUP_SIZE"' in leader["command"][2]
        assert '--address="$LWS_LEADER_ADDRESS:6379"' in worker["command"][2]
        assert "--distributed-executor-backend=ray" in leader["args"]
        # vLLM's Ray executor copies the leader's VLLM_* variables to every worker unless the leader
        # lists them in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json: each host keeps its own cache dir.
        script = leader["command"][2]
        assert '"$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json"' in script
        assert "echo '[\"VLLM_XLA_CACHE_PATH\"]'" in script
        assert script.index("ray_non_carry_over_env_vars.json") < script.index("exec python3 -m vllm")
        assert {e["name"]: e.get("value") for e in leader["env"]}["VLLM_CONFIG_ROOT"] == render.VLLM_CONFIG_ROOT


def test_multi_host_parallelism_is_pipeline_over_hosts_times_tensor_within() -> None:
    for topology in ("4x8", "8x8"):
        plan = resolve(multi_config(topology))
        flags, tpu = plan.flags, plan.slice
        assert flags["pipeline_parallel_size"] == tpu.hosts
        assert flags["tensor_parallel_size"] == tpu.chips_per_host
        assert flags["pipeline_parallel_size"] * flags["tensor_parallel_size"] == tpu.chips
        args = lws_of(plan)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["args"]
        assert f"--pipeline-parallel-size={tpu.hosts}" in args
        assert f"--tensor-parallel-size={tpu.chips_per_host}" in args
    # The memory model: each chip holds its stage's layers (126 over 8 stages: the busiest has 16).
    plan = resolve(multi_config("4x8"))
    (shard,) = {a.shard_shape[0] for n, a in plan.capacity.arrays.items() if n.startswith("decoder/")}
    assert shard == 16


def test_multi_host_405b_bf16_needs_4x8_not_4x4() -> None:
    with pytest.raises(ConfigError, match=r"cannot run llama3\.1-405b"):
        resolve(multi_config("4x4"))
    assert resolve(multi_config("4x8")).capacity.fits


def test_multi_host_service_and_policies_select_the_leader_only() -> None:
    plan = resolve(multi_config())
    service = render.render_service(plan, namespace="llm")
    assert service["spec"]["selector"] == {
        **render.selector_labels("llama-405b-vllm"),
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    template = lws_of(plan)["spec"]["leaderWorkerTemplate"]
    leader_labels = template["leaderTemplate"]["metadata"]["labels"]
    worker_labels = template["workerTemplate"]["metadata"]["labels"]
    assert all(leader_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    assert not all(worker_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    assert service["metadata"]["annotations"]["networking.gke.io/load-balancer-type"] == "Internal"
    names = [i.name for i in render.network_intents(plan)]
    assert names == ["vllm-api", "vllm-metrics", "ray-group"]
    # Single host: no Ray flow, the Service selects the Deployment's pods as before.
    assert [i.name for i in render.network_intents(vllm_plan())] == ["vllm-api", "vllm-metrics"]


def test_multi_host_untested_parallelism_is_refused_unless_opted_in() -> None:
    with pytest.raises(ConfigError) as info:
        multi_config(parallelism={"pipeline": 4, "tensor": 8})
    text = str(info.value)
    assert "workload.parallelism" in text
    assert "untested" in text
    assert "allowUntestedParallelism" in text
    assert "tensor parallelism across hosts" in text
    opted = json.loads(json.dumps(MULTI["workload"]["vllm"]))
    opted["allowUntestedParallelism"] = True
    plan = resolve(multi_config(parallelism={"pipeline": 4, "tensor": 8}, vllm=opted))
    assert (plan.flags["pipeline_parallel_size"], plan.flags["tensor_parallel_size"]) == (4, 8)
    # The tested layout, pinned, needs no opt-in.
    assert resolve(multi_config(parallelism={"pipeline": 8, "tensor": 4})).flags["tensor_parallel_size"] == 4


def test_multi_host_refuses_the_single_host_hpa() -> None:
    vllm = json.loads(json.dumps(MULTI["workload"]["vllm"]))
    vllm["autoscaling"]["enabled"] = True
    with pytest.raises(ConfigError, match=r"workload\.vllm\.autoscaling\.enabled"):
        multi_config(vllm=vllm)


def test_single_host_stays_a_tensor_only_deployment() -> None:
    plan = vllm_plan()
    assert dict(plan.capacity.sharding.mesh_axes) == {"tensor": 8}
    assert plan.flags == {"tensor_parallel_size": 8}
    assert render.render_server(plan, namespace="llm", service_account="vllm", bucket_name="b") == deployment(plan)
    args = container(plan)["args"]
    assert not [a for a in args if "pipeline" in a or "distributed-executor" in a]
    assert render.render_service(plan, namespace="llm")["spec"]["selector"] == render.selector_labels("llama-70b")
    # Pipeline parallelism pinned on one host (passing single-host in tpu-inference's matrix) reaches vLLM.
    workload = {**VLLM["workload"], "parallelism": {"pipeline": 2, "tensor": -1}}
    pinned = resolve(make_config("llama-70b", **{**VLLM, "workload": workload}))
    pinned_args = render.vllm_args(pinned)
    assert "--pipeline-parallel-size=2" in pinned_args
    assert "--tensor-parallel-size=4" in pinned_args
    assert "--distributed-executor-backend=ray" not in pinned_args


def test_plan_llama405b_vllm_installs_lws_and_validates() -> None:
    result = planned("llama-405b-vllm")
    assert validate_all(result.manifests) == []
    kinds = sorted(m["kind"] for m in result.manifests)
    assert "LeaderWorkerSet" in kinds
    assert "HorizontalPodAutoscaler" not in kinds
    # The one Deployment is the gateway's endpoint picker, on the system pool; the server is the LWS.
    assert [m["metadata"]["name"] for m in result.manifests if m["kind"] == "Deployment"] == ["vllm-epp"]
    releases = [r for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    assert [r.inputs["name"] for r in releases] == ["lws"]
    data = report.plan_json(result)
    assert data["capacity"]["sharding"]["flags"] == {"pipeline_parallel_size": 8, "tensor_parallel_size": 4}
    outputs = data["outputs"]
    assert (outputs["vllm_lws_group_size"], outputs["vllm_tpu_per_pod"]) == (8, 4)
    assert "vllm_lws_group_size" not in report.plan_json(planned("llama-70b"))["outputs"]
    assert data["capacity"]["memory"]["fits"]


# ---------------------------------------------------------------- fp8 and Ironwood (issue 15)

IRONWOOD: dict[str, Any] = {
    "gcp:region": "us-central1",
    "cluster": {"version": "1.34.0-gke.2201000"},
    "tpu": {"generation": "tpu7x", "topology": "2x2x1", "zone": "us-central1-c"},
    "workload": {"kind": "vllm", "model": "llama3.1-405b", "maxTargetLength": 8192, "batchSize": 64},
}


def ironwood(**workload: Any) -> StackPlan:
    override = json.loads(json.dumps(IRONWOOD))
    override["workload"].update(workload)
    return resolve(make_config("ironwood", **override))


def test_fp8_serves_the_fp8_checkpoint_with_an_fp8_kv_cache_flag() -> None:
    plan = ironwood(weights="fp8", kvCache="fp8")
    args = render.vllm_args(plan)
    assert "--model=neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8-dynamic" in args
    assert "--kv-cache-dtype=fp8" in args
    assert "--tensor-parallel-size=8" in args  # 4 tpu7x chips = 8 JAX devices
    assert not [a for a in args if a.startswith("--quantization")]  # read from the checkpoint's config.json
    # fp8 weights alone: the FP8 checkpoint, a bf16 KV cache (no flag).
    weights_only = render.vllm_args(ironwood(weights="fp8"))
    assert "--model=neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8-dynamic" in weights_only
    assert not [a for a in weights_only if a.startswith("--kv-cache-dtype")]
    # The bf16 stacks keep their args: no KV dtype flag, the bf16 repository.
    assert not [a for a in container(vllm_plan())["args"] if a.startswith("--kv-cache-dtype")]


def test_fp8_file_cache_holds_the_one_byte_checkpoint() -> None:
    spec = settings(ironwood(weights="fp8").config)
    assert spec.file_cache_gi("llama3.1-405b", "fp8") == 416  # 405.85e9 B x 1.1 / 2^30, rounded up
    assert spec.file_cache_gi("llama3.1-405b") == 832
    assert render.cache_volume_size(ironwood(weights="fp8")).endswith("Gi")


def test_default_file_cache_is_capped_at_half_the_host() -> None:
    # 405B bf16 is ~832 GiB with its 10%; a ct6e-standard-4t host (720 GB) lends the cache at most half.
    assert resolve(multi_config("4x8")).slice.machine_type == "ct6e-standard-4t"
    spec = settings(ironwood(weights="fp8").config)  # no fileCacheGi configured
    assert spec.file_cache_gi("llama3.1-405b", None, "ct6e-standard-4t") == 335 == int(720e9 * 0.5 // 2**30)
    assert spec.file_cache_gi("llama3.1-405b", None, "ct6e-standard-8t") == 670
    assert spec.file_cache_gi("llama3.1-405b") == 832  # RAM not known: the whole checkpoint


def test_fp8_without_an_fp8_checkpoint_needs_a_model_id() -> None:
    (msg,) = problems(workload={"weights": "fp8"})
    assert msg.startswith("gke-tpu-llm:workload.vllm.modelId: None is required: no Hugging Face FP8 repository")
    assert "llama3.1-405b -> neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8-dynamic" in msg
    config = make_config("s", **{**VLLM, "workload": {**VLLM["workload"], "weights": "fp8", "vllm": {"modelId": "org/m-fp8"}}})
    assert settings(config).hf_model("llama3.1-70b", "fp8") == "org/m-fp8"


def test_fp8_is_refused_on_a_generation_without_an_fp8_path(monkeypatch: pytest.MonkeyPatch) -> None:
    tpu_test_catalog.install(monkeypatch)  # the allowed generations listed are the catalog's
    with pytest.raises(ConfigError) as info:
        make_config(
            "s",
            **{
                **VLLM,
                "tpu": {"generation": "v5e", "topology": "2x4", "machineType": "ct5lp-hightpu-8t", "zone": "us-east5-b"},
                "workload": {**VLLM["workload"], "model": "llama3-8b", "kvCache": "fp8"},
            },
        )
    (msg,) = [str(v) for v in info.value.violations if "workload.kvCache" in str(v)]
    assert "needs a TPU generation with an fp8 path; v5e has none" in msg
    assert "tpu.generation: v5p, v6e, tpu7x" in msg


@pytest.mark.parametrize(("key", "dtype"), [("weights", "fp8"), ("kvCache", "fp8")])
def test_fp8_is_refused_for_maxtext_and_saxml_kinds(key: str, dtype: str) -> None:
    # The default test config is the JetStream (MaxText engine) 405B stack.
    with pytest.raises(ConfigError) as info:
        make_config("s", workload={key: dtype})
    (msg,) = [str(v) for v in info.value.violations if f"workload.{key}" in str(v)]
    assert "is not served by kind jetstream-pathways: fp8 weights and KV cache run on vLLM only" in msg
    assert "use kind vllm" in msg


def test_plan_llama405b_ironwood_one_host_tp8_fp8() -> None:
    result = planned("llama-405b-ironwood")
    assert validate_all(result.manifests) == []
    data = report.plan_json(result)
    capacity = data["capacity"]
    assert capacity["slice"]["key"] == "tpu7x-2x2x1"
    assert (capacity["slice"]["chips"], capacity["slice"]["hosts"]) == (4, 1)
    assert capacity["sharding"]["flags"] == {"tensor_parallel_size": 8}
    assert (capacity["weight_dtype"], capacity["kv_dtype"]) == ("fp8", "fp8")
    memory = capacity["memory"]
    assert memory["fits"]
    assert memory["hbm_bytes"] == 192 * 10**9
    assert 405 * 10**9 < memory["weights_bytes"] * 4 < 415 * 10**9
    (server,) = [m for m in result.manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == "vllm"]
    (pod,) = server["spec"]["template"]["spec"]["containers"][:1]
    assert pod["resources"]["limits"]["google.com/tpu"] == "4"
    assert "--kv-cache-dtype=fp8" in pod["args"]


def test_plan_prints_the_derived_group_size_and_tpu_per_pod() -> None:
    from components.tools.plan_view import tpu_pods
    from tests.conftest import planned

    result = planned("llama-405b-vllm")
    tpu_slice = result.config.tpu.slice
    (line,) = tpu_pods(result.manifests)
    expected = f"group size {tpu_slice.hosts}, replicas 1, google.com/tpu {tpu_slice.chips_per_host} per TPU pod"
    assert line == f"LeaderWorkerSet vllm-group: {expected}"


def test_no_service_is_named_after_a_leaderworkerset() -> None:
    """LWS creates a headless Service named after the LWS for its pods' DNS names (the workers reach
    the leader at $LWS_LEADER_ADDRESS through it) and skips it when a Service of that name exists."""
    from tests.conftest import STACKS, planned

    for stack in STACKS:
        manifests = planned(stack).manifests
        groups = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in manifests if m["kind"] == "LeaderWorkerSet"}
        services = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in manifests if m["kind"] == "Service"}
        assert not groups & services, stack
