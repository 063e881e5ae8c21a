"""One reconcile pass for one ElasticJob, against the API server (what __main__ calls on every event).

The pass, in order:
1. read the ElasticJob (gone or being deleted: nothing to do, the garbage collector removes its Job
   and pods through their owner references);
2. finished (a Succeeded or Failed condition): apply the run policy (cleanPodPolicy All deletes the
   Job's pods; Running needs nothing, the Job controller stops a finished Job's running pods;
   ttlSecondsAfterFinished deletes the ElasticJob that long after completionTime), refresh the
   status, and never start it again (as Kubeflow's controllers do);
3. render its Job (render.py); an ElasticJob that cannot run gets Failed with reason InvalidSpec;
4. no Job: create it; a Job from another spec (its spec-hash annotation differs): delete it in the
   foreground (its pods first) and create the new one once it is gone, as the template,
   podFailurePolicy, backoffLimitPerIndex and successPolicy cannot change in place;
5. write the status derived from the Job, its pods and the run's history, with a merge patch to the
   status subresource, only when it changed. The spec is never written.
Returns the seconds after which to look again without an event (a pending TTL, a Job being
deleted), or None.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import progress, render, status

log = logging.getLogger("controller")
GONE = 404
RECHECK_DELETING_SECONDS = 1.0


@dataclass
class Api:
    """The clients a pass uses (kubernetes.client CustomObjectsApi, BatchV1Api, CoreV1Api)."""
    custom: Any
    batch: Any
    core: Any


def _raw(call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The API server's JSON as sent (timestamps stay RFC 3339 "...Z", as Kubernetes writes them),
    not the client's models."""
    import json
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


class Reconciler:
    def __init__(self, api: Api, namespace: str, shared_root: Path | None = None):
        self.api, self.namespace, self.shared_root = api, namespace, shared_root

    # --- reads ---------------------------------------------------------------------------------
    def _elasticjob(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException
        try:
            return self.api.custom.get_namespaced_custom_object(render.GROUP, render.VERSION, self.namespace,
                                                                render.PLURAL, name)
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

    def _pods(self, name: str, job: dict[str, Any]) -> list[dict[str, Any]]:
        pods = _raw(self.api.core.list_namespaced_pod, self.namespace, label_selector=f"{render.ELASTICJOB_LABEL}={name}")
        return [pod for pod in pods["items"] if _owned_by(pod, job["metadata"]["uid"])]

    # --- writes --------------------------------------------------------------------------------
    def _patch_status(self, elasticjob: dict[str, Any], new: dict[str, Any]) -> None:
        old = elasticjob.get("status") or {}
        if all(old.get(key) == value for key, value in new.items()):
            return
        self.api.custom.patch_namespaced_custom_object_status(
            render.GROUP, render.VERSION, self.namespace, render.PLURAL, elasticjob["metadata"]["name"],
            {"status": new}, _content_type="application/merge-patch+json")

    def _delete_pods(self, name: str, job: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException
        for pod in self._pods(name, job):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            try:
                self.api.core.delete_namespaced_pod(pod["metadata"]["name"], self.namespace)
            except ApiException as error:
                if error.status != GONE:
                    raise

    # --- the pass ------------------------------------------------------------------------------
    def reconcile(self, name: str) -> float | None:
        elasticjob = self._elasticjob(name)
        if elasticjob is None or elasticjob["metadata"].get("deletionTimestamp"):
            return None
        uid = elasticjob["metadata"]["uid"]
        job = self._job(name)
        if job is not None and not _owned_by(job, uid):
            # A Job of this name that is not ours: a deleted ElasticJob's, still being collected.
            log.info("elasticjob %s: waiting for a Job %s that another owner holds to go", name, name)
            return RECHECK_DELETING_SECONDS
        done = status.finished(elasticjob.get("status") or {})
        if done:
            return self._finished(elasticjob, job)
        try:
            desired = render.job(elasticjob)
        except render.InvalidSpec as error:
            self._patch_status(elasticjob, status.derive(elasticjob, None, [], now_text(), invalid=str(error)))
            return None
        if job is not None and job["metadata"].get("deletionTimestamp"):
            return RECHECK_DELETING_SECONDS
        wanted_hash = desired["metadata"]["annotations"][render.SPEC_HASH_ANNOTATION]
        if job is not None and (job["metadata"].get("annotations") or {}).get(render.SPEC_HASH_ANNOTATION) != wanted_hash:
            log.info("elasticjob %s: the spec changed, replacing Job %s", name, name)
            self.api.batch.delete_namespaced_job(name, self.namespace, propagation_policy="Foreground")
            return RECHECK_DELETING_SECONDS
        if job is None:
            log.info("elasticjob %s: creating Job %s", name, name)
            job = _raw(self.api.batch.create_namespaced_job, self.namespace, desired)
        pods = self._pods(name, job)
        self._patch_status(elasticjob, status.derive(elasticjob, job, pods, now_text(),
                                                     progress.read(elasticjob, self.shared_root)))
        return None

    def _finished(self, elasticjob: dict[str, Any], job: dict[str, Any] | None) -> float | None:
        name, spec = elasticjob["metadata"]["name"], elasticjob.get("spec") or {}
        if job is not None:
            if spec.get("cleanPodPolicy") == "All":
                self._delete_pods(name, job)
            pods = self._pods(name, job)
            self._patch_status(elasticjob, status.derive(elasticjob, job, pods, now_text(),
                                                         progress.read(elasticjob, self.shared_root)))
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
            self.api.custom.delete_namespaced_custom_object(render.GROUP, render.VERSION, self.namespace, render.PLURAL,
                                                            name, propagation_policy="Background")
        except ApiException as error:
            if error.status != GONE:
                raise
        return None
