"""What keeps etcd, the rendezvous store, alive through what a node goes through (issue 22): its
data on a volume that outlives the pod, a priority above the workloads', a disruption budget.

The etcd Deployment itself (elastic.py `etcd_objects`) mounts DATA_CLAIM and runs at
PRIORITY_CLASS. Why a single member on a block volume, and not a cluster of three or EFS:
docs/design-notes.md, "Rendezvous store"; what a run does while etcd restarts: docs/runs.md.
"""

from __future__ import annotations

from typing import Any

from infra.specs.labels import common_labels
from infra.specs.suppressions import annotate

COMPONENT = "rendezvous"
DATA_CLAIM = "etcd-data"
# etcd keeps the rendezvous of a few runs: kilobytes. 1Gi is the smallest size every block
# provisioner accepts (an EBS gp3 volume is 1-16384 GiB).
DATA_SIZE = "1Gi"
# The EBS class of target eks. gp3: the EBS type etcd's hardware guide points at ("a high
# performance virtualized block device"); WaitForFirstConsumer, so the volume is created in the
# zone of the node etcd is scheduled on; Delete, so `pulumi destroy` leaves no volume behind
# (the rendezvous of finished runs is worth nothing).
EBS_STORAGE_CLASS = "etcd-gp3"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
# Above every pod of the stack (none sets a priority: 0) and below the system classes
# (system-cluster-critical is 2000000000, and only kube-system may use it); user classes may go
# up to 1000000000 (Kubernetes docs, "Pod Priority and Preemption").
PRIORITY_CLASS = "elastic-training-rendezvous"
PRIORITY_VALUE = 1000000


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/name": name, **common_labels(COMPONENT)}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def priority_class() -> dict[str, Any]:
    """Under node pressure the kubelet evicts lower-priority pods first, and a pending etcd may
    preempt a workload pod to get a node back: the store goes last and comes back first."""
    return annotate({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": _meta(PRIORITY_CLASS),
        # globalDefault is left out (false is its default, and the API server drops a false it is sent,
        # so it would read back different from what was sent: tests/cluster/test_every_object_applies.py).
        "value": PRIORITY_VALUE, "preemptionPolicy": "PreemptLowerPriority",
        "description": "etcd, the rendezvous store of the training runs: evicted last, scheduled first.",
    })


def ebs_storage_class() -> dict[str, Any]:
    """target eks: encrypted gp3 volumes from the EBS CSI driver (the EKS add-on the stack installs)."""
    return annotate({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": _meta(EBS_STORAGE_CLASS),
        "provisioner": EBS_CSI_PROVISIONER,
        "parameters": {"type": "gp3", "encrypted": "true"},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    })


def data_claim(namespace: str, storage_class_name: str) -> dict[str, Any]:
    """One node's disk (ReadWriteOnce): one etcd writes it, and the Deployment's Recreate strategy
    ends the old pod before the new one mounts it."""
    return annotate({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(DATA_CLAIM, namespace),
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class_name,
                 "resources": {"requests": {"storage": DATA_SIZE}}},
    })


def disruption_budget(namespace: str, selector: dict[str, str]) -> dict[str, Any]:
    """A drain (a node-group update, a scale-in, `kubectl drain`) waits for etcd instead of evicting
    it. A managed node group update honours this for up to 15 minutes and then fails, unless the
    update is forced (EKS user guide, "Understand each phase of node updates"): the system node
    group is updated with force (infra/components/cluster.py), so an update moves etcd last.
    An etcd that is not Ready may always be evicted: a budget must not pin a broken store."""
    return annotate({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta("etcd", namespace),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": selector},
                 "unhealthyPodEvictionPolicy": "AlwaysAllow"},
    })
