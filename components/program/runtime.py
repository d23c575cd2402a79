"""What the running Pulumi program reads from the engine: its stack name and config, validated.

Kept out of ``components.config`` so the config package stays pure (no Pulumi SDK): the offline
tools parse stack files with ``components.config.resolve.validated``; the real program and
the mock engine run this.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi

from ..config.errors import NAMESPACE
from ..config.resolve import validated
from ..config.stack import StackConfig
from ..config.stack_files import check_isolation
from . import pulumi_internals


def _decode(raw: Any) -> Any:
    """Pulumi keeps structured config as JSON text; plain strings stay strings."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def secret_keys_from_runtime() -> set[str]:
    """Config keys the running Pulumi program holds as secrets."""
    return pulumi_internals.config_secret_keys()


def raw_config_from_runtime() -> dict[str, Any]:
    """Every config key of the running Pulumi program, in every namespace (full keys), with the
    ``gke-tpu-llm:*`` values decoded; ``split_namespaces`` reports the keys no one reads."""
    merged = pulumi_internals.raw_config()
    return {
        full_key: _decode(raw) if full_key.partition(":")[0] == NAMESPACE else raw for full_key, raw in merged.items()
    }


def load_stack_config() -> StackConfig:
    """The stack config of the running Pulumi program (the root ``__main__.py``): validated, or one
    ``ConfigError`` listing every problem, including a name, Workload Identity namespace or prod
    project it would share with another stack file in ``stacks/`` (checked before anything registers)."""
    # ``validated``: as ``plan`` does, a wrong machine type is reported with its topology's root cause.
    config = validated(raw_config_from_runtime(), pulumi.get_stack(), secret_keys_from_runtime())
    check_isolation(config)
    return config

