"""How `pulumi up` decides an ElasticJob succeeded or failed, what it says, and what it cleans up.

The dicts below have the shapes the API server returns, as the TorchElastic controller writes
them (pytorch/elastic `kubernetes/` @ bc88e6982961d4117e53c4c8163ecf277f35c2c5, built on
kubeflow/common @ 0b3a4c3fca853dcca31f16bcb56960557130ef06, the version its go.mod pins):
  - conditions: kubeflow/common pkg/apis/common/v1/types.go JobCondition (type, status "True"/"False",
    reason, message); pkg/util/status.go setCondition flips `Running` to "False" when `Succeeded`
    or `Failed` is added, and a `Running` condition removes `Restarting`;
  - worker pods: pkg/controller.v1/common/pod.go ReconcilePods reads the exit code of the
    `elasticjob-worker` container only, takes 0xbeef when it has no terminated state, and recreates
    the pod only for pkg/util/train/train_util.go's retryable codes (130, 137, 138, 143);
  - events: pod.go createPod records `FailedCreatePod`, "Error creating: <API error>", on the
    ElasticJob (client-go's recorder: involvedObject = the ElasticJob, with its uid).
"""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from infra.components.completion import (API_RETRY_SECONDS, DELETE_RETRY_SECONDS, ApiError, KubernetesCluster, Snapshot, TransientApiError, Verdict,
                              assess, wait_for)

HOUR = 3600.0
UID = "0d6c1d0e-3b7a-4d0e-9a55-3c6f1e2b7a10"


def elasticjob(*conditions: tuple[str, str, str, str], uid: str = UID) -> dict:
    return {"apiVersion": "elastic.pytorch.org/v1alpha1", "kind": "ElasticJob",
            "metadata": {"name": "train-run-1", "namespace": "training", "uid": uid},
            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]}}


def pod(index: int, phase: str, exit_code: int | None = None, container: str = "elasticjob-worker",
        **status_extra: str) -> dict:
    status: dict = {"phase": phase, **status_extra}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": container,
                                        "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]
    return {"metadata": {"name": f"train-run-1-worker-{index}"}, "status": status}


def event(reason: str, message: str, uid: str = UID, last: str = "2026-11-22T03:00:00Z") -> dict:
    return {"metadata": {"name": f"train-run-1.{reason.lower()}", "namespace": "training"},
            "involvedObject": {"apiVersion": "elastic.pytorch.org/v1alpha1", "kind": "ElasticJob",
                               "name": "train-run-1", "namespace": "training", "uid": uid},
            "reason": reason, "message": message, "type": "Warning", "count": 3,
            "firstTimestamp": "2026-11-22T02:59:00Z", "lastTimestamp": last}


def snap(job: dict, pods: list | None = None, events: list | None = None) -> Snapshot:
    return Snapshot(job, pods or [], events or [])


RUNNING = ("Running", "True", "ElasticJobRunning", "ElasticJob train-run-1 is running.")
# An illustrative admission refusal, as the controller records it: "Error creating: " + the API error.
REFUSED = ('Error creating: pods "train-run-1-worker-0" is forbidden: violates PodSecurity "restricted:latest": '
           'seccompProfile (pod or container "elasticjob-worker" must set securityContext.seccompProfile.type '
           'to "RuntimeDefault" or "Localhost")')


# --- verdicts -----------------------------------------------------------------------------------

def test_running_while_workers_run():
    verdict = assess(snap(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Pending")]), 60, HOUR)
    assert verdict.state == "running"


def test_succeeded_condition_with_running_flipped_to_false():
    job = elasticjob(("Running", "False", "ElasticJobRunning", "ElasticJob train-run-1 is running."),
                     ("Succeeded", "True", "ElasticJobSucceeded", "ElasticJob train-run-1 is successfully completed."))
    verdict = assess(snap(job, [pod(0, "Succeeded", 0), pod(1, "Succeeded", 0)]), 600, HOUR)
    assert verdict == Verdict("succeeded", "ElasticJob training/train-run-1 succeeded")


@pytest.mark.parametrize("kind", ["Succeeded", "Failed"])
def test_a_condition_with_status_false_is_no_verdict(kind):
    # Only status "True" counts (kubeflow/common status.go hasCondition compares with ConditionTrue).
    assert assess(snap(elasticjob(RUNNING, (kind, "False", "", ""))), 60, HOUR).state == "running"


def test_failed_condition_is_quoted():
    failed = ("Failed", "True", "ElasticJobFailed", "ElasticJob train-run-1 is failed because 1 Worker replica(s) failed.")
    verdict = assess(snap(elasticjob(failed)), 60, HOUR)
    assert verdict == Verdict("failed", "ElasticJob training/train-run-1 failed: ElasticJobFailed: "
                                        "ElasticJob train-run-1 is failed because 1 Worker replica(s) failed.")


def test_permanent_worker_failure_names_the_worker_and_code():
    # Under ExitCode the controller keeps the job Running (or Restarting) forever after exit code 1.
    job = elasticjob(("Restarting", "True", "ElasticJobRestarting",
                      "ElasticJob train-run-1 is restarting because 1 Worker replica(s) failed."))
    verdict = assess(snap(job, [pod(0, "Running"), pod(1, "Failed", 1)]), 600, HOUR)
    assert verdict.state == "failed"
    assert verdict.message.startswith("ElasticJob training/train-run-1: worker train-run-1-worker-1 failed with exit code 1")


@pytest.mark.parametrize("code", [130, 137, 138, 143])
def test_retryable_exit_codes_are_left_to_the_controller(code):
    assert assess(snap(elasticjob(RUNNING), [pod(0, "Failed", code)]), 600, HOUR).state == "running"


def test_exit_codes_of_other_containers_do_not_count():
    sidecar_failed = pod(0, "Failed", 143)
    sidecar_failed["status"]["containerStatuses"].append(
        {"name": "istio-proxy", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}})
    assert assess(snap(elasticjob(RUNNING), [sidecar_failed]), 600, HOUR).state == "running"


def test_a_failed_pod_whose_worker_never_ran_is_permanent():
    # The kubelet rejects a pod it cannot fit: phase Failed, no container statuses; the controller's
    # placeholder exit code 0xbeef is not retryable, so the pod is never recreated.
    rejected = pod(1, "Failed", reason="OutOfcpu",
                   message="Pod was rejected: Node didn't have enough resource: cpu, requested: 15000, used: 2000, capacity: 16000")
    verdict = assess(snap(elasticjob(RUNNING), [pod(0, "Running"), rejected]), 600, HOUR)
    assert verdict.state == "failed"
    assert verdict.message == ("ElasticJob training/train-run-1: worker train-run-1-worker-1 failed before its container "
                               "ran (OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu, requested: 15000, "
                               "used: 2000, capacity: 16000); the controller does not restart it")


def test_a_failed_pod_with_only_a_waiting_worker_is_permanent():
    waiting = pod(0, "Failed")
    waiting["status"]["containerStatuses"] = [{"name": "elasticjob-worker",
                                               "state": {"waiting": {"reason": "ContainerCreating"}}}]
    verdict = assess(snap(elasticjob(RUNNING), [waiting]), 600, HOUR)
    assert verdict.state == "failed" and "failed before its container ran (no reason given)" in verdict.message


# --- evictions (issue 13): what a drained or pressured node does to a worker pod -----------------
# A drain evicts through the Eviction API, i.e. a graceful delete: the kubelet sends SIGTERM, the pod
# gets a deletionTimestamp and, for a moment, phase Failed with the worker's exit code, then it is
# gone and the controller creates the missing replica (kubeflow/common pod.go ReconcilePods). The
# kubelet's own node-pressure eviction keeps the pod, phase Failed with reason Evicted, and the
# worker's exit code decides (jobs.elastic.agent answers SIGTERM with 143; a SIGKILL gives 137).

def evicted(index: int, exit_code: int | None, terminated_reason: str = "Error") -> dict:
    evicted_pod = pod(index, "Failed", exit_code, reason="Evicted",
                      message="The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi.")
    if exit_code is not None:
        evicted_pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = terminated_reason
    return evicted_pod


def draining(index: int, exit_code: int) -> dict:
    drained_pod = pod(index, "Failed", exit_code)
    drained_pod["metadata"]["deletionTimestamp"] = "2026-11-22T03:10:00Z"
    return drained_pod


@pytest.mark.parametrize("worker", [evicted(1, 143), evicted(1, 137, "ContainerStatusUnknown"),
                                    draining(1, 143), draining(1, 1)],
                         ids=["evicted-sigterm-143", "evicted-sigkill-137", "drained-143", "drained-bare-torchrun-1"])
def test_an_evicted_or_drained_worker_is_still_running(worker):
    """It will be recreated and rejoin the rendezvous: no verdict, no deletion."""
    assert assess(snap(elasticjob(RUNNING), [pod(0, "Running"), worker]), 600, HOUR).state == "running"


def test_exit_1_from_a_worker_nobody_signalled_is_still_permanent():
    verdict = assess(snap(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Failed", 1)]), 600, HOUR)
    assert verdict.state == "failed" and "worker train-run-1-worker-1 failed with exit code 1" in verdict.message


def test_a_pod_evicted_before_its_worker_started_is_permanent_as_for_the_controller():
    """No terminated worker state: the controller's 0xbeef placeholder is not retryable."""
    verdict = assess(snap(elasticjob(RUNNING), [pod(0, "Running"), evicted(1, None)]), 600, HOUR)
    assert verdict.state == "failed"
    assert "failed before its container ran (Evicted: The node was low on resource: memory." in verdict.message


def test_failed_create_pod_event_fails_at_once_with_its_message():
    verdict = assess(snap(elasticjob(), [], [event("SuccessfulCreateService", "Created service: train-run-1-worker-0"),
                                             event("FailedCreatePod", REFUSED)]), 30, HOUR)
    assert verdict == Verdict("failed", f"ElasticJob training/train-run-1: the controller cannot create worker pods: {REFUSED}")


def test_events_of_a_deleted_elasticjob_of_the_same_name_do_not_count():
    # Events outlive their object (the API server keeps them for an hour): a re-created ElasticJob
    # of the same name has a new uid.
    old = event("FailedCreatePod", REFUSED, uid="9b1f2c3d-0000-4000-8000-000000000001")
    assert assess(snap(elasticjob(), [], [old]), 30, HOUR).state == "running"


def test_other_warning_events_do_not_fail_the_wait():
    restart_policy = event("SettedPodTemplateRestartPolicy",
                           "Restart policy in pod template will be overwritten by restart policy in replica spec")
    assert assess(snap(elasticjob(RUNNING), [pod(0, "Running")], [restart_policy]), 30, HOUR).state == "running"


def test_our_own_deadline_lists_the_pod_phases():
    verdict = assess(snap(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Pending")]), HOUR + 1, HOUR)
    assert verdict == Verdict("failed", "deadline exceeded: ElasticJob training/train-run-1 did not succeed within "
                                        "60 minutes (train-run-1-worker-0=Running, train-run-1-worker-1=Pending)")


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
    cluster = FakeCluster(snap(elasticjob()), snap(elasticjob(RUNNING), [pod(0, "Running")]),
                          snap(elasticjob(("Succeeded", "True", "ElasticJobSucceeded", "ok")), [pod(0, "Succeeded", 0)]))
    assert run(cluster, clock).state == "succeeded"
    assert clock.sleeps == [15, 15] and cluster.deletions == 0


def test_every_failed_verdict_deletes_the_elasticjob_and_says_so():
    for failing in (snap(elasticjob(RUNNING), [pod(0, "Failed", 1)]),
                    snap(elasticjob(), [], [event("FailedCreatePod", REFUSED)]),
                    snap(elasticjob(("Failed", "True", "ElasticJobFailed", "failed"))),
                    snap(elasticjob(RUNNING), [pod(0, "Failed", reason="OutOfcpu")])):
        cluster = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Running")]), failing)
        verdict = run(cluster, FakeClock())
        assert verdict.state == "failed" and cluster.deletions == 1
        assert verdict.message.split("\n")[0].endswith("The ElasticJob training/train-run-1 was deleted, so its "
                                                       "pods stop (run `pulumi up --refresh` to create it again)")


def test_a_failed_workers_log_tail_is_kept_before_its_pod_is_deleted():
    cluster = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Failed", 1)]))
    verdict = run(cluster, FakeClock())
    assert cluster.logs_read == [("train-run-1-worker-1", 20)] and cluster.deletions == 1
    assert verdict.message.endswith("(run `pulumi up --refresh` to create it again)\n"
                                    "Last 20 lines of train-run-1-worker-1's log:\n"
                                    "epoch 3 step 40 loss 1.73\nRuntimeError: CUDA error: out of memory")


def test_no_log_is_read_for_a_pod_that_never_ran_and_a_log_error_is_only_reported():
    never_ran = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Failed", reason="OutOfcpu")]))
    assert "\n" not in run(never_ran, FakeClock()).message and never_ran.logs_read == []
    unreadable = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Failed", 1)]),
                             log_error=ApiError("HTTP 404 Not Found: pods \"train-run-1-worker-0\" not found", 404))
    verdict = run(unreadable, FakeClock())
    assert unreadable.deletions == 1
    assert verdict.message.endswith('\n(the log of train-run-1-worker-0 could not be read: '
                                    'HTTP 404 Not Found: pods "train-run-1-worker-0" not found)')


def test_our_deadline_deletes_the_elasticjob():
    clock = FakeClock()
    cluster = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Pending")]))
    verdict = run(cluster, clock, timeout=60)
    assert verdict.message.startswith("deadline exceeded: ElasticJob training/train-run-1 did not succeed within 1 minutes")
    assert "was deleted, so its pods stop" in verdict.message and cluster.deletions == 1 and clock.now == 75


def test_a_failed_deletion_is_reported_with_the_command_to_finish_it():
    cluster = FakeCluster(snap(elasticjob(RUNNING), [pod(0, "Failed", 2)]),
                          delete_errors=[ApiError("HTTP 403 Forbidden: elasticjobs is forbidden", 403)])
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
    cluster = FakeCluster(TransientApiError("HTTP 429 Too Many Requests"), TransientApiError("reset"),
                          snap(elasticjob(RUNNING)), TransientApiError("HTTP 502 Bad Gateway"),
                          snap(elasticjob(("Succeeded", "True", "ElasticJobSucceeded", "ok"))))
    assert run(cluster, clock).state == "succeeded"
    assert clock.sleeps == [2, 4, 15, 2]


def test_the_wait_fails_only_after_five_minutes_of_api_errors():
    clock = FakeClock()
    reset = TransientApiError("ProtocolError: Connection reset by peer")
    cluster = FakeCluster(snap(elasticjob(RUNNING)), reset, delete_errors=[reset] * 20)
    verdict = run(cluster, clock)
    first_failure = 15  # after the first poll
    reads_failing = sum(clock.sleeps[1:cluster.reads - 1])  # the backoff between failed reads
    assert reads_failing >= API_RETRY_SECONDS and max(clock.sleeps) == 30
    assert cluster.deletions > 1  # the deletion is retried too, for a shorter while
    assert clock.now - first_failure < API_RETRY_SECONDS + 30 + DELETE_RETRY_SECONDS + 30
    assert verdict.message.startswith("the Kubernetes API kept failing for 5 minutes while waiting for ElasticJob "
                                      "training/train-run-1 (ProtocolError: Connection reset by peer). Deleting the "
                                      "ElasticJob failed too")


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
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "code": code}).encode()


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


@pytest.mark.parametrize("error", [
    urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
    urllib3.exceptions.MaxRetryError(None, "/apis", reason="NewConnectionError"),
    ConnectionResetError(104, "Connection reset by peer"),
])
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
