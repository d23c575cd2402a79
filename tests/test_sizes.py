"""Sizes a reader can take in: no hand-written module over 600 lines, a README under 15 KB.

A module past the limit is split along a seam of its own (a rule table, a family of commands, the
pure settings of a component), not cut in two. The README keeps a newcomer's path (the two commands,
the quickstart to a real ``up``, the concepts) and links to the components/README-*.md pages for the
rest.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 600
MAX_README_BYTES = 15 * 1024

CODE = ("components/**/*.py", "*.py", ".github/scripts/*.py")
"""The project's own modules: the library, program and tools, the root program and the workflows'
scripts. Tests are not counted: a test module grows with the cases of what it tests."""

NOT_HAND_WRITTEN: dict[str, str] = {}
"""Generated or vendored files held to no size, each with why. None today: the vendored facts
(CRDs, schemas, image digests) are YAML and JSON, and the data modules written by hand (the TPU
catalog, the deployer's rows, the vendored role permissions) are held to the limit like any other."""


def modules() -> list[Path]:
    found = {path for pattern in CODE for path in ROOT.glob(pattern) if ".venv" not in path.parts}
    return sorted(found)


def test_the_size_rule_sees_the_code() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    # Known modules of each place, so a changed layout cannot make the rule pass on nothing.
    assert {"__main__.py", "components/tools/cli.py", "components/platform/tpu_pool.py"} <= names
    assert any(name.startswith(".github/scripts/") for name in names)
    assert len(names) > 100


def test_exclusions_name_existing_files() -> None:
    missing = [path for path in NOT_HAND_WRITTEN if not (ROOT / path).is_file()]
    assert not missing, f"NOT_HAND_WRITTEN names files that do not exist: {missing}"


def test_no_hand_written_module_is_over_600_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for path in modules()
        if path.relative_to(ROOT).as_posix() not in NOT_HAND_WRITTEN
    }
    over = {name: lines for name, lines in sorted(long.items()) if lines > MAX_MODULE_LINES}
    assert not over, (
        f"modules over {MAX_MODULE_LINES} lines (split each along a seam of its own): "
        + ", ".join(f"{name} ({lines})" for name, lines in over.items())
    )


def test_the_readme_is_at_most_15_kb() -> None:
    size = (ROOT / "README.md").stat().st_size
    assert size <= MAX_README_BYTES, (
        f"README.md is {size:,} bytes, over {MAX_README_BYTES:,}: keep the newcomer's path there and move "
        "detail into the components/README-*.md pages, linked"
    )
