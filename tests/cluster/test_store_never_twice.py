"""Issue 36 item 5, on the real control plane: the rendezvous store's node stops answering (its kubelet's
heartbeats stop). Kubernetes' node lifecycle controller marks it Unknown after 50 s (its default
node-monitor-grace-period, pkg/controller/nodelifecycle/config/v1alpha1/defaults.go @ v1.35.8) and taints it
unreachable.
- the store as a Deployment with a 30 s toleration of that taint (the shape before this fix): the taint
  eviction controller deletes the pod after 30 s; it stays Terminating, since no kubelet confirms it
  stopped (it may well still be serving the agents that hold connections to it), and the ReplicaSet
  starts a second store at once on another node (a pod with a deletionTimestamp is not active:
  upstream-facts-4 fact 10). Two stores;
- the store as the stack renders it now, a StatefulSet of one that tolerates the taint without end
  (infra/specs/elastic.py store_objects; review rdzv-1 item 3): its pod is not evicted at all (an
  eviction would move nothing, and would kill the store of a node that comes back), and no second pod
  starts while the first is not confirmed gone; once the Node is deleted (what EKS does for a
  terminated instance; by hand: docs/troubleshooting.md), the pod garbage collector removes the orphaned
  pod (40 s quarantine, pkg/controller/podgc/gc_controller.go @ v1.35.8) and the store starts elsewhere.

The two nodes that die are played here (a Node, its Lease renewed, its pods marked Running: what a
kubelet does that matters to the control plane); kwok, which renews the Leases of every node it plays,
plays the healthy one. Each dying node has a zone of its own, so that the node lifecycle controller
evicts at its normal rate (a zone only partly disrupted in a cluster under 50 nodes gets no eviction:
pkg/controller/nodelifecycle/node_lifecycle_controller.go setLimiterInZone, ReducedQPSFunc).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from typing import Any

from cluster_nodes import KWOK_ANNOTATION
from kube import apply, wait_until

from infra.specs import elastic, rendezvous_store

IMAGE = "registry.example/trainer@sha256:" + "0" * 64
KINDS = ("Deployment", "StatefulSet")
HEALTHY = "store-test-healthy"
SELECTOR = "elastic-training.test/store-test-{kind}"  # a label per kind: each store starts on its own dying node
HOLD_SECONDS = 60  # how long the StatefulSet must show no second pod after the first was deleted


def dying(kind: str) -> str:
    return f"store-test-dying-{kind.lower()}"


def namespace(kind: str) -> str:
    return f"store-twice-{kind.lower()}"


def _label(kind: str) -> str:
    return SELECTOR.format(kind=kind.lower())


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # MicroTime: exactly 6 digits


def _node(
    name: str, labels: dict[str, str], annotations: dict[str, str] | None = None, unschedulable: bool = False
) -> dict[str, Any]:
    now = _now()[:19] + "Z"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **labels,
            },
            "annotations": annotations or {},
        },
        "spec": {"unschedulable": unschedulable},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "played by the test",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.35.8",
                "kubeProxyVersion": "v1.35.8",
                "containerRuntimeVersion": "played",
                "kernelVersion": "played",
                "osImage": "played",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        },
    }


class PlayedKubelet(threading.Thread):
    """The kubelet of one node, as far as the control plane sees it: the node's Lease renewed every 5 s
    (kubelet: a quarter of its 40 s), and the pods bound to it marked Running and Ready. `stop()` is the
    node going silent: nothing more is written, the pods keep their last status."""

    def __init__(self, plane, node: str):
        super().__init__(daemon=True)
        self.plane, self.node, self.silent, self.errors = plane, node, threading.Event(), []

    def run(self) -> None:
        while not self.silent.is_set():
            try:
                self._renew()
                self._run_pods()
            except Exception as error:  # noqa: BLE001 - reported by the test; the kubelet goes on
                self.errors.append(repr(error))
            self.silent.wait(5)

    def stop(self) -> None:
        self.silent.set()
        self.join()

    def _renew(self) -> None:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": self.node, "leaseDurationSeconds": 40, "renewTime": _now()},
        }
        self.plane.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=played-kubelet",
            "-f",
            "-",
            input=json.dumps(lease),
        )

    def _run_pods(self) -> None:
        pods = json.loads(
            self.plane.kubectl(
                "get", "pods", "-A", "--field-selector", f"spec.nodeName={self.node}", "-o", "json"
            ).stdout
        )["items"]
        for pod in pods:
            if pod["status"].get("phase") == "Running" or pod["metadata"].get("deletionTimestamp"):
                continue
            now = _now()[:19] + "Z"
            status = {
                "status": {
                    "phase": "Running",
                    "podIP": "10.0.0.9",
                    "hostIP": "10.0.0.8",
                    "startTime": now,
                    "conditions": [
                        {"type": t, "status": "True", "lastTransitionTime": now}
                        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                    ],
                    "containerStatuses": [
                        {
                            "name": c["name"],
                            "image": c["image"],
                            "imageID": "",
                            "ready": True,
                            "started": True,
                            "restartCount": 0,
                            "state": {"running": {"startedAt": now}},
                        }
                        for c in pod["spec"]["containers"]
                    ],
                }
            }
            self.plane.kubectl(
                "patch",
                "pod",
                pod["metadata"]["name"],
                "-n",
                pod["metadata"]["namespace"],
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps(status),
            )


def store_objects(kind: str) -> list[dict[str, Any]]:
    """The stack's store objects in this kind's namespace, its pod pinned to this test's nodes; for
    Deployment, the workload as it was before this fix (infra/specs/elastic.py _one_pod_deployment), with
    its 30 s tolerations."""
    ns = namespace(kind)
    objects = elastic.store_objects(ns, IMAGE, "IfNotPresent")
    (statefulset,) = [o for o in objects if o["kind"] == "StatefulSet"]
    statefulset["spec"]["template"]["spec"]["nodeSelector"] = {_label(kind): "true"}
    if kind == "Deployment":
        spec = statefulset["spec"]
        for toleration in spec["template"]["spec"]["tolerations"]:
            toleration["tolerationSeconds"] = 30
        workload = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": statefulset["metadata"],
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": spec["selector"],
                "template": spec["template"],
            },
        }
        objects = [o if o is not statefulset else workload for o in objects]
    return objects


def store_pods(plane, kind: str) -> list[dict[str, Any]]:
    return json.loads(
        plane.kubectl(
            "get", "pods", "-n", namespace(kind), "-l", f"app.kubernetes.io/name={elastic.STORE_NAME}", "-o", "json"
        ).stdout
    )["items"]


def summary(pods: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    return [
        (
            p["metadata"]["name"],
            p["spec"].get("nodeName", ""),
            p["status"].get("phase", ""),
            bool(p["metadata"].get("deletionTimestamp")),
        )
        for p in pods
    ]


def test_a_lost_node_never_leaves_two_stores_with_the_statefulset(control_plane, record_property):
    plane = control_plane
    kubelets = {kind: PlayedKubelet(plane, dying(kind)) for kind in KINDS}
    try:
        apply(plane, [rendezvous_store.priority_class()])
        for kind in KINDS:
            apply(
                plane,
                [_node(dying(kind), {_label(kind): "true", "topology.kubernetes.io/zone": f"zone-{kind.lower()}"})],
            )
            kubelets[kind].start()
        # the healthy node, cordoned until both stores run on their dying nodes
        healthy = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                _node(
                    HEALTHY,
                    {**{_label(kind): "true" for kind in KINDS}, "topology.kubernetes.io/zone": "zone-healthy"},
                    dict(KWOK_ANNOTATION),
                    unschedulable=True,
                )
            ],
        }
        path = plane.dir / "store-test-nodes.json"
        path.write_text(json.dumps(healthy))
        plane.apply_nodes(str(path))
        for kind in KINDS:
            apply(plane, [elastic.namespace(namespace(kind), "workloads", elastic.WORKLOAD_NAMESPACE_ENFORCE)])
            apply(plane, store_objects(kind))
        for kind in KINDS:
            wait_until(
                f"the {kind}'s store running on {dying(kind)}",
                lambda kind=kind: (
                    summary(store_pods(plane, kind))
                    and all(s[1] == dying(kind) and s[2] == "Running" for s in summary(store_pods(plane, kind)))
                ),
                timeout=90,
            )
        plane.kubectl("uncordon", HEALTHY)

        silent_at = time.monotonic()
        for kind in KINDS:
            kubelets[kind].stop()
        first_uid = {kind: store_pods(plane, kind)[0]["metadata"]["uid"] for kind in KINDS}
        seen: dict[str, list] = {kind: [] for kind in KINDS}
        deleted_at: dict[str, float] = {}
        two_stores_at: float | None = None
        deadline = silent_at + 300
        while time.monotonic() < deadline:
            for kind in KINDS:
                pods = store_pods(plane, kind)
                seen[kind].append(summary(pods))
                if kind not in deleted_at and any(p["metadata"].get("deletionTimestamp") for p in pods):
                    deleted_at[kind] = time.monotonic()
            deployment = seen["Deployment"][-1]
            if (
                two_stores_at is None
                and len(deployment) == 2
                and any(s[3] for s in deployment)
                and any(s[1] == HEALTHY and s[2] == "Running" and not s[3] for s in deployment)
            ):
                two_stores_at = time.monotonic()
            if two_stores_at and time.monotonic() - deleted_at["Deployment"] >= HOLD_SECONDS:
                break
            time.sleep(2)

        # Before: the Deployment ran a second store beside the first, which no kubelet confirmed stopped.
        assert two_stores_at is not None, seen["Deployment"][-5:]
        record_property("deployment_second_store_after_silence_seconds", round(two_stores_at - silent_at, 1))
        # Now: the StatefulSet's pod was not evicted (HOLD_SECONDS after the Deployment's was), and no other pod came.
        assert "StatefulSet" not in deleted_at, seen["StatefulSet"][-5:]
        assert all(len(observed) <= 1 for observed in seen["StatefulSet"]), seen["StatefulSet"]
        (only,) = store_pods(plane, "StatefulSet")
        assert only["metadata"]["uid"] == first_uid["StatefulSet"] and only["spec"]["nodeName"] == dying("StatefulSet")

        # The node confirmed gone (EKS deletes the Node of a terminated instance): the store starts elsewhere.
        confirmed = time.monotonic()
        plane.kubectl("delete", "node", dying("StatefulSet"), "--wait=false")
        back = wait_until(
            "the StatefulSet's store running again on the healthy node",
            lambda: next(
                (
                    p
                    for p in store_pods(plane, "StatefulSet")
                    if p["metadata"]["uid"] != first_uid["StatefulSet"]
                    and p["spec"].get("nodeName") == HEALTHY
                    and p["status"].get("phase") == "Running"
                ),
                None,
            ),
            timeout=150,
        )
        record_property("statefulset_store_back_after_node_deleted_seconds", round(time.monotonic() - confirmed, 1))
        assert back["metadata"]["name"] == f"{elastic.STORE_NAME}-0"
        assert all(not kubelet.errors for kubelet in kubelets.values()), {k: v.errors[-3:] for k, v in kubelets.items()}
    finally:
        for kubelet in kubelets.values():
            if kubelet.is_alive():
                kubelet.stop()
        for kind in KINDS:  # no kubelet will ever confirm these: force them out, then the rest goes
            plane.kubectl("delete", "pods", "--all", "-n", namespace(kind), "--force", "--grace-period=0", check=False)
            plane.kubectl("delete", "namespace", namespace(kind), "--wait=false", check=False)
        plane.kubectl("delete", "node", *(dying(kind) for kind in KINDS), HEALTHY, "--ignore-not-found", check=False)
        for kind in KINDS:
            wait_until(
                f"namespace {namespace(kind)} gone",
                lambda kind=kind: plane.kubectl("get", "namespace", namespace(kind), check=False).returncode != 0,
                timeout=120,
            )
