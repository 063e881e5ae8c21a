"""Faults put into a run on a --run-pods control plane, each as it happens on a cluster, and the
invariants every run must keep afterwards.

The faults act on what is real here: pods (deleted, evicted through the Eviction API), processes (a
container's main process or torchrun's worker killed with SIGKILL, as the OOM killer or a crash would),
nodes (lost without notice: control_plane.lose_node, then deleted as the cloud's node lifecycle
controller does once the instance is gone), the ElasticJob (workers raised).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from kube import wait_until
from run_pods_plane import add_node
from stack_run import StackRun, index_of

CONTROL_PLANE_NODE = "elastic-training-control-plane"
# The most of one core the controller may take over its life (stack_run.controller_cpu_share): it waits on
# the API between reconciles, and shares its node with the training. Measured in the scenarios on 2 cores:
# 0.5 % to 2.3 % (the most with the API server restarted under it); a busy loop would take 50 % or more.
CONTROLLER_CPU_SHARE = 0.10


# -- processes ----------------------------------------------------------------------------------------
def main_pid(run: StackRun, pod_name: str, container: str) -> int:
    pid_files = list((run.plane.dir / "pods").glob(f"{run.namespace}_{pod_name}_*/{container}.pid"))
    assert pid_files, f"no process of {pod_name}"
    return int(pid_files[0].read_text())


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_training_process(run: StackRun, pod_name: str) -> int:
    """SIGKILL of torchrun's worker process (jobs.training.train) in this pod: a crash torchrun sees."""
    pid = main_pid(run, pod_name, "elasticjob-worker")
    workers = wait_until(
        f"{pod_name}'s training process",
        lambda: [p for p in descendants(pid) if "jobs.training.train" in cmdline(p) and "torchrun" not in cmdline(p)],
        timeout=120,
    )
    os.kill(workers[0], signal.SIGKILL)
    return workers[0]


def crash_container(run: StackRun, pod_name: str, container: str) -> None:
    """SIGKILL of a container's main process (exit 137, as an OOM kill)."""
    os.kill(main_pid(run, pod_name, container), signal.SIGKILL)


# -- pods and nodes -----------------------------------------------------------------------------------
def evict(run: StackRun, pod_name: str) -> None:
    """The Eviction API, as a drain does: the disruption budget is checked, the pod gets DisruptionTarget."""
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod_name, "namespace": run.namespace},
    }
    result = run.plane.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{run.namespace}/pods/{pod_name}/eviction",
        "-f",
        "-",
        input=json.dumps(eviction),
        check=False,
    )
    assert result.returncode == 0, result.stderr


def node_of(pod: dict[str, Any]) -> str:
    return pod["spec"]["nodeName"]


def pods_of(run: StackRun, prefix: str) -> list[dict[str, Any]]:
    found = run.get("pods") or {"items": []}
    return [
        p
        for p in found["items"]
        if p["metadata"]["name"].startswith(prefix)
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") == "Running"
    ]


def lose_node(run: StackRun, node: str, delete_after: float | None = None) -> float:
    """The node lost without notice; with `delete_after`, its Node object deleted that many seconds later,
    as the cloud node lifecycle controller (or Karpenter) does when the instance is gone, after which
    PodGC fails its pods and their controllers replace them. Returns the wall-clock time of the loss."""
    lost_at = time.time()
    run.plane.lose_node(node)
    if delete_after is not None:
        time.sleep(delete_after)
        run.plane.kubectl("delete", "node", node, "--wait=false")
    return lost_at


def replace_lost_node(run: StackRun, node: str) -> str:
    """After a scenario: the lost node's Node deleted (as the cloud's node lifecycle controller does) and a
    new node in its place (as Karpenter or the node group would launch), so the next scenario has as many."""
    run.plane.kubectl("delete", "node", node, "--wait=false")
    name = f"{node.split('-r')[0]}-r{int(time.time()) % 100000}"
    add_node(run.plane, name)
    return name


def worker_node_with_a_worker(run: StackRun) -> tuple[str, dict[str, Any]]:
    """A node other than the control plane's that runs a worker and not the store (the controller stays on
    the control plane's node, the store where pin_components put it): losing it loses a worker only."""
    stores = {node_of(p) for p in pods_of(run, "rendezvous-store-")}
    for worker in run.running_workers():
        if node_of(worker) != CONTROL_PLANE_NODE and node_of(worker) not in stores:
            return node_of(worker), worker
    raise AssertionError(
        f"no worker off {CONTROL_PLANE_NODE} and the store's node {stores}: "
        f"{[node_of(w) for w in run.running_workers()]}"
    )


def a_worker_node(plane) -> str:
    """A node of the plane other than the control plane's, as it is now (earlier scenarios replace lost nodes
    with new names)."""
    names = sorted(n.removeprefix("node/") for n in plane.kubectl("get", "nodes", "-o", "name").stdout.split())
    return next(n for n in names if n != CONTROL_PLANE_NODE)


def pin_components(run: StackRun, store_node: str = CONTROL_PLANE_NODE) -> None:
    """The controller (a Deployment) and the store (the StatefulSet rendezvous-store) on the nodes a test
    means: the controller on the control plane's node; the store on `store_node`, by excluding every other
    node there is now (a preference alone was outscored by the scheduler's spreading), so that a node that
    replaces `store_node` once it is lost is where the store may start next."""
    others = [
        name
        for name in run.plane.kubectl("get", "nodes", "-o", "name").stdout.split()
        if name.removeprefix("node/") != store_node
    ]
    pinned = set()
    for manifest in run.manifests:
        name = manifest["metadata"]["name"]
        if (manifest["kind"], name) == ("Deployment", "elasticjob-controller"):
            manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": CONTROL_PLANE_NODE}
            pinned.add(name)
        elif (manifest["kind"], name) == ("StatefulSet", "rendezvous-store"):
            manifest["spec"]["template"]["spec"]["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "NotIn",
                                        "values": [n.removeprefix("node/") for n in others],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
            pinned.add(name)
    assert pinned == {"elasticjob-controller", "rendezvous-store"}, f"pinned only {pinned}: the stack's shapes changed"


# -- what a run must keep ---------------------------------------------------------------------------
def invariants(run: StackRun, verdict: str, workers_crashed: bool = False) -> list[str]:
    """What no run may break, whatever happened to it: its condition is the truth (Succeeded exactly when
    model.pt is written and the last epoch is in the history), one group writes the history at a time, no
    component crashed (a traceback or a Go panic in a log: the control plane's, the controller's, the
    store's; and the workers' too unless the test crashed them on purpose), the controller's CPU bounded."""
    broken = []
    truth = run.truth()
    if (verdict == "Succeeded") != truth:
        broken.append(
            f"verdict {verdict} but the truth is {'finished' if truth else 'not finished'}: "
            f"model.pt {'written' if (run.run_dir / 'model.pt').is_file() else 'missing'}, "
            f"epochs done {run.epochs_done()} of {run.epochs}"
        )
    if run.rounds_interleave():
        broken.append(f"two groups wrote the history at once: {run.history()}")
    crashed = [log for log in run.crashes() if not (workers_crashed and "_train-" in Path(log).parent.name)]
    if crashed:
        broken.append(f"crashes in: {crashed}")
    cpu = run.controller_cpu_share()
    if cpu > CONTROLLER_CPU_SHARE:
        broken.append(f"the controller took {cpu:.0%} of a core over its life (at most {CONTROLLER_CPU_SHARE:.0%})")
    return broken


def replacement_of(run: StackRun, victim: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        p
        for p in run.running_workers()
        if index_of(p) == index_of(victim) and p["metadata"]["uid"] != victim["metadata"]["uid"]
    ]


def reformed_after(run: StackRun, wall_time: float) -> float | None:
    """Seconds from `wall_time` to the first group started after it (its `start` line in the history)."""
    starts = [e["time"] for e in run.history() if e.get("event") == "start" and e["time"] > wall_time]
    return round(min(starts) - wall_time, 1) if starts else None
