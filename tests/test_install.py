"""The distribution ``gke-tpu-llm``: ``pip install .`` gives a typed ``gke_tpu_llm`` that works outside
this repository, with the library's runtime as its only base dependencies.

The slow tests build the wheel (``pip wheel``, no build isolation: hatchling is pinned in
requirements-dev.txt, so no network), install it with ``--no-deps`` into a fresh virtualenv, and
borrow this ``.venv``'s site-packages for the third-party dependencies through a ``.pth`` file: the
same pinned versions, no download in CI. Borrowing makes every dependency importable, so the test
checks instead that what the library loads comes only from its declared base dependencies. The
fresh interpreter runs in isolated mode (``-I``) from a temporary directory, so neither this
checkout nor ``PYTHONPATH`` can supply a ``components`` or ``gke_tpu_llm`` package.
"""

from __future__ import annotations

import ast
import csv
import functools
import json
import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import components
from components.config.stack import StackConfig
from components.platform import args as platform_args

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "components"
EXAMPLE = ROOT / "tests" / "examples" / "library_program.py"
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT: dict[str, Any] = PYPROJECT["project"]
IMPORT_NAME = "gke_tpu_llm"

NOT_IN_THE_PACKAGE = ("components/policy/__main__.py", "components/workloads/maxtext_ray/image/")
"""Files under components/ that are not modules of the package: the policy pack's entry point (Pulumi
runs it by path, in the pack's own virtualenv; the wheel leaves it out) and the training image's
build context (runs in the container)."""

MODULE_PATH = re.compile(r"components(\.\w+)+(:\w+)?")
"""A dotted module path of the package under its repository name, as a string."""

TOOLS_ONLY = ("jax", "rich", "jsonschema", "kubernetes_validate", "google.cloud.compute_v1")
"""Third-party modules only the planner, the tools or the online pre-flight import (the extras)."""


# ---- the package metadata, one place per fact


def test_the_version_is_read_from_the_package_and_has_a_changelog_entry() -> None:
    assert PROJECT["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "components/__init__.py"
    assert re.fullmatch(r"0\.\d+\.\d+", components.__version__), components.__version__
    changelog = (PACKAGE / "CHANGELOG.md").read_text()
    entries = re.findall(r"^## (\S+)", changelog, flags=re.MULTILINE)
    assert entries[:1] == [components.__version__], f"components/CHANGELOG.md does not start with {components.__version__}"


def _pins(path: Path) -> dict[str, Requirement]:
    """The ``name==version`` lines of a requirements file (``-r`` includes are read too)."""
    out: dict[str, Requirement] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            out |= _pins(path.parent / line[3:].strip())
        elif line:
            requirement = Requirement(line)
            out[canonicalize_name(requirement.name)] = requirement
    return out


def _declared() -> dict[str, list[Requirement]]:
    """Base dependencies ("") and each extra's, without the extras that name this distribution."""
    groups = {"": PROJECT["dependencies"], **PROJECT["optional-dependencies"]}
    return {
        group: [r for r in map(Requirement, lines) if canonicalize_name(r.name) != canonicalize_name(PROJECT["name"])]
        for group, lines in groups.items()
    }


def test_the_ranges_hold_the_pinned_versions() -> None:
    """Each range of pyproject.toml admits the version requirements.txt (or requirements-dev.txt)
    pins, and every pin of the program's runtime is a dependency of the base or an extra."""
    pins = _pins(ROOT / "requirements-dev.txt")
    declared = {canonicalize_name(r.name): r for group in _declared().values() for r in group}
    for name, requirement in declared.items():
        assert name in pins, f"pyproject.toml requires {name}, which no requirements file pins"
        (pinned,) = [s.version for s in pins[name].specifier]
        assert requirement.specifier.contains(pinned), f"{requirement} does not admit the pinned {name}=={pinned}"
        assert requirement.extras == pins[name].extras, f"{name}: extras {requirement.extras} != pinned {pins[name].extras}"
    # The build backend: pinned once more in requirements-dev.txt, so the wheel builds without isolation.
    assert PYPROJECT["build-system"]["requires"] == [str(pins["hatchling"])]
    runtime = set(_pins(ROOT / "requirements.txt"))
    assert runtime <= set(declared), f"requirements.txt pins that pyproject.toml does not declare: {runtime - set(declared)}"


def _absolute_imports() -> Iterator[tuple[str, int, str]]:
    """(file, line, module) for every absolute import in the package's modules; ``from a.b import c``
    gives ``a.b.c`` (``c`` may be a module: ``from google.cloud import compute_v1``)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(NOT_IN_THE_PACKAGE):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Import):
                yield from ((rel, node.lineno, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield from ((rel, node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


@functools.cache
def _owners() -> dict[str, str]:
    """Module (dotted name) -> the distribution that installed it, from this .venv's RECORD files
    (read as text: ``Distribution.files`` takes seconds over the JSON schemas some tools ship)."""
    out: dict[str, str] = {}
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for row in csv.reader((dist.read_text("RECORD") or "").splitlines()):
            path = PurePosixPath(row[0])
            if path.suffix not in (".py", ".so"):
                continue
            stem = path.name.split(".", 1)[0]  # c.cpython-311-x86_64-linux-gnu.so -> c
            out.setdefault(".".join(path.parts[:-1] if stem == "__init__" else (*path.parts[:-1], stem)), name)
    return out


def _owner(module: str) -> str | None:
    """The distribution that provides ``module``, or the nearest of its parents (``pydantic.BaseModel``
    is an attribute of ``pydantic``; ``google.cloud`` is a namespace shared by many)."""
    parts = module.split(".")
    while parts and ".".join(parts) not in _owners():
        parts.pop()
    return _owners()[".".join(parts)] if parts else None


def _closure(requirements: Iterable[Requirement], extras: Iterable[str] = ("",)) -> set[str]:
    """The distributions ``requirements`` install, dependencies included (this .venv's metadata)."""
    seen: set[str] = set()
    todo = [(r, e) for r in requirements for e in extras]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        wanted = [*requirement.extras, ""]
        if name in seen and not requirement.extras:
            continue
        seen.add(name)
        todo += [(Requirement(line), e) for line in metadata.requires(name) or () for e in wanted]
    return seen


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """A module of the package that imports a third-party module its distribution does not declare
    (in the base or an extra) fails here, naming the file, the module and its distribution."""
    everything = _closure([r for group in _declared().values() for r in group])
    missing = []
    for rel, _, module in _absolute_imports():
        if module.split(".")[0] in (*sys.stdlib_module_names, "components", "__future__"):
            continue
        owner = _owner(module)
        if owner is None or owner not in everything:
            missing.append(f"{rel}: {module} ({owner or 'not installed'})")
    assert not missing, f"imports with no declared dependency in pyproject.toml: {sorted(set(missing))}"


# ---- one package, two names: relative imports inside, no stack model behind an Args error


def test_the_package_imports_itself_relatively() -> None:
    """Installed, the package is ``gke_tpu_llm`` and there is no top-level ``components``: an
    absolute ``components`` import inside it would fail there (tests and the root __main__.py keep
    theirs: they run in this repository)."""
    absolute = [f"{rel}:{line}: {module}" for rel, line, module in _absolute_imports() if module.split(".")[0] == "components"]
    # A module named by a string (``"module:function"`` that importlib loads) must not spell the
    # repository's name either: a kind writes its deploy function as f"{__name__}.component:deploy".
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_PATH.fullmatch(node.value):
                absolute.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not absolute, f"absolute imports of the package itself (make them relative: from ..x import y): {absolute}"


def test_the_args_sections_are_the_stack_model_fields() -> None:
    """``platform.args`` keeps the stack-file section of each spec it validates with (so an Args
    error loads no stack model); the stack model is where the section is defined."""
    assert platform_args._SECTIONS
    for spec, section in platform_args._SECTIONS.items():
        assert StackConfig.model_fields[section].annotation is spec, (spec.__name__, section)


LIBRARY_CHECK = """
import json, sys
at_startup = sorted(sys.modules)
import {package} as library
loaded_on_import = sorted(sys.modules)
errors = []
for args_type, values in [
    ("GkeClusterArgs", dict(project="my-project", region="us-east5", release_channel="FAST")),
    ("TpuSlicePoolArgs", dict(cluster="c", generation="v6e", topology="9x9", zone="us-east5-b")),
]:
    try:
        getattr(library, args_type)(**values)
    except library.ArgsError as error:
        errors.append(str(error))
after_errors = sorted(sys.modules)
for name in library.__all__:
    getattr(library, name)
print(json.dumps({{
    "file": library.__file__,
    "version": library.__version__,
    "errors": errors,
    "loaded_on_import": loaded_on_import,
    "after_errors": after_errors,
    "at_startup": at_startup,
    "files": {{name: getattr(module, "__file__", None) for name, module in sys.modules.items()}},
}}))
"""
"""Import the package, raise two ``ArgsError``s (a spec's value and a spec's rule), then touch every
export; report what was loaded at each step and from where."""


@dataclass(frozen=True)
class LibraryRun:
    file: str
    version: str
    errors: list[str]
    loaded_on_import: list[str]
    after_errors: list[str]
    at_startup: list[str]
    """Loaded before the package (by the interpreter's start-up and site's .pth files)."""
    files: dict[str, str | None]


def _library_run(python: str | Path, package: str, cwd: Path, *flags: str) -> LibraryRun:
    code = LIBRARY_CHECK.format(package=package)
    out = subprocess.run([str(python), *flags, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return LibraryRun(**json.loads(out.stdout))


def _assert_a_library_run(run: LibraryRun, package: str) -> None:
    assert len(run.errors) == 2, run.errors
    assert "release_channel: 'FAST' is not an allowed value. Allowed: 'RAPID', 'REGULAR' or 'STABLE'" in run.errors[0]
    assert "topology: '9x9' is not a v6e topology" in run.errors[1]
    # Importing the package loads no Pulumi SDK; an Args error loads no stack model, workload kind,
    # tool or planner (nor JAX).
    assert not [m for m in run.loaded_on_import if m == "pulumi" or m.startswith(("pulumi.", "pulumi_"))]
    heavy = [f"{package}.{m}" for m in ("config.stack", "config.loader", "workloads", "tools", "planner", "program")]
    loaded = [m for m in run.after_errors if _within(m, [*heavy, *TOOLS_ONLY])]
    assert not loaded, f"an Args error loaded {loaded}"


def _within(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_an_args_error_loads_no_stack_config_and_no_workload_kind() -> None:
    """In this repository (the installed package is checked the same way by the slow test below)."""
    _assert_a_library_run(_library_run(sys.executable, "components", ROOT), "components")


# ---- the wheel, installed into a fresh virtualenv


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    site: Path
    """The fresh virtualenv's site-packages."""
    borrowed: Path
    """This .venv's site-packages, which the fresh one reads the third-party dependencies from."""
    outside: Path
    """A directory outside the repository to run from."""


def _run(*command: str | Path, cwd: Path = ROOT) -> str:
    out = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{' '.join(map(str, command))}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("install")
    assert not tmp.resolve().is_relative_to(ROOT)
    dist = tmp / "dist"
    _run(sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", dist)
    (wheel,) = dist.glob("*.whl")
    venv = tmp / "venv"
    # No pip of its own (nothing downloads): this interpreter's pip installs into it (--python).
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel)
    site = Path(_run(python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    borrowed = Path(sysconfig.get_path("purelib"))
    # addsitedir (not a bare path line) also runs the borrowed directory's own .pth files.
    (site / "_borrowed_dependencies.pth").write_text(f"import site; site.addsitedir({str(borrowed)!r})\n")
    outside = tmp / "program"
    outside.mkdir()
    return Installed(wheel=wheel, python=python, site=site, borrowed=borrowed, outside=outside)


@pytest.mark.slow
def test_the_wheel_is_typed_and_carries_the_data_the_package_reads(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert f"{IMPORT_NAME}/py.typed" in names
    assert f"{IMPORT_NAME}/catalog/images.json" in names
    assert f"{IMPORT_NAME}/CHANGELOG.md" in names
    for pattern in ("crds/*/*/SOURCE.json", "crds/*/*/*.json.gz", "schemas/*/*.json"):
        assert any(Path(n).match(f"{IMPORT_NAME}/{pattern}") for n in names), pattern
    # Every file of the package is in the wheel, under the import name, except the policy pack's
    # entry point and pins; nothing is installed as a top-level `components`.
    tracked = [f for f in _run("git", "ls-files", "components").split() if (ROOT / f).is_file()]
    pack = ("components/policy/__main__.py", "components/policy/PulumiPolicy.yaml", "components/policy/requirements")
    wanted = {IMPORT_NAME + f.removeprefix("components") for f in tracked if not f.startswith(pack)}
    assert wanted <= names, sorted(wanted - names)
    left_out = tuple(IMPORT_NAME + f.removeprefix("components") for f in pack)
    assert not [n for n in names if n.startswith(("components/", *left_out))]
    wheel_metadata = zipfile.ZipFile(installed.wheel).read(f"gke_tpu_llm-{components.__version__}.dist-info/METADATA").decode()
    assert "Requires-Python: >=3.11" in wheel_metadata
    assert "Provides-Extra: tools" in wheel_metadata


@pytest.mark.slow
def test_the_installed_library_runs_on_its_base_dependencies_alone(installed: Installed) -> None:
    run = _library_run(installed.python, IMPORT_NAME, installed.outside, "-I")
    assert Path(run.file).is_relative_to(installed.site), run.file
    assert run.version == components.__version__
    _assert_a_library_run(run, IMPORT_NAME)
    assert "components" not in run.files
    # Every third-party module the library loaded (all its components included) is installed by
    # its base dependencies: the extras are not needed to use it.
    base = _closure(_declared()[""])
    outside_base, used = set(), set()
    for module, file in run.files.items():
        if file is None or module in run.at_startup or not Path(file).is_relative_to(installed.borrowed):
            continue
        owner = _owner(module)
        used.add(owner)
        if owner not in base:
            outside_base.add(f"{module} ({owner})")
    assert not outside_base, f"the library loaded modules its base dependencies do not install: {sorted(outside_base)}"
    # ... and each base dependency is one it loads: nothing the library does not use is in the base.
    unused = {canonicalize_name(r.name) for r in _declared()[""]} - used
    assert not unused, f"base dependencies the library never imports (move them to an extra): {sorted(unused)}"
    assert not [m for m in run.files if _within(m, TOOLS_ONLY)]


EXAMPLE_RUN = """
import json, runpy, sys
from gke_tpu_llm.tools import mockengine
records, outputs = mockengine.record(lambda: runpy.run_path(sys.argv[1], run_name="__main__"), stack="demo", project="my-project")
print(json.dumps({"records": [r.to_dict() for r in records], "outputs": outputs}))
"""
"""The library example under the offline engine's Pulumi mocks (the recording ``test_library`` uses)."""


@pytest.mark.slow
def test_the_example_program_runs_from_outside_the_repository(installed: Installed) -> None:
    program = installed.outside / "__main__.py"
    program.write_text(EXAMPLE.read_text())
    out = json.loads(_run(installed.python, "-I", "-c", EXAMPLE_RUN, program, cwd=installed.outside))
    (cluster,) = [r for r in out["records"] if r["type"] == "gcp:container/cluster:Cluster"]
    inputs = cluster["inputs"]
    assert (inputs["name"], inputs["project"], inputs["location"]) == ("demo", "my-project", "us-east5")
    pools = {r["inputs"]["name"]: r for r in out["records"] if r["type"] == "gcp:container/nodePool:NodePool"}
    assert set(pools) == {"system", "serve", "train"}
    assert pools["serve"]["inputs"]["nodeConfig"]["machineType"] == "ct6e-standard-8t"
    assert pools["train"]["inputs"]["nodeCount"] == 8
    assert pools["train"]["inputs"]["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x8"}
    assert out["outputs"]["cluster_name"] == "demo"
    assert out["outputs"]["tpu_pools"] == ["serve", "train"]
    # The same registrations, input for input, as the example run in place from this repository.
    from tests.test_library import example

    in_place, outputs = example()
    assert out["records"] == [r.to_dict() for r in in_place]
    assert out["outputs"] == outputs
