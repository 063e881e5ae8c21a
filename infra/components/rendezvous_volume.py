"""RendezvousVolume (target eks): what gives etcd, the rendezvous store, a disk that outlives its
pod: the EBS CSI driver as the EKS add-on, with an IRSA role limited to its controller's service
account, and the gp3 StorageClass etcd's claim names (infra/specs/rendezvous_store.py).

Why EBS and not the EFS file system the stack already has: docs/design-notes.md, "Rendezvous store".
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra import versions
from infra.aws import iam
from infra.components.addons import addon_version
from infra.components.k8s_object import KubernetesObject
from infra.components.naming import aws_tags, component_type
from infra.config import Settings
from infra.specs import rendezvous_store as specs

# The add-on's controller runs as this service account in kube-system; only it calls the EC2 API
# (the node plugin mounts what the controller attached). EKS user guide, "Create an IAM role for
# the Amazon EBS CSI driver": the trust condition names kube-system:ebs-csi-controller-sa.
CONTROLLER_SERVICE_ACCOUNT = "ebs-csi-controller-sa"


@dataclass
class RendezvousVolumeArgs:
    settings: Settings
    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    provider: pulumi.ProviderResource
    nodes: pulumi.Resource  # the add-on's pods need nodes to become active


class RendezvousVolume(pulumi.ComponentResource):
    storage_class: KubernetesObject  # ready once the driver that serves it is
    storage_class_name: str

    def __init__(self, name: str, args: RendezvousVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("RendezvousVolume"), name, None, opts)
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-ebs-csi-role",
            assume_role_policy=iam.irsa_trust_policy_output(args.oidc_provider_arn, args.oidc_issuer, "kube-system",
                                                            CONTROLLER_SERVICE_ACCOUNT),
            tags=aws_tags(settings), opts=child)
        policy = aws.iam.RolePolicyAttachment(f"{name}-ebs-csi-policy", role=role.name,
                                              policy_arn=f"{iam.AWS_MANAGED}/service-role/AmazonEBSCSIDriverPolicy",
                                              opts=child)
        driver = aws.eks.Addon(
            f"{name}-ebs-csi-driver", cluster_name=args.cluster_name, addon_name=versions.EBS_CSI_ADDON,
            addon_version=addon_version(versions.EBS_CSI_ADDON, settings.kubernetes_version),
            service_account_role_arn=role.arn,
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
            tags=aws_tags(settings),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, args.nodes]))
        self.storage_class_name = specs.EBS_STORAGE_CLASS
        self.storage_class = KubernetesObject(
            f"{name}-sc", specs.ebs_storage_class(),
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[driver]))
        self.register_outputs({"storageClassName": self.storage_class_name})
