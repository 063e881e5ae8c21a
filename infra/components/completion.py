"""Waiting for an ElasticJob to finish, and saying why when it does not.

What the TorchElastic controller really does (pytorch/elastic `kubernetes/` @ bc88e69, on
kubeflow/common @ 0b3a4c3, the version its go.mod pins) decides what the wait reads:
  - success is a `Succeeded` condition with status "True" (kubeflow/common pkg/util/status.go);
  - under `restartPolicy: ExitCode` a worker that fails for good (exit code 1, or a pod that never
    ran its container, exit code placeholder 0xbeef) is never recreated, and the job is never marked
    Failed: it stays `Running` (controllers/job.go UpdateJobStatus). So the wait reads the pods too;
  - a pod the API server refuses (admission, quota, ...) only shows as a `FailedCreatePod` event on
    the ElasticJob (kubeflow/common pkg/controller.v1/common/pod.go createPod); the controller
    retries forever, so the wait reads the events too;
  - `activeDeadlineSeconds` is inert (its check needs status.startTime, which nothing sets:
    kubeflow/common job.go pastActiveDeadline), so the only deadline is ours.

`ElasticJobCompletion` (a dynamic resource that `pulumi up` waits on) fails with one of:
  - "ElasticJob <ns>/<name>: worker <pod> failed with exit code N ..."   a permanent worker failure
  - "ElasticJob <ns>/<name>: worker <pod> failed before its container ran ..."
  - "ElasticJob <ns>/<name>: the controller cannot create worker pods: <event message>"
  - "ElasticJob <ns>/<name>: worker <pod> can never be scheduled: ...; the scheduler says: <its message>"
  - "ElasticJob <ns>/<name>: worker <pod> was not scheduled in 30 minutes, ...; the scheduler says: ..."
    (infra/components/scheduling.py: a Pending worker no node can hold, or capacity that does not come)
  - "ElasticJob <ns>/<name>: the rendezvous store ... has had no ready pod for N minutes ..." (rendezvous_health.py)
  - "ElasticJob <ns>/<name> failed: <reason>: <message>"                 a Failed condition
  - "deadline exceeded: ElasticJob <ns>/<name> did not succeed within N minutes (<pod phases>)"
  - "the Kubernetes API kept failing for 5 minutes ..." / "the Kubernetes API refused ..."
and, on every one of them, deletes the ElasticJob so its pods stop, and says so; a failed worker's
last log lines, which go with its pod, are appended.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

from infra.components import provider_errors, rendezvous_health, run_cost, scheduling
# What the wait reads, and how: the reader module. Imported by name, so `completion.KubernetesCluster`
# (the provider's reader) and the error types stay the wait's public names.
from infra.components.kubernetes_reader import (ApiError, KubernetesCluster, Snapshot, TransientApiError,
                                                WORKER_CONTAINER)
from infra.components.spec_identity import stale_spec

# kubeflow/common pkg/util/train/train_util.go IsRetryableExitCode: signals (130, 137, 143) and
# SIGUSR1 (138) make the controller delete and recreate the pod; every other code is permanent.
RETRYABLE_EXIT_CODES = frozenset({130, 137, 138, 143})
# kubeflow/common pod_control.go / pod.go: the reason of the event recorded when creating a pod fails.
FAILED_CREATE_POD = "FailedCreatePod"

POLL_SECONDS = 15
# Transient API errors (5xx, 429, connection errors) are retried this long before the wait fails:
# an EKS control-plane update or a throttled API must not throw away hours of training.
API_RETRY_SECONDS = 5 * 60
FIRST_BACKOFF_SECONDS = 2
MAX_BACKOFF_SECONDS = 30
DELETE_RETRY_SECONDS = 60
# Deleting the ElasticJob deletes the failed worker's pod and its log, so the error keeps its end.
LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class Verdict:
    state: str  # "running", "succeeded" or "failed"
    message: str = ""
    failed_pod: str | None = None  # the worker whose log tells why, when one ran and failed


class Cluster(Protocol):
    namespace: str
    name: str

    def read(self) -> Snapshot: ...
    def scheduling_state(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]: ...
    def worker_log_tail(self, pod: str, lines: int) -> str: ...
    def delete_elasticjob(self) -> None: ...


def _true_condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _permanent_failure(pod: dict[str, Any]) -> tuple[str, bool] | None:
    """Why this worker pod will never be recreated, and whether its worker ran (so it has a log to
    read), or None (kubeflow/common pod.go ReconcilePods)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Failed":
        return None
    if pod["metadata"].get("deletionTimestamp"):
        # Being deleted: a drain evicts through the Eviction API, which deletes the pod, and a
        # deleted worker comes back whatever its exit code, since ReconcilePods creates every
        # missing replica (`len(podSlice) == 0` -> createNewPod). Until it is gone its phase can
        # read Failed with the code torchrun gave SIGTERM.
        return None
    name = pod["metadata"]["name"]
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if container.get("name") == WORKER_CONTAINER and terminated:
            code = terminated.get("exitCode")
            if code in RETRYABLE_EXIT_CODES:
                return None  # the controller deletes the pod and creates it again
            return (f"worker {name} failed with exit code {code} ({terminated.get('reason') or 'Error'}); "
                    f"the controller does not restart it under restartPolicy ExitCode", True)
    # No terminated worker state (the kubelet rejected the pod, e.g. OutOfcpu, or evicted it before
    # its worker started): the controller takes the placeholder exit code 0xbeef, which is not
    # retryable, so the pod stays Failed. A pod the kubelet evicts while its worker runs (reason
    # Evicted, the pod is kept) has the worker's exit code: 143 from jobs.elastic.agent on SIGTERM, 137 on
    # SIGKILL, both retried above.
    detail = ": ".join(part for part in (status.get("reason"), status.get("message")) if part) or "no reason given"
    return f"worker {name} failed before its container ran ({detail}); the controller does not restart it", False


def _refused_pod(elasticjob: dict[str, Any], events: list[dict[str, Any]]) -> str | None:
    """The message of the latest FailedCreatePod event on this very ElasticJob (not a deleted one
    of the same name, whose events outlive it), or None."""
    meta = elasticjob["metadata"]
    mine = [event for event in events
            if event.get("reason") == FAILED_CREATE_POD
            and (event.get("involvedObject") or {}).get("kind") == "ElasticJob"
            and (event.get("involvedObject") or {}).get("name") == meta["name"]
            and (event.get("involvedObject") or {}).get("uid") == meta.get("uid")]
    if not mine:
        return None
    latest = max(mine, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return latest.get("message") or FAILED_CREATE_POD


def _job_ref(elasticjob: dict[str, Any]) -> str:
    meta = elasticjob["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def assess(snapshot: Snapshot, elapsed_seconds: float, timeout_seconds: float) -> Verdict:
    """Where an ElasticJob stands, from its object, its worker pods and its events."""
    job = _job_ref(snapshot.elasticjob)
    status = snapshot.elasticjob.get("status") or {}
    if _true_condition(status, "Succeeded"):
        return Verdict("succeeded", f"ElasticJob {job} succeeded")
    failed = _true_condition(status, "Failed")
    if failed:
        detail = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
        return Verdict("failed", f"ElasticJob {job} failed: {detail}")
    for pod in sorted(snapshot.pods, key=lambda p: p["metadata"]["name"]):
        failure = _permanent_failure(pod)
        if failure:
            problem, ran = failure
            return Verdict("failed", f"ElasticJob {job}: {problem}", pod["metadata"]["name"] if ran else None)
    refused = _refused_pod(snapshot.elasticjob, snapshot.events)
    if refused:
        return Verdict("failed", f"ElasticJob {job}: the controller cannot create worker pods: {refused}")
    if elapsed_seconds > timeout_seconds:
        phases = ", ".join(f"{p['metadata']['name']}={(p.get('status') or {}).get('phase', '?')}"
                           for p in snapshot.pods) or "no worker pods"
        return Verdict("failed", f"deadline exceeded: ElasticJob {job} did not succeed within "
                                 f"{timeout_seconds / 60:.0f} minutes ({phases})")
    return Verdict("running")


def _retrying(call: Callable[[], Any], window_seconds: float, clock: Callable[[], float],
              sleep: Callable[[float], None]) -> Any:
    """call(), again after TransientApiError with exponential backoff, until it has failed for
    window_seconds; then the last TransientApiError propagates."""
    failing_since = None
    backoff = FIRST_BACKOFF_SECONDS
    while True:
        try:
            return call()
        except TransientApiError:
            now = clock()
            failing_since = now if failing_since is None else failing_since
            if now - failing_since >= window_seconds:
                raise
            sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


def _log_tail(cluster: Cluster, pod: str | None) -> str:
    if pod is None:
        return ""
    try:
        log = cluster.worker_log_tail(pod, LOG_TAIL_LINES).rstrip("\n")
    except (TransientApiError, ApiError) as error:
        return f"\n(the log of {pod} could not be read: {error})"
    return f"\nLast {LOG_TAIL_LINES} lines of {pod}'s log:\n{log}"


def _stop(cluster: Cluster, reason: str, clock: Callable[[], float], sleep: Callable[[float], None],
          failed_pod: str | None = None) -> Verdict:
    """A failed verdict: keep the end of the failed worker's log, delete the ElasticJob so its pods
    stop, and say so."""
    job = f"{cluster.namespace}/{cluster.name}"
    log = _log_tail(cluster, failed_pod)
    try:
        _retrying(cluster.delete_elasticjob, DELETE_RETRY_SECONDS, clock, sleep)
    except (TransientApiError, ApiError) as error:
        return Verdict("failed", f"{reason}. Deleting the ElasticJob failed too ({error}): its pods may still run; "
                                 f"delete it with `kubectl delete elasticjob -n {cluster.namespace} {cluster.name}`{log}",
                       failed_pod)
    return Verdict("failed", f"{reason}. The ElasticJob {job} was deleted, so its pods stop "
                             f"(run `pulumi up --refresh` to create it again){log}", failed_pod)


def _scheduling_problem(cluster: Cluster, pods: list[dict[str, Any]], watch: scheduling.SchedulingWatch,
                        now: float) -> str | None:
    """Why unschedulable workers will not run (infra/components/scheduling.py), read only while one is."""
    if not watch.unschedulable(pods):
        watch.since.clear()
        return None
    try:
        events, nodes = cluster.scheduling_state()
    except (TransientApiError, ApiError):
        events, nodes = [], None  # the time bound still holds; the next poll asks again
    return watch.verdict(pods, events, nodes, now)


def wait_for(cluster: Cluster, timeout_seconds: float, poll_seconds: float = POLL_SECONDS,
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
             spec_hash: str = "", guard: Callable[[Snapshot], str | None] | None = None) -> Verdict:
    """Poll the cluster until the verdict is final; on failure the ElasticJob is deleted; never from a job made from
    another spec (spec_hash: spec_identity.py). `guard` (run_cost.py: the cost ceiling) may stop a running job."""
    start = clock()
    watch, store = scheduling.SchedulingWatch(), rendezvous_health.StoreWatch(cluster.namespace)
    while True:
        try:
            snapshot = _retrying(cluster.read, API_RETRY_SECONDS, clock, sleep)
        except TransientApiError as error:
            return _stop(cluster, f"the Kubernetes API kept failing for {API_RETRY_SECONDS // 60} minutes "
                                  f"while waiting for ElasticJob {cluster.namespace}/{cluster.name} ({error})", clock, sleep)
        except ApiError as error:
            if error.status == 404:
                # Not transient: Pulumi created the ElasticJob before this wait started and the
                # controller never deletes one (no ttlSecondsAfterFinished), so it was deleted on
                # purpose (a failed run, a user); asking again will not bring it back.
                return Verdict("failed", f"ElasticJob {cluster.namespace}/{cluster.name} does not exist ({error}); "
                                         f"it is deleted when a run fails: run `pulumi up --refresh` to create it again")
            return _stop(cluster, f"the Kubernetes API refused to show ElasticJob {cluster.namespace}/{cluster.name} "
                                  f"({error})", clock, sleep)
        stale = stale_spec(snapshot.elasticjob, spec_hash)  # an older spec's job says nothing about this one
        verdict = Verdict("failed", stale) if stale else assess(snapshot, clock() - start, timeout_seconds)
        blocked = _scheduling_problem(cluster, snapshot.pods, watch, clock()) if verdict.state == "running" else None
        blocked = blocked or (store.problem(snapshot.store, snapshot.events, clock()) if verdict.state == "running" else None)
        if blocked:
            verdict = Verdict("failed", f"ElasticJob {cluster.namespace}/{cluster.name}: {blocked}")
        if verdict.state == "failed":
            return _stop(cluster, verdict.message, clock, sleep, verdict.failed_pod)
        if verdict.state == "succeeded":
            return verdict
        stop = guard(snapshot) if guard else None
        if stop:
            return _stop(cluster, stop, clock, sleep)
        sleep(poll_seconds)


class WaitProvider(ResourceProvider):
    """What every wait of ours shares (the training's here, the Jobs' in job_scheduling.py): a new
    object to wait on (any change of what we wait on) means a new wait, and nothing exists outside
    Pulumi's state."""

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A new ElasticJob (any change of what we wait on) means a new wait; the kubeconfig's
        # token refreshes on its own and is not a reason.
        keys = ("namespace", "name", "timeoutSeconds", "specHash")
        changed = [key for key in keys if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=True)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # nothing exists outside Pulumi's state


class _CompletionProvider(WaitProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        cluster = KubernetesCluster(props["kubeconfig"], props["namespace"], props["name"], props["jobLabel"],
                                    props.get("context") or "")
        budget = run_cost.budget_for(props)
        verdict = wait_for(cluster, float(props["timeoutSeconds"]), spec_hash=props.get("specHash") or "",
                           guard=run_cost.guard(cluster, budget))
        if verdict.state != "succeeded":
            provider_errors.fail(verdict.message)  # one line and the log tail, no traceback
        return CreateResult(id_=f"{props['namespace']}/{props['name']}",
                            outs={**props, "result": verdict.message, "runCost": run_cost.final(cluster, budget)})



class ElasticJobCompletion(Resource):
    """Created once the ElasticJob has succeeded; creation fails, with the reason, otherwise."""

    result: pulumi.Output[str]
    runCost: pulumi.Output[dict]  # as the provider names it; infra/components/run_cost.py: duration, node-hours, cost

    def __init__(self, name: str, *, kubeconfig: pulumi.Input[str], namespace: str, elasticjob_name: str,
                 job_label: str, timeout_seconds: int, spec_hash: pulumi.Input[str], context: str = "",
                 region: str = "", max_run_cost_usd: float | None = None, opts: pulumi.ResourceOptions | None = None):
        props = {"kubeconfig": kubeconfig, "context": context, "namespace": namespace, "name": elasticjob_name,
                 "jobLabel": job_label, "timeoutSeconds": timeout_seconds, "specHash": spec_hash, "result": None,
                 "region": region, "maxRunCostUsd": max_run_cost_usd, "runCost": None}
        super().__init__(_CompletionProvider(), name, props,
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])))
