"""Every API call of the controller's worker and watches is bounded, and a stuck worker stops the
leader (review ctrl-1 item 4): against tests/controller/api_server.py frozen (a half-open connection:
requests accepted, never answered)."""

from __future__ import annotations

import threading
import time

import pytest

from api_server import NS, ApiServer
from controller import __main__ as main
from controller import watches
from controller.work_queue import WorkQueue
from controller import clients
from controller import reconcile
from controller.reconcile import Reconciler


@pytest.fixture
def server():
    made = ApiServer()
    yield made
    made.close()


@pytest.fixture
def stop_watches(server, monkeypatch):
    """Set at the test's end, before its API server closes and before the test's short timeouts are
    undone: the watches it started end instead of listing a closed port for the rest of the session."""
    stop = threading.Event()
    yield stop
    stop.set()


def test_a_pass_on_a_frozen_connection_ends_within_its_bound(server, monkeypatch):
    monkeypatch.setattr(reconcile, "REQUEST_SECONDS", 0.5)
    server.frozen = True
    result: dict = {}

    def run():
        started = time.monotonic()
        try:
            Reconciler(clients.api_of(server.api().custom.api_client), NS, pods_of=lambda name: []).reconcile("train")
        except Exception as error:  # noqa: BLE001 - checked below
            result["error"] = error
        result["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "a reconcile pass on a frozen connection never returned"
    assert "error" in result and result["seconds"] < 1.5, result  # one bounded try, not urllib3's four


def test_a_silent_watch_is_given_up_and_listed_again(server, stop_watches, monkeypatch):
    """An idle half-open watch never returned: the queue heard nothing more of that kind."""
    monkeypatch.setattr(reconcile, "REQUEST_SECONDS", 1.0)
    monkeypatch.setattr(watches, "WATCH_READ_SECONDS", 1.0)
    server.frozen_watches = True
    api = clients.api_of(server.api().custom.api_client)

    def list_jobs(**kwargs):
        return api.batch.list_namespaced_job(NS, **kwargs)

    queue = WorkQueue()
    watch = (list_jobs, watches.labelled_name, queue)
    threading.Thread(target=watches.watch_objects, args=watch, kwargs={"stop": stop_watches}, daemon=True).start()
    time.sleep(3.5)  # the watch given up after 1 s, listed again after the 1 s backoff
    lists = [c for c in server.calls if c[1].endswith("/jobs")]
    assert len(lists) >= 2, server.calls


def test_a_stuck_pass_is_seen_by_the_main_thread():
    release = threading.Event()

    class Stuck:
        def reconcile(self, name):
            release.wait(30)

    clock, queue = main.PassClock(), WorkQueue()
    threading.Thread(target=main._work, args=(Stuck(), queue), kwargs={"clock": clock}, daemon=True).start()
    assert clock.stuck_for(0.2) is None
    queue.add("train")
    time.sleep(0.5)
    assert clock.stuck_for(0.2) is not None
    release.set()
    time.sleep(0.3)
    assert clock.stuck_for(0.2) is None


def test_a_relist_keeps_a_waiting_names_backoff(server, stop_watches, monkeypatch):
    """Review ctrl-1 item 13: each watch's relist (every WATCH_SECONDS) queued every Job's and pod's
    ElasticJob at once, cutting short the backoff of a blocked one and the wait of a pending TTL."""
    from api_server import JOBS, PODS

    labels = {"labels": {main.render.ELASTICJOB_LABEL: "blocked"}}
    server.objects[f"{JOBS}/blocked"] = {"metadata": {"name": "blocked", **labels}}
    server.objects[f"{PODS}/blocked-0"] = {"metadata": {"name": "blocked-0", **labels}}
    server.frozen_watches = True
    api = clients.api_of(server.api().custom.api_client)
    queue = WorkQueue()
    queue.add("blocked", after=30)

    def list_jobs(**kwargs):
        return api.batch.list_namespaced_job(NS, **kwargs)

    watch = (list_jobs, watches.labelled_name, queue)
    threading.Thread(target=watches.watch_objects, args=watch, kwargs={"stop": stop_watches}, daemon=True).start()
    pod_watch = (api, NS, watches.PodCache(), queue, stop_watches)
    threading.Thread(target=watches.watch_pods, args=pod_watch, daemon=True).start()
    time.sleep(1.5)
    assert {c[1] for c in server.calls} >= {JOBS, PODS}, server.calls  # both listed
    assert "blocked" in queue.waiting() and queue._ready == []
