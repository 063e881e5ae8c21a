"""What keeps the rendezvous store alive through what a node goes through (issue 22): a priority
above the workloads', a disruption budget. It has no volume (issue 31): a restarted store is empty
and the agents put their state back (jobs/elastic/rendezvous.py), so it may run on any system node in any
zone. The store's StatefulSet itself is elastic.py `store_objects`; why this store:
docs/design-notes.md, "Rendezvous store"; what a run does while it restarts: docs/runs.md.
"""

from __future__ import annotations

from typing import Any

from infra.specs.labels import object_meta
from infra.specs.suppressions import annotate

COMPONENT = "rendezvous"
# Above every pod of the stack (none sets a priority: 0) and below the system classes
# (system-cluster-critical is 2000000000, and only kube-system may use it); user classes may go
# up to 1000000000 (Kubernetes docs, "Pod Priority and Preemption").
PRIORITY_CLASS = "elastic-training-rendezvous"
PRIORITY_VALUE = 1000000


def priority_class() -> dict[str, Any]:
    """Under node pressure the kubelet evicts lower-priority pods first, and a pending store may
    preempt a workload pod to get a node back: the store goes last and comes back first."""
    return annotate(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": object_meta(PRIORITY_CLASS, COMPONENT),
            # globalDefault is left out (false is its default, and the API server drops a false it is sent,
            # so it would read back different from what was sent: tests/cluster/test_every_object_applies.py).
            "value": PRIORITY_VALUE,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": "The rendezvous store of the training runs: evicted last, scheduled first.",
        }
    )


def disruption_budget(namespace: str, selector: dict[str, str]) -> dict[str, Any]:
    """A drain (a node-group update, a scale-in, `kubectl drain`) waits for the store instead of
    evicting it. A managed node group update honours this for up to 15 minutes and then fails,
    unless the update is forced (EKS user guide, "Understand each phase of node updates"): the
    system node group is updated with force (infra/components/cluster.py), so an update moves the
    store last. A store that is not Ready may always be evicted: a budget must not pin a broken one."""
    return annotate(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": object_meta("rendezvous-store", COMPONENT, namespace),
            "spec": {
                "minAvailable": 1,
                "selector": {"matchLabels": selector},
                "unhealthyPodEvictionPolicy": "AlwaysAllow",
            },
        }
    )
