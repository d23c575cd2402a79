"""Rendered Kubernetes objects: committed goldens match a fresh render, and every object validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.config import stack_files as stacks
from components.tools import manifests
from components.tools.validate import validate_all
from tests.conftest import STACKS, planned


@pytest.mark.parametrize("stack", STACKS)
def test_manifests_golden_matches_fresh_render(stack: str) -> None:
    golden_dir = manifests.MANIFESTS_DIR / stack
    if not golden_dir.is_dir():
        # A user's stack whose goldens are not committed (yet): nothing to compare. An example
        # stack's are required (tests/test_stacks.py: test_stacks_examples_are_all_here).
        pytest.skip(f"no manifests/{stack}/: `.venv/bin/python -m components render {stack}` writes its goldens")
    fresh = dict(manifests.manifest_files(planned(stack).manifests))
    committed = {p.name: p.read_text() for p in sorted(golden_dir.glob("*.yaml"))}
    assert committed == fresh, (
        f"manifests/{stack} is stale; run `.venv/bin/python -m components render --all` and commit the result"
    )


def test_manifests_every_golden_dir_has_its_stack_file() -> None:
    # Goldens left behind by a renamed or deleted stack would otherwise never be checked again.
    orphans = sorted(p.name for p in manifests.MANIFESTS_DIR.iterdir() if p.is_dir() and p.name not in STACKS)
    assert not orphans, f"goldens of no stack file in stacks/: delete {', '.join(f'manifests/{o}/' for o in orphans)}"


@pytest.mark.parametrize("stack", STACKS)
def test_manifests_validate_strictly(stack: str) -> None:
    manifests = planned(stack).manifests
    assert manifests
    assert validate_all(manifests) == []


def test_manifests_render_writes_and_prunes(tmp_path: Path) -> None:
    (tmp_path / "99-stale.yaml").write_text("kind: Stale\n")
    written = manifests.write_manifests("llama-405b", planned("llama-405b").manifests, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.yaml")) == sorted(p.name for p in written)
    assert not (tmp_path / "99-stale.yaml").exists()


def test_readme_configuration_reference_is_current() -> None:
    from components.tools.docs import REFERENCE_FILE, configuration_reference

    assert REFERENCE_FILE.read_text() == configuration_reference(), (
        f"{REFERENCE_FILE.relative_to(stacks.ROOT)} is stale; run `.venv/bin/python -m components docs`"
    )
    assert "stacks/CONFIGURATION.md" in (stacks.ROOT / "README.md").read_text(), "the README links the reference"
