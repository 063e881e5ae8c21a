"""The ElasticJob status derived from its Job and pods (controller/status.py), as tables.

The Job and pod states are the ones Kubernetes' Job controller writes (pkg/controller/job: Job
conditions Complete/Failed with reasons BackoffLimitExceeded, FailedIndexes, DeadlineExceeded,
PodFailurePolicy; status.failedIndexes "1,3-5"; pods labelled batch.kubernetes.io/job-completion-index;
a drained pod's DisruptionTarget condition, reason EvictionByEvictionAPI); the real control plane
checks the same in tests/cluster/test_controller_*.py.
"""

from __future__ import annotations

import pytest

from controller import exit_codes, job_indexes, status

NOW, LATER = "2026-11-26T18:00:00Z", "2026-11-26T18:05:00Z"
UID = "job-uid"


def elasticjob(old_status=None, generation=1):
    return {
        "metadata": {"name": "train", "namespace": "training", "generation": generation},
        "status": old_status or {},
    }


def job(active=0, succeeded=0, failed=0, condition=None, failed_indexes=None, start="2026-11-26T17:59:00Z"):
    job_status = {"active": active, "succeeded": succeeded, "failed": failed, "startTime": start}
    if condition:
        kind, reason = condition
        job_status["conditions"] = [
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": f"{reason} message",
                "lastTransitionTime": "2026-11-26T18:01:00Z",
            }
        ]
        if kind == "Complete":
            job_status["completionTime"] = "2026-11-26T18:01:00Z"
    if failed_indexes:
        job_status["failedIndexes"] = failed_indexes
    return {"metadata": {"name": "train", "uid": UID}, "status": job_status}


def pod(
    name, index, phase, exit_code=None, reason="Error", disrupted=False, deleting=False, finished="2026-11-26T18:00:30Z"
):
    state = (
        {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": finished}}
        if exit_code is not None
        else {"running": {}}
    )
    body = {
        "metadata": {"name": name, "labels": {job_indexes.INDEX_LABEL: str(index)}},
        "status": {"phase": phase, "containerStatuses": [{"name": "elasticjob-worker", "state": state}]},
    }
    if disrupted:
        body["status"]["conditions"] = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "lastTransitionTime": "2026-11-26T18:00:20Z",
            }
        ]
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-11-26T18:00:25Z"
    return body


def true_conditions(result):
    return sorted(c["type"] for c in result["conditions"] if c["status"] == "True")


RUNNING_PODS = [pod("train-0-a", 0, "Running"), pod("train-1-a", 1, "Running")]


@pytest.mark.parametrize(
    "case, the_job, pods, expected_true",
    [
        ("no Job yet", None, [], []),
        ("pods pending", job(active=2), [pod("train-0-a", 0, "Pending"), pod("train-1-a", 1, "Pending")], ["Created"]),
        ("running", job(active=2), RUNNING_PODS, ["Created", "Running"]),
        (
            "worker ended 143, replacement pending",
            job(active=2),
            [pod("train-0-a", 0, "Failed", 143), pod("train-0-b", 0, "Pending"), pod("train-1-a", 1, "Running")],
            ["Created", "Restarting"],
        ),
        (
            "worker ended 143, replacement running",
            job(active=2),
            [pod("train-0-a", 0, "Failed", 143), pod("train-0-b", 0, "Running"), pod("train-1-a", 1, "Running")],
            ["Created", "Running"],
        ),
        (
            "drained pod still terminating",
            job(active=2),
            [pod("train-0-a", 0, "Running", disrupted=True, deleting=True), pod("train-1-a", 1, "Running")],
            ["Created", "Restarting"],
        ),
        (
            "index failed for good (exit 2), the rest runs",
            job(active=1, failed=1, failed_indexes="0"),
            [pod("train-0-a", 0, "Failed", 2), pod("train-1-a", 1, "Running")],
            ["Created", "Running"],
        ),
        (
            "Job complete",
            job(succeeded=1, condition=("Complete", "SuccessPolicy")),
            [pod("train-0-a", 0, "Succeeded", 0)],
            ["Created", "Succeeded"],
        ),
        (
            "Job failed",
            job(failed=3, condition=("Failed", "FailedIndexes"), failed_indexes="0,1"),
            [pod("train-0-c", 0, "Failed", 1), pod("train-1-c", 1, "Failed", 1)],
            ["Created", "Failed"],
        ),
    ],
)
def test_conditions(case, the_job, pods, expected_true):
    assert true_conditions(status.derive(elasticjob(), the_job, pods, NOW)) == expected_true, case


def test_failed_carries_the_jobs_reason_and_message_and_the_completion_time():
    result = status.derive(elasticjob(), job(condition=("Failed", "BackoffLimitExceeded")), [], NOW)
    failed = next(c for c in result["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == ("BackoffLimitExceeded", "BackoffLimitExceeded message")
    assert result["completionTime"] == "2026-11-26T18:01:00Z"


def test_running_and_restarting_exclude_each_other_and_transition_times_move_only_on_change():
    first = status.derive(elasticjob(), job(active=2), RUNNING_PODS, NOW)
    restarting = status.derive(
        elasticjob(first),
        job(active=2),
        [pod("train-0-a", 0, "Failed", 143), pod("train-0-b", 0, "Pending"), pod("train-1-a", 1, "Running")],
        LATER,
    )
    by_type = {c["type"]: c for c in restarting["conditions"]}
    assert by_type["Running"]["status"] == "False" and by_type["Restarting"]["status"] == "True"
    assert by_type["Created"]["lastTransitionTime"] == NOW  # unchanged since the first pass
    assert by_type["Running"]["lastTransitionTime"] == LATER
    assert (
        "exit code 143" in by_type["Restarting"]["message"] and exit_codes.REPLACED in by_type["Restarting"]["message"]
    )
    finished = status.derive(elasticjob(restarting), job(condition=("Complete", "SuccessPolicy")), [], LATER)
    assert {c["type"]: c["status"] for c in finished["conditions"]} == {
        "Created": "True",
        "Running": "False",
        "Restarting": "False",
        "Succeeded": "True",
    }


@pytest.mark.parametrize(
    "the_pod, expected",
    [
        (pod("train-1-a", 1, "Failed", 143), {"exitCode": 143, "reason": "Error", "action": exit_codes.REPLACED}),
        (
            pod("train-1-a", 1, "Failed", 143, disrupted=True),
            {"exitCode": 143, "reason": "EvictionByEvictionAPI", "action": exit_codes.REPLACED},
        ),
        (
            pod("train-1-a", 1, "Failed", 137, reason="OOMKilled"),
            {"exitCode": 137, "reason": "OOMKilled", "action": exit_codes.COUNTED},
        ),
        (pod("train-1-a", 1, "Failed", 1), {"exitCode": 1, "reason": "Error", "action": exit_codes.COUNTED}),
        (
            pod("train-1-a", 1, "Failed", 127, reason="ContainerCannotRun"),
            {"exitCode": 127, "reason": "ContainerCannotRun", "action": exit_codes.INDEX_FAILED},
        ),
    ],
)
def test_last_failure(the_pod, expected):
    result = status.derive(elasticjob(), job(active=1), [the_pod, pod("train-0-a", 0, "Running")], NOW)
    assert result["lastFailure"] == {"pod": "train-1-a", "index": 1, "time": "2026-11-26T18:00:30Z", **expected}


def test_last_failure_outlives_its_pod_and_a_newer_one_replaces_it():
    old = {
        "lastFailure": {
            "pod": "gone",
            "index": 0,
            "exitCode": 1,
            "reason": "Error",
            "action": exit_codes.COUNTED,
            "time": "2026-11-26T17:00:00Z",
        }
    }
    assert status.derive(elasticjob(old), job(active=2), RUNNING_PODS, NOW)["lastFailure"]["pod"] == "gone"
    newer = [pod("train-1-a", 1, "Failed", 143), pod("train-0-a", 0, "Running")]
    assert status.derive(elasticjob(old), job(active=2), newer, NOW)["lastFailure"]["pod"] == "train-1-a"


def test_counts_start_time_generation_and_progress():
    result = status.derive(elasticjob(generation=4), job(active=2, failed=1), RUNNING_PODS, NOW, progress={"epoch": 3})
    assert result["replicaStatuses"] == {"Worker": {"active": 2, "succeeded": 0, "failed": 1}}
    assert (result["startTime"], result["observedGeneration"], result["progress"]) == (
        "2026-11-26T17:59:00Z",
        4,
        {"epoch": 3},
    )
    # startTime is the first Job's: a replaced Job does not move it
    kept = status.derive(elasticjob(result), job(active=2, start="2026-11-26T18:30:00Z"), RUNNING_PODS, LATER)
    assert kept["startTime"] == "2026-11-26T17:59:00Z"


def test_an_invalid_spec_fails_with_reason_invalid_spec():
    result = status.derive(elasticjob(), None, [], NOW, invalid="minReplicas 3, replicas 2, maxReplicas 2: ...")
    failed = status.finished(result)
    assert (failed["type"], failed["reason"]) == ("Failed", status.INVALID_SPEC)


@pytest.mark.parametrize("text, indexes", [("", set()), ("0", {0}), ("1,3-5", {1, 3, 4, 5})])
def test_failed_indexes_notation(text, indexes):
    assert job_indexes.index_set(text) == indexes


def test_a_scale_down_is_not_a_restart_nor_a_failure():
    """Review ctrl-1 item 8: completions 4 -> 3 makes the Job controller delete index 3's pod (exit 143,
    never counted): it showed as Restarting, index 3, and as lastFailure "replaced"."""
    shrunk = job(active=3)
    shrunk["spec"] = {"completions": 3}
    pods = [pod(f"p{i}", i, "Running") for i in range(3)] + [pod("p3", 3, "Failed", exit_code=143, deleting=True)]
    assert job_indexes.restarting_indexes(shrunk, pods) == []
    assert job_indexes.waiting_indexes(shrunk, pods, job_indexes.epoch(LATER)) == {}
    new = status.derive(elasticjob(), shrunk, pods, NOW)
    assert [(c["type"], c["status"]) for c in new["conditions"] if c["status"] == "True"] == [
        ("Created", "True"),
        ("Running", "True"),
    ]
    assert "lastFailure" not in new
