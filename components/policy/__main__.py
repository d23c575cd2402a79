"""The gke-tpu-llm Pulumi policy pack: `pulumi preview --policy-pack components/policy`.

Thin wrapper: every rule lives in ``checks.py`` (and ``exposure_checks.py``) as a pure function (tested offline on the engine's
recorded resources); this file registers each rule of ``RULES`` (one resource) and ``STACK_RULES``
(every resource of the stack) with its enforcement level (all mandatory) and only adapts Pulumi's
validation args to them, passing the SDK's props through unchanged. The stack's environment comes
from the stack configuration Pulumi hands every policy pack as the ``PULUMI_CONFIG`` environment
variable (``resource_props.stack_environment``). The pack runs in its own virtualenv (see PulumiPolicy.yaml and
requirements.txt here) because pulumi-policy pins an older protobuf than the program's SDKs.
"""

import json
import os
import sys
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root, for components.policy.checks

from components.policy.checks import RULES, STACK_RULES
from components.policy.resource_props import Resource, Rule, StackRule, stack_environment


def _environment() -> str | None:
    config = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    return stack_environment(config if isinstance(config, dict) else None)


def _resource(resource_type: str, name: str, props: Any, opts: Any) -> Resource:
    return Resource(
        type=resource_type,
        name=name,
        props=props,
        protect=bool(opts.protect),
        secret_outputs=tuple(opts.additional_secret_outputs or ()),
        environment=_environment(),
    )


def _level(enforcement: str) -> Any:
    return EnforcementLevel.MANDATORY if enforcement == "mandatory" else EnforcementLevel.ADVISORY


def _validator(rule: Rule) -> Any:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule.check(_resource(args.resource_type, args.name, args.props, args.opts)):
            report_violation(message, args.urn)

    return validate


def _stack_validator(rule: StackRule) -> Any:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        urns: dict[int, str] = {}
        resources = []
        for policy_resource in args.resources:
            res = _resource(policy_resource.resource_type, policy_resource.name, policy_resource.props, policy_resource.opts)
            urns[id(res)] = policy_resource.urn
            resources.append(res)
        for res, message in rule.check(resources):
            report_violation(message, urns[id(res)])

    return validate


PolicyPack(
    name="gke-tpu-llm",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        *[
            ResourceValidationPolicy(
                name=rule.name,
                description=rule.description,
                validate=_validator(rule),
                enforcement_level=_level(rule.enforcement),
            )
            for rule in RULES
        ],
        *[
            StackValidationPolicy(
                name=rule.name,
                description=rule.description,
                validate=_stack_validator(rule),
                enforcement_level=_level(rule.enforcement),
            )
            for rule in STACK_RULES
        ],
    ],
)
