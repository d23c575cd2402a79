"""CLI output fit for where it lands: ``--json`` prints one JSON object on every error too (same exit
codes; components/README-offline.md, "--json errors"), and ``review`` prints GitHub Markdown into a pipe
and a rendered comment into a terminal. Through the real CLI (a fresh interpreter) where the output's
destination matters."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import stack_files as stacks
from components.tools import report
from components.tools.cli import main
from components.tools.cli_review import terminal_markdown
from components.tools.review import COMMENT_MARKER
from tests.conftest import ROOT, planned, run_cli_process

ERROR_KEYS = {"kind", "exit", "command", "stack", "file", "message", "missing", "fix", "problems"}


def _strict(text: str) -> Any:
    """JSON as RFC 8259 has it: one document, no NaN or Infinity."""

    def no_constant(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(text, parse_constant=no_constant)


def error_of(stdout: str, exit_code: int) -> dict[str, Any]:
    """The error object of a ``--json`` run's stdout, with the documented keys and exit code."""
    document = _strict(stdout)
    assert set(document) == {"error"}
    error: dict[str, Any] = document["error"]
    assert set(error) == ERROR_KEYS
    assert error["exit"] == exit_code
    assert error["message"]
    return error


def bad_stack_file(tmp_path: Path, name: str = "llama-70b", workload: dict[str, Any] | None = None, **tpu: Any) -> Path:
    """A copy of stack ``name`` with ``tpu`` and ``workload`` keys replaced."""
    data = yaml.safe_load(stacks.stack_path(name).read_text())
    data["config"]["gke-tpu-llm:tpu"].update(tpu)
    data["config"]["gke-tpu-llm:workload"].update(workload or {})
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# ---------------------------------------------------------------- --json errors


def test_plan_json_config_error_is_one_json_object_with_every_problem(tmp_path: Path) -> None:
    # A topology outside v6e's and a NaN length: two problems, one of them a value JSON cannot hold.
    path = bad_stack_file(tmp_path, workload={"maxTargetLength": float("nan")}, topology="4x5")
    proc = run_cli_process("plan", "--config", str(path), "--json")
    assert proc.returncode == 2, proc.stderr
    error = error_of(proc.stdout, 2)
    assert (error["kind"], error["command"], error["stack"], error["file"]) == ("config", "plan", "llama-70b", str(path))
    problems = {p["key"]: p for p in error["problems"]}
    topology = problems["gke-tpu-llm:tpu.topology"]
    assert topology["value"] == "4x5"
    assert "2x4" in topology["allowed"]
    assert topology["problem"] == "is not a v6e topology"
    assert topology["fix"].startswith("pick a v6e topology")
    assert problems["gke-tpu-llm:workload.maxTargetLength"]["value"] == "nan"  # text: NaN is not JSON
    # The human report still goes to stderr, word for word what the message says.
    assert "invalid stack configuration (2 problem(s))" in proc.stderr
    assert error["message"] in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_stack_and_bad_flags_are_json_errors_too() -> None:
    proc = run_cli_process("plan", "no-such-stack", "--json")
    assert proc.returncode == 2
    error = error_of(proc.stdout, 2)
    assert (error["kind"], error["stack"]) == ("not-found", "no-such-stack")
    assert "llama-70b" in error["fix"]  # the stacks there are
    assert "no stack file" in proc.stderr

    proc = run_cli_process("estimate", "llama-70b", "--concurrency", "0", "--json")
    assert proc.returncode == 2
    error = error_of(proc.stdout, 2)
    assert (error["kind"], error["command"]) == ("usage", "estimate")
    assert "--concurrency 0 is outside" in error["message"]
    assert "usage: python -m components estimate" in proc.stderr  # argparse's text, as without --json


def test_a_command_that_reports_its_own_error_still_prints_json() -> None:
    """``estimate`` of a training kind without a model (MaxText on Ray) says so on stderr itself: the CLI
    turns that into the object."""
    proc = run_cli_process("estimate", "llama3-8b-train", "--json")
    assert proc.returncode == 2
    error = error_of(proc.stdout, 2)
    assert error["kind"] == "command"
    assert "has no training model here" in error["message"]


def test_without_json_stdout_stays_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--config", str(bad_stack_file(tmp_path, topology="4x5"))]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "gke-tpu-llm:tpu.topology: '4x5'" in err


def test_preflight_json_without_credentials_exits_3_with_the_fix(tmp_path: Path) -> None:
    """No application-default credentials anywhere the client library looks (no variable, an empty
    gcloud config and home, no metadata server: NO_GCE_CHECK, and any HTTP goes to a closed port)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "GCE_"))}
    closed = "127.0.0.1:9"
    env.update(
        HOME=str(tmp_path),
        CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
        NO_GCE_CHECK="true",
        GCE_METADATA_HOST=closed,
        GCE_METADATA_IP=closed,
        HTTPS_PROXY=f"http://{closed}",
        HTTP_PROXY=f"http://{closed}",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "components", "preflight", "llama-70b", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    error = error_of(proc.stdout, 3)
    assert (error["kind"], error["command"], error["stack"]) == ("cannot-check", "preflight", "llama-70b")
    assert error["missing"] == "application-default credentials"
    assert "gcloud auth application-default login" in error["fix"]
    assert "cannot check: no application-default credentials" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture
def stacks_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``stacks/``: llama-70b as committed, a copy of llama3-8b-train with a bad topology
    and a file that is not YAML."""
    directory = tmp_path / "stacks"
    directory.mkdir()
    (directory / "Pulumi.llama-70b.yaml").write_text(stacks.stack_path("llama-70b").read_text())
    bad = bad_stack_file(tmp_path, "llama3-8b-train", topology="4x5")
    (directory / "Pulumi.broken.yaml").write_text(bad.read_text())
    (directory / "Pulumi.garbled.yaml").write_text("config: [unclosed\n")
    monkeypatch.setattr(stacks, "STACKS_DIR", directory)
    return directory


def test_plan_all_json_keeps_each_plan_and_an_error_object_per_failing_stack(
    stacks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], shared_engine: None
) -> None:
    assert main(["plan", "--all", "--json"]) == 2
    out, err = capsys.readouterr()
    plans = _strict(out)
    assert sorted(plans) == ["broken", "garbled", "llama-70b"]
    assert plans["llama-70b"]["stack"] == "llama-70b"  # the plan, as `plan llama-70b --json` prints it
    assert plans["llama-70b"]["resources"]
    broken = plans["broken"]["error"]
    assert (broken["kind"], broken["stack"]) == ("config", "broken")
    assert [p["key"] for p in broken["problems"]] == ["gke-tpu-llm:tpu.topology"]
    assert (plans["garbled"]["error"]["kind"], plans["garbled"]["error"]["stack"]) == ("config", "garbled")
    assert "Pulumi.broken.yaml: invalid stack configuration" in err
    # review refuses such a document, naming the stack, rather than reviewing the error as a plan.
    (tmp_path / "head.json").write_text(out)
    assert main(["review", str(tmp_path / "head.json"), str(tmp_path / "head.json")]) == 2
    assert "`broken` could not be planned" in capsys.readouterr().err


# ---------------------------------------------------------------- review: Markdown into a pipe, rendered in a terminal


@pytest.fixture(scope="module")
def review_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Base and head plans of llama-70b: head costs $1/h more and changes one manifest (a diff block)."""
    directory = tmp_path_factory.mktemp("review")
    base = report.plan_json(planned("llama-70b"))
    head = json.loads(json.dumps(base))
    head["cost_usd_per_hour"]["billed"] = base["cost_usd_per_hour"]["billed"] + 1
    head["manifests"][0]["metadata"].setdefault("labels", {})["example.com/changed"] = "yes"
    (directory / "base.json").write_text(json.dumps({"llama-70b": base}))
    (directory / "head.json").write_text(json.dumps({"llama-70b": head}))
    return str(directory / "base.json"), str(directory / "head.json")


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
COLOUR_PARAMS = {*range(30, 50), *range(90, 98), *range(100, 108)}


def in_terminal(args: list[str], **env: str) -> tuple[int, str]:
    """(exit code, raw output) of ``python -m components ARGS`` with stdout on a real terminal (a pty
    200 columns wide)."""
    import fcntl
    import pty
    import struct
    import termios

    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TTY_COMPATIBLE")}
    environ.update(TERM="xterm-256color", **env)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "components", *args],
        cwd=ROOT,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.DEVNULL,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode().replace("\r\n", "\n")


def test_review_into_a_pipe_prints_the_markdown_comment(review_files: tuple[str, str]) -> None:
    proc = run_cli_process("review", *review_files)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(COMMENT_MARKER)
    assert "|---|" in proc.stdout
    assert "| `llama-70b` | dev |" in proc.stdout
    assert "```diff" in proc.stdout
    assert "\x1b[" not in proc.stdout
    # --format terminal renders into the pipe too (for `| less -R`).
    rendered = run_cli_process("review", *review_files, "--format", "terminal")
    assert rendered.returncode == 0
    assert "|---|" not in ANSI.sub("", rendered.stdout)
    assert "\x1b[" in rendered.stdout


def test_review_in_a_terminal_renders_the_comment(review_files: tuple[str, str]) -> None:
    code, raw = in_terminal(["review", *review_files])
    assert code == 0
    text = ANSI.sub("", raw)
    for markdown in ("|---|", "**", "```", "<!--", "<details>", "`llama-70b`"):
        assert markdown not in text, f"raw Markdown {markdown!r} in the terminal"
    assert "gke-tpu-llm plan review" in text
    assert re.search(r"llama-70b\s+dev\s+0\s+", text), text  # the table, as columns
    assert "+$1.00/h" in text
    assert "Kubernetes manifest diff:" in text
    assert "example.com/changed" in text  # the diff's line
    assert set(_sgr_params(raw)) & COLOUR_PARAMS, "a terminal gets colour"
    # NO_COLOR: styles (bold) stay, colour goes.
    code, raw = in_terminal(["review", *review_files], NO_COLOR="1")
    assert code == 0
    assert not set(_sgr_params(raw)) & COLOUR_PARAMS
    assert "+$1.00/h" in ANSI.sub("", raw)
    # --format markdown: the comment as is, terminal or not.
    code, raw = in_terminal(["review", *review_files, "--format", "markdown"])
    assert raw.startswith(COMMENT_MARKER)
    assert "|---|" in raw


def _sgr_params(raw: str) -> list[int]:
    return [int(p) for m in re.findall(r"\x1b\[([0-9;]*)m", raw) for p in m.split(";") if p]


def test_terminal_markdown_keeps_what_only_github_renders_out() -> None:
    comment = "\n".join(
        [
            COMMENT_MARKER,
            "## gke-tpu-llm plan review",
            "> [!CAUTION]",
            "> **Refused.** the reason.",
            "<details><summary>Kubernetes manifest diff</summary>",
            "```diff",
            "+a",
            "```",
            "</details>",
        ]
    )
    assert terminal_markdown(comment).splitlines() == [
        "## gke-tpu-llm plan review",
        "> **Caution:**",
        "> **Refused.** the reason.",
        "**Kubernetes manifest diff:**",
        "```diff",
        "+a",
        "```",
    ]


# ---------------------------------------------------------------- .ci/setup: progress on stderr, stdout clean

FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for python3 in .ci/setup: `-m venv DIR` makes DIR/bin/python (this script) and a checkov,
# `-m pip install` prints to stdout as pip does and records its arguments in $PIP_CALLS.
case "$1 $2" in
  "-c "*) exit 0 ;;
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && touch "$3/bin/checkov" && chmod +x "$3/bin/checkov" ;;
  "-m pip") echo "Collecting something"; echo "${*:3}" >> "$PIP_CALLS" ;;
esac
"""


def test_setup_says_each_step_on_stderr_and_keeps_stdout_clean(tmp_path: Path) -> None:
    """pr.yml runs `bash .ci/setup && … plan --all --json > base-plans.json`: whatever setup and pip
    print must not land in that file. Without a terminal pip gets --progress-bar off (a readable log)."""
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "setup").write_text((ROOT / ".ci" / "setup").read_text())
    for name in ("requirements.txt", "requirements-dev.txt", ".ci/requirements-scan.txt"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    python = tmp_path / "fake-python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "PIP_CALLS": str(tmp_path / "pip-calls")}
    proc = subprocess.run(["bash", str(tmp_path / ".ci" / "setup")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert "Collecting something" in lines  # pip's own output, on stderr
    steps = [line for line in lines if line.startswith("setup: ")]
    assert steps[0].startswith("setup: setting up .venv (one time; about ")
    assert any(re.fullmatch(r"setup: 3/3 requirements-dev\.txt \(download and install\): done in \d+ s", s) for s in steps)
    assert re.fullmatch(r"setup: \.venv/scan ready after \d+ s", steps[-1])
    calls = (tmp_path / "pip-calls").read_text().splitlines()
    assert len(calls) == 3, calls  # pip itself, requirements-dev.txt, the scanner
    assert all("--progress-bar off" in call for call in calls), calls
    assert calls[1].endswith("-r requirements-dev.txt")
    assert calls[2].endswith("-r .ci/requirements-scan.txt")
    # A second run finds both environments current and says nothing.
    again = subprocess.run(["bash", str(tmp_path / ".ci" / "setup")], env=env, capture_output=True, text=True, timeout=60)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
