"""The managed nodes' launch template, read from what the program registered (resources.json).

What it must satisfy, from its sources:
- awslabs/amazon-eks-ami @ 81fec2e895854f599974fe4d3d72f61c0a9aaffa, nodeadm/: user data is parsed
  as a MIME document whose media type starts with "multipart/" (internal/configprovider/mime.go,
  getMultipartReader); every part of type "application/node.eks.aws" (userdata.go,
  nodeConfigMediaType) is decoded as a NodeConfig of node.eks.aws/v1alpha1
  (api/v1alpha1/nodeconfig_types.go: spec.kubelet.config, a KubeletConfiguration fragment);
  KubeletConfiguration.seccompDefault defaults to false (vendored k8s.io/kubelet v0.36.2,
  config/v1beta1/types.go) and nodeadm's own defaults do not set it (internal/kubelet/config.go).
- EKS user guide, "Customize managed nodes with launch templates"
  (awsdocs/amazon-eks-user-guide latest/ug/nodes/launch-templates.adoc; docs.aws.amazon.com/eks/latest/userguide/launch-templates.html):
  user data must be MIME multi-part (EKS merges its own into it), and is merged only when the
  template names no AMI; "Disk size" is prohibited in the node group and must be in the template.
- the root volume of the AL2023 EKS AMI is /dev/xvda (amazon-eks-ami templates/al2023/template.json).
"""

from __future__ import annotations

import base64
import email

import yaml

from infra import versions

NODE_CONFIG_MEDIA_TYPE = "application/node.eks.aws"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "eks:index:ManagedNodeGroup"


def node_configs(user_data_b64: str) -> list[dict]:
    """The NodeConfig objects nodeadm would find in this user data."""
    message = email.message_from_bytes(base64.b64decode(user_data_b64, validate=True))
    assert message.get_content_type().startswith("multipart/"), message.get_content_type()
    parts = [part for part in message.walk() if part.get_content_type() == NODE_CONFIG_MEDIA_TYPE]
    return [yaml.safe_load(part.get_payload(decode=True)) for part in parts]


def test_user_data_is_mime_multipart_with_a_nodeconfig_that_sets_seccomp_default(dev):
    template = dev.one(LAUNCH_TEMPLATE)["inputs"]
    (config,) = node_configs(template["userData"])
    assert config["apiVersion"] == "node.eks.aws/v1alpha1" and config["kind"] == "NodeConfig"
    assert config["spec"]["kubelet"]["config"]["seccompDefault"] is True
    # The cluster's coordinates come from the part EKS merges in: ours must not pin (stale) ones.
    assert "cluster" not in config["spec"]
    # EKS merges its user data only when the template names no AMI.
    assert "imageId" not in template


def test_nodes_require_imdsv2_and_keep_its_tokens_out_of_pods(dev):
    options = dev.one(LAUNCH_TEMPLATE)["inputs"]["metadataOptions"]
    assert options == {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}


def test_root_volume_moved_from_the_node_group_into_the_launch_template(dev, synth_stack):
    template = dev.one(LAUNCH_TEMPLATE)
    (root,) = template["inputs"]["blockDeviceMappings"]
    assert root == {
        "deviceName": "/dev/xvda",
        "ebs": {"volumeSize": 100, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"},
    }
    nodes = dev.one(NODE_GROUP)
    assert "diskSize" not in nodes["inputs"]
    assert template["urn"] in nodes["dependsOn"]
    assert (
        nodes["inputs"]["launchTemplate"]["id"].startswith("lt-")
        and nodes["inputs"]["launchTemplate"]["version"] == "1"
    )
    assert nodes["inputs"]["amiType"] == versions.NODE_AMI_TYPE
    # without a launch template pulumi-eks defaults the nodes' version to the cluster's; with one we do
    assert nodes["inputs"]["version"] == dev.one("eks:index:Cluster")["inputs"]["version"]
    bigger = synth_stack("dev", "nodeDiskGiB=250").one(LAUNCH_TEMPLATE)["inputs"]["blockDeviceMappings"]
    assert bigger[0]["ebs"]["volumeSize"] == 250
