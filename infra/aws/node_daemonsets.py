"""The DaemonSet pods every node of an `eks` stack runs, and what they request: a worker gets the
node's allocatable less these.

A pod's request is the larger of its containers' sum and its largest init container (Kubernetes
docs, "Init containers", "Resource sharing within containers": the effective request is the higher
of the two), which is what `pod_request` below computes from a manifest's pod spec.

| DaemonSet | requests | source |
|---|---|---|
| aws-node (VPC CNI add-on, with its network policy agent) | 50m cpu | aws/amazon-vpc-cni-k8s @ b52188387f2e2f10bf289ace929d6a63b176a4fa, config/master/aws-k8s-cni.yaml (v1.23.1): containers aws-node and aws-eks-nodeagent 25m each, init container aws-vpc-cni-init 25m, no memory; tolerations `operator: Exists` |
| kube-proxy (EKS default add-on) | 100m cpu, 50Mi memory (assumed) | EKS does not publish the add-on's manifest. The values are Kubernetes' own defaults for its kube-proxy DaemonSet (kubernetes/kubernetes @ b574b11f6b28f06e17333bb110e9374db3259bad, cluster/gce/gci/configure-helper.sh: `KUBE_PROXY_CPU_REQUEST:-100m`, `KUBE_PROXY_MEMORY_REQUEST:-50Mi` into cluster/addons/kube-proxy/kube-proxy-ds.yaml); aws/containers-roadmap#1509 reports the EKS one has no memory request, so this errs on the safe side |
| ebs-csi-node (EBS CSI add-on) | 30m cpu, 104Mi memory | kubernetes-sigs/aws-ebs-csi-driver @ 429e202e589798e55c0f8ddcc81b2850b7f000d0, deploy/kubernetes/base/node.yaml: containers ebs-plugin (10m, 40Mi), node-driver-registrar (10m, 32Mi) and liveness-probe (10m, 32Mi); tolerations `operator: Exists` (every taint: the worker nodes too) |
| efs-csi-node (EFS CSI add-on) | none | kubernetes-sigs/aws-efs-csi-driver @ a4fc67600be60d0f8350dc9459e55ff04e9aa944 (chart 4.4.1, driver v3.4.1): charts/aws-efs-csi-driver/values.yaml `node.resources: {}` and `{}` for both sidecars, deploy/kubernetes/base/node-daemonset.yaml sets none; tolerations `operator: Exists` |
| nvidia-device-plugin (ours, GPU nodes only) | 50m cpu, 64Mi memory | infra/specs/gpu.py `device_plugin_daemonset`; tests/aws/test_node_daemonsets.py checks the two agree |

Karpenter, metrics-server, CoreDNS, the controller, the rendezvous store and the CSI controllers are Deployments
that run on the on-demand system nodes only (the worker nodes carry a taint they do not tolerate),
beside the data-prep, test and export Jobs: infra/aws/system_pods.py lists them, and
infra/config/node_fit.py `check_side_jobs_fit` sums both tables. The worker nodes run the
DaemonSets and the workers, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.aws.node_allocatable import Allocatable


@dataclass(frozen=True)
class NodeDaemonSet:
    name: str
    cpu_millicores: int
    memory_mib: int
    gpu_nodes_only: bool = False


EVERY_NODE = (
    NodeDaemonSet("aws-node", cpu_millicores=50, memory_mib=0),
    NodeDaemonSet("kube-proxy", cpu_millicores=100, memory_mib=50),
    NodeDaemonSet("ebs-csi-node", cpu_millicores=30, memory_mib=104),
    NodeDaemonSet("efs-csi-node", cpu_millicores=0, memory_mib=0),
)
DEVICE_PLUGIN = NodeDaemonSet("nvidia-device-plugin", cpu_millicores=50, memory_mib=64, gpu_nodes_only=True)
DAEMONSETS = (*EVERY_NODE, DEVICE_PLUGIN)


def on_node(gpu_node: bool) -> tuple[NodeDaemonSet, ...]:
    return tuple(d for d in DAEMONSETS if gpu_node or not d.gpu_nodes_only)


def for_pods(node: Allocatable, gpu_node: bool) -> Allocatable:
    """What is left of a node's allocatable for other pods once its DaemonSet pods run."""
    daemonsets = on_node(gpu_node)
    return Allocatable(
        cpu_millicores=node.cpu_millicores - sum(d.cpu_millicores for d in daemonsets),
        memory_mib=node.memory_mib - sum(d.memory_mib for d in daemonsets),
    )


def _cpu_millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def _memory_mib(quantity: str) -> int:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    return int(quantity) // (1024 * 1024)


def pod_request(pod_spec: dict[str, Any]) -> tuple[int, int]:
    """(cpu millicores, memory MiB) a pod spec requests: max(sum of containers, largest init container).
    Quantities in the forms our specs and the add-on manifests use (50m, 1, 64Mi, 1Gi)."""

    def requests(container: dict[str, Any]) -> tuple[int, int]:
        wanted = (container.get("resources") or {}).get("requests") or {}
        return (
            _cpu_millicores(wanted["cpu"]) if "cpu" in wanted else 0,
            _memory_mib(wanted["memory"]) if "memory" in wanted else 0,
        )

    containers = [requests(c) for c in pod_spec.get("containers", [])]
    inits = [requests(c) for c in pod_spec.get("initContainers", [])]
    return (
        max(sum(c for c, _ in containers), max((c for c, _ in inits), default=0)),
        max(sum(m for _, m in containers), max((m for _, m in inits), default=0)),
    )
