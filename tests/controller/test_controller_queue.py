"""The controller's work queue (controller/work_queue.py WorkQueue), as client-go's workqueue behaves
(util/workqueue: one entry per object, the earliest delay wins, per-object exponential backoff):
issue 36 item 10, where each resync added one more timer for a stuck ElasticJob."""

from __future__ import annotations

import threading
import time

from controller.watches import SpecChanges
from controller.work_queue import WorkQueue


def drain(queue: WorkQueue, seconds: float) -> list[str]:
    got: list[str] = []
    end = time.monotonic() + seconds

    def take():
        while time.monotonic() < end:
            got.append(queue.get())

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    thread.join(seconds + 0.5)
    return got


def test_one_entry_per_name_however_often_it_is_added():
    queue = WorkQueue()
    for _ in range(50):
        queue.add("stuck", after=0.2)
        queue.add("stuck", after=0.3)
    queue.add("other")
    queue.add("other")
    assert drain(queue, 0.6) == ["other", "stuck"]


def test_a_name_that_stays_blocked_waits_longer_each_time_and_resyncs_do_not_cut_in():
    queue = WorkQueue(base=0.1, cap=10)
    assert [queue.add_rate_limited("stuck") for _ in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert drain(queue, 0.3) == ["stuck"]  # once: the earliest of its delays
    assert queue.add_rate_limited("stuck") == 3.2
    for _ in range(20):
        queue.add_unless_waiting("stuck")  # a resync every... while it waits its backoff
    assert drain(queue, 0.5) == []
    queue.forget("stuck")
    assert queue.add_rate_limited("stuck") == 0.1


def test_status_only_changes_of_an_elasticjob_queue_nothing():
    key = SpecChanges()
    obj = {"metadata": {"name": "a", "uid": "u", "generation": 1}, "status": {}}
    assert key(obj) == "a"
    assert key({**obj, "status": {"conditions": [{"type": "Created"}]}}) is None  # our own write
    assert key({**obj, "metadata": {**obj["metadata"], "generation": 2}}) == "a"  # a spec change
    assert key({**obj, "metadata": {**obj["metadata"], "generation": 2, "deletionTimestamp": "x"}}) == "a"
