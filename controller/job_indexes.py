"""What the Job controller does with each index of an ElasticJob's Job, read from the Job and its pods
(pure: dicts in, answers out): the worker's exit and what it means (exit_codes.py), which indexes are
being replaced, and how long the Job controller delays each one's next pod. status.py builds the
ElasticJob's status from these; reconcile.py decides from them when to look again.
"""

from __future__ import annotations

import datetime
from typing import Any

from controller import exit_codes
from controller.render import WORKER_CONTAINER

INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def worker_exit(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The worker container's terminated state, or None."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == WORKER_CONTAINER:
            return (container.get("state") or {}).get("terminated") or (container.get("lastState") or {}).get(
                "terminated"
            )
    return None


def disruption(pod: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "DisruptionTarget" and c.get("status") == "True"), None)


def index_of(pod: dict[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(INDEX_LABEL)
    return int(value) if value is not None and str(value).isdigit() else None


def failure(pod: dict[str, Any]) -> dict[str, Any]:
    """lastFailure for a failed pod: what ended it and what the Job controller does about it."""
    terminated = worker_exit(pod) or {}
    disrupted_by = disruption(pod)
    code = terminated.get("exitCode")
    reason = (
        (disrupted_by or {}).get("reason")
        or terminated.get("reason")
        or (pod.get("status") or {}).get("reason")
        or "Error"
    )
    return {
        "pod": pod["metadata"]["name"],
        "index": index_of(pod),
        "exitCode": code,
        "reason": reason,
        "action": exit_codes.meaning(code, disrupted=disrupted_by is not None),
        "time": terminated.get("finishedAt") or (disrupted_by or {}).get("lastTransitionTime"),
    }


def is_failed(pod: dict[str, Any]) -> bool:
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
    return [p for p in pods if (index := index_of(p)) is None or index < completions]


def restarting_indexes(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[int]:
    """Indexes whose last pod failed (or is terminating, or is a replacement not yet running) and that
    have not failed for good: the Job controller is replacing their worker."""
    pods = within(job, pods)
    failed_for_good = index_set((job.get("status") or {}).get("failedIndexes") or "")
    by_index: dict[int, list[dict[str, Any]]] = {}
    for pod in pods:
        index = index_of(pod)
        if index is not None:
            by_index.setdefault(index, []).append(pod)
    restarting = []
    for index, mine in sorted(by_index.items()):
        if index in failed_for_good or not any(is_failed(p) for p in mine):
            continue
        if not any((p.get("status") or {}).get("phase") in ("Running", "Succeeded") and not is_failed(p) for p in mine):
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


def annotated_count(pod: dict[str, Any], key: str) -> int:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(key) or "0"
    return int(value) if value.isdigit() else 0


def counted_failures(pods: list[dict[str, Any]]) -> bool:
    """Whether any pod's index has a failure counted against backoffLimitPerIndex (its annotation, or
    a failed pod whose exit the table counts), which a new Job would forget."""
    return any(annotated_count(p, FAILURE_COUNT_ANNOTATION) for p in pods) or any(
        failure(p)["action"] == exit_codes.COUNTED for p in pods if (p.get("status") or {}).get("phase") == "Failed"
    )


def epoch(stamp: str | None) -> float | None:
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
    done = index_set(job_status.get("completedIndexes") or "") | index_set(job_status.get("failedIndexes") or "")
    by_index: dict[int, list[dict[str, Any]]] = {}
    for pod in pods:
        index = index_of(pod)
        if index is not None and index not in done:
            by_index.setdefault(index, []).append(pod)
    waiting = {}
    for index, mine in by_index.items():
        if any(not is_failed(p) and (p.get("status") or {}).get("phase") != "Succeeded" for p in mine):
            continue  # it has a pod (pending or running): nothing is delayed
        failed = [p for p in mine if (p.get("status") or {}).get("phase") == "Failed"]
        if not failed:
            continue
        newest = max(failed, key=lambda p: (worker_exit(p) or {}).get("finishedAt") or "")
        last = failure(newest)
        counted = annotated_count(newest, FAILURE_COUNT_ANNOTATION) + (last["action"] == exit_codes.COUNTED)
        failures = (
            annotated_count(newest, FAILURE_COUNT_ANNOTATION) + annotated_count(newest, IGNORED_COUNT_ANNOTATION) + 1
        )
        delay = job_backoff(failures)
        ended = epoch(last["time"]) or now
        waiting[index] = {
            "failures": failures,
            "counted": counted,
            "delay": delay,
            "left": max(0, round(delay - (now - ended))),
        }
    return waiting


def index_set(text: str) -> set[int]:
    """The Job's failedIndexes ("1,3-5") as a set."""
    indexes: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        indexes.update(range(int(low), int(high or low) + 1))
    return indexes
