"""The GKE Inference Gateway front door (issue 25): config rules, rendered objects, strict validation
against the vendored schemas, the leaders-only pool of a multi-host stack, the derived policies."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from typing import Any

import pytest

from components.config import stack_files as stacks
from components.config.errors import ConfigError
from components.config.front_door import (
    CONSERVATIVE_TPOT_S,
    GATEWAY_CLASS,
    HEALTH_CHECK_RANGES,
    TIMEOUT_CEILING_SEC,
    TIMEOUT_FLOOR_SEC,
    FrontDoorSpec,
    backend_timeout,
)
from components.config.resolve import StackPlan, resolve
from components.render import gateway, gateway_picker, netpol
from components.tools import report
from components.tools.validate import GATEWAY_SCHEMAS, validate_all
from components.workloads.vllm import render
from tests.conftest import make_config, planned, planned_file
from tests.test_vllm import VLLM as SINGLE  # one Llama 3.1 70B host

PROXY = "10.129.0.0/23"
INTERNAL = {"type": "gateway", "proxySubnet": {"cidr": PROXY}}
PUBLIC = {**INTERNAL, "exposure": "public", "hostname": "llm.example.com"}

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


def config_with(base: dict[str, Any], front_door: dict[str, Any] | None, **workload: Any) -> dict[str, Any]:
    values = copy.deepcopy(base)
    values["workload"].update(workload)
    if front_door is not None:
        values["workload"]["frontDoor"] = front_door
    return values


def plan_of(base: dict[str, Any] = SINGLE, front_door: dict[str, Any] | None = INTERNAL, **workload: Any) -> StackPlan:
    return resolve(make_config("llama-70b", **config_with(base, front_door, **workload)))


def problems(base: dict[str, Any], front_door: dict[str, Any] | None, **workload: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        make_config("llama-70b", **config_with(base, front_door, **workload))
    return [str(v) for v in info.value.violations]


def front_objects(plan: StackPlan, *, namespace: str = "llm") -> list[dict[str, Any]]:
    timeout, _ = gateway.stack_backend_timeout(plan)
    return gateway.render_front_door(
        render.gateway_backend(plan),
        plan.config.workload.front_door,
        timeout,
        namespace=namespace,
        stack=plan.config.stack,
        iap_client_id="client-id",
        iap_client_secret="[secret]",
    )


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


# ---------------------------------------------------------------- config


def test_default_is_the_service_and_renders_todays_objects() -> None:
    plan = plan_of(front_door=None)
    assert plan.config.workload.front_door == FrontDoorSpec()
    assert not plan.config.workload.front_door.gateway
    assert render.render_service(plan, namespace="llm")["spec"]["type"] == "LoadBalancer"
    names = {i.name for i in render.network_intents(plan)}
    assert names == {"vllm-api", "vllm-metrics"}


def test_gateway_needs_a_proxy_subnet_of_at_least_64_addresses() -> None:
    (missing,) = problems(SINGLE, {"type": "gateway"})
    assert "workload.frontDoor.proxySubnet" in missing
    assert "is required with type gateway" in missing
    (small,) = problems(SINGLE, {"type": "gateway", "proxySubnet": {"cidr": "10.129.0.0/27"}})
    assert "proxySubnet.cidr" in small
    assert "/26" in small
    (v6,) = problems(SINGLE, {"type": "gateway", "proxySubnet": {"cidr": "2001:db8::/64"}})
    assert "IPv6" in v6


def test_public_needs_a_hostname_and_the_iap_secrets() -> None:
    (hostname,) = problems(SINGLE, {**INTERNAL, "exposure": "public"})
    assert "workload.frontDoor.hostname" in hostname
    assert "HTTPS" in hostname
    assert FrontDoorSpec.model_validate(PUBLIC).required_secrets() == ("iapClientId", "iapClientSecret")
    assert FrontDoorSpec.model_validate(INTERNAL).required_secrets() == ()
    assert FrontDoorSpec().required_secrets() == ()


@pytest.mark.parametrize(
    ("key", "value"),
    [("exposure", "public"), ("hostname", "llm.example.com"), ("bodyBasedRouting", True), ("proxySubnet", {"cidr": PROXY}),
     ("backendTimeoutSec", 600)],
)
def test_gateway_keys_without_a_gateway_name_the_key_to_remove(key: str, value: Any) -> None:
    found = problems(SINGLE, {key: value})
    assert any(f"workload.frontDoor.{key}" in p and f"remove workload.frontDoor.{key}" in p for p in found), found


def test_internal_refuses_a_hostname_and_bad_hostnames_and_timeouts_are_refused() -> None:
    (hostname,) = problems(SINGLE, {**INTERNAL, "hostname": "llm.example.com"})
    assert "only with exposure: public" in hostname
    assert problems(SINGLE, {**PUBLIC, "hostname": "*.example.com"})
    assert problems(SINGLE, {**PUBLIC, "hostname": "localhost"})
    for bad in (0, 86_401, 1.5, "600"):
        assert problems(SINGLE, {**INTERNAL, "backendTimeoutSec": bad}), bad


def test_the_public_form_is_always_behind_iap() -> None:
    """No key turns IAP off: the public form's backend policy always enables it."""
    assert "iap" not in FrontDoorSpec.model_fields
    plan = plan_of(front_door=PUBLIC)
    (policy,) = by_kind(front_objects(plan), "GCPBackendPolicy")
    iap = {"enabled": True, "clientID": "client-id", "oauth2ClientSecret": {"name": "vllm-iap-client"}}
    assert policy["spec"]["default"]["iap"] == iap
    with pytest.raises(ValueError, match="IAP"):
        gateway.render_front_door(
            render.gateway_backend(plan), plan.config.workload.front_door, 300, namespace="llm", stack="s"
        )


def test_kinds_other_than_vllm_refuse_the_gateway() -> None:
    jetstream = problems(
        {"workload": {"kind": "jetstream-pathways", "model": "llama3.1-405b", "maxTargetLength": 2048, "perDeviceBatchSize": 6}},
        INTERNAL,
    )
    assert any("workload.frontDoor.type" in p and "not supported for kind jetstream-pathways" in p for p in jetstream), jetstream
    sax = problems({"workload": {"kind": "saxml", "model": "llama3.1-405b", "maxTargetLength": 2048}}, INTERNAL)
    assert any("workload.frontDoor.type" in p and "not supported for kind saxml" in p for p in sax), sax


def test_vllm_source_ranges_mean_nothing_behind_the_gateway() -> None:
    found = problems(SINGLE, INTERNAL, vllm={"service": {"sourceRanges": ["10.0.0.0/8"]}})
    assert any("workload.vllm.service.sourceRanges" in p and "ClusterIP" in p for p in found), found


# ---------------------------------------------------------------- the backend timeout


def test_backend_timeout_from_the_scenario_with_headroom_rounded_and_bounded() -> None:
    door = FrontDoorSpec.model_validate(INTERNAL)
    seconds, how = backend_timeout(door, output_tokens=2000, ttft_ms=500, tpot_ms=100, max_target_length=4096)
    assert seconds == 420  # 2 x (0.5 + 200) s = 401 s -> 420 s
    assert "2 x (predicted TTFT 500 ms + 2000 output tokens x predicted TPOT 100.0 ms)" in how
    assert backend_timeout(door, output_tokens=10, ttft_ms=100, tpot_ms=20, max_target_length=4096)[0] == TIMEOUT_FLOOR_SEC
    longest = backend_timeout(door, output_tokens=100_000, ttft_ms=100, tpot_ms=50, max_target_length=131072)
    assert longest[0] == TIMEOUT_CEILING_SEC
    no_scenario, why = backend_timeout(door, output_tokens=None, ttft_ms=None, tpot_ms=None, max_target_length=8192)
    assert no_scenario == 840
    assert f"{CONSERVATIVE_TPOT_S * 1000:.0f} ms" in why
    pinned_door = FrontDoorSpec.model_validate({**INTERNAL, "backendTimeoutSec": 7200})
    assert backend_timeout(pinned_door, output_tokens=1, ttft_ms=1, tpot_ms=1, max_target_length=1) == (
        7200,
        "workload.frontDoor.backendTimeoutSec",
    )


def test_stack_timeout_reads_the_chosen_slices_prediction() -> None:
    plan = plan_of(serving={"inputTokens": 1000, "outputTokens": 3000, "concurrency": 8})
    estimate = plan.serving[0]
    seconds, how = gateway.stack_backend_timeout(plan)
    expected = 2 * (estimate.ttft_ms + 3000 * estimate.tpot_ms) / 1000
    assert seconds == min(max(60 * math.ceil(expected / 60), TIMEOUT_FLOOR_SEC), TIMEOUT_CEILING_SEC)
    assert "3000 output tokens" in how
    (policy,) = by_kind(front_objects(plan), "GCPBackendPolicy")
    assert policy["spec"]["default"]["timeoutSec"] == seconds


# ---------------------------------------------------------------- rendered objects


def test_internal_objects_names_and_wiring() -> None:
    plan = plan_of()
    objects = front_objects(plan)
    (gw,) = by_kind(objects, "Gateway")
    assert gw["metadata"]["name"] == "vllm-gateway"
    listener = {"name": "http", "protocol": "HTTP", "port": 80}
    assert gw["spec"] == {"gatewayClassName": GATEWAY_CLASS["internal"], "listeners": [listener]}
    (route,) = by_kind(objects, "HTTPRoute")
    assert route["spec"]["parentRefs"][0]["name"] == "vllm-gateway"
    pool_ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "vllm"}
    assert route["spec"]["rules"][0]["backendRefs"] == [pool_ref]
    assert "timeouts" not in route["spec"]["rules"][0]  # GKE: the GCPBackendPolicy's timeoutSec
    (pool,) = by_kind(objects, "InferencePool")
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert pool["spec"]["endpointPickerRef"] == {"name": "vllm-epp", "port": {"number": 9002}, "failureMode": "FailOpen"}
    assert pool["spec"]["selector"]["matchLabels"] == render.server_selector(plan)
    (check,) = by_kind(objects, "HealthCheckPolicy")
    assert check["spec"]["default"]["config"]["httpHealthCheck"] == {"requestPath": "/health", "port": 8000}
    (policy,) = by_kind(objects, "GCPBackendPolicy")
    assert "iap" not in policy["spec"]["default"]
    assert not by_kind(objects, "Secret")
    assert not by_kind(objects, "GCPRoutingExtension")
    picker_kinds = ("Deployment", "Service", "ConfigMap", "ServiceAccount", "Role")
    assert {o["metadata"]["name"] for o in objects if o["kind"] in picker_kinds} == {"vllm-epp"}
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "llama-70b"
        assert obj["metadata"]["namespace"] == "llm"


def test_public_is_https_only_with_the_regional_certificate() -> None:
    plan = plan_of(front_door=PUBLIC)
    objects = front_objects(plan)
    (gw,) = by_kind(objects, "Gateway")
    assert gw["spec"]["gatewayClassName"] == "gke-l7-regional-external-managed"
    (listener,) = gw["spec"]["listeners"]  # no :80 listener
    assert (listener["protocol"], listener["port"], listener["hostname"]) == ("HTTPS", 443, "llm.example.com")
    assert listener["tls"] == {
        "mode": "Terminate",
        "options": {"networking.gke.io/cert-manager-certs": gateway.certificate_name("llama-70b")},
    }
    (route,) = by_kind(objects, "HTTPRoute")
    assert route["spec"]["hostnames"] == ["llm.example.com"]
    (secret,) = by_kind(objects, "Secret")
    assert secret["metadata"]["name"] == "vllm-iap-client"
    assert secret["stringData"] == {gateway.IAP_SECRET_KEY: "[secret]"}
    kinds = [o["kind"] for o in objects]
    assert kinds.index("Secret") < kinds.index("GCPBackendPolicy")  # the policy names it


def test_endpoint_picker_config_scorers_weights_and_picker() -> None:
    config = gateway_picker.endpoint_picker_config()
    (profile,) = config["schedulingProfiles"]
    weights = {p["pluginRef"]: p.get("weight") for p in profile["plugins"]}
    assert weights == {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3, "max-score-picker": None}
    declared = {p["type"] for p in config["plugins"]}
    assert set(weights) <= declared
    assert "metrics-data-source" in declared
    (cm,) = by_kind(front_objects(plan_of()), "ConfigMap")
    assert json.loads(cm["data"][gateway.EPP_CONFIG_FILE]) == config


def test_epp_pod_is_pinned_restricted_and_keeps_only_what_it_needs() -> None:
    objects = front_objects(plan_of())
    (deployment,) = by_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    assert box["image"].startswith("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0")
    assert box["securityContext"]["runAsNonRoot"]
    assert box["securityContext"]["readOnlyRootFilesystem"]
    assert box["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == "vllm-epp"
    assert ["--pool-name", "vllm"] == box["args"][:2]
    assert "--metrics-endpoint-auth=false" in box["args"]
    (role,) = by_kind(objects, "Role")
    assert all(set(r["verbs"]) == {"get", "watch", "list"} for r in role["rules"])


def test_body_based_routing_matches_the_served_model() -> None:
    plan = plan_of(front_door={**INTERNAL, "bodyBasedRouting": True})
    objects = front_objects(plan)
    (route,) = by_kind(objects, "HTTPRoute")
    (match,) = route["spec"]["rules"][0]["matches"]
    assert match["headers"] == [{"type": "Exact", "name": "X-Gateway-Model-Name", "value": render.model_id(plan)}]
    (extension,) = by_kind(objects, "GCPRoutingExtension")
    assert extension["spec"]["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "vllm-gateway"}]
    assert {o["metadata"]["name"] for o in by_kind(objects, "Deployment")} == {"vllm-epp", "body-based-router"}


@pytest.mark.parametrize("door", [INTERNAL, PUBLIC, {**INTERNAL, "bodyBasedRouting": True}], ids=["internal", "public", "bbr"])
@pytest.mark.parametrize("base", [SINGLE, MULTI], ids=["single-host", "multi-host"])
def test_every_front_door_object_validates_strictly(door: dict[str, Any], base: dict[str, Any]) -> None:
    objects = front_objects(plan_of(base, door))
    assert validate_all(objects) == []
    custom = {(o["apiVersion"], o["kind"]) for o in objects} & set(GATEWAY_SCHEMAS)
    extension = ("networking.gke.io/v1", "GCPRoutingExtension")
    expected = set(GATEWAY_SCHEMAS) - (set() if door.get("bodyBasedRouting") else {extension})
    assert custom == expected


def test_strict_validation_catches_a_misspelt_field() -> None:
    (pool,) = by_kind(front_objects(plan_of()), "InferencePool")
    bad = copy.deepcopy(pool)
    bad["spec"]["targetPort"] = bad["spec"].pop("targetPorts")
    assert any("targetPort" in p for p in validate_all([bad]))
    (policy,) = by_kind(front_objects(plan_of(front_door=PUBLIC)), "GCPBackendPolicy")
    bad = copy.deepcopy(policy)
    bad["spec"]["default"]["iap"]["oauthclientCredential"] = {"secretName": "x"}  # the Ingress BackendConfig spelling
    assert any("oauthclientCredential" in p for p in validate_all([bad]))


# ---------------------------------------------------------------- multi-host: the leaders only


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_multi_host_pool_selects_exactly_the_leader_of_each_group() -> None:
    """Over the rendered LeaderWorkerSet: the pool's selector matches the leader template's pods (the
    LWS controller adds ``worker-index`` to every pod: "0" on the leader, 1..size-1 on the workers) and
    no worker's, so each group is entered through its leader only."""
    plan = plan_of(MULTI)
    lws = render.render_server(plan, namespace="llm", service_account="vllm", bucket_name="b")
    (pool,) = by_kind(front_objects(plan), "InferencePool")
    selector = pool["spec"]["selector"]["matchLabels"]
    template = lws["spec"]["leaderWorkerTemplate"]
    size = template["size"]
    assert size == plan.slice.hosts > 1
    index = render.WORKER_INDEX_LABEL
    leader = {**template["leaderTemplate"]["metadata"]["labels"], index: "0"}
    workers = [{**template["workerTemplate"]["metadata"]["labels"], index: str(i)} for i in range(1, size)]
    assert _matches(selector, leader)
    assert not any(_matches(selector, w) for w in workers)
    # And the selector pins the leader by the controller's own label, not by template labels alone.
    assert selector[index] == "0"
    groups = lws["spec"]["replicas"]
    pods = [(g, labels) for g in range(groups) for labels in (leader, *workers)]
    assert [g for g, labels in pods if _matches(selector, labels)] == list(range(groups))


# ---------------------------------------------------------------- who reaches what


def test_policies_admit_only_the_proxies_health_checks_and_picker_to_the_serving_port() -> None:
    plan = plan_of()
    namespace = "llm"
    objects = [
        render.render_server(plan, namespace=namespace, service_account="vllm", bucket_name="b"),
        render.render_service(plan, namespace=namespace),
        render.render_pod_monitoring(plan, namespace=namespace),
        *front_objects(plan, namespace=namespace),
    ]
    policies = netpol.render_network_policies(objects, render.network_intents(plan), namespace=namespace, stack="llama-70b")
    to_vllm = [
        p for p in policies[1:] if p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == "vllm"
    ]
    peers = [(peer, rule.get("ports")) for p in to_vllm for rule in p["spec"]["ingress"] for peer in rule["from"]]
    blocks = {peer["ipBlock"]["cidr"] for peer, _ in peers if "ipBlock" in peer}
    assert blocks == {PROXY, *HEALTH_CHECK_RANGES}  # no 0.0.0.0/0: the Service is no load balancer
    pods = [peer for peer, _ in peers if "podSelector" in peer and "namespaceSelector" not in peer]
    assert [p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in pods] == ["vllm-epp"]
    assert all(ports == [{"protocol": "TCP", "port": 8000}] for _, ports in peers)
    names = {p["metadata"]["name"] for p in policies}
    assert "allow-vllm-api" not in names  # the ClusterIP Service admits no namespace-wide clients
    assert {"allow-vllm-gateway", "allow-vllm-epp-ext-proc", "allow-vllm-epp-health", "allow-vllm-epp-metrics"} <= names
    (ext_proc,) = [p for p in policies if p["metadata"]["name"] == "allow-vllm-epp-ext-proc"]
    (rule,) = ext_proc["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9002}]
    assert {peer["ipBlock"]["cidr"] for peer in rule["from"]} == {PROXY, *HEALTH_CHECK_RANGES}


def test_service_is_cluster_ip_behind_the_gateway() -> None:
    service = render.render_service(plan_of(), namespace="llm")
    assert service["spec"]["type"] == "ClusterIP"
    assert "externalTrafficPolicy" not in service["spec"]
    assert "networking.gke.io/load-balancer-type" not in service["metadata"]["annotations"]


# ---------------------------------------------------------------- the committed stacks


@pytest.mark.parametrize("stack", ["llama-70b", "llama-405b-vllm"])
def test_committed_internal_gateway_stacks_plan_and_validate(stack: str) -> None:
    result = planned(stack)
    namespace = stack
    manifests = result.manifests
    gateway_objects = [m for m in manifests if (m["apiVersion"], m["kind"]) in GATEWAY_SCHEMAS]
    kinds = {m["kind"] for m in gateway_objects}
    assert kinds == {"Gateway", "HTTPRoute", "InferencePool", "HealthCheckPolicy", "GCPBackendPolicy"}
    assert validate_all(gateway_objects) == []
    (service,) = [m for m in manifests if m["kind"] == "Service" and m["metadata"]["name"] == "vllm"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["metadata"]["namespace"] == namespace
    assert "kubectl get gateway vllm-gateway" in result.outputs["vllm_endpoint_command"]


def test_committed_public_stack_plans_with_its_iap_client() -> None:
    """The public form's secrets are secret config, not in the file: the offline plan fills them as
    the program would see them (placeholders)."""
    parsed = stacks.read_stack_file(stacks.stack_path("llama-405b-ironwood"))
    iap = ("gke-tpu-llm:iapClientId", "gke-tpu-llm:iapClientSecret")
    values = {**parsed.values, **{key: stacks.SECRET_PLACEHOLDER for key in iap}}
    keys = tuple(dict.fromkeys((*parsed.secret_keys, *iap)))
    result: report.PlanResult = planned_file(dataclasses.replace(parsed, values=values, secret_keys=keys))
    manifests = result.manifests
    assert validate_all([m for m in manifests if (m["apiVersion"], m["kind"]) in GATEWAY_SCHEMAS]) == []
    (policy,) = [m for m in manifests if m["kind"] == "GCPBackendPolicy"]
    assert policy["spec"]["default"]["iap"]["enabled"] is True
    (gw,) = [m for m in manifests if m["kind"] == "Gateway"]
    assert [listener["port"] for listener in gw["spec"]["listeners"]] == [443]
    assert result.outputs["vllm_endpoint"] == "https://llm.example.com"


def test_the_gateway_curl_reads_tokens_from_stdin_never_argv() -> None:
    """The stack output ``vllm_curl`` (``clients.gateway_curl``): internal through the gateway's address;
    public over HTTPS with an IAP identity token for the OAuth client, passed on stdin (``curl -H @-``)."""
    from components.workloads.vllm import clients, disagg_render
    from components.workloads.vllm import render as vllm_render

    internal = planned("llama-70b").stack_plan
    backend = vllm_render.gateway_backend(internal)
    command = clients.gateway_curl(internal, backend, "llama-70b")
    assert command.startswith(f"curl http://$({clients.gateway_endpoint_command(backend, 'llama-70b')})/v1/completions")
    assert "Authorization" not in command
    public = planned("llama-405b-ironwood").stack_plan
    command = clients.gateway_curl(public, vllm_render.gateway_backend(public), "llama-405b-ironwood")
    assert "curl https://llm.example.com/v1/completions" in command
    assert "gcloud auth print-identity-token --audiences=" in command
    assert command.endswith("-H @-")
    split = planned("llama-70b-disagg").stack_plan
    assert disagg_render.gateway_backend(split).model in clients.gateway_curl(split, disagg_render.gateway_backend(split), "x")
