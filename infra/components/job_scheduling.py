"""The data-prep, test and export Jobs fail `pulumi up` within minutes when their pod can never be
scheduled, instead of waiting out jobTimeoutMinutes.

pulumi-kubernetes awaits each Job itself (pulumi/pulumi-kubernetes @ 94977969d64112b04e19945818a7d5d5f38f631d,
provider/pkg/await/job.go `jobInitAwaiter.Await`): it returns when the Job is ready, when the Job's
checker reports an error (a Failed condition: states/kubernetes/job/backoffLimit.json,
deadlineExceeded.json) or at the timeout; a Pending pod only adds to its log, and a deleted Job
does not end the wait either. And the Pulumi engine lets in-flight steps finish after another
step fails. So `JobSchedulingGuard`, created beside each Job (same dependencies, not the Job
itself), watches the Job's pods with the training wait's rules (infra/components/scheduling.py);
when one can never be placed it ends the Job the way the Job controller ends any Job past its
deadline, by setting `spec.activeDeadlineSeconds` to 1 (a mutable field:
kubernetes/kubernetes pkg/apis/batch/validation/validation.go ValidateJobSpecUpdate keeps only
completions, selector, the pod template, completionMode, podFailurePolicy and backoffLimitPerIndex
immutable), so the Job turns Failed (DeadlineExceeded) and its await stops; the guard's own error
is the one line saying why, with the scheduler's reason. A failed Job is replaced on the next `up`
(pulumi.com/replaceUnready, infra/components/workloads.py).

The Job's pods carry the label batch.kubernetes.io/job-name=<job> (Kubernetes docs, "Jobs", "Job
labels": set by the Job controller since 1.27; the stacks run 1.31 and later).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pulumi
from pulumi.dynamic import CreateResult, Resource

from infra.components import provider_errors, scheduling
from infra.components.completion import API_RETRY_SECONDS, POLL_SECONDS, WaitProvider
from infra.components.kubernetes_reader import (
    ApiError,
    KubernetesCluster,
    TransientApiError,
    _api_client,
    pod_scheduling_state,
)

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# How long the guard waits for its Job to appear: Pulumi creates the two side by side.
APPEAR_SECONDS = 10 * 60


class JobCluster:
    """One Job, its pods, and the namespace's pod events and nodes, through the official client."""

    def __init__(self, kubeconfig: str, namespace: str, name: str, context: str = ""):
        from kubernetes import client  # imported here: only `pulumi up` needs it

        self.namespace, self.name = namespace, name
        self._api_client = _api_client(kubeconfig, context)
        self._batch = client.BatchV1Api(self._api_client)
        self._core = client.CoreV1Api(self._api_client)
        self._call = KubernetesCluster._call

    def job(self) -> dict[str, Any] | None:
        """The Job, or None while it does not exist yet."""
        try:
            job = self._call(self._batch.read_namespaced_job, self.name, self.namespace)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return self._api_client.sanitize_for_serialization(job)

    def pods(self) -> list[dict[str, Any]]:
        pods = self._call(
            self._core.list_namespaced_pod, self.namespace, label_selector=f"{JOB_NAME_LABEL}={self.name}"
        )
        return [self._api_client.sanitize_for_serialization(pod) for pod in pods.items]

    def scheduling_state(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        return pod_scheduling_state(self._call, self._core, self._api_client, self.namespace)

    def end_job(self) -> None:
        self._call(self._batch.patch_namespaced_job, self.name, self.namespace, {"spec": {"activeDeadlineSeconds": 1}})


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def guard(
    cluster: JobCluster,
    timeout_seconds: float,
    poll_seconds: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Watch the Job until it finishes (None) or one of its pods can never run (the line saying why,
    after the Job was ended). API trouble is not the guard's to report: the Job's own await does."""
    start, failing_since = clock(), None
    watch = scheduling.SchedulingWatch(noun="pod")
    while clock() - start < timeout_seconds:
        try:
            job = cluster.job()
            if job is None and clock() - start > APPEAR_SECONDS:
                return None  # never created: the Job's resource says why
            if job is not None and _finished(job):
                return None
            pods = cluster.pods() if job is not None else []
            problem = None
            if watch.unschedulable(pods):
                events, nodes = cluster.scheduling_state()
                problem = watch.verdict(pods, events, nodes, clock())
            else:
                watch.since.clear()
            failing_since = None
            if problem:
                cluster.end_job()
                return (
                    f"Job {cluster.namespace}/{cluster.name}: {problem}. The Job was ended (activeDeadlineSeconds 1) "
                    f"so `pulumi up` stops; fix the config and run `pulumi up` again"
                )
        except (TransientApiError, ApiError):
            failing_since = clock() if failing_since is None else failing_since
            if clock() - failing_since >= API_RETRY_SECONDS:
                return None
        sleep(poll_seconds)
    return None


class _GuardProvider(WaitProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        cluster = JobCluster(props["kubeconfig"], props["namespace"], props["name"], props.get("context") or "")
        problem = guard(cluster, float(props["timeoutSeconds"]))
        if problem:
            provider_errors.fail(problem)  # one line, no traceback (as the training wait)
        return CreateResult(id_=f"{props['namespace']}/{props['name']}", outs=props)


class JobSchedulingGuard(Resource):
    """Created when its Job finished or could not be watched; fails, with the scheduler's reason,
    when the Job's pod can never be scheduled."""

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: pulumi.Input[str],
        namespace: str,
        job_name: str,
        timeout_seconds: int,
        spec_hash: pulumi.Input[str],
        context: str = "",
        opts: pulumi.ResourceOptions | None = None,
    ):
        props = {
            "kubeconfig": kubeconfig,
            "context": context,
            "namespace": namespace,
            "name": job_name,
            "timeoutSeconds": timeout_seconds,
            "specHash": spec_hash,
        }
        super().__init__(
            _GuardProvider(),
            name,
            props,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])),
        )
