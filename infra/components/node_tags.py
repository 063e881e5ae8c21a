"""Tags for what a managed node group launches: its instances, their volumes and network interfaces.

The node group's own `tags` stay on the node group: the EKS user guide says they "don't
propagate to other resources in the node group, such as Auto Scaling groups or instances"
(awsdocs/amazon-eks-user-guide latest/ug/nodes/create-managed-node-group.adoc @ 4d52b4d0, line
178). What does reach them is the launch template's TagSpecification ("Tagging Amazon EC2
instances", latest/ug/nodes/launch-templates.adoc, line 95), and a launch template may tag
exactly these resource types: "instance | volume | network-interface | spot-instances-request.
If the instance does not include the resource type that you specify, the instance launch fails"
(botocore 1.44.5's EC2 model, LaunchTemplateTagSpecificationRequest.ResourceType). Every node has
the template's EBS root volume and a primary network interface; the groups are On-Demand, so no
Spot request is tagged. The identity calling CreateNodegroup needs ec2:RunInstances and
ec2:CreateTags for the tags (same page).

A changed template is a new template version, and the node groups follow the latest version: the
first `pulumi up` with these tags rolls every node group once (docs/troubleshooting.md).
"""

from __future__ import annotations

import pulumi_aws as aws

TAGGED_AT_LAUNCH = ("instance", "volume", "network-interface")


def launch_tag_specifications(tags: dict[str, str]) -> list[aws.ec2.LaunchTemplateTagSpecificationArgs]:
    return [
        aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=dict(tags)) for kind in TAGGED_AT_LAUNCH
    ]
