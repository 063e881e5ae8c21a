"""Issue 37, scenarios of nodes: lost without notice, lost holding the rendezvous store, and reclaimed after
a Spot-style notice; the `local` stack's pipeline on its own --run-pods control plane (scenario.py: its shape),
every verdict checked against the truth read from the shared volume (faults.invariants).

A lost node's instance is gone: the cloud's node lifecycle controller (or Karpenter) deletes its Node, and
PodGC then deletes the pods bound to it (after its 40 s quarantine, pkg/controller/podgc/gc_controller.go
@ v1.35.8), which is when a StatefulSet's pod (the store) can start elsewhere. faults.replace_lost_node does
that and starts a new node in its place, as the node group or Karpenter would.
"""

from __future__ import annotations

import time

import pytest

from faults import (
    a_worker_node,
    evict,
    lose_node,
    node_of,
    pods_of,
    reformed_after,
    replace_lost_node,
    worker_node_with_a_worker,
)
from kube import wait_until
from scenario import begin, end, plane_of_three_nodes

# Issue 37's goal for a group to train again after a node is lost without notice. Measured: 15.2 s with the
# file alone, 19.1 s and 23.8 s with two other control planes' runs beside it on the same two cores (most of
# it is new worker processes importing torch). The test prints the time against the goal and fails past
# REFORMATION_BOUND_SECONDS: a regression (a heartbeat or last-call timeout grown), not a loaded machine.
REFORMATION_GOAL_SECONDS = 20
REFORMATION_BOUND_SECONDS = 40
# How long after an instance is gone its Node is deleted here (the cloud's node lifecycle controller polls
# the EC2 API; Karpenter deletes the Node of an instance it saw terminated).
NODE_DELETED_AFTER_SECONDS = 10


# In the test command; `pytest -m scenarios` runs this tier alone (scripts/chaos.sh: more seeds).
pytestmark = pytest.mark.scenarios


@pytest.fixture(scope="module")
def plane(tools_bin, tmp_path_factory):
    yield from plane_of_three_nodes(tools_bin, tmp_path_factory, "run-pods-node-scenarios")


def test_a_node_lost_without_notice_the_group_re_forms(plane, synth_stack):
    run = begin(plane, synth_stack, "node-lost", "epochs=6")
    node, _ = worker_node_with_a_worker(run)
    lost_at = lose_node(run, node)
    try:
        reformed = wait_until("a group re-formed after the loss", lambda: reformed_after(run, lost_at), timeout=180)
    finally:
        # Until the Node is deleted the Job holds its verdict (SuccessCriteriaMet, one pod terminating), as on
        # a cluster.
        replace_lost_node(run, node)
    end(run, "Succeeded", reformation_seconds=reformed, goal_seconds=REFORMATION_GOAL_SECONDS)
    assert reformed <= REFORMATION_BOUND_SECONDS, f"re-formed {reformed} s after the node loss"


def test_the_store_pod_deleted_then_its_node_lost(plane, synth_stack):
    run = begin(plane, synth_stack, "store-lost", "epochs=8", store_node=a_worker_node(plane))
    store = pods_of(run, "rendezvous-store-")[0]
    plane.kubectl("delete", "pod", store["metadata"]["name"], "-n", run.namespace, "--wait=false")
    new_store = wait_until(
        "a new store running",
        lambda: [
            p
            for p in pods_of(run, "rendezvous-store-")
            if p["metadata"]["uid"] != store["metadata"]["uid"]
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])
        ],
        timeout=120,
    )[0]
    lost = node_of(new_store)
    lost_at = lose_node(run, lost)
    time.sleep(NODE_DELETED_AFTER_SECONDS)
    replace_lost_node(run, lost)
    # The store is kept on a node that stops answering (infra/specs/elastic.py: never two stores); once the
    # Node is deleted, PodGC deletes its pod and the StatefulSet starts the store on another node.
    replaced = wait_until(
        "the store running off the lost node",
        lambda: [p for p in pods_of(run, "rendezvous-store-") if node_of(p) != lost],
        timeout=180,
    )[0]
    end(run, "Succeeded", store_back_after=round(time.time() - lost_at, 1), store_node=node_of(replaced))


def test_a_spot_notice_costs_at_most_one_checkpoint_interval(plane, synth_stack):
    """A Spot interruption as Karpenter handles its notice: the node's worker evicted (SIGTERM, the pod's
    grace period), then the instance reclaimed (the node lost). The worker saves where it is when told to
    stop, so the next group resumes from there: the work lost is at most one checkpoint interval (here
    none), and the run ends Succeeded."""
    run = begin(plane, synth_stack, "spot-notice", "epochs=8")
    node, worker = worker_node_with_a_worker(run)
    noticed_at = time.time()
    evict(run, worker["metadata"]["name"])
    stopped = wait_until(
        "the evicted worker's group stopped",
        lambda: [e for e in run.history() if e.get("event") == "stop" and e["time"] > noticed_at],
        timeout=120,
    )[0]
    wait_until(
        "the evicted worker ended",
        lambda: (
            not [
                p
                for p in run.workers()
                if p["metadata"]["uid"] == worker["metadata"]["uid"]
                and (p.get("status") or {}).get("phase") == "Running"
            ]
        ),
        timeout=120,
    )
    lose_node(run, node)
    replace_lost_node(run, node)
    resumed = wait_until(
        "a group resumed after the notice",
        lambda: [e for e in run.history() if e.get("event") == "start" and e["time"] > stopped["time"]],
        timeout=180,
    )[0]
    end(
        run,
        "Succeeded",
        stopped_after=round(stopped["time"] - noticed_at, 1),
        resumed_after=round(resumed["time"] - stopped["time"], 1),
    )
    # Where the stopped group was (its `stop` line: epochs done, images into the next) is where the next one
    # starts (a checkpoint saved on SIGTERM, or the epoch's own when the stop fell on its end).
    lost = (stopped["epochs_done"], stopped["position"]) > (resumed["epochs_done"], resumed["position"])
    assert not lost, f"the next group resumed from {resumed}, before where the stopped one was ({stopped})"
