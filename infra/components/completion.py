"""Waiting for an ElasticJob to finish, and saying why when it does not.

Our controller (controller/, issue 33) writes what the wait reads into the ElasticJob's status, so
the wait reads conditions and never infers a verdict from pods where a condition says it:
  - success is a `Succeeded` condition with status "True";
  - failure is a `Failed` condition with status "True", whose reason is the Job's
    (BackoffLimitExceeded, FailedIndexes, DeadlineExceeded, PodFailurePolicy, ...: controller/status.py)
    and `status.lastFailure` names the worker pod, its index, exit code and reason;
  - a pod the API server refuses (admission, quota, ...) only shows as a `FailedCreate` event on the
    ElasticJob's Job (Kubernetes pkg/controller/controller_utils.go FailedCreatePodReason), which the
    Job controller retries forever, so the wait reads those events too;
  - pods are read for what no condition says: workers no node can hold (scheduling.py), the
    rendezvous store's health (rendezvous_health.py) and the deadline line.

`ElasticJobCompletion` (a dynamic resource that `pulumi up` waits on) fails with one of:
  - "ElasticJob <ns>/<name> failed: <reason>: <message>; last failure: worker <pod> (index i) exited N (<reason>, <action>)"
  - "ElasticJob <ns>/<name>: the Job cannot create worker pods: <event message>"
  - "ElasticJob <ns>/<name>: worker <pod> can never be scheduled: ...; the scheduler says: <its message>"
  - "ElasticJob <ns>/<name>: worker <pod> was not scheduled in 30 minutes, ...; the scheduler says: ..."
    (infra/components/scheduling.py: a Pending worker no node can hold, or capacity that does not come)
  - "ElasticJob <ns>/<name>: the rendezvous store ... has had no ready pod for N minutes ..." (rendezvous_health.py)
  - "deadline exceeded: ElasticJob <ns>/<name> did not succeed within N minutes (<pod phases>)"
  - "the Kubernetes API kept failing for 5 minutes ..." / "the Kubernetes API refused ..."
and, on every one of them, deletes the ElasticJob so its pods stop, and says so; the last failed
worker's last log lines, which go with its pod, are appended.
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
from infra.components.kubernetes_reader import ApiError, KubernetesCluster, Snapshot, TransientApiError
from infra.components.spec_identity import stale_spec

# The reason of the event the Job controller records on the Job when creating a pod fails
# (kubernetes pkg/controller/controller_utils.go FailedCreatePodReason).
FAILED_CREATE_POD = "FailedCreate"

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


def _last_failure(status: dict[str, Any]) -> tuple[str, str | None]:
    """'; last failure: ...' from status.lastFailure (controller/status.py), and its pod."""
    last = status.get("lastFailure") or {}
    if not last.get("pod"):
        return "", None
    return (
        f"; last failure: worker {last['pod']} (index {last.get('index')}) exited {last.get('exitCode')} "
        f"({last.get('reason') or 'Error'}, {last.get('action') or 'counted'})"
    ), last["pod"]


def _refused_pod(elasticjob: dict[str, Any], events: list[dict[str, Any]]) -> str | None:
    """The message of the latest FailedCreate event on this ElasticJob's Job (the Job has its name),
    not one of a deleted predecessor's Job of the same name, whose events outlive it: only events
    since this ElasticJob was created count."""
    meta = elasticjob["metadata"]
    created = meta.get("creationTimestamp") or ""
    mine = [
        event
        for event in events
        if event.get("reason") == FAILED_CREATE_POD
        and (event.get("involvedObject") or {}).get("kind") == "Job"
        and (event.get("involvedObject") or {}).get("name") == meta["name"]
        and (event.get("lastTimestamp") or event.get("eventTime") or "") >= created
    ]
    if not mine:
        return None
    latest = max(mine, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return latest.get("message") or FAILED_CREATE_POD


def _job_ref(elasticjob: dict[str, Any]) -> str:
    meta = elasticjob["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def assess(snapshot: Snapshot, elapsed_seconds: float, timeout_seconds: float) -> Verdict:
    """Where an ElasticJob stands, from its conditions and its Job's events (pods only for the deadline line)."""
    job = _job_ref(snapshot.elasticjob)
    status = snapshot.elasticjob.get("status") or {}
    if _true_condition(status, "Succeeded"):
        return Verdict("succeeded", f"ElasticJob {job} succeeded")
    failed = _true_condition(status, "Failed")
    if failed:
        detail = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
        last, pod = _last_failure(status)
        return Verdict("failed", f"ElasticJob {job} failed: {detail}{last}", pod)
    refused = _refused_pod(snapshot.elasticjob, snapshot.events)
    if refused:
        return Verdict("failed", f"ElasticJob {job}: the Job cannot create worker pods: {refused}")
    if elapsed_seconds > timeout_seconds:
        phases = (
            ", ".join(f"{p['metadata']['name']}={(p.get('status') or {}).get('phase', '?')}" for p in snapshot.pods)
            or "no worker pods"
        )
        return Verdict(
            "failed",
            f"deadline exceeded: ElasticJob {job} did not succeed within {timeout_seconds / 60:.0f} minutes ({phases})",
        )
    return Verdict("running")


def _retrying(
    call: Callable[[], Any], window_seconds: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> Any:
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


def _stop(
    cluster: Cluster,
    reason: str,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    failed_pod: str | None = None,
) -> Verdict:
    """A failed verdict: keep the end of the failed worker's log, delete the ElasticJob so its pods
    stop, and say so."""
    job = f"{cluster.namespace}/{cluster.name}"
    log = _log_tail(cluster, failed_pod)
    try:
        _retrying(cluster.delete_elasticjob, DELETE_RETRY_SECONDS, clock, sleep)
    except (TransientApiError, ApiError) as error:
        return Verdict(
            "failed",
            f"{reason}. Deleting the ElasticJob failed too ({error}): its pods may still run; "
            f"delete it with `kubectl delete elasticjob -n {cluster.namespace} {cluster.name}`{log}",
            failed_pod,
        )
    return Verdict(
        "failed",
        f"{reason}. The ElasticJob {job} was deleted, so its pods stop "
        f"(run `pulumi up --refresh` to create it again){log}",
        failed_pod,
    )


def _scheduling_problem(
    cluster: Cluster, pods: list[dict[str, Any]], watch: scheduling.SchedulingWatch, now: float
) -> str | None:
    """Why unschedulable workers will not run (infra/components/scheduling.py), read only while one is."""
    if not watch.unschedulable(pods):
        watch.since.clear()
        return None
    try:
        events, nodes = cluster.scheduling_state()
    except (TransientApiError, ApiError):
        events, nodes = [], None  # the time bound still holds; the next poll asks again
    return watch.verdict(pods, events, nodes, now)


def wait_for(
    cluster: Cluster,
    timeout_seconds: float,
    poll_seconds: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    spec_hash: str = "",
    guard: Callable[[Snapshot], str | None] | None = None,
) -> Verdict:
    """Poll the cluster until the verdict is final; on failure the ElasticJob is deleted; never from a job made from
    another spec (spec_hash: spec_identity.py). `guard` (run_cost.py: the cost ceiling) may stop a running job."""
    start = clock()
    watch, store = scheduling.SchedulingWatch(), rendezvous_health.StoreWatch(cluster.namespace)
    while True:
        try:
            snapshot = _retrying(cluster.read, API_RETRY_SECONDS, clock, sleep)
        except TransientApiError as error:
            return _stop(
                cluster,
                f"the Kubernetes API kept failing for {API_RETRY_SECONDS // 60} minutes "
                f"while waiting for ElasticJob {cluster.namespace}/{cluster.name} ({error})",
                clock,
                sleep,
            )
        except ApiError as error:
            if error.status == 404:
                # Not transient: Pulumi created the ElasticJob before this wait started and the
                # controller deletes one only past its ttlSecondsAfterFinished (the stack sets none),
                # so it was deleted on purpose (a failed run, a user); asking again will not bring it back.
                return Verdict(
                    "failed",
                    f"ElasticJob {cluster.namespace}/{cluster.name} does not exist ({error}); "
                    f"it is deleted when a run fails: run `pulumi up --refresh` to create it again",
                )
            return _stop(
                cluster,
                f"the Kubernetes API refused to show ElasticJob {cluster.namespace}/{cluster.name} ({error})",
                clock,
                sleep,
            )
        stale = stale_spec(snapshot.elasticjob, spec_hash)  # an older spec's job says nothing about this one
        verdict = Verdict("failed", stale) if stale else assess(snapshot, clock() - start, timeout_seconds)
        blocked = _scheduling_problem(cluster, snapshot.pods, watch, clock()) if verdict.state == "running" else None
        blocked = blocked or (
            store.problem(snapshot.store, snapshot.pods, clock()) if verdict.state == "running" else None
        )
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
        cluster = KubernetesCluster(
            props["kubeconfig"], props["namespace"], props["name"], props["jobLabel"], props.get("context") or ""
        )
        budget = run_cost.budget_for(props)
        verdict = wait_for(
            cluster,
            float(props["timeoutSeconds"]),
            spec_hash=props.get("specHash") or "",
            guard=run_cost.guard(cluster, budget),
        )
        if verdict.state != "succeeded":
            provider_errors.fail(verdict.message)  # one line and the log tail, no traceback
        return CreateResult(
            id_=f"{props['namespace']}/{props['name']}",
            outs={**props, "result": verdict.message, "runCost": run_cost.final(cluster, budget)},
        )


class ElasticJobCompletion(Resource):
    """Created once the ElasticJob has succeeded; creation fails, with the reason, otherwise."""

    result: pulumi.Output[str]
    runCost: pulumi.Output[dict]  # as the provider names it; infra/components/run_cost.py: duration, node-hours, cost

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        namespace: str,
        elasticjob_name: str,
        job_label: str,
        timeout_seconds: int,
        spec_hash: pulumi.Input[str],
        context: str = "",
        region: str = "",
        max_run_cost_usd: float | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        props = {
            "kubeconfig": kubeconfig,
            "context": context,
            "namespace": namespace,
            "name": elasticjob_name,
            "jobLabel": job_label,
            "timeoutSeconds": timeout_seconds,
            "specHash": spec_hash,
            "result": None,
            "region": region,
            "maxRunCostUsd": max_run_cost_usd,
            "runCost": None,
        }
        super().__init__(
            _CompletionProvider(),
            name,
            props,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])),
        )
