"""How `pulumi up` decides an ElasticJob succeeded or failed, what it says, and what it cleans up.

The ElasticJob dicts below have the status our controller writes (controller/status.py derives it,
tests/controller/test_controller_status.py checks that, tests/cluster/test_controller_*.py on the real
control plane): Kubeflow-style conditions (type, status "True"/"False", reason, message), the
Failed condition carrying the Job's reason, and `lastFailure`. Events: the Job controller records
`FailedCreate`, "Error creating: <API error>", on the Job, which has the ElasticJob's name
(kubernetes pkg/controller/controller_utils.go FailedCreatePodReason; client-go's recorder).
"""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from infra.components.completion import (
    API_RETRY_SECONDS,
    DELETE_RETRY_SECONDS,
    ApiError,
    KubernetesCluster,
    Snapshot,
    TransientApiError,
    Verdict,
    assess,
    wait_for,
)

HOUR = 3600.0
UID = "0d6c1d0e-3b7a-4d0e-9a55-3c6f1e2b7a10"


CREATED_AT = "2026-11-22T02:50:00Z"


def elasticjob(*conditions: tuple[str, str, str, str], uid: str = UID, last_failure: dict | None = None) -> dict:
    status: dict = {"conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]}
    if last_failure:
        status["lastFailure"] = last_failure
    return {
        "apiVersion": "elastic.pytorch.org/v1alpha1",
        "kind": "ElasticJob",
        "metadata": {"name": "train-run-1", "namespace": "training", "uid": uid, "creationTimestamp": CREATED_AT},
        "status": status,
    }


def pod(
    index: int, phase: str, exit_code: int | None = None, container: str = "elasticjob-worker", **status_extra: str
) -> dict:
    status: dict = {"phase": phase, **status_extra}
    if exit_code is not None:
        status["containerStatuses"] = [
            {"name": container, "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}
        ]
    return {"metadata": {"name": f"train-run-1-worker-{index}"}, "status": status}


def event(reason: str, message: str, uid: str = UID, last: str = "2026-11-22T03:00:00Z") -> dict:
    return {
        "metadata": {"name": f"train-run-1.{reason.lower()}", "namespace": "training"},
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train-run-1",
            "namespace": "training",
            "uid": uid,
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": 3,
        "firstTimestamp": "2026-11-22T02:59:00Z",
        "lastTimestamp": last,
    }


def snap(job: dict, pods: list | None = None, events: list | None = None) -> Snapshot:
    return Snapshot(job, pods or [], events or [])


RUNNING = ("Running", "True", "ElasticJobRunning", "ElasticJob train-run-1 is running.")
# An illustrative admission refusal, as the Job controller records it: "Error creating: " + the API error.
REFUSED = (
    'Error creating: pods "train-run-1-worker-0" is forbidden: violates PodSecurity "restricted:latest": '
    'seccompProfile (pod or container "elasticjob-worker" must set securityContext.seccompProfile.type '
    'to "RuntimeDefault" or "Localhost")'
)


# --- verdicts -----------------------------------------------------------------------------------


def test_running_while_workers_run():
    verdict = assess(snap(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Pending")]), 60, HOUR)
    assert verdict.state == "running"


def test_succeeded_condition_with_running_flipped_to_false():
    job = elasticjob(
        ("Running", "False", "ElasticJobRunning", "ElasticJob train-run-1 is running."),
        ("Succeeded", "True", "ElasticJobSucceeded", "ElasticJob train-run-1 is successfully completed."),
    )
    verdict = assess(snap(job, [pod(0, "Succeeded", 0), pod(1, "Succeeded", 0)]), 600, HOUR)
    assert verdict == Verdict("succeeded", "ElasticJob training/train-run-1 succeeded")


@pytest.mark.parametrize("kind", ["Succeeded", "Failed"])
def test_a_condition_with_status_false_is_no_verdict(kind):
    # Only status "True" counts (kubeflow/common status.go hasCondition compares with ConditionTrue).
    assert assess(snap(elasticjob(RUNNING, (kind, "False", "", ""))), 60, HOUR).state == "running"


def test_failed_condition_is_quoted():
    failed = ("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    verdict = assess(snap(elasticjob(failed)), 60, HOUR)
    assert verdict == Verdict(
        "failed",
        "ElasticJob training/train-run-1 failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
    )


FAILED = ("Failed", "True", "FailedIndexes", "Job has failed indexes")
LAST_FAILURE = {
    "pod": "train-run-1-1-x7k2p",
    "index": 1,
    "exitCode": 1,
    "reason": "Error",
    "action": "counted against the retry limit",
    "time": "2026-11-22T03:00:00Z",
}


def test_failed_condition_names_the_last_failed_worker_and_its_log_is_kept():
    failed = ("Failed", "True", "FailedIndexes", "Job has failed indexes")
    verdict = assess(snap(elasticjob(failed, last_failure=LAST_FAILURE)), 600, HOUR)
    assert verdict == Verdict(
        "failed",
        "ElasticJob training/train-run-1 failed: FailedIndexes: Job has failed indexes; "
        "last failure: worker train-run-1-1-x7k2p (index 1) exited 1 "
        "(Error, counted against the retry limit)",
        "train-run-1-1-x7k2p",
    )


@pytest.mark.parametrize("code", [1, 2, 130, 137, 138, 143])
def test_a_failed_pod_without_a_failed_condition_is_no_verdict(code):
    """The Job controller replaces or retries it, or the controller marks the run Failed: the wait
    never infers a verdict from a pod (the archived controller's gaps it made up for are closed)."""
    restarting = ("Restarting", "True", "ElasticJobRestarting", "replacing worker index 1")
    job = elasticjob(restarting, last_failure={**LAST_FAILURE, "exitCode": code})
    assert assess(snap(job, [pod(0, "Running"), pod(1, "Failed", code)]), 600, HOUR).state == "running"


def test_failed_create_event_fails_at_once_with_its_message():
    verdict = assess(
        snap(
            elasticjob(),
            [],
            [event("SuccessfulCreate", "Created pod: train-run-1-0-abcde"), event("FailedCreate", REFUSED)],
        ),
        30,
        HOUR,
    )
    assert verdict == Verdict(
        "failed", f"ElasticJob training/train-run-1: the Job cannot create worker pods: {REFUSED}"
    )


def test_events_of_a_deleted_predecessors_job_of_the_same_name_do_not_count():
    # Events outlive their object (the API server keeps them for an hour): an event from before this
    # ElasticJob was created is a deleted predecessor's Job's.
    old = event("FailedCreate", REFUSED, last="2026-11-22T02:40:00Z")
    assert assess(snap(elasticjob(), [], [old]), 30, HOUR).state == "running"


def test_other_warning_events_do_not_fail_the_wait():
    restart_policy = event("TooManyActivePods", "Too many active pods running after completion count reached")
    assert assess(snap(elasticjob(RUNNING), [pod(0, "Running")], [restart_policy]), 30, HOUR).state == "running"


def test_our_own_deadline_lists_the_pod_phases():
    verdict = assess(snap(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Pending")]), HOUR + 1, HOUR)
    assert verdict == Verdict(
        "failed",
        "deadline exceeded: ElasticJob training/train-run-1 did not succeed within "
        "60 minutes (train-run-1-worker-0=Running, train-run-1-worker-1=Pending)",
    )


def test_no_status_yet_is_running():
    job = elasticjob()
    del job["status"]
    assert assess(snap(job), 5, HOUR).state == "running"


# --- the wait: polling, deleting on failure, retrying the API -----------------------------------


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeCluster:
    """Answers read() from a script (a Snapshot, or an exception to raise); the last entry repeats."""

    namespace, name = "training", "train-run-1"

    def __init__(self, *script, delete_errors=(), log_error=None):
        self.script = list(script)
        self.reads = 0
        self.deletions = 0
        self.delete_errors = list(delete_errors)
        self.log_error = log_error
        self.logs_read: list[tuple[str, int]] = []

    def read(self) -> Snapshot:
        self.reads += 1
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        return item

    def worker_log_tail(self, pod: str, lines: int) -> str:
        self.logs_read.append((pod, lines))
        if self.log_error:
            raise self.log_error
        return "epoch 3 step 40 loss 1.73\nRuntimeError: CUDA error: out of memory\n"

    def delete_elasticjob(self) -> None:
        self.deletions += 1
        if self.delete_errors:
            raise self.delete_errors.pop(0)


def run(cluster: FakeCluster, clock: FakeClock, timeout: float = HOUR) -> Verdict:
    return wait_for(cluster, timeout_seconds=timeout, poll_seconds=15, clock=clock, sleep=clock.sleep)


def test_wait_polls_until_success_and_deletes_nothing():
    clock = FakeClock()
    cluster = FakeCluster(
        snap(elasticjob()),
        snap(elasticjob(RUNNING), [pod(0, "Running")]),
        snap(elasticjob(("Succeeded", "True", "ElasticJobSucceeded", "ok")), [pod(0, "Succeeded", 0)]),
    )
    assert run(cluster, clock).state == "succeeded"
    assert clock.sleeps == [15, 15] and cluster.deletions == 0


def test_every_failed_verdict_deletes_the_elasticjob_and_says_so():
    for failing in (
        snap(elasticjob(FAILED, last_failure=LAST_FAILURE), [pod(1, "Failed", 1)]),
        snap(elasticjob(), [], [event("FailedCreate", REFUSED)]),
        snap(elasticjob(("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline"))),
    ):
        cluster = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Running")]), failing)
        verdict = run(cluster, FakeClock())
        assert verdict.state == "failed" and cluster.deletions == 1
        assert verdict.message.split("\n")[0].endswith(
            "The ElasticJob training/train-run-1 was deleted, so its "
            "pods stop (run `pulumi up --refresh` to create it again)"
        )


def test_a_failed_workers_log_tail_is_kept_before_its_pod_is_deleted():
    cluster = FakeCluster(snap(elasticjob(FAILED, last_failure=LAST_FAILURE), [pod(0, "Running"), pod(1, "Failed", 1)]))
    verdict = run(cluster, FakeClock())
    assert cluster.logs_read == [("train-run-1-1-x7k2p", 20)] and cluster.deletions == 1
    assert verdict.message.endswith(
        "(run `pulumi up --refresh` to create it again)\n"
        "Last 20 lines of train-run-1-1-x7k2p's log:\n"
        "epoch 3 step 40 loss 1.73\nRuntimeError: CUDA error: out of memory"
    )


def test_no_log_is_read_without_a_failed_worker_and_a_log_error_is_only_reported():
    no_worker = FakeCluster(snap(elasticjob(("Failed", "True", "DeadlineExceeded", "too long"))))
    assert "\n" not in run(no_worker, FakeClock()).message and no_worker.logs_read == []
    unreadable = FakeCluster(
        snap(elasticjob(FAILED, last_failure=LAST_FAILURE)),
        log_error=ApiError("HTTP 404 Not Found: pods \"train-run-1-1-x7k2p\" not found", 404),
    )
    verdict = run(unreadable, FakeClock())
    assert unreadable.deletions == 1
    assert verdict.message.endswith(
        '\n(the log of train-run-1-1-x7k2p could not be read: HTTP 404 Not Found: pods "train-run-1-1-x7k2p" not found)'
    )


def test_our_deadline_deletes_the_elasticjob():
    clock = FakeClock()
    cluster = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Pending")]))
    verdict = run(cluster, clock, timeout=60)
    assert verdict.message.startswith(
        "deadline exceeded: ElasticJob training/train-run-1 did not succeed within 1 minutes"
    )
    assert "was deleted, so its pods stop" in verdict.message and cluster.deletions == 1 and clock.now == 75


def test_a_failed_deletion_is_reported_with_the_command_to_finish_it():
    cluster = FakeCluster(
        snap(elasticjob(FAILED, last_failure=LAST_FAILURE)),
        delete_errors=[ApiError("HTTP 403 Forbidden: elasticjobs is forbidden", 403)],
    )
    verdict = run(cluster, FakeClock())
    assert "Deleting the ElasticJob failed too (HTTP 403 Forbidden: elasticjobs is forbidden)" in verdict.message
    assert verdict.message.split("\n")[0].endswith("`kubectl delete elasticjob -n training train-run-1`")


def test_transient_api_errors_are_retried_with_backoff():
    clock = FakeClock()
    outage = [TransientApiError("HTTP 503 Service Unavailable")] * 8  # 2+4+8+16+30+30+30+30 = 150 s
    cluster = FakeCluster(*outage, snap(elasticjob(("Succeeded", "True", "ElasticJobSucceeded", "ok"))))
    assert run(cluster, clock).state == "succeeded"
    assert clock.sleeps == [2, 4, 8, 16, 30, 30, 30, 30] and cluster.deletions == 0


def test_the_backoff_starts_again_after_a_good_answer():
    clock = FakeClock()
    cluster = FakeCluster(
        TransientApiError("HTTP 429 Too Many Requests"),
        TransientApiError("reset"),
        snap(elasticjob(RUNNING)),
        TransientApiError("HTTP 502 Bad Gateway"),
        snap(elasticjob(("Succeeded", "True", "ElasticJobSucceeded", "ok"))),
    )
    assert run(cluster, clock).state == "succeeded"
    assert clock.sleeps == [2, 4, 15, 2]


def test_the_wait_fails_only_after_five_minutes_of_api_errors():
    clock = FakeClock()
    reset = TransientApiError("ProtocolError: Connection reset by peer")
    cluster = FakeCluster(snap(elasticjob(RUNNING)), reset, delete_errors=[reset] * 20)
    verdict = run(cluster, clock)
    first_failure = 15  # after the first poll
    reads_failing = sum(clock.sleeps[1 : cluster.reads - 1])  # the backoff between failed reads
    assert reads_failing >= API_RETRY_SECONDS and max(clock.sleeps) == 30
    assert cluster.deletions > 1  # the deletion is retried too, for a shorter while
    assert clock.now - first_failure < API_RETRY_SECONDS + 30 + DELETE_RETRY_SECONDS + 30
    assert verdict.message.startswith(
        "the Kubernetes API kept failing for 5 minutes while waiting for ElasticJob "
        "training/train-run-1 (ProtocolError: Connection reset by peer). Deleting the "
        "ElasticJob failed too"
    )


def test_a_missing_elasticjob_is_not_retried():
    # Pulumi created the ElasticJob before the wait (dependsOn) and the controller never deletes one,
    # so a 404 means it was deleted on purpose: waiting will not bring it back.
    clock = FakeClock()
    cluster = FakeCluster(ApiError('HTTP 404 Not Found: elasticjobs.elastic.pytorch.org "train-run-1" not found', 404))
    verdict = run(cluster, clock)
    assert verdict.state == "failed" and clock.sleeps == [] and cluster.reads == 1 and cluster.deletions == 0
    assert verdict.message.startswith("ElasticJob training/train-run-1 does not exist (HTTP 404")
    assert "pulumi up --refresh" in verdict.message


def test_a_refusal_is_not_retried_but_still_cleans_up():
    clock = FakeClock()
    cluster = FakeCluster(ApiError("HTTP 403 Forbidden: elasticjobs.elastic.pytorch.org is forbidden", 403))
    verdict = run(cluster, clock)
    assert clock.sleeps == [] and cluster.reads == 1 and cluster.deletions == 1
    assert verdict.message.startswith("the Kubernetes API refused to show ElasticJob training/train-run-1 (HTTP 403")


# --- the real client's errors, sorted --------------------------------------------------------------


def _status_body(code: int, message: str) -> bytes:
    # The API server's error body: a meta/v1 Status.
    return json.dumps(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": code}
    ).encode()


def _raise(error: Exception):
    def call():
        raise error

    return call


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_5xx_and_429_are_transient(status):
    error = ApiException(status=status, reason="Busy")
    error.body = _status_body(status, "etcdserver: request timed out")
    with pytest.raises(TransientApiError, match=f"HTTP {status} Busy: etcdserver: request timed out"):
        KubernetesCluster._call(_raise(error))


@pytest.mark.parametrize(
    "error",
    [
        urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
        urllib3.exceptions.MaxRetryError(None, "/apis", reason="NewConnectionError"),
        ConnectionResetError(104, "Connection reset by peer"),
    ],
)
def test_connection_errors_are_transient(error):
    with pytest.raises(TransientApiError):
        KubernetesCluster._call(_raise(error))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_answers_are_final(status):
    error = ApiException(status=status, reason="No")
    error.body = _status_body(status, "nope")
    with pytest.raises(ApiError, match=f"HTTP {status} No: nope") as raised:
        KubernetesCluster._call(_raise(error))
    assert raised.value.status == status
