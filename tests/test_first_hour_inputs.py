"""The first hour with a stack file: the mistakes a new user makes in a copy of an example stack each
end in exit 2 from the real CLI (``python -m components plan --config FILE``) with the key, the value
and the specific hint, never a traceback and never a misleading line.

Every case edits the text of ``stacks/Pulumi.llama-70b.yaml`` as a user would (a line changed, a
line added, an indentation lost) in a copy with its own ``gcp:project``: a copy in the project of
a committed stack would be refused by the isolation rules instead.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import Strict

from components.config import stack as stack_config
from components.config import stack_files as stacks
from components.config.base import Spec
from components.config.errors import DEFAULT_NOTE, DERIVED_NOTE, Violation, closest, mark_defaults
from components.config.loader import parse_full_config
from tests.conftest import STACKS, make_config, run_cli_process

EXAMPLE = stacks.stack_path("llama-70b")
PROJECT = "acme-ml-x-4821"

Edit = Callable[[str], str]


def example() -> str:
    """The example in another project, without its serving scenario (the cases write their own)."""
    text = EXAMPLE.read_text()
    assert "  gcp:project: your-project-id\n" in text
    return _without_serving(text.replace("  gcp:project: your-project-id\n", f"  gcp:project: {PROJECT}\n"))


def _without_serving(text: str) -> str:
    """``text`` without its ``    serving:`` block under the workload (the block's more-indented lines too)."""
    out: list[str] = []
    inside = False
    for x in text.split("\n"):
        if x.startswith("    serving:"):
            inside = True
            continue
        if inside and (x.startswith("      ") or (x.strip().startswith("#") and x.startswith("     "))):
            continue
        inside = False
        out.append(x)
    return "\n".join(out)


def line(old: str, new: str) -> Edit:
    """Replace the one line that starts with ``old`` (indentation included) by ``new``."""

    def edit(text: str) -> str:
        lines = text.split("\n")
        found = [i for i, x in enumerate(lines) if x.startswith(old)]
        assert len(found) == 1, (old, found)
        lines[found[0]] = new
        return "\n".join(lines)

    return edit


def after(old: str, *added: str) -> Edit:
    """Insert ``added`` lines after the one line that starts with ``old``."""

    def edit(text: str) -> str:
        lines = text.split("\n")
        found = [i for i, x in enumerate(lines) if x.startswith(old)]
        assert len(found) == 1, (old, found)
        lines[found[0] + 1 : found[0] + 1] = list(added)
        return "\n".join(lines)

    return edit


def plan(tmp_path: Path, *edits: Edit) -> tuple[int, str]:
    """(exit code, stderr) of the real CLI planning the edited copy."""
    text = example()
    for edit in edits:
        text = edit(text)
    path = tmp_path / "Pulumi.first-hour.yaml"
    path.write_text(text)
    proc = run_cli_process("plan", "--config", str(path))
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc.returncode, proc.stderr


SERVING = ("    serving:", "      inputTokens: 1024", "      outputTokens: 256")
"""A serving scenario under ``gke-tpu-llm:workload`` (its concurrency added by each case)."""
WORKLOAD = "    maxTargetLength: 4096"


def test_the_copy_plans(tmp_path: Path) -> None:
    code, err = plan(tmp_path)
    assert code == 0, err


# ---------------------------------------------------------------- did you mean, for allowed values

ENUM_CASES: dict[str, tuple[tuple[Edit, ...], tuple[str, ...]]] = {
    "weights-bf16": (
        (after(WORKLOAD, "    weights: bf16"),),
        (
            "gke-tpu-llm:workload.weights: 'bf16' is not an allowed value (did you mean 'bfloat16'?). "
            "Allowed: 'bfloat16', 'int8' or 'fp8'. Fix: write 'bfloat16'.",
        ),
    ),
    "kv-cache-case": ((after(WORKLOAD, "    kvCache: INT8"),), ("'INT8' is not an allowed value (did you mean 'int8'?)",)),
    "environment-capitalised": (
        (line("  gke-tpu-llm:environment:", "  gke-tpu-llm:environment: Prod"),),
        ("gke-tpu-llm:environment: 'Prod' is not an allowed value (did you mean 'prod'?)",),
    ),
    "kind-typo": (
        (line("    kind: vllm", "    kind: vlm"),),
        ("gke-tpu-llm:workload.kind: 'vlm' is not an allowed value (did you mean 'vllm'?)", "Fix: write 'vllm'"),
    ),
    "release-channel-lowercase": (
        (line("    releaseChannel: RAPID", "    releaseChannel: rapid"),),
        ("gke-tpu-llm:cluster.releaseChannel: 'rapid' is not an allowed value (did you mean 'RAPID'?)",),
    ),
    "service-type-suffix": (
        (line("        type: internal", "        type: internal-lb"),),
        ("gke-tpu-llm:workload.vllm.service.type: 'internal-lb' is not an allowed value (did you mean 'internal'?)",),
    ),
    "model-spelling": (
        (line("    model: llama3.1-70b", "    model: llama-3.1-70b"),),
        (
            "gke-tpu-llm:workload.model: 'llama-3.1-70b' is not in the model catalog (did you mean 'llama3.1-70b'?)",
            "Fix: write 'llama3.1-70b'.",
        ),
    ),
    "bucket-role-short": (
        (line("      models: roles/storage.objectUser", "      models: objectUser"),),
        (
            "gke-tpu-llm:identity.bucketRoles.models: 'objectUser' is not an allowed value "
            "(did you mean 'roles/storage.objectUser'?)",
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(ENUM_CASES))
def test_a_near_miss_of_an_allowed_value_gets_the_value_it_meant(case: str, tmp_path: Path) -> None:
    edits, expected = ENUM_CASES[case]
    code, err = plan(tmp_path, *edits)
    assert code == 2, err
    for text in expected:
        assert text in err, f"{text!r} not in:\n{err}"


def test_a_value_near_nothing_gets_no_guess(tmp_path: Path) -> None:
    # fp16 is another dtype, not a spelling of one this stack can hold: no suggestion beats a wrong one.
    code, err = plan(tmp_path, after(WORKLOAD, "    weights: fp16"))
    assert code == 2, err
    assert "gke-tpu-llm:workload.weights: 'fp16' is not an allowed value. Allowed: 'bfloat16', 'int8' or 'fp8'." in err
    assert "did you mean" not in err


@pytest.mark.parametrize(
    ("value", "candidates", "meant"),
    [
        ("bf16", ["bfloat16", "int8", "fp8"], "bfloat16"),
        ("int", ["bfloat16", "int8", "fp8"], "int8"),
        ("int4", ["bfloat16", "int8", "fp8"], None),  # another number is another value
        ("float8", ["bfloat16", "int8", "fp8"], None),
        ("on_demand", ["onDemand", "spot", "reservation", "flexStart", "queuedProvisioning"], "onDemand"),
        ("flex", ["onDemand", "spot", "reservation", "flexStart", "queuedProvisioning"], "flexStart"),
        ("object", ["roles/storage.objectViewer", "roles/storage.objectUser", "roles/storage.objectAdmin"], None),
        ("staging", ["dev", "prod"], None),
        (3, ["dev", "prod"], None),
    ],
)
def test_closest_picks_one_candidate_or_none(value: object, candidates: list[str], meant: str | None) -> None:
    assert closest(value, candidates) == meant


# ---------------------------------------------------------------- strict scalar types

TYPE_CASES: dict[str, tuple[tuple[Edit, ...], tuple[str, ...]]] = {
    "boolean-count": (
        (after(WORKLOAD, *SERVING, "      concurrency: true"),),
        (
            "gke-tpu-llm:workload.serving.concurrency: True is not a whole number (a boolean is not a count). "
            "Allowed: a whole number, unquoted and without a decimal point.",
        ),
    ),
    "quoted-count": (
        (after(WORKLOAD, *SERVING, '      concurrency: "64"'),),
        (
            "gke-tpu-llm:workload.serving.concurrency: '64' is not a whole number (YAML reads it as text)",
            "Fix: write 64, unquoted.",
        ),
    ),
    "decimal-count": (
        (line(WORKLOAD, "    maxTargetLength: 4096.0"),),
        ("gke-tpu-llm:workload.maxTargetLength: 4096.0 is not a whole number (it has a decimal point)", "Fix: write 4096."),
    ),
    "fractional-count": (
        (line("      maxNodes: 2", "      maxNodes: 1.5"),),
        ("gke-tpu-llm:tpu.autoscaling.maxNodes: 1.5 is not a whole number", "Fix: write a whole number (1 or 2)."),
    ),
    "quoted-number": (
        (after(WORKLOAD, *SERVING, "      concurrency: 8", '      ttftMs: "500"'),),
        ("gke-tpu-llm:workload.serving.ttftMs: '500' is not a number (YAML reads it as text)", "Fix: write 500, unquoted."),
    ),
    "boolean-number": (
        (after(WORKLOAD, *SERVING, "      concurrency: 8", "      tpotMs: false"),),
        ("gke-tpu-llm:workload.serving.tpotMs: False is not a number (a boolean is not a number)",),
    ),
    "quoted-boolean": (
        (after("    zone: us-east5-b", '    spot: "true"'),),
        ("gke-tpu-llm:tpu.spot: 'true' is not a boolean (YAML reads it as text)", "Fix: write true, unquoted."),
    ),
    "number-boolean": (
        (after(WORKLOAD, *SERVING, "      concurrency: 8", "      benchmark: 1"),),
        ("gke-tpu-llm:workload.serving.benchmark: 1 is not a boolean (a number is not true or false)",),
    ),
    "number-string": (
        (line("    model: llama3.1-70b", "    model: 3.1"),),
        (
            "gke-tpu-llm:workload.model: 3.1 is not a string (YAML reads an unquoted number as a number)",
            "Allowed: a string (quote it in YAML",
        ),
    ),
    "pulumi-text-boolean-only-true-or-false": (
        (after("  gke-tpu-llm:environment: dev", '  gke-tpu-llm:allowTeardown: "yes"'),),
        ("gke-tpu-llm:allowTeardown: 'yes' is not a boolean (YAML reads it as text)", "Fix: write true, unquoted."),
    ),
}


@pytest.mark.parametrize("case", sorted(TYPE_CASES))
def test_a_value_of_another_type_is_refused_not_coerced(case: str, tmp_path: Path) -> None:
    edits, expected = TYPE_CASES[case]
    code, err = plan(tmp_path, *edits)
    assert code == 2, err
    for text in expected:
        assert text in err, f"{text!r} not in:\n{err}"


def test_top_level_keys_take_the_text_pulumi_config_set_writes(tmp_path: Path) -> None:
    # `pulumi config set gke-tpu-llm:allowTeardown false` (no --path) stores the text "false".
    code, err = plan(
        tmp_path,
        line("  gke-tpu-llm:environment: dev", '  gke-tpu-llm:environment: "dev"'),
        after("  gke-tpu-llm:environment:", '  gke-tpu-llm:allowTeardown: "false"'),
        after("  gke-tpu-llm:environment:", '  gke-tpu-llm:unsafeShareProjectWithNonProd: "false"'),
    )
    assert code == 0, err


@pytest.mark.parametrize("stack", STACKS)
def test_every_committed_stack_has_its_types_as_written(stack: str) -> None:
    stack_file = stacks.read_stack_file(stacks.stack_path(stack))
    parse_full_config(stack_file.values, stack_file.stack, stack_file.secret_keys)


# ---------------------------------------------------------------- YAML errors where they start

YAML_CASES: dict[str, tuple[str, Edit, tuple[str, ...]]] = {
    # case: (the broken line, the edit that writes it, what the report says: {n} is that line's number)
    "unclosed-double-quote": (
        '  gcp:region: "us-east5',
        line("  gcp:region:", '  gcp:region: "us-east5'),
        (
            "line {n}, column 15: 'gcp:region: \"us-east5' is not valid YAML: the quoted value that starts here is "
            "never closed (the file ends first).",
            "Fix: close the quote on line {n}.",
            '      {n} |   gcp:region: "us-east5\n        |               ^\n',
        ),
    ),
    "unclosed-single-quote": (
        "  gcp:region: 'us-east5",
        line("  gcp:region:", "  gcp:region: 'us-east5"),
        (
            "line {n}, column 15: ",
            "the quote opened here is not closed on its line: YAML reads on to line ",
            "close the quote on line {n}",
        ),
    ),
    "indented-too-deep": (
        "   gke-tpu-llm:environment: dev",
        line("  gke-tpu-llm:environment:", "   gke-tpu-llm:environment: dev"),
        (
            "line {n}, column 4: ",
            "this line is indented deeper than the key on line {before}",
            "Fix: indent line {n} like the keys around it.",
        ),
    ),
    "indented-too-little": (
        "   topology: 2x4",
        line("    topology: 2x4", "   topology: 2x4"),
        ("line {n}, column 4: ", "is indented to column 4, but the key before it (line {before}) starts in column 5"),
    ),
    "tab": (
        "\tgke-tpu-llm:environment: dev",
        line("  gke-tpu-llm:environment:", "\tgke-tpu-llm:environment: dev"),
        (
            "line {n}, column 1: ",
            "a tab character: YAML indents and separates with spaces only",
            "Fix: replace the tab with spaces.",
        ),
    ),
    "unclosed-bracket": (
        "    parallelism: {{tensor: 8",
        after(WORKLOAD, "    parallelism: {tensor: 8"),
        ("line {n}, column 18: ", "the '{{' opened here is never closed", "Fix: close it with '}}' on line {n}."),
    ),
    "colon-in-a-value": (
        "  gcp:region: us-east5: b",
        line("  gcp:region:", "  gcp:region: us-east5: b"),
        ("line {n}, column 15: ", "this value holds ': '", "Fix: quote the value: 'us-east5: b'."),
    ),
    "key-without-colon": (
        "  gke-tpu-llm:environment dev",
        line("  gke-tpu-llm:environment:", "  gke-tpu-llm:environment dev"),
        ("line {n}, column 3: ", "this line has no ': ' after its key"),
    ),
}


@pytest.mark.parametrize("case", sorted(YAML_CASES))
def test_a_yaml_error_is_reported_where_it_starts(case: str, tmp_path: Path) -> None:
    broken, edit, expected = YAML_CASES[case]
    text = edit(example())
    lines = text.split("\n")
    n = lines.index(broken.format()) + 1
    code, err = plan(tmp_path, edit)
    assert code == 2, err
    assert "None" not in err, err
    assert f"line {len(lines)}," not in err, err  # the end of the file, where PyYAML gave up
    for template in expected:
        want = template.format(n=n, before=n - 1)
        assert want in err, f"{want!r} not in:\n{err}"


# ---------------------------------------------------------------- config keys outside `config:`


def _dedent_config(text: str) -> str:
    lines = text.split("\n")
    return "\n".join(x[2:] if x.startswith("  ") else x for x in lines if x != "config:")


def _rename_config(text: str) -> str:
    return text.replace("\nconfig:\n", "\nconfigs:\n")


def _nest_config(text: str) -> str:
    head, body = text.split("\nconfig:\n")
    return head + "\nconfig:\n  config:\n" + "\n".join(f"  {x}" if x else x for x in body.split("\n"))


def _one_key_dedented(text: str) -> str:
    return text.replace("  gke-tpu-llm:environment: dev\n", "") + "gke-tpu-llm:environment: dev\n"


OUTSIDE_CASES: dict[str, tuple[Edit, tuple[str, ...]]] = {
    "no-config-line": (
        _dedent_config,
        (
            "(top level): 'gcp:project, gcp:region, gke-tpu-llm:environment, gke-tpu-llm:cluster, gke-tpu-llm:tpu, "
            "gke-tpu-llm:buckets and 2 more' are config keys at the top level of the file, and the file has no "
            "`config:` line",
            "Fix: indent them by two spaces under a `config:` line at the top of the file.",
        ),
    ),
    "misspelt-config": (
        _rename_config,
        (
            "configs: 'gcp:project, ",
            "holds config keys, but Pulumi reads them only under `config:` (did you mean config?)",
            "Fix: rename `configs:` to `config:`.",
        ),
    ),
    "config-in-config": (
        _nest_config,
        ("config.config: 'gcp:project, ", "is nested one level too deep", "remove the inner `config:` line and dedent"),
    ),
    "one-key-dedented": (
        _one_key_dedented,
        ("(top level): 'gke-tpu-llm:environment' is a config key at the top level of the file, outside `config:`",),
    ),
}


@pytest.mark.parametrize("case", sorted(OUTSIDE_CASES))
def test_config_keys_outside_config_are_one_clear_problem(case: str, tmp_path: Path) -> None:
    edit, expected = OUTSIDE_CASES[case]
    code, err = plan(tmp_path, edit)
    assert code == 2, err
    assert "(1 problem(s))" in err, err
    assert "is required" not in err, err
    for text in expected:
        assert text in err, f"{text!r} not in:\n{err}"


# ---------------------------------------------------------------- a rule broken by a default


def _drop_buckets(text: str) -> str:
    start = text.index("  gke-tpu-llm:buckets:\n")
    end = text.index("  gke-tpu-llm:identity:\n")
    return text[:start] + text[end:]


def test_a_rule_broken_by_a_default_says_the_user_did_not_set_it(tmp_path: Path) -> None:
    code, err = plan(tmp_path, _drop_buckets)
    assert code == 2, err
    # workload.vllm.bucket is the spec's default ('models'); identity.bucketRoles.models is in the file.
    assert (
        "gke-tpu-llm:workload.vllm.bucket: 'models' (the default: you did not set this key) names no bucket of this stack." in err
    ), err
    assert "; or set gke-tpu-llm:workload.vllm.bucket yourself." in err
    assert "gke-tpu-llm:identity.bucketRoles.models: 'models' names no bucket of this stack." in err


def test_mark_defaults_reads_a_validated_config_too() -> None:
    """The later stages (capacity, planner) hold a ``StackConfig``, not the raw file: its explicitly
    set fields are what the user wrote."""
    config = make_config("first-hour")
    set_key = Violation("gke-tpu-llm:tpu.topology", config.tpu.topology, "does not fit", "", "use a larger slice")
    default_key = Violation("gke-tpu-llm:cluster.releaseChannel", "REGULAR", "is too old", "", "pick another")
    missing = Violation("gke-tpu-llm:tpu.reservation", None, "is required", "", "set it")
    not_a_key = Violation("line 3, column 1", "x", "is not valid YAML", "", "fix it")
    marked = mark_defaults([set_key, default_key, missing, not_a_key], config)
    assert marked[0] == set_key
    assert marked[2] == missing
    assert marked[3] == not_a_key
    assert marked[1].problem == f"{DEFAULT_NOTE} is too old"
    assert marked[1].fix == "pick another; or set gke-tpu-llm:cluster.releaseChannel yourself"
    assert mark_defaults(marked, config) == marked  # marking twice changes nothing
    (derived,) = mark_defaults([default_key], config, note=DERIVED_NOTE)
    assert derived.problem == f"{DERIVED_NOTE} is too old"


# ---------------------------------------------------------------- strictness and the types YAML gives


def _spec_classes() -> list[type[Spec]]:
    found: list[type[Spec]] = []
    todo: list[type[Spec]] = [Spec]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def _holds(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a tuple or an enum sits anywhere in ``annotation``."""
    if get_origin(annotation) is tuple or (isinstance(annotation, type) and issubclass(annotation, kinds)):
        return True
    return any(_holds(a, kinds) for a in get_args(annotation))


def test_no_strict_field_wants_a_type_yaml_never_gives() -> None:
    """Strict validation takes a tuple only as a tuple and an enum only as its member, and YAML (or the
    engine's JSON) gives lists and text: such a field would refuse every stack file that sets it,
    unless it is lax on purpose (``StackConfig.environment``)."""
    stack_config.StackConfig  # noqa: B018 (imports every kind's spec)
    wrong = [
        f"{cls.__name__}.{name}"
        for cls in _spec_classes()
        for name, field in cls.model_fields.items()
        if Strict(False) not in field.metadata and _holds(field.annotation, (enum.Enum,))
    ]
    assert wrong == []
