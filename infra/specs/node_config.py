"""The nodes' boot configuration: a nodeadm NodeConfig in the launch template's user data.

The managed node group runs the EKS AL2023 AMI, whose `nodeadm` configures the kubelet from
NodeConfig objects (`node.eks.aws/v1alpha1`) found in the instance's user data (awslabs/amazon-eks-ami
nodeadm/, see docs/security.md for the exact sources):
- user data of a managed node group's launch template must be a MIME multi-part document: EKS
  appends its own NodeConfig part (cluster name, endpoint, CA, service CIDR) when the template
  names no AMI, and nodeadm merges every `application/node.eks.aws` part in order, the
  `kubelet.config` maps key by key (nodeadm/internal/api/merge.go);
- `spec.kubelet.config` is a KubeletConfiguration fragment that nodeadm writes as a kubelet
  drop-in file on top of its defaults (nodeadm/internal/kubelet/config.go).

Ours sets one thing: `seccompDefault: true` (KubeletConfiguration, default false), so the kubelet
runs every container that names no seccomp profile under RuntimeDefault. Our pods all name
RuntimeDefault (the workload namespace enforces "restricted": infra/specs/elastic.py); this
keeps any other pod on the node confined too.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

NODE_CONFIG_MEDIA_TYPE = "application/node.eks.aws"
# Fixed, so the same config renders the same user data (a new one would roll every node).
MIME_BOUNDARY = "//elastic-training-nodeconfig//"


def node_config() -> dict[str, Any]:
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"kubelet": {"config": {"seccompDefault": True}}},
    }


def user_data(config: dict[str, Any]) -> str:
    """A MIME multi-part document with the NodeConfig as its only part."""
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n'
        "\n"
        f"--{MIME_BOUNDARY}\n"
        f"Content-Type: {NODE_CONFIG_MEDIA_TYPE}\n"
        "\n"
        "---\n"
        f"{yaml.safe_dump(config, sort_keys=False)}"
        "\n"
        f"--{MIME_BOUNDARY}--\n"
    )


def launch_template_user_data() -> str:
    """What the launch template's `userData` takes: the document, base64-encoded."""
    return base64.b64encode(user_data(node_config()).encode()).decode()
