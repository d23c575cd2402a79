"""Which vLLM TPU release a stack runs, and the engine catalog's rules for it
(``components.catalog.engine_releases``, ``engine_releases.json``).

The version is ``workload.vllm.engineVersion`` when pinned, else the release a pinned
``workload.vllm.image`` names by tag, else the newest release in which nothing the stack selects is
broken. The server image is ``workload.vllm.image`` when set (a custom build), else the release's
image by tag and digest. A selected feature the catalog marks broken in that release exits 2, naming
the key that chose the release and the first release that fixes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from ...catalog import engine_releases as engines
from ...config.errors import rule

if TYPE_CHECKING:
    from ...config.stack import StackConfig

ENGINE = "vllm-tpu"


class _Pins(Protocol):
    """The two settings of ``VllmSpec`` that choose the release (read without importing the spec, which
    imports this module for its rules)."""

    image: str | None
    engine_version: str | None


def _pins(config: StackConfig) -> _Pins:
    return cast("_Pins", config.workload.vllm)  # type: ignore[attr-defined]


def selected_features(config: StackConfig) -> tuple[str, ...]:
    """The catalog features this stack's settings use (``engines.FEATURES`` keys)."""
    workload = config.workload
    used = ["prefixCaching"]  # vLLM's automatic prefix caching is on by default (no flag turns it off here)
    if config.tpu.pinned_multi_host:
        used += ["multiHostPipeline", "rayExecutor"]  # LWS + Ray, one pipeline stage per host (render.vllm_args)
    if workload.weights == "fp8":
        used.append("fp8Weights")
    if workload.kv_cache == "fp8":
        used.append("fp8KvCache")
    from .disagg import selected_features as disaggregation_features  # its KV connector, by attention type

    return (*used, *disaggregation_features(config))


def _chosen(config: StackConfig) -> tuple[str | None, str]:
    """(the version a key pins, that key) or (None, '') when the default applies."""
    spec = _pins(config)
    if spec.engine_version is not None:
        return spec.engine_version, "workload.vllm.engineVersion"
    if spec.image is not None:
        return engines.version_of_image(ENGINE, spec.image), "workload.vllm.image"
    return None, ""


def engine_version(config: StackConfig) -> str:
    """The release the stack runs (see the module docstring)."""
    pinned, _ = _chosen(config)
    return pinned or engines.newest_passing(ENGINE, selected_features(config)).version


def server_image(config: StackConfig) -> str:
    """The server's image: ``workload.vllm.image``, else the release's image (tag and digest)."""
    return _pins(config).image or engines.image_ref(ENGINE, engine_version(config))


def rules(config: StackConfig) -> list[dict[str, Any]]:
    """An unknown pinned release, an image that contradicts it, and every selected feature the catalog
    marks broken in the release (with the first release that fixes it)."""
    spec = _pins(config)
    known = engines.versions(ENGINE)
    found: list[dict[str, Any]] = []
    if spec.engine_version is not None and spec.engine_version not in known:
        return [
            rule(
                "workload.vllm.engineVersion",
                spec.engine_version,
                "is not a release the engine catalog lists (components/catalog/engine_releases.json)",
                ", ".join(known),
                "pick a listed release, or add the release to the catalog first (components/workloads/vllm/README.md, "
                "'Engine versions')",
            )
        ]
    if spec.engine_version is not None and spec.image is not None:
        named = engines.version_of_image(ENGINE, spec.image)
        if named is not None and named != spec.engine_version:
            found.append(
                rule(
                    "workload.vllm.image",
                    spec.image,
                    f"is release {named}, not workload.vllm.engineVersion {spec.engine_version}",
                    f"an image of release {spec.engine_version}, or unset",
                    "remove workload.vllm.image (the catalog's image of engineVersion is used) or make the two agree",
                )
            )
    pinned, key = _chosen(config)
    if pinned is None:
        return found
    for feature in engines.broken(ENGINE, pinned, selected_features(config)):
        fix = engines.fixed_in(ENGINE, pinned, feature)
        _, source = engines.status(ENGINE, pinned, feature)
        found.append(
            rule(
                key,
                spec.engine_version if key.endswith("engineVersion") else spec.image,
                f"runs vllm-tpu {pinned}, in which {engines.FEATURES[feature]} is broken ({source})",
                f"a release in which it works ({fix} or later)" if fix else "no release yet",
                f"use engine version {fix} or later (workload.vllm.engineVersion: {fix}, or unset for the newest)"
                if fix
                else f"do not use {engines.FEATURES[feature]} with vllm-tpu until a release fixes it",
            )
        )
    return found
