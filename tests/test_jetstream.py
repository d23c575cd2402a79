"""JetStream + MaxText + Pathways on LeaderWorkerSet: spec rules, rendered objects, component, stacks.

The seed argument lists below are copied from the upstream manifests (seed 000: 405B on v6e 4x4;
seed 003: disaggregated Llama 2 70B on two v6e 2x4), with the placeholders the tutorials substitute
(CHECKPOINT_PATH, PATHWAYS_BUCKET) left as markers; the tests fill them with the stack's buckets.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from components.catalog.images import pinned
from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.resolve import StackPlan, resolve
from components.program.build import build_platform
from components.tools import mockengine, report
from components.tools.validate import validate_all
from components.workloads.jetstream import render
from components.workloads.jetstream.checkpoint import CONVERTER_WRAPPER
from components.workloads.jetstream.component import CheckpointConversion, JetstreamServer, deploy
from components.workloads.jetstream.spec import DISAGGREGATED_SERVER_CHIPS, settings
from tests.conftest import make_config, planned, planned_file

SEED_405B_SERVER_ARGS = [
    "MaxText/configs/v5e/inference/llama3_405b_v5e-64.yml",
    "model_name=llama3.1-405b",
    "load_parameters_path=CHECKPOINT_PATH",
    "max_prefill_predict_length=1024",
    "max_target_length=2048",
    "async_checkpointing=false",
    "steps=1",
    "ici_fsdp_parallelism=1",
    "ici_autoregressive_parallelism=2",
    "ici_tensor_parallelism=8",
    "scan_layers=false",
    "weight_dtype=bfloat16",
    "per_device_batch_size=6",
    "enable_single_controller=true",
    "quantization=int8",
    "quantize_kvcache=true",
    "checkpoint_is_quantized=true",
    "enable_model_warmup=true",
]
SEED_70B_DISAGG_SERVER_ARGS = [
    "MaxText/configs/base.yml",
    "tokenizer_path=assets/tokenizer.llama2",
    "load_parameters_path=CHECKPOINT_PATH",
    "max_prefill_predict_length=1024",
    "max_target_length=2048",
    "model_name=llama2-70b",
    "ici_fsdp_parallelism=1",
    "ici_autoregressive_parallelism=1",
    "ici_tensor_parallelism=-1",
    "scan_layers=false",
    "weight_dtype=bfloat16",
    "per_device_batch_size=27",
    "checkpoint_is_quantized=true",
    "quantization=int8",
    "quantize_kvcache=true",
    "compute_axis_order=0,2,1,3",
    "ar_cache_axis_order=0,2,1,3",
    "stack_prefill_result_cache=True",
    "inference_server=ExperimentalMaxtextDisaggregatedServer_8",
    "inference_benchmark_test=True",
    "enable_model_warmup=True",
]
SEED_IMAGES = {
    "pathways-proxy": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.5.3",
    "pathways-rm": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.5.3",
    "jax-tpu": "us-docker.pkg.dev/cloud-tpu-images/inference/jetstream-pathways:v0.2.0",
    "jetstream-http": "us-docker.pkg.dev/cloud-tpu-images/inference/jetstream-http:v0.2.3",
    "worker": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.5.3",
}
SEED_PORTS = {"pathways-proxy": 38681, "pathways-rm": 38677, "jax-tpu": 9000, "jetstream-http": 8000, "worker": 38679}

DISAGG: dict[str, Any] = {
    "tpu": {"topology": "2x4", "machineType": "ct6e-standard-4t", "slices": 2},
    "workload": {
        "model": "llama2-70b",
        "weights": "int8",
        "maxPrefillLength": 1024,
        "perDeviceBatchSize": 27,
        "jetstream": {"mode": "disaggregated"},
    },
}
BUCKETS: dict[str, Any] = {
    "checkpoints": {"purpose": "ckpt", "holdsCheckpoints": True},
    "pathways": {"purpose": "pathways-scratch"},
}
INTERLEAVED: dict[str, Any] = {"workload": {"weights": "int8", "maxPrefillLength": 1024, "perDeviceBatchSize": 6}}


def plan_of(**override: Any) -> StackPlan:
    return resolve(make_config(buckets=BUCKETS, **override))


def objects(stack: StackPlan, *, conversion: bool = False) -> list[dict[str, Any]]:
    return list(
        render.manifests(
            stack,
            namespace="llm",
            service_account="jetstream-pathways",
            checkpoint_bucket="ckpt-bucket",
            scratch_bucket="scratch-bucket",
            converter_pool="ckpt-convert" if conversion else None,
            meta_url="[secret]" if conversion else None,
        )
    )


def kind(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == name]
    return found


def containers(pod_template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod_template["spec"]["containers"]}


def lws_of(result: report.PlanResult) -> dict[str, Any]:
    return kind(result.manifests, "LeaderWorkerSet")


def filled(seed: list[str], checkpoint: str) -> list[str]:
    return [a.replace("CHECKPOINT_PATH", checkpoint) for a in seed]


# ---------------------------------------------------------------- spec and stack rules


def test_spec_images_must_be_pinned() -> None:
    with pytest.raises(ConfigError, match=r"workload\.jetstream\.jetstreamImage: .* uses the floating tag 'latest'"):
        make_config(buckets=BUCKETS, workload={"jetstream": {"jetstreamImage": "us-docker.pkg.dev/x/jetstream:latest"}})
    with pytest.raises(ConfigError, match=r"workload\.jetstream\.conversion\.image: .* has no tag"):
        make_config(buckets=BUCKETS, workload={"jetstream": {"conversion": {"image": "converter"}}})


@pytest.mark.parametrize(
    ("override", "key", "text"),
    [
        ({"tpu": {"topology": "2x4", "machineType": "ct6e-standard-4t", "slices": 2}}, "mode", "runs on one slice"),
        ({**DISAGG, "tpu": {**DISAGG["tpu"], "slices": 1}}, "mode", "needs exactly 2 slices"),
        ({**DISAGG, "tpu": {"topology": "4x4", "machineType": None, "slices": 2}}, "tpu.topology", "16 chips per slice"),
        ({"workload": {"jetstream": {"scratchBucket": "checkpoints"}}}, "scratchBucket", "is the checkpoint bucket"),
        ({"workload": {"jetstream": {"checkpointBucket": "weights"}}}, "checkpointBucket", "names no bucket"),
        ({"workload": {"model": "llama3-8b"}}, "workload.model", "no JetStream/MaxText serving profile"),
        (
            {"workload": {"jetstream": {"conversion": {"enabled": True, "zone": "europe-west4-a"}}}},
            "conversion.zone",
            "is not in gcp:region us-east5",
        ),
        (
            {"identity": {"bucketRoles": {"pathways": "roles/storage.objectViewer"}}},
            "identity.bucketRoles.pathways",
            "does not let the workload write scratchBucket",
        ),
    ],
)
def test_stack_rules_report_key_and_fix_at_config_load(override: dict[str, Any], key: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_config(buckets=BUCKETS, **{**INTERLEAVED, **override})
    assert any(key in v.key and text in v.problem for v in info.value.violations), info.value
    assert all(v.fix for v in info.value.violations)


def test_stack_rules_accept_both_seed_layouts() -> None:
    for config in (make_config(buckets=BUCKETS, **INTERLEAVED), make_config(buckets=BUCKETS, **DISAGG)):
        assert settings(config).stack_rules(config) == []
    assert DISAGGREGATED_SERVER_CHIPS == {8}


def test_stack_rules_name_the_key_in_the_report() -> None:
    with pytest.raises(ConfigError, match=r"gke-tpu-llm:workload\.jetstream\.mode: 'interleaved' runs on one slice"):
        make_config(buckets=BUCKETS, **{**DISAGG, "workload": {**DISAGG["workload"], "jetstream": {"mode": "interleaved"}}})


def test_secret_meta_url_is_required_while_converting_and_must_be_secret() -> None:
    converting: dict[str, Any] = {"workload": {"jetstream": {"conversion": {"enabled": True}}}}
    with pytest.raises(ConfigError, match=r"gke-tpu-llm:metaCheckpointUrl: None is required for jetstream-pathways"):
        make_config(with_secrets=False, buckets=BUCKETS, **converting)
    with pytest.raises(ConfigError, match="is stored in plaintext"):
        make_config(with_secrets=False, buckets=BUCKETS, metaCheckpointUrl="https://llama3-1.llamameta.net/x", **converting)
    assert settings(make_config(with_secrets=False, buckets=BUCKETS)).conversion.enabled is False


# ---------------------------------------------------------------- rendering (pure)


def test_render_405b_lws_matches_the_seed() -> None:
    lws = kind(objects(plan_of(**INTERLEAVED)), "LeaderWorkerSet")
    assert lws["metadata"]["name"] == "jetstream-pathways"
    assert lws["metadata"]["annotations"] == {"leaderworkerset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
    template = lws["spec"]["leaderWorkerTemplate"]
    assert lws["spec"]["replicas"] == 1
    assert template["size"] == 5
    assert "subGroupPolicy" not in template
    leader, worker = containers(template["leaderTemplate"]), containers(template["workerTemplate"])
    assert list(leader) == ["pathways-proxy", "pathways-rm", "jax-tpu", "jetstream-http"]
    for name, c in {**leader, **worker}.items():
        assert c["image"] == pinned(*SEED_IMAGES[name].rsplit(":", 1))  # the seed's tag, by catalog digest
        assert c["ports"] == [{"containerPort": SEED_PORTS[name]}]
    checkpoint = "gs://ckpt-bucket/maxtext/llama-3.1-405b/int8"
    assert leader["jax-tpu"]["args"] == filled(SEED_405B_SERVER_ARGS, checkpoint)
    assert leader["jax-tpu"]["env"] == [{"name": "LOG_LEVEL", "value": "INFO"}]
    assert leader["pathways-rm"]["args"] == [
        "--server_port=38677",
        "--gcs_scratch_location=gs://scratch-bucket",
        "--node_type=resource_manager",
        "--instance_count=1",
        "--instance_type=tpuv6e:4x4",
    ]
    assert leader["pathways-rm"]["env"] == [
        {"name": "HOST_ADDRESS", "value": "$(LWS_LEADER_ADDRESS)"},
        {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
    ]
    assert worker["worker"]["args"] == [
        "--server_port=38679",
        "--resource_manager_address=$(LWS_LEADER_ADDRESS):38677",
        "--gcs_scratch_location=gs://scratch-bucket",
    ]
    assert worker["worker"]["resources"]["limits"] == {"google.com/tpu": "4"}
    assert "resources" not in leader["jax-tpu"]  # the leader holds no chips
    for pod in (template["leaderTemplate"], template["workerTemplate"]):
        assert pod["spec"]["nodeSelector"] == {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        }
        assert pod["spec"]["tolerations"] == [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert pod["spec"]["serviceAccountName"] == "jetstream-pathways"


def test_render_disaggregated_lws_matches_the_seed_with_derived_tensor_parallelism() -> None:
    lws = kind(objects(plan_of(**DISAGG)), "LeaderWorkerSet")
    assert lws["metadata"]["annotations"] == {
        "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": "cloud.google.com/gke-nodepool"
    }
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 5
    assert template["subGroupPolicy"] == {"subGroupSize": 2}
    leader = containers(template["leaderTemplate"])
    expected = filled(SEED_70B_DISAGG_SERVER_ARGS, "gs://ckpt-bucket/maxtext/llama-2-70b/int8")
    # The one deliberate difference: tensor parallelism is the planner's 8, not the seed's -1 (fill).
    expected[expected.index("ici_tensor_parallelism=-1")] = "ici_tensor_parallelism=8"
    assert leader["jax-tpu"]["args"] == expected
    # Unlike the seed, no added capabilities (no stated need; the interleaved seed runs without them).
    assert leader["jax-tpu"]["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}}
    assert "--instance_count=2" in leader["pathways-rm"]["args"]
    assert "--instance_type=tpuv6e:2x4" in leader["pathways-rm"]["args"]
    proxy = leader["pathways-proxy"]["args"]
    assert proxy[:3] == [
        "--resource_manager_address=$(LWS_LEADER_ADDRESS):38677",
        "--server_port=38681",
        "--gcs_scratch_location=gs://scratch-bucket",
    ]
    assert tuple(proxy[3:]) == render.DISAGGREGATED_PROXY_XLA_FLAGS
    assert len(render.DISAGGREGATED_PROXY_XLA_FLAGS) == 43
    assert not any("cloud-pathways-staging" in a for c in leader.values() for a in c.get("args", []))


def test_render_probes_cover_a_long_restore() -> None:
    jax_tpu = containers(
        kind(objects(plan_of(**INTERLEAVED)), "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    )["jax-tpu"]
    startup = jax_tpu["startupProbe"]
    assert startup["httpGet"] == {"path": "/healthcheck", "port": 8000, "scheme": "HTTP"}
    budget = startup["periodSeconds"] * startup["failureThreshold"] + startup.get("initialDelaySeconds", 0)
    assert 20 * 60 < budget <= 4 * 3600  # covers a 20-minute restore plus warm-up, but is bounded
    assert jax_tpu["livenessProbe"]["periodSeconds"] == 60
    assert jax_tpu["livenessProbe"]["failureThreshold"] == 10


def test_render_leader_waits_for_the_committed_checkpoint() -> None:
    pod = kind(objects(plan_of(**INTERLEAVED)), "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    (init,) = pod["initContainers"]
    assert init["env"] == [
        {"name": "CHECKPOINT_MARKER", "value": "gs://ckpt-bucket/maxtext/llama-3.1-405b/int8/commit_success.txt"}
    ]
    assert '"$CHECKPOINT_MARKER"' in init["command"][-1]
    assert ":" in init["image"]
    assert not init["image"].endswith(":latest")


def test_render_bf16_weights_load_the_unscanned_checkpoint() -> None:
    stack = plan_of(tpu={"topology": "8x8"}, workload={"weights": "bfloat16", "maxPrefillLength": 1024, "perDeviceBatchSize": 1})
    leader = kind(objects(stack), "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    args = containers(leader)["jax-tpu"]["args"]
    assert "load_parameters_path=gs://ckpt-bucket/maxtext/llama-3.1-405b/bf16/unscanned/checkpoints/0/items" in args
    assert "checkpoint_is_quantized=false" in args
    assert not any(a.startswith("quantization=") for a in args)
    marker = leader["spec"]["initContainers"][0]["env"][0]["value"]
    assert marker == "gs://ckpt-bucket/maxtext/llama-3.1-405b/bf16/unscanned/checkpoints/0/commit_success.txt"


def test_render_service_is_clusterip_8000_on_the_leader_only() -> None:
    objs = objects(plan_of(**INTERLEAVED))
    svc = kind(objs, "Service")
    assert svc["metadata"]["name"] == "jetstream-svc"
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "jetstream-http", "protocol": "TCP", "port": 8000, "targetPort": 8000}]
    # pulumi would otherwise wait 10 minutes for ready endpoints and fail during the restore
    assert svc["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    template = kind(objs, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    selector = svc["spec"]["selector"].items()
    assert selector <= template["leaderTemplate"]["metadata"]["labels"].items()
    assert not selector <= template["workerTemplate"]["metadata"]["labels"].items()


@pytest.mark.parametrize(
    ("override", "model_name", "model_path", "output"),
    [
        (INTERLEAVED, "llama-3.1", "Llama3.1-405B-Instruct:bf16-mp16", "gs://ckpt-bucket/maxtext/llama-3.1-405b"),
        (DISAGG, "llama-2", "Llama-2-70b-chat", "gs://ckpt-bucket/maxtext/llama-2-70b"),
    ],
)
def test_render_conversion_job_follows_the_converter(
    override: dict[str, Any], model_name: str, model_path: str, output: str
) -> None:
    objs = objects(plan_of(**override), conversion=True)
    job = kind(objs, "Job")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == pinned("us-docker.pkg.dev/cloud-tpu-images/inference/inference-checkpoint", "v0.2.5")
    # The upstream args but --meta_url: the entrypoint reads $META_URL, so the URL is in no argv.
    assert container["command"] == ["/bin/bash", "-c", CONVERTER_WRAPPER, "/usr/bin/checkpoint_converter.sh"]
    assert container["args"] == [
        "--bucket_name=ckpt-bucket",
        "--inference_server=jetstream-maxtext",
        f"--model_name={model_name}",
        f"--model_path={model_path}",
        f"--output_directory={output}",
        "--quantize_type=int8",
        "--quantize_weights=True",
    ]
    # The URL reaches the pod only through the Secret, never through the Job spec.
    assert container["env"] == [
        {"name": "META_URL", "valueFrom": {"secretKeyRef": {"name": "meta-checkpoint-url", "key": "url"}}}
    ]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "ckpt-convert"}
    assert pod["restartPolicy"] == "Never"
    assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert kind(objs, "Secret")["stringData"] == {"url": "[secret]"}


def test_render_every_object_validates() -> None:
    stacks = [
        plan_of(**INTERLEAVED),
        plan_of(**DISAGG),
        plan_of(tpu={"topology": "4x8"}, **INTERLEAVED),
        plan_of(tpu={"topology": "8x8"}, workload={"weights": "bfloat16", "maxPrefillLength": 1024, "perDeviceBatchSize": 1}),
    ]
    for stack in stacks:
        objs = objects(stack, conversion=True)
        assert {o["kind"] for o in objs} == {"LeaderWorkerSet", "Service", "Secret", "Job"}
        assert validate_all(objs) == []


def test_render_topology_change_moves_every_hardware_number_together() -> None:
    """4x4 -> 4x8: LWS size, --instance_type, TPU requests, selectors and ici flags change as one."""
    small, large = plan_of(**INTERLEAVED), plan_of(tpu={"topology": "4x8"}, **INTERLEAVED)
    for stack, hosts, topology, autoregressive in ((small, 4, "4x4", 2), (large, 8, "4x8", 4)):
        template = kind(objects(stack), "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
        leader, worker = containers(template["leaderTemplate"]), containers(template["workerTemplate"])
        assert stack.slice.hosts == hosts
        assert template["size"] == hosts + 1
        assert f"--instance_type=tpuv6e:{topology}" in leader["pathways-rm"]["args"]
        assert worker["worker"]["resources"]["limits"]["google.com/tpu"] == str(stack.slice.chips_per_host)
        assert template["workerTemplate"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == topology
        flags = stack.flags
        assert flags["ici_fsdp_parallelism"] * flags["ici_autoregressive_parallelism"] * flags["ici_tensor_parallelism"] == (
            stack.slice.chips
        )
        assert f"ici_autoregressive_parallelism={autoregressive}" in leader["jax-tpu"]["args"]


def test_render_derives_from_the_plan_not_from_constants() -> None:
    """A different slice count reaches instance_count and size (a plan whose config has 3 slices)."""
    base = plan_of(**DISAGG)
    three = replace(base, config=base.config.model_copy(update={"tpu": base.config.tpu.model_copy(update={"slices": 3})}))
    shape = render.layout(three)
    assert (shape.size, shape.instance_count, shape.sub_group_size) == (7, 3, 2)


# ---------------------------------------------------------------- components under the mock engine


def _build(stack: StackPlan) -> Any:
    def program() -> None:
        platform = build_platform(stack.config)
        deploy(stack, cluster=platform.cluster, identity=platform.identity, buckets=platform.buckets)

    return program


def _record(stack: StackPlan, *, conversion: bool) -> list[mockengine.Registration]:
    records, _ = mockengine.record(
        _build(stack),
        stack=stack.config.stack,
        project=stack.config.project,
        config={"gke-tpu-llm:metaCheckpointUrl": "https://download.llamameta.net/signed?token=abc"} if conversion else {},
        secret_keys=["gke-tpu-llm:metaCheckpointUrl"] if conversion else [],
    )
    return records


def _one(records: list[mockengine.Registration], typ: str) -> mockengine.Registration:
    (found,) = [r for r in records if r.type == typ]
    return found


def test_component_lws_depends_on_the_controller_release_and_the_ksa() -> None:
    records = _record(plan_of(**INTERLEAVED), conversion=False)
    server = _one(records, JetstreamServer.TYPE)
    lws = _one(records, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    release = _one(records, "kubernetes:helm.sh/v3:Release")
    ksa = _one(records, "kubernetes:core/v1:ServiceAccount")
    assert release.inputs["chart"] == "oci://registry.k8s.io/lws/charts/lws"
    assert release.inputs["version"] == "0.10.0"
    assert release.urn in lws.dependencies
    assert ksa.urn in lws.dependencies
    assert lws.parent == server.urn
    assert lws.provider == "test-k8s"  # the cluster's provider (the cluster is named after the stack)
    assert _one(records, "kubernetes:core/v1:Service").parent == server.urn
    assert not [r for r in records if r.type in (CheckpointConversion.TYPE, "kubernetes:batch/v1:Job")]
    assert "ckpt-convert" not in [r.inputs["name"] for r in records if r.type == "gcp:container/nodePool:NodePool"]


def test_component_conversion_pool_secret_and_job() -> None:
    records = _record(
        plan_of(workload={**INTERLEAVED["workload"], "jetstream": {"conversion": {"enabled": True}}}), conversion=True
    )
    conversion = _one(records, CheckpointConversion.TYPE)
    pool = next(r for r in records if r.type == "gcp:container/nodePool:NodePool" and r.inputs["name"] == "ckpt-convert")
    job = _one(records, "kubernetes:batch/v1:Job")
    secret = _one(records, "kubernetes:core/v1:Secret")
    assert pool.parent == job.parent == secret.parent == conversion.urn
    assert pool.inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 1, "locationPolicy": "ANY"}
    assert pool.inputs["nodeConfig"]["machineType"] == "m1-ultramem-160"
    assert pool.inputs["nodeConfig"]["taints"] == [
        {"key": "gke-tpu-llm/checkpoint-converter", "value": "true", "effect": "NO_SCHEDULE"}
    ]
    assert pool.inputs["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert set(pool.options["ignoreChanges"]) == {"initialNodeCount", "nodeCount"}
    assert secret.urn in job.dependencies
    assert pool.urn in job.dependencies
    assert secret.inputs["stringData"] == {"url": stacks.SECRET_PLACEHOLDER}
    assert "llamameta" not in repr([r.inputs for r in records])  # the URL never appears in plain text


def test_component_type_tokens() -> None:
    for cls in (JetstreamServer, CheckpointConversion):
        module, name = cls.TYPE.split(":")[1:]
        assert cls.TYPE.startswith("gke-tpu-llm:")
        assert module == "jetstream"
        assert name == cls.__name__


# ---------------------------------------------------------------- the stacks (acceptance)


@pytest.mark.parametrize("stack", ["llama-405b", "llama-405b-prod", "llama2-70b-disagg"])
def test_stack_plan_has_lws_service_controller_and_bucket_iam(stack: str) -> None:
    result = planned(stack)
    data = report.plan_json(result)
    kinds = {(m["kind"], m["metadata"]["name"]) for m in data["manifests"]}
    assert {("LeaderWorkerSet", "jetstream-pathways"), ("Service", "jetstream-svc"), ("Job", "checkpoint-converter")} <= kinds
    assert lws_of(result)["spec"]["leaderWorkerTemplate"]["size"] == 5
    types = [r["type"] for r in data["resources"]]
    assert "kubernetes:helm.sh/v3:Release" in types
    bindings = [r["inputs"] for r in data["resources"] if r["type"] == "gcp:storage/bucketIAMMember:BucketIAMMember"]
    assert {b["bucket"] for b in bindings} == {result.config.bucket_name("checkpoints"), result.config.bucket_name("pathways")}
    # GKE metadata: no project role but the nodes' minimal one (every pool runs as the stack's node account)
    project_roles = [r["inputs"]["role"] for r in data["resources"] if r["type"].startswith("gcp:projects/iAM")]
    assert project_roles == ["roles/container.defaultNodeServiceAccount"]
    assert validate_all(data["manifests"]) == []


def test_stack_outputs_service_port_forward_and_curl() -> None:
    outputs = planned("llama-405b").outputs
    assert outputs["jetstream_service"] == "llama-405b/jetstream-svc"
    assert outputs["jetstream_port_forward_command"] == "kubectl port-forward svc/jetstream-svc 8000:8000 -n llama-405b"
    assert outputs["jetstream_curl"].startswith("curl ")
    assert "localhost:8000/generate" in outputs["jetstream_curl"]
    assert outputs["jetstream_checkpoint_path"] == "gs://your-project-id-llama-405b-checkpoints/maxtext/llama-3.1-405b/int8"
    assert planned("llama2-70b-disagg").outputs["jetstream_checkpoint_path"].endswith("/maxtext/llama-2-70b/int8")


def test_stack_405b_topology_change_is_consistent_or_a_clear_error() -> None:
    stack_file = stacks.read_stack_file(stacks.stack_path("llama-405b"))

    def with_tpu(**tpu: Any) -> stacks.StackFile:
        values = {**stack_file.values, "gke-tpu-llm:tpu": {**stack_file.values["gke-tpu-llm:tpu"], **tpu}}
        return replace(stack_file, values=values)

    result = planned_file(with_tpu(topology="4x8"))
    (pool,) = [
        r.inputs for r in result.resources if r.type == "gcp:container/nodePool:NodePool" and r.inputs["name"].startswith("tpu-")
    ]
    template = lws_of(result)["spec"]["leaderWorkerTemplate"]
    leader = containers(template["leaderTemplate"])
    assert pool["nodeCount"] == 8
    assert pool["placementPolicy"]["tpuTopology"] == "4x8"
    assert template["size"] == pool["nodeCount"] + 1
    assert "--instance_type=tpuv6e:4x8" in leader["pathways-rm"]["args"]
    assert "ici_autoregressive_parallelism=4" in leader["jax-tpu"]["args"]
    with pytest.raises(ConfigError, match=r"tpu\.topology: '2x4' cannot run llama3.1-405b .* smallest slice that fits: v6e-4x4"):
        report.plan(with_tpu(topology="2x4", machineType="ct6e-standard-4t"))


@pytest.mark.parametrize(
    ("gcloud_output", "gcloud_status", "exit_code", "text"),
    [
        ("gs://b/commit_success.txt", 0, 0, "checkpoint committed"),
        ("ERROR: (gcloud.storage.objects.describe) HTTPError 403: forbidden", 1, 1, "cannot read"),
    ],
)
def test_wait_for_checkpoint_stops_on_errors_other_than_not_found(
    tmp_path: Any, gcloud_output: str, gcloud_status: int, exit_code: int, text: str
) -> None:
    """The init container's loop, run with a stand-in gcloud: a 403 ends it instead of waiting forever."""
    import os
    import subprocess

    fake = tmp_path / "gcloud"
    fake.write_text(f"#!/bin/sh\necho '{gcloud_output}'\nexit {gcloud_status}\n")
    fake.chmod(0o755)
    container = render._wait_for_checkpoint(settings(make_config(buckets=BUCKETS)), "gs://b/commit_success.txt")
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "CHECKPOINT_MARKER": "gs://b/commit_success.txt"}
    proc = subprocess.run(container["command"], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == exit_code
    assert text in proc.stdout + proc.stderr


def test_conversion_pool_is_not_protected_even_in_prod() -> None:
    # It holds no data and scales to zero; turning the conversion off must be able to delete it.
    stack = plan_of(
        environment="prod",
        **{**INTERLEAVED, "workload": {**INTERLEAVED["workload"], "jetstream": {"conversion": {"enabled": True}}}},
    )
    records = _record(stack, conversion=True)
    (pool,) = [r for r in records if r.type == "gcp:container/nodePool:NodePool" and r.inputs["name"] == "ckpt-convert"]
    assert pool.options["protect"] is False
