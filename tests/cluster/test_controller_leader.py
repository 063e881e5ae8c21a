"""Issue 33 on the real control plane: two controller processes, one Lease (controller/lease.py,
client-go's semantics): one leads and runs ElasticJobs, the other waits; when the leader stops
(SIGTERM: it releases the Lease) the other takes over and runs the next ElasticJob."""

from __future__ import annotations

import time

import controller_harness as h
from kube import apply, wait_until

NS = "ctrl-leader"


def holder(plane) -> str:
    """The Lease's holder, "" before the first candidate created it."""
    result = plane.kubectl(
        "get", "lease", "elastic-job-controller", "-n", NS, "-o", "jsonpath={.spec.holderIdentity}", check=False
    )
    return result.stdout.strip() if result.returncode == 0 else ""


def test_one_leads_and_the_other_takes_over_when_it_stops(control_plane, record_property):
    plane = control_plane
    h.nodes(plane)
    h.namespace(plane, NS)
    first = h.Controller(plane, NS, "first")
    wait_until("first holds the lease", lambda: holder(plane) == "first", timeout=30)
    second = h.Controller(plane, NS, "second")
    try:
        apply(plane, [h.elasticjob("led-by-first", NS, run_for="2s")])
        h.condition(plane, NS, "led-by-first", "Succeeded")
        time.sleep(3)  # the second has had time to try, more than once (every 2 s)
        assert holder(plane) == "first" and "leading as second" not in second.output()
        transitions = h.kubectl_json(plane, "get", "lease", "elastic-job-controller", "-n", NS)["spec"].get(
            "leaseTransitions", 0
        )

        stopped = time.monotonic()
        assert first.stop() == 0, first.output()[-2000:]
        wait_until("second takes the lease", lambda: holder(plane) == "second", timeout=30, every=0.1)
        took = time.monotonic() - stopped
        record_property("takeover_seconds", round(took, 2))
        lease = h.kubectl_json(plane, "get", "lease", "elastic-job-controller", "-n", NS)["spec"]
        assert lease["leaseTransitions"] == transitions + 1
        # released on SIGTERM: taken within a retry period or two, not after the 15 s lease duration
        assert took < 10, took
        apply(plane, [h.elasticjob("led-by-second", NS, run_for="2s")])
        h.condition(plane, NS, "led-by-second", "Succeeded")
        assert "creating Job led-by-second" in second.output() and "creating Job led-by-second" not in first.output()
    finally:
        for process in (first, second):
            process.stop()
        h.remove_namespace(plane, NS)
