"""Every workload kind, once. Adding a kind = its package under ``components/workloads/`` + one line here."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import jetstream, maxtext_jobset, maxtext_ray, saxml, vllm
from .kind import WorkloadKindInfo

KINDS: tuple[WorkloadKindInfo, ...] = (
    jetstream.KIND,
    saxml.KIND,
    vllm.KIND,
    maxtext_ray.KIND,
    maxtext_jobset.KIND,
)

BY_KIND: Mapping[str, WorkloadKindInfo] = MappingProxyType({info.kind: info for info in KINDS})
"""Kind info by the ``kind`` value of stack files."""

BY_SECTION_KEY: Mapping[str, WorkloadKindInfo] = MappingProxyType({info.section_key: info for info in KINDS})
"""Kind info by the stack-file key of its settings section (``maxtextRay``)."""


def _secrets() -> Mapping[str, str]:
    merged: dict[str, str] = {}
    for info in KINDS:
        for key, text in info.secrets.items():
            if merged.setdefault(key, text) != text:
                raise ValueError(f"secret {key!r} is described differently by two workload kinds")
    return MappingProxyType(merged)


SECRETS: Mapping[str, str] = _secrets()
"""Secret config keys (``pulumi config set --secret gke-tpu-llm:<key>``) and what they hold. Their
values never enter the specs: components read them with ``pulumi.Config.require_secret``."""
