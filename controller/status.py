"""The ElasticJob's status, derived from its Job and the Job's pods (pure: dicts in, a dict out).

Kubeflow-compatible where Kubeflow defines a field (kubeflow/common @ 0b3a4c3 pkg/apis/common/v1
types.go JobStatus, JobCondition, ReplicaStatus; util/status.go: Running and Restarting exclude each
other, a finished job is neither): `conditions` (Created, Running, Restarting, Succeeded, Failed),
`replicaStatuses.Worker` {active, succeeded, failed}, `startTime`, `completionTime`. Ours besides:
`observedGeneration`, `lastFailure` {pod, index, exitCode, reason, action, time} and `progress`
(progress.py). The terminal conditions are the Job's: Succeeded when the Job is Complete, Failed
with the Job's reason and message (BackoffLimitExceeded, FailedIndexes, MaxFailedIndexesExceeded,
PodFailurePolicy, DeadlineExceeded: Kubernetes pkg/controller/job), so the wait reads one condition.
"""

from __future__ import annotations

import copy
from typing import Any

from controller import exit_codes
from controller.render import WORKER, WORKER_CONTAINER

CREATED, RUNNING, RESTARTING, SUCCEEDED, FAILED = "Created", "Running", "Restarting", "Succeeded", "Failed"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
INVALID_SPEC = "InvalidSpec"


def _true(conditions: list[dict[str, Any]] | None, kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions or [] if c.get("type") == kind and c.get("status") == "True"), None)


def _set(conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str, now: str) -> None:
    """Kubeflow's setCondition: one entry per type; lastTransitionTime moves only when status does."""
    value = "True" if status else "False"
    for condition in conditions:
        if condition["type"] == kind:
            if condition["status"] != value:
                condition["lastTransitionTime"] = now
            if (condition["status"], condition.get("reason"), condition.get("message")) != (value, reason, message):
                condition["lastUpdateTime"] = now
            condition.update(status=value, reason=reason, message=message)
            return
    if status:  # a condition appears once it is true
        conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                           "lastUpdateTime": now, "lastTransitionTime": now})


def _clear(conditions: list[dict[str, Any]], kind: str, reason: str, message: str, now: str) -> None:
    if any(c["type"] == kind and c["status"] == "True" for c in conditions):
        _set(conditions, kind, False, reason, message, now)


def worker_exit(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The worker container's terminated state, or None."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == WORKER_CONTAINER:
            return (container.get("state") or {}).get("terminated") or (container.get("lastState") or {}).get("terminated")
    return None


def _disruption(pod: dict[str, Any]) -> dict[str, Any] | None:
    return _true((pod.get("status") or {}).get("conditions"), "DisruptionTarget")


def _index(pod: dict[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(INDEX_LABEL)
    return int(value) if value is not None and str(value).isdigit() else None


def failure(pod: dict[str, Any]) -> dict[str, Any]:
    """lastFailure for a failed pod: what ended it and what the Job controller does about it."""
    terminated = worker_exit(pod) or {}
    disruption = _disruption(pod)
    code = terminated.get("exitCode")
    reason = (disruption or {}).get("reason") or terminated.get("reason") or (pod.get("status") or {}).get("reason") or "Error"
    return {"pod": pod["metadata"]["name"], "index": _index(pod), "exitCode": code, "reason": reason,
            "action": exit_codes.meaning(code, disrupted=disruption is not None),
            "time": terminated.get("finishedAt") or (disruption or {}).get("lastTransitionTime")}


def _failed(pod: dict[str, Any]) -> bool:
    """Failed, or on its way there (terminating): the Job controller will replace it."""
    phase = (pod.get("status") or {}).get("phase")
    return phase == "Failed" or (phase != "Succeeded" and bool(pod["metadata"].get("deletionTimestamp")))


def restarting_indexes(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[int]:
    """Indexes whose last pod failed (or is terminating, or is a replacement not yet running) and that
    have not failed for good: the Job controller is replacing their worker."""
    failed_for_good = _index_set((job.get("status") or {}).get("failedIndexes") or "")
    by_index: dict[int, list[dict[str, Any]]] = {}
    for pod in pods:
        index = _index(pod)
        if index is not None:
            by_index.setdefault(index, []).append(pod)
    restarting = []
    for index, mine in sorted(by_index.items()):
        if index in failed_for_good or not any(_failed(p) for p in mine):
            continue
        if not any((p.get("status") or {}).get("phase") in ("Running", "Succeeded") and not _failed(p) for p in mine):
            restarting.append(index)
    return restarting


def _index_set(text: str) -> set[int]:
    """The Job's failedIndexes ("1,3-5") as a set."""
    indexes: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        indexes.update(range(int(low), int(high or low) + 1))
    return indexes


def derive(elasticjob: dict[str, Any], job: dict[str, Any] | None, pods: list[dict[str, Any]], now: str,
           progress: dict[str, Any] | None = None, invalid: str | None = None) -> dict[str, Any]:
    """The new status of `elasticjob` (its current one is read for conditions, startTime and
    lastFailure, which outlive a replaced Job and deleted pods). `pods` are the Job's own pods."""
    old = elasticjob.get("status") or {}
    conditions = copy.deepcopy(old.get("conditions") or [])
    status: dict[str, Any] = {"observedGeneration": elasticjob["metadata"].get("generation")}
    name = elasticjob["metadata"]["name"]
    if invalid:
        _set(conditions, FAILED, True, INVALID_SPEC, invalid, now)
        return {**status, "conditions": conditions, "completionTime": old.get("completionTime") or now}
    if job is None:
        return {**status, "conditions": conditions}
    job_status = job.get("status") or {}
    _set(conditions, CREATED, True, "ElasticJobCreated", f"Job {job['metadata']['name']} runs the workers", now)
    complete, failed = _true(job_status.get("conditions"), "Complete"), _true(job_status.get("conditions"), "Failed")
    if complete or failed:
        for kind in (RUNNING, RESTARTING):
            _clear(conditions, kind, "ElasticJobFinished", f"ElasticJob {name} finished", now)
        if complete:
            detail = f" ({complete['message']})" if complete.get("message") else ""
            _set(conditions, SUCCEEDED, True, "ElasticJobSucceeded", f"ElasticJob {name} succeeded{detail}", now)
        else:
            _set(conditions, FAILED, True, failed.get("reason") or "Failed", failed.get("message") or "", now)
        finished = job_status.get("completionTime") or (complete or failed).get("lastTransitionTime") or now
        status["completionTime"] = old.get("completionTime") or finished
    else:
        restarting = restarting_indexes(job, pods)
        running = any((p.get("status") or {}).get("phase") == "Running" and not _failed(p) for p in pods)
        if restarting:
            latest = _latest_failure(pods)
            detail = (f": {latest['pod']} ended with exit code {latest['exitCode']} ({latest['reason']}), {latest['action']}"
                      if latest else "")
            _set(conditions, RESTARTING, True, "ElasticJobRestarting",
                 f"replacing worker index {', '.join(map(str, restarting))}{detail}", now)
            _clear(conditions, RUNNING, "ElasticJobRestarting", "a worker is being replaced", now)
        elif running:
            _set(conditions, RUNNING, True, "ElasticJobRunning", f"ElasticJob {name} is running", now)
            _clear(conditions, RESTARTING, "ElasticJobRunning", "every worker runs", now)
    status["conditions"] = conditions
    status["replicaStatuses"] = {WORKER: {key: job_status.get(key, 0) for key in ("active", "succeeded", "failed")}}
    start = old.get("startTime") or job_status.get("startTime")
    if start:
        status["startTime"] = start
    # The newest failure, whether its pod is still there or only in the status (a replaced Job's).
    candidates = [f for f in (_latest_failure(pods), old.get("lastFailure")) if f]
    if candidates:
        status["lastFailure"] = max(candidates, key=lambda f: f.get("time") or "")
    if progress is not None:
        status["progress"] = progress
    return status


def _latest_failure(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    failures = [failure(p) for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    return max(failures, key=lambda f: (f["time"] or "", f["pod"]), default=None)


def finished(status: dict[str, Any]) -> dict[str, Any] | None:
    """The Succeeded or Failed condition when the ElasticJob has finished, else None."""
    return _true(status.get("conditions"), SUCCEEDED) or _true(status.get("conditions"), FAILED)
