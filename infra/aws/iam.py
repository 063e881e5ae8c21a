"""IAM policy documents as plain dicts: pure, so tests can read every statement."""

from __future__ import annotations

import json

import pulumi

AWS_MANAGED = "arn:aws:iam::aws:policy"


def service_trust_policy(service: str) -> str:
    """Trust policy that lets an AWS service (eks.amazonaws.com, ec2.amazonaws.com) assume a role."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


def irsa_trust_policy(oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account_pattern: str) -> str:
    """Trust policy for IAM Roles for Service Accounts: only the named Kubernetes service
    accounts (a StringLike pattern) of this cluster's OIDC issuer may assume the role.
    `oidc_issuer` is the issuer host/path without https://, as pulumi-eks reports it."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": oidc_provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringLike": {
                            f"{oidc_issuer}:sub": f"system:serviceaccount:{namespace}:{service_account_pattern}"
                        },
                        "StringEquals": {f"{oidc_issuer}:aud": "sts.amazonaws.com"},
                    },
                }
            ],
        }
    )


def kms_use_policy(key_arn: str) -> str:
    """What the EKS control plane needs to envelope-encrypt Kubernetes secrets with one key."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
                    "Resource": key_arn,
                }
            ],
        }
    )


def irsa_trust_policy_output(
    oidc_provider_arn: pulumi.Input[str], oidc_issuer: pulumi.Input[str], namespace: str, service_account_pattern: str
) -> pulumi.Output[str]:
    return pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
        lambda args: irsa_trust_policy(args[0], args[1], namespace, service_account_pattern)
    )
