"""Preflight's check of the Spot service-linked role (capacityType spot only).

EC2 launches Spot capacity through the service-linked role `AWSServiceRoleForEC2Spot`, which an
account gets the first time it uses Spot. In an account that never did, Karpenter's CreateFleet
fails with `ServiceLinkedRoleCreationNotPermitted` (its own policy grants no
iam:CreateServiceLinkedRole, nor does the official CloudFormation), Karpenter marks Spot unavailable,
and since the `spot` pool allows only Spot, no worker node ever appears: the run waits until its
timeout. Read in aws/karpenter-provider-aws @ 1d927085: website/content/en/v1.14/troubleshooting.md,
"Missing Service Linked Role", and the getting-started step that creates the role,
website/content/en/v1.14/getting-started/getting-started-with-karpenter/scripts/step06-add-spot-role.sh.

Why a preflight check and not a resource of the stack: an `aws.iam.ServiceLinkedRole` fails to
create where the role already exists, which is every account that ever ran Spot (step06's own
comment: "An error occurred (InvalidInput) ... Service role name AWSServiceRoleForEC2Spot has been
taken in this account"), and where it did create the role, `pulumi destroy` would delete a role the
rest of the account relies on. The role is the account's, once: preflight says whether it is
there and, if not, the one command that creates it.
"""

from __future__ import annotations

from typing import Any, Callable

from botocore.exceptions import ClientError

from infra.cli.preflight.aws_calls import UNEXPECTED_ANSWER, CouldNotCheck, reason
from infra.cli.preflight.result import FAIL, PASS, SKIP, Check
from infra.config import SPOT, Settings

CHECK_ID = "spot-role"
ROLE_NAME = "AWSServiceRoleForEC2Spot"
SPOT_SERVICE = "spot.amazonaws.com"
CREATE_COMMAND = f"aws iam create-service-linked-role --aws-service-name {SPOT_SERVICE}"


def check(settings: Settings, iam: Callable[[], Any]) -> Check:
    """The Check. `iam` makes the IAM client (IAM is global; none is made for an on-demand stack). A call
    that is denied or fails for another reason raises CouldNotCheck (preflight reports WARN)."""
    if settings.capacity_type != SPOT:
        return Check(CHECK_ID, SKIP, f"capacityType {settings.capacity_type}: the workers buy no Spot capacity")
    try:
        role = iam().get_role(RoleName=ROLE_NAME)["Role"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "NoSuchEntity":
            return Check(
                CHECK_ID,
                FAIL,
                f"the account has no {ROLE_NAME}, the role EC2 launches Spot instances with: Karpenter's "
                "CreateFleet would fail with ServiceLinkedRoleCreationNotPermitted and no Spot worker "
                "would ever start",
                f"run once per account: `{CREATE_COMMAND}`",
            )
        raise CouldNotCheck(f"iam get_role: {reason(error)}") from None
    except UNEXPECTED_ANSWER as error:  # unreachable, or not AWS's answer (aws_calls.py)
        raise CouldNotCheck(f"iam get_role: {reason(error)}") from None
    return Check(CHECK_ID, PASS, f"{ROLE_NAME} exists ({role.get('Path', '/')}): EC2 can launch Spot instances")
