"""GPU stacks whose instance type has EFA only (infra/specs/efa.py): the EFA device plugin DaemonSet and
the node security group's rules that let EFA traffic flow between the nodes. A type without EFA gets
neither, and its NCCL traffic stays on TCP."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.components.k8s_object import KubernetesObject
from infra.components.naming import aws_tags, component_type
from infra.config import Settings
from infra.specs import efa

# "-1": every protocol and port (EC2 AuthorizeSecurityGroupIngress, IpProtocol: "Use -1 to specify all
# protocols"), what the EC2 guide's "All traffic" rule is.
ALL_TRAFFIC = "-1"


@dataclass
class EfaArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    gpu_nodes: pulumi.Resource  # the worker NodePool that launches the EFA nodes
    node_security_group_id: pulumi.Input[str]


class Efa(pulumi.ComponentResource):
    daemonset: KubernetesObject

    def __init__(self, name: str, args: EfaArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Efa"), name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # "An EFA requires a security group that allows all inbound and outbound traffic to and from the
        # security group itself" (EC2 User Guide, Get started with EFA, Step 1): the nodes' own group.
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-from-nodes",
            security_group_id=args.node_security_group_id,
            referenced_security_group_id=args.node_security_group_id,
            ip_protocol=ALL_TRAFFIC,
            description="EFA: all traffic from the node security group itself",
            tags=aws_tags(args.settings),
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-to-nodes",
            security_group_id=args.node_security_group_id,
            referenced_security_group_id=args.node_security_group_id,
            ip_protocol=ALL_TRAFFIC,
            description="EFA: all traffic to the node security group itself",
            tags=aws_tags(args.settings),
            opts=child,
        )
        self.daemonset = KubernetesObject(
            f"{name}-device-plugin",
            efa.device_plugin_daemonset(),
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.gpu_nodes]),
        )
        self.register_outputs({})
