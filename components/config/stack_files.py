"""The stacks of this project: finding ``stacks/Pulumi.<stack>.yaml``, reading one as the offline
engine needs it, and validating it without running anything.

Parsing the YAML itself (strict, ``ConfigError`` for anything that is not a stack file) is
:mod:`components.config.stack_yaml`; this module turns the parsed file into a :class:`StackFile` (full
keys to values, secrets as placeholders) and resolves its configuration (:func:`config_of`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from . import stack_yaml as stackfile
from .errors import NAMESPACE, ConfigError
from .isolation import Tenancy, conflicts, tenancy
from .loader import parse_full_config, required_secrets
from .resolve import StackPlan, resolve_values
from .stack import StackConfig

ROOT = Path(__file__).resolve().parent.parent.parent
"""The project directory (``Pulumi.yaml``, ``__main__.py``, ``stacks/``, ``manifests/``)."""
STACKS_DIR = ROOT / "stacks"

STACK_NAME_PATTERN = r"[A-Za-z0-9][-A-Za-z0-9_.]{0,99}"
"""The ``<stack>`` of a ``stacks/Pulumi.<stack>.yaml``, matched whole: a Pulumi stack name
(``naming.STACK_NAME_PATTERN``) starting with a letter or digit, so no command line reads it as an
option. deploy.yml checks its free-text ``stack`` input against it before any use: the standard-library
script it runs (.github/scripts/stack_environments.py) holds a copy that tests/test_workflows.py keeps
equal to this one."""

SECRET_PLACEHOLDER = "[secret]"
"""What offline runs see, and plans show, in place of any secret value."""


@dataclass(frozen=True)
class StackFile:
    stack: str
    path: Path
    values: dict[str, Any]
    """Full keys (``gke-tpu-llm:tpu``, ``gcp:project``) to decoded values; secrets as placeholders."""
    secret_keys: tuple[str, ...]
    placeholders: tuple[str, ...] = ()
    """Required secrets the file does not hold, filled with placeholders for the offline preview."""


def stack_path(stack: str) -> Path:
    return STACKS_DIR / f"Pulumi.{stack}.yaml"


def list_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def is_stack_name(name: str) -> bool:
    """Whether ``name`` can be a stack in ``stacks/`` (:data:`STACK_NAME_PATTERN`)."""
    return re.fullmatch(STACK_NAME_PATTERN, name) is not None


def read_stack_file(path: Path, stack: str | None = None, *, fill_secrets: bool = True) -> StackFile:
    """Read ``Pulumi.<stack>.yaml``. Encrypted values (``secure:``) cannot be decrypted offline and
    become placeholders marked secret, exactly as the program would see an unknown secret.

    A committed stack file cannot hold a user's token, so with ``fill_secrets`` the secrets the
    workload requires but the file lacks are filled with placeholders too (and listed in
    ``placeholders``); ``pulumi up`` has no such fallback and stops with a config error."""
    raw = stackfile.config_section(stackfile.load(path))  # ConfigError for anything that is not a stack file
    values: dict[str, Any] = {}
    secrets: list[str] = []
    for key, value in raw.items():
        if isinstance(value, Mapping) and set(value) == {"secure"}:
            values[key] = SECRET_PLACEHOLDER
            secrets.append(key)
        else:
            values[key] = value
    placeholders: list[str] = []
    if fill_secrets:
        for key in required_secrets(values.get(f"{NAMESPACE}:workload")):
            full = f"{NAMESPACE}:{key}"
            if full not in values:
                values[full] = SECRET_PLACEHOLDER
                secrets.append(full)
                placeholders.append(full)
    name = stack or (path.name[len("Pulumi.") : -len(".yaml")] if path.name.startswith("Pulumi.") else path.stem)
    return StackFile(stack=name, path=path, values=values, secret_keys=tuple(secrets), placeholders=tuple(placeholders))


def config_of(stack_file: StackFile) -> StackPlan:
    """Validate a stack file and resolve its capacity without running anything (raises ConfigError).

    Every key is seen, as under ``pulumi up``: one under a namespace the program does not read is a
    problem, not silently dropped."""
    return resolve_values(stack_file.values, stack_file.stack, stack_file.secret_keys)


@cache
def _tenancy_of_file(path: Path, stamp: tuple[int, int]) -> Tenancy | None:
    """A stack file's tenancy (what it claims, where), or None when the file does not validate (it
    cannot be deployed then, and its own plan says why). Cached by path and (mtime, size): ``plan
    --all`` compares every stack with every other one."""
    try:
        config = parse_full_config((stack_file := read_stack_file(path)).values, stack_file.stack, stack_file.secret_keys)
    except ConfigError:
        return None
    return tenancy(config, source=str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path))


def stack_file_tenancies(exclude: str | None = None) -> list[Tenancy]:
    """The tenancy of every valid stack file in ``stacks/`` but ``exclude`` (the stack at hand)."""
    out: list[Tenancy] = []
    for stack in list_stacks():
        if stack == exclude:
            continue
        path = stack_path(stack)
        stat = path.stat()
        found = _tenancy_of_file(path, (stat.st_mtime_ns, stat.st_size))
        if found is not None:
            out.append(found)
    return out


def check_isolation(config: StackConfig) -> None:
    """Raise ``ConfigError`` when ``config`` shares a name, a Workload Identity namespace or (as
    non-prod beside prod) a project with another stack file in ``stacks/``
    (``components.config.isolation``). Run by ``plan``/``render`` and by the program before ``pulumi
    up`` registers anything."""
    problems = conflicts(tenancy(config), stack_file_tenancies(exclude=config.stack))
    if problems:
        raise ConfigError(problems)
