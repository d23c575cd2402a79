"""``StackBucket``: a Cloud Storage bucket with the project's safety rules always on.

Uniform bucket-level access and public-access prevention are not options: IAM is the only access
path and nothing is ever public. The bucket lives in the cluster's region (no cross-region egress
when TPUs read weights). ``force_destroy`` only in dev; in prod the bucket is protected and retained
on delete, so checkpoints survive a teardown.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components import naming
from components.config import StackConfig


class StackBucket(pulumi.ComponentResource):
    TYPE = "gke-tpu-llm:storage:StackBucket"

    bucket_name: pulumi.Output[str]
    url: pulumi.Output[str]
    bucket: gcp.storage.Bucket

    def __init__(self, name: str, config: StackConfig, *, key: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        spec = config.buckets[key]
        policy = config.policy
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=config.bucket_name(key),
            project=config.project,
            location=config.region.upper(),
            storage_class=spec.storage_class,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=config.bucket_force_destroy(key),
            versioning=gcp.storage.BucketVersioningArgs(enabled=True) if spec.holds_checkpoints else None,
            labels={**config.labels, "purpose": naming.label_value(spec.purpose)},
            opts=pulumi.ResourceOptions(parent=self, protect=policy.protect, retain_on_delete=policy.retain_on_delete),
        )
        self.bucket_name = self.bucket.name
        self.url = self.bucket.url
        self.register_outputs({"bucket_name": self.bucket_name, "url": self.url})
