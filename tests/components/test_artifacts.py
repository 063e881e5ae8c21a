"""The artifacts bucket and the export Job's permissions, as `synth` renders them for dev.

IAM semantics relied on: an explicit Deny overrides any Allow (IAM policy evaluation logic), and
`aws:SecureTransport` is "false" on a request not sent over TLS (IAM global condition keys).
HeadObject needs s3:GetObject (botocore 1.44.5 s3 model, HeadObject documentation), which is why
the export role has it beside s3:PutObject."""

from __future__ import annotations

import json
import re

from infra.components import artifacts
from scanner_helpers import star_on_star_statements


def bucket_resources(synth) -> dict[str, dict]:
    return {r["type"].split(":")[-1]: r for r in synth.resources if r["type"].startswith("aws:s3/")}


def test_bucket_settings(dev):
    found = bucket_resources(dev)
    assert set(found) == {
        "Bucket",
        "BucketVersioning",
        "BucketServerSideEncryptionConfiguration",
        "BucketPublicAccessBlock",
        "BucketOwnershipControls",
        "BucketPolicy",
        "BucketLifecycleConfiguration",
    }
    bucket = found["Bucket"]
    assert bucket["inputs"]["forceDestroy"] is True and bucket["retainOnDelete"] is False
    assert found["BucketVersioning"]["inputs"]["versioningConfiguration"]["status"] == "Enabled"
    (rule,) = found["BucketServerSideEncryptionConfiguration"]["inputs"]["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    block = found["BucketPublicAccessBlock"]["inputs"]
    assert all(
        block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    (lifecycle,) = found["BucketLifecycleConfiguration"]["inputs"]["rules"]
    assert lifecycle["status"] == "Enabled"
    assert lifecycle["noncurrentVersionExpiration"]["noncurrentDays"] == artifacts.NONCURRENT_VERSION_DAYS
    assert lifecycle["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == artifacts.INCOMPLETE_UPLOAD_DAYS


# retainData=true (kept, not emptied): tests/test_security_scanners.py, test_retain_data_keeps_..., on
# the render it already makes with retainData on.


def test_bucket_policy_denies_every_request_without_tls(dev):
    found = bucket_resources(dev)
    arn = found["Bucket"]["inputs"].get("arn") or f"arn:aws:s3:::{dev.outputs['artifactsBucket']}"
    policy = json.loads(found["BucketPolicy"]["inputs"]["policy"])
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Deny" and statement["Principal"] == "*" and statement["Action"] == "s3:*"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert sorted(statement["Resource"]) == sorted([arn, f"{arn}/*"])


def test_export_role_may_write_only_this_runs_prefix(dev):
    (policy,) = [r for r in dev.of_type("aws:iam/rolePolicy:RolePolicy") if r["name"] == "workloads-export-write"]
    document = json.loads(policy["inputs"]["policy"])
    assert star_on_star_statements(document) == []
    (statement,) = document["Statement"]
    assert statement["Effect"] == "Allow"
    assert sorted(statement["Action"]) == ["s3:GetObject", "s3:PutObject"]
    assert statement["Resource"] == f"arn:aws:s3:::{dev.outputs['artifactsBucket']}/runs/run-1/*"
    for action in statement["Action"]:
        assert "*" not in action
    assert "*" != statement["Resource"] and not statement["Resource"].endswith(":::*")


def test_export_role_is_assumable_only_by_the_export_service_account(dev):
    (role,) = [r for r in dev.of_type("aws:iam/role:Role") if r["name"] == "workloads-export-role"]
    (statement,) = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
    (sub,) = statement["Condition"]["StringLike"].values()
    assert sub == "system:serviceaccount:training:export"
    account = dev.manifest("ServiceAccount", "export")
    role_arn = account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
    assert re.fullmatch(rf"arn:aws:iam::[0-9]{{12}}:role/{role['name']}-[0-9a-f]{{7}}", role_arn), role_arn


def test_export_job_runs_after_the_test_job_with_its_own_identity(dev):
    job = dev.manifest("Job", "export-")
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "export" and pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "jobs.results.export"]
    assert container["args"] == [
        "--run-dir",
        "/efs-shared/runs/run-1",
        "--dest",
        f"s3://{dev.outputs['artifactsBucket']}/runs/run-1",
    ]
    assert {"name": "AWS_REGION", "value": "us-west-2"} in container["env"]
    export = dev.one("kubernetes:batch/v1:Job", "workloads-export")
    test = dev.one("kubernetes:batch/v1:Job", "workloads-test")
    assert test["urn"] in export["dependsOn"]


def test_outputs_name_the_exported_objects(dev):
    bucket = dev.outputs["artifactsBucket"]
    assert dev.outputs["modelUri"] == f"s3://{bucket}/runs/run-1/model.pt"
    assert dev.outputs["metricsUri"] == f"s3://{bucket}/runs/run-1/metrics.json"
