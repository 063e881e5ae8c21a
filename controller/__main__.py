"""python -m controller: the ElasticJob controller's process.

One namespace (the workloads'), one leader: every replica campaigns for the Lease (lease.py); only
the leader watches and reconciles. It watches ElasticJobs, their Jobs and their pods (selected by
render.ELASTICJOB_LABEL) and reconciles the ElasticJob each event names, one at a time, plus every
ElasticJob every --resync-seconds (the run's history changes without an event). A leader that cannot
renew for RENEW_DEADLINE_SECONDS exits 1 (its Deployment starts it again as a candidate), as
client-go's callers do on OnStoppedLeading, and its worker stops at that point even while a renew is
still waiting for an answer; SIGTERM releases the lease and exits 0. One queue entry per ElasticJob,
rate-limited with backoff (work_queue.WorkQueue); pods are read from a watch cache (watches.PodCache),
not listed per pass.
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

from controller import clients, lease, render, watches
from controller import reconcile
from controller.reconcile import Api, Backoff, Reconciler
from controller.work_queue import WorkQueue

log = logging.getLogger("controller")
LEASE_NAME = "elastic-job-controller"
# A pass makes a bounded number of bounded calls (reconcile.REQUEST_SECONDS each); one that runs
# longer is stuck: the leader stops renewing so that a standby takes over (review ctrl-1 item 4).
MAX_PASS_SECONDS = 300.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m controller", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE"),
        help="the namespace whose ElasticJobs it runs (default: $POD_NAMESPACE)",
    )
    parser.add_argument(
        "--lease-name", default=LEASE_NAME, help=f"the Lease it elects its leader on (default {LEASE_NAME})"
    )
    parser.add_argument(
        "--identity",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="this candidate's name in the Lease (default: host name and process id)",
    )
    parser.add_argument(
        "--shared-root",
        type=Path,
        default=None,
        help="where the shared volume is mounted, read-only; progress is read from run directories under it",
    )
    parser.add_argument(
        "--shared-claim",
        default=None,
        help="the PersistentVolumeClaim mounted at --shared-root: a worker's run directory on it is read "
        "there, wherever the worker mounts it (default: any claim the worker mounts)",
    )
    parser.add_argument(
        "--resync-seconds", type=float, default=30.0, help="every ElasticJob is looked at this often (default 30)"
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="a kubeconfig file (default: $KUBECONFIG where set, else the pod's service account)",
    )
    options = parser.parse_args(argv)
    if not options.namespace:
        parser.error("--namespace (or $POD_NAMESPACE) is required: the namespace whose ElasticJobs to run")
    if options.resync_seconds <= 0:
        parser.error(f"--resync-seconds {options.resync_seconds}: a positive number of seconds is needed")
    return options


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


def _work(
    reconciler: Reconciler, queue: WorkQueue, leading: Callable[[], bool] = lambda: True, clock: PassClock | None = None
) -> None:
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
            listed = api.custom.list_namespaced_custom_object(
                render.GROUP, render.VERSION, namespace, render.PLURAL, _request_timeout=reconcile.REQUEST_SECONDS
            )
            for item in listed["items"]:
                queue.add_unless_waiting(item["metadata"]["name"])
        except Exception as error:  # noqa: BLE001
            log.warning("resync: %s", error)


def start_controller(
    api: Api, options: argparse.Namespace, leading: Callable[[], bool] = lambda: True, clock: PassClock | None = None
) -> None:
    """The watches, the pod cache, the resync and the worker, as daemon threads."""
    queue, ns, pods = WorkQueue(), options.namespace, watches.PodCache()

    def list_elasticjobs(**kwargs: Any) -> Any:
        return api.custom.list_namespaced_custom_object(render.GROUP, render.VERSION, ns, render.PLURAL, **kwargs)

    list_elasticjobs.__name__ = "elasticjobs"

    def list_jobs(**kwargs: Any) -> Any:
        return api.batch.list_namespaced_job(ns, **kwargs)

    list_jobs.__name__ = "jobs"

    threads: list[tuple[Callable[..., object], tuple[Any, ...], dict[str, Any]]] = [
        (watches.watch_objects, (list_elasticjobs, watches.SpecChanges(), queue), {}),
        (watches.watch_objects, (list_jobs, watches.labelled_name, queue), {"label_selector": render.ELASTICJOB_LABEL}),
        (watches.watch_pods, (api, ns, pods, queue), {}),
        (
            _work,
            (
                Reconciler(
                    api, ns, options.shared_root, pods_of=pods.of, leading=leading, shared_claim=options.shared_claim
                ),
                queue,
                leading,
                clock,
            ),
            {},
        ),
        (_resync, (api, ns, queue, options.resync_seconds), {}),
    ]
    for index, (target, args, kwargs) in enumerate(threads):
        threading.Thread(
            target=target, args=args, kwargs=kwargs, daemon=True, name=f"{target.__name__}-{index}"
        ).start()


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
            log.error(
                "a reconcile pass has run for %.0f s (more than %.0f s): the worker is stuck; stopping without "
                "renewing the lease, a standby takes over",
                took,
                MAX_PASS_SECONDS,
            )
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
