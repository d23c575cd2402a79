"""Base of every stack spec, and the rule helpers that report cross-field violations.

Kept apart from ``components.config`` so per-workload specs (``components/specs/<kind>.py``) can
be defined beside their renderers and still be fields of the stack config.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components.policy.rules import image_problem


class Spec(BaseModel):
    """Immutable, unknown keys rejected, camelCase keys as Pulumi stack files use."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
    )

    def stack_rules(self, config: Any) -> list[dict[str, Any]]:
        """Cross-section rules of a workload section (it sees the whole ``StackConfig``); none by default."""
        return []

    def required_secrets(self) -> tuple[str, ...]:
        """Secret config keys this workload section needs with its current settings; none by default."""
        return ()


def rule(path: str, value: Any, problem: str, allowed: str, fix: str) -> dict[str, Any]:
    """A violation relative to the spec being validated (path is dotted, in stack-file spelling)."""
    return {"path": path, "value": value, "problem": problem, "allowed": allowed, "fix": fix}


def raise_rules(rules: list[dict[str, Any]]) -> None:
    """Raise every violation at once; ``components.config`` expands them into ``Violation``s."""
    if rules:
        raise PydanticCustomError("stack_rules", "{count} rule(s) violated", {"count": len(rules), "rules": rules})


def _pinned(image: str) -> str:
    problem = image_problem(image)
    if problem:
        raise PydanticCustomError("pinned_image", "{problem}", {"problem": problem})
    return image


PinnedImage = Annotated[str, AfterValidator(_pinned)]
"""A container image pinned to a released tag or a digest (``components.policy.rules.image_problem``)."""
