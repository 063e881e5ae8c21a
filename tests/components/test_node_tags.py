"""The stack's tags reach what the node groups launch (issue 21 item 9, upstream-facts-2.md fact 14).

Sources: the EKS user guide (awsdocs/amazon-eks-user-guide @ 4d52b4d0): node group tags "don't
propagate to other resources in the node group, such as Auto Scaling groups or instances"
(latest/ug/nodes/create-managed-node-group.adoc line 178); a launch template's TagSpecification
tags the instances (latest/ug/nodes/launch-templates.adoc line 95). botocore 1.44.5's EC2 model
says which resource types a launch template may tag and that a type the instance lacks fails the
launch (LaunchTemplateTagSpecificationRequest.ResourceType); the request is checked here with
botocore's own validator, as boto3 would check it before sending CreateLaunchTemplate.
"""

from __future__ import annotations

import re

import botocore.session
from botocore.validate import ParamValidator

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2 = botocore.session.get_session().get_service_model("ec2")


def allowed_at_launch() -> set[str]:
    """The resource types the model's documentation lists for launch templates."""
    documentation = EC2.shape_for("LaunchTemplateTagSpecificationRequest").members["ResourceType"].documentation
    listed = documentation.split("following resource types only:")[1].split(".")[0]
    return set(re.findall(r"<code>([a-z-]+)</code>", listed))


def test_instances_volumes_and_interfaces_carry_the_stack_tags(dev):
    template = dev.one(LAUNCH_TEMPLATE)["inputs"]
    specs = {spec["resourceType"]: spec["tags"] for spec in template["tagSpecifications"]}
    assert set(specs) == {"instance", "volume", "network-interface"}
    for tags in specs.values():
        # the same tags the template itself (and every other AWS resource of the stack) carries
        assert tags == template["tags"]
        assert {"project": "elastic-training", "stack": "dev"}.items() <= tags.items()
    # "If the instance does not include the resource type that you specify, the instance launch
    # fails": every node boots from the template's EBS root volume.
    assert template["blockDeviceMappings"][0]["ebs"]["volumeSize"] > 0


def test_the_tag_specifications_are_a_valid_create_launch_template_request(dev):
    template = dev.one(LAUNCH_TEMPLATE)["inputs"]
    assert {spec["resourceType"] for spec in template["tagSpecifications"]} <= allowed_at_launch()
    request = {
        "LaunchTemplateName": "nodes",
        "LaunchTemplateData": {
            "TagSpecifications": [
                {
                    "ResourceType": spec["resourceType"],
                    "Tags": [{"Key": k, "Value": v} for k, v in spec["tags"].items()],
                }
                for spec in template["tagSpecifications"]
            ]
        },
    }
    report = ParamValidator().validate(request, EC2.operation_model("CreateLaunchTemplate").input_shape)
    assert not report.has_errors(), report.generate_report()
    enum = EC2.shape_for("ResourceType").enum
    assert all(spec["resourceType"] in enum for spec in template["tagSpecifications"])
