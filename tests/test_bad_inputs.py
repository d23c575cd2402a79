"""Every bad input ends in exit 2 with the key to change and the bad value, never in a traceback,
and before anything is registered.

Most cases run the CLI in-process (``main([...])``) with ``mockengine.run_program`` replaced by a
tripwire, so a case that got as far as the program fails loudly; the file-level categories also
run through the real ``python -m components`` in a subprocess.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.config import naming
from components.config import stack_files as stacks
from components.tools import mockengine
from components.tools.cli import main
from tests.conftest import STACKS, planned, run_cli_process

Mutation = Callable[[dict[str, Any]], None]


def stack_doc(stack: str) -> dict[str, Any]:
    doc = yaml.safe_load(stacks.stack_path(stack).read_text())
    assert isinstance(doc, dict)
    return doc


def write_stack(tmp_path: Path, stack: str, mutate: Mutation, name: str = "Pulumi.bad.yaml") -> Path:
    doc = copy.deepcopy(stack_doc(stack))
    mutate(doc["config"])
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def nothing_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The program must never run for a bad input: nothing may be registered."""

    def tripwire(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("mockengine.run_program reached: a bad input got past validation")

    monkeypatch.setattr(mockengine, "run_program", tripwire)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit code, stderr) of ``python -m components ARGS`` run in-process."""
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert out == "", "a rejected stack prints nothing on stdout"
    return code, err


def tpu(**changes: Any) -> Mutation:
    return lambda c: c["gke-tpu-llm:tpu"].update(changes)


def workload(**changes: Any) -> Mutation:
    return lambda c: c["gke-tpu-llm:workload"].update(changes)


def identity(**changes: Any) -> Mutation:
    return lambda c: c["gke-tpu-llm:identity"].update(changes)


def cluster(**changes: Any) -> Mutation:
    return lambda c: c.setdefault("gke-tpu-llm:cluster", {}).update(changes)


def conversion(**changes: Any) -> Mutation:
    return lambda c: c["gke-tpu-llm:workload"]["jetstream"]["conversion"].update(changes)


def setkey(key: str, value: Any) -> Mutation:
    return lambda c: c.__setitem__(key, value)


def both(*mutations: Mutation) -> Mutation:
    def apply(c: dict[str, Any]) -> None:
        for m in mutations:
            m(c)

    return apply


def drop_topology(c: dict[str, Any]) -> None:
    c["gke-tpu-llm:tpu"].pop("topology")
    c["gke-tpu-llm:tpu"].pop("machineType", None)


# case -> (base stack, mutation, texts that must all appear in stderr: the key, the bad value, ...)
CASES: dict[str, tuple[str, Mutation, tuple[str, ...]]] = {
    # config the way a Pulumi user writes it
    "flat-dotted-key": (
        "llama-405b",
        setkey("gke-tpu-llm:tpu.topology", "4x8"),
        (
            "gke-tpu-llm:tpu.topology: '4x8' is a flat key",
            "pulumi config rm gke-tpu-llm:tpu.topology",
            "pulumi config set --path 'gke-tpu-llm:tpu.topology' 4x8",
        ),
    ),
    "misspelt-namespace": (
        "llama-405b",
        setkey("gke-tpu-lm:environment", "prod"),
        ("gke-tpu-lm:environment: 'prod'", "did you mean gke-tpu-llm:environment?"),
    ),
    "foreign-namespace": ("llama-405b", setkey("aws:region", "us-east-1"), ("aws:region: 'us-east-1'", "does not read")),
    "no-namespace": (
        "llama-405b",
        setkey("environment", "prod"),
        ("environment: 'prod' has no namespace", "gke-tpu-llm:environment"),
    ),
    "unknown-key-typo": ("llama-405b", setkey("gke-tpu-llm:enviroment", "prod"), ("did you mean gke-tpu-llm:environment?",)),
    # numbers
    "inf-batch": ("llama-405b", workload(perDeviceBatchSize=float("inf")), ("gke-tpu-llm:workload.perDeviceBatchSize: inf",)),
    "nan-reserve": ("llama-405b", workload(reserveFraction=float("nan")), ("gke-tpu-llm:workload.reserveFraction: nan",)),
    "huge-length": (
        "llama-405b",
        workload(maxTargetLength=10**12),
        ("gke-tpu-llm:workload.maxTargetLength: 1000000000000", "<= 131072"),
    ),
    "huge-batch-size": ("saxml-175b", workload(batchSize=10**9), ("gke-tpu-llm:workload.batchSize: 1000000000", "<= 65536")),
    "huge-slices": ("llama-405b", tpu(slices=10**6), ("gke-tpu-llm:tpu.slices: 1000000", "<= 64")),
    "huge-disk": ("llama-405b", tpu(diskSizeGb=10**7), ("gke-tpu-llm:tpu.diskSizeGb: 10000000",)),
    "huge-nodes": (
        "llama-70b",
        tpu(autoscaling={"minNodes": 1, "maxNodes": 10**9}),
        ("gke-tpu-llm:tpu.autoscaling.maxNodes: 1000000000", "<= 1000"),
    ),
    # the key that is to blame
    "zone-outside-region-topology-unset": (
        "llama-405b",
        both(drop_topology, tpu(zone="us-central1-b")),
        ("gke-tpu-llm:tpu.zone: 'us-central1-b' is not in gcp:region us-east5",),
    ),
    "parallelism-product": (
        "llama-405b",
        workload(parallelism={"tensor": 3}),
        ("gke-tpu-llm:workload.parallelism: {'tensor': 3}", "choose degrees whose product is 16"),
    ),
    "parallelism-zero": ("llama-405b", workload(parallelism={"tensor": 0}), ("gke-tpu-llm:workload.parallelism.tensor: 0",)),
    "parallelism-unknown-axis": (
        "llama-405b",
        workload(parallelism={"bogus": 2}),
        ("gke-tpu-llm:workload.parallelism.bogus: 2", "fsdp, autoregressive, tensor"),
    ),
    "parallelism-two-fills": (
        "llama-405b",
        workload(parallelism={"tensor": -1, "fsdp": -1}),
        ("gke-tpu-llm:workload.parallelism: {'tensor': -1, 'fsdp': -1}", "at most one -1"),
    ),
    "batch-not-whole": (
        "llama-405b",
        workload(perDeviceBatchSize=0.01),
        ("gke-tpu-llm:workload.perDeviceBatchSize: 0.01", "is not a whole batch"),
    ),
    "batch-too-big-for-any-slice": (
        "llama-405b",
        workload(perDeviceBatchSize=1000),
        ("gke-tpu-llm:workload.perDeviceBatchSize: 1000", "no catalog slice fits"),
    ),
    "slice-too-small": (
        "llama-405b",
        both(tpu(topology="2x4", machineType="ct6e-standard-4t"), workload(weights="bfloat16")),
        ("gke-tpu-llm:tpu.topology: '2x4' cannot run", "smallest slice that fits: v6e-"),
    ),
    # accepted before, failing at apply time
    "default-service-account": (
        "llama-405b",
        identity(serviceAccount="default"),
        ("gke-tpu-llm:identity.serviceAccount: 'default'",),
    ),
    "kube-system-namespace": (
        "llama-405b",
        identity(namespace="kube-system"),
        ("gke-tpu-llm:identity.namespace: 'kube-system'",),
    ),
    "controller-namespace": ("llama-405b", identity(namespace="lws-system"), ("gke-tpu-llm:identity.namespace: 'lws-system'",)),
    "gke-namespace": (
        "llama-70b",
        identity(namespace="gke-managed-system"),
        ("gke-tpu-llm:identity.namespace: 'gke-managed-system'",),
    ),
    "system-machine-type": (
        "llama-405b",
        cluster(systemPool={"machineType": "e2-standart-4"}),
        (
            "gke-tpu-llm:cluster.systemPool.machineType: 'e2-standart-4'",
            "did you mean e2-standard-4",
            "e2-standard-{2,4,8,16,32}",
        ),
    ),
    "tpu-machine-type-as-system-pool": (
        "llama-405b",
        cluster(systemPool={"machineType": "ct6e-standard-4t"}),
        ("gke-tpu-llm:cluster.systemPool.machineType: 'ct6e-standard-4t'", "families e2, n1"),
    ),
    "malformed-cluster-version": (
        "llama-405b",
        cluster(version="1.31-gke.100"),
        ("gke-tpu-llm:cluster.version: '1.31-gke.100'",),
    ),
    "converter-zone": (
        "llama-405b",
        conversion(zone="us-east5-q"),
        ("gke-tpu-llm:workload.jetstream.conversion.zone: 'us-east5-q'", "us-east5-a, us-east5-b, us-east5-c"),
    ),
    "converter-machine-type": (
        "llama-405b",
        conversion(machineType="m1-ultramem-161"),
        ("gke-tpu-llm:workload.jetstream.conversion.machineType: 'm1-ultramem-161'", "did you mean m1-ultramem-160"),
    ),
    "reservation-with-spaces": (
        "llama-405b",
        tpu(reservation="my reservation"),
        ("gke-tpu-llm:tpu.reservation: 'my reservation'",),
    ),
    "reservation-bad-project": (
        "llama-405b",
        tpu(reservation="projects/X/reservations/r1"),
        ("gke-tpu-llm:tpu.reservation: 'projects/X/reservations/r1'",),
    ),
    "region-typo": ("llama-405b", setkey("gcp:region", "us-eats5"), ("gcp:region: 'us-eats5'", "did you mean us-east5")),
    "bucket-keys-one-name": (
        "llama-405b",
        lambda c: c["gke-tpu-llm:buckets"].update({"train_logs": {"purpose": "a"}, "train-logs": {"purpose": "b"}}),
        ("gke-tpu-llm:buckets.train-logs: 'your-project-id-bad-train-logs'", "buckets.train_logs too"),
    ),
    "bucket-key-characters": (
        "llama-405b",
        lambda c: c["gke-tpu-llm:buckets"].update({"Weights!": {"purpose": "a"}}),
        ("gke-tpu-llm:buckets.Weights!: 'Weights!' is not a bucket key",),
    ),
    "vllm-no-role-on-weights": (
        "llama-70b",
        identity(bucketRoles={}),
        ("gke-tpu-llm:identity.bucketRoles.models: None does not let vLLM write",),
    ),
    "vllm-read-only-weights": (
        "llama-70b",
        identity(bucketRoles={"models": "roles/storage.objectViewer"}),
        ("gke-tpu-llm:identity.bucketRoles.models: 'roles/storage.objectViewer'", "roles/storage.objectUser"),
    ),
    "vllm-weights-bucket-not-models": (
        "llama-70b",
        both(
            setkey("gke-tpu-llm:buckets", {"weights": {"purpose": "hf-weights-cache"}}),
            identity(bucketRoles={"weights": "roles/storage.objectUser"}),
        ),
        (
            "gke-tpu-llm:workload.vllm.bucket: 'models' (the default: you did not set this key) names no bucket of this stack",
            "Allowed: weights",
            "or set gke-tpu-llm:workload.vllm.bucket yourself",
        ),
    ),
    "jetstream-read-only-checkpoint": (
        "llama-405b",
        identity(bucketRoles={"checkpoints": "roles/storage.objectViewer", "pathways": "roles/storage.objectUser"}),
        ("gke-tpu-llm:identity.bucketRoles.checkpoints: 'roles/storage.objectViewer'",),
    ),
    "gsa-id-collision": (
        "llama-405b",
        both(identity(serviceAccount="tpu-nodes"), tpu(workloadMetadata="GCE_METADATA")),
        ("gke-tpu-llm:identity.serviceAccount: 'tpu-nodes'", "'bad-tpu-nodes'"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_exits_2_naming_key_and_value(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], nothing_registers: None
) -> None:
    stack, mutate, expected = CASES[case]
    path = write_stack(tmp_path, stack, mutate)
    code, err = run_cli(["plan", "--config", str(path)], capsys)
    assert code == 2, err
    for text in expected:
        assert text in err, f"{text!r} not in:\n{err}"


@pytest.mark.parametrize(
    ("stack", "mutate"),
    [
        ("llama-405b", tpu(reservation="projects/shared-project-1/reservations/v6e-pool")),
        ("llama-405b", cluster(systemPool={"machineType": "e2-superfast-4", "allowUndocumentedMachineType": True})),
        ("llama-405b", conversion(machineType="m4-megamem-56", allowUndocumented=True)),
        ("llama-405b", cluster(version="1.32")),
        ("llama-70b", workload(vllm={"bucket": "weights"})),
    ],
    ids=["shared-reservation", "undocumented-machine-type", "undocumented-converter", "minor-version", "vllm-bucket-key"],
)
def test_near_misses_that_are_valid_still_plan(stack: str, mutate: Mutation, tmp_path: Path) -> None:
    def with_weights_bucket(c: dict[str, Any]) -> None:
        mutate(c)
        if "vllm" in c["gke-tpu-llm:workload"] and c["gke-tpu-llm:workload"]["vllm"].get("bucket") == "weights":
            c["gke-tpu-llm:buckets"] = {"weights": {"purpose": "hf-weights-cache"}}
            c["gke-tpu-llm:identity"]["bucketRoles"] = {"weights": "roles/storage.objectUser"}

    path = write_stack(tmp_path, stack, with_weights_bucket)
    assert stacks.config_of(stacks.read_stack_file(path)).config


def test_every_problem_is_reported_together(tmp_path: Path, capsys: pytest.CaptureFixture[str], nothing_registers: None) -> None:
    path = write_stack(
        tmp_path,
        "llama-405b",
        both(
            setkey("gke-tpu-lm:environment", "prod"),
            setkey("gke-tpu-llm:tpu.topology", "4x8"),
            identity(serviceAccount="default", namespace="kube-system"),
            cluster(systemPool={"machineType": "e2-nope-4"}),
        ),
    )
    code, err = run_cli(["plan", "--config", str(path)], capsys)
    assert code == 2
    for key in (
        "gke-tpu-lm:environment",
        "gke-tpu-llm:tpu.topology",
        "gke-tpu-llm:identity.serviceAccount",
        "gke-tpu-llm:identity.namespace",
        "gke-tpu-llm:cluster.systemPool.machineType",
    ):
        assert f"  - {key}: " in err, f"{key} missing from:\n{err}"


def test_stack_name_that_reserves_its_namespace_names_the_key_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nothing_registers: None
) -> None:
    path = write_stack(tmp_path, "llama-405b", lambda c: None, name="Pulumi.kube-llm.yaml")
    code, err = run_cli(["plan", "--config", str(path)], capsys)
    assert code == 2
    assert "gke-tpu-llm:identity.namespace: 'kube-llm' (derived from the stack name 'kube-llm') is reserved" in err
    assert "set identity.namespace" in err


def test_stack_name_with_google_gets_valid_bucket_names(tmp_path: Path) -> None:
    path = write_stack(tmp_path, "llama-405b", lambda c: None, name=f"Pulumi.google-llama-{'x' * 30}.yaml")
    config = stacks.config_of(stacks.read_stack_file(path)).config
    names = [config.bucket_name(k) for k in config.buckets]
    assert all("g00gle" not in n and "google" not in n and len(n) <= 63 for n in names), names
    assert len(set(names)) == len(names)


# ---------------------------------------------------------------- files that are not stack files

FILE_CASES: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "malformed-yaml": (
        lambda d: _text(d, "config:\n  gcp:project: p\n  gke-tpu-llm:tpu: {generation: v6e\n  gcp:region: x\n"),
        ("line 3, column 20", "is not valid YAML: the '{' opened here is never closed"),
    ),
    "bad-indentation": (
        lambda d: _text(d, "config:\n  gcp:project: p\n   gcp:region: x\n"),
        ("line 3, column 4", "is not valid YAML: this line is indented deeper than the key on line 2"),
    ),
    "duplicate-key": (
        lambda d: _text(
            d,
            "config:\n  gcp:project: p\n  gke-tpu-llm:tpu:\n    generation: v6e\n    topology: 4x8\n"
            "  gcp:region: us-east5\n  gke-tpu-llm:tpu:\n    zone: us-east5-b\n",
        ),
        ("config.gke-tpu-llm:tpu: 'gke-tpu-llm:tpu' is given twice in one mapping (lines 3 and 7)", "merge the two"),
    ),
    "duplicate-nested-key": (
        lambda d: _text(d, "config:\n  gke-tpu-llm:tpu:\n    zone: a\n    zone: b\n"),
        ("config.gke-tpu-llm:tpu.zone", "(lines 3 and 4)"),
    ),
    "config-is-a-list": (
        lambda d: _text(d, "config:\n  - gcp:project: p\n  - gcp:region: r\n"),
        ("config: 'a list of 2 item(s)'",),
    ),
    "config-is-a-scalar": (lambda d: _text(d, "config: 42\n"), ("config: 'int 42' is not a mapping",)),
    "top-level-list": (
        lambda d: _text(d, "- config:\n    gcp:project: p\n"),
        ("(top level): 'a list of 1 item(s)' is not a mapping",),
    ),
    "missing-path": (lambda d: d / "Pulumi.nope.yaml", ("--config: ", "Pulumi.nope.yaml' does not exist")),
    "directory": (lambda d: d, ("--config: ", "is a directory")),
    "binary-file": (lambda d: _bytes(d, b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe"), ("--config: ", "is not a UTF-8 text file")),
    "control-characters": (lambda d: _text(d, "config:\n  gcp:project: \x07\n"), ("line 2", "is not valid YAML")),
    "binary-tag": (lambda d: _text(d, "config:\n  gcp:project: !!binary aGVsbG8=\n"), ("line 2", "!!binary")),
    "set-tag": (lambda d: _text(d, "config:\n  gke-tpu-llm:buckets: !!set {a, b}\n"), ("line 2", "is not plain data")),
    "non-string-key": (lambda d: _text(d, "config:\n  1: x\n"), ("1: 'x' is not a config key",)),
}


def _text(directory: Path, text: str) -> Path:
    path = directory / "Pulumi.bad.yaml"
    path.write_text(text)
    return path


def _bytes(directory: Path, data: bytes) -> Path:
    path = directory / "Pulumi.bad.yaml"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_file_that_is_not_a_stack_file_exits_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], nothing_registers: None
) -> None:
    make, expected = FILE_CASES[case]
    code, err = run_cli(["plan", "--config", str(make(tmp_path))], capsys)
    assert code == 2, err
    for text in expected:
        assert text in err, f"{text!r} not in:\n{err}"


@pytest.mark.parametrize("case", ["malformed-yaml", "duplicate-key", "config-is-a-list", "missing-path", "binary-file"])
def test_real_cli_rejects_files_without_a_traceback(case: str, tmp_path: Path) -> None:
    make, expected = FILE_CASES[case]
    proc = run_cli_process("plan", "--config", str(make(tmp_path)))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout == ""
    for text in expected:
        assert text in proc.stderr


def test_real_cli_rejects_a_misspelt_namespace_and_a_flat_key(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path, "llama-405b", both(setkey("gke-tpu-lm:environment", "prod"), setkey("gke-tpu-llm:tpu.topology", "4x8"))
    )
    proc = run_cli_process("plan", "--config", str(path), "--json")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    error = json.loads(proc.stdout)["error"]  # --json: the same report as one JSON object
    assert error["kind"] == "config"
    assert error["exit"] == 2
    assert any(p["key"] == "gke-tpu-lm:environment" for p in error["problems"])
    assert "gke-tpu-lm:environment: 'prod' is under the namespace 'gke-tpu-lm'" in proc.stderr
    assert "pulumi config set --path 'gke-tpu-llm:tpu.topology' 4x8" in proc.stderr


def test_cli_without_a_stack_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["plan"], capsys)
    assert code == 2
    assert "give a STACK name or --config FILE" in err


# ---------------------------------------------------------------- under `pulumi up`: the program's own loader


def test_program_rejects_unknown_namespaces_from_the_runtime(tmp_path: Path) -> None:
    """The program reads every namespace from the Pulumi runtime (not only ours), so a misspelt
    namespace stops ``pulumi up`` with a config error before anything registers."""
    path = write_stack(tmp_path, "llama-405b", setkey("gke-tpu-lm:environment", "prod"))
    stack_file = stacks.read_stack_file(path)
    records: list[mockengine.Registration] = []
    with pytest.raises(pulumi.RunError, match="gke-tpu-lm:environment") as info:
        records, _ = mockengine.run_program(stack_file)
    assert "did you mean gke-tpu-llm:environment?" in str(info.value)
    assert records == []


def test_program_rejects_a_flat_dotted_key_from_the_runtime(tmp_path: Path) -> None:
    path = write_stack(tmp_path, "llama-405b", setkey("gke-tpu-llm:tpu.topology", "4x8"))
    with pytest.raises(pulumi.RunError, match=r"pulumi config set --path 'gke-tpu-llm:tpu\.topology' 4x8"):
        mockengine.run_program(stacks.read_stack_file(path))


def test_provider_namespaces_are_accepted(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path,
        "llama-405b",
        both(
            setkey("gcp:zone", "us-east5-b"),
            setkey("kubernetes:enableServerSideApply", "true"),
            setkey("pulumi:tags", {"a": "b"}),
        ),
    )
    assert stacks.config_of(stacks.read_stack_file(path)).config.stack == "bad"


@pytest.mark.parametrize("stack", STACKS)
def test_namespaces_the_stack_creates_for_others_are_reserved(stack: str) -> None:
    """identity.namespace may not take a namespace a controller of the stack (or GKE) creates: the
    reserved list must cover every Namespace object besides the workload's own."""
    result = planned(stack)
    others = {m["metadata"]["name"] for m in result.manifests if m["kind"] == "Namespace"} - {result.config.namespace}
    for name in others:
        assert naming.namespace_problems(name), f"{name} (created by {stack}) is not reserved"
    controller_namespaces = {
        r.inputs.get("namespace")
        for r in result.resources
        if r.type.startswith("kubernetes:helm.sh/") and r.inputs.get("namespace")
    }
    for name in controller_namespaces:
        assert naming.namespace_problems(str(name)), f"{name} (a controller's) is not reserved"


@pytest.mark.parametrize("command", ["plan", "render", "teardown", "estimate", "preflight"])
def test_a_stack_name_and_a_config_file_together_exit_2(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file = str(stacks.stack_path("llama-70b"))
    with pytest.raises(SystemExit) as exited:
        main([command, "llama-70b", "--config", stack_file])
    assert exited.value.code == 2
    assert "not both" in capsys.readouterr().err
