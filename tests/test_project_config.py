"""The ``config:`` block of ``Pulumi.yaml``: current, accepted by the Pulumi CLI, and no stack or spec
default it would break (components/tools/project_config.py says what the CLI does with it)."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import TypeAdapter

from components.config import stack_files as stacks
from components.config.errors import NAMESPACE
from components.config.loader import parse_full_config
from components.config.stack import StackConfig
from components.program.runtime import _decode
from components.tools import docs, project_config
from components.tools.cli import main
from components.tools.project_config import (
    PROJECT_FILE,
    ProjectFileError,
    config_text,
    declaration_problems,
    declared_type,
    project_file_text,
    stack_problems,
    value_has_type,
)
from components.workloads.registry import SECRETS
from tests.conftest import STACKS

BLOCK: dict[str, Any] = yaml.safe_load(PROJECT_FILE.read_text())["config"]
SECRET_KEYS = [f"{NAMESPACE}:{key}" for key in SECRETS]
BASE_STACK = "llama-70b"


def _fields() -> dict[str, Any]:
    """Spec fields by full config key (the engine's stack name is no key)."""
    out = {}
    for name, field in StackConfig.model_fields.items():
        if name != "stack":
            key = field.alias or name
            out[key if ":" in key else f"{NAMESPACE}:{key}"] = field
    return out


def _raw(stack: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A committed stack file as the CLI reads it: full keys, and which values are encrypted."""
    parsed = stacks.read_stack_file(stacks.stack_path(stack), fill_secrets=False)
    return parsed.values, parsed.secret_keys


def test_pulumi_yaml_config_block_is_current() -> None:
    text = PROJECT_FILE.read_text()
    assert text == project_file_text(text), "Pulumi.yaml's config: block is stale; run `.venv/bin/python -m components docs`"


def test_project_name_is_the_config_namespace() -> None:
    # The CLI reads bare and `<project>:` keys as the project's own, the only ones a type may be declared for.
    assert yaml.safe_load(PROJECT_FILE.read_text())["name"] == NAMESPACE


def test_the_cli_accepts_the_declarations() -> None:
    assert declaration_problems(NAMESPACE, BLOCK) == []


def test_every_top_level_key_is_declared_or_named_with_the_reason() -> None:
    config = project_config.project_config()
    assert set(config.declarations) | set(config.undeclared) == set(_fields()) | set(SECRET_KEYS)
    # Only provider keys and secrets stay out: every gke-tpu-llm key of the spec is declared.
    assert set(config.undeclared) == {"gcp:project", "gcp:region", *SECRET_KEYS}
    assert set(BLOCK) == {k for k in _fields() if k.startswith(f"{NAMESPACE}:")}
    header = PROJECT_FILE.read_text().partition(project_config.MARKER)[2].partition("\nconfig:")[0]
    for key in config.undeclared:
        assert key in header, f"the header of Pulumi.yaml's config: block does not say why {key} is not declared"


def test_descriptions_are_the_specs() -> None:
    for key, field in _fields().items():
        if key in BLOCK:
            assert BLOCK[key]["description"].startswith(docs.spec_text(field)), key


def test_a_default_is_declared_exactly_when_the_spec_has_one() -> None:
    for key, decl in BLOCK.items():
        # Without a default the CLI requires the key of every stack, so only spec-required keys may lack one.
        assert ("default" not in decl) == _fields()[key].is_required(), key


def _filled(default: Any) -> Any:
    """A default as the program reads it once the CLI filled it in: as text, decoded by the runtime."""
    return _decode(config_text(default))


@pytest.mark.parametrize("key", sorted(k for k, d in BLOCK.items() if "default" in d))
def test_a_default_validates_to_the_specs_default(key: str) -> None:
    field = _fields()[key]
    spec_default = field.get_default(call_default_factory=True, validated_data={})
    assert TypeAdapter(field.annotation).validate_python(_filled(BLOCK[key]["default"])) == spec_default


FILLED = {stack: sorted(k for k, d in BLOCK.items() if "default" in d and k not in _raw(stack)[0]) for stack in STACKS}


@pytest.mark.parametrize("stack", STACKS)
def test_the_filled_defaults_plan_the_same_stack(stack: str) -> None:
    """The CLI fills the defaults in for the keys a stack lacks: the program must read the same stack."""
    parsed = stacks.read_stack_file(stacks.stack_path(stack))
    filled = {**parsed.values, **{k: _filled(BLOCK[k]["default"]) for k in FILLED[stack]}}
    expected = parse_full_config(parsed.values, stack, parsed.secret_keys)
    assert parse_full_config(filled, stack, parsed.secret_keys) == expected


def test_some_committed_stack_relies_on_a_default() -> None:
    assert any(FILLED.values()), "no committed stack lacks a defaulted key: the test above proves nothing"


@pytest.mark.parametrize("stack", STACKS)
def test_committed_stack_passes_the_cli_checks(stack: str) -> None:
    values, secure = _raw(stack)
    assert stack_problems(NAMESPACE, BLOCK, stack, values, secure) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_value_the_spec_accepts_has_the_declared_type(stack: str) -> None:
    """Each spec value, defaults included, as a stack file would spell it: a type narrower than the spec
    would break a valid stack at `pulumi up`."""
    parsed = stacks.read_stack_file(stacks.stack_path(stack))
    dumped = parse_full_config(parsed.values, stack, parsed.secret_keys).model_dump(by_alias=True, mode="json")
    for key, decl in BLOCK.items():
        bare = key.partition(":")[2]
        assert value_has_type(decl["type"], decl.get("items"), dumped[bare]), f"{stack}: {key}={dumped[bare]!r}"


def test_a_declared_secret_would_break_every_stack_that_does_not_use_it() -> None:
    """Why the secrets are not declared: required without a default, rejected as plaintext with one."""
    values, secure = _raw(BASE_STACK)
    assert not any(k in values for k in SECRET_KEYS), "the base stack should use no secret"
    for key in SECRET_KEYS:
        required = {**BLOCK, key: {"type": "string", "secret": True}}
        assert stack_problems(NAMESPACE, required, BASE_STACK, values, secure) == [
            f"Stack '{BASE_STACK}' is missing configuration value(s) '{key}'"
        ]
        defaulted = {**BLOCK, key: {"type": "string", "secret": True, "default": ""}}
        assert stack_problems(NAMESPACE, defaulted, BASE_STACK, values, secure) == [
            f"Stack '{BASE_STACK}' with configuration key '{key}' must be encrypted as it's secret"
        ]


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (f"{NAMESPACE}:tpu", "v6e", "must be of type 'object'"),
        (f"{NAMESPACE}:allowTeardown", "yes", "must be of type 'boolean'"),
        (f"{NAMESPACE}:allowTeardown", 1, "must be of type 'boolean'"),
        (f"{NAMESPACE}:environment", {"name": "prod"}, "must be of type 'string'"),
        (f"{NAMESPACE}:buckets", ["models"], "must be of type 'object'"),
    ],
)
def test_the_checker_rejects_a_wrong_type(key: str, value: Any, problem: str) -> None:
    values, secure = _raw(BASE_STACK)
    assert stack_problems(NAMESPACE, BLOCK, BASE_STACK, {**values, key: value}, secure) == [
        f"Stack '{BASE_STACK}' with configuration key '{key}' {problem}"
    ]


def test_the_checker_requires_a_key_without_default() -> None:
    values, secure = _raw(BASE_STACK)
    del values[f"{NAMESPACE}:workload"]
    assert stack_problems(NAMESPACE, BLOCK, BASE_STACK, values, secure) == [
        f"Stack '{BASE_STACK}' is missing configuration value(s) '{NAMESPACE}:workload'"
    ]


def test_the_checker_types_as_the_cli_does() -> None:
    # Top-level scalars reach the check as text; inside an array values keep their JSON types.
    assert value_has_type("integer", None, "42")
    assert value_has_type("integer", None, 42)
    assert not value_has_type("integer", None, True)
    assert not value_has_type("integer", None, "4.5")
    assert value_has_type("string", None, 42)
    assert value_has_type("boolean", None, "false")
    strings = {"type": "string"}
    assert value_has_type("array", strings, ["a", "b"])
    assert not value_has_type("array", strings, ["a", 1])
    assert not value_has_type("array", None, ["a"]), "an array without items never validates"
    problems = declaration_problems(
        NAMESPACE,
        {
            "a": {"type": "object", "default": "x"},
            "b": {"type": "array"},
            "c": {"type": "map"},
            "d": {"description": "x", "required": True},
            "gcp:project": {"type": "string", "value": "p"},
            "gcp:region": {"value": "us-east5"},
            "e": {"type": "integer", "default": 3, "value": 4},
        },
    )
    assert problems == [
        "a: the default 'x' is not a object",
        "b: an array needs 'items'",
        "c: type 'map' is not one of string, integer, boolean, array, object",
        "d: attributes ['required'] are not allowed (only type, items, description, secret, default, value)",
        "gcp:project: a key outside the project namespace takes only a 'value' (no type or default)",
        "e: cannot have both a 'default' and a 'value'",
    ]


class _Mode(enum.Enum):
    a = "a"
    b = "b"


@pytest.mark.parametrize(
    ("annotation", "declared"),
    [
        (bool, {"type": "boolean"}),
        (int | None, {"type": "integer"}),
        (_Mode, {"type": "string"}),
        (Literal["x", "y"], {"type": "string"}),
        (Literal[1, "x"], {}),
        (float, {}),
        (int | str, {}),
        (dict[str, int], {"type": "object"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list[float], {}),
    ],
)
def test_declared_type_of_a_spec_annotation(annotation: Any, declared: dict[str, Any]) -> None:
    assert declared_type(annotation) == declared


def test_the_generator_keeps_the_rest_of_the_project_file(tmp_path: Path) -> None:
    original = "# kept\nruntime: python\nname: gke-tpu-llm  # and this\nstackConfigDir: stacks"
    once = project_file_text(original)
    assert once.startswith(original + "\n\n" + project_config.MARKER)
    assert project_file_text(once) == once
    loaded = yaml.safe_load(once)
    assert list(loaded) == ["runtime", "name", "stackConfigDir", "config"]
    assert loaded["config"] == BLOCK
    with pytest.raises(ProjectFileError, match="hand-written top-level `config:`"):
        project_file_text(original + "\nconfig:\n  gke-tpu-llm:foo: 1\n")


def test_docs_refuses_a_hand_written_config_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    project = tmp_path / "Pulumi.yaml"
    project.write_text("name: gke-tpu-llm\nruntime: python\nconfig:\n  gke-tpu-llm:foo: 1\n")
    monkeypatch.setattr(project_config, "PROJECT_FILE", project)
    monkeypatch.setattr(docs, "REFERENCE_FILE", tmp_path / "CONFIGURATION.md")
    assert main(["docs"]) == 2
    assert "hand-written top-level `config:`" in capsys.readouterr().err
    assert project.read_text().endswith("gke-tpu-llm:foo: 1\n"), "the file is left as it was"
