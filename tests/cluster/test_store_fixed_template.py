"""Review rdzv-1 item 1, on the real control plane: a store pod that never becomes Running and Ready (here
Pending: its template asks for a node that does not exist; on a cluster also ImagePullBackOff or
CrashLoopBackOff), then the template fixed, as a `pulumi up` with a corrected stack does.
- under the default podManagementPolicy, OrderedReady (the shape before the fix), the StatefulSet
  controller waits for the broken pod to be Running and Ready before it gets to the rolling update
  that would replace it (processReplica returns while `monotonic`: pkg/controller/statefulset/
  stateful_set_control.go @ v1.35.8): the broken pod stays, and someone must delete it by hand;
- as the stack renders it now, Parallel (infra/specs/elastic.py store_objects): the broken pod is
  replaced by one of the fixed template, which runs; never two store pods at once.
kwok plays the node and runs what is bound to it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kube import apply, wait_until

from infra.specs import elastic, rendezvous_store

IMAGE = "registry.example/trainer@sha256:" + "0" * 64
NODE = "store-template-node"
LABEL = "elastic-training.test/store-template"
POLICIES = ("OrderedReady", "Parallel")
HOLD_SECONDS = 30  # how long OrderedReady must keep the broken pod after the fix


def namespace(policy: str) -> str:
    return f"store-template-{policy.lower()}"


def store_objects(policy: str, node_label_value: str) -> list[dict[str, Any]]:
    """The stack's store objects, its pod asking for nodes labelled LABEL=node_label_value; for
    OrderedReady, with the policy as it was before the fix (the field left out: the default)."""
    objects = elastic.store_objects(namespace(policy), IMAGE, "IfNotPresent")
    (statefulset,) = [o for o in objects if o["kind"] == "StatefulSet"]
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    if policy == "OrderedReady":
        del statefulset["spec"]["podManagementPolicy"]
    statefulset["spec"]["template"]["spec"]["nodeSelector"] = {LABEL: node_label_value}
    return objects


def store_pods(plane, policy: str) -> list[dict[str, Any]]:
    return json.loads(
        plane.kubectl(
            "get", "pods", "-n", namespace(policy), "-l", f"app.kubernetes.io/name={elastic.STORE_NAME}", "-o", "json"
        ).stdout
    )["items"]


def test_a_fixed_template_replaces_a_broken_store_pod_with_parallel_only(control_plane, record_property):
    plane = control_plane
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {
                "kubernetes.io/hostname": NODE,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                LABEL: "true",
            },
        },
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }
    path = plane.dir / "store-template-nodes.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    try:
        apply(plane, [rendezvous_store.priority_class()])
        plane.apply_nodes(str(path))
        broken_uid = {}
        for policy in POLICIES:
            apply(plane, [elastic.namespace(namespace(policy), "workloads", elastic.WORKLOAD_NAMESPACE_ENFORCE)])
            apply(plane, store_objects(policy, "no-such-node"))
        for policy in POLICIES:
            pending = wait_until(
                f"the {policy} store pod Pending",
                lambda policy=policy: next(
                    (p for p in store_pods(plane, policy) if p["status"].get("phase") == "Pending"), None
                ),
                timeout=60,
            )
            broken_uid[policy] = pending["metadata"]["uid"]
        fixed_at = time.monotonic()
        for policy in POLICIES:
            apply(plane, store_objects(policy, "true"))

        seen: dict[str, list] = {policy: [] for policy in POLICIES}

        def replaced() -> dict[str, Any] | None:
            for policy in POLICIES:
                seen[policy].append(
                    [(p["metadata"]["uid"], p["status"].get("phase")) for p in store_pods(plane, policy)]
                )
            return next(
                (
                    p
                    for p in store_pods(plane, "Parallel")
                    if p["metadata"]["uid"] != broken_uid["Parallel"]
                    and p["spec"].get("nodeName") == NODE
                    and p["status"].get("phase") == "Running"
                ),
                None,
            )

        # Now: Parallel replaces the broken pod with one of the fixed template, which runs.
        back = wait_until("the Parallel store running from the fixed template", replaced, timeout=90, every=1)
        record_property("parallel_store_running_after_fix_seconds", round(time.monotonic() - fixed_at, 1))
        assert back["metadata"]["name"] == f"{elastic.STORE_NAME}-0"
        assert all(len(observed) <= 1 for observed in seen["Parallel"]), seen["Parallel"]
        # Before: OrderedReady still holds the broken pod, HOLD_SECONDS after the fix.
        while time.monotonic() - fixed_at < HOLD_SECONDS:
            time.sleep(2)
        (stuck,) = store_pods(plane, "OrderedReady")
        assert stuck["metadata"]["uid"] == broken_uid["OrderedReady"] and stuck["status"].get("phase") == "Pending", \
            seen["OrderedReady"][-3:]  # fmt: skip
    finally:
        for policy in POLICIES:
            plane.kubectl("delete", "namespace", namespace(policy), "--wait=false", check=False)
        plane.kubectl("delete", "node", NODE, "--ignore-not-found", check=False)
        for policy in POLICIES:
            wait_until(
                f"namespace {namespace(policy)} gone",
                lambda policy=policy: plane.kubectl("get", "namespace", namespace(policy), check=False).returncode != 0,
                timeout=120,
            )
