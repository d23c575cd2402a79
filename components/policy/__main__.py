"""The gke-tpu-llm Pulumi policy pack: `pulumi preview --policy-pack components/policy`.

Thin wrapper: every rule lives in ``rules.py`` as a pure function (tested offline on the engine's
recorded resources); this file registers each rule of ``RULES`` with its enforcement level (all
mandatory) and only adapts Pulumi's ResourceValidationArgs to it, passing the SDK's props through
unchanged. The pack runs in its own virtualenv (see PulumiPolicy.yaml and requirements.txt here)
because pulumi-policy pins an older protobuf than the program's SDKs.
"""

import sys
from pathlib import Path
from typing import Any

from pulumi_policy import EnforcementLevel, PolicyPack, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root, for components.policy.rules

from components.policy.rules import RULES, Resource, Rule


def _validator(rule: Rule) -> Any:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        resource = Resource(
            type=args.resource_type,
            name=args.name,
            props=args.props,
            protect=bool(args.opts.protect),
            secret_outputs=tuple(args.opts.additional_secret_outputs or ()),
        )
        for message in rule.check(resource):
            report_violation(message, args.urn)

    return validate


PolicyPack(
    name="gke-tpu-llm",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name=rule.name,
            description=rule.description,
            validate=_validator(rule),
            enforcement_level=EnforcementLevel.MANDATORY if rule.enforcement == "mandatory" else EnforcementLevel.ADVISORY,
        )
        for rule in RULES
    ],
)
