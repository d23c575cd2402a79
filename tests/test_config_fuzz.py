"""Property: no stack file, however mangled, gets past loading with anything but a ConfigError.

Each example takes a committed stack file, applies one to three structural mutations (drop a key,
rename one, retype a value, swap two values, extreme numbers, random strings, nested lists and
maps), writes the result as YAML and loads it exactly as ``plan --config`` does
(``stacks.read_stack_file`` + ``stacks.config_of``: parsing, namespaces, validation, capacity).
The run is bounded and derandomized so CI sees the same examples every time.
"""

from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config import stack_files as stacks
from components.config.errors import ConfigError
from tests.conftest import STACKS

EXAMPLES_PER_STACK = 35  # x 6 stacks ~ 200 examples, a few seconds

Path_ = tuple[Any, ...]

EXTREME_NUMBERS = [math.inf, -math.inf, math.nan, 10**30, -(10**30), 2**63, -1, 0, 1e308, -1e-308, 0.5, 10**6]
scalars = st.one_of(
    st.sampled_from(EXTREME_NUMBERS),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=40),
    st.sampled_from(["", " ", "-", "default", "kube-system", "google", "gke-tpu-lm:x", "1.2.3", "4x4", "v6e", "us-east5-b"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=12) | st.sampled_from(["tensor", "kind"]), inner, max_size=3),
    ),
    max_leaves=6,
)
key_names = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["gke-tpu-lm:environment", "gke-tpu-llm:tpu.topology", "aws:region", "gcp:zone", "environment", "tpu"]),
)


def paths(tree: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every path to a value inside the config tree (dict keys and list indices)."""
    out: list[Path_] = []
    items: list[tuple[Any, Any]] = []
    if isinstance(tree, dict):
        items = list(tree.items())
    elif isinstance(tree, list):
        items = list(enumerate(tree))
    for key, value in items:
        out.append((*prefix, key))
        out += paths(value, (*prefix, key))
    return out


def parent_and_key(tree: Any, path: Path_) -> tuple[Any, Any]:
    node = tree
    for part in path[:-1]:
        node = node[part]
    return node, path[-1]


@st.composite
def mutated_config(draw: st.DrawFn, stack: str) -> dict[Any, Any]:
    doc = yaml.safe_load(stacks.stack_path(stack).read_text())
    config: dict[Any, Any] = copy.deepcopy(doc["config"])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        all_paths = paths(config)
        if not all_paths:
            break
        path = draw(st.sampled_from(all_paths))
        parent, key = parent_and_key(config, path)
        op = draw(st.sampled_from(["drop", "rename", "retype", "swap", "number", "string", "nest"]))
        if op == "drop":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(key_names)] = parent.pop(key)
        elif op == "swap":
            other_parent, other_key = parent_and_key(config, draw(st.sampled_from(all_paths)))
            try:
                parent[key], other_parent[other_key] = other_parent[other_key], parent[key]
            except (KeyError, IndexError):  # one path was inside the other
                pass
        elif op == "number":
            parent[key] = draw(st.sampled_from(EXTREME_NUMBERS))
        elif op == "string":
            parent[key] = draw(scalars)
        else:  # retype / nest (and rename inside a list)
            parent[key] = draw(values)
    return config


def load_as_the_cli_does(config: dict[Any, Any]) -> ConfigError | None:
    """The ConfigError loading raises, or None when the file is valid; anything else propagates."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_text(yaml.safe_dump({"config": config}, allow_unicode=True))
        try:
            stacks.config_of(stacks.read_stack_file(path))
        except ConfigError as error:
            return error
    return None


@pytest.mark.parametrize("stack", STACKS)
def test_mutated_stack_files_raise_only_config_errors(stack: str) -> None:
    @settings(
        max_examples=EXAMPLES_PER_STACK,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated_config(stack))
    def check(config: dict[Any, Any]) -> None:
        error = load_as_the_cli_does(config)
        if error is not None:
            assert error.violations, "a ConfigError names at least one problem"
            assert all(v.key and v.problem and v.fix for v in error.violations), str(error)

    check()
