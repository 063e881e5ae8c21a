"""Issue 33 on the real control plane: our controller (python -m controller, as its own
ServiceAccount under the stack's Role) runs ElasticJobs through the real Job controller of
kube-controller-manager v1.35.8; kwok ends the pods (scripts/kwok-stages). What the pure tests
(tests/controller/) cannot show: that the API server accepts the Job we render and the Role we
grant, that the Job controller applies our podFailurePolicy, successPolicy and podReplacementPolicy
as we read them, that the status subresource takes our merge patch and nothing writes the spec, and
how long a failed worker waits for its replacement.
"""

from __future__ import annotations

import json
import time

import pytest

import controller_harness as h
from controller import exit_codes, render
from infra.components.completion import KubernetesCluster, wait_for
from elastic_training.elasticjob import JOB_LABEL
from kube import apply, wait_until

NS = "ctrl-runs"


@pytest.fixture(scope="module")
def running_controller(control_plane, tmp_path_factory):
    yield from h.controller_in_its_namespace(control_plane, tmp_path_factory, NS, "only")


def test_a_run_that_succeeds_writes_only_status(running_controller):
    plane, ctl, _ = running_controller
    apply(plane, [h.elasticjob("ok", NS, replicas=2, low=1, high=2, run_for="3s")])
    h.condition(plane, NS, "ok", "Succeeded")
    live = h.kubectl_json(plane, "get", "elasticjob", "ok", "-n", NS, "--show-managed-fields")
    status = live["status"]
    assert status["replicaStatuses"] == {"Worker": {"active": 0, "succeeded": 2, "failed": 0}}
    assert status["startTime"].endswith("Z") and status["completionTime"] >= status["startTime"]
    assert status["observedGeneration"] == live["metadata"]["generation"] == 1  # the spec was never written
    # Our writes went to /status only: the controller's field manager owns status fields and nothing else.
    ours = [m for m in live["metadata"]["managedFields"] if m["manager"] != "pulumi-kubernetes"]
    assert ours and all(m.get("subresource") == "status" for m in ours), ours
    job = h.job(plane, NS, "ok")
    assert [(r["kind"], r["name"], r["controller"]) for r in job["metadata"]["ownerReferences"]] == [
        ("ElasticJob", "ok", True)
    ]
    assert job["spec"]["podFailurePolicy"] == render.pod_failure_policy()  # kept as sent, not rewritten
    assert {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"} >= {
        "SuccessCriteriaMet",
        "Complete",
    }


def test_a_worker_ending_143_is_replaced_not_counted_and_the_run_goes_on(running_controller, record_property):
    plane, ctl, _ = running_controller
    apply(plane, [h.elasticjob("preempted", NS, replicas=2, low=2, high=2, run_for="25s")])
    first = h.running_pods(plane, NS, "preempted", 2)
    victim = next(
        p
        for p in first
        if p["metadata"]["labels"][render.ELASTICJOB_LABEL] == "preempted"
        and p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"
    )
    h.end_pod(plane, NS, victim["metadata"]["name"], exit_codes.TERMINATED)

    def replacement():
        for pod in h.pods(plane, NS, "preempted"):
            labels = pod["metadata"]["labels"]
            if (
                labels["batch.kubernetes.io/job-completion-index"] == "0"
                and pod["metadata"]["name"] != victim["metadata"]["name"]
                and pod["status"].get("phase") == "Running"
            ):
                return pod

    new = wait_until("a replacement for index 0", replacement, timeout=60, every=0.1)
    failed = next(p for p in h.pods(plane, NS, "preempted") if p["metadata"]["name"] == victim["metadata"]["name"])
    ended = failed["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    record_property(
        "replacement",
        {
            "failed_at": ended,
            "replacement_created": new["metadata"]["creationTimestamp"],
            "replacement_running": new["status"]["startTime"],
        },
    )
    last = wait_until("lastFailure", lambda: h.status(plane, NS, "preempted").get("lastFailure"))
    assert (last["pod"], last["index"], last["exitCode"], last["action"]) == (
        victim["metadata"]["name"],
        0,
        143,
        exit_codes.REPLACED,
    )
    h.condition(plane, NS, "preempted", "Succeeded", timeout=120)
    job = h.job(plane, NS, "preempted")
    assert job["status"].get("failed", 0) == 0  # ignored by the podFailurePolicy: not counted
    assert "failedIndexes" not in job["status"] or job["status"]["failedIndexes"] == ""


def test_exit_1_is_retried_then_fails_with_the_reason_and_the_wait_says_so_in_one_line(running_controller):
    plane, ctl, _ = running_controller
    failing = h.elasticjob("crashes", NS, replicas=1, low=1, high=1, run_for="1s", backoffLimit=1)
    template = failing["spec"]["replicaSpecs"]["Worker"]["template"]
    template["metadata"]["labels"][h.FAIL] = "true"
    template["metadata"]["annotations"][h.EXIT_CODE] = "1"
    apply(plane, [failing])
    verdict = wait_for(
        KubernetesCluster(str(plane.kubeconfig), NS, "crashes", JOB_LABEL), timeout_seconds=120, poll_seconds=0.5
    )
    first_line = verdict.message.splitlines()[0]
    assert verdict.state == "failed"
    assert first_line.startswith(f"ElasticJob {NS}/crashes failed: ")
    assert "exited 1 (Error, counted against the retry limit)" in first_line
    # retried once (backoffLimit 1 = backoffLimitPerIndex), so two pods of index 0 ran
    # the wait deleted the ElasticJob: the garbage collector takes the Job and its pods with it
    wait_until(
        "the Job and pods gone",
        lambda: h.job(plane, NS, "crashes") is None and not h.pods(plane, NS, "crashes"),
        timeout=60,
    )


def test_a_drained_worker_is_replaced_and_not_counted(running_controller):
    plane, ctl, _ = running_controller
    apply(plane, [h.elasticjob("drained", NS, replicas=2, low=2, high=2, run_for="20s", backoffLimit=0)])
    first = h.running_pods(plane, NS, "drained", 2)
    victim = first[0]["metadata"]["name"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": NS}}
    plane.kubectl(
        "create", "--raw", f"/api/v1/namespaces/{NS}/pods/{victim}/eviction", "-f", "-", input=json.dumps(eviction)
    )
    replaced = wait_until(
        "a replacement of the evicted pod",
        lambda: [
            p
            for p in h.running_pods(plane, NS, "drained", 2)
            if p["metadata"]["name"] != victim and p["metadata"]["name"] not in {q["metadata"]["name"] for q in first}
        ],
        timeout=60,
    )
    assert replaced
    # backoffLimit 0: had the eviction counted, the index would have failed and the run with it
    h.condition(plane, NS, "drained", "Succeeded", timeout=120)
    assert h.job(plane, NS, "drained")["status"].get("failed", 0) == 0


def test_a_changed_spec_replaces_the_job(running_controller):
    plane, ctl, _ = running_controller
    apply(plane, [h.elasticjob("changes", NS, run_for="60s")])
    old = wait_until("the first Job", lambda: h.job(plane, NS, "changes"))
    h.running_pods(plane, NS, "changes", 2)
    changed = h.elasticjob("changes", NS, run_for="2s")
    changed["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"].append("--epochs=3")
    apply(plane, [changed])
    new = wait_until(
        "a new Job",
        lambda: (j := h.job(plane, NS, "changes")) and j["metadata"]["uid"] != old["metadata"]["uid"] and j,
        timeout=60,
    )
    assert new["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "--epochs=3"
    assert (
        new["metadata"]["annotations"][render.SPEC_HASH_ANNOTATION]
        != old["metadata"]["annotations"][render.SPEC_HASH_ANNOTATION]
    )
    h.condition(plane, NS, "changes", "Succeeded", timeout=90)
    assert h.status(plane, NS, "changes")["observedGeneration"] == 2


def test_deleting_the_elasticjob_leaves_nothing(running_controller):
    plane, ctl, _ = running_controller
    apply(plane, [h.elasticjob("deleted", NS, run_for="60s")])
    h.running_pods(plane, NS, "deleted", 2)
    plane.kubectl("delete", "elasticjob", "deleted", "-n", NS, "--wait=false")
    wait_until(
        "Job and pods gone",
        lambda: h.job(plane, NS, "deleted") is None and not h.pods(plane, NS, "deleted"),
        timeout=60,
    )
    time.sleep(3)  # the controller must not bring it back
    assert h.job(plane, NS, "deleted") is None


def test_progress_is_read_back_from_the_runs_history_and_status_prints_it(running_controller, capsys):
    plane, ctl, shared = running_controller
    from infra.cli import status as status_command
    from jobs.training import checkpoint

    run_dir = shared / "runs" / "progress"
    run_dir.mkdir(parents=True)
    name = "train-progress"  # the stack's name for runId "progress" (infra/specs/workloads.py names)
    apply(plane, [h.elasticjob(name, NS, run_for="30s", run_dir=str(run_dir))])
    h.running_pods(plane, NS, name, 2)
    # The times the test means, not the clock's: two lines appended within one millisecond would have no wall
    # time between them, and then no goodput (issue 41). A record's own `time` wins over append_history's stamp.
    started = round(time.time(), 3) - 2.0
    checkpoint.append_history(
        run_dir,
        {
            "event": "start",
            "epochs_done": 0,
            "position": 0,
            "epochs": 5,
            "world_size": 2,
            "restart_count": 0,
            "time": started,
        },
    )
    checkpoint.append_history(
        run_dir,
        {
            "event": "epoch",
            "epoch": 1,
            "loss": 1.9,
            "train_accuracy": 0.31,
            "images_per_second": 800.0,
            "seconds": 0.5,
            "world_size": 2,
            "time": started + 1.0,
        },
    )
    progress = wait_until(
        "status.progress",
        lambda: (p := h.status(plane, NS, name).get("progress")) and p.get("epoch") == 1 and p,
        timeout=30,
    )
    assert (progress["epochs"], progress["loss"], progress["accuracy"], progress["imagesPerSecond"]) == (
        5,
        1.9,
        0.31,
        800.0,
    )
    assert progress["secondsLeft"] == 2 and progress["goodput"] == 0.5  # 0.5 s of epoch in 1 s of wall time
    printed = plane.kubectl("get", "elasticjob", name, "-n", NS).stdout
    assert "EPOCH" in printed.splitlines()[0] and printed.splitlines()[1].split()[-2] == "1"
    # the command users run, through the real client, as on target existing
    code = status_command.main(
        [
            "local",
            "-c",
            f"namespace={NS}",
            "-c",
            "runId=progress",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--context",
            "",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0].startswith(f"ElasticJob {NS}/{name}: Running, started ")
    assert out[1] == "workers: 2 active, 0 succeeded, 0 failed"
    assert out[2].startswith("progress: epoch 1/5, loss 1.9000, train accuracy 31.0%, 800 images/s, about 0m02s left")


def test_run_policy_clean_pods_then_delete_the_finished_elasticjob(running_controller):
    """cleanPodPolicy All deletes the finished run's pods; ttlSecondsAfterFinished then deletes the
    ElasticJob, and its Job with it (the archived controller read neither: facts 18)."""
    plane, ctl, _ = running_controller
    # A TTL that the pods' deletion cannot outlast on a loaded machine (it counts from the whole-second
    # completionTime; 4 s was once all the margin), so the Job is seen still there before it.
    apply(plane, [h.elasticjob("policy", NS, run_for="2s", cleanPodPolicy="All", ttlSecondsAfterFinished=20)])
    h.condition(plane, NS, "policy", "Succeeded")
    wait_until("the finished run's pods deleted", lambda: not h.pods(plane, NS, "policy"), timeout=15)
    assert h.job(plane, NS, "policy") is not None  # the Job stays until the TTL
    wait_until(
        "the ElasticJob deleted after its TTL",
        lambda: plane.kubectl("get", "elasticjob", "policy", "-n", NS, check=False).returncode != 0,
        timeout=60,
    )
    wait_until("its Job collected", lambda: h.job(plane, NS, "policy") is None, timeout=30)


def test_active_deadline_fails_the_run_with_the_jobs_reason(running_controller):
    plane, ctl, _ = running_controller
    apply(plane, [h.elasticjob("slow", NS, run_for="60s", activeDeadlineSeconds=3)])
    failed = h.condition(plane, NS, "slow", "Failed", timeout=60)
    assert failed["reason"] == "DeadlineExceeded"
