"""`elastic-training status`: the lines it prints for an ElasticJob's status (as our controller writes
it: controller/status.py, controller/progress.py), and one line on bad input. The real command against
the real API server: tests/cluster/test_controller_runs.py."""

from __future__ import annotations

import pytest

from infra.cli import status

META = {"name": "train-run-1", "namespace": "training"}


def condition(kind, reason="", message=""):
    return {"type": kind, "status": "True", "reason": reason, "message": message}


@pytest.mark.parametrize(
    "job_status, expected",
    [
        ({}, ["ElasticJob training/train-run-1: Pending"]),
        (
            {"conditions": [condition("Created")], "startTime": "2026-11-26T18:00:00Z"},
            ["ElasticJob training/train-run-1: Created, started 2026-11-26T18:00:00Z"],
        ),
        (
            {"conditions": [condition("Created"), condition("Running")], "replicaStatuses": {"Worker": {"active": 2}}},
            ["ElasticJob training/train-run-1: Running", "workers: 2 active, 0 succeeded, 0 failed"],
        ),
        (
            {
                "conditions": [
                    condition("Created"),
                    condition("Restarting", "ElasticJobRestarting", "replacing worker index 0"),
                ]
            },
            ["ElasticJob training/train-run-1: Restarting (ElasticJobRestarting: replacing worker index 0)"],
        ),
        (
            {
                "conditions": [condition("Created"), condition("Failed", "FailedIndexes", "Job has failed indexes")],
                "completionTime": "2026-11-26T19:00:00Z",
            },
            [
                "ElasticJob training/train-run-1: Failed (FailedIndexes: Job has failed indexes), finished 2026-11-26T19:00:00Z"
            ],
        ),
        (
            {"conditions": [condition("Created"), condition("Succeeded", "ElasticJobSucceeded")]},
            ["ElasticJob training/train-run-1: Succeeded"],
        ),
    ],
)
def test_state_line(job_status, expected):
    assert status.lines({"metadata": META, "status": job_status}) == expected


def test_progress_and_last_failure_lines():
    job_status = {
        "conditions": [condition("Running")],
        "progress": {
            "epoch": 3,
            "epochs": 10,
            "imagesIntoEpoch": 1280,
            "loss": 1.73214,
            "accuracy": 0.4123,
            "imagesPerSecond": 811.6,
            "secondsLeft": 760,
            "goodput": 0.934,
            "finished": False,
            "updated": "2026-11-26T18:41:02Z",
        },
        "lastFailure": {
            "pod": "train-run-1-0-x7k2p",
            "index": 0,
            "exitCode": 143,
            "reason": "Error",
            "action": "replaced, not counted",
            "time": "2026-11-26T18:38:10Z",
        },
    }
    assert status.lines({"metadata": META, "status": job_status})[1:] == [
        "progress: epoch 3/10, 1280 images into the next, loss 1.7321, train accuracy 41.2%, 812 images/s, "
        "about 12m40s left, goodput 93% (history of 2026-11-26T18:41:02Z)",
        "last failure: worker train-run-1-0-x7k2p (index 0) exited 143 (Error): replaced, not counted, at 2026-11-26T18:38:10Z",
    ]
    job_status["progress"].update(secondsLeft=4000, finished=False)
    assert "about 1h06m left" in status.lines({"metadata": META, "status": job_status})[1]


@pytest.mark.parametrize(
    "argv, says, code",
    [
        (["nope"], "no stack file", 2),
        ([], "the following arguments are required: stack", 2),
        (["local", "-c", "runId=Bad_Id"], "runId", 2),
        (
            ["local", "--kubeconfig", "/nonexistent/kubeconfig"],
            "no kubeconfig /nonexistent/kubeconfig: point the stack's kubeconfig key",
            1,
        ),
    ],
)
def test_bad_input_is_one_line(capsys, argv, says, code):
    assert status.main(argv) == code
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_progress_of_a_run_by_steps():
    """A script on elastic_training has no epoch count: its progress is the step reached (issue 38)."""
    job_status = {
        "conditions": [condition("Running")],
        "progress": {"epoch": 0, "epochs": None, "step": 1200, "loss": 0.31234, "finished": False},
    }
    assert status.lines({"metadata": META, "status": job_status})[1] == "progress: step 1200, loss 0.3123"
