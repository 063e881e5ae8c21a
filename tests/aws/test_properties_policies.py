"""Every IAM and EFS policy is exactly what is needed and nothing more: each document is compared
whole (an extra action, principal or a dropped condition fails), with the AWS meaning cited.

What "root access" is: AWS's managed policies AmazonElasticFileSystemClientReadWriteAccess ("read
and write client access": ClientMount, ClientWrite, DescribeMountTargets) and
AmazonElasticFileSystemClientFullAccess ("root client access": the same plus ClientRootAccess),
https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonElasticFileSystemClientReadWriteAccess.html
and .../AmazonElasticFileSystemClientFullAccess.html (policy version v1). So the Allow below must
never name ClientRootAccess, and being for Principal "*" it must keep its mount-target condition."""

from __future__ import annotations

import json

import pulumi
import pytest

from infra.aws import iam
from infra.components.storage import tls_only_file_system_policy

ISSUER = "oidc.eks.us-west-2.amazonaws.com/id/ABC"
PROVIDER = f"arn:aws:iam::123456789012:oidc-provider/{ISSUER}"
FS = "arn:aws:elasticfilesystem:us-west-2:123456789012:file-system/fs-1"


@pytest.mark.parametrize("service", ["eks.amazonaws.com", "ec2.amazonaws.com"])
def test_a_service_trust_policy_lets_that_service_assume_the_role_and_nobody_else(service):
    assert json.loads(iam.service_trust_policy(service)) == {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }


def test_the_irsa_trust_policy_is_one_service_account_pattern_of_one_issuer_for_sts_only():
    assert json.loads(iam.irsa_trust_policy(PROVIDER, ISSUER, "kube-system", "efs-csi-*")) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": PROVIDER},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringLike": {f"{ISSUER}:sub": "system:serviceaccount:kube-system:efs-csi-*"},
                    "StringEquals": {f"{ISSUER}:aud": "sts.amazonaws.com"},
                },
            }
        ],
    }


def test_the_kms_policy_is_four_actions_on_one_key():
    key = "arn:aws:kms:us-west-2:123456789012:key/k"
    assert json.loads(iam.kms_use_policy(key)) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
                "Resource": key,
            }
        ],
    }


class _NoResources(pulumi.runtime.Mocks):
    def new_resource(self, args):
        raise AssertionError("no resource expected")

    def call(self, args):
        raise AssertionError("no call expected")


@pulumi.runtime.test
def test_the_irsa_trust_policy_from_outputs_is_the_same_document():
    pulumi.runtime.set_mocks(_NoResources())
    out = iam.irsa_trust_policy_output(
        pulumi.Output.from_input(PROVIDER), pulumi.Output.from_input(ISSUER), "training", "data-prep"
    )
    return out.apply(lambda text: _assert_equal(text, iam.irsa_trust_policy(PROVIDER, ISSUER, "training", "data-prep")))


def _assert_equal(actual, expected):
    assert actual == expected


def test_the_efs_policy_allows_mount_and_write_through_mount_targets_only_and_denies_without_tls():
    policy = json.loads(tls_only_file_system_policy(FS))
    assert policy == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "MountThroughMountTargets",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                "Resource": FS,
                "Condition": {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
            },
            {
                "Sid": "DenyWithoutTls",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": "*",
                "Resource": FS,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }
    allow = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert all("Condition" in s for s in allow), (
        "an unconditioned Allow for Principal * opens the file system to any account"
    )
    assert not any("ClientRootAccess" in str(s["Action"]) for s in allow)
