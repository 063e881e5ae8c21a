"""Waiting for an ElasticJob to finish, and saying why when it does not.

The TorchElastic controller marks success with a `Succeeded` condition, but under
`restartPolicy: ExitCode` a worker that fails for good (exit code 1, say) leaves the job
`Running` forever. So `assess` reads the worker pods too, and `ElasticJobCompletion` (a dynamic
resource that `pulumi up` waits on) fails with one of:
  - "worker <pod> failed with exit code N ..."   a permanent worker failure
  - "deadline of N minutes exceeded ..."         our clock, or the controller's activeDeadlineSeconds
  - "ElasticJob ... failed: <reason>: <message>" any other Failed condition
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

# Exit codes the controller treats as retryable (it recreates the pod): signals, and SIGUSR1.
RETRYABLE_EXIT_CODES = frozenset({130, 137, 138, 143})
WORKER_CONTAINER = "elasticjob-worker"
POLL_SECONDS = 15


@dataclass(frozen=True)
class Verdict:
    state: str  # "running", "succeeded" or "failed"
    message: str = ""


def _true_condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _permanent_failure(pod: dict[str, Any]) -> str | None:
    if pod.get("status", {}).get("phase") != "Failed":
        return None
    for container in pod["status"].get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if container.get("name") == WORKER_CONTAINER and terminated:
            code = terminated.get("exitCode")
            if code not in RETRYABLE_EXIT_CODES:
                return (f"worker {pod['metadata']['name']} failed with exit code {code} "
                        f"({terminated.get('reason') or 'Error'}); the controller does not restart it under "
                        f"restartPolicy ExitCode")
    return None


def assess(elasticjob: dict[str, Any], pods: list[dict[str, Any]], elapsed_seconds: float, timeout_seconds: float) -> Verdict:
    """Where an ElasticJob stands, from its object and its worker pods (API dicts, camelCase)."""
    name = elasticjob["metadata"]["name"]
    status = elasticjob.get("status") or {}
    if _true_condition(status, "Succeeded"):
        return Verdict("succeeded", f"ElasticJob {name} succeeded")
    failed = _true_condition(status, "Failed")
    if failed:
        detail = f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": ")
        if "deadline" in detail.lower():
            return Verdict("failed", f"deadline exceeded: ElasticJob {name} ran past activeDeadlineSeconds ({detail})")
        return Verdict("failed", f"ElasticJob {name} failed: {detail}")
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        problem = _permanent_failure(pod)
        if problem:
            return Verdict("failed", f"ElasticJob {name}: {problem}")
    if elapsed_seconds > timeout_seconds:
        phases = ", ".join(f"{p['metadata']['name']}={p.get('status', {}).get('phase', '?')}" for p in pods) or "no worker pods"
        return Verdict("failed", f"deadline exceeded: ElasticJob {name} did not succeed within "
                                 f"{timeout_seconds / 60:.0f} minutes ({phases})")
    return Verdict("running")


def wait_for(read: Callable[[], tuple[dict[str, Any], list[dict[str, Any]]]], timeout_seconds: float,
             poll_seconds: float = POLL_SECONDS, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> Verdict:
    """Poll `read()` (the ElasticJob and its pods) until the verdict is final."""
    start = clock()
    while True:
        elasticjob, pods = read()
        verdict = assess(elasticjob, pods, clock() - start, timeout_seconds)
        if verdict.state != "running":
            return verdict
        sleep(poll_seconds)


def _kubernetes_reader(kubeconfig: str, namespace: str, name: str, job_label: str):
    """read() against the cluster, through the official client and the stack's kubeconfig."""
    import json

    from kubernetes import client, config  # imported here: only `pulumi up` needs it

    api_client = config.new_client_from_config_dict(json.loads(kubeconfig))
    custom, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)

    def read():
        elasticjob = custom.get_namespaced_custom_object("elastic.pytorch.org", "v1alpha1", namespace, "elasticjobs", name)
        pods = core.list_namespaced_pod(namespace, label_selector=f"{job_label}={name}")
        return elasticjob, [api_client.sanitize_for_serialization(pod) for pod in pods.items]
    return read


class _CompletionProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        read = _kubernetes_reader(props["kubeconfig"], props["namespace"], props["name"], props["jobLabel"])
        verdict = wait_for(read, float(props["timeoutSeconds"]))
        if verdict.state != "succeeded":
            raise RuntimeError(verdict.message)
        return CreateResult(id_=f"{props['namespace']}/{props['name']}", outs={**props, "result": verdict.message})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A new ElasticJob (any change of what we wait on) means a new wait; the kubeconfig's
        # token refreshes on its own and is not a reason.
        keys = ("namespace", "name", "timeoutSeconds", "specHash")
        changed = [key for key in keys if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=True)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # nothing exists outside Pulumi's state


class ElasticJobCompletion(Resource):
    """Created once the ElasticJob has succeeded; creation fails, with the reason, otherwise."""

    result: pulumi.Output[str]

    def __init__(self, name: str, *, kubeconfig: pulumi.Input[str], namespace: str, elasticjob_name: str,
                 job_label: str, timeout_seconds: int, spec_hash: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None):
        props = {"kubeconfig": kubeconfig, "namespace": namespace, "name": elasticjob_name, "jobLabel": job_label,
                 "timeoutSeconds": timeout_seconds, "specHash": spec_hash, "result": None}
        super().__init__(_CompletionProvider(), name, props,
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])))
