"""Workers the scheduler cannot place: waiting for capacity that is coming, or never going to run.

What the scheduler writes (kubernetes/kubernetes pkg/scheduler/schedule_one.go handleSchedulingFailure,
@ 4a37f009ca615534484b1116d0f147f1f23cf067): a Warning event, reason `FailedScheduling`, action
`Scheduling`, through the events.k8s.io recorder (staging/src/k8s.io/client-go/tools/events/event_recorder.go
@ 95f08499d652a6211121d8af35f470609217c730: `note`, `regarding`, `reportingController`
"default-scheduler", `eventTime`); read through core/v1 that is `message`, `involvedObject`,
`reportingComponent` (pkg/apis/events/v1/conversion.go @ a79f3c787d204848670cdf3e424107053ffcea3e).
It also sets the pod's condition PodScheduled=False, reason `Unschedulable`, with the same message:
"0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption
victims found for incoming pod." (pkg/scheduler/framework/types.go @ 00fdf757a8e89fb0c7ccad10419ef33a1fa1b1ab,
FitError.Error: a sorted histogram of the nodes' reasons, then the PostFilter's message).

The message says why no node takes the pod now, not whether one ever will: "Insufficient cpu" is
the same for a request no node can ever hold and for capacity other pods use (the NodeResourcesFit
filter returns plain Unschedulable either way: pkg/scheduler/framework/plugins/noderesources/fit.go
@ 903b1f7e2884a152477f870ece3460be3d5025d1). So the wait also reads the nodes and asks the question
the way the filters do: would the pod fit one of them empty (its allocatable, its taints, the pod's
nodeSelector)? If none, and nothing says capacity is coming, no node can ever satisfy it.

Capacity is coming when:
- the cluster-autoscaler recorded `TriggeredScaleUp` "pod triggered scale-up: ..." on the pod
  (kubernetes/autoscaler cluster-autoscaler/processors/status/eventing_scale_up_processor.go
  @ 16c271a3078a6f808270c4823207f97db9538437; `NotTriggerScaleUp` "pod didn't trigger scale-up: ..."
  is its no);
- Karpenter recorded `Nominated` "Pod should schedule on: nodeclaim/..." (kubernetes-sigs/karpenter
  @ 2266468104f36373ed002241afaee2d3bbc26078, pkg/controllers/provisioning/scheduling/events.go);
- the scheduler nominated a node after preemption (status.nominatedNodeName);
- a node that would take the pod is still joining (a not-ready, unreachable, uninitialized or
  cordoned node: the taints the node lifecycle and cloud controllers set).
Waiting for it has a bound (CAPACITY_WAIT_SECONDS); a pod that fits no node, with no capacity
coming, fails the run after UNSCHEDULABLE_GRACE_SECONDS, time for a replaced node to appear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

FAILED_SCHEDULING = "FailedScheduling"
SCHEDULER = "default-scheduler"  # the reportingController of kube-scheduler's default profile
TRIGGERED_SCALE_UP = "TriggeredScaleUp"  # cluster-autoscaler
NOMINATED = "Nominated"  # Karpenter
UNSCHEDULABLE = "Unschedulable"  # v1.PodReasonUnschedulable
UNSCHEDULABLE_GRACE_SECONDS = 5 * 60
CAPACITY_WAIT_SECONDS = 30 * 60
# Taints on a node that is still joining or briefly out (node lifecycle controller, cloud node
# controller, kubectl cordon): a pod that fits such a node only waits for it.
PASSING_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)

_SUFFIXES = {
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"([+-]?[0-9.]+)(?:[eE]([+-]?[0-9]+))?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")


def quantity(text: str) -> Fraction:
    """A Kubernetes quantity as a number ("500m" -> 1/2, "31482180Ki" -> bytes)."""
    match = _QUANTITY.fullmatch(str(text))
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    number = Fraction(match[1]) * (Fraction(10) ** int(match[2]) if match[2] else 1)
    return number * _SUFFIXES[match[3] or ""]


def pod_requests(pod: dict[str, Any]) -> dict[str, Fraction]:
    """What the pod requests, per resource: containers summed, the largest init container if more."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, Fraction(0)) + quantity(value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, Fraction(0)), quantity(value))
    return total


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if not toleration.get("key") and toleration.get("operator") == "Exists":
            return True
        if toleration.get("key") == taint.get("key") and (
            toleration.get("operator") == "Exists" or toleration.get("value", "") == taint.get("value", "")
        ):
            return True
    return False


def _blocking_taints(pod: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    return [
        taint
        for taint in (node.get("spec") or {}).get("taints") or []
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint)
    ]


def _fits_empty(pod: dict[str, Any], node: dict[str, Any], requests: dict[str, Fraction]) -> bool:
    """The pod's nodeSelector and requests against the node's labels and allocatable."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return all(quantity(allocatable.get(name, "0")) >= wanted for name, wanted in requests.items() if wanted > 0)


def placement(pod: dict[str, Any], nodes: list[dict[str, Any]]) -> tuple[str, str]:
    """("now", "") if some ready node could hold the pod were it empty, ("joining", <node>) if only a
    node still joining could, ("never", why) if none."""
    requests = pod_requests(pod)
    joining = ""
    for node in nodes:
        if (node.get("metadata") or {}).get("deletionTimestamp") or not _fits_empty(pod, node, requests):
            continue
        taints = _blocking_taints(pod, node)
        if not taints:
            return "now", ""
        if all(t.get("key") in PASSING_TAINTS for t in taints):
            joining = joining or f"node {node['metadata']['name']} is not ready yet ({taints[0]['key']})"
    if joining:
        return "joining", joining
    wanted = ", ".join(f"{name}={_show(name, value)}" for name, value in sorted(requests.items()))
    return "never", f"no node of the cluster's {len(nodes)} can hold it (it requests {wanted or 'nothing'})"


def _show(name: str, value: Fraction) -> str:
    if name == "cpu":
        return f"{round(value * 1000)}m"
    if name == "memory":
        return f"{round(value / 2**20)}Mi"
    return str(round(value))


def _events_of(pod: dict[str, Any], events: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    uid = pod["metadata"].get("uid")
    mine = [
        e
        for e in events
        if e.get("reason") == reason
        and (e.get("involvedObject") or {}).get("kind") == "Pod"
        and (e.get("involvedObject") or {}).get("name") == pod["metadata"]["name"]
        and (not uid or (e.get("involvedObject") or {}).get("uid") == uid)
    ]
    # Newest last: a repeated events.k8s.io event keeps its first eventTime and counts in its series.
    return sorted(
        mine,
        key=lambda e: (
            (e.get("series") or {}).get("lastObservedTime") or e.get("lastTimestamp") or e.get("eventTime") or ""
        ),
    )


def unschedulable_message(pod: dict[str, Any]) -> str | None:
    """The scheduler's message when the pod is Pending as Unschedulable, else None."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending" or pod["metadata"].get("deletionTimestamp"):
        return None
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == UNSCHEDULABLE
        ):
            return condition.get("message") or UNSCHEDULABLE
    return None


def capacity_coming(pod: dict[str, Any], events: list[dict[str, Any]], joining: str) -> str | None:
    nominated = (pod.get("status") or {}).get("nominatedNodeName")
    if nominated:
        return f"the scheduler nominated node {nominated}"
    for reason in (TRIGGERED_SCALE_UP, NOMINATED):
        latest = _events_of(pod, events, reason)
        if latest:
            return latest[-1].get("message") or reason
    return joining or None


@dataclass
class SchedulingWatch:
    """Remembers since when each worker has been unschedulable (the wait's own clock: events and
    conditions carry the API server's time, which need not agree with ours)."""

    since: dict[str, float] = field(default_factory=dict)
    noun: str = "worker"  # how the line names a pod: the ElasticJob's workers, a Job's pod

    def unschedulable(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [pod for pod in pods if unschedulable_message(pod)]

    def verdict(
        self, pods: list[dict[str, Any]], events: list[dict[str, Any]], nodes: list[dict[str, Any]] | None, now: float
    ) -> str | None:
        """One line saying why the run cannot go on, or None while it may."""
        stuck = self.unschedulable(pods)
        self.since = {key: at for key, at in self.since.items() if key in {_key(p) for p in stuck}}
        for pod in sorted(stuck, key=lambda p: p["metadata"]["name"]):
            waited = now - self.since.setdefault(_key(pod), now)
            scheduler = _scheduler_says(pod, events)
            where, why = placement(pod, nodes) if nodes is not None else ("unknown", "")
            coming = capacity_coming(pod, events, why if where == "joining" else "")
            name = pod["metadata"]["name"]
            if where == "never" and not coming and waited >= UNSCHEDULABLE_GRACE_SECONDS:
                return f"{self.noun} {name} can never be scheduled: {why}; the scheduler says: {scheduler}"
            if waited >= CAPACITY_WAIT_SECONDS:
                wait = f"{CAPACITY_WAIT_SECONDS // 60} minutes"
                detail = (
                    f"waiting for capacity that did not come ({coming})" if coming else "with no capacity on its way"
                )
                return f"{self.noun} {name} was not scheduled in {wait}, {detail}; the scheduler says: {scheduler}"
        return None


def _key(pod: dict[str, Any]) -> str:
    return pod["metadata"].get("uid") or pod["metadata"]["name"]


def _scheduler_says(pod: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The latest FailedScheduling message of the scheduler on the pod (Karpenter records events of
    that reason too, "Failed to schedule pod, ..."), else its PodScheduled condition's."""
    latest = [
        e
        for e in _events_of(pod, events, FAILED_SCHEDULING)
        if SCHEDULER in (e.get("reportingComponent"), (e.get("source") or {}).get("component"))
    ]
    return (latest[-1].get("message") if latest else None) or unschedulable_message(pod) or UNSCHEDULABLE
