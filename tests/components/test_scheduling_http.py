"""The training wait reads why workers are Pending, through the real Kubernetes client against the
HTTPS test server of test_completion_http.py.

The pods and events are shaped as the API server returns them for what kube-scheduler writes
(infra/components/scheduling.py cites each source): a Pending worker whose PodScheduled condition is
False with reason Unschedulable and the FitError message; a FailedScheduling event the scheduler
created through events.k8s.io/v1 (note, regarding, reportingController "default-scheduler", action
"Scheduling", eventTime, series), read back through core/v1 as the conversion in
pkg/apis/events/v1/conversion.go maps it (message, involvedObject, reportingComponent, and no
firstTimestamp/lastTimestamp/count); the cluster-autoscaler's TriggeredScaleUp, recorded by the
core/v1 recorder (source.component, firstTimestamp, lastTimestamp, count). Nodes carry the labels,
taints and allocatable a managed node reports.
"""

from __future__ import annotations

import pytest

from infra.components import scheduling
from infra.components.completion import KubernetesCluster, wait_for
from test_completion_http import Clock, JOB_LABEL, NAME, NAMESPACE, UID, _elasticjob, _status, cluster_env  # noqa: F401

INSTANCE_TYPE = "c5.4xlarge"
INSUFFICIENT_CPU = (
    "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
    "2 No preemption victims found for incoming pod."
)
SCALE_UP = "pod triggered scale-up: [{eks-elastic-training-nodes-20261122 2->3 (max: 4)}]"
RUNNING = (200, _elasticjob(("Running", "True", "ElasticJobRunning")))
SUCCEEDED = (200, _elasticjob(("Succeeded", "True", "ElasticJobSucceeded")))


def pending_worker(index: int, cpu: str = "64", memory: str = "24Gi", message: str = INSUFFICIENT_CPU) -> dict:
    name = f"{NAME}-worker-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"pod-{index}",
            "labels": {JOB_LABEL: NAME, "replica-type": "worker", "replica-index": str(index)},
            "ownerReferences": [
                {
                    "apiVersion": "elastic.pytorch.org/v1alpha1",
                    "kind": "ElasticJob",
                    "name": NAME,
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"node.kubernetes.io/instance-type": INSTANCE_TYPE},
            "containers": [
                {
                    "name": "elasticjob-worker",
                    "image": "trainer@sha256:00",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
        "status": {
            "phase": "Pending",
            "qosClass": "Guaranteed",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-22T03:00:05Z",
                }
            ],
        },
    }


def running_worker(index: int) -> dict:
    pod = pending_worker(index, cpu="15")
    pod["spec"]["nodeName"] = f"ip-10-0-1-{index}.us-west-2.compute.internal"
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {
                "name": "elasticjob-worker",
                "image": "trainer@sha256:00",
                "imageID": "trainer@sha256:00",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": "2026-11-22T03:20:00Z"}},
            }
        ],
    }
    return pod


def scheduler_event(pod: dict, message: str = INSUFFICIENT_CPU) -> dict:
    """A FailedScheduling the scheduler wrote through events.k8s.io/v1, as core/v1 returns it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod['metadata']['name']}.187a2b3c4d5e6f70", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": NAMESPACE,
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
            "resourceVersion": "812",
        },
        "reason": "FailedScheduling",
        "message": message,
        "type": "Warning",
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": "2026-11-22T03:00:05.102938Z",
        "action": "Scheduling",
        "series": {"count": 6, "lastObservedTime": "2026-11-22T03:04:05.554433Z"},
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-ip-172-16-52-10",
    }


def autoscaler_event(pod: dict, reason: str = "TriggeredScaleUp", message: str = SCALE_UP) -> dict:
    """What the cluster-autoscaler's core/v1 recorder writes on the pod."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod['metadata']['name']}.187a2b3c4d5e7001", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": NAMESPACE,
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
            "resourceVersion": "812",
        },
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": "cluster-autoscaler"},
        "reportingComponent": "cluster-autoscaler",
        "firstTimestamp": "2026-11-22T03:00:15Z",
        "lastTimestamp": "2026-11-22T03:00:15Z",
        "count": 1,
    }


def node(index: int, cpu: str = "15890m", memory: str = "28015228Ki", taints: list | None = None) -> dict:
    """A managed c5.4xlarge node as the API returns it (allocatable as the kubelet reports it)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"ip-10-0-1-{index}.us-west-2.compute.internal",
            "labels": {
                "node.kubernetes.io/instance-type": INSTANCE_TYPE,
                "kubernetes.io/os": "linux",
                "eks.amazonaws.com/nodegroup": "elastic-training-nodes",
            },
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-0{index}", **({"taints": taints} if taints else {})},
        "status": {
            "capacity": {"cpu": "16", "memory": "31792220Ki", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
        },
    }


def test_a_worker_no_node_can_hold_fails_the_run_within_minutes_quoting_the_scheduler(cluster_env):
    start, _ = cluster_env
    workers = [pending_worker(0), pending_worker(1)]
    server, kubeconfig = start([RUNNING], workers, [scheduler_event(w) for w in workers])
    server.nodes = [node(1), node(2)]
    clock = Clock()

    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=2 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )

    assert verdict.state == "failed"
    assert verdict.message == (
        f"ElasticJob {NAMESPACE}/{NAME}: worker {NAME}-worker-0 can never be scheduled: no node of the cluster's 2 can "
        f"hold it (it requests cpu=64000m, memory=24576Mi); the scheduler says: {INSUFFICIENT_CPU}. The ElasticJob "
        f"{NAMESPACE}/{NAME} was deleted, so its pods stop (run `pulumi up --refresh` to create it again)"
    )
    assert scheduling.UNSCHEDULABLE_GRACE_SECONDS <= clock.now < scheduling.UNSCHEDULABLE_GRACE_SECONDS + 60
    assert ("DELETE", f"/apis/elastic.pytorch.org/v1alpha1/namespaces/{NAMESPACE}/elasticjobs/{NAME}") in [
        (m, p) for m, p, _, _ in server.requests
    ]
    events = [q for m, p, q, _ in server.requests if p.endswith("/events")]
    assert {"fieldSelector": "involvedObject.kind=Pod"} in events
    assert any(p == "/api/v1/nodes" for _, p, _, _ in server.requests)


def test_capacity_on_its_way_keeps_the_wait_until_the_worker_runs(cluster_env):
    start, _ = cluster_env
    workers = [pending_worker(0), pending_worker(1)]
    # The scale-up takes 12 minutes; then both workers run and the job succeeds.
    polls_before = 12 * 60 // 15 + 2
    server, kubeconfig = start(
        [*[RUNNING] * polls_before, SUCCEEDED],
        workers,
        [*[scheduler_event(w) for w in workers], *[autoscaler_event(w) for w in workers]],
    )
    server.nodes = [node(1), node(2)]
    clock = Clock()
    clock.at(12 * 60, lambda: server.pods.__setitem__(slice(None), [running_worker(0), running_worker(1)]))

    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=2 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )

    assert verdict.state == "succeeded", verdict.message
    assert not [m for m, *_ in server.requests if m == "DELETE"]


def test_capacity_that_never_comes_fails_the_run_at_the_bound(cluster_env):
    start, _ = cluster_env
    workers = [pending_worker(0)]
    server, kubeconfig = start([RUNNING], workers, [scheduler_event(workers[0]), autoscaler_event(workers[0])])
    server.nodes = [node(1)]
    clock = Clock()

    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=2 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )

    assert verdict.message.startswith(
        f"ElasticJob {NAMESPACE}/{NAME}: worker {NAME}-worker-0 was not scheduled in 30 minutes, waiting for capacity "
        f"that did not come ({SCALE_UP}); the scheduler says: {INSUFFICIENT_CPU}. The ElasticJob"
    )
    assert scheduling.CAPACITY_WAIT_SECONDS <= clock.now < scheduling.CAPACITY_WAIT_SECONDS + 60


@pytest.mark.parametrize("taint, joins", [("node.kubernetes.io/not-ready", True), ("example.com/dedicated", False)])
def test_a_node_still_joining_is_capacity_on_its_way(cluster_env, taint, joins):
    """The only node that could hold the worker is not ready yet: waiting; a taint the worker does not
    tolerate and that no controller lifts is no capacity at all."""
    start, _ = cluster_env
    message = (
        f"0/1 nodes are available: 1 node(s) had untolerated taint {{{taint}: }}. preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling."
    )
    worker = pending_worker(0, cpu="15", message=message)
    server, kubeconfig = start([*[RUNNING] * 30, SUCCEEDED], [worker], [scheduler_event(worker, message)])
    server.nodes = [node(1, taints=[{"key": taint, "effect": "NoSchedule"}])]
    clock = Clock()
    if joins:
        clock.at(6 * 60, lambda: server.pods.__setitem__(slice(None), [running_worker(0)]))

    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=2 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )
    if joins:
        assert verdict.state == "succeeded", verdict.message
    else:
        assert verdict.message.startswith(
            f"ElasticJob {NAMESPACE}/{NAME}: worker {NAME}-worker-0 can never be "
            f"scheduled: no node of the cluster's 1 can hold it (it requests cpu=15000m, "
            f"memory=24576Mi); the scheduler says: {message}"
        )


def test_nodes_the_user_may_not_list_leave_only_the_bound(cluster_env):
    """target existing: a kubeconfig without `list nodes` (403): the wait cannot tell "never" from
    "later", so it waits to the bound and then says so, with the scheduler's reason."""
    start, _ = cluster_env
    worker = pending_worker(0)
    server, kubeconfig = start([RUNNING], [worker], [scheduler_event(worker)])
    server.nodes = (
        403,
        _status(
            403,
            "Forbidden",
            'nodes is forbidden: User "kind" cannot list resource "nodes" in API group "" at the cluster scope',
        ),
    )
    clock = Clock()

    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=2 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )

    assert verdict.message.startswith(
        f"ElasticJob {NAMESPACE}/{NAME}: worker {NAME}-worker-0 was not scheduled in 30 minutes, with no capacity on its "
        f"way; the scheduler says: {INSUFFICIENT_CPU}."
    )
    assert clock.now < scheduling.CAPACITY_WAIT_SECONDS + 60


@pytest.mark.parametrize(
    "reason, message", [("NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached")]
)
def test_an_autoscaler_that_declines_is_no_capacity(cluster_env, reason, message):
    start, _ = cluster_env
    worker = pending_worker(0)
    server, kubeconfig = start(
        [RUNNING], [worker], [scheduler_event(worker), autoscaler_event(worker, reason, message)]
    )
    server.nodes = [node(1)]
    clock = Clock()
    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=2 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )
    assert "can never be scheduled" in verdict.message and clock.now < scheduling.UNSCHEDULABLE_GRACE_SECONDS + 60
