"""Artifacts: the stack's S3 bucket that every run's model and metrics are exported to
(jobs.results.export, run by the export Job in infra/components/workloads.py).

pulumi-aws 7.51.1 names: `aws.s3.Bucket` (its `BucketV2` is "deprecated in favor of s3.Bucket",
pulumi_aws/s3/bucket_v2.py), and one resource per bucket setting (BucketVersioning,
BucketServerSideEncryptionConfiguration, BucketPublicAccessBlock, BucketOwnershipControls,
BucketPolicy, BucketLifecycleConfiguration) instead of the Bucket's deprecated inline arguments.

- Versioning on: an overwritten or deleted model stays recoverable as a noncurrent version;
  the lifecycle rule expires noncurrent versions after NONCURRENT_VERSION_DAYS and aborts
  multipart uploads left incomplete (an interrupted large upload would otherwise be billed forever).
- Default encryption SSE-S3 (AES256): with SSE-KMS, reading an object's checksum back (HeadObject
  with ChecksumMode, what jobs.results.export compares) also needs kms:Decrypt (botocore 1.44.5 s3 model,
  HeadObject ChecksumMode documentation), and the export role would need a key policy too.
- Every public access blocked, ACLs off (BucketOwnerEnforced), and a policy that denies every
  request not made over TLS (`aws:SecureTransport` false).
- `force_destroy` unless `retainData`: `pulumi destroy` empties and deletes the bucket; with
  retainData it is kept (retain_on_delete), like the EFS file system and the ECR repository.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.config import Settings
from infra.components.naming import aws_tags, component_type

NONCURRENT_VERSION_DAYS = 30
INCOMPLETE_UPLOAD_DAYS = 7
# Where each run's files go: runs/<runId>/ (the export role may write only there).
RUNS_PREFIX = "runs"


def run_prefix(run_id: str) -> str:
    return f"{RUNS_PREFIX}/{run_id}"


def deny_insecure_transport_policy(bucket_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


def export_policy(bucket: str, run_id: str) -> str:
    """What the export Job's role may do: write and read back objects of this run's prefix only.
    s3:GetObject because HeadObject (jobs.results.export's "is it already there, with this checksum?")
    requires it (botocore 1.44.5 s3 model, HeadObject: "To use HEAD, you must have the
    s3:GetObject permission"). No s3:ListBucket: without it HeadObject of a missing key answers 403
    instead of 404 (same documentation), which jobs.results.export treats as "not there yet"."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["s3:PutObject", "s3:GetObject"],
                    "Resource": f"arn:aws:s3:::{bucket}/{run_prefix(run_id)}/*",
                }
            ],
        }
    )


@dataclass
class ArtifactsArgs:
    settings: Settings


class Artifacts(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    ready: list[pulumi.Resource]  # what must exist before anything writes to the bucket

    def __init__(self, name: str, args: ArtifactsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Artifacts"), name, None, opts)
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            force_destroy=not settings.retain_data,
            tags=aws_tags(settings),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=settings.retain_data),
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        encryption = aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="AES256"
                    )
                )
            ],
            opts=child,
        )
        public_access = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        ownership = aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        policy = aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(deny_insecure_transport_policy),
            # After the public access block: the bucket is never without it while a policy exists.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public_access]),
        )
        lifecycle = aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-old-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=NONCURRENT_VERSION_DAYS
                    ),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=INCOMPLETE_UPLOAD_DAYS
                    ),
                )
            ],
            # Noncurrent versions exist only once versioning is on.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn
        self.ready = [versioning, encryption, public_access, ownership, policy, lifecycle]
        self.register_outputs({"bucket": self.bucket_name})
