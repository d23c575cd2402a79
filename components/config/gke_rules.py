"""Rules that both a stack file (``StackConfig``) and the components' Args (``components.platform.args``)
check: each is written once, here, and reports against the key its caller names.

Pure functions returning the ``rule(...)`` dicts of :mod:`components.config.errors` (empty when the
value is fine): the config raises them with ``raise_rules``, the Args turn them into ``Violation``s.
The ``key`` (and any key named in the text) is in the caller's spelling: ``gcp:region`` and
``tpu.allowUndocumentedZone: true`` in a stack file, ``region`` and ``allow_undocumented_region=True``
in the Args.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..catalog import gce
from ..catalog import tpu as tpu_catalog
from . import naming
from .errors import rule

LABEL_KEY_PATTERN = r"^[a-z][-_a-z0-9]{0,62}$"
"""GCP label keys: a lowercase letter first, then lowercase letters, digits, '-' and '_', at most 63."""
LABELS_MAX = 64
"""GCP labels per resource."""


def region_rules(
    key: str,
    region: str,
    *,
    allow_undocumented: bool,
    escape: str,
    generation: str | None = None,
    set_region: str = "use a listed region",
) -> list[dict[str, Any]]:
    """``region`` is a Compute Engine region of the catalog, or shaped like one where
    ``allow_undocumented`` (the ``escape`` setting, as the caller spells it: Google opens regions
    before the catalog lists them). With a ``generation``, the allowed values are its regions."""
    if region in gce.REGIONS or (allow_undocumented and gce.looks_like_region(region)):
        return []
    close = gce.close_regions(region)
    if generation is None:
        allowed = ", ".join(gce.REGIONS)
    else:
        gen = tpu_catalog.GENERATIONS[generation]
        allowed = f"regions where {gen.name} exists: {', '.join(gen.regions())}"
    return [
        rule(
            key,
            region,
            "is not a Compute Engine region in the catalog" + (f" (did you mean {' or '.join(close)}?)" if close else ""),
            allowed,
            f"{set_region}; or set {escape} if Google opened the region after the catalog (components/catalog/gce.py)",
        )
    ]


def zone_in_region_rules(
    key: str, zone: str, region: str, *, region_key: str, generation: str | None = None
) -> list[dict[str, Any]]:
    """``zone`` lies in ``region`` (``region_key`` says whose region, e.g. ``gcp:region``). The
    allowed values are the region's zones: where ``generation`` exists, if one is given."""
    if tpu_catalog.zone_region(zone) == region:
        return []
    if generation is None:
        allowed = f"zones of {region}: " + (", ".join(gce.zones_of(region)) or "none in the catalog")
    else:
        zones = [z for z in tpu_catalog.GENERATIONS[generation].zones if tpu_catalog.zone_region(z) == region]
        allowed = f"zones of {region} where {generation} exists: " + (", ".join(zones) or "none")
    return [rule(key, zone, f"is not in {region_key} {region}", allowed, f"pick a zone in the region or change {region_key}")]


def pinned_at_least(version: str | None, floor: str) -> bool:
    """Whether a pinned cluster ``version`` is ``floor`` or later; False when unset (the release
    channel's default is not known offline). The one version comparison the kinds' rules use."""
    return version is not None and tpu_catalog.gke_version_at_least(version, floor)


def gke_version_rules(key: str, version: str | None, generation: str | None) -> list[dict[str, Any]]:
    """A cluster ``version`` (at ``key``) is at or above the GKE minimum of the TPU ``generation``.
    Unset means the release channel's default, which cannot be read offline: it is accepted unless
    the catalog marks the generation ``requires_explicit_gke_version`` (a floor that a channel's
    default may be below), in which case the version must be set. No generation (not chosen yet):
    nothing to check."""
    if generation is None:
        return []
    gen = tpu_catalog.GENERATIONS[generation]
    if version is None:
        if not gen.requires_explicit_gke_version:
            return []
        return [
            rule(
                key,
                None,
                f"must be set for {gen.name}: its GKE minimum {gen.min_gke_version} may be newer than the "
                "release channel's default version, which is not known offline",
                f">= {gen.min_gke_version}",
                f"set {key}: {gen.min_gke_version} or newer",
            )
        ]
    if tpu_catalog.gke_version_at_least(version, gen.min_gke_version):
        return []
    return [
        rule(
            key,
            version,
            f"is below the {gen.name} minimum",
            f">= {gen.min_gke_version}",
            f"set {key} to {gen.min_gke_version} or newer" + ("" if gen.requires_explicit_gke_version else ", or unset it"),
        )
    ]


def project_rules(key: str, project: str) -> list[dict[str, Any]]:
    """``project`` is a GCP project id (not a project name or number)."""
    if re.match(naming.PROJECT_ID_PATTERN, project):
        return []
    return [
        rule(
            key,
            project,
            "is not a GCP project id",
            "6-30 lowercase letters, digits and '-', a letter first",
            "use the project's id (not its name or number)",
        )
    ]


def label_rules(key: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """GCP resource ``labels``: at most 64, each key a label key and each value a label value."""
    rules: list[dict[str, Any]] = []
    if len(labels) > LABELS_MAX:
        rules.append(rule(key, len(labels), "labels exceed GCP's limit per resource", f"at most {LABELS_MAX}", "drop labels"))
    for name, value in labels.items():
        if not re.match(LABEL_KEY_PATTERN, name):
            rules.append(
                rule(
                    f"{key}.{name}",
                    name,
                    "is not a GCP label key",
                    "a lowercase letter, then lowercase letters, digits, '-' and '_' (at most 63)",
                    "rename the label",
                )
            )
        for problem in naming.label_value_problems(value):
            rules.append(rule(f"{key}.{name}", value, problem, "a GCP label value", "change the value"))
    return rules


def fp8_rules(
    weights: str | None, kv_cache: str | None, *, kind: str, engine: str, generation: str | None
) -> list[dict[str, Any]]:
    """fp8 weights (``workload.weights``) or KV cache (``workload.kvCache``) need an engine that serves
    fp8 (vLLM: an FP8 checkpoint, ``--kv-cache-dtype=fp8``) and a TPU ``generation`` with an fp8 path
    in the catalog (a published ``peak_fp8_flops_per_chip``; v5e has none). No generation (not
    chosen yet): the planner skips the generations without one."""
    from ..planner.inputs import FP8_ENGINES

    fp8_generations = [g.name for g in tpu_catalog.GENERATIONS.values() if g.peak_fp8_flops_per_chip is not None]
    rules: list[dict[str, Any]] = []
    for key, dtype in (("workload.weights", weights), ("workload.kvCache", kv_cache)):
        if dtype != "fp8":
            continue
        if engine not in FP8_ENGINES:
            rules.append(
                rule(
                    key,
                    dtype,
                    f"is not served by kind {kind}: fp8 weights and KV cache run on vLLM only (MaxText quantizes "
                    "with int8, Saxml servables fix their own dtype)",
                    "bfloat16 or int8 (or unset)",
                    f"remove {key}, or use kind vllm",
                )
            )
        elif generation is not None and tpu_catalog.GENERATIONS[generation].peak_fp8_flops_per_chip is None:
            rules.append(
                rule(
                    key,
                    dtype,
                    f"needs a TPU generation with an fp8 path; {generation} has none in the catalog (no peak_fp8_flops_per_chip)",
                    f"tpu.generation: {', '.join(fp8_generations)}",
                    f"use one of those generations, or remove {key}",
                )
            )
    return rules


QUEUED_PROVISIONING = "queuedProvisioning"
"""The capacity type (``tpu.capacity[].type``) that is obtained through a Kueue queue, not a scheduler."""

COMPUTE_CLASS_MIN_GKE_VERSION = "1.30.3-gke.1451000"
"""Oldest GKE Standard version with custom ComputeClasses (GKE docs, "About custom compute classes":
"available ... in GKE Standard mode in version 1.30.3-gke.1451000 and later",
https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes)."""


def is_fallback_ladder(tier_types: Sequence[str]) -> bool:
    """Several capacity tiers ordered by a ComputeClass (components/render/tiers.py): more than one
    tier and none queued. A queued-provisioning tier makes Kueue, not the scheduler, decide where the
    workload runs: its pods wait for the ProvisioningRequest's nodes and cannot fall back from them."""
    return len(tier_types) > 1 and QUEUED_PROVISIONING not in tier_types


def compute_class_version_rules(key: str, version: str | None, tier_types: Sequence[str]) -> list[dict[str, Any]]:
    """A fallback ladder (``is_fallback_ladder``) needs custom ComputeClasses: a pinned cluster
    ``version`` (at ``key``) must be at least ``COMPUTE_CLASS_MIN_GKE_VERSION``. Unset (the release
    channel's default, not known offline) is accepted, as ``gke_version_rules`` accepts it for a
    generation without ``requires_explicit_gke_version``."""
    if version is None or not is_fallback_ladder(tier_types):
        return []
    if tpu_catalog.gke_version_at_least(version, COMPUTE_CLASS_MIN_GKE_VERSION):
        return []
    return [
        rule(
            key,
            version,
            "is below the GKE version with custom ComputeClasses, which order the capacity tiers of tpu.capacity",
            f">= {COMPUTE_CLASS_MIN_GKE_VERSION}",
            f"set {key} to {COMPUTE_CLASS_MIN_GKE_VERSION} or newer, or keep one capacity tier",
        )
    ]


def flex_start_version_rules(key: str, version: str | None, tier_types: Sequence[str]) -> list[dict[str, Any]]:
    """A pinned cluster ``version`` (at ``key``) runs the flexStart / queuedProvisioning tiers: GKE's floor
    for flex-start TPU node pools (components/catalog/tpu.py FLEX_START_MIN_GKE_VERSION, SRC_FLEX_START_ZONES;
    queued provisioning is flex-start with queueing). Unset (the channel's default) is accepted."""
    dws = [i for i, t in enumerate(tier_types) if t in tpu_catalog.DWS_CAPACITY_TYPES]
    minimum = tpu_catalog.FLEX_START_MIN_GKE_VERSION
    if not dws or version is None or tpu_catalog.gke_version_at_least(version, minimum):
        return []
    return [
        rule(
            key,
            version,
            f"is below GKE's minimum for flex-start TPU node pools (tpu.capacity.{dws[0]}; queued provisioning "
            "is flex-start too)",
            f">= {minimum}",
            f"set {key} to {minimum} or newer, or unset it",
        )
    ]


RAY_LADDER_MIN_GKE_VERSION = "1.31"
"""A multi-host Ray worker group in a fallback ladder is held in one pool by a pod affinity with
``matchLabelKeys`` (components/render/tiers.py), which Kubernetes enables by default from 1.31
(MatchLabelKeysInPodAffinity, beta; alpha and off in 1.29-1.30, where the key is dropped and a
multi-slice group cannot schedule)."""


def ray_ladder_version_rules(
    key: str, version: str | None, tier_types: Sequence[str], multi_host_ray: bool
) -> list[dict[str, Any]]:
    """A pinned cluster ``version`` (at ``key``) below :data:`RAY_LADDER_MIN_GKE_VERSION` for a fallback
    ladder of multi-host Ray worker groups. Unset (the channel's default) is accepted."""
    if version is None or not multi_host_ray or not is_fallback_ladder(tier_types):
        return []
    if tpu_catalog.gke_version_at_least(version, RAY_LADDER_MIN_GKE_VERSION):
        return []
    return [
        rule(
            key,
            version,
            "is below Kubernetes 1.31, which the capacity ladder of a multi-host Ray worker group needs "
            "(matchLabelKeys in pod affinity keeps each slice's hosts in one pool)",
            f">= {RAY_LADDER_MIN_GKE_VERSION}",
            f"set {key} to {RAY_LADDER_MIN_GKE_VERSION} or newer, or keep one capacity tier",
        )
    ]


def load_balancer_dataplane_rules(key: str, dataplane: str) -> list[dict[str, Any]]:
    """A load-balanced serving Service needs a dataplane whose ipBlocks never match pods: its
    NetworkPolicy admits the load balancer's clients by address (``components.render.netpol``), and
    Calico (``legacy``) matches ipBlocks against pod addresses too (projectcalico/calico#6634), so the
    ranges would admit the pods of every namespace whose addresses fall in them. GKE Dataplane V2
    (Cilium) applies CIDR rules to addresses outside the cluster only (Cilium docs,
    ``Documentation/policy/language.rst``)."""
    if dataplane == "v2":
        return []
    return [
        rule(
            key,
            dataplane,
            "enforces NetworkPolicies with Calico, which matches a policy's ipBlocks against pod addresses too "
            "(projectcalico/calico#6634): the load balancer's client ranges would admit the pods of every namespace "
            "whose addresses fall in them",
            "v2 for a stack that serves through a load balancer",
            "set cluster.dataplane: v2 (chosen when the cluster is created, so an existing cluster is replaced: see "
            "components/README-day2.md), or serve this workload from a cluster created with v2",
        )
    ]


INFERENCE_GATEWAY_DOCUMENTED_MIN_GKE_VERSION = "1.32.3"
"""GKE's own floor for GKE Inference Gateway (GKE "Deploy GKE Inference Gateway", "GKE Gateway
controller requirements": "GKE version 1.32.3", cloud.google.com/kubernetes-engine/docs/how-to/
deploy-gke-inference-gateway). Below the floor the stack enforces (:func:`inference_gateway_version_rules`):
the stack does not apply the Gateway API and InferencePool CRDs itself, so it needs the version that
installs them."""


def inference_gateway_version_rules(key: str, version: str | None, gateway: bool) -> list[dict[str, Any]]:
    """A pinned cluster ``version`` (at ``key``) of a stack whose front door is a gateway
    (``workload.frontDoor.type: gateway``) is at least ``components.config.front_door.GKE_VERSION_FLOOR``:
    GKE installs the GA Gateway API and Gateway API Inference Extension CRDs (InferencePool) itself
    from that version (llm-d GKE gateway guide: "GKE automatically installs all GA CRDs for Gateway API
    and Gateway API Inference Extension on GKE versions 1.34.0-gke.1626000 or later"), and the stack
    applies neither (a second manager would fight GKE's). Unset (the release channel's default, not
    known offline) is accepted here and checked by the online pre-flight against the live cluster."""
    # Imported when used: the front door's spec lives above this module (the config rules import it).
    from .front_door import GKE_VERSION_FLOOR

    if not gateway or version is None or tpu_catalog.gke_version_at_least(version, GKE_VERSION_FLOOR):
        return []
    return [
        rule(
            key,
            version,
            "is below the GKE version that installs the Gateway API and InferencePool CRDs, which the gateway front "
            f"door (workload.frontDoor.type: gateway) needs (GKE documents Inference Gateway from "
            f"{INFERENCE_GATEWAY_DOCUMENTED_MIN_GKE_VERSION}, with the CRDs installed by GKE from {GKE_VERSION_FLOOR})",
            f">= {GKE_VERSION_FLOOR}",
            f"set {key} to {GKE_VERSION_FLOOR} or newer, unset it, or set workload.frontDoor.type: service",
        )
    ]
