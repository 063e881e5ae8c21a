"""The Deployment pods an `eks` stack runs on its on-demand system nodes, and what each requests.

The system nodes also run every DaemonSet (infra/aws/node_daemonsets.py) and, one at a time, the
data-prep, test and export Jobs, which tolerate no worker taint; infra/config/node_fit.py
`check_side_jobs_fit` sums all of it. One row per Deployment; a component that goes away is one
line less here (and its test row in tests/aws/test_system_pods.py).

| Deployment | replicas | requests per pod | placement | source |
|---|---|---|---|---|
| karpenter | min(2, systemNodeCount) | 500m, 1Gi | required hostname anti-affinity: at most one per node | ours, infra/specs/karpenter_chart.py CONTROLLER_RESOURCES (the chart sets none: aws/karpenter-provider-aws v1.14.1 charts/karpenter/values.yaml `controller.resources: {}`; `affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution` on kubernetes.io/hostname) |
| coredns (EKS add-on) | 2 | 100m, 70Mi (assumed) | preferred anti-affinity | EKS does not publish the add-on's manifest; Kubernetes' own CoreDNS add-on requests these (kubernetes/kubernetes @ 008b3652959ca58af8be3fb5b6ecfe9ae7638282, cluster/addons/dns/coredns/coredns.yaml.base: `cpu: 100m`, `memory: 70Mi`, preferred podAntiAffinity on hostname); two replicas, which may share a node (awsdocs/amazon-eks-user-guide @ 4d52b4d0, latest/ug/networking/eks-networking-add-ons.adoc: `kubectl get pods` lists two coredns pods, both on one node) |
| efs-csi-controller (EFS CSI add-on) | 2 | none | none | kubernetes-sigs/aws-efs-csi-driver @ a4fc67600be60d0f8350dc9459e55ff04e9aa944 (chart 4.4.1): charts/aws-efs-csi-driver/values.yaml `controller.replicaCount: 2`, `controller.resources: {}` and `{}` for the sidecars, `controller.affinity: {}` |
| metrics-server (EKS add-on) | 1 | 100m, 200Mi | anywhere | kubernetes-sigs/metrics-server v0.8.0 (d66279c6), manifests/base/deployment.yaml: `cpu: 100m`, `memory: 200Mi`; the add-on is v0.8.0-eksbuild (infra/versions.py) |
| elasticjob-controller | 1 | 100m, 256Mi | anywhere | ours, infra/specs/elastic.py `controller_objects` |
| rendezvous-store | 1 | 100m, 512Mi | anywhere | ours, infra/specs/elastic.py `store_objects` |

tests/aws/test_system_pods.py checks our rows against the specs that render them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SystemPod:
    name: str
    replicas: int | None  # None: min(2, systemNodeCount), as infra/specs/karpenter_chart.py `replicas`
    cpu_millicores: int  # per pod
    memory_mib: int  # per pod
    one_per_node: bool = False  # a required hostname anti-affinity between the replicas

    def count(self, system_nodes: int) -> int:
        return min(2, system_nodes) if self.replicas is None else self.replicas


SYSTEM_PODS = (
    SystemPod("karpenter", replicas=None, cpu_millicores=500, memory_mib=1024, one_per_node=True),
    SystemPod("coredns", replicas=2, cpu_millicores=100, memory_mib=70),
    SystemPod("efs-csi-controller", replicas=2, cpu_millicores=0, memory_mib=0),
    SystemPod("metrics-server", replicas=1, cpu_millicores=100, memory_mib=200),
    SystemPod("elasticjob-controller", replicas=1, cpu_millicores=100, memory_mib=256),
    SystemPod("rendezvous-store", replicas=1, cpu_millicores=100, memory_mib=512),
)
