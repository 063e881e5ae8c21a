"""The values we give Karpenter's Helm chart (aws/karpenter-provider-aws charts/karpenter, version in
infra/versions.py). Every key below exists in that chart's values.yaml @ 1d927085; the ones we do not
set keep the chart's defaults, among them the affinity `karpenter.sh/nodepool DoesNotExist` (the
controller never runs on a node it launched), a hostname anti-affinity between replicas and a zone
spread, priority class system-cluster-critical and a PodDisruptionBudget of maxUnavailable 1.
"""

from __future__ import annotations

from typing import Any

from infra import versions
from infra.specs import gpu

NAMESPACE = "kube-system"  # where the Karpenter docs install it (KARPENTER_NAMESPACE)
SERVICE_ACCOUNT = "karpenter"  # named here, so the IRSA trust policy can name it
RELEASE_NAME = "karpenter"
# The CRDs' own release: the name, namespace and chart the upgrade guide installs them with
# (aws/karpenter-provider-aws @ 1d927085 website/content/en/v1.14/upgrading/upgrade-guide.md, "CRD
# Upgrades": `helm upgrade --install karpenter-crd oci://public.ecr.aws/karpenter/karpenter-crd
# --version x.y.z --namespace "${KARPENTER_NAMESPACE}"`). Helm installs a chart's crds/ directory on
# the first install only and never upgrades it, so the controller release skips its own copy
# (`skipCrds`) and a version bump upgrades the schemas through this release, before the controller.
CRD_RELEASE_NAME = "karpenter-crd"
# The label EKS puts on every node of an on-demand managed node group (EKS user guide,
# managed-node-groups.adoc: `eks.amazonaws.com/capacityType: ON_DEMAND`).
MANAGED_CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
MANAGED_ON_DEMAND = "ON_DEMAND"
# The chart recommends no size; its getting-started install asks for 1 CPU / 1Gi. Our clusters have
# one NodePool and a handful of nodes, and the controller shares two small system nodes with
# CoreDNS, the EFS CSI controller, the rendezvous store and the Jobs: half a CPU, with a 1 CPU limit for bursts.
CONTROLLER_RESOURCES = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def system_node_selector() -> dict[str, str]:
    """The on-demand system group, by the two labels it carries (ours and EKS's)."""
    return {**gpu.system_node_labels(), MANAGED_CAPACITY_TYPE_LABEL: MANAGED_ON_DEMAND}


def replicas(system_node_count: int) -> int:
    """Two for a leader-elected standby, but no more than there are system nodes: the chart's
    required hostname anti-affinity would leave a second replica Pending on a single node."""
    return min(2, system_node_count)


def values(cluster_name: Any, queue_name: Any, role_arn: Any, system_node_count: int) -> dict[str, Any]:
    """`cluster_name`, `queue_name` and `role_arn` are the stack's own (strings or Outputs)."""
    return {
        "settings": {"clusterName": cluster_name, "interruptionQueue": queue_name},
        "serviceAccount": {
            "create": True,
            "name": SERVICE_ACCOUNT,
            "annotations": {"eks.amazonaws.com/role-arn": role_arn},
        },
        "replicas": replicas(system_node_count),
        "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector()},
        "controller": {
            "image": {"tag": versions.KARPENTER_VERSION, "digest": versions.KARPENTER_CONTROLLER_DIGEST},
            "resources": CONTROLLER_RESOURCES,
        },
    }
