"""EKS access entries as the EKS API keeps them: a model for the tests of who can reach the cluster.

Sources:
- botocore 1.44.5's EKS model (botocore/data/eks/2017-11-01/service-2.json):
  CreateAccessEntryRequest.principalArn: "You can't specify the same ARN in more than one access
  entry. This value can't be changed after access entry creation." and "You can't use the STS
  session principal type with access entries"; CreateAccessEntry's errors include
  ResourceInUseException, whose httpStatusCode is 409; CreateAccessConfigRequest
  .bootstrapClusterCreatorAdminPermissions: "Specifies whether or not the cluster creator IAM
  principal was set as a cluster admin access entry during cluster creation time."
- pulumi-eks (nodejs/eks/cluster/cluster.ts @ 7bf0c1b179932ce51cb02dfc4f9bd0d7550cb0cd, lines
  733-740) creates every cluster with bootstrapClusterCreatorAdminPermissions: true, so the
  principal that creates the cluster gets an entry of its own; cluster/authenticationMode.ts
  createAccessEntries makes one aws.eks.AccessEntry per key of `accessEntries`, named
  `<component>-<key>`.
- what users meet when an explicit entry names the creator: "ResourceInUseException: The specified
  access entry resource is already in use on this cluster." (409; pulumi/pulumi-eks#2373,
  terraform-aws-modules/terraform-aws-eks#2968).
- the engine replaces an entry whose principalArn changes (the API cannot change it) by creating
  the new one first and deleting the old one after (Pulumi's default order without
  deleteBeforeReplace), so moving a principal from one key to another creates a second entry for
  a principal that still has one.
- IAM: "names are not distinguished by case" and unique per account whatever their path; STS
  names the role (without path) in an assumed-role session ARN (infra principals module cites both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import botocore.session
from botocore.exceptions import ClientError

_ROLE_OR_USER = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}):(role|user)/(?:[^/]+/)*([^/]+)$")
_SESSION = re.compile(r"^arn:aws[a-z-]*:sts::(\d{12}):assumed-role/([^/]+)/[^/]+$")


def identity(arn: str) -> tuple[str, str, str]:
    """The IAM principal an ARN names: (account, role|user, name lower-cased)."""
    if match := _ROLE_OR_USER.fullmatch(arn):
        return match[1], match[2], match[3].lower()
    if match := _SESSION.fullmatch(arn):
        return match[1], "role", match[2].lower()
    raise ValueError(f"not an IAM role, user or assumed-role session ARN: {arn}")


def _in_use(cluster: str) -> ClientError:
    """The error the EKS client raises, shaped by botocore's own model of it."""
    shape = botocore.session.get_session().get_service_model("eks").shape_for("ResourceInUseException")
    status = shape.metadata["error"]["httpStatusCode"]
    return ClientError(
        {
            "Error": {
                "Code": "ResourceInUseException",
                "Message": "The specified access entry resource is already in use on this cluster.",
            },
            "ResponseMetadata": {"HTTPStatusCode": status},
            "clusterName": cluster,
        },
        "CreateAccessEntry",
    )


@dataclass
class Cluster:
    name: str
    creator: tuple[str, str, str]
    tags: dict[str, str]
    # principal identity -> the stack's key for it ("" for the creator's bootstrap entry)
    entries: dict[tuple[str, str, str], str] = field(default_factory=dict)


class FakeEks:
    """One region's clusters and their access entries."""

    def __init__(self) -> None:
        self.clusters: dict[str, Cluster] = {}
        self.log: list[str] = []

    def create_cluster(self, name: str, caller_arn: str, tags: dict[str, str]) -> None:
        creator = identity(caller_arn)
        self.clusters[name] = Cluster(name, creator, dict(tags), {creator: ""})
        self.log.append(f"create cluster {name} as {creator}")

    def create_access_entry(self, cluster: str, key: str, principal_arn: str) -> None:
        principal = identity(principal_arn)
        if principal in self.clusters[cluster].entries:
            self.log.append(f"409 create entry {key} for {principal}")
            raise _in_use(cluster)
        self.clusters[cluster].entries[principal] = key
        self.log.append(f"create entry {key} for {principal}")

    def delete_access_entry(self, cluster: str, principal_arn: str) -> None:
        principal = identity(principal_arn)
        self.clusters[cluster].entries.pop(principal, None)
        self.log.append(f"delete entry for {principal}")

    def can_reach(self, cluster: str, arn: str) -> bool:
        return identity(arn) in self.clusters[cluster].entries


def apply_entries(eks: FakeEks, cluster: str, old: dict[str, str], new: dict[str, str]) -> None:
    """What `pulumi up` does to the access entries when the program's `accessEntries` (key ->
    principal ARN) go from `old` to `new`: creates (and create-before-delete replacements) first,
    deletes last, as the engine orders them. Raises the 409 ClientError where EKS would."""
    for key, arn in new.items():
        if key not in old:
            eks.create_access_entry(cluster, key, arn)
        elif identity(old[key]) != identity(arn):
            eks.create_access_entry(cluster, key, arn)
    for key, arn in old.items():
        if key not in new or identity(new[key]) != identity(arn):
            eks.delete_access_entry(cluster, arn)
