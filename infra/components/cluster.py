"""Cluster: EKS control plane (pulumi-eks), the on-demand system node group in the private subnets,
and the Kubernetes provider every in-cluster object is created with. (Worker nodes come from
Karpenter, only while a run needs them: infra/components/capacity.py.)

Choices, each for a reason:
- authentication mode API with access entries (the aws-auth ConfigMap is deprecated); the
  cluster's creator has cluster-admin from EKS, `clusterAdminArns` adds more, less the creator's
  own ARN (dropped with a warning: infra/aws/principals.py). The creator is the one who created
  the cluster, recorded on it, not whoever runs this `up` (infra/components/cluster_creator.py).
- the control-plane log group `/aws/eks/<cluster>/cluster` is the stack's own, with a retention
  (`logRetentionDays`), created before the cluster so that EKS writes into it instead of creating
  one with no retention that outlives `pulumi destroy` (upstream-facts.md fact 14; as
  terraform-aws-modules/terraform-aws-eks main.tf @ bef29c4d does: `aws_cloudwatch_log_group.this`
  named "/aws/eks/${var.name}/cluster", in the cluster's depends_on). Its name needs the cluster's
  name before the cluster exists, so the cluster is named explicitly (infra/components/naming.py).
- no default node group and no pulumi-eks default security groups: managed nodes use the
  security group EKS creates, which pulumi-eks then reports as `node_security_group_id`
  (the EFS mount targets admit NFS from exactly that group).
- Kubernetes secrets envelope-encrypted with a customer-managed KMS key (rotation on).
- the API endpoint: private access on, public access only from `apiAllowedCidrs`.
- the VPC CNI's network policy agent on, so the stack's NetworkPolicies are enforced.
- the nodes boot from our launch template: kubelet `seccompDefault` (infra/specs/node_config.py),
  IMDSv2 only with a hop limit of 1, an encrypted gp3 root volume of `nodeDiskGiB`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from infra import versions
from infra.aws import iam
from infra.config import Settings
from infra.components import node_tags
from infra.components.naming import aws_tags, component_type, eks_cluster_name
from infra.aws.principals import drop_creator
from infra.components.cluster_creator import cluster_creator
from infra.specs import gpu, node_config

CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly")
# The AL2023 EKS AMI's root volume (awslabs/amazon-eks-ami templates/al2023/template.json).
NODE_ROOT_DEVICE = "/dev/xvda"
NODE_IMDS_HOP_LIMIT = 1


@dataclass
class ClusterArgs:
    settings: Settings
    vpc_id: pulumi.Input[str]
    public_subnet_ids: Sequence[pulumi.Input[str]]
    private_subnet_ids: Sequence[pulumi.Input[str]]


class Cluster(pulumi.ComponentResource):
    eks_cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    node_security_group_id: pulumi.Output[str]
    system_nodes: eks.ManagedNodeGroup  # the on-demand system group; workers come from Karpenter
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Cluster"), name, None, opts)
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)

        secrets_key = aws.kms.Key(
            f"{name}-secrets-key",
            description=f"{settings.project}/{settings.stack}: EKS secrets encryption",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            tags=aws_tags(settings),
            opts=child,
        )

        service_role = aws.iam.Role(
            f"{name}-service-role",
            assume_role_policy=iam.service_trust_policy("eks.amazonaws.com"),
            tags=aws_tags(settings),
            opts=child,
        )
        service_policy = aws.iam.RolePolicyAttachment(
            f"{name}-service-eks-policy",
            role=service_role.name,
            policy_arn=f"{iam.AWS_MANAGED}/AmazonEKSClusterPolicy",
            opts=child,
        )
        service_kms = aws.iam.RolePolicy(
            f"{name}-service-kms", role=service_role.id, policy=secrets_key.arn.apply(iam.kms_use_policy), opts=child
        )

        node_role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=iam.service_trust_policy("ec2.amazonaws.com"),
            tags=aws_tags(settings),
            opts=child,
        )
        node_policies = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy}", role=node_role.name, policy_arn=f"{iam.AWS_MANAGED}/{policy}", opts=child
            )
            for policy in NODE_POLICIES
        ]

        # The cluster's creator, fixed when it is created and read back from the cluster after that
        # (cluster_creator.py): the same access entries whoever runs `pulumi up`.
        cluster_name = eks_cluster_name(settings)
        creator = cluster_creator(cluster_name, aws.get_caller_identity().arn, settings.cluster_admin_arns)
        admin_arns, warnings = drop_creator(settings.cluster_admin_arns, creator.arn)
        for warning in [*creator.warnings, *warnings]:
            pulumi.log.warn(warning)
        admins = {
            f"admin-{index}": eks.AccessEntryArgs(
                principal_arn=arn,
                access_policies={
                    "cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=CLUSTER_ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    )
                },
            )
            for index, arn in enumerate(admin_arns)
        }

        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=f"/aws/eks/{cluster_name}/cluster",
            retention_in_days=settings.log_retention_days,
            tags=aws_tags(settings),
            opts=child,
        )

        cluster = eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            vpc_id=args.vpc_id,
            public_subnet_ids=args.public_subnet_ids,
            private_subnet_ids=args.private_subnet_ids,
            node_associate_public_ip_address=False,
            version=settings.kubernetes_version,
            service_role=service_role,
            create_oidc_provider=True,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=admins or None,
            skip_default_node_group=True,
            skip_default_security_groups=True,
            endpoint_private_access=True,
            endpoint_public_access=True,
            public_access_cidrs=list(settings.api_allowed_cidrs),
            encryption_config_key_arn=secrets_key.arn,
            enabled_cluster_log_types=CONTROL_PLANE_LOG_TYPES,
            # The VPC CNI as an EKS add-on with its network policy agent on: without the agent the
            # NetworkPolicies in infra/specs/network_policies.py are accepted by the API and enforced by nothing.
            use_default_vpc_cni=False,
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            # kube-proxy as the EKS add-on at the newest version EKS publishes for the cluster's
            # Kubernetes version (pulumi-eks cluster.ts @ 0f5a5447 lines 764-797; its default, made
            # explicit so that a Kubernetes version bump always upgrades it). CoreDNS needs nodes:
            # infra/components/addons.py creates it once they exist.
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=True),
            tags=aws_tags(settings),
            cluster_tags=creator.cluster_tags or None,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[service_policy, service_kms, log_group]),
        )

        node_template = aws.ec2.LaunchTemplate(
            f"{name}-node-template",
            description=f"{settings.project}/{settings.stack}: managed nodes (seccompDefault kubelet, IMDSv2 only, hop limit 1)",
            # No image_id: EKS then picks the AMI from ami_type and merges its own NodeConfig into ours.
            user_data=node_config.launch_template_user_data(),
            # EKS refuses diskSize on a node group that has a launch template: the root volume is here.
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=NODE_ROOT_DEVICE,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=settings.node_disk_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            # IMDSv2 only; a hop limit of 1 keeps the token response from crossing into a pod's
            # network namespace, so only host-network processes (kubelet, nodeadm, the VPC CNI, the
            # EFS CSI node plugin) reach the node role's credentials. Why nothing else needs IMDS:
            # docs/security.md.
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=NODE_IMDS_HOP_LIMIT
            ),
            # The instances, volumes and network interfaces carry the stack's tags (node_tags.py).
            tag_specifications=node_tags.launch_tag_specifications(aws_tags(settings)),
            tags=aws_tags(settings),
            opts=child,
        )

        def node_group(
            group_name: str,
            instance_type: str,
            ami_type: str,
            scaling: aws.eks.NodeGroupScalingConfigArgs,
            labels: dict[str, str],
        ) -> eks.ManagedNodeGroup:
            # Every group boots from the same launch template (seccompDefault, IMDSv2 hop limit 1): it
            # names no AMI, so EKS picks each group's from its ami_type and merges its NodeConfig in.
            return eks.ManagedNodeGroup(
                group_name,
                cluster=cluster,
                node_role_arn=node_role.arn,
                subnet_ids=args.private_subnet_ids,
                instance_types=[instance_type],
                ami_type=ami_type,
                # pulumi-eks defaults the node version to the cluster's only without a launch template.
                version=settings.kubernetes_version,
                launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                    id=node_template.id, version=node_template.latest_version.apply(str)
                ),
                scaling_config=scaling,
                # the rendezvous store's disruption budget (infra/specs/rendezvous_store.py) holds a drain; an update
                # that could not drain fails after 15 minutes unless forced (EKS user guide,
                # "Understand each phase of node updates"); forced, it moves the store last.
                force_update_version=True,
                capacity_type="ON_DEMAND",
                labels=labels,
                tags=aws_tags(settings),
                opts=pulumi.ResourceOptions(parent=self, depends_on=node_policies),
            )

        # One small on-demand group on every stack, for everything that makes the job correct (CoreDNS,
        # metrics-server, Karpenter, the controller, the rendezvous store, the CSI controller, the Jobs): a Spot
        # preemption can only take worker nodes, which Karpenter launches (infra/components/capacity.py).
        count = settings.system_node_count
        self.system_nodes = node_group(
            f"{name}-system-nodes",
            settings.system_node_instance_type,
            versions.NODE_AMI_TYPE,
            aws.eks.NodeGroupScalingConfigArgs(desired_size=count, min_size=count, max_size=count),
            gpu.system_node_labels(),
        )

        # No deleteUnreachable: with it, any failure to reach the API (expired credentials, a blocked
        # CIDR) makes `refresh` drop every in-cluster object from the state (pulumi-kubernetes
        # provider.go Read). Left unset, not false, so `PULUMI_K8S_DELETE_UNREACHABLE=true pulumi
        # destroy` still works for a cluster that is already gone (a set flag overrides the variable;
        # docs/troubleshooting.md).
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=cluster.kubeconfig_json, opts=child)

        self.eks_cluster_name = cluster.eks_cluster.name
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        self.node_security_group_id = cluster.node_security_group_id
        self.register_outputs(
            {
                "clusterName": self.eks_cluster_name,
                "oidcProviderArn": self.oidc_provider_arn,
                "nodeSecurityGroupId": self.node_security_group_id,
            }
        )
