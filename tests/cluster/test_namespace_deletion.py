"""Deleting the workload namespace while a run is active waits for ever, on the real control plane, and
what ends it. Kubernetes 1.34+ deletes a namespace's pods before anything else (OrderedNamespaceDeletion,
GA and locked on in 1.34, on by default in 1.33: pkg/features/kube_features.go; the namespace controller's
deleteAllContent deletes no other kind while a pod remains). A worker pod deleted that way fails (143),
and the Job controller keeps its finalizer until the index's replacement pod exists: Jobs with
backoffLimitPerIndex, as ours are (pkg/controller/job/job_controller.go canRemoveFinalizer, "Delaying pod
finalizer removal to await for pod recreation within the index"). No pod can be created in a
terminating namespace, so the pods stay, so the Job stays. The controller cannot help: its own pod is
deleted first. What ends it is the Job going: deleting the ElasticJob (the garbage collector deletes its
Job) or the Job itself. `pulumi destroy` deletes the ElasticJob before the namespace, so it never meets
this; docs/troubleshooting.md says what to do for a namespace deleted by hand.
"""

from __future__ import annotations

import json
import time

import controller_harness as h
from kube import apply, wait_until

NS = "ctrl-nsdel"
STALL_SECONDS = 12


def pods(plane) -> list[dict]:
    return json.loads(plane.kubectl("get", "pods", "-n", NS, "-o", "json").stdout)["items"]


def test_a_namespace_deleted_under_a_running_job_waits_until_the_job_goes(control_plane, record_property):
    plane = control_plane
    h.nodes(plane)
    h.namespace(plane, NS)
    ctl = h.Controller(plane, NS, "only")
    try:
        apply(plane, [h.elasticjob("running", NS, run_for="600s")])
        h.running_pods(plane, NS, "running", 2)
    finally:
        assert ctl.stop() == 0, ctl.output()[-2000:]  # as its pod would be: deleted first

    plane.kubectl("delete", "namespace", NS, "--wait=false")
    time.sleep(STALL_SECONDS)
    held = pods(plane)
    assert len(held) == 2, [p["metadata"]["name"] for p in held]
    for pod in held:  # failed, marked for deletion, and held by the Job controller's finalizer
        assert pod["status"]["phase"] == "Failed" and pod["metadata"].get("deletionTimestamp"), pod["status"]
        assert pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    job = h.job(plane, NS, "running")
    assert job is not None and not job["metadata"].get("deletionTimestamp")  # never reached: pods first

    released = time.monotonic()
    plane.kubectl("delete", "elasticjob", "running", "-n", NS, "--wait=false")
    wait_until(
        "the namespace gone",
        lambda: plane.kubectl("get", "namespace", NS, check=False).returncode != 0,
        timeout=120,
        every=0.5,
    )
    record_property("namespace_gone_after_elasticjob_deleted_seconds", round(time.monotonic() - released, 1))
