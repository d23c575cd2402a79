"""The policy pack against an attacker: crafted resources that step around each stated rule (issue 22:
split source ranges, exposure through an Ingress, a Gateway, a route or a *Patch, a custom project
role, floating tags, Helm values, a prod pool without its label, and every pod-security escape on
every pod-bearing kind), all denied by the rule named; and near misses, each as close as possible
to an evasion, that must pass (so the rules cannot simply deny everything). Every case runs on plain
dicts and on the policy SDK's read-only proxies."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from components.config import stack_files as stacks
from components.policy.checks import PRIVILEGED_TPU_ANNOTATION, PRIVILEGED_TPU_REASON, stack_violations, violations
from components.policy.resource_props import Resource
from components.tools import report
from tests.test_policy import HTTPS, IAP, PROD_LABELS, _through_sdk, backend_policy, pool_route, public_gateway

SVC = "kubernetes:core/v1:Service"
AUTH = {"gke-tpu-llm/auth": "api-key"}
NODE_SA = "s-tpu-nodes@p.iam.gserviceaccount.com"
GOOD_IMAGE = "vllm/vllm-tpu:v0.27.0"
DIGEST = "sha256:" + "0123456789abcdef" * 4


@dataclass(frozen=True)
class Case:
    resources: tuple[Resource, ...]
    rule: str | None = None
    """The one rule that denies it (None: a near miss, which passes)."""


def rules_broken(resources: Sequence[Resource]) -> set[str]:
    found = {name for res in resources for name, _ in violations(res)}
    return found | {name for name, _, _ in stack_violations(resources)}


def lb(ranges: Sequence[str], annotations: Mapping[str, str] = AUTH, type_: str = SVC, **spec: Any) -> Resource:
    return Resource(
        type_,
        "svc",
        {
            "metadata": {"name": "svc", "annotations": dict(annotations)},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 8000}], "loadBalancerSourceRanges": list(ranges), **spec},
        },
    )


def firewall(**props: Any) -> Resource:
    return Resource(
        "gcp:compute/firewall:Firewall", "fw", {"network": "default", "allows": [{"protocol": "tcp", "ports": ["8000"]}], **props}
    )


def ingress(annotations: Mapping[str, str], type_: str = "kubernetes:networking.k8s.io/v1:Ingress", **spec: Any) -> Resource:
    body = {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "svc"}}}]}}]}
    return Resource(type_, "ing", {"metadata": {"name": "ing", "annotations": dict(annotations)}, "spec": {**body, **spec}})


def gateway(gateway_class: str | None, type_: str = "kubernetes:gateway.networking.k8s.io/v1:Gateway") -> Resource:
    spec: dict[str, Any] = {"listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}
    if gateway_class is not None:
        spec["gatewayClassName"] = gateway_class
    return Resource(type_, "gw", {"metadata": {"name": "gw", "namespace": "llm"}, "spec": spec})


def route(parent: Mapping[str, str]) -> Resource:
    return Resource(
        "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
        "route",
        {"metadata": {"name": "route", "namespace": "llm"}, "spec": {"parentRefs": [dict(parent)]}},
    )


def member(role: str, type_: str = "gcp:projects/iAMMember:IAMMember") -> Resource:
    return Resource(type_, "grant", {"project": "p", "role": role, "member": f"serviceAccount:{NODE_SA}"})


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": GOOD_IMAGE, "securityContext": {"allowPrivilegeEscalation": False}, **fields}


def pod_spec(*containers: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {"containers": [dict(c) for c in containers or (container(),)], **fields}


def template(spec: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}, "annotations": dict(annotations or {})}, "spec": dict(spec)}


# Where each pod-bearing kind keeps its pod spec (the upstream API shapes).
def pod(spec: Mapping[str, Any], patch: bool = False) -> Resource:
    return Resource(
        "kubernetes:core/v1:Pod" + ("Patch" if patch else ""), "pod", {"metadata": {"name": "pod"}, "spec": dict(spec)}
    )


def workload(kind: str, spec: Mapping[str, Any], patch: bool = False) -> Resource:
    group = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1"}[kind]
    return Resource(
        f"kubernetes:{group}:{kind}" + ("Patch" if patch else ""), kind.lower(), {"spec": {"template": template(spec)}}
    )


def cronjob(spec: Mapping[str, Any]) -> Resource:
    return Resource(
        "kubernetes:batch/v1:CronJob",
        "cron",
        {"spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template(spec)}}}},
    )


def leaderworkerset(
    leader: Mapping[str, Any], worker: Mapping[str, Any], annotations: Mapping[str, str] | None = None
) -> Resource:
    group = {"leaderTemplate": template(leader, annotations), "workerTemplate": template(worker, annotations), "size": 2}
    return Resource("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "lws", {"spec": {"leaderWorkerTemplate": group}})


def jobset(spec: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> Resource:
    job = {"name": "servers", "replicas": 1, "template": {"spec": {"template": template(spec, annotations)}}}
    return Resource("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "js", {"spec": {"replicatedJobs": [job]}})


def raycluster(head: Mapping[str, Any], worker: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": template(head)},
        "workerGroupSpecs": [{"groupName": "tpu", "replicas": 1, "template": template(worker)}],
    }


def ray(kind: str, head: Mapping[str, Any], worker: Mapping[str, Any]) -> Resource:
    spec = (
        raycluster(head, worker)
        if kind == "RayCluster"
        else {"entrypoint": "python train.py", "rayClusterSpec": raycluster(head, worker)}
    )
    return Resource(f"kubernetes:ray.io/v1:{kind}", kind.lower(), {"spec": spec})


def image_deployment(image: str) -> Resource:
    return workload("Deployment", pod_spec(container(image=image)))


def release(values: Mapping[str, Any], **props: Any) -> Resource:
    return Resource(
        "kubernetes:helm.sh/v3:Release",
        "rel",
        {"name": "lws", "chart": "oci://registry.k8s.io/lws/charts/lws", "version": "0.7.0", "values": dict(values), **props},
    )


def pool(labels: Mapping[str, str], environment: str | None = "prod") -> Resource:
    node_config = {"machineType": "ct6e-standard-4t", "serviceAccount": NODE_SA, "resourceLabels": dict(labels)}
    return Resource(
        "gcp:container/nodePool:NodePool", "tpu-slice-0", {"nodeConfig": node_config}, protect=True, environment=environment
    )


def bucket(labels: Mapping[str, str], environment: str | None = "prod") -> Resource:
    props = {"uniformBucketLevelAccess": True, "publicAccessPrevention": "enforced", "labels": dict(labels)}
    return Resource("gcp:storage/bucket:Bucket", "b", props, environment=environment)


TPU = {"requests": {"google.com/tpu": 4}, "limits": {"google.com/tpu": 4}}
PRIVILEGED = {"securityContext": {"privileged": True}}
HOST_PATH = [{"name": "dev", "hostPath": {"path": "/dev"}}]
CAPS = {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["NET_RAW"]}}}
TPU_REASON = {PRIVILEGED_TPU_ANNOTATION: PRIVILEGED_TPU_REASON}
ENDPOINT_LB = "public-load-balancers-restricted-and-authenticated"
INGRESS = "no-public-ingress-or-gateway"
ROUTES = "routes-attach-to-stack-gateways"
GATEWAY_IAP = "public-gateways-behind-iap"
FIREWALL = "firewall-ingress-restricted"
IAM = "project-iam-allow-listed"
IMAGES = "no-unpinned-images"
LABELS = "prod-resources-labelled"
PODS = "pod-security-baseline"
AVAILABILITY = "prod-serving-availability-alert"


def prod_endpoint() -> Resource:
    spec = {"type": "ClusterIP", "ports": [{"port": 8000}]}
    return Resource(SVC, "svc", {"metadata": {"name": "vllm", "namespace": "llm"}, "spec": spec}, environment="prod")


def availability_alert(**props: Any) -> Resource:
    labels = {"gke-tpu-llm-alert": "availability", "environment": "prod"}
    return Resource("gcp:monitoring/alertPolicy:AlertPolicy", "alert", {"userLabels": labels, **props}, environment="prod")


PUBLIC_CLASSES = ("gke-l7-global-external-managed", "gke-l7-regional-external-managed", "gke-l7-gxlb", "istio")


def denied(rule: str, *resources: Resource) -> Case:
    return Case(resources, rule)


def passes(*resources: Resource) -> Case:
    return Case(resources)


EVASIONS: dict[str, Case] = {
    # Address space is summed, not compared to /0.
    "lb-ranges-split-in-halves": denied(ENDPOINT_LB, lb(["0.0.0.0/1", "128.0.0.0/1"])),
    "lb-ranges-many-small": denied(ENDPOINT_LB, lb([f"198.{i // 256}.{i % 256}.0/24" for i in range(300)])),
    "lb-ranges-two-public-16s": denied(ENDPOINT_LB, lb(["203.0.0.0/16", "198.51.0.0/16"])),
    "lb-ranges-ipv6-split": denied(ENDPOINT_LB, lb(["::/1", "8000::/1"])),
    "lb-ranges-ipv4-mapped-ipv6": denied(ENDPOINT_LB, lb(["::ffff:0:0/96"])),
    "lb-ranges-ipv6-containing-mapped": denied(ENDPOINT_LB, lb(["::/64"])),
    "lb-ranges-private-plus-public-neighbour": denied(ENDPOINT_LB, lb(["10.0.0.0/7"])),  # 11/8 is public
    "firewall-split-in-halves": denied(FIREWALL, firewall(sourceRanges=["0.0.0.0/1", "128.0.0.0/1"])),
    "firewall-without-source": denied(FIREWALL, firewall()),
    # Exposure through an Ingress, a Gateway, a route or a *Patch.
    "ingress-default-class": denied(INGRESS, ingress(AUTH)),
    "ingress-gce-class": denied(INGRESS, ingress({"kubernetes.io/ingress.class": "gce"})),
    "ingress-internal-annotation-other-class-name": denied(
        INGRESS, ingress({"kubernetes.io/ingress.class": "gce-internal"}, ingressClassName="nginx")
    ),
    "ingress-extensions-v1beta1": denied(INGRESS, ingress({}, type_="kubernetes:extensions/v1beta1:Ingress")),
    "ingress-patch-to-public-class": denied(
        INGRESS, ingress({"kubernetes.io/ingress.class": "gce"}, type_="kubernetes:networking.k8s.io/v1:IngressPatch")
    ),
    **{f"gateway-{name}": denied(INGRESS, gateway(name)) for name in PUBLIC_CLASSES},
    "gateway-patch-without-class": denied(INGRESS, gateway(None, type_="kubernetes:gateway.networking.k8s.io/v1:GatewayPatch")),
    "httproute-to-a-gateway-outside-the-stack": denied(ROUTES, route({"name": "shared-external", "namespace": "infra"})),
    # A public Gateway without Identity-Aware Proxy on every backend its routes reach, or with plain HTTP.
    "public-gateway-iap-on-another-pool": denied(GATEWAY_IAP, public_gateway(), pool_route("vllm"), backend_policy("other")),
    "public-gateway-iap-disabled": denied(
        GATEWAY_IAP, public_gateway(), pool_route("vllm"), backend_policy(iap={**IAP, "enabled": False})
    ),
    "public-gateway-iap-without-secret": denied(
        GATEWAY_IAP, public_gateway(), pool_route("vllm"), backend_policy(iap={"enabled": True, "clientID": "c"})
    ),
    "public-gateway-second-route-to-a-pool-without-iap": denied(
        GATEWAY_IAP, public_gateway(), pool_route("vllm"), backend_policy(), pool_route("raw", name="raw-route")
    ),
    "public-gateway-second-policy-switching-iap-off": denied(
        GATEWAY_IAP, public_gateway(), pool_route("vllm"), backend_policy(), backend_policy(iap={"enabled": False}, name="q")
    ),
    "public-gateway-iap-policy-in-the-gateways-namespace": denied(
        # The route (and its pool) live in llm; the policy in the Gateway's namespace targets edge/vllm.
        GATEWAY_IAP,
        public_gateway(namespace="edge"),
        pool_route("vllm", parent={"name": "gw", "namespace": "edge"}),
        backend_policy(namespace="edge"),
    ),
    "public-gateway-iap-on-a-service-of-the-pools-name": denied(
        GATEWAY_IAP, public_gateway(), pool_route("vllm"), backend_policy(kind="Service")
    ),
    "public-gateway-http-listener": denied(
        INGRESS, public_gateway([{"name": "http", "port": 80, "protocol": "HTTP"}]), pool_route("vllm"), backend_policy()
    ),
    "public-gateway-tls-passthrough": denied(
        INGRESS,
        public_gateway([{"name": "tls", "port": 443, "protocol": "HTTPS", "tls": {"mode": "Passthrough"}}]),
        pool_route("vllm"),
        backend_policy(),
    ),
    "public-gateway-routes-from-every-namespace": denied(
        INGRESS,
        public_gateway([{**HTTPS[0], "allowedRoutes": {"namespaces": {"from": "All"}}}]),
        pool_route("vllm"),
        backend_policy(),
    ),
    "public-multi-cluster-gateway-with-iap": denied(
        INGRESS,
        Resource(
            "kubernetes:gateway.networking.k8s.io/v1:Gateway",
            "gw",
            {
                "metadata": {"name": "gw", "namespace": "llm"},
                "spec": {"gatewayClassName": "gke-l7-global-external-managed-mc", "listeners": HTTPS},
            },
        ),
        pool_route("vllm"),
        backend_policy(),
    ),
    "service-patch-to-public-lb": denied(
        ENDPOINT_LB,
        Resource(
            SVC + "Patch", "svc", {"metadata": {"name": "svc"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 8000}]}}
        ),
    ),
    "service-patch-widening-ranges": denied(
        ENDPOINT_LB,
        Resource(
            SVC + "Patch",
            "svc",
            {"metadata": {"name": "svc"}, "spec": {"loadBalancerSourceRanges": ["0.0.0.0/1", "128.0.0.0/1"]}},
        ),
    ),
    "service-patch-split-ranges-stated": denied(ENDPOINT_LB, lb(["0.0.0.0/1", "128.0.0.0/1"], type_=SVC + "Patch")),
    "service-external-ips": denied(
        ENDPOINT_LB, Resource(SVC, "svc", {"spec": {"type": "ClusterIP", "ports": [{"port": 80}], "externalIPs": ["8.8.8.8"]}})
    ),
    # Project roles come from an allow-list, custom roles included.
    "custom-project-role": denied(IAM, member("projects/p/roles/nodeHelper")),
    "custom-organization-role-on-project": denied(IAM, member("organizations/123/roles/helper")),
    "unlisted-predefined-role": denied(IAM, member("roles/iam.serviceAccountTokenCreator")),
    "authoritative-binding-of-a-listed-role": denied(
        IAM,
        Resource(
            "gcp:projects/iAMBinding:IAMBinding",
            "b",
            {"project": "p", "role": "roles/container.defaultNodeServiceAccount", "members": [f"serviceAccount:{NODE_SA}"]},
        ),
    ),
    # Images without a version tag or a digest, Helm values included.
    "tag-rolling": denied(IMAGES, image_deployment("vllm/vllm-tpu:rolling")),
    "tag-latest-tpu": denied(IMAGES, image_deployment("vllm/vllm-tpu:latest-tpu")),
    "tag-stable-v2": denied(IMAGES, image_deployment("vllm/vllm-tpu:stable-v2")),
    "tag-major-only": denied(IMAGES, image_deployment("vllm/vllm-tpu:v0")),
    "helm-values-image-map-tag": denied(IMAGES, release({"image": {"repository": "registry.k8s.io/lws/lws", "tag": "rolling"}})),
    "helm-values-nested-image-map": denied(
        IMAGES, release({"controllerManager": {"manager": {"image": {"repository": "r.example/kueue", "tag": "latest"}}}})
    ),
    "helm-values-image-string": denied(IMAGES, release({"sidecar": {"image": "r.example/proxy:latest-tpu"}})),
    "helm-values-image-suffix-key": denied(IMAGES, release({"initImage": "busybox"})),
    "helm-values-repository-under-another-key": denied(
        IMAGES, release({"webhook": {"server": {"repository": "r.example/webhook", "tag": "edge"}}})
    ),
    "helm-values-repository-without-tag": denied(IMAGES, release({"image": {"repository": "attacker.example/lws"}})),
    "helm-chart-without-version": denied(IMAGES, release({}, version=None)),
    "image-volume-reference": denied(
        IMAGES, pod(pod_spec(volumes=[{"name": "weights", "image": {"reference": "r.example/weights:latest"}}]))
    ),
    # Every prod resource carries its labels.
    "prod-pool-without-environment-label": denied(LABELS, pool({"app": "gke-tpu-llm", "stack": "llama-405b-prod"})),
    "prod-pool-labelled-dev": denied(LABELS, pool({**PROD_LABELS, "environment": "dev"})),
    "prod-bucket-without-labels": denied(LABELS, bucket({})),
    # Pod security, on every pod-bearing kind and its patch.
    "privileged-pod": denied(PODS, pod(pod_spec(container(**PRIVILEGED)))),
    "privileged-pod-patch": denied(PODS, pod(pod_spec(container(**PRIVILEGED)), patch=True)),
    "privileged-init-container": denied(PODS, workload("Deployment", pod_spec(initContainers=[container(**PRIVILEGED)]))),
    "host-network-deployment": denied(PODS, workload("Deployment", pod_spec(hostNetwork=True))),
    "host-network-deployment-patch-alone": denied(
        PODS, Resource("kubernetes:apps/v1:DeploymentPatch", "d", {"spec": {"template": {"spec": {"hostNetwork": True}}}})
    ),
    "host-pid-statefulset": denied(PODS, workload("StatefulSet", pod_spec(hostPID=True))),
    "host-ipc-daemonset": denied(PODS, workload("DaemonSet", pod_spec(hostIPC=True))),
    "host-path-job": denied(PODS, workload("Job", pod_spec(volumes=HOST_PATH))),
    "capabilities-add-cronjob": denied(PODS, cronjob(pod_spec(container(**CAPS)))),
    "host-port-statefulset-patch": denied(
        PODS, workload("StatefulSet", pod_spec(container(ports=[{"containerPort": 8000, "hostPort": 8000}])), patch=True)
    ),
    "privileged-lws-leader": denied(PODS, leaderworkerset(pod_spec(container(**PRIVILEGED)), pod_spec())),
    "host-path-lws-worker": denied(PODS, leaderworkerset(pod_spec(), pod_spec(volumes=HOST_PATH))),
    "host-network-jobset": denied(PODS, jobset(pod_spec(hostNetwork=True))),
    "capabilities-add-raycluster-worker": denied(PODS, ray("RayCluster", pod_spec(), pod_spec(container(**CAPS)))),
    "host-pid-rayjob-head": denied(PODS, ray("RayJob", pod_spec(hostPID=True), pod_spec())),
    # The TPU exception is narrow: the annotation does not cover a container without TPUs...
    "tpu-annotation-on-a-cpu-container": denied(PODS, jobset(pod_spec(container(**PRIVILEGED)), TPU_REASON)),
    # ... nor another reason, nor host namespaces beside it.
    "tpu-annotation-other-reason": denied(
        PODS, jobset(pod_spec(container(resources=TPU, **PRIVILEGED)), {PRIVILEGED_TPU_ANNOTATION: "because"})
    ),
    "tpu-annotation-with-host-network": denied(
        PODS, jobset(pod_spec(container(resources=TPU, **PRIVILEGED), hostNetwork=True), TPU_REASON)
    ),
    # A prod serving stack whose availability alert is there but switched off.
    "prod-availability-alert-disabled": denied(AVAILABILITY, prod_endpoint(), availability_alert(enabled=False)),
}

NEAR_MISSES: dict[str, Case] = {
    "prod-serving-with-its-availability-alert": passes(prod_endpoint(), availability_alert(enabled=True)),
    "lb-ranges-exactly-a-public-16": passes(lb(["203.0.0.0/16"])),
    "lb-ranges-overlapping-collapse-to-a-16": passes(lb(["203.0.0.0/16", "203.0.113.0/24", "203.0.0.0/17"])),
    "lb-ranges-all-private-space": passes(
        lb(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "203.0.113.0/24"])
    ),
    "lb-ranges-ipv6-site": passes(lb(["2001:db8:1234::/48"])),
    "lb-ranges-ipv4-mapped-office": passes(lb(["::ffff:203.0.113.0/120"])),
    "lb-internal-any-source": passes(lb(["0.0.0.0/0"], {"networking.gke.io/load-balancer-type": "Internal"})),
    "firewall-from-the-vpc": passes(firewall(sourceRanges=["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"])),
    "firewall-by-source-tag": passes(firewall(sourceTags=["gke-nodes"])),
    "firewall-egress-anywhere": passes(firewall(direction="EGRESS", destinationRanges=["0.0.0.0/0"])),
    "firewall-deny-anywhere": passes(
        Resource(
            "gcp:compute/firewall:Firewall",
            "fw",
            {"network": "default", "denies": [{"protocol": "all"}], "sourceRanges": ["0.0.0.0/0"]},
        )
    ),
    "firewall-disabled": passes(firewall(sourceRanges=["0.0.0.0/0"], disabled=True)),
    "ingress-internal-class": passes(ingress({"kubernetes.io/ingress.class": "gce-internal"})),
    "ingress-patch-labels-only": passes(
        Resource("kubernetes:networking.k8s.io/v1:IngressPatch", "ing", {"metadata": {"name": "ing", "labels": {"team": "a"}}})
    ),
    "gateway-internal-with-its-route": passes(gateway("gke-l7-rilb"), route({"name": "gw"})),
    "public-gateway-https-with-iap-on-every-pool": passes(
        public_gateway(),
        pool_route("vllm"),
        backend_policy(),
        pool_route("raw", name="raw-route"),
        backend_policy("raw", name="q"),
    ),
    "public-gateway-iap-policy-targeting-the-pool-across-namespaces": passes(
        public_gateway(namespace="edge"),
        pool_route("vllm", parent={"name": "gw", "namespace": "edge"}),
        backend_policy(namespace="llm"),
    ),
    "gateway-cross-regional-internal": passes(gateway("gke-l7-cross-regional-internal-managed-mc")),
    "mesh-route-to-a-service": passes(route({"name": "svc", "kind": "Service", "group": ""})),
    "service-patch-labels-only": passes(Resource(SVC + "Patch", "svc", {"metadata": {"name": "svc", "labels": {"team": "a"}}})),
    "service-patch-cluster-ip-ports": passes(
        Resource(SVC + "Patch", "svc", {"metadata": {"name": "svc"}, "spec": {"type": "ClusterIP", "ports": [{"port": 8001}]}})
    ),
    "listed-project-role": passes(member("roles/container.defaultNodeServiceAccount")),
    "custom-role-on-a-bucket": passes(member("projects/p/roles/reader", type_="gcp:storage/bucketIAMMember:BucketIAMMember")),
    "tag-version": passes(image_deployment("us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.5.3")),
    "tag-rolling-with-digest": passes(image_deployment(f"vllm/vllm-tpu:rolling@{DIGEST}")),
    "digest-only": passes(image_deployment(f"vllm/vllm-tpu@{DIGEST}")),
    "helm-values-image-map-version": passes(release({"image": {"repository": "registry.k8s.io/lws/lws", "tag": "v0.7.0"}})),
    "helm-values-image-map-digest": passes(release({"image": {"repository": "registry.k8s.io/lws/lws", "digest": DIGEST}})),
    "helm-values-image-tag-only": passes(release({"image": {"tag": "0.7.0"}})),
    "helm-values-pull-policy-only": passes(release({"image": {"pullPolicy": "IfNotPresent"}})),
    "helm-values-image-string-version": passes(release({"sidecar": {"image": "r.example/proxy:1.28.0"}})),
    "helm-local-chart-without-version": passes(release({}, chart="./charts/lws", version=None)),
    "prod-pool-labelled": passes(pool(PROD_LABELS)),
    "dev-pool-without-labels": passes(pool({}, environment="dev")),
    "prod-bucket-labelled": passes(bucket({**PROD_LABELS, "purpose": "checkpoints"})),
    "pod-baseline": passes(
        workload(
            "Deployment",
            pod_spec(
                container(
                    securityContext={"privileged": False, "capabilities": {"drop": ["ALL"]}}, ports=[{"containerPort": 8000}]
                ),
                hostNetwork=False,
                volumes=[{"name": "cache", "emptyDir": {}}],
            ),
        )
    ),
    "pod-patch-replicas-only": passes(Resource("kubernetes:apps/v1:DeploymentPatch", "d", {"spec": {"replicas": 3}})),
    "privileged-tpu-container-with-the-reason": passes(jobset(pod_spec(container(resources=TPU, **PRIVILEGED)), TPU_REASON)),
    "privileged-tpu-lws-with-the-reason": passes(
        leaderworkerset(
            pod_spec(container(resources=TPU, **PRIVILEGED)), pod_spec(container(resources=TPU, **PRIVILEGED)), TPU_REASON
        )
    ),
    "crd-schema-naming-the-fields": passes(
        Resource(
            "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch",
            "crd",
            {
                "spec": {
                    "versions": [
                        {
                            "schema": {
                                "openAPIV3Schema": {
                                    "properties": {
                                        "hostNetwork": {"type": "boolean"},
                                        "containers": {"type": "array", "items": {"properties": {"image": {"type": "string"}}}},
                                        "privileged": {"type": "boolean"},
                                    }
                                }
                            }
                        }
                    ]
                }
            },
        )
    ),
}


def test_evasion_tables_cover_the_issue() -> None:
    """At least the 21 variants the issue lists, every one denied, and a near miss for each rule."""
    assert len(EVASIONS) >= 21
    assert len(NEAR_MISSES) >= 21
    denied_by = {case.rule for case in EVASIONS.values()}
    assert denied_by == {ENDPOINT_LB, INGRESS, ROUTES, GATEWAY_IAP, FIREWALL, IAM, IMAGES, LABELS, PODS, AVAILABILITY}
    for kind in (
        "Pod",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
        "LeaderWorkerSet",
        "JobSet",
        "RayCluster",
        "RayJob",
    ):
        assert any(res.type.endswith(f":{kind}") for case in EVASIONS.values() for res in case.resources), kind
    for field in ("privileged", "host-network", "host-pid", "host-ipc", "host-path", "capabilities-add"):
        assert any(name.startswith(field) for name in EVASIONS), field


@pytest.mark.parametrize("case", EVASIONS.values(), ids=list(EVASIONS))
def test_evasion_is_denied_by_its_rule(case: Case) -> None:
    assert rules_broken(case.resources) == {case.rule}
    assert rules_broken([_through_sdk(res) for res in case.resources]) == {case.rule}


@pytest.mark.parametrize("case", NEAR_MISSES.values(), ids=list(NEAR_MISSES))
def test_near_miss_passes(case: Case) -> None:
    assert rules_broken(case.resources) == set()
    assert rules_broken([_through_sdk(res) for res in case.resources]) == set()


def test_evasion_messages_say_what_is_wrong() -> None:
    def messages(res: Resource) -> list[str]:
        return [m for _, m in violations(res)]

    assert messages(lb(["::/1", "8000::/1"])) == [
        # ::/1 holds ::ffff:0:0/96, every IPv4 address mapped into IPv6
        "spec.loadBalancerSourceRanges admit 3,702,390,784 public IPv4 addresses in total, more than a /16 (65,536); "
        "list the client CIDRs",
        "spec.loadBalancerSourceRanges admit at least a /1 of public IPv6 space in total, more than a /32; list the client CIDRs",
    ]
    assert messages(lb(["2001:db8::/31"]))[0].startswith("spec.loadBalancerSourceRanges admit at least a /31 of public IPv6")
    assert messages(pool({"app": "gke-tpu-llm", "stack": "s"})) == [
        "prod resource without the label 'environment' in nodeConfig.resourceLabels"
    ]
    assert messages(release({"image": {"repository": "r.example/x", "tag": "rolling"}})) == [
        "values.image: image 'r.example/x:rolling' uses the floating tag 'rolling'; pin a version tag or a digest"
    ]
    assert messages(ray("RayCluster", pod_spec(), pod_spec(container(**CAPS)))) == [
        "spec.workerGroupSpecs[0].template.spec.containers[0] (c) adds capabilities SYS_ADMIN"
    ]
    assert messages(workload("Job", pod_spec(volumes=HOST_PATH))) == [
        "spec.template.spec.volumes[0] (dev) mounts the node's '/dev' (hostPath)"
    ]
    (ingress_message,) = messages(ingress({}))
    assert ingress_message.startswith(
        "Ingress of class 'unset (gce)' is public: set the annotation kubernetes.io/ingress.class: gce-internal"
    )


def test_saxml_privileged_model_servers_pass_through_the_tpu_exception_only() -> None:
    """The one rendered workload that may run privileged (Saxml's modelServerPrivileged, for GKE
    before 1.28) passes the pack through the annotation its renderer sets; without the annotation
    the same JobSet is refused, and the committed stack (unprivileged) carries no annotation."""
    stack_file = stacks.read_stack_file(stacks.stack_path("saxml-175b"))
    values = copy.deepcopy(stack_file.values)
    values["gke-tpu-llm:workload"]["saxml"]["modelServerPrivileged"] = True
    planned = report.plan(stacks.StackFile(stack_file.stack, stack_file.path, values, stack_file.secret_keys))
    (registered,) = [r for r in planned.resources if r.type == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"]
    pod_template = registered.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod_template["spec"]["containers"][0]["securityContext"]["privileged"] is True
    assert pod_template["metadata"]["annotations"] == TPU_REASON
    resources = [
        Resource(
            r.type, r.name, r.inputs, protect=r.options["protect"], secret_outputs=tuple(r.options["additionalSecretOutputs"])
        )
        for r in planned.resources
    ]
    assert [(res.name, v) for res in resources for v in violations(res)] == []

    stripped = copy.deepcopy(registered.inputs)
    del stripped["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"]
    assert [name for name, _ in violations(Resource(registered.type, registered.name, stripped))] == [PODS]
