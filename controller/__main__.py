"""python -m controller: the ElasticJob controller's process.

One namespace (the workloads'), one leader: every replica campaigns for the Lease (lease.py); only
the leader watches and reconciles. It watches ElasticJobs, their Jobs and their pods (selected by
render.ELASTICJOB_LABEL) and reconciles the ElasticJob each event names, one at a time, plus every
ElasticJob every --resync-seconds (the run's history changes without an event). A leader that cannot
renew for RENEW_DEADLINE_SECONDS exits 1 (its Deployment starts it again as a candidate), as
client-go's callers do on OnStoppedLeading; SIGTERM releases the lease and exits 0.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from controller import lease, render
from controller.reconcile import Api, Reconciler

log = logging.getLogger("controller")
LEASE_NAME = "elastic-job-controller"
WATCH_SECONDS = 60  # a watch is re-opened this often (the API server ends idle ones anyway)
MAX_BACKOFF_SECONDS = 30.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m controller", description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE"),
                        help="the namespace whose ElasticJobs it runs (default: $POD_NAMESPACE)")
    parser.add_argument("--lease-name", default=LEASE_NAME, help=f"the Lease it elects its leader on (default {LEASE_NAME})")
    parser.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}",
                        help="this candidate's name in the Lease (default: host name and process id)")
    parser.add_argument("--shared-root", type=Path, default=None,
                        help="where the shared volume is mounted, read-only; progress is read from run directories under it")
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
    """ElasticJob names to reconcile: each at most once in the queue, some not before a given time."""

    def __init__(self) -> None:
        self._ready: list[str] = []
        self._later: list[tuple[float, str]] = []
        self._cv = threading.Condition()

    def add(self, name: str, after: float = 0.0) -> None:
        with self._cv:
            if after > 0:
                heapq.heappush(self._later, (time.monotonic() + after, name))
            elif name not in self._ready:
                self._ready.append(name)
            self._cv.notify()

    def get(self) -> str:
        with self._cv:
            while True:
                now = time.monotonic()
                while self._later and self._later[0][0] <= now:
                    _, name = heapq.heappop(self._later)
                    if name not in self._ready:
                        self._ready.append(name)
                if self._ready:
                    return self._ready.pop(0)
                self._cv.wait(timeout=(self._later[0][0] - now) if self._later else None)


def _watch(list_call: Callable[..., Any], key: Callable[[Any], str | None], queue: WorkQueue, **selector: Any) -> None:
    """List, queue every object's ElasticJob, then follow the watch; start over when it ends or breaks."""
    from kubernetes import watch
    backoff = 1.0
    while True:
        try:
            listed = list_call(**selector)
            items = listed["items"] if isinstance(listed, dict) else listed.items
            for item in items:
                if (name := key(item)) is not None:
                    queue.add(name)
            version = listed["metadata"]["resourceVersion"] if isinstance(listed, dict) else listed.metadata.resource_version
            for event in watch.Watch().stream(list_call, resource_version=version, timeout_seconds=WATCH_SECONDS, **selector):
                if (name := key(event["object"])) is not None:
                    queue.add(name)
            backoff = 1.0
        except Exception as error:  # noqa: BLE001 - a watch must outlive any API error; the next list catches up
            log.warning("watch %s: %s; listing again in %.0f s", getattr(list_call, "__name__", "?"), error, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


def _elasticjob_name(obj: Any) -> str | None:
    if isinstance(obj, dict):
        return (obj.get("metadata") or {}).get("name")
    return None


def _labelled_name(obj: Any) -> str | None:
    labels = (obj.metadata.labels or {}) if not isinstance(obj, dict) else (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(render.ELASTICJOB_LABEL)


def _work(reconciler: Reconciler, queue: WorkQueue) -> None:
    failures: dict[str, float] = {}
    while True:
        name = queue.get()
        try:
            again = reconciler.reconcile(name)
            failures.pop(name, None)
        except Exception as error:  # noqa: BLE001 - one ElasticJob's error must not stop the others
            wait = failures[name] = min(failures.get(name, 0.5) * 2, MAX_BACKOFF_SECONDS)
            log.warning("elasticjob %s: %s; again in %.0f s", name, error, wait)
            again = wait
        if again is not None:
            queue.add(name, after=again)


def _resync(api: Api, namespace: str, queue: WorkQueue, every: float) -> None:
    while True:
        time.sleep(every)
        try:
            listed = api.custom.list_namespaced_custom_object(render.GROUP, render.VERSION, namespace, render.PLURAL)
            for item in listed["items"]:
                queue.add(item["metadata"]["name"])
        except Exception as error:  # noqa: BLE001
            log.warning("resync: %s", error)


def start_controller(api: Api, options: argparse.Namespace) -> None:
    """The watches, the resync and the worker, as daemon threads."""
    queue, ns = WorkQueue(), options.namespace
    selector = {"label_selector": render.ELASTICJOB_LABEL}

    def list_elasticjobs(**kwargs: Any) -> Any:
        return api.custom.list_namespaced_custom_object(render.GROUP, render.VERSION, ns, render.PLURAL, **kwargs)
    list_elasticjobs.__name__ = "elasticjobs"

    def list_jobs(**kwargs: Any) -> Any:
        return api.batch.list_namespaced_job(ns, **kwargs)
    list_jobs.__name__ = "jobs"

    def list_pods(**kwargs: Any) -> Any:
        return api.core.list_namespaced_pod(ns, **kwargs)
    list_pods.__name__ = "pods"

    threads = [
        (_watch, (list_elasticjobs, _elasticjob_name, queue)), (_watch, (list_jobs, _labelled_name, queue)),
        (_watch, (list_pods, _labelled_name, queue)),
        (_work, (Reconciler(api, ns, options.shared_root), queue)), (_resync, (api, ns, queue, options.resync_seconds)),
    ]
    for index, (target, args) in enumerate(threads):
        kwargs = selector if index in (1, 2) else {}
        threading.Thread(target=target, args=args, kwargs=kwargs, daemon=True, name=f"{target.__name__}-{index}").start()


class NoClusterAccess(Exception):
    """Neither a kubeconfig nor a pod's service account to reach the API server with: the user's setup."""


def _clients(kubeconfig: str | None) -> tuple[Api, Any]:
    import yaml
    from kubernetes import client, config
    try:
        if kubeconfig or os.environ.get("KUBECONFIG"):
            # config_file None: the client reads $KUBECONFIG itself, a list of files included
            api_client = config.new_client_from_config(config_file=kubeconfig)
        else:
            config.load_incluster_config()
            api_client = client.ApiClient()
    except config.ConfigException as error:
        if not (kubeconfig or os.environ.get("KUBECONFIG")):
            raise NoClusterAccess("not running in a pod (no service account to use): outside a pod pass "
                                  "--kubeconfig FILE or set KUBECONFIG") from None
        source = f"--kubeconfig {kubeconfig}" if kubeconfig else f"KUBECONFIG={os.environ['KUBECONFIG']}"
        raise NoClusterAccess(f"{source}: {error}") from None
    except (OSError, yaml.YAMLError) as error:  # a file the client could not read, or not YAML
        detail = error.strerror if isinstance(error, OSError) else " ".join(str(error).split())
        raise NoClusterAccess(f"kubeconfig {kubeconfig or os.environ.get('KUBECONFIG')}: {detail}") from None
    return (Api(client.CustomObjectsApi(api_client), client.BatchV1Api(api_client), client.CoreV1Api(api_client)),
            client.CoordinationV1Api(api_client))


def _attempt(lock: lease.LeaseLock) -> bool:
    try:
        return lock.try_acquire_or_renew()
    except Exception as error:  # noqa: BLE001 - an unreachable API server is a failed try, not the end
        log.warning("lease %s: %s", lock.name, error)
        return False


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    try:
        api, coordination = _clients(options.kubeconfig)
    except NoClusterAccess as error:
        print(f"python -m controller: {error}", file=sys.stderr)
        return 2
    lock = lease.LeaseLock(coordination, options.namespace, options.lease_name, options.identity)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    log.info("candidate %s for lease %s/%s", options.identity, options.namespace, options.lease_name)
    while not stopping.is_set() and not _attempt(lock):
        stopping.wait(lease.RETRY_SECONDS)
    if stopping.is_set():
        return 0
    log.info("leading as %s: running the ElasticJobs of namespace %s", options.identity, options.namespace)
    start_controller(api, options)
    renewed = time.monotonic()
    while not stopping.wait(lease.RETRY_SECONDS):
        if _attempt(lock):
            renewed = time.monotonic()
        elif time.monotonic() - renewed > lease.RENEW_DEADLINE_SECONDS:
            log.error("lost the lease (held by %r now): stopping", lock.holder())
            return 1
    lock.release()
    log.info("released the lease: stopping")
    return 0


if __name__ == "__main__":
    sys.exit(main())
