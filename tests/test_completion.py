"""How `pulumi up` decides an ElasticJob succeeded or failed, and what it says when it fails.

The ElasticJob and pod dicts below have the shapes the API server returns (kubeflow/common
JobStatus conditions; Pod containerStatuses)."""

from __future__ import annotations

import pytest

from infra.completion import assess, wait_for

HOUR = 3600.0


def elasticjob(*conditions: tuple[str, str, str, str]) -> dict:
    return {"metadata": {"name": "train-run-1"},
            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]}}


def pod(index: int, phase: str, exit_code: int | None = None, container: str = "elasticjob-worker") -> dict:
    status: dict = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": container,
                                        "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]
    return {"metadata": {"name": f"train-run-1-worker-{index}"}, "status": status}


RUNNING = ("Running", "True", "ElasticJobRunning", "ElasticJob train-run-1 is running.")


def test_running_while_workers_run():
    verdict = assess(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Pending")], 60, HOUR)
    assert verdict.state == "running"


def test_succeeded_condition():
    verdict = assess(elasticjob(("Running", "False", "", ""), ("Succeeded", "True", "ElasticJobSucceeded", "done")),
                     [pod(0, "Succeeded", 0), pod(1, "Succeeded", 0)], 600, HOUR)
    assert verdict.state == "succeeded"


def test_permanent_worker_failure_names_the_worker_and_code():
    # Under restartPolicy ExitCode the controller keeps the job Running forever after exit code 1.
    verdict = assess(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Failed", 1)], 600, HOUR)
    assert verdict.state == "failed"
    assert "worker train-run-1-worker-1 failed with exit code 1" in verdict.message


@pytest.mark.parametrize("code", [130, 137, 138, 143])
def test_retryable_exit_codes_are_left_to_the_controller(code):
    assert assess(elasticjob(RUNNING), [pod(0, "Failed", code)], 600, HOUR).state == "running"


def test_exit_codes_of_other_containers_do_not_count():
    assert assess(elasticjob(RUNNING), [pod(0, "Failed", 1, container="istio-proxy")], 600, HOUR).state == "running"


def test_controller_deadline_is_reported_as_a_deadline():
    failed = ("Failed", "True", "JobFailed", "ElasticJob train-run-1 has failed because it was active longer than specified deadline")
    verdict = assess(elasticjob(RUNNING, failed), [], 7300, HOUR * 2)
    assert verdict.state == "failed" and verdict.message.startswith("deadline exceeded: ElasticJob train-run-1")


def test_other_failed_condition_is_quoted():
    failed = ("Failed", "True", "JobFailed", "backoff limit reached")
    verdict = assess(elasticjob(failed), [], 60, HOUR)
    assert verdict == verdict.__class__("failed", "ElasticJob train-run-1 failed: JobFailed: backoff limit reached")


def test_our_own_deadline_lists_the_pod_phases():
    verdict = assess(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Pending")], HOUR + 1, HOUR)
    assert verdict.state == "failed"
    assert verdict.message == ("deadline exceeded: ElasticJob train-run-1 did not succeed within 60 minutes "
                               "(train-run-1-worker-0=Running, train-run-1-worker-1=Pending)")


def test_no_status_yet_is_running():
    assert assess({"metadata": {"name": "train-run-1"}}, [], 5, HOUR).state == "running"


def test_wait_for_polls_until_final():
    states = iter([
        (elasticjob(), []),
        (elasticjob(RUNNING), [pod(0, "Running")]),
        (elasticjob(("Succeeded", "True", "ElasticJobSucceeded", "ok")), [pod(0, "Succeeded", 0)]),
    ])
    now = [0.0]
    sleeps = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    verdict = wait_for(lambda: next(states), timeout_seconds=HOUR, poll_seconds=15, clock=lambda: now[0], sleep=sleep)
    assert verdict.state == "succeeded" and sleeps == [15, 15]


def test_wait_for_gives_up_at_the_deadline():
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    verdict = wait_for(lambda: (elasticjob(RUNNING), [pod(0, "Pending")]), timeout_seconds=60, poll_seconds=15,
                       clock=lambda: now[0], sleep=sleep)
    assert verdict.state == "failed" and "within 1 minutes" in verdict.message and now[0] == 75
