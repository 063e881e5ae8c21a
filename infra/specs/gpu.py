"""GPU scheduling: the node roles, the GPU taint and its toleration, and the NVIDIA device plugin.

On a GPU stack (nodeInstanceType with NVIDIA GPUs, infra/aws/gpu_instances.py) the cluster has two
managed node groups (infra/components/cluster.py): the GPU nodes, tainted `nvidia.com/gpu=true:NoSchedule`,
and a small untainted CPU "system" group. Only pods that tolerate the taint land on GPU nodes: the
training workers and the device plugin (and the EKS add-ons' node DaemonSets, which tolerate every
taint, as they must: the VPC CNI and the EFS CSI node plugin are needed there). Everything else
(CoreDNS, metrics-server, the controller, the rendezvous store, the CSI controller, the data-prep/test/export Jobs)
has no such toleration and so runs on the system group.

The device plugin is what advertises `nvidia.com/gpu` to the kubelet: the AL2023 NVIDIA AMI brings
the driver and container toolkit, not the plugin. The DaemonSet below is ours, built from the facts
of NVIDIA/k8s-device-plugin's static manifest (deployments/static/nvidia-device-plugin.yml at tag
v0.20.0, commit 1b826acc6af3079d8923bac395c3124b8861a9a6):
- it mounts the kubelet's device-plugin directory, hostPath /var/lib/kubelet/device-plugins
  (type Directory), where it creates its gRPC socket and watches for kubelet.sock
  (cmd/nvidia-device-plugin/main.go: kubeletSocket, the FS watcher on its directory);
- it tolerates `nvidia.com/gpu` NoSchedule, drops every capability and forbids privilege
  escalation, and runs at priorityClassName system-node-critical.
Its namespace is kube-system, as upstream's: a hostPath volume is refused by Pod Security
"baseline" (Kubernetes Pod Security Standards, "HostPath Volumes"; tests/pod_security.py), so it
cannot live in the training namespace (baseline enforced) or in any namespace of ours unless that
one were labelled "privileged"; kube-system is where upstream runs it at system-node-critical
priority, and the stack neither creates nor labels it (it relies on kube-system admitting
hostPath pods, as every EKS cluster's own node DaemonSets there need; not verified here beyond that). A NetworkPolicy admits no ingress to the plugin's pods (device_plugin_network_policy). The socket directory is root-owned on
the node, so the plugin runs as root (uid 0); everything else is locked down: read-only root
filesystem (it writes only its socket, in the hostPath), no service account token (it never calls
the Kubernetes API in this configuration), RuntimeDefault seccomp, requests and limits.
"""

from __future__ import annotations

from typing import Any

from infra import versions
from infra.specs.labels import common_labels
from infra.specs.suppressions import annotate

# The extended resource the device plugin advertises, and the taint key the upstream manifest tolerates.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
# Kubernetes' effect name, and the EKS API's name of the same effect for a managed node group
# (botocore 1.44.5 eks model, shape TaintEffect: NO_SCHEDULE | NO_EXECUTE | PREFER_NO_SCHEDULE).
GPU_TAINT_EFFECT = "NoSchedule"
GPU_TAINT_EFFECT_EKS = "NO_SCHEDULE"

NODE_ROLE_LABEL = "elastic-training/role"
WORKER_ROLE = "worker"
SYSTEM_ROLE = "system"
# Set on the GPU node group only: the device plugin's nodeSelector.
ACCELERATOR_LABEL = "elastic-training/accelerator"
NVIDIA = "nvidia"

DEVICE_PLUGIN_NAMESPACE = "kube-system"
DEVICE_PLUGIN_NAME = "nvidia-device-plugin"
DEVICE_PLUGIN_COMPONENT = "gpu-device-plugin"
DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


def gpu_toleration() -> dict[str, str]:
    return {"key": GPU_TAINT_KEY, "operator": "Equal", "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}


def gpu_node_labels() -> dict[str, str]:
    return {NODE_ROLE_LABEL: WORKER_ROLE, ACCELERATOR_LABEL: NVIDIA}


def system_node_labels() -> dict[str, str]:
    return {NODE_ROLE_LABEL: SYSTEM_ROLE}


def device_plugin_network_policy() -> dict[str, Any]:
    """No ingress at all to the plugin's pods: the kubelet reaches it over a unix socket in the
    hostPath, never over the pod network. Selects the plugin's pods only, so the rest of kube-system
    (CoreDNS and the add-ons) is untouched."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": f"{DEVICE_PLUGIN_NAME}-deny-ingress",
            "namespace": DEVICE_PLUGIN_NAMESPACE,
            "labels": common_labels(DEVICE_PLUGIN_COMPONENT),
        },
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": DEVICE_PLUGIN_NAME}},
            "policyTypes": ["Ingress"],
        },
    }


def device_plugin_daemonset() -> dict[str, Any]:
    labels = common_labels(DEVICE_PLUGIN_COMPONENT)
    selector = {"app.kubernetes.io/name": DEVICE_PLUGIN_NAME}
    return annotate(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": DEVICE_PLUGIN_NAME,
                "namespace": DEVICE_PLUGIN_NAMESPACE,
                "labels": {**labels, **selector},
            },
            "spec": {
                "selector": {"matchLabels": selector},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": {**labels, **selector}},
                    "spec": {
                        "nodeSelector": {ACCELERATOR_LABEL: NVIDIA},
                        "tolerations": [gpu_toleration()],
                        "priorityClassName": "system-node-critical",
                        "automountServiceAccountToken": False,
                        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [
                            {
                                "name": "nvidia-device-plugin-ctr",
                                "image": versions.NVIDIA_DEVICE_PLUGIN_IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                    "seccompProfile": {"type": "RuntimeDefault"},
                                },
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"cpu": "200m", "memory": "256Mi"},
                                },
                                "volumeMounts": [{"name": "device-plugins", "mountPath": DEVICE_PLUGIN_DIR}],
                            }
                        ],
                        "volumes": [
                            {"name": "device-plugins", "hostPath": {"path": DEVICE_PLUGIN_DIR, "type": "Directory"}}
                        ],
                    },
                },
            },
        }
    )
