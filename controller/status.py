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

from controller import job_indexes
from controller.progress import History
from controller.render import WORKER

CREATED, RUNNING, RESTARTING, SUCCEEDED, FAILED = "Created", "Running", "Restarting", "Succeeded", "Failed"
RESIZED = "Resized"  # ours: False while the API server refuses to resize the Job in place (reconcile.py)
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
        conditions.append(
            {
                "type": kind,
                "status": value,
                "reason": reason,
                "message": message,
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )


def report(conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str, now: str) -> None:
    """_set, but a False condition appears too (it says why something is not done)."""
    if not any(c["type"] == kind for c in conditions):
        conditions.append(
            {
                "type": kind,
                "status": "True" if status else "False",
                "reason": reason,
                "message": message,
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )
    _set(conditions, kind, status, reason, message, now)


def _clear(conditions: list[dict[str, Any]], kind: str, reason: str, message: str, now: str) -> None:
    if any(c["type"] == kind and c["status"] == "True" for c in conditions):
        _set(conditions, kind, False, reason, message, now)


def job_finished(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """The finished Job's Complete or Failed condition, else None."""
    conditions = ((job or {}).get("status") or {}).get("conditions")
    return _true(conditions, "Complete") or _true(conditions, "Failed")


def verifying(job: dict[str, Any], run: History | None, now: str) -> str | None:
    """Why the verdict of a finished Job waits (its run's history could not be read, and the Job
    ended less than VERIFY_SECONDS ago), else None."""
    if run is None or not run.error:
        return None
    ended = job_indexes.epoch(
        (job.get("status") or {}).get("completionTime") or (job_finished(job) or {}).get("lastTransitionTime")
    )
    left = VERIFY_SECONDS - ((job_indexes.epoch(now) or 0.0) - ended) if ended is not None else 0
    if left <= 0:
        return None
    return (
        f"the Job ended; the run's history cannot be read yet ({run.error}): reading it again every "
        f"{VERIFY_RETRY_SECONDS} s for {round(left)} s more, then the Job's verdict stands"
    )


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
    succeeded = len(job_indexes.index_set(job_status.get("completedIndexes") or ""))
    needed = min_replicas(job)
    completions = (job.get("spec") or {}).get("completions") or succeeded
    ended = (
        f"the Job ended Complete ({complete.get('message') or complete.get('reason') or 'success policy met'})"
        if complete
        else f"the Job ended Failed/{failed.get('reason') or 'Failed'}: {failed.get('message') or ''}"
    )
    finished = run.finished if run is not None else None
    why = f" ({run.error})" if run is not None and run.error else ""
    if finished and succeeded >= needed:
        return (
            SUCCEEDED,
            RUN_FINISHED,
            f"ElasticJob {name} succeeded: {succeeded} of {completions} workers finished "
            f"(at least {needed} needed) and the run's history records its end; {ended}",
        )
    if finished is None:  # nothing to ask but the Job
        if complete:
            return (
                SUCCEEDED,
                JOB_COMPLETE_UNCONFIRMED,
                f"ElasticJob {name} succeeded: {ended}; no run history the controller can read confirms it{why}",
            )
        return FAILED, failed.get("reason") or "Failed", (failed.get("message") or "") + why
    last = (run.progress or {}) if run is not None else {}
    where = f", epoch {last.get('epoch')}/{last.get('epochs')}" if last else ""
    if complete:
        return (
            FAILED,
            RUN_NOT_FINISHED,
            f"ElasticJob {name} failed: {ended}, but the run's history does not record "
            f"its end{where}{why}: workers that exit 0 without finishing the training are not a finished run",
        )
    detail = f"; {succeeded} of {completions} workers finished (at least {needed} needed)"
    if finished:
        detail += " and the history records the end"
    else:
        detail += f", and the run's history does not record its end{where}{why}"
    return FAILED, failed.get("reason") or "Failed", (failed.get("message") or "") + detail


def derive(
    elasticjob: dict[str, Any],
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    now: str,
    progress: dict[str, Any] | None = None,
    invalid: str | None = None,
    run: History | None = None,
    reason: str = INVALID_SPEC,
) -> dict[str, Any]:
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
    pods = job_indexes.within(job, pods)
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
        restarting = job_indexes.restarting_indexes(job, pods)
        running = any((p.get("status") or {}).get("phase") == "Running" and not job_indexes.is_failed(p) for p in pods)
        if restarting:
            latest = _latest_failure(pods)
            detail = (
                f": {latest['pod']} ended with exit code {latest['exitCode']} ({latest['reason']}), {latest['action']}"
                if latest
                else ""
            )
            delayed = job_indexes.waiting_indexes(job, pods, job_indexes.epoch(now) or 0.0)
            detail += "".join(
                f"; index {i} is re-created in {w['left']} s (its failure {w['failures']}: the Job "
                f"controller waits {w['delay']} s)"
                for i, w in sorted(delayed.items())
            )
            _set(
                conditions,
                RESTARTING,
                True,
                "ElasticJobRestarting",
                f"replacing worker index {', '.join(map(str, restarting))}{detail}",
                now,
            )
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
    failures = [job_indexes.failure(p) for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
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
        conditions.append(
            {
                "type": CREATED,
                "status": "False",
                "reason": reason,
                "message": message,
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )
    else:
        _set(conditions, CREATED, False, reason, message, now)
    return {"observedGeneration": elasticjob["metadata"].get("generation"), "conditions": conditions}
