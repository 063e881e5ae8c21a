"""Preflight checks the Spot service-linked role before a `spot` stack is brought up (issue 30 item 2).

What is modelled, from source: an account that never used Spot has no `AWSServiceRoleForEC2Spot`,
and Karpenter's CreateFleet then fails with `AuthFailure.ServiceLinkedRoleCreationNotPermitted`, so no
Spot worker starts; the fix is `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`
(aws/karpenter-provider-aws @ 1d927085, website/content/en/v1.14/troubleshooting.md, "Missing Service
Linked Role"; getting-started scripts/step06-add-spot-role.sh).

IAM is moto's server on 127.0.0.1 (the preflight tests' server and environment), reached through
boto3's default session as a user's environment would: GetRole's NoSuchEntity is moto's own answer.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from test_preflight import aws_env, moto_url, reset  # noqa: F401  the preflight tests' moto server and environment

from infra.cli.preflight import Preflight, default_client, spot_role
from infra.cli.preflight.aws_calls import CouldNotCheck
from infra.config import load_settings
from infra.config.stack_file import read_stack_file


def preflight(stack: str, make_client=default_client) -> Preflight:
    return Preflight(load_settings(read_stack_file(stack), stack), make_client=make_client)


@pytest.fixture
def fresh_account(aws_env):
    reset(aws_env)  # no role left from another test
    yield aws_env
    reset(aws_env)


def test_a_spot_stack_in_an_account_that_never_used_spot_fails_with_the_one_command(fresh_account):
    check = preflight("spot").spot_role()
    assert check.status == "fail"
    assert "AWSServiceRoleForEC2Spot" in check.message and "ServiceLinkedRoleCreationNotPermitted" in check.message
    assert (
        check.fix == "run once per account: `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`"
    )


def test_once_the_command_has_run_the_check_passes(fresh_account):
    """The role as the fix's command leaves it in a real account: name AWSServiceRoleForEC2Spot, path
    /aws-service-role/spot.amazonaws.com/ (the command's answer quoted in
    terraform-aws-modules/terraform-aws-eks#2565). moto 5.2.5's CreateServiceLinkedRole names it
    `AWSServiceRoleForspot` (moto/iam/models.py, SERVICE_NAME_CONVERSION has no entry for spot), so
    the role is made with CreateRole under its real name and path."""
    boto3.client("iam", region_name="us-east-1").create_role(
        RoleName="AWSServiceRoleForEC2Spot",
        Path="/aws-service-role/spot.amazonaws.com/",
        AssumeRolePolicyDocument='{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
        '"Principal": {"Service": "spot.amazonaws.com"}, "Action": "sts:AssumeRole"}]}',
    )
    check = preflight("spot").spot_role()
    assert check.status == "pass"
    assert check.message.startswith("AWSServiceRoleForEC2Spot exists (/aws-service-role/spot.amazonaws.com/)")


def test_an_on_demand_stack_asks_iam_nothing():
    def no_aws(service, region):
        raise AssertionError(f"the spot-role check made a client ({service}, {region}) for an on-demand stack")

    check = preflight("dev", make_client=no_aws).spot_role()
    assert check.status == "skip" and "capacityType on-demand" in check.message


def test_a_denied_get_role_is_could_not_check_not_a_verdict(fresh_account):
    """Credentials without iam:GetRole: WARN with IAM's reason, not a FAIL that sends the user to
    create a role that may well exist (botocore's Stubber checks the error against IAM's model)."""

    def denied(service, region):
        client = default_client(service, region)
        stubber = Stubber(client)
        stubber.add_client_error(
            "get_role",
            service_error_code="AccessDenied",
            http_status_code=403,
            service_message="not authorized to perform: iam:GetRole",
            expected_params={"RoleName": spot_role.ROLE_NAME},
        )
        stubber.activate()
        return client

    # Preflight.run turns CouldNotCheck into `WARN could not check: ...` (as for every AWS check).
    with pytest.raises(CouldNotCheck, match="iam get_role: AccessDenied"):
        preflight("spot", make_client=denied).spot_role()
