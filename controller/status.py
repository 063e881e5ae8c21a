"""The ElasticJob's status, derived from its Job and the Job's pods (pure: dicts in, a dict out).

Kubeflow-compatible where Kubeflow defines a field (kubeflow/common @ 0b3a4c3 pkg/apis/common/v1
types.go JobStatus, JobCondition, ReplicaStatus; util/status.go: Running and Restarting exclude each
other, a finished job is neither): `conditions` (Created, Running, Restarting, Succeeded, Failed),
`replicaStatuses.Worker` {active, succeeded, failed}, `startTime`, `completionTime`. Ours besides:
`observedGeneration`, `lastFailure` {pod, index, exitCode, reason, action, time} and `progress`
(progress.py).

The terminal condition is the run's verdict, not the Job's (issue 36 items 1 and 2; `verdict` below):
once the Job has finished, the ElasticJob is Succeeded when at least minReplicas indexes succeeded
AND the run's history records its end; whatever the Job's reason. The Job's reason is not the truth
of the run: with backoffLimitPerIndex the Job controller (v1.35.8 pkg/controller/job/job_controller.go)
tests `failedIndexes > 0 && failed + succeeded >= completions` (Failed/FailedIndexes) BEFORE the
success policy, so a run that finished on minReplicas workers beside one failed index ends Failed;
and a Job can be Complete on workers that exited 0 without training (a replacement that found the
rendezvous closed after a failed run). The history decides whenever the controller can read it
(the run directory is on its mount); when it has none (no mount, a training script without our
history: no file, or no `start` record) the Job's verdict stands and the message says that nothing
confirmed it. A history that exists but cannot be read gives no verdict for VERIFY_SECONDS, then the Job's.
"""

from __future__ import annotations

import copy
from typing import Any

from controller import exit_codes
from controller.progress import History
from controller.render import WORKER, WORKER_CONTAINER

CREATED, RUNNING, RESTARTING, SUCCEEDED, FAILED = "Created", "Running", "Restarting", "Succeeded", "Failed"
RESIZED = "Resized"  # ours: False while the API server refuses to resize the Job in place (reconcile.py)
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
INVALID_SPEC = "InvalidSpec"
# The verdict's reasons (the Job's own reasons are kept when the history does not overrule them).
RUN_FINISHED = "RunFinished"  # enough workers finished and the history records the end
RUN_NOT_FINISHED = "RunNotFinished"  # the Job completed, but the history does not record the end
JOB_COMPLETE_UNCONFIRMED = "JobCompleteUnconfirmed"  # the Job completed; no history the controller can read
# A history that exists but cannot be read as the Job ends (an NFS stall over the read bound, EIO, a
# read still stuck) gives no verdict yet, never a Failed one (review ctrl-1 item 2): it is read again
# every VERIFY_RETRY_SECONDS (reconcile.py) for VERIFY_SECONDS after the Job ended, then the Job's
# word stands, saying why nothing confirmed it. Our choice: two minutes outlast an NFS server's
# usual failover, and a wait (Pulumi's) for the verdict is not held much longer.
VERIFYING_RUN = "VerifyingRun"
VERIFY_SECONDS, VERIFY_RETRY_SECONDS = 120, 10


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


def report(conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str, now: str) -> None:
    """_set, but a False condition appears too (it says why something is not done)."""
    if not any(c["type"] == kind for c in conditions):
        conditions.append({"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
                           "lastUpdateTime": now, "lastTransitionTime": now})
    _set(conditions, kind, status, reason, message, now)


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


def within(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of indexes below the Job's completions: after a scale-down the Job controller deletes
    the pods of indexes >= completions (v1.35.8 pkg/controller/job indexed_job_utils.go, after removing
    their tracking finalizer, job_controller.go): never counted, not a failure, not a restart (review
    ctrl-1 item 8)."""
    completions = (job.get("spec") or {}).get("completions")
    if not isinstance(completions, int):
        return pods
    return [p for p in pods if (index := _index(p)) is None or index < completions]


def restarting_indexes(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[int]:
    """Indexes whose last pod failed (or is terminating, or is a replacement not yet running) and that
    have not failed for good: the Job controller is replacing their worker."""
    pods = within(job, pods)
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


# The Job controller's per-index re-creation delay (Kubernetes v1.35.8 pkg/controller/job
# backoff_utils.go getRemainingTimePerIndex, indexed_job_utils.go getIndexAbsoluteFailureCount; the
# constants DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff): the n-th failure of an index,
# counting the failures the pod failure policy ignores (a preemption, exit 143) as well as the
# counted ones, delays its next pod by 10 s * 2^(n-1), at most 600 s, for the Job's life.
FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
IGNORED_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 10, 600


def job_backoff(failures: int) -> int:
    """The Job controller's delay after an index's `failures`-th failure (counted and ignored)."""
    return min(BACKOFF_SECONDS * 2 ** max(failures - 1, 0), MAX_BACKOFF_SECONDS)


def _count(pod: dict[str, Any], key: str) -> int:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(key) or "0"
    return int(value) if value.isdigit() else 0


def counted_failures(pods: list[dict[str, Any]]) -> bool:
    """Whether any pod's index has a failure counted against backoffLimitPerIndex (its annotation, or
    a failed pod whose exit the table counts), which a new Job would forget."""
    return any(_count(p, FAILURE_COUNT_ANNOTATION) for p in pods) or any(
        failure(p)["action"] == exit_codes.COUNTED for p in pods if (p.get("status") or {}).get("phase") == "Failed")


def _epoch(stamp: str | None) -> float | None:
    import datetime
    if not stamp:
        return None
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def waiting_indexes(job: dict[str, Any], pods: list[dict[str, Any]], now: float) -> dict[int, dict[str, Any]]:
    """Indexes the Job controller will re-create but has not yet (no active pod, not succeeded, not
    failed for good), each with `failures` (counted + ignored, this one included), `counted`, the
    Job controller's `delay` and the seconds `left` of it, read from the newest failed pod's
    annotations and finish time as the Job controller reads them."""
    job_status = job.get("status") or {}
    pods = within(job, pods)
    done = _index_set(job_status.get("completedIndexes") or "") | _index_set(job_status.get("failedIndexes") or "")
    by_index: dict[int, list[dict[str, Any]]] = {}
    for pod in pods:
        index = _index(pod)
        if index is not None and index not in done:
            by_index.setdefault(index, []).append(pod)
    waiting = {}
    for index, mine in by_index.items():
        if any(not _failed(p) and (p.get("status") or {}).get("phase") != "Succeeded" for p in mine):
            continue  # it has a pod (pending or running): nothing is delayed
        failed = [p for p in mine if (p.get("status") or {}).get("phase") == "Failed"]
        if not failed:
            continue
        newest = max(failed, key=lambda p: (worker_exit(p) or {}).get("finishedAt") or "")
        last = failure(newest)
        counted = _count(newest, FAILURE_COUNT_ANNOTATION) + (last["action"] == exit_codes.COUNTED)
        failures = _count(newest, FAILURE_COUNT_ANNOTATION) + _count(newest, IGNORED_COUNT_ANNOTATION) + 1
        delay = job_backoff(failures)
        ended = _epoch(last["time"]) or now
        waiting[index] = {"failures": failures, "counted": counted, "delay": delay,
                          "left": max(0, round(delay - (now - ended)))}
    return waiting


def _index_set(text: str) -> set[int]:
    """The Job's failedIndexes ("1,3-5") as a set."""
    indexes: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        indexes.update(range(int(low), int(high or low) + 1))
    return indexes


def job_finished(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """The finished Job's Complete or Failed condition, else None."""
    conditions = ((job or {}).get("status") or {}).get("conditions")
    return _true(conditions, "Complete") or _true(conditions, "Failed")


def verifying(job: dict[str, Any], run: History | None, now: str) -> str | None:
    """Why the verdict of a finished Job waits (its run's history could not be read, and the Job
    ended less than VERIFY_SECONDS ago), else None."""
    if run is None or not run.error:
        return None
    ended = _epoch((job.get("status") or {}).get("completionTime") or (job_finished(job) or {}).get("lastTransitionTime"))
    left = VERIFY_SECONDS - ((_epoch(now) or 0.0) - ended) if ended is not None else 0
    if left <= 0:
        return None
    return (f"the Job ended; the run's history cannot be read yet ({run.error}): reading it again every "
            f"{VERIFY_RETRY_SECONDS} s for {round(left)} s more, then the Job's verdict stands")


def min_replicas(job: dict[str, Any]) -> int:
    """The workers that must succeed: the Job's own success policy (render.py writes minReplicas
    there), else all of its completions."""
    spec = job.get("spec") or {}
    rules = (spec.get("successPolicy") or {}).get("rules") or []
    counts = [r["succeededCount"] for r in rules if isinstance(r.get("succeededCount"), int)]
    return min(counts) if counts else int(spec.get("completions") or 1)


def verdict(name: str, job: dict[str, Any], run: History | None) -> tuple[str, str, str]:
    """(condition type, reason, message) for a finished Job: the truth of the run (module docstring)."""
    job_status = job.get("status") or {}
    complete = _true(job_status.get("conditions"), "Complete")
    failed = _true(job_status.get("conditions"), "Failed") or {}  # a finished Job that is not Complete is Failed
    succeeded = len(_index_set(job_status.get("completedIndexes") or ""))
    needed = min_replicas(job)
    completions = (job.get("spec") or {}).get("completions") or succeeded
    ended = (f"the Job ended Complete ({complete.get('message') or complete.get('reason') or 'success policy met'})"
             if complete else f"the Job ended Failed/{failed.get('reason') or 'Failed'}: {failed.get('message') or ''}")
    finished = run.finished if run is not None else None
    why = f" ({run.error})" if run is not None and run.error else ""
    if finished and succeeded >= needed:
        return (SUCCEEDED, RUN_FINISHED, f"ElasticJob {name} succeeded: {succeeded} of {completions} workers finished "
                f"(at least {needed} needed) and the run's history records its end; {ended}")
    if finished is None:  # nothing to ask but the Job
        if complete:
            return (SUCCEEDED, JOB_COMPLETE_UNCONFIRMED, f"ElasticJob {name} succeeded: {ended}; no run history "
                    f"the controller can read confirms it{why}")
        return FAILED, failed.get("reason") or "Failed", (failed.get("message") or "") + why
    last = (run.progress or {}) if run is not None else {}
    where = f", epoch {last.get('epoch')}/{last.get('epochs')}" if last else ""
    if complete:
        return (FAILED, RUN_NOT_FINISHED, f"ElasticJob {name} failed: {ended}, but the run's history does not record "
                f"its end{where}{why}: workers that exit 0 without finishing the training are not a finished run")
    detail = f"; {succeeded} of {completions} workers finished (at least {needed} needed)"
    if finished:
        detail += " and the history records the end"
    else:
        detail += f", and the run's history does not record its end{where}{why}"
    return FAILED, failed.get("reason") or "Failed", (failed.get("message") or "") + detail


def derive(elasticjob: dict[str, Any], job: dict[str, Any] | None, pods: list[dict[str, Any]], now: str,
           progress: dict[str, Any] | None = None, invalid: str | None = None, run: History | None = None,
           reason: str = INVALID_SPEC) -> dict[str, Any]:
    """The new status of `elasticjob` (its current one is read for conditions, startTime and
    lastFailure, which outlive a replaced Job and deleted pods). `pods` are the Job's own pods;
    `run` what the run's history says (its progress is status.progress when `progress` is not given)."""
    if progress is None and run is not None:
        progress = run.progress
    old = elasticjob.get("status") or {}
    conditions = copy.deepcopy(old.get("conditions") or [])
    status: dict[str, Any] = {"observedGeneration": elasticjob["metadata"].get("generation")}
    name = elasticjob["metadata"]["name"]
    if invalid:
        _set(conditions, FAILED, True, reason, invalid, now)
        return {**status, "conditions": conditions, "completionTime": old.get("completionTime") or now}
    if job is None:
        return {**status, "conditions": conditions}
    job_status = job.get("status") or {}
    pods = within(job, pods)
    _set(conditions, CREATED, True, "ElasticJobCreated", f"Job {job['metadata']['name']} runs the workers", now)
    complete, failed = _true(job_status.get("conditions"), "Complete"), _true(job_status.get("conditions"), "Failed")
    if complete or failed:
        for kind in (RUNNING, RESTARTING):
            _clear(conditions, kind, "ElasticJobFinished", f"ElasticJob {name} finished", now)
        waiting = None if finished(old) else verifying(job, run, now)
        if waiting:  # no verdict yet: said in Running (False), which a finished Job's status keeps
            report(conditions, RUNNING, False, VERIFYING_RUN, waiting, now)
        elif not finished(old):  # a verdict, once written, stands (a later read of the history cannot flip it)
            kind, why, message = verdict(name, job, run)
            _set(conditions, kind, True, why, message, now)
        ended = job_status.get("completionTime") or (complete or failed or {}).get("lastTransitionTime") or now
        status["completionTime"] = old.get("completionTime") or ended
    else:
        restarting = restarting_indexes(job, pods)
        running = any((p.get("status") or {}).get("phase") == "Running" and not _failed(p) for p in pods)
        if restarting:
            latest = _latest_failure(pods)
            detail = (f": {latest['pod']} ended with exit code {latest['exitCode']} ({latest['reason']}), {latest['action']}"
                      if latest else "")
            delayed = waiting_indexes(job, pods, _epoch(now) or 0.0)
            detail += "".join(f"; index {i} is re-created in {w['left']} s (its failure {w['failures']}: the Job "
                              f"controller waits {w['delay']} s)" for i, w in sorted(delayed.items()))
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


def refused(elasticjob: dict[str, Any], reason: str, message: str, now: str) -> dict[str, Any]:
    """The status while the ElasticJob's Job cannot be made (the API refused it, or a Job of its name
    is not its own): a Created condition with status False that says why (written even though False:
    it is the one place a user looks)."""
    old = elasticjob.get("status") or {}
    conditions = copy.deepcopy(old.get("conditions") or [])
    mine = next((c for c in conditions if c["type"] == CREATED), None)
    if mine is None:
        conditions.append({"type": CREATED, "status": "False", "reason": reason, "message": message,
                           "lastUpdateTime": now, "lastTransitionTime": now})
    else:
        _set(conditions, CREATED, False, reason, message, now)
    return {"observedGeneration": elasticjob["metadata"].get("generation"), "conditions": conditions}
