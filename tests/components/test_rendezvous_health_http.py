"""The training wait reads the rendezvous store's StatefulSet through the real Kubernetes client against
the HTTPS test server of test_completion_http.py: a store that went away and came back leaves the
run running; one that stays away fails it, in one line that names the store.

Shapes, as the API server returns them: the store's StatefulSet is the one the stack renders
(infra/specs/elastic.py), with the status the StatefulSet controller writes (apps/v1
StatefulSetStatus: readyReplicas and availableReplicas absent while no pod is ready, the revisions);
the store's pod (ordinal 0) is Pending with the PodScheduled=False condition kube-scheduler sets, whose
message, when no node has room for it (every system node full or gone), carries the noderesources
plugin's reason "Insufficient memory" in the scheduler's "0/N nodes are available: ..." form; a worker
that gives up on the store (jobs/elastic/torchrun.py) leaves a failed pod whose worker exited 138,
which the ElasticJob's Job keeps and replaces.
"""

from __future__ import annotations

import copy

from infra.components import rendezvous_health
from infra.components.completion import KubernetesCluster, wait_for
from infra.specs import elastic
from test_completion_http import Clock, JOB_LABEL, NAME, NAMESPACE, UID, _elasticjob, _pod, cluster_env  # noqa: F401

RUNNING = (200, _elasticjob(("Running", "True", "ElasticJobRunning")))
SUCCEEDED = (200, _elasticjob(("Running", "False", "ElasticJobRunning"), ("Succeeded", "True", "ElasticJobSucceeded")))
NO_ROOM = "0/2 nodes are available: 2 Insufficient memory."


IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "0" * 64
STORE_POD = "rendezvous-store-0"


def store_statefulset(ready: bool) -> dict:
    statefulset = copy.deepcopy(
        {o["kind"]: o for o in elastic.store_objects(NAMESPACE, IMAGE, "IfNotPresent")}["StatefulSet"]
    )
    statefulset["metadata"].update(uid="store-uid", generation=1, resourceVersion="900")
    # apps/v1 StatefulSetStatus: readyReplicas and availableReplicas are left out when zero.
    statefulset["status"] = {
        "observedGeneration": 1,
        "replicas": 1,
        "currentReplicas": 1,
        "updatedReplicas": 1,
        "currentRevision": "rendezvous-store-5d4f8c7b9",
        "updateRevision": "rendezvous-store-5d4f8c7b9",
        "collisionCount": 0,
        **({"readyReplicas": 1, "availableReplicas": 1} if ready else {}),
    }
    return statefulset


def pending_store_pod() -> dict:
    template = store_statefulset(False)["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": STORE_POD,
            "namespace": NAMESPACE,
            "uid": "store-pod",
            "labels": template["metadata"]["labels"],
        },
        "spec": template["spec"],
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": NO_ROOM,
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-22T03:10:05Z",
                }
            ],
        },
    }


def gave_up_pods(count: int) -> list[dict]:
    """Worker pods that exited 138 (replaced by the Job, which keeps them)."""
    return [_pod(10 + i, "Failed", 138) for i in range(count)]


def test_a_store_that_went_away_and_came_back_leaves_the_run_running(cluster_env):
    start, _ = cluster_env
    workers = [_pod(0, "Running"), _pod(1, "Running")]
    server, kubeconfig = start([RUNNING], workers, [])
    server.statefulsets[elastic.STORE_NAME] = store_statefulset(ready=True)
    clock = Clock()

    def store_gone():
        server.statefulsets[elastic.STORE_NAME] = store_statefulset(ready=False)
        server.pods.append(pending_store_pod())
        server.pods.extend(gave_up_pods(2))  # away past the workers' own bound: they gave up once

    def store_back():
        server.statefulsets[elastic.STORE_NAME] = store_statefulset(ready=True)
        server.pods.remove(next(p for p in server.pods if p["metadata"]["name"] == STORE_POD))

    clock.at(60, store_gone)
    clock.at(60 + rendezvous_health.STORE_DOWN_SECONDS - 60, store_back)  # a minute short of the bound
    clock.at(60 + rendezvous_health.STORE_DOWN_SECONDS + 600, lambda: server.answers.__setitem__(0, SUCCEEDED))

    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=4 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )

    assert verdict.state == "succeeded", verdict.message
    assert not [r for r in server.requests if r[0] == "DELETE"]  # the run was never stopped
    store_reads = [r for r in server.requests if r[1].endswith(f"/statefulsets/{elastic.STORE_NAME}")]
    assert store_reads and all(r[3] for r in store_reads)  # read with the same credentials as the job


def test_a_store_away_past_the_bound_fails_the_run_in_one_line_that_names_it(cluster_env):
    start, _ = cluster_env
    server, kubeconfig = start(
        [RUNNING], [_pod(0, "Running"), _pod(1, "Running"), pending_store_pod(), *gave_up_pods(2)], []
    )
    server.statefulsets[elastic.STORE_NAME] = store_statefulset(ready=False)
    clock = Clock()

    verdict = wait_for(
        KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL),
        timeout_seconds=4 * 3600,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )

    assert verdict.state == "failed"
    first_line = verdict.message.splitlines()[0]
    assert first_line == (
        f"ElasticJob {NAMESPACE}/{NAME}: the rendezvous store rendezvous-store:29400 (StatefulSet {NAMESPACE}/rendezvous-store) "
        f"has had no ready pod for 15 minutes (pod {STORE_POD} Pending: {NO_ROOM}); workers gave up on it "
        f"(exit 138) 2 times; the workers cannot form a group without it. The ElasticJob {NAMESPACE}/{NAME} was "
        f"deleted, so its pods stop (run `pulumi up --refresh` to create it again)"
    )
    assert verdict.message == first_line  # no worker log to append: no worker failed for good
    assert rendezvous_health.STORE_DOWN_SECONDS <= clock.now < rendezvous_health.STORE_DOWN_SECONDS + 60
    assert [r[1] for r in server.requests if r[0] == "DELETE"] == [
        f"/apis/elastic.pytorch.org/v1alpha1/namespaces/{NAMESPACE}/elasticjobs/{NAME}"
    ]
    store_pods = [
        r
        for r in server.requests
        if r[1].endswith("/pods") and r[2].get("labelSelector") == "app.kubernetes.io/name=rendezvous-store"
    ]
    assert store_pods  # the reason comes from the store's own pod


def test_a_store_pod_on_a_node_that_stopped_answering_is_named_with_its_node():
    """Review rdzv-1 item 3: the store's pod is no longer evicted from such a node (it would only stay
    Terminating), so the wait names the node and what ends it: the Node's deletion."""
    pod = pending_store_pod()
    pod["spec"]["nodeName"] = "ip-10-0-1-5.ec2.internal"
    # what the node lifecycle controller leaves on the pod of a NotReady node (MarkPodsNotReady)
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    state = rendezvous_health.store_state(store_statefulset(ready=False), [pod])
    assert state == rendezvous_health.StoreState(
        False,
        f"pod {STORE_POD} Running: not ready on node ip-10-0-1-5.ec2.internal "
        "(if that node stopped answering, a new store pod starts once the "
        "Node is deleted; docs/troubleshooting.md)",
    )


def test_the_store_check_counts_only_the_workers_138_exits():
    sidecar = _pod(20, "Failed", 143)
    sidecar["status"]["containerStatuses"].append(
        {**sidecar["status"]["containerStatuses"][0], "name": "proxy", "state": {"terminated": {"exitCode": 138}}}
    )
    events = [*gave_up_pods(3), _pod(21, "Failed", 143), _pod(22, "Running"), sidecar]
    assert rendezvous_health.gave_up_count(events) == 3
    watch = rendezvous_health.StoreWatch(NAMESPACE)
    down = rendezvous_health.StoreState(False, "no store pod")
    assert watch.problem(down, events, 0) is None
    assert watch.problem(None, events, rendezvous_health.STORE_DOWN_SECONDS - 1) is None  # not known: no reset
    assert "no ready pod for 15 minutes (no store pod); workers gave up on it (exit 138) 3 times" in watch.problem(
        down, events, rendezvous_health.STORE_DOWN_SECONDS
    )
    assert watch.problem(rendezvous_health.StoreState(True), events, rendezvous_health.STORE_DOWN_SECONDS + 1) is None
    assert watch.since is None  # back: the bound starts over


def test_the_wait_gives_the_store_longer_than_the_workers_do():
    """A store the workers outlast (jobs/elastic/rendezvous.py) never fails the run: the wait's bound is the longer."""
    from jobs.elastic import rendezvous

    assert rendezvous.STORE_OUTAGE_TIMEOUT < rendezvous_health.STORE_DOWN_SECONDS
