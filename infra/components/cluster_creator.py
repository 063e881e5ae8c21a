"""Who created the stack's EKS cluster: fixed when the cluster is created, the same for every later
`pulumi up`, whoever runs it.

EKS gives the principal that creates a cluster an access entry of its own (pulumi-eks sets
bootstrapClusterCreatorAdminPermissions: infra/aws/principals.py), and refuses a second entry for
the same principal with 409 ResourceInUseException ("You can't specify the same ARN in more than one
access entry", botocore 1.44.5's EKS model). So the explicit entries are clusterAdminArns less the
creator, and "the creator" must not be whoever runs this `up`: with a person and a CI role taking
turns, each run would swap the entries, ask for the creator's (409) or delete the runner's own.

The creator is recorded on the cluster itself, as a tag written when it is created (the EKS
cluster's tags: pulumi-eks `clusterTags`), and read back from the cluster on every later run
(pulumi-aws data sources aws.eks.get_clusters / get_cluster, plain invokes at program time, like
STS GetCallerIdentity). The tag is passed again unchanged, so it never moves. A cluster created
before the tag existed has no record: the caller stands in, as before, with a warning saying how
to record the real creator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi_aws as aws

from infra.aws.principals import iam_arn, principal_of

CREATOR_TAG = "elastic-training/cluster-creator"


@dataclass(frozen=True)
class Creator:
    arn: str  # the creator's IAM ARN
    cluster_tags: dict[str, str] = field(default_factory=dict)  # to pass to the EKS cluster
    warnings: list[str] = field(default_factory=list)


def existing_cluster_tags(cluster_name: str) -> dict[str, str] | None:
    """The tags of the stack's EKS cluster, or None when the region has no cluster of that name."""
    if cluster_name not in (aws.eks.get_clusters().names or []):
        return None
    return dict(aws.eks.get_cluster(name=cluster_name).tags or {})


def cluster_creator(cluster_name: str, caller_arn: str, admin_arns: tuple[str, ...] | list[str] = ()) -> Creator:
    tags = existing_cluster_tags(cluster_name)
    if tags is None:  # this run creates the cluster: its caller is the creator, recorded on the cluster
        creator = iam_arn(caller_arn)
        return Creator(creator, {CREATOR_TAG: creator}, _caller_warnings(caller_arn, creator, admin_arns))
    if CREATOR_TAG in tags:
        creator = tags[CREATOR_TAG]
        return Creator(creator, {CREATOR_TAG: creator}, _caller_warnings(caller_arn, creator, admin_arns))
    return Creator(
        iam_arn(caller_arn),
        {},
        [
            f"EKS cluster {cluster_name} carries no {CREATOR_TAG} tag (it was created before the stack recorded its "
            f"creator), so the identity running this deployment ({caller_arn}) is taken as its creator; if another "
            "principal created it, tag the cluster with its ARN (`aws eks tag-resource --resource-arn <cluster ARN> "
            f"--tags {CREATOR_TAG}=<creator's IAM ARN>`) so that every deployer computes the same access entries"
        ],
    )


def _caller_warnings(caller_arn: str, creator_arn: str, admin_arns: tuple[str, ...] | list[str]) -> list[str]:
    """A deployer who is neither the creator nor in clusterAdminArns cannot reach the cluster."""
    caller = principal_of(caller_arn)
    if caller is None or caller == principal_of(creator_arn) or caller in {principal_of(arn) for arn in admin_arns}:
        return []
    return [
        f"the identity running this deployment ({caller_arn}) is neither the cluster's creator ({creator_arn}) "
        "nor in elastic-training:clusterAdminArns, so it has no access entry: the in-cluster steps will be refused; "
        "add its IAM ARN to clusterAdminArns"
    ]
