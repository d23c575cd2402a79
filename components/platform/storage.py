"""``StackBucket``: a Cloud Storage bucket with the project's safety rules always on.

Uniform bucket-level access and public-access prevention are not options: IAM is the only access
path and nothing is ever public. The bucket lives in the cluster's region (no cross-region egress
when TPUs read weights). ``force_destroy`` only in dev; in prod the bucket is protected and retained
on delete, so checkpoints survive a teardown.

As a library (no stack config)::

    from components import StackBucket, StackBucketArgs

    ckpt = StackBucket("ckpt", StackBucketArgs(project="my-project", region="us-east5", purpose="checkpoints",
                                               holds_checkpoints=True, force_destroy=False))
    pulumi.export("checkpoints", ckpt.url)

The bucket is named ``<project>-<stack>-<component name>`` unless ``bucket_name`` is set; grant access
to it with ``WorkloadIdentity``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from ..config import gke_rules as rules
from ..config import naming
from ..config.errors import Violation
from ..config.platform import BucketSpec, StorageClass
from .args import (
    DEFAULT_POLICY,
    args_class,
    check,
    default_of,
    meta,
    own,
    protect_description,
    validate,
    violations,
)


@args_class
@dataclass(frozen=True, kw_only=True)
class StackBucketArgs:
    """What a ``StackBucket`` needs. Only project, region and purpose are required."""

    project: str = field(metadata=own("GCP project id of the bucket."))
    region: str = field(
        metadata=own("GCP region of the bucket; the cluster's, so TPU VMs read weights without cross-region egress.")
    )
    allow_undocumented_region: bool = field(
        default=False,
        metadata=own(
            "Accept a region the Compute Engine catalog (components/catalog/gce.py) does not list, as "
            "GkeClusterArgs.allow_undocumented_region does; the stack program sets it with tpu.allowUndocumentedZone."
        ),
    )
    purpose: str = field(metadata=meta(BucketSpec, "purpose"))
    bucket_name: str | None = field(
        default=None,
        metadata=own(
            "Globally unique bucket name (3-63 lowercase letters, digits, '-' or '_'). Unset: "
            "<project>-<stack>-<component name>, as the stack names its buckets <project>-<stack>-<key>."
        ),
    )
    holds_checkpoints: bool = field(
        default=default_of(BucketSpec, "holds_checkpoints"), metadata=meta(BucketSpec, "holds_checkpoints")
    )
    storage_class: StorageClass = field(
        default=default_of(BucketSpec, "storage_class"), metadata=meta(BucketSpec, "storage_class")
    )
    force_destroy: bool = field(
        default=DEFAULT_POLICY.force_destroy,
        metadata=meta(
            BucketSpec,
            "force_destroy",
            sentences=1,
            extra="Defaults to on, the dev environment's policy (a stack file's default); the stack program passes "
            "its environment's (never in prod).",
        ),
    )
    protect: bool = field(default=DEFAULT_POLICY.protect, metadata=own(protect_description("bucket")))
    retain_on_delete: bool = field(
        default=DEFAULT_POLICY.retain_on_delete,
        metadata=own(
            "Keep the bucket in the project when it leaves the program or the stack is destroyed (its data "
            "outlives the stack). Defaults to off, the dev environment's policy; the stack program sets it in prod."
        ),
    )
    labels: Mapping[str, str] = field(
        default_factory=dict, metadata=own("GCP labels on the bucket; a 'purpose' label (from purpose) is added.")
    )

    def __post_init__(self) -> None:
        validate(self, BucketSpec)
        found = rules.project_rules("project", self.project)
        found += rules.region_rules(
            "region", self.region, allow_undocumented=self.allow_undocumented_region, escape="allow_undocumented_region=True"
        )
        found += rules.label_rules("labels", self.labels)
        problems = violations(found)
        problems += [
            Violation(
                "purpose",
                self.purpose,
                f"gives the label value {naming.label_value(self.purpose)!r}, which {p}",
                "a short label",
                "shorten it",
            )
            for p in naming.label_value_problems(naming.label_value(self.purpose))
        ]
        if self.bucket_name is not None:
            problems += [
                Violation(
                    "bucket_name",
                    self.bucket_name,
                    p,
                    "3-63 lowercase letters, digits, '-' or '_'; no 'goog' prefix; no 'google'",
                    "choose another name",
                )
                for p in naming.bucket_name_problems(self.bucket_name)
            ]
        check(self, problems)


class StackBucket(pulumi.ComponentResource):
    """A bucket with uniform access, public-access prevention, and versioning where it holds checkpoints."""

    TYPE = "gke-tpu-llm:storage:StackBucket"

    bucket_name: pulumi.Output[str]
    url: pulumi.Output[str]
    bucket: gcp.storage.Bucket

    def __init__(self, name: str, args: StackBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        bucket_name = args.bucket_name or naming.bucket_name(args.project, pulumi.get_stack(), name)
        check(
            args,
            [
                Violation("bucket_name", bucket_name, f"(derived from project, stack and name) {p}", "", "set bucket_name")
                for p in naming.bucket_name_problems(bucket_name)
            ],
        )
        super().__init__(self.TYPE, name, None, opts)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=bucket_name,
            project=args.project,
            location=args.region.upper(),
            storage_class=args.storage_class,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=args.force_destroy,
            versioning=gcp.storage.BucketVersioningArgs(enabled=True) if args.holds_checkpoints else None,
            labels={**args.labels, "purpose": naming.label_value(args.purpose)},
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect, retain_on_delete=args.retain_on_delete),
        )
        self.bucket_name = self.bucket.name
        self.url = self.bucket.url
        self.register_outputs({"bucket_name": self.bucket_name, "url": self.url})
