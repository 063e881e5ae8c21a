"""EFA (Elastic Fabric Adapter) for GPU stacks whose instance type has it: p4d, p5, p5e, p5en, p6 and the
like. NCCL then moves the gradients between nodes over EFA (libfabric and the AWS OFI NCCL plugin in
the training image, images/efa.Dockerfile) instead of TCP sockets. A type without EFA keeps the TCP
path unchanged; `synth` and `cost` say which one a stack uses (network_path).

Which types have EFA, and how many interfaces: infra/aws/data/ec2_shapes.csv, column EfaInterfaces
(EC2's NetworkInfo.EfaInfo.MaximumEfaInterfaces, infra/aws/shapes_build.py).

What a stack with EFA adds, after upstream's documented setup:
- the EFA device plugin, which advertises `vpc.amazonaws.com/efa` on the node: a DaemonSet built from
  aws/eks-charts' chart stable/aws-efa-k8s-device-plugin (templates/daemonset.yaml and values.yaml at
  chart v0.5.30, commit 5239609242f3430be50fb0b714a24d3ef2b47983): hostNetwork, privileged as the
  chart's securityContext, the kubelet's device-plugin directory, /dev/infiniband and /opt/aws/neuron
  (type DirectoryOrCreate) from the host, the CriticalAddonsOnly toleration, system-node-critical, no
  service account token. Ours selects the GPU worker nodes (they are one EFA type) instead of the
  chart's list of EFA types, and tolerates their GPU taint;
- each worker requests every EFA interface of its node (requests = limits, an extended resource):
  Karpenter then launches the node with that many EFA interfaces (aws/karpenter-provider-aws @ 1d927085,
  pkg/providers/instance/instance.go getEFACountForInstance: only when a pod requests
  vpc.amazonaws.com/efa);
- the node security group admits all traffic from itself and sends all traffic to itself: "An EFA
  requires a security group that allows all inbound and outbound traffic to and from the security
  group itself" (Amazon EC2 User Guide, "Elastic Fabric Adapter", Get started with EFA, Step 1:
  Prepare an EFA-enabled security group).
EFA traffic does not cross Availability Zones (same guide, "EFA limitations"): between nodes of
different zones NCCL's EFA transport fails, so a multi-node EFA run wants its nodes in one zone
(docs/gpu.md). Only a real account proves the fabric itself.
"""

from __future__ import annotations

from typing import Any

from infra import versions
from infra.aws import instance_shapes
from infra.specs import gpu
from infra.specs.labels import common_labels

EFA_RESOURCE = "vpc.amazonaws.com/efa"
PLUGIN_NAME = "aws-efa-k8s-device-plugin"
PLUGIN_NAMESPACE = "kube-system"
PLUGIN_COMPONENT = "efa-device-plugin"
CRITICAL_ADDONS_TOLERATION = {"key": "CriticalAddonsOnly", "operator": "Exists"}  # the chart's own


def efa_interfaces(instance_type: str, gpu_stack: bool) -> int:
    """EFA interfaces a worker node of this type takes: all it has on a GPU stack, else 0 (a CPU
    stack's gloo collectives speak TCP only)."""
    found = instance_shapes.shape(instance_type)
    return found.efa_interfaces if gpu_stack and found else 0


def network_path(instance_type: str, gpu_stack: bool) -> str:
    """One line: how the workers' collectives travel between nodes."""
    interfaces = efa_interfaces(instance_type, gpu_stack)
    if interfaces:
        return (
            f"EFA: {instance_type} has {interfaces} EFA interface{'s' if interfaces > 1 else ''}; every worker "
            f"requests them ({EFA_RESOURCE}), NCCL uses them through libfabric and the AWS OFI NCCL plugin"
        )
    if not gpu_stack:
        return "TCP: a CPU stack's collectives (gloo) use TCP sockets"
    return f"TCP: {instance_type} has no EFA, so NCCL uses TCP sockets between nodes"


def device_plugin_daemonset() -> dict[str, Any]:
    labels = common_labels(PLUGIN_COMPONENT)
    selector = {"app.kubernetes.io/name": PLUGIN_NAME}
    host_paths = {"device-plugin": gpu.DEVICE_PLUGIN_DIR, "infiniband-volume": "/dev/infiniband/",
                  "neuron-tools": "/opt/aws/neuron/"}  # fmt: skip
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": PLUGIN_NAME, "namespace": PLUGIN_NAMESPACE, "labels": {**labels, **selector}},
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {**labels, **selector}},
                "spec": {
                    "automountServiceAccountToken": False,
                    "tolerations": [CRITICAL_ADDONS_TOLERATION, gpu.gpu_toleration()],
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": {gpu.ACCELERATOR_LABEL: gpu.NVIDIA},
                    "hostNetwork": True,
                    "containers": [
                        {
                            "name": PLUGIN_NAME,
                            "image": versions.EFA_DEVICE_PLUGIN_IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            # The chart's values.yaml securityContext, as it is: the plugin opens the EFA
                            # devices under /dev/infiniband of the host.
                            "securityContext": {
                                "allowPrivilegeEscalation": True,
                                "privileged": True,
                                "runAsNonRoot": False,
                                "runAsUser": 0,
                            },
                            # Ours (the chart sets none), as the NVIDIA plugin's: every container here has both.
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "64Mi"},
                                "limits": {"cpu": "200m", "memory": "256Mi"},
                            },
                            "volumeMounts": [{"name": name, "mountPath": path} for name, path in host_paths.items()],
                        }
                    ],
                    "volumes": [
                        {"name": "device-plugin", "hostPath": {"path": gpu.DEVICE_PLUGIN_DIR}},
                        {"name": "infiniband-volume", "hostPath": {"path": "/dev/infiniband/"}},
                        {"name": "neuron-tools", "hostPath": {"path": "/opt/aws/neuron/", "type": "DirectoryOrCreate"}},
                    ],
                },
            },
        },
    }
