"""One reconcile pass for one ElasticJob, against the API server (what __main__ calls on every event).

The pass, in order:
1. read the ElasticJob (gone or being deleted: nothing to do, the garbage collector removes its Job
   and pods through their owner references);
2. a Job of its name that is not its own (no owner: orphaned by `kubectl delete --cascade=orphan`
   or made by hand; another owner's, still being collected): report what blocks it, in the log and
   in the Created condition, and look again after a growing delay (the queue's backoff);
3. finished (a Succeeded or Failed condition): apply the run policy (cleanPodPolicy All deletes the
   Job's pods; Running needs nothing, the Job controller stops a finished Job's running pods;
   ttlSecondsAfterFinished deletes the ElasticJob that long after completionTime), refresh the
   status, and never start it again (as Kubeflow's controllers do); a Job that still runs beside a
   verdict (InvalidSpec after an edit, WorkerPodsRefused) is deleted;
4. render its Job (render.py); an ElasticJob that cannot run gets Failed with reason InvalidSpec;
5. no Job: create it; the API refusing it (400, 403, 422: a name, a template, an admission policy)
   is reported with the API's message, retried MAX_CREATE_ATTEMPTS times with backoff, then Failed
   with reason JobRejected; a Job whose pod template or other fixed field differs (its spec-hash
   annotation, render.spec_hash): delete it in the foreground (its pods first) and create the new
   one once it is gone; a Job that differs only in what Kubernetes changes in place (a resize:
   completions and parallelism together, maxFailedIndexes, activeDeadlineSeconds; render.MUTABLE_FIELDS):
   patch it, the running workers stay;
6. a Job whose every pod create the API refuses (its FailedCreate events: PodSecurity, a quota):
   reported in Created with the API's message; refused POD_REFUSALS_TO_FAIL times, Failed with
   reason WorkerPodsRefused, unless the refusal passes (TRANSIENT_POD_REFUSALS: waited on);
7. worker pods of this ElasticJob that no Job owns (a Job deleted with --cascade=orphan leaves them
   running with the same rendezvous id beside the new Job's): delete them, count them in
   status.orphansRemoved;
8. write the status derived from the Job, its pods and the run's history (progress is best effort:
   a history that cannot be read never stops this write), with a merge patch to the status
   subresource, only when it changed. The spec is never written.
Returns the seconds after which to look again without an event (a pending TTL, a Job being
deleted), a Backoff (look again after the queue's growing delay), or None.

It is over 400 lines because the pass is one ordered sequence of these steps over shared state
(the ElasticJob and Job read once); split across modules, that order would no longer read in one place.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from controller import job_indexes, progress, render, status

log = logging.getLogger("controller")
GONE = 404
CONFLICT = 409
# The API's answers that say the Job we sent is wrong (Bad Request, Forbidden: an admission policy,
# Unprocessable Entity: validation): retrying the same request cannot help for long.
REFUSED = (400, 403, 422)
MAX_CREATE_ATTEMPTS = 5
RECHECK_DELETING_SECONDS = 1.0
# The longest a run below minReplicas waits for the Job controller to re-create a preempted worker
# before the controller replaces the Job (_stalled; docs/runs.md "What ends a run"): the Job
# controller's own delay doubles with every failure of an index, 10 s to 600 s, ignored ones too.
MAX_REPLACEMENT_WAIT_SECONDS = 60.0
# At most this many replacements per ElasticJob (review ctrl-1 item 6: a store outage makes every
# worker exit with an ignored code, and each new Job stalled again ~150 s later). Our choice.
MAX_JOB_REPLACEMENTS = 3
JOB_REJECTED = "JobRejected"
JOB_NAME_TAKEN = "JobNameTaken"
RESIZE_REFUSED = "ResizeRefused"
WORKER_PODS_REFUSED = "WorkerPodsRefused"
# The Job controller retries a refused pod create with its own backoff; a template the API refuses
# this many times (PodSecurity, a quota) is not going to run.
POD_REFUSALS_TO_FAIL = 3
# Refusals that pass (review ctrl-1 item 5): a ResourceQuota's "exceeded quota" (apiserver admission
# plugin resourcequota), an admission webhook that cannot be called ("failed calling webhook") and the
# API server's own errors (5xx: "Internal error occurred", "the server is currently unable") are
# reported and waited on, never a verdict; a PodSecurity or validation refusal fails the run.
TRANSIENT_POD_REFUSALS = (
    "exceeded quota",
    "failed calling webhook",
    "Internal error occurred",
    "the server is currently unable",
    "Too many requests",
    "Timeout: request did not complete",
)
# Every API call is bounded (review ctrl-1 item 4): a half-open connection would otherwise hold the
# only worker for the kernel's TCP retransmission time (~15 min) while the Lease stays renewed. Our
# choice: far above a healthy API server's answer, far below that.
REQUEST_SECONDS = 30.0


@dataclass(frozen=True)
class Backoff:
    """Look again after the queue's growing, per-object delay: something outside blocks this ElasticJob."""

    why: str


def api_message(error: Exception) -> str:
    """The API server's own message (its Status body), else the error's text."""
    body = getattr(error, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (ValueError, AttributeError):
        message = None
    return message or f"{getattr(error, 'status', '')} {getattr(error, 'reason', '') or error}".strip()


@dataclass
class Api:
    """The clients a pass uses (kubernetes.client CustomObjectsApi, BatchV1Api, CoreV1Api)."""

    custom: Any
    batch: Any
    core: Any


def _raw(call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The API server's JSON as sent (timestamps stay RFC 3339 "...Z", as Kubernetes writes them),
    not the client's models."""
    kwargs.setdefault("_request_timeout", REQUEST_SECONDS)
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


def now_text() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds_since(stamp: str) -> float:
    moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return (datetime.datetime.now(datetime.timezone.utc) - moment).total_seconds()


def _status_code(error: Exception) -> int | None:
    return getattr(error, "status", None)


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid and ref.get("controller") for ref in obj["metadata"].get("ownerReferences") or [])


def _only(obj: dict[str, Any]) -> dict[str, Any] | None:
    """DeleteOptions that delete `obj` only if it is still the object read (its uid): a Job or pod
    made since under the same name (by another leader, in a two-leader window) is left alone
    (review ctrl-1 item 10)."""
    uid = obj["metadata"].get("uid")
    return {"preconditions": {"uid": uid}} if uid else None


class NotLeading(Exception):
    """This process is no longer sure to lead: it writes nothing more."""


def _controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((ref for ref in obj["metadata"].get("ownerReferences") or [] if ref.get("controller")), None)


def _deadline_left(elasticjob: dict[str, Any], desired: dict[str, Any], job: dict[str, Any] | None) -> None:
    """spec.activeDeadlineSeconds bounds the run, not each Job (review ctrl-1 item 9: every replacement
    started it again): a Job gets what is left of it since the run's first start (status.startTime),
    counted to the Job's own start (the Job controller counts its deadline from there), or to now for
    a Job not yet made. A Job that has not started yet keeps what it has."""
    deadline = desired["spec"].get("activeDeadlineSeconds")
    first = (elasticjob.get("status") or {}).get("startTime")
    if deadline is None or not first:
        return
    began = ((job or {}).get("status") or {}).get("startTime")
    if job is not None and not began:
        if "activeDeadlineSeconds" in (job.get("spec") or {}):
            desired["spec"]["activeDeadlineSeconds"] = job["spec"]["activeDeadlineSeconds"]
        return
    if began:  # both whole-second stamps: the same answer on every pass, so no patch back and forth
        used = (
            datetime.datetime.fromisoformat(began.replace("Z", "+00:00"))
            - datetime.datetime.fromisoformat(first.replace("Z", "+00:00"))
        ).total_seconds()
    else:
        used = _seconds_since(first)
    desired["spec"]["activeDeadlineSeconds"] = max(1, int(deadline - max(0.0, used)))


class Reconciler:
    """`pods_of(name)`: the pods labelled with ElasticJob `name` (__main__ gives its watch cache;
    without one, each pass lists them)."""

    def __init__(
        self,
        api: Api,
        namespace: str,
        shared_root: Path | None = None,
        pods_of: Callable[[str], list[dict[str, Any]]] | None = None,
        max_replacement_wait: float = MAX_REPLACEMENT_WAIT_SECONDS,
        leading: Callable[[], bool] = lambda: True,
        shared_claim: str | None = None,
    ):
        self.api, self.namespace, self.shared_root, self.shared_claim = api, namespace, shared_root, shared_claim
        self.leading = leading
        self.max_replacement_wait = max_replacement_wait
        self._pods_of = pods_of
        self._rejected: dict[str, int] = {}  # ElasticJob uid -> Job creates the API refused

    # --- reads ---------------------------------------------------------------------------------
    def _elasticjob(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.api.custom.get_namespaced_custom_object(
                render.GROUP, render.VERSION, self.namespace, render.PLURAL, name, _request_timeout=REQUEST_SECONDS
            )
        except ApiException as error:
            if error.status == GONE:
                return None
            raise

    def _job(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return _raw(self.api.batch.read_namespaced_job, name, self.namespace)
        except ApiException as error:
            if error.status == GONE:
                return None
            raise

    def _labelled_pods(self, name: str) -> list[dict[str, Any]]:
        if self._pods_of is not None:
            return self._pods_of(name)
        return _raw(
            self.api.core.list_namespaced_pod, self.namespace, label_selector=f"{render.ELASTICJOB_LABEL}={name}"
        )["items"]

    def _pods(self, name: str, job: dict[str, Any]) -> list[dict[str, Any]]:
        return [pod for pod in self._labelled_pods(name) if _owned_by(pod, job["metadata"]["uid"])]

    # --- writes --------------------------------------------------------------------------------
    def _lead(self) -> None:
        """Before every write (review ctrl-1 item 10): a pass runs for seconds, and the lease can be
        lost meanwhile; the worker's check at the start of a pass is not enough."""
        if not self.leading():
            raise NotLeading(
                "no longer sure to lead (the last renew is older than the renew deadline): writing nothing"
            )

    def _patch_status(self, elasticjob: dict[str, Any], new: dict[str, Any]) -> None:
        old = elasticjob.get("status") or {}
        if all(old.get(key) == value for key, value in new.items()):
            return
        self._lead()
        from kubernetes.client.exceptions import ApiException

        try:
            self.api.custom.patch_namespaced_custom_object_status(
                render.GROUP,
                render.VERSION,
                self.namespace,
                render.PLURAL,
                elasticjob["metadata"]["name"],
                {"status": new},
                _content_type="application/merge-patch+json",
                _request_timeout=REQUEST_SECONDS,
            )
        except ApiException as error:
            # 422: the object itself fails the CRD's root-level rules (a name stored under an older CRD;
            # ratcheting does not apply to a status write, review ctrl-1 item 11): no retry can write
            # it; said in the log, and the pass goes on instead of failing for ever.
            if error.status != 422:
                raise
            log.warning(
                "elasticjob %s: the API server refuses its status (%s): the ElasticJob fails the CRD's rules "
                "(a name stored under an older CRD: delete it and create it again)",
                elasticjob["metadata"]["name"],
                api_message(error),
            )

    def _delete_pods(self, name: str, job: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        for pod in self._pods(name, job):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            try:
                self._lead()
                self.api.core.delete_namespaced_pod(
                    pod["metadata"]["name"], self.namespace, body=_only(pod), _request_timeout=REQUEST_SECONDS
                )
            except ApiException as error:
                if error.status != GONE:
                    raise

    # --- the pass ------------------------------------------------------------------------------
    def reconcile(self, name: str) -> float | Backoff | None:
        elasticjob = self._elasticjob(name)
        if elasticjob is None or elasticjob["metadata"].get("deletionTimestamp"):
            return None
        uid = elasticjob["metadata"]["uid"]
        job = self._job(name)
        if job is not None and not _owned_by(job, uid):
            return self._blocked(elasticjob, job)
        done = status.finished(elasticjob.get("status") or {})
        if done:
            return self._finished(elasticjob, job)
        try:
            desired = render.job(elasticjob)
        except render.InvalidSpec as error:
            self._patch_status(elasticjob, status.derive(elasticjob, None, [], now_text(), invalid=str(error)))
            return RECHECK_DELETING_SECONDS if job is not None else None  # _finished stops its Job
        if job is not None and job["metadata"].get("deletionTimestamp"):
            return RECHECK_DELETING_SECONDS
        _deadline_left(elasticjob, desired, job)
        wanted_hash = desired["metadata"]["annotations"][render.SPEC_HASH_ANNOTATION]
        live_hash = (
            (job["metadata"].get("annotations") or {}).get(render.SPEC_HASH_ANNOTATION) if job is not None else None
        )
        if (
            job is not None
            and live_hash != wanted_hash
            and live_hash == render.whole_spec_hash(desired["spec"], job["spec"])
        ):
            log.info(
                "elasticjob %s: Job %s carries the whole-spec hash of an older controller and the same fixed "
                "fields: re-annotating it, its workers stay",
                name,
                name,
            )
            self._lead()
            job = _raw(
                self.api.batch.patch_namespaced_job,
                name,
                self.namespace,
                {"metadata": {"annotations": {render.SPEC_HASH_ANNOTATION: wanted_hash}}},
                _content_type="application/merge-patch+json",
            )
        if (
            job is not None
            and (job["metadata"].get("annotations") or {}).get(render.SPEC_HASH_ANNOTATION) != wanted_hash
        ):
            log.info(
                "elasticjob %s: the pod template (or another field a Job cannot change) changed, replacing Job %s",
                name,
                name,
            )
            self._lead()
            self.api.batch.delete_namespaced_job(
                name, self.namespace, propagation_policy="Foreground", body=_only(job), _request_timeout=REQUEST_SECONDS
            )
            return RECHECK_DELETING_SECONDS
        resize_refused = None
        if job is not None and not status.job_finished(job) and (changes := render.mutable_changes(desired, job)):
            log.info(
                "elasticjob %s: changing Job %s in place: %s",
                name,
                name,
                ", ".join(f"{key} {job['spec'].get(key)} -> {value}" for key, value in changes.items()),
            )
            from kubernetes.client.exceptions import ApiException

            try:
                self._lead()
                job = _raw(
                    self.api.batch.patch_namespaced_job,
                    name,
                    self.namespace,
                    {"spec": changes},
                    _content_type="application/merge-patch+json",
                )
            except ApiException as error:  # reported, and the pass goes on to the status (review ctrl-1 item 7)
                if error.status not in REFUSED:
                    raise
                resize_refused = (
                    f"the API server refused to change Job {name} in place ({changes}): {api_message(error)}"
                )
                log.warning("elasticjob %s: %s", name, resize_refused)
        if job is None:
            created = self._create(elasticjob, desired)
            if not isinstance(created, dict):
                return created
            job = created
        labelled = self._labelled_pods(name)
        removed = self._remove_orphans(name, labelled)
        pods = [pod for pod in labelled if _owned_by(pod, job["metadata"]["uid"])]
        if not pods and (refused := self._pods_refused(job)) is not None:
            message, count = refused
            transient = any(part.lower() in message.lower() for part in TRANSIENT_POD_REFUSALS)
            if count >= POD_REFUSALS_TO_FAIL and not transient:
                log.warning("elasticjob %s: %s (%d times): failing it", name, message, count)
                self._patch_status(
                    elasticjob,
                    status.derive(elasticjob, None, [], now_text(), invalid=message, reason=WORKER_PODS_REFUSED),
                )
                return RECHECK_DELETING_SECONDS  # _finished stops the Job
            self._patch_status(elasticjob, status.refused(elasticjob, WORKER_PODS_REFUSED, message, now_text()))
            return Backoff(message)
        run = progress.history(elasticjob, self.shared_root, claim=self.shared_claim)
        new = status.derive(elasticjob, job, pods, now_text(), run=run)
        if resize_refused:
            status.report(new["conditions"], status.RESIZED, False, RESIZE_REFUSED, resize_refused, now_text())
        elif any(c["type"] == status.RESIZED for c in new["conditions"]):
            status.report(
                new["conditions"],
                status.RESIZED,
                True,
                "ResizedInPlace",
                f"Job {name} has the ElasticJob's replicas",
                now_text(),
            )
        old = elasticjob.get("status") or {}
        total = old.get("orphansRemoved", 0) + removed
        if total:
            new["orphansRemoved"] = total
        if old.get("jobReplacements"):
            new["jobReplacements"] = old["jobReplacements"]
        stalled = (
            None
            if status.finished(new) or status.job_finished(job)
            else self._stalled(job, pods, run, old.get("jobReplacements", 0))
        )
        if stalled:
            new["jobReplacements"] = old.get("jobReplacements", 0) + 1
            self._patch_status(elasticjob, new)
            log.warning(
                "elasticjob %s: %s: replacing Job %s (a new Job starts every index at once)", name, stalled, name
            )
            self._lead()
            self.api.batch.delete_namespaced_job(
                name, self.namespace, propagation_policy="Foreground", body=_only(job), _request_timeout=REQUEST_SECONDS
            )
            return RECHECK_DELETING_SECONDS
        self._patch_status(elasticjob, new)
        if status.job_finished(job) and not status.finished(new):
            return status.VERIFY_RETRY_SECONDS  # no verdict yet: the history is read again (status.verifying)
        waiting = job_indexes.waiting_indexes(job, pods, time.time())
        return min((w["left"] + 1 for w in waiting.values() if w["delay"] > self.max_replacement_wait), default=None)

    def _stalled(
        self,
        job: dict[str, Any],
        pods: list[dict[str, Any]],
        run: progress.History | None = None,
        replacements: int = 0,
    ) -> str | None:
        """Why the run cannot train until the Job controller's per-index backoff has passed, or None.
        The bound (issue 36 item 4): fewer than minReplicas workers alive, and an index the Job
        controller will re-create only after more than `max_replacement_wait` seconds, all of whose
        failures were ignored ones (preemptions, drains: replacing the Job must not reset the retry
        limit of a worker that really fails). A new Job starts with no failures counted, no completed
        or failed indexes: never replace one that has any, nor a run whose history records its end,
        nor more than MAX_JOB_REPLACEMENTS times (review ctrl-1 item 6)."""
        job_status = job.get("status") or {}
        if (
            job_status.get("completedIndexes")
            or job_status.get("failedIndexes")
            or job_indexes.counted_failures(pods)
            or (run is not None and run.finished)
        ):
            return None
        if replacements >= MAX_JOB_REPLACEMENTS:
            log.warning(
                "elasticjob %s: stalled below minReplicas, but replaced %d times already: waiting for the Job "
                "controller",
                job["metadata"]["name"],
                replacements,
            )
            return None
        alive = sum(
            1
            for p in job_indexes.within(job, pods)
            if (p.get("status") or {}).get("phase") in ("Pending", "Running")
            and not p["metadata"].get("deletionTimestamp")
        )
        needed = status.min_replicas(job)
        if alive >= needed:
            return None
        waiting = job_indexes.waiting_indexes(job, pods, time.time())
        late = {i: w for i, w in waiting.items() if w["delay"] > self.max_replacement_wait and w["counted"] == 0}
        if not late:
            return None
        return (
            f"{alive} of the {needed} workers it needs alive, and the Job controller re-creates index "
            + ", ".join(f"{i} only after {w['delay']} s (its failure {w['failures']})" for i, w in sorted(late.items()))
            + f", more than the {self.max_replacement_wait:g} s bound"
        )

    def _pods_refused(self, job: dict[str, Any]) -> tuple[str, int] | None:
        """(the API's message, how many times) when the Job controller's pod creates are refused (its
        FailedCreate events: PodSecurity, a ResourceQuota, ...) and the Job has no pod at all."""
        job_status = job.get("status") or {}
        if any(job_status.get(key) for key in ("active", "succeeded", "failed", "ready", "terminating")):
            return None
        selector = f"involvedObject.kind=Job,involvedObject.name={job['metadata']['name']},reason=FailedCreate"
        events = _raw(self.api.core.list_namespaced_event, self.namespace, field_selector=selector)["items"]
        mine = [e for e in events if (e.get("involvedObject") or {}).get("uid") == job["metadata"]["uid"]]
        if not mine:
            return None
        latest = max(mine, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        count = sum(e.get("count") or 1 for e in mine)
        return f"the Job cannot create worker pods: {latest.get('message')}", count

    def _blocked(self, elasticjob: dict[str, Any], job: dict[str, Any]) -> Backoff:
        """A Job of this name that is not ours: say what holds it, in the log (the queue) and the status."""
        name = elasticjob["metadata"]["name"]
        owner = _controller_ref(job)
        if owner is None:
            why = (
                f"Job {name} has no owner (orphaned by a delete with --cascade=orphan, or made by hand): the "
                f"controller neither adopts nor deletes it; delete it (kubectl delete job {name} -n "
                f"{self.namespace}) for this ElasticJob to run"
            )
        elif job["metadata"].get("deletionTimestamp"):
            why = f"Job {name} of {owner.get('kind')} uid {owner.get('uid')} (a deleted ElasticJob's) is being deleted"
        else:
            why = f"Job {name} belongs to {owner.get('kind')} {owner.get('name')} uid {owner.get('uid')}, not to this ElasticJob"
        self._patch_status(elasticjob, status.refused(elasticjob, JOB_NAME_TAKEN, why, now_text()))
        return Backoff(why)

    def _create(self, elasticjob: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any] | float | Backoff | None:
        """The created Job; else what the pass returns (the API refused it: reported, retried a bounded number of times)."""
        from kubernetes.client.exceptions import ApiException

        name, uid = elasticjob["metadata"]["name"], elasticjob["metadata"]["uid"]
        log.info("elasticjob %s: creating Job %s", name, name)
        try:
            self._lead()
            created = _raw(self.api.batch.create_namespaced_job, self.namespace, desired)
        except ApiException as error:
            if error.status == CONFLICT:
                return RECHECK_DELETING_SECONDS  # made since we read: the next pass sees it
            if error.status not in REFUSED:
                raise
            message = f"the API server refused Job {name}: {api_message(error)}"
            if error.status == 403 and "exceeded quota" in message:
                # a ResourceQuota on count/jobs.batch (403 "exceeded quota") frees when another Job
                # ends: reported and waited on, never counted toward JobRejected (review ctrl-1 item 12)
                self._patch_status(
                    elasticjob, status.refused(elasticjob, JOB_REJECTED, f"{message} (waiting)", now_text())
                )
                return Backoff(message)
            attempts = self._rejected[uid] = self._rejected.get(uid, 0) + 1
            if attempts >= MAX_CREATE_ATTEMPTS:
                log.warning("elasticjob %s: %s; refused %d times: failing it", name, message, attempts)
                self._patch_status(
                    elasticjob, status.derive(elasticjob, None, [], now_text(), invalid=message, reason=JOB_REJECTED)
                )
                self._rejected.pop(uid, None)
                return None
            self._patch_status(
                elasticjob,
                status.refused(
                    elasticjob, JOB_REJECTED, f"{message} (attempt {attempts} of {MAX_CREATE_ATTEMPTS})", now_text()
                ),
            )
            return Backoff(message)
        self._rejected.pop(uid, None)
        return created

    def _remove_orphans(self, name: str, pods: list[dict[str, Any]]) -> int:
        """Deletes this ElasticJob's worker pods that no controller owns; how many it deleted."""
        from kubernetes.client.exceptions import ApiException

        removed = 0
        for pod in pods:
            if _controller_ref(pod) is not None or pod["metadata"].get("deletionTimestamp"):
                continue
            log.warning(
                "elasticjob %s: pod %s is one of its workers but no Job owns it (its Job was deleted with "
                "--cascade=orphan?): deleting it, it would train beside the Job's own workers",
                name,
                pod["metadata"]["name"],
            )
            try:
                self._lead()
                self.api.core.delete_namespaced_pod(
                    pod["metadata"]["name"], self.namespace, body=_only(pod), _request_timeout=REQUEST_SECONDS
                )
                removed += 1
            except ApiException as error:
                if error.status != GONE:
                    raise
        return removed

    def _finished(self, elasticjob: dict[str, Any], job: dict[str, Any] | None) -> float | None:
        name, spec = elasticjob["metadata"]["name"], elasticjob.get("spec") or {}
        if job is not None and not status.job_finished(job):
            # A verdict written while its Job runs (InvalidSpec after an edit, WorkerPodsRefused): the
            # Job is stopped, or it would train unseen, and re-create pods cleanPodPolicy deletes
            # (review ctrl-1 item 5).
            if not job["metadata"].get("deletionTimestamp"):
                log.warning("elasticjob %s has finished but Job %s still runs: deleting the Job", name, name)
                self._lead()
                self.api.batch.delete_namespaced_job(
                    name,
                    self.namespace,
                    propagation_policy="Foreground",
                    body=_only(job),
                    _request_timeout=REQUEST_SECONDS,
                )
            job = None
        if job is not None:
            if spec.get("cleanPodPolicy") == "All":
                self._delete_pods(name, job)
            pods = self._pods(name, job)
            self._patch_status(
                elasticjob,
                status.derive(
                    elasticjob,
                    job,
                    pods,
                    now_text(),
                    run=progress.history(elasticjob, self.shared_root, claim=self.shared_claim),
                ),
            )
        ttl = spec.get("ttlSecondsAfterFinished")
        completed = (elasticjob.get("status") or {}).get("completionTime")
        if ttl is None or not completed:
            return None
        left = ttl - _seconds_since(completed)
        if left > 0:
            return left
        log.info("elasticjob %s: finished %s, ttlSecondsAfterFinished %s passed: deleting it", name, completed, ttl)
        from kubernetes.client.exceptions import ApiException

        try:
            self._lead()
            self.api.custom.delete_namespaced_custom_object(
                render.GROUP,
                render.VERSION,
                self.namespace,
                render.PLURAL,
                name,
                propagation_policy="Background",
                _request_timeout=REQUEST_SECONDS,
            )
        except ApiException as error:
            if error.status != GONE:
                raise
        return None
