"""Storage: an encrypted EFS file system shared by every pod, through the EFS CSI driver.

NFS (TCP 2049) is admitted only from the nodes' security group; there is one mount target per
private subnet, so a pod in any zone mounts from its own zone. Pods enter through an access
point that makes every request uid/gid 1000 (the owner of its root directory) whatever uid the
pod runs as, and the file system policy refuses any client that does not use TLS. The driver is the EKS add-on, with an IRSA role limited to its own
service accounts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra import versions
from infra.aws import iam
from infra.components.addons import addon_version
from infra.config import Settings
from infra.components.k8s_object import KubernetesObject
from infra.components.naming import aws_tags, component_type
from infra.specs import storage as specs
from infra.specs.security import EFS_GID, EFS_UID

EFS_ROOT_DIRECTORY = "/elastic-training"


def tls_only_file_system_policy(file_system_arn: str) -> str:
    """Mounts through a mount target are allowed (no root access); anything without TLS is denied."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "MountThroughMountTargets",
                    "Effect": "Allow",
                    "Principal": {"AWS": "*"},
                    "Action": ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                    "Resource": file_system_arn,
                    "Condition": {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
                },
                {
                    "Sid": "DenyWithoutTls",
                    "Effect": "Deny",
                    "Principal": {"AWS": "*"},
                    "Action": "*",
                    "Resource": file_system_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
            ],
        }
    )


@dataclass
class StorageArgs:
    settings: Settings
    vpc_id: pulumi.Input[str]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    node_security_group_id: pulumi.Input[str]
    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    provider: pulumi.ProviderResource
    namespace: pulumi.Resource  # the workloads' namespace, where the claim lives
    nodes: pulumi.Resource  # the add-on's pods need nodes to become active


class Storage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    claim: KubernetesObject
    csi_driver: aws.eks.Addon

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Storage"), name, None, opts)
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)
        # retainData: `pulumi destroy` leaves the file system (and its data) in the account.
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=settings.retain_data)

        nfs_group = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            vpc_id=args.vpc_id,
            description="NFS to the EFS mount targets from the EKS nodes only",
            tags=aws_tags(settings, Name=f"{name}-nfs"),
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-nfs-from-nodes",
            security_group_id=nfs_group.id,
            referenced_security_group_id=args.node_security_group_id,
            ip_protocol="tcp",
            from_port=2049,
            to_port=2049,
            description="NFS from the EKS node security group",
            tags=aws_tags(settings),
            opts=child,
        )

        file_system = aws.efs.FileSystem(
            f"{name}-efs",
            encrypted=True,
            performance_mode="generalPurpose",
            throughput_mode="elastic",
            tags=aws_tags(settings, Name=f"{name}-efs"),
            opts=keep,
        )
        aws.efs.FileSystemPolicy(
            f"{name}-efs-policy",
            file_system_id=file_system.id,
            policy=file_system.arn.apply(tls_only_file_system_policy),
            opts=child,
        )
        mount_targets = [
            aws.efs.MountTarget(
                f"{name}-mt-{index}",
                file_system_id=file_system.id,
                subnet_id=subnet_id,
                security_groups=[nfs_group.id],
                opts=child,
            )
            for index, subnet_id in enumerate(args.private_subnet_ids)
        ]
        access_point = aws.efs.AccessPoint(
            f"{name}-ap",
            file_system_id=file_system.id,
            posix_user=aws.efs.AccessPointPosixUserArgs(uid=EFS_UID, gid=EFS_GID),
            root_directory=aws.efs.AccessPointRootDirectoryArgs(
                path=EFS_ROOT_DIRECTORY,
                creation_info=aws.efs.AccessPointRootDirectoryCreationInfoArgs(
                    owner_uid=EFS_UID, owner_gid=EFS_GID, permissions="0750"
                ),
            ),
            tags=aws_tags(settings, Name=f"{name}-ap"),
            opts=keep,
        )

        driver_role = aws.iam.Role(
            f"{name}-efs-csi-role",
            assume_role_policy=iam.irsa_trust_policy_output(
                args.oidc_provider_arn, args.oidc_issuer, "kube-system", "efs-csi-*"
            ),
            tags=aws_tags(settings),
            opts=child,
        )
        driver_policy = aws.iam.RolePolicyAttachment(
            f"{name}-efs-csi-policy",
            role=driver_role.name,
            policy_arn=f"{iam.AWS_MANAGED}/service-role/AmazonEFSCSIDriverPolicy",
            opts=child,
        )
        self.csi_driver = aws.eks.Addon(
            f"{name}-efs-csi-driver",
            cluster_name=args.cluster_name,
            addon_name=versions.EFS_CSI_ADDON,
            addon_version=addon_version(versions.EFS_CSI_ADDON, settings.kubernetes_version),
            service_account_role_arn=driver_role.arn,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=aws_tags(settings),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[driver_policy, args.nodes]),
        )

        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)
        storage_class = KubernetesObject(f"{name}-sc", specs.storage_class(settings.storage_class_name), in_cluster)
        volume = KubernetesObject(
            f"{name}-pv",
            specs.persistent_volume(
                settings.persistent_volume_name,
                settings.storage_class_name,
                pulumi.Output.concat(file_system.id, "::", access_point.id),
            ),
            pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[storage_class, self.csi_driver, *mount_targets]
            ),
        )
        self.claim = KubernetesObject(
            f"{name}-pvc",
            specs.persistent_volume_claim(
                settings.pvc_name, settings.namespace, settings.storage_class_name, settings.persistent_volume_name
            ),
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[volume, args.namespace]),
        )

        self.file_system_id = file_system.id
        self.register_outputs({"fileSystemId": self.file_system_id, "pvcName": settings.pvc_name})
