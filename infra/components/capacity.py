"""Worker capacity: Karpenter, and the one NodePool that brings worker nodes up only while a run needs them.

Created on every `eks` stack, after the on-demand system group exists (Karpenter runs there, never
on a node it launched). Why Karpenter and not managed node groups with cluster-autoscaler or EKS
Auto Mode: docs/design-notes.md, "Worker capacity". What each object is for: infra/specs/capacity.py.

- the workers' node role, its instance profile and its EKS access entry (type EC2_LINUX, which
  puts the nodes in system:nodes): a managed node group gets an entry from EKS itself, Karpenter's
  nodes do not, and the system group's role is not reused, so no two entries name one principal;
- the interruption path: an SQS queue (SQS-managed encryption, TLS only) fed by four EventBridge
  rules (Spot interruption warnings, rebalance recommendations, instance state changes, AWS Health
  scheduled changes), which the controller reads (infra/aws/karpenter_iam.py);
- the controller's IAM role (IRSA: only kube-system/karpenter may assume it) and its policy;
- the CRDs' own Helm release (`karpenter-crd`, the same version), ahead of the controller: Helm
  never upgrades a chart's crds/ directory, so the controller's release skips its copy and a
  version bump upgrades the NodePool/EC2NodeClass schemas here (infra/specs/karpenter_chart.py);
- the controller's Helm release (chart and controller image pinned in infra/versions.py, values in
  infra/specs/karpenter_chart.py);
- the EC2NodeClass and the NodePool, after both releases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra import versions
from infra.aws import iam, karpenter_iam
from infra.components.k8s_object import KubernetesObject
from infra.components.naming import aws_tags, component_type
from infra.config import Settings
from infra.specs import capacity as specs
from infra.specs import karpenter_chart

NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly")


@dataclass
class WorkerCapacityArgs:
    settings: Settings
    pool: specs.WorkerPool
    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    node_security_group_id: pulumi.Input[str]
    provider: pulumi.ProviderResource
    system_nodes: pulumi.Resource  # Karpenter's pods run there


class WorkerCapacity(pulumi.ComponentResource):
    queue: aws.sqs.Queue
    crd_release: k8s.helm.v3.Release
    release: k8s.helm.v3.Release
    node_class: KubernetesObject
    node_pool: KubernetesObject

    def __init__(self, name: str, args: WorkerCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("WorkerCapacity"), name, None, opts)
        settings = args.settings
        tags = aws_tags(settings)
        child = pulumi.ResourceOptions(parent=self)

        node_role = aws.iam.Role(
            f"{name}-node-role", assume_role_policy=iam.service_trust_policy("ec2.amazonaws.com"), tags=tags, opts=child
        )
        node_policies = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy}", role=node_role.name, policy_arn=f"{iam.AWS_MANAGED}/{policy}", opts=child
            )
            for policy in NODE_POLICIES
        ]
        profile = aws.iam.InstanceProfile(f"{name}-node-profile", role=node_role.name, tags=tags, opts=child)
        access = aws.eks.AccessEntry(
            f"{name}-node-access",
            cluster_name=args.cluster_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            tags=tags,
            opts=child,
        )

        self.queue = aws.sqs.Queue(
            f"{name}-interruptions",
            message_retention_seconds=karpenter_iam.QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            tags=tags,
            opts=child,
        )
        queue_policy = aws.sqs.QueuePolicy(
            f"{name}-interruptions-policy",
            queue_url=self.queue.url,
            policy=self.queue.arn.apply(karpenter_iam.queue_policy),
            opts=child,
        )
        rules = []
        for event in karpenter_iam.INTERRUPTION_EVENTS:
            rule = aws.cloudwatch.EventRule(
                f"{name}-{event}", event_pattern=karpenter_iam.event_pattern(event), tags=tags, opts=child
            )
            rules.append(
                aws.cloudwatch.EventTarget(
                    f"{name}-{event}-to-queue",
                    rule=rule.name,
                    arn=self.queue.arn,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[queue_policy]),
                )
            )

        controller_role = aws.iam.Role(
            f"{name}-controller-role",
            assume_role_policy=iam.irsa_trust_policy_output(
                args.oidc_provider_arn, args.oidc_issuer, karpenter_chart.NAMESPACE, karpenter_chart.SERVICE_ACCOUNT
            ),
            tags=tags,
            opts=child,
        )
        identity = aws.get_caller_identity_output()
        partition = aws.get_partition_output()
        policy = pulumi.Output.all(
            partition.partition, identity.account_id, args.cluster_name, node_role.arn, self.queue.arn
        ).apply(lambda a: karpenter_iam.controller_policy(a[0], settings.region, a[1], a[2], a[3], a[4]))
        controller_policy = aws.iam.RolePolicy(
            f"{name}-controller-policy", role=controller_role.id, policy=policy, opts=child
        )

        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.crd_release = k8s.helm.v3.Release(
            f"{name}-karpenter-crd",
            name=karpenter_chart.CRD_RELEASE_NAME,
            chart=versions.KARPENTER_CRD_CHART,
            version=versions.KARPENTER_VERSION,
            namespace=karpenter_chart.NAMESPACE,
            opts=k8s_opts,
        )
        self.release = k8s.helm.v3.Release(
            f"{name}-karpenter",
            name=karpenter_chart.RELEASE_NAME,
            chart=versions.KARPENTER_CHART,
            version=versions.KARPENTER_VERSION,
            namespace=karpenter_chart.NAMESPACE,
            skip_crds=True,  # the CRDs are the karpenter-crd release's
            values=karpenter_chart.values(
                args.cluster_name, self.queue.name, controller_role.arn, settings.system_node_count
            ),
            opts=pulumi.ResourceOptions.merge(
                k8s_opts,
                pulumi.ResourceOptions(
                    depends_on=[self.crd_release, args.system_nodes, controller_policy, access, *rules, *node_policies]
                ),
            ),
        )

        self.node_class = KubernetesObject(
            f"{name}-node-class",
            specs.node_class(args.pool, profile.name, args.private_subnet_ids, args.node_security_group_id, tags),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.release])),
        )
        self.node_pool = KubernetesObject(
            f"{name}-node-pool",
            specs.node_pool(args.pool),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.node_class])),
        )
        self.register_outputs({"interruptionQueue": self.queue.name, "nodePool": specs.WORKER_POOL})
