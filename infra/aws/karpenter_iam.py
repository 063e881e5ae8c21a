"""What Karpenter may do in AWS, and what may write to its interruption queue: IAM and SQS documents.

Written for this stack from the statements Karpenter's own CloudFormation template grants its
controller (aws/karpenter-provider-aws @ 1d927085, website/content/en/v1.14/getting-started/
getting-started-with-karpenter/cloudformation.yaml: NodeLifecyclePolicy, IAMIntegrationPolicy,
EKSIntegrationPolicy, InterruptionPolicy, ResourceDiscoveryPolicy, KarpenterInterruptionQueuePolicy),
narrowed to what this stack uses:
- no capacity reservations and no placement groups, so no launch permission on them;
- the stack creates the nodes' instance profile itself (EC2NodeClass `instanceProfile`), so the
  controller gets no iam:CreateInstanceProfile/AddRoleToInstanceProfile/DeleteInstanceProfile,
  only PassRole on the one node role (and the list its garbage collector reads);
- no zonal shift, so no arc-zonal-shift read.
Launches, tags and terminations stay scoped by the tags Karpenter puts on what it creates
(`kubernetes.io/cluster/<cluster>: owned`, `karpenter.sh/nodepool`, `eks:eks-cluster-name`), so the
controller can only touch instances and launch templates of its own cluster.
"""

from __future__ import annotations

import json
from typing import Any

# The EventBridge events Karpenter acts on (same template: ScheduledChangeRule, SpotInterruptionRule,
# RebalanceRule, InstanceStateChangeRule; its parsers are pkg/controllers/interruption/messages/
# {scheduledchange,spotinterruption,rebalancerecommendation,statechange} at v1.14.1). The capacity
# reservation rule is left out: this stack launches into no reservation.
INTERRUPTION_EVENTS: dict[str, dict[str, list[str]]] = {
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
}
# The template's queue keeps a message 300 s: an interruption older than that is moot (the Spot
# notice is 2 minutes).
QUEUE_RETENTION_SECONDS = 300

LAUNCH = ["ec2:RunInstances", "ec2:CreateFleet"]
CREATED_BY_LAUNCH = ["fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"]
DISCOVERY = [
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
]


def _owned(cluster: str, tag_context: str) -> dict[str, Any]:
    return {
        "StringEquals": {f"aws:{tag_context}/kubernetes.io/cluster/{cluster}": "owned"},
        "StringLike": {f"aws:{tag_context}/karpenter.sh/nodepool": "*"},
    }


def controller_policy(
    partition: str, region: str, account: str, cluster: str, node_role_arn: str, queue_arn: str
) -> str:
    ec2 = f"arn:{partition}:ec2:{region}"
    created = [f"{ec2}:*:{kind}/*" for kind in CREATED_BY_LAUNCH]
    request_tags = {
        "StringEquals": {
            f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
            "aws:RequestTag/eks:eks-cluster-name": cluster,
        },
        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
    }
    statements = [
        {
            "Sid": "LaunchFromTheStacksNetwork",
            "Effect": "Allow",
            "Action": LAUNCH,
            "Resource": [f"{ec2}::image/*", f"{ec2}::snapshot/*", f"{ec2}:*:security-group/*", f"{ec2}:*:subnet/*"],
        },
        {
            "Sid": "LaunchFromOwnLaunchTemplates",
            "Effect": "Allow",
            "Action": LAUNCH,
            "Resource": f"{ec2}:*:launch-template/*",
            "Condition": _owned(cluster, "ResourceTag"),
        },
        {
            "Sid": "CreateOnlyTagged",
            "Effect": "Allow",
            "Action": [*LAUNCH, "ec2:CreateLaunchTemplate"],
            "Resource": created,
            "Condition": request_tags,
        },
        {
            "Sid": "TagAtCreation",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": created,
            "Condition": {
                "StringEquals": {
                    **request_tags["StringEquals"],
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": request_tags["StringLike"],
            },
        },
        {
            "Sid": "NameOwnInstances",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{ec2}:*:instance/*",
            "Condition": {
                **_owned(cluster, "ResourceTag"),
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "TerminateOwnInstances",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Condition": _owned(cluster, "ResourceTag"),
        },
        {
            "Sid": "PassTheNodeRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": node_role_arn,
            "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        },
        # Its instance-profile garbage collector lists profiles on every pass (pkg/providers/instanceprofile/
        # instanceprofile.go ListProfiles) and only ever deletes ones under its own path, which ours is not.
        {
            "Sid": "ListProfilesForGarbageCollection",
            "Effect": "Allow",
            "Action": "iam:ListInstanceProfiles",
            "Resource": "*",
        },
        {
            "Sid": "FindTheClusterEndpoint",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": f"arn:{partition}:eks:{region}:{account}:cluster/{cluster}",
        },
        {
            "Sid": "ReadInterruptions",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": queue_arn,
        },
        {
            "Sid": "DiscoverInTheRegion",
            "Effect": "Allow",
            "Action": DISCOVERY,
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "ReadEksAmiParameters",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
        },
        {"Sid": "ReadPrices", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def queue_policy(queue_arn: str) -> str:
    """EventBridge (and SQS itself) may send to the queue; nothing may use it without TLS."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "EventBridgeSends",
                    "Effect": "Allow",
                    "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                },
                {
                    "Sid": "DenyWithoutTls",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "sqs:*",
                    "Resource": queue_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
            ],
        }
    )


def event_pattern(event: str) -> str:
    return json.dumps(INTERRUPTION_EVENTS[event])
