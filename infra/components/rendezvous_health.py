"""The training wait's view of the rendezvous store (the StatefulSet `rendezvous-store`, a TCPStore
served by jobs/elastic/store_server.py): a run whose store went away and came back goes on; a store that
stays away fails the run, with one line that names it.

What the workers do meanwhile (jobs/elastic/rendezvous.py, jobs/elastic/torchrun.py): they keep training
while the store is away, and put their state back when it returns empty; after `store_outage_timeout`
(600 s by default) each one exits 138 with a line naming the store, which the ElasticJob's Job replaces
without counting it (its podFailurePolicy ignores 138: controller/render.py); the failed pod stays,
with the worker's exit code in its status. No other outcome of our worker exits 138.

So the wait reads the store's own state, not the workers': the StatefulSet's ready replicas (apps/v1
StatefulSetStatus.readyReplicas, absent when zero) and, to say why, its pods (phase, the
PodScheduled condition's message, a waiting container's reason, a pod being deleted: the StatefulSet
starts the store again only once that pod is gone, infra/specs/elastic.py store_objects). A store with no ready pod for
STORE_DOWN_SECONDS fails the run; the workers' 138 exits (their failed pods) are counted in the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from elastic_training import exit_codes
from infra.specs.elastic import STORE_NAME, STORE_SELECTOR, rendezvous_endpoint
from infra.specs.workloads import WORKER_CONTAINER

STATEFULSET = STORE_NAME
# Longer than the workers ride out an outage (jobs.elastic.rendezvous.STORE_OUTAGE_TIMEOUT, 600 s), so a
# store back within that never ends a run. The store has no volume: a pod whose node died is
# replaced on any system node in any zone once that Node is deleted (infra/specs/elastic.py
# store_objects), plus the image's pull there.
STORE_DOWN_SECONDS = 15 * 60
GAVE_UP_CODE = exit_codes.STORE_UNAVAILABLE  # 138: jobs.elastic.torchrun gave up on the store


@dataclass(frozen=True)
class StoreState:
    ready: bool
    detail: str = ""  # why not, from its pods


def read_store(
    call: Callable[..., Any], api_client: Any, namespace: str, errors: tuple[type[Exception], ...]
) -> StoreState | None:
    """The store's state, or None when it cannot be said (the API failed, or there is no StatefulSet at
    all: the stack creates it before any ElasticJob, so that is not this check's business).
    `call` is KubernetesCluster._call, which raises one of `errors`."""
    from kubernetes import client  # imported here: only `pulumi up` needs it

    serialize = api_client.sanitize_for_serialization
    try:
        statefulset = serialize(call(client.AppsV1Api(api_client).read_namespaced_stateful_set, STATEFULSET, namespace))
        selector = ",".join(f"{key}={value}" for key, value in STORE_SELECTOR.items())
        pods = [
            serialize(p)
            for p in call(client.CoreV1Api(api_client).list_namespaced_pod, namespace, label_selector=selector).items
        ]
    except errors:
        return None
    return store_state(statefulset, pods)


def store_state(statefulset: dict[str, Any], pods: list[dict[str, Any]]) -> StoreState:
    if ((statefulset.get("status") or {}).get("readyReplicas") or 0) >= 1:
        return StoreState(True)
    return StoreState(False, "; ".join(_pod_detail(pod) for pod in pods) or "no store pod")


def _pod_detail(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = [f"pod {pod['metadata']['name']} {status.get('phase', '?')}"]
    if pod["metadata"].get("deletionTimestamp"):
        node = (pod.get("spec") or {}).get("nodeName") or "?"
        parts.append(
            f"being deleted on node {node} (a new store pod starts once it is gone: if that node is lost, "
            f"delete the Node; docs/troubleshooting.md)"
        )
    elif status.get("phase") == "Running" and not any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    ):
        # On a node that stopped answering the pod stays, not ready, until its Node is deleted (it tolerates
        # the node's taints without end: infra/specs/elastic.py store_objects).
        node = (pod.get("spec") or {}).get("nodeName") or "?"
        parts.append(
            f"not ready on node {node} (if that node stopped answering, a new store pod starts once the "
            f"Node is deleted; docs/troubleshooting.md)"
        )
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" and condition.get("message"):
            parts.append(condition["message"])
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            parts.append(": ".join(p for p in (waiting["reason"], waiting.get("message")) if p))
    return ": ".join(parts)


def gave_up_count(pods: list[dict[str, Any]]) -> int:
    """How many worker pods ended with exit 138 (the Job keeps failed pods)."""
    return sum(
        1
        for pod in pods
        for container in (pod.get("status") or {}).get("containerStatuses") or []
        if container.get("name") == WORKER_CONTAINER
        and ((container.get("state") or {}).get("terminated") or {}).get("exitCode") == GAVE_UP_CODE
    )


@dataclass
class StoreWatch:
    """Since when the store has had no ready pod, across the wait's polls."""

    namespace: str
    since: float | None = None

    def problem(self, state: StoreState | None, pods: list[dict[str, Any]], now: float) -> str | None:
        if state is None:
            return None  # not known this time: the bound keeps counting from what was seen
        if state.ready:
            self.since = None
            return None
        self.since = now if self.since is None else self.since
        if now - self.since < STORE_DOWN_SECONDS:
            return None
        gave_up = gave_up_count(pods)
        workers = f"; workers gave up on it (exit 138) {gave_up} times" if gave_up else ""
        return (
            f"the rendezvous store {rendezvous_endpoint()} (StatefulSet {self.namespace}/{STATEFULSET}) has had "
            f"no ready pod for {(now - self.since) / 60:.0f} minutes ({state.detail}){workers}; the workers "
            f"cannot form a group without it"
        )
