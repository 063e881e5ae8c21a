"""The pods an `eks` stack's nodes run besides ours, at their real requests, as objects for the real
API server (their controllers make the pods; the real scheduler places them).

The stack installs none of these through its rendered manifests (EKS add-ons and the Karpenter Helm
release), so they are written here from their published sources:

| Workload | Per pod | Source |
|---|---|---|
| aws-node, kube-proxy, efs-csi-node (DaemonSets) | infra/aws/node_daemonsets.py EVERY_NODE | the sources cited there (VPC CNI v1.23.1 manifest, Kubernetes' kube-proxy defaults, EFS CSI chart 4.4.1) |
| coredns (2 replicas) | 100m/70Mi; preferred anti-affinity per host; tolerates CriticalAddonsOnly | k8s.io/kubernetes v1.35.8 cluster/addons/dns/coredns/coredns.yaml.base; two replicas: EKS user guide (awsdocs/amazon-eks-user-guide @ 4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7, latest/ug/networking/eks-networking-add-ons.adoc: "two replicas of the CoreDNS image are deployed by default") |
| metrics-server (1 replica) | 100m/200Mi | sigs.k8s.io/metrics-server v0.8.0 manifests/base/deployment.yaml (the add-on's version, infra/versions.py) |
| karpenter (the Helm release) | replicas, resources and nodeSelector: the rendered release values; affinity (no node of a NodePool, one pod per host), zone spread (maxSkew 1, DoNotSchedule), tolerations and priority class: the chart's values.yaml | aws/karpenter-provider-aws at KARPENTER_VERSION, charts/karpenter/values.yaml, read from its Go module |

Every container image is a placeholder: nothing runs under kwok.
"""

from __future__ import annotations

from typing import Any

from infra.aws.node_daemonsets import EVERY_NODE

NAMESPACE = "kube-system"
IMAGE = "registry.k8s.io/pause:3.10"
CRITICAL_ADDONS_ONLY = {"key": "CriticalAddonsOnly", "operator": "Exists"}
EVERY_TAINT = {"operator": "Exists"}


def _container(name: str, cpu_m: int, memory_mi: int) -> dict[str, Any]:
    requests = {}
    if cpu_m:
        requests["cpu"] = f"{cpu_m}m"
    if memory_mi:
        requests["memory"] = f"{memory_mi}Mi"
    return {"name": name, "image": IMAGE, "resources": {"requests": requests}}


def _preferred_spread(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": labels},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


def _workload(
    kind: str, name: str, containers: list[dict[str, Any]], replicas: int = 1, **pod_spec: Any
) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": containers, **pod_spec}},
    }
    if kind == "Deployment":
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def daemonsets() -> list[dict[str, Any]]:
    every_node = [
        _workload(
            "DaemonSet",
            d.name,
            [_container(d.name, d.cpu_millicores, d.memory_mib)],
            tolerations=[EVERY_TAINT],
            priorityClassName="system-node-critical",
        )
        for d in EVERY_NODE
    ]
    return every_node


def addon_deployments() -> list[dict[str, Any]]:
    coredns = _workload(
        "Deployment",
        "coredns",
        [_container("coredns", 100, 70)],
        replicas=2,
        nodeSelector={"kubernetes.io/os": "linux"},
        priorityClassName="system-cluster-critical",
        affinity=_preferred_spread({"app.kubernetes.io/name": "coredns"}),
        tolerations=[CRITICAL_ADDONS_ONLY],
    )
    metrics = _workload(
        "Deployment",
        "metrics-server",
        [_container("metrics-server", 100, 200)],
        nodeSelector={"kubernetes.io/os": "linux"},
        priorityClassName="system-cluster-critical",
    )
    return [coredns, metrics]


def karpenter(release_values: dict[str, Any], chart_values: dict[str, Any]) -> dict[str, Any]:
    """The chart's Deployment as far as scheduling goes: the release's values over the chart's."""
    labels = {"app.kubernetes.io/name": "karpenter"}
    controller = {**chart_values["controller"], **release_values.get("controller", {})}
    affinity = chart_values["affinity"]
    # The chart's template gives the anti-affinity term the pod's own labels as its selector.
    anti = [
        {**term, "labelSelector": {"matchLabels": labels}}
        for term in affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    ]
    spread = [{**c, "labelSelector": {"matchLabels": labels}} for c in chart_values["topologySpreadConstraints"]]
    requests = controller["resources"].get("requests", {})
    container = {"name": "controller", "image": IMAGE, "resources": {"requests": requests}}
    deployment = _workload(
        "Deployment",
        "karpenter",
        [container],
        replicas=release_values.get("replicas", chart_values["replicas"]),
        nodeSelector=release_values.get("nodeSelector", chart_values.get("nodeSelector", {})),
        priorityClassName=chart_values["priorityClassName"],
        tolerations=chart_values["tolerations"],
        affinity={
            "nodeAffinity": affinity["nodeAffinity"],
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti},
        },
        topologySpreadConstraints=spread,
    )
    return deployment
