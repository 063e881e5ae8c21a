"""python -m controller: the ElasticJob controller's process.

One namespace (the workloads'), one leader: every replica campaigns for the Lease (lease.py); only
the leader watches and reconciles. It watches ElasticJobs, their Jobs and their pods (selected by
render.ELASTICJOB_LABEL) and reconciles the ElasticJob each event names, one at a time, plus every
ElasticJob every --resync-seconds (the run's history changes without an event). A leader that cannot
renew for RENEW_DEADLINE_SECONDS exits 1 (its Deployment starts it again as a candidate), as
client-go's callers do on OnStoppedLeading, and its worker stops at that point even while a renew is
still waiting for an answer; SIGTERM releases the lease and exits 0. One queue entry per ElasticJob,
rate-limited with backoff (WorkQueue); pods are read from a watch cache (PodCache), not listed per pass.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from controller import clients, lease, render
from controller import reconcile
from controller.reconcile import Api, Backoff, Reconciler

log = logging.getLogger("controller")
LEASE_NAME = "elastic-job-controller"
WATCH_SECONDS = 60  # a watch is re-opened this often (the API server ends idle ones anyway)
MAX_BACKOFF_SECONDS = 30.0
# A watch's reads are bounded too (review ctrl-1 item 4): an idle half-open watch connection never
# returns otherwise, and the caches behind it freeze. The API server ends a watch after
# timeout_seconds; a read silent this much longer is a dead connection.
WATCH_READ_SECONDS = WATCH_SECONDS + 30
# A pass makes a bounded number of bounded calls (reconcile.REQUEST_SECONDS each); one that runs
# longer is stuck: the leader stops renewing so that a standby takes over (review ctrl-1 item 4).
MAX_PASS_SECONDS = 300.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m controller", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE"),
                        help="the namespace whose ElasticJobs it runs (default: $POD_NAMESPACE)")
    parser.add_argument("--lease-name", default=LEASE_NAME, help=f"the Lease it elects its leader on (default {LEASE_NAME})")
    parser.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}",
                        help="this candidate's name in the Lease (default: host name and process id)")
    parser.add_argument("--shared-root", type=Path, default=None,
                        help="where the shared volume is mounted, read-only; progress is read from run directories under it")
    parser.add_argument("--shared-claim", default=None,
                        help="the PersistentVolumeClaim mounted at --shared-root: a worker's run directory on it is read "
                             "there, wherever the worker mounts it (default: any claim the worker mounts)")
    parser.add_argument("--resync-seconds", type=float, default=30.0, help="every ElasticJob is looked at this often (default 30)")
    parser.add_argument("--kubeconfig", default=None,
                        help="a kubeconfig file (default: $KUBECONFIG where set, else the pod's service account)")
    options = parser.parse_args(argv)
    if not options.namespace:
        parser.error("--namespace (or $POD_NAMESPACE) is required: the namespace whose ElasticJobs to run")
    if options.resync_seconds <= 0:
        parser.error(f"--resync-seconds {options.resync_seconds}: a positive number of seconds is needed")
    return options


class WorkQueue:
    """ElasticJob names to reconcile, as client-go's workqueue keeps them (k8s.io/client-go
    util/workqueue: queue.go, delaying_queue.go, default_rate_limiters.go): a name is at most once
    ready and at most once waiting (the earliest time wins), so events, resyncs and retries never
    multiply its passes; a name that keeps failing or stays blocked waits longer each time
    (BACKOFF_BASE_SECONDS doubling to BACKOFF_MAX_SECONDS, as ItemExponentialFailureRateLimiter),
    until `forget`."""

    def __init__(self, base: float = 0.5, cap: float = 120.0) -> None:
        self._ready: list[str] = []
        self._waiting: dict[str, float] = {}  # name -> when it becomes ready (monotonic)
        self._failures: dict[str, int] = {}
        self._base, self._cap = base, cap
        self._cv = threading.Condition()

    def add(self, name: str, after: float = 0.0) -> None:
        with self._cv:
            if after > 0:
                due = time.monotonic() + after
                if name not in self._ready and due < self._waiting.get(name, float("inf")):
                    self._waiting[name] = due
            else:
                self._waiting.pop(name, None)
                if name not in self._ready:
                    self._ready.append(name)
            self._cv.notify()

    def add_unless_waiting(self, name: str) -> None:
        """A resync's add: a name already waiting (a backoff, a TTL) keeps its time."""
        with self._cv:
            if name not in self._waiting:
                self.add(name)

    def add_rate_limited(self, name: str) -> float:
        """Again after this name's next backoff delay; returns the delay."""
        with self._cv:
            failures = self._failures[name] = self._failures.get(name, 0) + 1
            delay = min(self._base * 2 ** (failures - 1), self._cap)
            self.add(name, after=delay)
            return delay

    def forget(self, name: str) -> None:
        with self._cv:
            self._failures.pop(name, None)

    def waiting(self) -> dict[str, float]:
        with self._cv:
            return dict(self._waiting)

    def get(self) -> str:
        with self._cv:
            while True:
                now = time.monotonic()
                for name, due in sorted(self._waiting.items(), key=lambda item: item[1]):
                    if due <= now:
                        del self._waiting[name]
                        if name not in self._ready:
                            self._ready.append(name)
                if self._ready:
                    return self._ready.pop(0)
                self._cv.wait(timeout=(min(self._waiting.values()) - now) if self._waiting else None)


def _watch(list_call: Callable[..., Any], key: Callable[[Any], str | None], queue: WorkQueue, **selector: Any) -> None:
    """List, queue every object's ElasticJob, then follow the watch; start over when it ends or breaks."""
    from kubernetes import watch
    backoff = 1.0
    while True:
        try:
            listed = list_call(**selector, _request_timeout=reconcile.REQUEST_SECONDS)
            items = listed["items"] if isinstance(listed, dict) else listed.items
            for item in items:  # a relist (every WATCH_SECONDS) must not cut a backoff or a TTL short (review ctrl-1 item 13)
                if (name := key(item)) is not None:
                    queue.add_unless_waiting(name)
            version = listed["metadata"]["resourceVersion"] if isinstance(listed, dict) else listed.metadata.resource_version
            for event in watch.Watch().stream(list_call, resource_version=version, timeout_seconds=WATCH_SECONDS,
                                              _request_timeout=(reconcile.REQUEST_SECONDS, WATCH_READ_SECONDS), **selector):
                if (name := key(event["object"])) is not None:
                    queue.add(name)
            backoff = 1.0
        except Exception as error:  # noqa: BLE001 - a watch must outlive any API error; the next list catches up
            log.warning("watch %s: %s; listing again in %.0f s", getattr(list_call, "__name__", "?"), error, backoff)
            time.sleep(backoff)
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
            return [p for p in self._pods.values()
                    if (p["metadata"].get("labels") or {}).get(render.ELASTICJOB_LABEL) == elasticjob]


def _watch_pods(api: Api, namespace: str, cache: PodCache, queue: WorkQueue) -> None:
    """The pod informer: list into the cache, then apply the watch's events; start over when it ends."""
    from kubernetes import watch
    from controller.reconcile import _raw
    selector = render.ELASTICJOB_LABEL
    backoff = 1.0
    while True:
        try:
            listed = _raw(api.core.list_namespaced_pod, namespace, label_selector=selector)
            cache.replace(listed["items"])
            for pod in listed["items"]:  # as in _watch: a relist keeps a waiting name's time
                queue.add_unless_waiting(pod["metadata"]["labels"][render.ELASTICJOB_LABEL])
            version = listed["metadata"]["resourceVersion"]
            for event in watch.Watch().stream(api.core.list_namespaced_pod, namespace, label_selector=selector,
                                              resource_version=version, timeout_seconds=WATCH_SECONDS,
                                              _request_timeout=(reconcile.REQUEST_SECONDS, WATCH_READ_SECONDS)):
                if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                pod = event["raw_object"]
                cache.apply(event["type"], pod)
                queue.add((pod["metadata"].get("labels") or {})[render.ELASTICJOB_LABEL])
            backoff = 1.0
        except Exception as error:  # noqa: BLE001 - a watch must outlive any API error; the next list catches up
            log.warning("watch pods: %s; listing again in %.0f s", error, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


def _elasticjob_name(obj: Any) -> str | None:
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
        name = _elasticjob_name(obj)
        if name is None:
            return None
        meta = obj["metadata"]
        mark = (meta.get("uid"), meta.get("generation"), meta.get("deletionTimestamp"))
        if self._seen.get(name) == mark:
            return None
        self._seen[name] = mark
        return name


def _labelled_name(obj: Any) -> str | None:
    labels = (obj.metadata.labels or {}) if not isinstance(obj, dict) else (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(render.ELASTICJOB_LABEL)


class PassClock:
    """When the worker's current pass began (None between passes), for the main thread to see a
    stuck worker (MAX_PASS_SECONDS)."""

    def __init__(self) -> None:
        self.started: float | None = None

    def stuck_for(self, limit: float) -> float | None:
        """Seconds the current pass has run when that is more than `limit`, else None."""
        started = self.started
        took = time.monotonic() - started if started is not None else 0.0
        return took if took > limit else None


def _work(reconciler: Reconciler, queue: WorkQueue, leading: Callable[[], bool] = lambda: True,
          clock: PassClock | None = None) -> None:
    """The one worker: a name at a time; an error or a blocked ElasticJob waits its backoff (the log
    says what blocks it); nothing is done while this process is not sure it still leads."""
    clock = clock or PassClock()
    while True:
        name = queue.get()
        while not leading():
            time.sleep(0.2)
        try:
            clock.started = time.monotonic()
            again = reconciler.reconcile(name)
        except Exception as error:  # noqa: BLE001 - one ElasticJob's error must not stop the others
            wait = queue.add_rate_limited(name)
            log.warning("elasticjob %s: %s; again in %.1f s", name, error, wait)
            continue
        finally:
            clock.started = None
        if isinstance(again, Backoff):
            wait = queue.add_rate_limited(name)
            log.info("elasticjob %s: blocked: %s; again in %.1f s", name, again.why, wait)
            continue
        queue.forget(name)
        if again is not None:
            queue.add(name, after=again)


def _resync(api: Api, namespace: str, queue: WorkQueue, every: float) -> None:
    while True:
        time.sleep(every)
        try:
            listed = api.custom.list_namespaced_custom_object(render.GROUP, render.VERSION, namespace, render.PLURAL,
                                                              _request_timeout=reconcile.REQUEST_SECONDS)
            for item in listed["items"]:
                queue.add_unless_waiting(item["metadata"]["name"])
        except Exception as error:  # noqa: BLE001
            log.warning("resync: %s", error)


def start_controller(api: Api, options: argparse.Namespace, leading: Callable[[], bool] = lambda: True,
                     clock: PassClock | None = None) -> None:
    """The watches, the pod cache, the resync and the worker, as daemon threads."""
    queue, ns, pods = WorkQueue(), options.namespace, PodCache()

    def list_elasticjobs(**kwargs: Any) -> Any:
        return api.custom.list_namespaced_custom_object(render.GROUP, render.VERSION, ns, render.PLURAL, **kwargs)
    list_elasticjobs.__name__ = "elasticjobs"

    def list_jobs(**kwargs: Any) -> Any:
        return api.batch.list_namespaced_job(ns, **kwargs)
    list_jobs.__name__ = "jobs"

    threads: list[tuple[Callable[..., object], tuple[Any, ...], dict[str, Any]]] = [
        (_watch, (list_elasticjobs, SpecChanges(), queue), {}),
        (_watch, (list_jobs, _labelled_name, queue), {"label_selector": render.ELASTICJOB_LABEL}),
        (_watch_pods, (api, ns, pods, queue), {}),
        (_work, (Reconciler(api, ns, options.shared_root, pods_of=pods.of, leading=leading,
                                shared_claim=options.shared_claim), queue, leading, clock), {}),
        (_resync, (api, ns, queue, options.resync_seconds), {}),
    ]
    for index, (target, args, kwargs) in enumerate(threads):
        threading.Thread(target=target, args=args, kwargs=kwargs, daemon=True, name=f"{target.__name__}-{index}").start()


def _attempt(lock: lease.LeaseLock) -> bool:
    try:
        return lock.try_acquire_or_renew(timeout=lease.RENEW_DEADLINE_SECONDS)
    except lease.Forbidden:
        raise  # no retry can help: main says so and ends
    except Exception as error:  # noqa: BLE001 - an unreachable API server is a failed try, not the end
        log.warning("lease %s: %s", lock.name, error)
        return False


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    try:
        api, coordination = clients.connect(options.kubeconfig)
    except clients.NoClusterAccess as error:
        print(f"python -m controller: {error}", file=sys.stderr)
        return 2
    lock = lease.LeaseLock(lease.without_retries(coordination), options.namespace, options.lease_name, options.identity)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    log.info("candidate %s for lease %s/%s", options.identity, options.namespace, options.lease_name)
    try:
        while not stopping.is_set() and not _attempt(lock):
            stopping.wait(lease.RETRY_SECONDS)
    except lease.Forbidden as error:
        log.error("%s", error)
        return 2
    if stopping.is_set():
        return 0
    log.info("leading as %s: running the ElasticJobs of namespace %s", options.identity, options.namespace)
    # The worker does nothing once the last renew is RENEW_DEADLINE_SECONDS old, even before this
    # thread has given up (client-go's callers stop on OnStoppedLeading at the same point).
    clock = PassClock()
    # Not leading once asked to stop: the worker writes nothing more before the lease is released.
    start_controller(api, options, leading=lambda: lock.leading() and not stopping.is_set(), clock=clock)
    while not stopping.wait(lease.RETRY_SECONDS):
        if (took := clock.stuck_for(MAX_PASS_SECONDS)) is not None:
            log.error("a reconcile pass has run for %.0f s (more than %.0f s): the worker is stuck; stopping without "
                      "renewing the lease, a standby takes over", took, MAX_PASS_SECONDS)
            return 1
        if not lock.renew(lease.RENEW_DEADLINE_SECONDS, lease.RETRY_SECONDS, stopping) and not stopping.is_set():
            log.error("%s", lock.stop_message())
            return 1
    # The lease is released only once no pass is in flight (its writes each check leading() first,
    # now False), or a standby could lead beside it (review ctrl-1 item 10).
    waited = time.monotonic() + lease.RENEW_DEADLINE_SECONDS
    while clock.started is not None and time.monotonic() < waited:
        time.sleep(0.1)
    lock.release()
    log.info("released the lease: stopping")
    return 0


if __name__ == "__main__":
    sys.exit(main())
