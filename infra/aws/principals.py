"""Is an IAM principal ARN the cluster's creator, the identity that runs `pulumi up`, or another?

pulumi-eks always creates the cluster with `accessConfig.bootstrapClusterCreatorAdminPermissions:
true` when an authentication mode is set (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts
@ 7bf0c1b1, lines 733-740: "Explicitely grants the principal creating the cluster admin access"),
so EKS itself gives the creator an access entry with cluster-admin; an access entry for the same
principal in `clusterAdminArns` conflicts with it (upstream-facts.md fact 12). The caller is what
STS `GetCallerIdentity` returns:
- an IAM user: `arn:aws:iam::<account>:user/<path/>name`;
- an assumed role (SSO, CI, `aws sts assume-role`): `arn:aws:sts::<account>:assumed-role/<role>/<session>`.
  The STS ARN carries the role's NAME only, not its path, while a role ARN in the config may have
  one (`arn:aws:iam::<account>:role/teams/ml/deployer`). "IAM user, group, role, and policy names
  must be unique within the account. Names are not distinguished by case." (IAM API, CreateRole
  RoleName, as shipped in botocore 1.44.5's iam service model), whatever their path; so two ARNs
  name the same principal when account, kind (role or user) and name, ignoring case, agree.
"""

from __future__ import annotations

import re
from typing import NamedTuple

IAM_PRINCIPAL = re.compile(
    r"^arn:aws[a-z-]*:iam::(?P<account>[0-9]{12}):(?P<kind>role|user)/(?:[^/]+/)*(?P<name>[^/]+)$"
)
ASSUMED_ROLE = re.compile(r"^arn:aws[a-z-]*:sts::(?P<account>[0-9]{12}):assumed-role/(?P<name>[^/]+)/[^/]+$")


class Principal(NamedTuple):
    account: str
    kind: str  # "role" or "user"
    name: str  # without the path, lower-cased (IAM names are case-insensitive)


def principal_of(arn: str) -> Principal | None:
    """The principal an IAM role/user ARN or an STS assumed-role session ARN stands for; None for
    anything else (the root user, a federated user)."""
    if match := IAM_PRINCIPAL.fullmatch(arn):
        return Principal(match["account"], match["kind"], match["name"].lower())
    if match := ASSUMED_ROLE.fullmatch(arn):
        return Principal(match["account"], "role", match["name"].lower())
    return None


def iam_arn(arn: str) -> str:
    """The IAM ARN of the principal behind `arn`: an assumed-role session becomes its role (the
    session ARN names the role without its path, so the result has none); anything else is kept.
    EKS keys access entries by the IAM principal: "You can't use the STS session principal type
    with access entries" (botocore 1.44.5's EKS model, CreateAccessEntryRequest.principalArn)."""
    if match := ASSUMED_ROLE.fullmatch(arn):
        partition = arn.split(":", 2)[1]
        return f"arn:{partition}:iam::{match['account']}:role/{match['name']}"
    return arn


def drop_creator(admin_arns: tuple[str, ...] | list[str], creator_arn: str) -> tuple[list[str], list[str]]:
    """(the admin ARNs without the cluster creator's, a warning for each one dropped). The creator
    has an access entry of its own, made by EKS when it created the cluster; an explicit one for
    the same principal is refused (409 ResourceInUseException)."""
    creator = principal_of(creator_arn)
    kept, warnings = [], []
    for arn in admin_arns:
        if creator is not None and principal_of(arn) == creator:
            warnings.append(
                f"config elastic-training:clusterAdminArns lists {arn}, the cluster's creator ({creator_arn}): "
                "EKS gave the creator an access entry of its own when it created the cluster (pulumi-eks sets "
                "bootstrapClusterCreatorAdminPermissions), so it is not added again"
            )
        else:
            kept.append(arn)
    return kept, warnings
