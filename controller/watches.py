"""The controller's watches: ElasticJobs, their Jobs and their pods, each listed then followed, every
event queueing the ElasticJob it names (work_queue.WorkQueue); the pods are also kept in a cache
(PodCache, an informer's store) that a pass reads instead of listing them."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from controller import reconcile, render
from controller.reconcile import Api
from controller.work_queue import WorkQueue

log = logging.getLogger("controller")
WATCH_SECONDS = 60  # a watch is re-opened this often (the API server ends idle ones anyway)
MAX_BACKOFF_SECONDS = 30.0
# A watch's reads are bounded too (review ctrl-1 item 4): an idle half-open watch connection never
# returns otherwise, and the caches behind it freeze. The API server ends a watch after
# timeout_seconds; a read silent this much longer is a dead connection.
WATCH_READ_SECONDS = WATCH_SECONDS + 30


def watch_objects(
    list_call: Callable[..., Any],
    key: Callable[[Any], str | None],
    queue: WorkQueue,
    *,
    stop: threading.Event | None = None,
    **selector: Any,
) -> None:
    """List, queue every object's ElasticJob, then follow the watch; start over when it ends or breaks,
    until `stop` is set (the controller never sets it; a test ends the watches it started with it)."""
    from kubernetes import watch

    stop = stop or threading.Event()
    backoff = 1.0
    while not stop.is_set():
        try:
            listed = list_call(**selector, _request_timeout=reconcile.REQUEST_SECONDS)
            items = listed["items"] if isinstance(listed, dict) else listed.items
            # A relist (every WATCH_SECONDS) must not cut a backoff or a TTL short (review ctrl-1 item 13).
            for item in items:
                if (name := key(item)) is not None:
                    queue.add_unless_waiting(name)
            version = (
                listed["metadata"]["resourceVersion"] if isinstance(listed, dict) else listed.metadata.resource_version
            )
            for event in watch.Watch().stream(
                list_call,
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                _request_timeout=(reconcile.REQUEST_SECONDS, WATCH_READ_SECONDS),
                **selector,
            ):
                if (name := key(event["object"])) is not None:
                    queue.add(name)
            backoff = 1.0
        except Exception as error:  # noqa: BLE001 - a watch must outlive any API error; the next list catches up
            if stop.is_set():
                return
            log.warning("watch %s: %s; listing again in %.0f s", getattr(list_call, "__name__", "?"), error, backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


class PodCache:
    """The namespace's ElasticJob worker pods, kept by one list and a watch (an informer's store):
    a pass reads its pods here instead of listing them (issue 36 item 12). Pods are kept as the API
    sends them, less managedFields (the largest part, and never read)."""

    def __init__(self) -> None:
        self._pods: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _slim(pod: dict[str, Any]) -> dict[str, Any]:
        pod.get("metadata", {}).pop("managedFields", None)
        return pod

    def replace(self, pods: list[dict[str, Any]]) -> None:
        with self._lock:
            self._pods = {p["metadata"]["name"]: self._slim(p) for p in pods}

    def apply(self, kind: str, pod: dict[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self._pods.pop(pod["metadata"]["name"], None)
            else:
                self._pods[pod["metadata"]["name"]] = self._slim(pod)

    def of(self, elasticjob: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                p
                for p in self._pods.values()
                if (p["metadata"].get("labels") or {}).get(render.ELASTICJOB_LABEL) == elasticjob
            ]


def watch_pods(
    api: Api, namespace: str, cache: PodCache, queue: WorkQueue, stop: threading.Event | None = None
) -> None:
    """The pod informer: list into the cache, then apply the watch's events; start over when it ends,
    until `stop` is set (as in watch_objects)."""
    from kubernetes import watch
    from controller.reconcile import _raw

    stop = stop or threading.Event()
    selector = render.ELASTICJOB_LABEL
    backoff = 1.0
    while not stop.is_set():
        try:
            listed = _raw(api.core.list_namespaced_pod, namespace, label_selector=selector)
            cache.replace(listed["items"])
            for pod in listed["items"]:  # as in watch_objects: a relist keeps a waiting name's time
                queue.add_unless_waiting(pod["metadata"]["labels"][render.ELASTICJOB_LABEL])
            version = listed["metadata"]["resourceVersion"]
            for event in watch.Watch().stream(
                api.core.list_namespaced_pod,
                namespace,
                label_selector=selector,
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                _request_timeout=(reconcile.REQUEST_SECONDS, WATCH_READ_SECONDS),
            ):
                if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                pod = event["raw_object"]
                cache.apply(event["type"], pod)
                queue.add((pod["metadata"].get("labels") or {})[render.ELASTICJOB_LABEL])
            backoff = 1.0
        except Exception as error:  # noqa: BLE001 - a watch must outlive any API error; the next list catches up
            if stop.is_set():
                return
            log.warning("watch pods: %s; listing again in %.0f s", error, backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


def elasticjob_name(obj: Any) -> str | None:
    if isinstance(obj, dict):
        return (obj.get("metadata") or {}).get("name")
    return None


class SpecChanges:
    """The ElasticJob watch's key: a name when its object is new, its spec changed (generation) or it
    is being deleted; None for a change of status only, which is this controller's own write (a pass
    that writes its status would otherwise queue itself again at once, past its backoff)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Any, ...]] = {}

    def __call__(self, obj: Any) -> str | None:
        name = elasticjob_name(obj)
        if name is None:
            return None
        meta = obj["metadata"]
        mark = (meta.get("uid"), meta.get("generation"), meta.get("deletionTimestamp"))
        if self._seen.get(name) == mark:
            return None
        self._seen[name] = mark
        return name


def labelled_name(obj: Any) -> str | None:
    labels = (
        (obj.metadata.labels or {}) if not isinstance(obj, dict) else (obj.get("metadata") or {}).get("labels") or {}
    )
    return labels.get(render.ELASTICJOB_LABEL)
