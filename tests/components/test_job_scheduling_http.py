"""The Jobs' guard (infra/components/job_scheduling.py) through the real Kubernetes client against the
HTTPS test server of test_completion_http.py: a Job pod no node can hold ends the Job within
minutes, with one line quoting the scheduler; a Job that runs is left alone.

The Job is shaped as the API server returns one the Job controller runs (status.startTime, active,
the pod's batch.kubernetes.io/job-name label); the pod and events as in test_scheduling_http.py.
"""

from __future__ import annotations

from infra.components import scheduling
from infra.components.job_scheduling import JOB_NAME_LABEL, JobCluster, guard
from test_completion_http import NAMESPACE, cluster_env  # noqa: F401
from test_scheduling_http import Clock, node, pending_worker, scheduler_event

JOB = "prep-run-1"
INSUFFICIENT_MEMORY = (
    "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: "
    "1 No preemption victims found for incoming pod."
)


def job(*conditions: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": JOB,
            "namespace": NAMESPACE,
            "uid": "job-uid-1",
            "labels": {"app.kubernetes.io/component": "data-prep"},
        },
        "spec": {
            "backoffLimit": 2,
            "activeDeadlineSeconds": 7200,
            "completions": 1,
            "parallelism": 1,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid-1"}},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "prepare", "image": "t"}]}},
        },
        "status": {
            "startTime": "2026-11-22T03:00:00Z",
            "active": 0 if conditions else 1,
            "conditions": [
                {
                    "type": c,
                    "status": "True",
                    "lastProbeTime": "2026-11-22T03:05:00Z",
                    "lastTransitionTime": "2026-11-22T03:05:00Z",
                }
                for c in conditions
            ],
        },
    }


def job_pod(cpu: str = "1", memory: str = "4Gi") -> dict:
    pod = pending_worker(0, cpu=cpu, memory=memory, message=INSUFFICIENT_MEMORY)
    pod["metadata"].update(
        name=f"{JOB}-x7k2p",
        uid="job-pod-1",
        labels={JOB_NAME_LABEL: JOB, "job-name": JOB, "batch.kubernetes.io/controller-uid": "job-uid-1"},
    )
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": JOB,
            "uid": "job-uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    del pod["spec"]["nodeSelector"]  # GPU stacks: the Jobs go to the untainted system nodes
    return pod


def test_a_job_pod_no_node_can_hold_ends_the_job_within_minutes(cluster_env):
    start, _ = cluster_env
    pod = job_pod()
    server, kubeconfig = start([], [pod], [scheduler_event(pod, INSUFFICIENT_MEMORY)])
    server.jobs[JOB] = job()
    server.nodes = [node(1, cpu="1930m", memory="3137536Ki")]  # a c5.large system node: 3064Mi
    clock = Clock()

    line = guard(
        JobCluster(kubeconfig, NAMESPACE, JOB), timeout_seconds=7200, clock=lambda: clock.now, sleep=clock.sleep
    )

    assert line == (
        f"Job {NAMESPACE}/{JOB}: pod {JOB}-x7k2p can never be scheduled: no node of the cluster's 1 can "
        f"hold it (it requests cpu=1000m, memory=4096Mi); the scheduler says: {INSUFFICIENT_MEMORY}. The "
        "Job was ended (activeDeadlineSeconds 1) so `pulumi up` stops; fix the config and run `pulumi up` again"
    )
    assert scheduling.UNSCHEDULABLE_GRACE_SECONDS <= clock.now < scheduling.UNSCHEDULABLE_GRACE_SECONDS + 60
    ((content_type, patch),) = server.patches
    assert patch == {"spec": {"activeDeadlineSeconds": 1}} and content_type.endswith("merge-patch+json")
    pods_query = next(q for m, p, q, _ in server.requests if p.endswith("/pods"))
    assert pods_query == {"labelSelector": f"{JOB_NAME_LABEL}={JOB}"}


def test_a_job_that_runs_and_completes_is_left_alone(cluster_env):
    start, _ = cluster_env
    server, kubeconfig = start([], [], [])
    clock = Clock()
    # Pulumi creates the guard beside the Job: first no Job, then a running one, then a complete one.
    clock.at(30, lambda: server.jobs.__setitem__(JOB, job()))
    clock.at(20 * 60, lambda: server.jobs.__setitem__(JOB, job("Complete")))

    line = guard(
        JobCluster(kubeconfig, NAMESPACE, JOB), timeout_seconds=7200, clock=lambda: clock.now, sleep=clock.sleep
    )

    assert line is None and server.patches == []
    assert 20 * 60 <= clock.now < 20 * 60 + 30
