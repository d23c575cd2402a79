"""Tests for components.tools.validate (pure, offline, no Pulumi)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from kubernetes_validate import utils as kv_utils

from components.crds.releases import CUSTOM_RESOURCES
from components.tools import validate as v
from components.tools.validate import KUBERNETES_VERSION, validate_all, validate_object

Obj = dict[str, Any]


def _container(name: str = "main", **extra: Any) -> Obj:
    return {"name": name, "image": "us-docker.pkg.dev/p/r/vllm-tpu:1.0", **extra}


def _pod_template(**spec_extra: Any) -> Obj:
    return {
        "metadata": {"labels": {"app": "vllm"}},
        "spec": {"containers": [_container()], **spec_extra},
    }


# --------------------------------------------------------------------------- built-in fixtures


def deployment() -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "llm", "labels": {"app": "vllm"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "vllm"}},
            "template": _pod_template(),
        },
    }


def service() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": "vllm"},
            "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def service_account() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": "vllm",
            "namespace": "llm",
            "annotations": {"iam.gke.io/gcp-service-account": "vllm@p.iam.gserviceaccount.com"},
        },
    }


def namespace() -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}}


def job() -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "download-weights", "namespace": "llm"},
        "spec": {
            "backoffLimit": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [_container("download", args=["--model", "x"])],
                }
            },
        },
    }


def secret() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hf-token", "namespace": "llm"},
        "type": "Opaque",
        "stringData": {"HF_TOKEN": "hf_xxx"},
    }


def hpa() -> Obj:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60},
                    },
                }
            ],
        },
    }


BUILTIN_FIXTURES = [deployment, service, service_account, namespace, job, secret, hpa]


# --------------------------------------------------------------------------- CR fixtures


def lws() -> Obj:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm-multihost", "namespace": "llm"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 4,
                "workerTemplate": _pod_template(nodeSelector={"cloud.google.com/gke-tpu-topology": "4x4"}),
            },
        },
    }


def jobset() -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "llm"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "slice",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 4,
                            "completions": 4,
                            "backoffLimit": 0,
                            "template": _pod_template(restartPolicy="Never"),
                        }
                    },
                }
            ]
        },
    }


def _ray_cluster_spec() -> Obj:
    return {
        "rayVersion": "2.40.0",
        "headGroupSpec": {"rayStartParams": {}, "template": _pod_template()},
        "workerGroupSpecs": [
            {
                "groupName": "tpu",
                "replicas": 1,
                "minReplicas": 1,
                "maxReplicas": 1,
                "numOfHosts": 4,
                "rayStartParams": {},
                "template": _pod_template(),
            }
        ],
    }


def raycluster() -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray", "namespace": "llm"},
        "spec": _ray_cluster_spec(),
    }


def rayjob() -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "batch-infer", "namespace": "llm"},
        "spec": {
            "entrypoint": "python infer.py",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 600,
            "rayClusterSpec": _ray_cluster_spec(),
        },
    }


def podmonitoring() -> Obj:
    return {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {
            "selector": {"matchLabels": {"app": "vllm"}},
            "endpoints": [{"port": "metrics", "interval": "30s", "path": "/metrics"}],
        },
    }


def resourceflavor() -> Obj:
    # Kueue kinds: shapes of kubernetes-engine-samples ai-ml/gke-ray/tpu/dws/dws-tpu-queue.yaml
    # (upstream objects and their sources: tests/test_kueue.py, tests/data/kueue).
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "dws"},
        "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "tpu-slice-0"}},
    }


def clusterqueue() -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["google.com/tpu"],
                    "flavors": [{"name": "dws", "resources": [{"name": "google.com/tpu", "nominalQuota": 16}]}],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov", "onFlavors": ["dws"]}]},
        },
    }


def localqueue() -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "user-queue", "namespace": "llm"},
        "spec": {"clusterQueue": "cluster-queue"},
    }


def admissioncheck() -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "dws-prov"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws-config"},
        },
    }


def provisioningrequestconfig() -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "dws-config"},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": ["google.com/tpu"]},
    }


def computeclass() -> Obj:
    return {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": "tpu-v6e-4x4"},
        "spec": {
            "priorities": [
                {"nodepools": ["tpu-slice-0"]},
                {"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"}, "spot": True},
            ],
            "nodePoolAutoCreation": {"enabled": False},
            "whenUnsatisfiable": "DoNotScaleUp",
        },
    }


def autoscalingmetric() -> Obj:
    """A vLLM queue-depth gauge scraped from the serving pods, as components/workloads/vllm/autoscaling.py renders it."""
    return {
        "apiVersion": "autoscaling.gke.io/v1beta1",
        "kind": "AutoscalingMetric",
        "metadata": {"name": "vllm", "namespace": "llama-70b"},
        "spec": {
            "metrics": [
                {
                    "pod": {
                        "selector": {"matchLabels": {"app.kubernetes.io/component": "vllm"}},
                        "containers": [
                            {
                                "endpoint": {"port": 8000, "path": "/metrics"},
                                "metrics": [
                                    {
                                        "gauge": {
                                            "name": "num-requests-waiting",
                                            "prometheusMetricName": "vllm:num_requests_waiting",
                                        }
                                    }
                                ],
                            }
                        ],
                    }
                }
            ]
        },
    }


def checkpointconfiguration() -> Obj:
    """GKE Multi-Tier Checkpointing's page example, as components/platform/addons/multi_tier_checkpointing.py renders it."""
    return {
        "apiVersion": "checkpointing.gke.io/v1",
        "kind": "CheckpointConfiguration",
        "metadata": {"name": "llama3-8b-train-multislice"},
        "spec": {
            "cloudStorageBucketName": "my-project-ckpt-backup",
            "nodeSelector": {"node.kubernetes.io/instance-type": "ct6e-standard-4t"},
            "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
            "inMemoryVolumeSize": "52Gi",
            "gcsFuseMountOptions": ["implicit-dirs"],
        },
    }


def provisioningrequest() -> Obj:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "slice-0", "namespace": "llm"},
        "spec": {
            "provisioningClassName": "queued-provisioning.gke.io",
            "podSets": [{"count": 4, "podTemplateRef": {"name": "slice-0"}}],
        },
    }


# Gateway front door kinds (components.render.gateway): shapes of GAIE v1.5.0's inferencepool chart and its
# GKE templates (config/charts/inferencepool/templates/{inferencepool,gke,httproute}.yaml, body-based-routing/
# templates/gke.yaml) and the GAIE GKE gateway sample (config/manifests/gateway/gke/gateway.yaml).
_POOL_REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "vllm"}


def gateway() -> Obj:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "inference-gateway", "namespace": "llm"},
        "spec": {"gatewayClassName": "gke-l7-rilb", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    }


def httproute() -> Obj:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway"}],
            "rules": [{"backendRefs": [_POOL_REF], "matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}],
        },
    }


def inferencepool() -> Obj:
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {
            "targetPorts": [{"number": 8000}],
            "appProtocol": "http",
            "selector": {"matchLabels": {"app": "vllm"}},
            "endpointPickerRef": {"name": "vllm-epp", "port": {"number": 9002}, "failureMode": "FailOpen"},
        },
    }


def healthcheckpolicy() -> Obj:
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "HealthCheckPolicy",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {
            "targetRef": _POOL_REF,
            "default": {
                "timeoutSec": 2,
                "checkIntervalSec": 2,
                "config": {"type": "HTTP", "httpHealthCheck": {"requestPath": "/health", "port": 8000}},
            },
        },
    }


def gcpbackendpolicy() -> Obj:
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GCPBackendPolicy",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {"targetRef": _POOL_REF, "default": {"timeoutSec": 300, "logging": {"enabled": True}}},
    }


def gcproutingextension() -> Obj:
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GCPRoutingExtension",
        "metadata": {"name": "body-based-router", "namespace": "llm"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway"}],
            "extensionChains": [
                {
                    "name": "chain1",
                    "extensions": [
                        {
                            "name": "ext1",
                            "authority": "myext.com",
                            "timeout": "1s",
                            "supportedEvents": ["RequestHeaders", "RequestBody", "RequestTrailers"],
                            "requestBodySendMode": "FullDuplexStreamed",
                            "backendRef": {"group": "", "kind": "Service", "name": "body-based-router", "port": 9004},
                        }
                    ],
                }
            ],
        },
    }


GATEWAY_FIXTURES = [gateway, httproute, inferencepool, healthcheckpolicy, gcpbackendpolicy, gcproutingextension]

CR_FIXTURES = [
    lws,
    jobset,
    raycluster,
    rayjob,
    podmonitoring,
    resourceflavor,
    clusterqueue,
    localqueue,
    admissioncheck,
    provisioningrequestconfig,
    computeclass,
    provisioningrequest,
    checkpointconfiguration,
    autoscalingmetric,
    *GATEWAY_FIXTURES,
]


def _only(errors: list[str], *needles: str) -> None:
    assert errors, "expected validation errors"
    assert any(all(n in e for n in needles) for e in errors), errors


# --------------------------------------------------------------------------- built-in kinds


@pytest.mark.parametrize("make", BUILTIN_FIXTURES, ids=lambda f: f.__name__)
def test_validate_builtin_valid(make: Any) -> None:
    assert validate_object(make()) == []


@pytest.mark.parametrize("make", BUILTIN_FIXTURES, ids=lambda f: f.__name__)
def test_validate_builtin_valid_agrees_with_kubernetes_validate(make: Any) -> None:
    kubernetes_validate.validate(make(), KUBERNETES_VERSION, strict=True)  # must not raise


def test_validate_deployment_misspelled_field_strict() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    errors = validate_object(obj)
    assert errors == [("Deployment/vllm: spec.template.spec.containers[0].imagePullPolicyy: unknown field 'imagePullPolicyy'")]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_validate_deployment_wrong_type() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": "8000"}]
    _only(
        validate_object(obj),
        "Deployment/vllm: spec.template.spec.containers[0].ports[0].containerPort:",
        "is not of type 'integer'",
    )


def test_validate_deployment_reports_all_errors() -> None:
    obj = deployment()
    obj["spec"]["replicaz"] = 2
    obj["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    errors = validate_object(obj)
    assert len(errors) == 2
    _only(errors, "spec.replicaz", "unknown field")
    _only(errors, "containers[0].imagee", "unknown field")


def test_validate_float_in_integer_field_fails() -> None:
    obj = deployment()
    obj["spec"]["replicas"] = 4.0
    _only(validate_object(obj), "Deployment/vllm: spec.replicas: 4.0 is not of type 'integer'")
    # kubernetes_validate.validate (jsonschema's default type checker) would accept it:
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_validate_float_in_int_or_string_field_fails() -> None:
    obj = service()
    obj["spec"]["ports"][0]["targetPort"] = 8000.0
    _only(validate_object(obj), "spec.ports[0].targetPort", "8000.0")


def test_validate_float_in_crd_integer_field_fails() -> None:
    obj = lws()
    obj["spec"]["leaderWorkerTemplate"]["size"] = 4.0
    assert validate_object(obj) == [
        ("LeaderWorkerSet/vllm-multihost: spec.leaderWorkerTemplate.size: 4.0 is not of type 'integer'")
    ]


def test_validate_builtin_unknown_kind_in_core_group() -> None:
    obj = deployment()
    obj["kind"] = "Deploymnet"
    _only(validate_object(obj), "Deploymnet/vllm: <root>: no schema for apps/v1 Deploymnet")


def test_validate_unknown_kind_no_schema() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    errors = validate_object(obj)
    assert len(errors) == 1
    assert errors[0].startswith("Widget/w: <root>: no schema for example.com/v1 Widget; known: ")
    assert "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet" in errors[0]


def test_validate_unknown_crd_version_no_schema() -> None:
    obj = raycluster()
    obj["apiVersion"] = "ray.io/v1alpha1"
    _only(validate_object(obj), "no schema for ray.io/v1alpha1 RayCluster")


def test_validate_missing_api_version_and_kind() -> None:
    errors = validate_object({"metadata": {"name": "x"}})
    _only(errors, "<no kind>/x: apiVersion: missing")
    _only(errors, "<no kind>/x: kind: missing")


def test_validate_not_a_mapping() -> None:
    assert validate_object([]) == [  # type: ignore[arg-type]
        "<no kind>/<no name>: <root>: expected a mapping, got list"
    ]


def test_validate_unsupported_kubernetes_version() -> None:
    _only(validate_object(deployment(), kubernetes_version="1.99"), "has no schemas for")
    _only(validate_object(lws(), kubernetes_version="1.20"), "has no schemas for")


def test_validate_kubernetes_version_is_shipped_by_kubernetes_validate() -> None:
    assert f"{KUBERNETES_VERSION}.0" in kv_utils.all_versions()
    assert v._kv_schema_version(KUBERNETES_VERSION) == f"{KUBERNETES_VERSION}.0"
    assert v._kv_schema_version("1.34.7") == "1.34.0"


def test_validate_field_from_newer_kubernetes_version() -> None:
    # Pod-level `resources` (PodLevelResources) exists in the 1.32+ schemas, not in 1.31.
    obj = deployment()
    obj["spec"]["template"]["spec"]["resources"] = {"limits": {"cpu": "4"}}
    assert validate_object(obj) == []
    _only(validate_object(obj, kubernetes_version="1.31"), "resources", "unknown field")


def test_validate_metadata_label_syntax() -> None:
    obj = service()
    obj["metadata"]["labels"] = {"model": "meta-llama/Llama-3.1-8B", "bad key!": "x"}
    errors = validate_object(obj)
    _only(errors, "metadata.labels.model", "value 'meta-llama/Llama-3.1-8B'")
    _only(errors, "metadata.labels[bad key!]", "key 'bad key!'")


def test_validate_namespace_syntax() -> None:
    obj = secret()
    obj["metadata"]["namespace"] = "LLM"
    _only(validate_object(obj), "Secret/hf-token: metadata.namespace:", "RFC 1123 label")


def test_validate_does_not_mutate_input() -> None:
    obj = lws()
    obj["spec"]["leaderWorkerTemplate"]["sizee"] = 1
    before = copy.deepcopy(obj)
    validate_object(obj)
    assert obj == before


def test_validate_all_concatenates_in_order() -> None:
    bad_service = service()
    bad_service["spec"]["portz"] = []
    bad_lws = lws()
    bad_lws["spec"]["leaderWorkerTemplate"]["size"] = "4"
    errors = validate_all([namespace(), bad_service, deployment(), bad_lws])
    assert len(errors) == 2
    assert errors[0].startswith("Service/vllm: spec.portz:")
    assert errors[1].startswith("LeaderWorkerSet/vllm-multihost: spec.leaderWorkerTemplate.size:")
    assert validate_all([]) == []


# --------------------------------------------------------------------------- custom resources


@pytest.mark.parametrize("make", CR_FIXTURES, ids=lambda f: f.__name__)
def test_validate_custom_resource_valid(make: Any) -> None:
    assert validate_object(make()) == []


@pytest.mark.parametrize(
    ("make", "path", "field"),
    [
        (lws, ["spec", "leaderWorkerTemplate"], "sizee"),
        (jobset, ["spec", "replicatedJobs", 0], "replicaz"),
        (raycluster, ["spec", "headGroupSpec"], "rayStartParam"),
        (rayjob, ["spec"], "entryPoint"),
        (podmonitoring, ["spec", "endpoints", 0], "intervall"),
        (inferencepool, ["spec"], "targetPort"),
        (gcpbackendpolicy, ["spec", "default"], "timeoutSecs"),
        (gateway, ["spec", "listeners", 0], "tls_mode"),
    ],
    ids=["lws", "jobset", "raycluster", "rayjob", "podmonitoring", "inferencepool", "gcpbackendpolicy", "gateway"],
)
def test_validate_custom_resource_typo(make: Any, path: list[Any], field: str) -> None:
    obj = make()
    node = obj
    for key in path:
        node = node[key]
    node[field] = 1
    errors = validate_object(obj)
    assert len(errors) == 1, errors
    assert f".{field}: unknown field '{field}'" in errors[0]
    assert errors[0].startswith(f"{obj['kind']}/{obj['metadata']['name']}: {path[0]}")


def test_validate_lws_size_string_fails() -> None:
    obj = lws()
    obj["spec"]["leaderWorkerTemplate"]["size"] = "4"
    assert validate_object(obj) == [
        ("LeaderWorkerSet/vllm-multihost: spec.leaderWorkerTemplate.size: '4' is not of type 'integer'")
    ]


def test_validate_lws_missing_required_worker_template() -> None:
    obj = lws()
    del obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    _only(validate_object(obj), "spec.leaderWorkerTemplate", "'workerTemplate' is a required")


def test_validate_lws_embedded_pod_template_typo() -> None:
    obj = lws()
    worker = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    worker["spec"]["nodeSelectr"] = {}
    worker["metadata"]["label"] = {}
    errors = validate_object(obj)
    prefix = "LeaderWorkerSet/vllm-multihost: spec.leaderWorkerTemplate.workerTemplate."
    assert sorted(errors) == sorted(
        [
            prefix + "spec.containers[0].imagePullPolicyy: unknown field 'imagePullPolicyy'",
            prefix + "spec.nodeSelectr: unknown field 'nodeSelectr'",
            prefix + "metadata.label: unknown field 'label'",
        ]
    )


def test_validate_jobset_embedded_job_and_pod_typo() -> None:
    obj = jobset()
    job_spec = obj["spec"]["replicatedJobs"][0]["template"]["spec"]
    job_spec["backoffLimitt"] = 0
    job_spec["template"]["spec"]["containers"][0]["resources"] = {"limitz": {}}
    errors = validate_object(obj)
    _only(errors, "spec.replicatedJobs[0].template.spec.backoffLimitt: unknown field")
    _only(errors, "template.spec.template.spec.containers[0].resources.limitz: unknown field")


def test_validate_raycluster_wrong_types() -> None:
    obj = raycluster()
    obj["spec"]["workerGroupSpecs"][0]["numOfHosts"] = "4"
    obj["spec"]["headGroupSpec"]["enableIngress"] = "yes"
    errors = validate_object(obj)
    _only(errors, "spec.workerGroupSpecs[0].numOfHosts", "not of type 'integer'")
    _only(errors, "spec.headGroupSpec.enableIngress", "not of type 'boolean'")


def test_validate_podmonitoring_duration_format_not_checked() -> None:
    obj = podmonitoring()
    obj["spec"]["endpoints"][0]["interval"] = "1m30s"  # Go duration, not ISO 8601
    assert validate_object(obj) == []


def test_validate_podmonitoring_port_int_or_string() -> None:
    obj = podmonitoring()
    obj["spec"]["endpoints"][0]["port"] = 8000
    assert validate_object(obj) == []
    obj["spec"]["endpoints"][0]["port"] = 8000.0
    _only(validate_object(obj), "spec.endpoints[0].port", "not valid under any")


def test_validate_custom_resource_unknown_top_level_field() -> None:
    obj = podmonitoring()
    obj["sepc"] = {}
    _only(validate_object(obj), "PodMonitoring/vllm: sepc: unknown field 'sepc'")


# --------------------------------------------------------------------------- CR metadata


@pytest.mark.parametrize("make", CR_FIXTURES, ids=lambda f: f.__name__)
def test_validate_custom_resource_requires_name(make: Any) -> None:
    obj = make()
    del obj["metadata"]["name"]
    kind = obj["kind"]
    assert validate_object(obj) == [f"{kind}/<no name>: metadata.name: required: custom resources need a name"]


def test_validate_custom_resource_requires_metadata() -> None:
    obj = podmonitoring()
    del obj["metadata"]
    _only(validate_object(obj), "PodMonitoring/<no name>: metadata: required")


def test_validate_custom_resource_metadata_typo() -> None:
    obj = rayjob()
    obj["metadata"]["lables"] = {"a": "b"}
    assert validate_object(obj) == ["RayJob/batch-infer: metadata.lables: unknown field 'lables'"]


def test_validate_fixtures_cover_every_declared_custom_resource() -> None:
    # The custom resources validated here are those of components/crds/releases.py and the gateway
    # front door's (validate.GATEWAY_SCHEMAS): a kind added there gets its valid fixture here (and so
    # the schema, metadata and name tests above).
    declared = set(CUSTOM_RESOURCES) | set(v.GATEWAY_SCHEMAS)
    assert {(f()["apiVersion"], f()["kind"]) for f in CR_FIXTURES} == declared
    assert set(v.CONTROLLER_RESOURCES) | set(v.CUSTOM_RESOURCE_SCHEMAS) == declared


@pytest.mark.parametrize("make", CR_FIXTURES, ids=lambda f: f.__name__)
def test_validate_custom_resource_name_not_dns_subdomain(make: Any) -> None:
    obj = make()
    obj["metadata"]["name"] = "Bad_Name"
    _only(validate_object(obj), "Bad_Name: metadata.name:", "RFC 1123 subdomain")


@pytest.mark.parametrize("make", [lws, jobset, raycluster, rayjob], ids=lambda f: f.__name__)
def test_validate_custom_resource_name_must_be_dns1035(make: Any) -> None:
    obj = make()
    obj["metadata"]["name"] = "v1.model"  # valid DNS-1123 subdomain, not a DNS-1035 label
    _only(validate_object(obj), "metadata.name:", "DNS-1035 label")
    obj["metadata"]["name"] = "7b-model"  # must start with a letter
    _only(validate_object(obj), "metadata.name:", "DNS-1035 label")


def test_validate_podmonitoring_name_subdomain_allowed() -> None:
    obj = podmonitoring()
    obj["metadata"]["name"] = "vllm.v1"
    assert validate_object(obj) == []


@pytest.mark.parametrize(
    ("make", "limit"),
    [(lws, 63), (raycluster, 53), (rayjob, 47)],
    ids=["lws", "raycluster", "rayjob"],
)
def test_validate_custom_resource_name_length(make: Any, limit: int) -> None:
    obj = make()
    obj["metadata"]["name"] = "a" * limit
    assert validate_object(obj) == []
    obj["metadata"]["name"] = "a" * (limit + 1)
    _only(validate_object(obj), "metadata.name:", f"no more than {limit} characters")


def test_validate_jobset_generated_job_name_too_long() -> None:
    obj = jobset()
    obj["metadata"]["name"] = "j" * 50
    rjob = obj["spec"]["replicatedJobs"][0]
    rjob["template"]["spec"].pop("completions")
    rjob["name"] = "w" * 10
    rjob["replicas"] = 10  # longest job name: 50 + 1 + 10 + 1 + 1 = 63 -> ok
    assert validate_object(obj) == []
    rjob["replicas"] = 11  # ... -10 -> 64 chars
    _only(
        validate_object(obj),
        "JobSet/" + "j" * 50 + ": spec.replicatedJobs[0]: generated Job name",
        "no more than 63 characters",
    )


def test_validate_jobset_generated_pod_name_too_long() -> None:
    obj = jobset()
    obj["metadata"]["name"] = "j" * 40
    # pod: 40 + "-slice" (6) + "-1" (2) + "-3" (2) + "-abcde" (6) = 56 -> ok
    assert validate_object(obj) == []
    obj["metadata"]["name"] = "j" * 48  # 64 -> too long
    _only(validate_object(obj), "generated Pod name", "no more than 63 characters")
    # NonIndexed jobs have random pod names: only the Job name is checked.
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = "NonIndexed"
    assert validate_object(obj) == []


def test_validate_jobset_subdomain_must_be_dns1035() -> None:
    obj = jobset()
    obj["spec"]["network"] = {"subdomain": "svc.example"}
    _only(validate_object(obj), "spec.network.subdomain:", "DNS-1035 label")


# --------------------------------------------------------------------------- schema loading


def test_validate_vendored_schemas_layout_and_load() -> None:
    # (Draft202012Validator.check_schema passes for all of them too, but takes ~5 s.)
    for (api_version, kind), rel in v.CUSTOM_RESOURCE_SCHEMAS.items():
        path = v.SCHEMA_DIR / rel
        assert path.is_file(), path
        assert path.parent.name == api_version.split("/")[0]
        assert path.name == f"{kind}-{api_version.split('/')[1]}.json"
        schema = v._load_crd_schema(rel)
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert schema["properties"]["metadata"] == {"type": "object"}
    assert (v.SCHEMA_DIR / "README.md").is_file()


def test_validate_transformed_small_schema_is_valid_json_schema() -> None:
    rel = v.CUSTOM_RESOURCE_SCHEMAS[("monitoring.googleapis.com/v1", "PodMonitoring")]
    jsonschema.Draft202012Validator.check_schema(v._load_crd_schema(rel))


def test_validate_strictify_transform() -> None:
    schema: Obj = {
        "type": "object",
        "properties": {
            "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
            "open": {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "x-kubernetes-preserve-unknown-fields": True,
            },
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "time": {"type": "string", "nullable": True},
            "list": {"type": "array", "items": {"type": "object", "properties": {}}},
            "either": {"anyOf": [{"type": "object", "properties": {"b": {}}}]},
            # data, not schemas: must be left alone
            "withDefault": {"type": "object", "default": {"properties": {"x": {}}}},
        },
    }
    v._strictify(schema)
    props = schema["properties"]
    assert schema["additionalProperties"] is False
    assert props["closed"]["additionalProperties"] is False
    assert "additionalProperties" not in props["open"]
    assert props["map"]["additionalProperties"] == {"type": "string"}
    assert props["time"] == {"type": ["string", "null"]}
    assert props["list"]["items"]["additionalProperties"] is False
    assert props["either"]["anyOf"][0]["additionalProperties"] is False
    assert props["withDefault"]["default"] == {"properties": {"x": {}}}


def test_validate_schemas_are_cached() -> None:
    assert v._crd_validator("ray.io/v1", "RayJob") is v._crd_validator("ray.io/v1", "RayJob")
    a = v._builtin_validator(KUBERNETES_VERSION, "apps/v1", "Deployment")
    assert a is v._builtin_validator(KUBERNETES_VERSION, "apps/v1", "Deployment")


def test_validate_vendored_schema_is_minified_upstream_content() -> None:
    text = (v.SCHEMA_DIR / v.CUSTOM_RESOURCE_SCHEMAS[("ray.io/v1", "RayJob")]).read_text("utf-8")
    data = json.loads(text)
    assert text == json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n"
    assert "nullable" in text  # on-disk files are untransformed
