"""GitHub Actions workflows: actionlint and zizmor (regular and auditor personas) clean; cloud
credentials only inside GitHub environments and, for pull requests, only for same-repository
branches; every `run` step fails on a failed pipe; stack lists come from stacks/ (deploy.yml takes
any stack file's name, checked before use) and expressions reach scripts through `env` only; the
approval of a deploy comes after its preview and `pulumi up` applies that preview's plan on the same
commit and state; actions pinned by commit, the Pulumi CLI from its official action; the cloud jobs'
Python packages from hashed locks; the PR comment updater edits only its own comments."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from components.config import naming
from components.config import stack_files as stacks
from components.tools import report
from tests.conftest import STACKS, planned

WORKFLOWS_DIR = stacks.ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOWS_DIR.glob("*.yml"))
SCRIPTS_DIR = stacks.ROOT / ".github" / "scripts"
SCRIPT = SCRIPTS_DIR / "stack_environments.py"
GATE = SCRIPTS_DIR / "deploy_gate.py"
UPSERT = SCRIPTS_DIR / "upsert-comment.js"
BIN = Path(sys.executable).parent

SAME_REPO = "github.event.pull_request.head.repo.full_name == github.repository"
# Triggers that hand secrets to code from outside the repository's branches.
UNSAFE_TRIGGERS = {"pull_request_target", "workflow_run"}


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "pr.yml", "deploy.yml"}


def test_workflows_actionlint_clean() -> None:
    proc = subprocess.run(
        [str(BIN / "actionlint"), *map(str, WORKFLOWS)], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_workflows_zizmor_clean(persona: str) -> None:
    """The auditor persona reports everything, false positives included; a finding we accept must
    carry an inline `# zizmor: ignore[<audit>]` with its reason, so it shows up in review."""
    proc = subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--no-progress", "--persona", persona, str(WORKFLOWS_DIR)],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflows_zizmor_ignores_carry_a_reason() -> None:
    for path in WORKFLOWS:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            match = re.search(r"#\s*zizmor:\s*ignore\[[^\]]+\](.*)$", line)
            if match:
                assert len(match.group(1).strip(" -—:")) >= 10, f"{path.name}:{n}: say why the finding is accepted"


def _load(name: str) -> dict[str, Any]:
    # BaseLoader keeps every scalar a string, so the `on:` key is not read as YAML 1.1's True.
    doc: dict[str, Any] = yaml.load((WORKFLOWS_DIR / name).read_text(), Loader=yaml.BaseLoader)
    return doc


def _triggers(doc: dict[str, Any]) -> set[str]:
    on = doc.get("on", {})
    if isinstance(on, str):
        return {on}
    return set(on)


def _environment(job: dict[str, Any]) -> str | None:
    env = job.get("environment")
    if isinstance(env, dict):
        env = env.get("name")
    return env or None


def _receives_credentials(doc: dict[str, Any], job: dict[str, Any]) -> list[str]:
    """Why ``job`` can obtain cloud or deploy credentials: an OIDC token or a repository secret."""
    why = []
    permissions = job["permissions"] if "permissions" in job else doc.get("permissions", {})
    if permissions == "write-all" or (isinstance(permissions, dict) and permissions.get("id-token") == "write"):
        why.append("id-token: write")
    text = yaml.safe_dump(job)
    secrets = sorted(set(re.findall(r"secrets\.([A-Za-z0-9_]+)", text)) - {"GITHUB_TOKEN"})
    if secrets:
        why.append("secrets " + ", ".join(secrets))
    if job.get("secrets") == "inherit":
        why.append("secrets: inherit")
    return why


def credential_problems(doc: dict[str, Any]) -> list[str]:
    """Every job that receives credentials runs in a GitHub environment (whose protection rules
    and scoped secrets are the real boundary), and in a pull-request workflow only for branches of
    this repository and never in the prod environment."""
    out = []
    triggers = _triggers(doc)
    out += [f"trigger {t} runs untrusted code with secrets" for t in sorted(triggers & UNSAFE_TRIGGERS)]
    for name, job in (doc.get("jobs") or {}).items():
        why = _receives_credentials(doc, job)
        if not why:
            continue
        env = _environment(job)
        if env is None:
            out.append(f"job {name} receives credentials ({'; '.join(why)}) outside a GitHub environment")
        if "pull_request" in triggers:
            condition = " ".join(str(job.get("if", "")).split())
            if SAME_REPO not in condition:
                out.append(f"job {name} receives credentials on pull_request without `{SAME_REPO}`")
            if env is not None and ("${{" in env or env == "prod"):
                out.append(f"job {name} on pull_request must use a fixed non-prod environment, not {env!r}")
    return out


@pytest.mark.parametrize("workflow", [p.name for p in WORKFLOWS])
def test_workflows_credentials_only_in_environments(workflow: str) -> None:
    assert credential_problems(_load(workflow)) == []


def test_workflows_credential_check_catches_the_old_pr_preview() -> None:
    """The shape pr.yml had: deploy identity and passphrase for every branch's code, no environment."""
    job: dict[str, Any] = {
        "if": "vars.GCP_WORKLOAD_IDENTITY_PROVIDER != ''",
        "permissions": {"contents": "read", "id-token": "write"},
        "steps": [{"run": "pulumi preview", "env": {"PULUMI_CONFIG_PASSPHRASE": "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"}}],
    }
    doc: dict[str, Any] = {"on": {"pull_request": ""}, "jobs": {"cloud-preview": job}}
    assert credential_problems(doc) == [
        "job cloud-preview receives credentials (id-token: write; secrets PULUMI_CONFIG_PASSPHRASE) outside a GitHub environment",
        f"job cloud-preview receives credentials on pull_request without `{SAME_REPO}`",
    ]
    job["if"] = SAME_REPO
    job["environment"] = "prod"
    assert credential_problems(doc) == ["job cloud-preview on pull_request must use a fixed non-prod environment, not 'prod'"]
    job["environment"] = "preview"
    assert credential_problems(doc) == []
    assert credential_problems({"on": "pull_request_target", "jobs": {}}) == [
        "trigger pull_request_target runs untrusted code with secrets"
    ]


def pipefail_problems(doc: dict[str, Any]) -> list[str]:
    """Every `run` step's shell fails on a failed pipe. GitHub runs a step without an explicit shell
    as `bash -e {0}` (no pipefail); `shell: bash` (on the step, or in job or workflow `defaults`)
    runs `bash --noprofile --norc -eo pipefail {0}`."""
    out = []
    workflow_shell = ((doc.get("defaults") or {}).get("run") or {}).get("shell")
    for name, job in (doc.get("jobs") or {}).items():
        job_shell = ((job.get("defaults") or {}).get("run") or {}).get("shell")
        for i, step in enumerate(job.get("steps") or ()):
            if "run" not in step:
                continue
            shell = step.get("shell") or job_shell or workflow_shell
            if not (shell == "bash" or (shell and "pipefail" in shell)):
                out.append(f"job {name} step {step.get('name', i)}: shell {shell or '(default: bash -e)'} has no pipefail")
    return out


@pytest.mark.parametrize("workflow", [p.name for p in WORKFLOWS])
def test_workflows_every_run_step_fails_on_a_failed_pipe(workflow: str) -> None:
    assert pipefail_problems(_load(workflow)) == []


def test_workflows_pipefail_check_catches_the_default_shell() -> None:
    doc: dict[str, Any] = {"jobs": {"j": {"steps": [{"name": "s", "run": "a | b"}, {"run": "c", "shell": "sh"}]}}}
    assert pipefail_problems(doc) == [
        "job j step s: shell (default: bash -e) has no pipefail",
        "job j step 1: shell sh has no pipefail",
    ]
    doc["jobs"]["j"]["defaults"] = {"run": {"shell": "bash"}}
    assert pipefail_problems(doc) == ["job j step 1: shell sh has no pipefail"]


def _strings(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """Every string of a loaded workflow with where it is (keys, and list indexes as strings)."""
    if isinstance(node, dict):
        return [found for key, value in node.items() for found in _strings(value, (*path, str(key)))]
    if isinstance(node, list):
        return [found for i, value in enumerate(node) for found in _strings(value, (*path, str(i)))]
    return [(path, node)] if isinstance(node, str) else []


def deploy_stack_input_problems(doc: dict[str, Any]) -> list[str]:
    """deploy.yml's `stack` is free text (a `choice` would be a stack list to keep by hand), checked in
    `resolve` before any use (`stack_environments.py check-stack`: a stack name whose file exists in
    the checked-out commit); the raw input is read only by that check and the concurrency group, and
    every other step and job reads the checked name."""
    out = []
    stack_input = doc["on"]["workflow_dispatch"]["inputs"]["stack"]
    if stack_input.get("type") != "string" or "options" in stack_input:
        out.append("the stack input must be `type: string` with no options (a hand-kept list)")
    steps = doc["jobs"]["resolve"]["steps"]
    checks = [i for i, s in enumerate(steps) if s.get("id") == "stack"]
    if not checks:
        return [*out, "resolve has no step `id: stack` that checks the input"]
    check = steps[checks[0]]
    run = " ".join(_step_text(check).split())
    validates = 'stack_environments.py check-stack --stacks-dir stacks -- "$STACK"'
    if validates not in run or run.index(validates) > run.find('echo "stack=$STACK" >> "$GITHUB_OUTPUT"'):
        out.append(f"the check step must run `{validates}`, then output the checked name as `stack`")
    if (check.get("env") or {}).get("STACK") != "${{ inputs.stack }}":
        out.append("the check step must read the input through `env: STACK`")
    before = steps[: checks[0]]
    checkouts = [s for s in before if str(s.get("uses", "")).startswith("actions/checkout@")]
    if not any((s.get("with") or {}).get("ref") == "${{ github.sha }}" for s in checkouts):
        out.append("check the stack after checking out the run's commit (`ref: ${{ github.sha }}`), whose stacks/ it reads")
    out += [f"resolve step {s.get('name', i)} runs before the stack is checked" for i, s in enumerate(before) if "run" in s]
    raw = sorted(".".join(path) for path, text in _strings(doc) if re.search(r"\binputs\.stack\b", text))
    allowed = {"concurrency.group", f"jobs.resolve.steps.{checks[0]}.env.STACK"}
    use = "(use steps.stack.outputs.stack or needs.resolve.outputs.stack)"
    out += [f"{where} reads the unchecked input {use}" for where in raw if where not in allowed]
    if doc["jobs"]["resolve"]["outputs"].get("stack") != "${{ steps.stack.outputs.stack }}":
        out.append("resolve must output the checked name as `stack`")
    for name, job in doc["jobs"].items():
        for i, step in enumerate(job.get("steps") or ()):
            want = "${{ steps.stack.outputs.stack }}" if name == "resolve" else "${{ needs.resolve.outputs.stack }}"
            if i != checks[0] and "STACK" in (step.get("env") or {}) and step["env"]["STACK"] != want:
                out.append(f"job {name} step {step.get('name', i)}: STACK must be {want}")
    return out


def test_workflows_deploy_takes_any_stack_file_checked_before_use() -> None:
    assert deploy_stack_input_problems(_load("deploy.yml")) == []


def test_workflows_deploy_stack_input_check_catches_a_list_or_an_unchecked_input() -> None:
    good = _load("deploy.yml")
    listed = copy.deepcopy(good)
    listed["on"]["workflow_dispatch"]["inputs"]["stack"] = {"type": "choice", "options": ["llama-70b"]}
    assert deploy_stack_input_problems(listed) == ["the stack input must be `type: string` with no options (a hand-kept list)"]

    unchecked = copy.deepcopy(good)
    steps = unchecked["jobs"]["resolve"]["steps"]
    (check,) = [s for s in steps if s.get("id") == "stack"]
    steps.remove(check)
    assert deploy_stack_input_problems(unchecked) == ["resolve has no step `id: stack` that checks the input"]

    raw = copy.deepcopy(good)
    (step,) = [s for s in raw["jobs"]["preview"]["steps"] if s.get("id") == "preview"]
    step["env"]["STACK"] = "${{ inputs.stack }}"
    assert deploy_stack_input_problems(raw) == [
        f"jobs.preview.steps.{raw['jobs']['preview']['steps'].index(step)}.env.STACK reads the unchecked input "
        "(use steps.stack.outputs.stack or needs.resolve.outputs.stack)",
        "job preview step Review and preview against the current state: STACK must be ${{ needs.resolve.outputs.stack }}",
    ]

    late = copy.deepcopy(good)
    steps = late["jobs"]["resolve"]["steps"]
    (check,) = [s for s in steps if s.get("id") == "stack"]
    steps.remove(check)
    steps.append(check)
    problems = deploy_stack_input_problems(late)
    assert "resolve step Validate the stack offline and read its environment runs before the stack is checked" in problems

    only_exists = copy.deepcopy(good)
    (check,) = [s for s in only_exists["jobs"]["resolve"]["steps"] if s.get("id") == "stack"]
    check["run"] = 'test -f "stacks/Pulumi.$STACK.yaml"\necho "stack=$STACK" >> "$GITHUB_OUTPUT"\n'
    assert deploy_stack_input_problems(only_exists) == [
        'the check step must run `stack_environments.py check-stack --stacks-dir stacks -- "$STACK"`, '
        "then output the checked name as `stack`"
    ]


@pytest.mark.parametrize("workflow", [p.name for p in WORKFLOWS])
def test_workflows_expressions_reach_scripts_through_env_only(workflow: str) -> None:
    """No `${{ ... }}` inside a `run` script or a github-script `script`: an input or an event field
    expanded there is shell (or JavaScript) text; through `env` it stays a value."""
    for name, job in (_load(workflow).get("jobs") or {}).items():
        for i, step in enumerate(job.get("steps") or ()):
            script = str(step.get("run", "")) + str((step.get("with") or {}).get("script", ""))
            assert "${{" not in script, f"{workflow} job {name} step {step.get('name', i)}: pass the expression through env"


def _script_module() -> Any:
    spec = importlib.util.spec_from_file_location("stack_environments", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_workflows_stack_name_rule_is_the_projects() -> None:
    """The script runs before the project is installed, so it holds a copy of the rule: the same
    pattern, within Pulumi's stack names (every stack file's name meets it: tests/test_stacks.py)."""
    assert _script_module().STACK_NAME.pattern == stacks.STACK_NAME_PATTERN
    for name in ["a", "llama-70b", "My_Stack.v2", "9x", "a" * 100, "a" * 101, "-a", ".a", "_a", "a b", "a/b", "", "é"]:
        if stacks.is_stack_name(name):
            assert re.match(naming.STACK_NAME_PATTERN, name), name
    assert [n for n in ["a" * 101, "-a", ".a", "_a", "a b", "a/b", "", "é", "a\n"] if stacks.is_stack_name(n)] == []


@pytest.mark.parametrize("stack", STACKS)
def test_workflows_deploy_accepts_the_stack(stack: str) -> None:
    proc = _script("check-stack", "--stacks-dir", str(stacks.ROOT / "stacks"), "--", stack)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_workflows_deploy_refuses_what_is_not_a_stack_file(tmp_path: Path) -> None:
    committed = str(stacks.ROOT / "stacks")
    not_names = ["", "-x", "--help", "../stacks/Pulumi.llama-70b", "llama-70b\n::add-mask::x", "llama 70b", "a;b", "a" * 101]
    for name in [*not_names, ".x"]:
        proc = _script("check-stack", "--stacks-dir", committed, "--", name)
        (line,) = proc.stdout.splitlines()  # one line: a refused name cannot start a workflow command
        assert (proc.returncode, line.startswith("::error::stack "), "is not a stack name" in line) == (1, True, True), name
    proc = _script("check-stack", "--stacks-dir", committed, "--", "no-such-stack")
    assert proc.returncode == 1
    assert proc.stdout.startswith("::error::no stack file stacks/Pulumi.no-such-stack.yaml in this commit; its stacks: ")
    # A file there is not enough: the name must be a stack name too.
    (tmp_path / "Pulumi.-x.yaml").write_text("config: {}\n")
    (tmp_path / "Pulumi.ok.yaml").write_text("config: {}\n")
    assert _script("check-stack", "--stacks-dir", str(tmp_path), "--", "-x").returncode == 1
    assert _script("check-stack", "--stacks-dir", str(tmp_path), "--", "ok").returncode == 0
    assert _script("check-stack", "--stacks-dir", str(tmp_path), "--", "OK").returncode == 1


def test_workflows_pr_preview_stacks_come_from_the_stack_files() -> None:
    """No hand-kept stack list in pr.yml: the matrix is the offline review's output, computed from
    each stack's own `gke-tpu-llm:environment` with prod excluded."""
    doc = _load("pr.yml")
    preview = doc["jobs"]["cloud-preview"]
    assert preview["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.offline-review.outputs.preview-stacks) }}"
    assert preview["needs"] == "offline-review"
    review = doc["jobs"]["offline-review"]
    assert review["outputs"]["preview-stacks"] == "${{ steps.review.outputs.preview_stacks }}"
    (step,) = [s for s in review["steps"] if s.get("id") == "review"]
    assert "stack_environments.py matrix --exclude prod head-plans.json base-plans.json" in step["run"]


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False, timeout=60)


def test_workflows_stack_environments_on_the_real_plans(tmp_path: Path) -> None:
    plans = {stack: report.plan_json(planned(stack)) for stack in STACKS}
    head = tmp_path / "head.json"
    head.write_text(json.dumps(plans))
    prod = {s for s, p in plans.items() if p["environment"] == "prod"}
    assert prod, "expected at least one prod stack to exclude"

    proc = _script("matrix", "--exclude", "prod", str(head))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == sorted(set(STACKS) - prod)

    for stack in STACKS:
        one = tmp_path / f"{stack}.json"
        one.write_text(json.dumps(plans[stack]))
        proc = _script("environment", str(one))
        assert (proc.returncode, proc.stdout.strip()) == (0, plans[stack]["environment"])


def test_workflows_stack_environments_prod_in_base_or_head_is_excluded(tmp_path: Path) -> None:
    head = tmp_path / "head.json"
    base = tmp_path / "base.json"
    head.write_text(json.dumps({"a": {"environment": "dev"}, "b": {"environment": "dev"}, "c": {"environment": "prod"}}))
    base.write_text(json.dumps({"a": {"environment": "prod"}, "gone": {"environment": "dev"}}))
    proc = _script("matrix", "--exclude", "prod", str(head), str(base))
    assert json.loads(proc.stdout) == ["b"]
    base.write_text("{}")  # the base could not be planned
    assert json.loads(_script("matrix", "--exclude", "prod", str(head), str(base)).stdout) == ["a", "b"]


def test_workflows_stack_environments_refuses_a_plan_without_environment(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"stack": "x", "environment": ""}))
    proc = _script("environment", str(plan))
    assert proc.returncode != 0
    assert proc.stdout == ""
    plan.write_text(json.dumps({"x": {"stack": "x"}}))
    assert _script("matrix", "--exclude", "prod", str(plan)).returncode != 0


def test_workflows_deploy_keeps_a_prod_stack_prod_whatever_the_branch_says(tmp_path: Path) -> None:
    for stack in STACKS:
        proc = _script("file-environment", str(stacks.stack_path(stack)))
        assert (proc.returncode, proc.stdout.strip()) == (0, planned(stack).config.environment.value)
    assert _script("file-environment", str(tmp_path / "Pulumi.new.yaml")).stdout.strip() == "none"
    unset = tmp_path / "Pulumi.unset.yaml"
    unset.write_text("config:\n  gcp:project: p\n")
    assert _script("file-environment", str(unset)).stdout.strip() == "dev"
    unset.write_text("config:\n  gke-tpu-llm:environment: [prod]\n")
    assert _script("file-environment", str(unset)).returncode != 0
    deploy = yaml.safe_load((WORKFLOWS_DIR / "deploy.yml").read_text())
    steps = deploy["jobs"]["resolve"]["steps"]
    assert any(s.get("with", {}).get("ref") == "main" and s["with"].get("path") == "main-ref" for s in steps)
    (env_step,) = [s for s in steps if s.get("id") == "env"]
    assert 'file-environment "main-ref/stacks/Pulumi.$STACK.yaml"' in env_step["run"]


# --- Approval of the exact change -------------------------------------------------------------------


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def _ancestors(jobs: dict[str, Any], name: str) -> set[str]:
    out: set[str] = set()
    todo = _needs(jobs[name])
    while todo:
        job = todo.pop()
        if job not in out:
            out.add(job)
            todo += _needs(jobs.get(job, {}))
    return out


def _pulumi_commands(script: str) -> list[str]:
    """The `pulumi ...` commands of a shell script, one string each (continuations joined, comment
    lines dropped, split at `;`, `&&`, `||` and `|`); text inside `echo` is not a command."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        if line.lstrip().startswith("#"):
            continue
        for part in re.split(r"&&|\|\||[;|]", line):
            words = part.split()
            if words[:1] == ["pulumi"]:
                out.append(" ".join(words))
    return out


# Commands that change a stack's resources or state (`stack export`/`select`, `preview`, `login` and
# `--preview-only` runs do not).
_MUTATING = re.compile(
    r"^pulumi (?:up|update|destroy|down|dn|refresh|import|state|cancel|stack (?:import|rm|change-secrets-provider))\b"
)


def _mutates(command: str) -> bool:
    return bool(_MUTATING.match(command)) and "--preview-only" not in command.split()


def _applies_without_plan(command: str) -> bool:
    return bool(re.match(r"^pulumi (?:up|update)\b", command)) and not re.search(r"(?:^| )--plan(?:=| )\S", command)


def _step_text(step: dict[str, Any]) -> str:
    return str(step.get("run", ""))


def _uploads(job: dict[str, Any]) -> set[str]:
    """The files the job's upload-artifact steps upload."""
    out: set[str] = set()
    for step in job.get("steps") or ():
        if str(step.get("uses", "")).startswith("actions/upload-artifact@"):
            out |= {p.strip() for p in str((step.get("with") or {}).get("path", "")).splitlines() if p.strip()}
    return out


def _previews_and_records(job: dict[str, Any]) -> bool:
    """The job saves an update plan, records what it previewed and uploads both."""
    commands = [c for s in job.get("steps") or () for c in _pulumi_commands(_step_text(s))]
    saves = any(re.match(r"^pulumi preview\b", c) and re.search(r"--save-plan[ =]plan\.json\b", c) for c in commands)
    records = any("deploy_gate.py record" in _step_text(s) for s in job.get("steps") or ())
    return saves and records and {"plan.json", "approval.json"} <= _uploads(job)


def approval_problems(doc: dict[str, Any]) -> list[str]:
    """Every `pulumi up` applies a saved update plan (`--plan`). A job that changes a stack waits for
    its approval (its GitHub environment) only after an earlier job, in another environment,
    previewed it with `--save-plan`, recorded it and uploaded both; it checks out the run's own
    commit and verifies commit, state and plan (deploy_gate.py verify, after downloading the record)
    before its first change."""
    out = []
    jobs = doc.get("jobs") or {}
    for name, job in jobs.items():
        steps = job.get("steps") or []
        changes = [(i, c) for i, step in enumerate(steps) for c in _pulumi_commands(_step_text(step)) if _mutates(c)]
        unplanned = [c for _, c in changes if _applies_without_plan(c)]
        out += [f"job {name}: `{c}` applies without the previewed update plan (--plan)" for c in unplanned]
        if not changes:
            continue
        env = _environment(job)
        previews = sorted(n for n in _ancestors(jobs, name) if _previews_and_records(jobs[n]))
        if not previews:
            out.append(f"job {name} changes the stack but needs no job that saves, records and uploads its preview")
        out += [
            f"job {name}: its preview job {n} runs in the same environment {env!r}, so the approval comes before the preview"
            for n in previews
            if _environment(jobs[n]) == env
        ]
        checkouts = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
        if not checkouts or any((s.get("with") or {}).get("ref") != "${{ github.sha }}" for s in checkouts):
            out.append(f"job {name}: check out `ref: ${{{{ github.sha }}}}` (the previewed commit), not a branch")
        first = min(i for i, _ in changes)
        downloads = [i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/download-artifact@")]
        verifies = [i for i, s in enumerate(steps) if "deploy_gate.py verify" in _step_text(s)]
        if not downloads or not verifies or not min(downloads) < min(verifies) < first:
            out.append(f"job {name}: download the approval record, then `deploy_gate.py verify` it before the first change")
        else:
            text = " ".join(_step_text(steps[min(verifies)]).split())
            flags = ('--sha "$(git rev-parse HEAD)"', "--state", '--expect "sha=', '--expect "state=')
            out += [f"job {name}: the verify step lacks {flag}" for flag in flags if flag not in text]
    return out


@pytest.mark.parametrize("workflow", [p.name for p in WORKFLOWS])
def test_workflows_approval_sees_what_up_applies(workflow: str) -> None:
    assert approval_problems(_load(workflow)) == []


def test_workflows_deploy_approval_comes_after_the_preview() -> None:
    """The shape of deploy.yml the checks above hold it to, named: `preview` (no reviewers) runs
    first, then `apply` in the deploy environment, for up and destroy only."""
    jobs = _load("deploy.yml")["jobs"]
    env = "${{ needs.resolve.outputs.environment }}"
    assert _environment(jobs["preview"]) == f"{env}-preview"
    assert _environment(jobs["apply"]) == env
    assert _needs(jobs["preview"]) == ["resolve"]
    assert set(_needs(jobs["apply"])) == {"resolve", "preview"}
    assert jobs["apply"]["if"] == "inputs.action != 'preview'"
    # The deploy environment — reviewers and the deploy identity — is entered by `apply` alone.
    assert [n for n, job in jobs.items() if _environment(job) == env] == ["apply"]
    ups = [c for s in jobs["apply"]["steps"] for c in _pulumi_commands(_step_text(s)) if c.startswith("pulumi up")]
    assert ups
    assert all("--plan approved/plan.json" in c for c in ups)
    saved = [c for s in jobs["preview"]["steps"] for c in _pulumi_commands(_step_text(s)) if "--save-plan" in c]
    assert saved
    assert all(c.startswith("pulumi preview ") and "--save-plan plan.json" in c for c in saved)
    outputs = jobs["preview"]["outputs"]
    assert outputs == {"state": "${{ steps.preview.outputs.state }}", "plan": "${{ steps.preview.outputs.plan }}"}


def test_workflows_approval_check_catches_the_old_deploy() -> None:
    """The shape deploy.yml had: the gate fires when the one job starts, then review and a plain
    `pulumi up --yes` run in it, on whatever the branch holds by then."""
    run_job: dict[str, Any] = {
        "needs": "resolve",
        "environment": "${{ needs.resolve.outputs.environment }}",
        "steps": [
            {"uses": "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"},
            {"run": 'pulumi login "$URL"\npulumi stack select "$STACK"\npulumi up --yes --diff --policy-pack components/policy'},
        ],
    }
    doc: dict[str, Any] = {"jobs": {"resolve": {"steps": []}, "run": run_job}}
    assert approval_problems(doc) == [
        "job run: `pulumi up --yes --diff --policy-pack components/policy` applies without the previewed update plan (--plan)",
        "job run changes the stack but needs no job that saves, records and uploads its preview",
        "job run: check out `ref: ${{ github.sha }}` (the previewed commit), not a branch",
        "job run: download the approval record, then `deploy_gate.py verify` it before the first change",
    ]
    # The real preview job in the same environment as the apply job: the approval would come first.
    deploy = _load("deploy.yml")["jobs"]
    doc = {"jobs": {"resolve": deploy["resolve"], "preview": dict(deploy["preview"]), "apply": deploy["apply"]}}
    doc["jobs"]["preview"]["environment"] = deploy["apply"]["environment"]
    assert approval_problems(doc) == [
        "job apply: its preview job preview runs in the same environment "
        "'${{ needs.resolve.outputs.environment }}', so the approval comes before the preview"
    ]
    # Spelled `pulumi update`, through `&&`, or with --plan but no path: still refused.
    assert _applies_without_plan("pulumi update --yes")
    assert [c for c in _pulumi_commands("cd x && pulumi up -y --skip-preview") if _applies_without_plan(c)]
    assert _applies_without_plan("pulumi up --yes --plan")
    assert not _applies_without_plan("pulumi up --yes --plan=p.json")
    assert not _mutates("pulumi destroy --preview-only --exclude-protected")
    assert _mutates("pulumi destroy --yes --exclude-protected")


def _gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GATE), *args], capture_output=True, text=True, check=False, timeout=60)


def _export(resources: list[dict[str, Any]]) -> dict[str, Any]:
    """A `pulumi stack export` document (version 3) with the given resources."""
    manifest = {"time": "2026-11-01T10:00:00Z", "version": "v3.272.0"}
    return {"version": 3, "deployment": {"manifest": manifest, "resources": resources}}


def test_workflows_deploy_gate_fails_when_commit_state_or_plan_moved(tmp_path: Path) -> None:
    bucket = {"urn": "urn:pulumi:s::p::gcp:storage/bucket:Bucket::ckpt", "type": "gcp:storage/bucket:Bucket", "protect": True}
    state = tmp_path / "state.json"
    state.write_text(json.dumps(_export([bucket]), indent=4))
    plan = tmp_path / "plan.json"
    plan.write_text('{"resourcePlans": {}}')
    sha = "a" * 40
    common = ["--stack", "llama-405b-prod", "--environment", "prod", "--action", "up"]
    proc = _gate("record", *common, "--sha", sha, "--state", str(state), "--plan", str(plan))
    assert proc.returncode == 0, proc.stderr
    record = tmp_path / "approval.json"
    record.write_text(proc.stdout)
    recorded = json.loads(proc.stdout)
    assert recorded["sha"] == sha
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", recorded["state"])
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", recorded["plan"])

    def verify(*extra: str, sha: str = sha) -> subprocess.CompletedProcess[str]:
        return _gate("verify", str(record), *common, "--sha", sha, "--state", str(state), "--plan", str(plan), *extra)

    expect = ["--expect", f"sha={sha}", "--expect", f"state={recorded['state']}", "--expect", f"plan={recorded['plan']}"]
    ok = verify(*expect)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith(f"verified: up llama-405b-prod at {sha}, state {recorded['state']}, plan {recorded['plan']}")
    # The same state exported with other formatting is the same state.
    state.write_text(json.dumps(_export([bucket]), separators=(",", ":")))
    assert verify(*expect).returncode == 0

    moved = verify(*expect, sha="b" * 40)
    assert moved.returncode == 1
    assert f"::error::the commit moved: the approved preview ran on {sha}, this job has {'b' * 40}" in moved.stdout

    state.write_text(json.dumps(_export([{**bucket, "protect": False}])))
    moved = verify(*expect)
    assert moved.returncode == 1
    assert "::error::the stack's state moved since the preview" in moved.stdout
    assert "run the deploy workflow again to preview and approve the current state" in moved.stdout
    state.write_text(json.dumps(_export([bucket])))

    plan.write_text('{"resourcePlans": {"x": {}}}')
    moved = verify(*expect)
    assert moved.returncode == 1
    assert "::error::the update plan is not the one previewed" in moved.stdout
    plan.write_text('{"resourcePlans": {}}')

    # A record that disagrees with what the preview job reported (a swapped artifact).
    swapped = verify("--expect", "state=sha256:" + "0" * 64)
    assert swapped.returncode == 1
    assert "the record's state is sha256:" in swapped.stdout
    other = _gate("verify", str(record), "--stack", "llama-405b", "--environment", "dev", "--action", "destroy",
                  "--sha", sha, "--state", str(state), "--plan", str(plan))
    assert other.returncode == 1
    for line in ("the record is for stack llama-405b-prod, this job deploys llama-405b",
                 "the record is for environment prod, this job runs in dev",
                 "the record is for action up, this job runs destroy"):
        assert line in other.stdout


def test_workflows_deploy_gate_refuses_what_it_cannot_fingerprint(tmp_path: Path) -> None:
    bad = tmp_path / "state.json"
    for text in ("", "[]", '{"version": 3}'):
        bad.write_text(text)
        proc = _gate("fingerprint", str(bad))
        assert proc.returncode == 1
        assert "not a `pulumi stack export` document" in proc.stderr
        assert "Traceback" not in proc.stderr
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_export([])))
    dev = ["--stack", "llama-70b", "--environment", "dev"]
    proc = _gate("record", *dev, "--action", "up", "--sha", "c" * 40, "--state", str(good))
    assert proc.returncode == 1
    assert "--plan is required for action up" in proc.stderr
    proc = _gate("record", *dev, "--action", "up", "--sha", "main", "--state", str(good))
    assert proc.returncode == 1
    assert "--sha 'main' is not valid" in proc.stderr
    # Destroy has no update plan; the state fingerprint alone ties the deleted list to the preview.
    proc = _gate("record", *dev, "--action", "destroy", "--sha", "c" * 40, "--state", str(good))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["plan"] is None


# --- Supply chain -------------------------------------------------------------------------------------


def _uses(doc: dict[str, Any]) -> list[tuple[str, str]]:
    jobs = (doc.get("jobs") or {}).items()
    return [(name, str(s["uses"])) for name, job in jobs for s in job.get("steps") or () if "uses" in s]


def _requirement_pins(path: Path) -> dict[str, str]:
    """name -> pinned version of a requirement file's own lines (not its `-r` includes)."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{path.name}: {line!r} is not pinned with =="
        pins[canonicalize_name(req.name)] = spec.version
    return pins


@pytest.mark.parametrize("workflow", [p.name for p in WORKFLOWS])
def test_workflows_actions_pinned_by_commit(workflow: str) -> None:
    for job, uses in _uses(_load(workflow)):
        pinned = uses.startswith("./") or re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses)
        assert pinned, f"{workflow} job {job}: {uses} is not pinned by commit"


def test_workflows_pulumi_cli_from_the_official_action() -> None:
    """No `curl | sh`: every job that runs the Pulumi CLI installs it first with pulumi/actions,
    pinned by commit, at the SDK's version from requirements.txt. The action only installs (no
    `command`): an `up` run through it would escape the --plan check."""
    sdk = _requirement_pins(stacks.ROOT / "requirements.txt")["pulumi"]
    runs_cli = 0
    for path in WORKFLOWS:
        text = path.read_text()
        assert not re.search(r"get\.pulumi\.com|\bcurl\b|\bwget\b", text), f"{path.name} downloads outside a pinned action"
        for name, job in (_load(path.name).get("jobs") or {}).items():
            steps = job.get("steps") or []
            installs = [i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("pulumi/actions@")]
            for i in installs:
                assert re.fullmatch(r"pulumi/actions@[0-9a-f]{40}", steps[i]["uses"])
                assert steps[i]["with"] == {"pulumi-version": sdk}, f"{path.name} job {name}: install CLI {sdk}, the SDK's"
            cli = [i for i, s in enumerate(steps) if _pulumi_commands(_step_text(s))]
            if cli:
                runs_cli += 1
                assert installs, f"{path.name} job {name} runs pulumi without installing it with pulumi/actions"
                assert installs[0] < cli[0], f"{path.name} job {name} runs pulumi before installing it"
    assert runs_cli == 3  # deploy preview and apply, pr cloud-preview


def _shell_of(job: dict[str, Any]) -> str:
    return "\n".join(_step_text(s) for s in job.get("steps") or ())


def _scripts_run_by(text: str) -> set[Path]:
    return {SCRIPTS_DIR / name for name in re.findall(r"\.github/scripts/([\w.-]+\.sh)\b", text)}


def test_workflows_cloud_jobs_install_only_hashed_locks() -> None:
    """Every job of deploy.yml and every job that gets credentials installs Python packages from
    the hashed locks only (install-locked.sh): not `.ci/setup`/`.ci/run` (the dev tools, unhashed),
    and every `pip install` of the workflows and of the scripts they run pins hashes."""
    seen_jobs = 0
    for path in WORKFLOWS:
        doc = _load(path.name)
        for name, job in (doc.get("jobs") or {}).items():
            if path.name != "deploy.yml" and not _receives_credentials(doc, job):
                continue
            seen_jobs += 1
            text = _shell_of(job)
            assert ".ci/setup" not in text, f"{path.name} job {name} installs unhashed requirements"
            assert ".ci/run" not in text, f"{path.name} job {name} installs unhashed requirements"
            assert "bash .github/scripts/install-locked.sh program" in text, f"{path.name} job {name}"
    assert seen_jobs == 4  # deploy resolve, preview, apply; pr cloud-preview
    texts = [p.read_text() for p in WORKFLOWS]
    scripts = set().union(*(_scripts_run_by(t) for t in texts))
    assert SCRIPTS_DIR / "install-locked.sh" in scripts
    texts += [s.read_text() for s in sorted(scripts)]
    installs = [line.strip() for text in texts for line in text.splitlines() if "pip install" in line]
    assert installs
    for line in installs:
        assert "--require-hashes" in line, f"unhashed install: {line}"
        assert re.search(r" -r \S+", line), f"install from a lock file: {line}"
    locks = re.findall(r"\block=(\S+)", (SCRIPTS_DIR / "install-locked.sh").read_text())
    assert sorted(locks) == ["components/policy/requirements.lock", "requirements.lock"]


@pytest.mark.parametrize(
    ("requirements", "lock"),
    [("requirements.txt", "requirements.lock"), ("components/policy/requirements.txt", "components/policy/requirements.lock")],
)
def test_workflows_lock_pins_every_requirement_with_hashes(requirements: str, lock: str) -> None:
    """The lock holds every requirement at its pinned version (refresh it with the command in its
    header after changing the requirement file), and every entry, dependencies included, is exact
    and hashed."""
    text = (stacks.ROOT / lock).read_text()
    assert "bash .github/scripts/lock-requirements.sh" in text.splitlines()[1]
    entries: dict[str, set[str]] = {}
    for entry in re.split(r"\n(?=\S)", text.replace("\\\n", " ")):
        lines = [ln for ln in entry.splitlines() if not ln.lstrip().startswith("#")]
        if not lines:
            continue
        spec, *hashes = re.split(r"\s+--hash=", " ".join(lines).strip())
        req = Requirement(spec)
        (pin,) = req.specifier
        assert pin.operator == "==", f"{lock}: {spec} is not exact"
        assert hashes, f"{lock}: {spec} has no hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h.strip()) for h in hashes), f"{lock}: {spec}: {hashes}"
        entries.setdefault(canonicalize_name(req.name), set()).add(pin.version)
    pins = _requirement_pins(stacks.ROOT / requirements)
    assert pins
    for name, version in pins.items():
        refresh = "bash .github/scripts/lock-requirements.sh"
        assert entries.get(name) == {version}, f"{lock} has {name} {entries.get(name)}, {requirements} pins {version}: {refresh}"


# --- The PR comment updater ---------------------------------------------------------------------------

_HARNESS = """
const [upsertPath, bodyPath, commentsJson] = process.argv.slice(2);
const upsert = require(upsertPath);
const calls = [];
const github = {
  paginate: async () => JSON.parse(commentsJson),
  rest: { issues: {
    listComments: () => {},
    updateComment: async (a) => { calls.push(['update', a.comment_id]); },
    createComment: async (a) => { calls.push(['create', a.issue_number]); },
  } },
};
const context = { repo: { owner: 'o', repo: 'r' }, payload: { pull_request: { number: 7 } } };
upsert({ github, context, path: bodyPath }).then(
  () => console.log(JSON.stringify(calls)),
  (e) => { console.error(e.message); process.exit(3); },
);
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (GitHub's runners and this project's machines have it)")
def test_workflows_comment_updater_edits_only_its_own_comment(tmp_path: Path) -> None:
    harness = tmp_path / "harness.js"
    harness.write_text(_HARNESS)
    body = tmp_path / "comment.md"
    body.write_text("<!-- gke-tpu-llm:cloud-preview:llama-70b -->\n### pulumi preview\n")
    bot = {"login": "github-actions[bot]", "type": "Bot"}

    def run(comments: list[dict[str, Any]]) -> list[list[Any]]:
        command = ["node", str(harness), str(UPSERT), str(body), json.dumps(comments)]
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        result: list[list[Any]] = json.loads(proc.stdout)
        return result

    marker = "<!-- gke-tpu-llm:cloud-preview:llama-70b -->"
    human = {"id": 1, "user": {"login": "mallory", "type": "User"}, "body": f"{marker}\nlooks fine"}
    other_bot = {"id": 2, "user": {"login": "renovate[bot]", "type": "Bot"}, "body": human["body"]}
    longer = {"id": 3, "user": bot, "body": "<!-- gke-tpu-llm:cloud-preview:llama-70b-fallback -->\n..."}
    own = {"id": 4, "user": bot, "body": f"{marker}\r\nold preview"}
    assert run([human, other_bot, longer, own]) == [["update", 4]]
    assert run([human]) == [["create", 7]]
    assert run([other_bot, longer]) == [["create", 7]]
    # A user named like the bot is not the bot.
    assert run([{**own, "user": {"login": "github-actions[bot]", "type": "User"}}]) == [["create", 7]]

    body.write_text("### no marker\n")
    command = ["node", str(harness), str(UPSERT), str(body), json.dumps([own])]
    proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 3
    assert "the first line must be a marker comment" in proc.stderr


def test_workflows_deploy_gate_takes_every_stack_name_the_project_does(tmp_path: Path) -> None:
    """The gate checks a stack name with the project's rule (stack_environments.py's, which a test
    above holds to the project's): a user's stack that check-stack lets through (capitals, dots,
    underscores) is not stopped at the approval gate, and a name no stack file can have still is."""
    state = tmp_path / "state.json"
    state.write_text(json.dumps(_export([])))
    plan = tmp_path / "plan.json"
    plan.write_text('{"resourcePlans": {}}')
    for name, ok in (("Acme_LLM.prod", True), ("acme-llama-dev", True), ("-x", False), ("a/b", False), ("a\n", False)):
        assert stacks.is_stack_name(name) is ok, name
        proc = _gate("record", f"--stack={name}", "--environment", "prod", "--action", "up", "--sha", "d" * 40,
                     "--state", str(state), "--plan", str(plan))
        assert (proc.returncode == 0) is ok, (name, proc.stderr)
        if not ok:
            assert f"--stack {name!r} is not valid" in proc.stderr
    for environment in ("prod\n", "Prod"):
        proc = _gate("record", "--stack", "llama-70b", f"--environment={environment}", "--action", "destroy",
                     "--sha", "d" * 40, "--state", str(state))
        assert proc.returncode == 1
        assert f"--environment {environment!r} is not valid" in proc.stderr
