"""Base of every stack spec, and the rule helpers that report cross-field violations.

The bottom of the config package: per-workload specs (``components/workloads/<kind>/spec.py``)
build on it beside their renderers and still become fields of the stack config.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ..catalog.pinning import image_problem
from .errors import rule
from .isolation import Claim


class Spec(BaseModel):
    """Immutable, unknown keys rejected, camelCase keys as Pulumi stack files use; NaN and
    infinity are never numbers (they pass ``>=``/``<=`` bounds and break every count).

    Strict: a value must already have its key's type as YAML reads it. Lax pydantic would read
    ``concurrency: true`` as 1, ``"64"`` as 64 and ``2.0`` as 2, so a typo would plan a different
    stack instead of failing. Inside structured values (``gke-tpu-llm:tpu``, ``...workload``) YAML's
    types are what the user wrote: ``pulumi config set --path`` stores numbers and booleans typed,
    and the engine hands the program the same JSON. The top-level scalar keys are another matter
    (:data:`PulumiBool`, ``StackConfig.environment``)."""

    model_config = ConfigDict(
        strict=True,
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        allow_inf_nan=False,
    )

    def stack_rules(self, config: Any) -> list[dict[str, Any]]:
        """Cross-section rules of a workload section (it sees the whole ``StackConfig``); none by default."""
        return []

    def required_secrets(self) -> tuple[str, ...]:
        """Secret config keys this workload section needs with its current settings; none by default."""
        return ()

    def bucket_needs(self, config: Any) -> tuple[BucketNeed, ...]:
        """Stack buckets this workload section reads or writes and the least role it needs on each;
        ``StackConfig`` checks them all the same way (:func:`bucket_rules`). None by default."""
        return ()

    def per_device_batch(self, config: Any) -> float | None:
        """The per-device batch the planner sizes a training step with, where a kind derives it from its
        own settings (a global batch spread over every slice); None: ``workload.perDeviceBatchSize``."""
        return None

    def verify_plan(self, plan: Any) -> None:
        """Checks of a workload section that need the resolved slice (``config.resolve.StackPlan``), run by
        ``resolve`` so that a ``ConfigError`` comes before anything is registered; none by default."""

    def claims(self, config: Any) -> tuple[Claim, ...]:
        """Names and Workload Identity namespaces this workload section creates beyond the stack's
        own (``components.config.isolation.stack_claims``), which no other stack may share. None by default."""
        return ()


def _pulumi_bool(value: Any) -> Any:
    if value in ("true", "false"):
        return value == "true"
    return value


PulumiBool = Annotated[bool, BeforeValidator(_pulumi_bool)]
"""A boolean top-level key (``gke-tpu-llm:allowTeardown``): ``true``/``false`` or the text "true"/"false".
``pulumi config set <key> true`` (without ``--path``) stores the text ``"true"``, and Pulumi reads it
as a boolean: the CLI's check of a key declared ``type: boolean`` in ``Pulumi.yaml`` takes the texts
"true" and "false", and the running program gets every top-level value as text (JSON-decoded by
``components.program.runtime``). Any other text ("yes", "True") stays an error."""


BucketRole = Literal["roles/storage.objectViewer", "roles/storage.objectUser", "roles/storage.objectAdmin"]
"""The bucket roles a stack may grant (object-level only: ``roles/storage.admin`` cannot be expressed)."""
STORAGE_ROLES: tuple[BucketRole, ...] = get_args(BucketRole)
"""The bucket roles, weakest first (each includes the one before)."""


@dataclass(frozen=True)
class BucketNeed:
    """A workload's use of one stack bucket."""

    bucket: str
    """Bucket key (``gke-tpu-llm:buckets.<key>``)."""
    role: str
    """The least role in ``STORAGE_ROLES`` the workload identity needs on it."""
    problem: str
    """What a weaker role breaks, e.g. 'does not let the trainer write checkpoints'."""
    named_by: str | None = None
    """The key that names the bucket (``workload.vllm.bucket``); None for a fixed key."""
    purpose: str = ""
    """What the bucket holds (for a fixed key that is missing): 'the Saxml admin server's state'."""
    label: str = ""
    """A ``purpose`` value to suggest for a missing fixed-key bucket ('saxml-admin-state')."""
    suggest: str | None = None
    """Role to suggest in the fix; defaults to ``role``."""


def bucket_rules(needs: tuple[BucketNeed, ...], buckets: Any, roles: Any) -> list[dict[str, Any]]:
    """One rule per unmet need (paths relative to ``gke-tpu-llm:``): the bucket must exist and the
    identity must hold at least the needed role on it."""
    rules: list[dict[str, Any]] = []
    seen: set[str] = set()
    for need in needs:
        if need.bucket not in buckets:
            if need.named_by is not None:
                path, value, problem = need.named_by, need.bucket, "names no bucket of this stack"
                allowed = ", ".join(buckets) or "no buckets defined"
                fix = "add the bucket under gke-tpu-llm:buckets or point the key at an existing one"
            else:
                path, value, problem = f"buckets.{need.bucket}", None, f"is required for {need.purpose}"
                allowed = f"a bucket under the key {need.bucket!r}"
                fix = f"add gke-tpu-llm:buckets.{need.bucket}" + (f" (purpose: {need.label})" if need.label else "")
        else:
            role = roles.get(need.bucket)
            have = STORAGE_ROLES.index(role) if role in STORAGE_ROLES else -1
            if have >= STORAGE_ROLES.index(need.role):
                continue
            path, value, problem = f"identity.bucketRoles.{need.bucket}", role, need.problem
            allowed = ", ".join(STORAGE_ROLES[STORAGE_ROLES.index(need.role) :])
            fix = f"grant {need.suggest or need.role} on {need.bucket}"
        if path not in seen:
            seen.add(path)
            rules.append(rule(path, value, problem, allowed, fix))
    return rules


def machine_type_rules(machine_type: str, escape_key: str) -> list[dict[str, Any]]:
    """A CPU ``machineType`` not in the Compute Engine catalog, with near misses and the escape
    hatch ``escape_key`` (for machine types Google adds before the catalog does)."""
    from ..catalog import gce

    if machine_type in gce.MACHINE_TYPES:
        return []
    close = gce.close_machine_types(machine_type)
    return [
        rule(
            "machineType",
            machine_type,
            "is not a Compute Engine machine type in the catalog" + (f" (did you mean {' or '.join(close)}?)" if close else ""),
            gce.describe_machine_types(machine_type),
            f"use a listed CPU machine type, or set {escape_key}: true if Google offers it now",
        )
    ]


def _pinned(image: str) -> str:
    problem = image_problem(image)
    if problem:
        raise PydanticCustomError("pinned_image", "{problem}", {"problem": problem})
    return image


PinnedImage = Annotated[str, AfterValidator(_pinned)]
"""A container image pinned to a released tag or a digest (``components.catalog.pinning.image_problem``)."""


def _cidr(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        try:
            covering = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise PydanticCustomError(
                "value_rule",
                "not a CIDR range",
                {
                    "problem": "is not a CIDR range",
                    "allowed": "CIDR notation, e.g. 203.0.113.0/24 or 2001:db8::/32",
                    "fix": "correct it",
                },
            ) from None
        raise PydanticCustomError(
            "value_rule",
            "host bits set",
            {
                "problem": f"has host bits set after the prefix (the range is {covering})",
                "allowed": "the network address with its prefix",
                "fix": f"write {covering}, or the address alone for just that address",
            },
        ) from None
    # A bare address is its own /32 (/128): the GKE and load-balancer APIs take CIDR notation only
    # and would refuse the address at apply time, so the normalised form is what the plan shows.
    return str(network)


Cidr = Annotated[str, AfterValidator(_cidr)]
"""An IPv4 or IPv6 range in canonical CIDR notation; a bare address becomes its /32 (/128)."""
