"""The native Indexed Job that runs an ElasticJob's workers (pure: ElasticJob dict -> Job dict).

Why an Indexed Job (docs/design-notes.md, "The ElasticJob controller"): Kubernetes' own Job controller
then creates, retries and replaces the pods, with the semantics of the Kubernetes docs ("Jobs",
"Handling retriable and non-retriable pod failures with Pod failure policy"; KEP-3329, KEP-3850,
KEP-3998, KEP-3939), and this controller never creates a pod:
- `completionMode: Indexed`, `completions = parallelism = replicas`: one pod per worker index
  (pod hostname `<job>-<i>`, label `batch.kubernetes.io/job-completion-index`; GA 1.24);
- `podReplacementPolicy: Failed`: a replacement starts only once the old pod has ended, so two pods
  of one index never run torchrun at once (GA 1.34, beta and on by default since 1.29; a Job with
  a podFailurePolicy may only use Failed);
- `podFailurePolicy` (GA 1.31): the exit-code table of exit_codes.py, in order: Ignore a pod with
  the DisruptionTarget condition (a drain, a preemption, a taint eviction), Ignore the retryable
  exits, FailIndex on the permanent ones; the rest is counted against `backoffLimitPerIndex`;
- `backoffLimitPerIndex` = spec.backoffLimit (else DEFAULT_BACKOFF_LIMIT_PER_INDEX) and
  `maxFailedIndexes = replicas - minReplicas`: the run goes on while enough workers remain for
  torchrun's minimum (GA 1.33, beta and on by default in 1.31-1.32);
- `successPolicy`: the Job succeeds once minReplicas indexes succeeded (GA 1.33, beta and on by
  default in 1.31-1.32): torchrun ranks are not pod indexes, and a worker index that failed for
  good must not keep a finished run from succeeding;
- `activeDeadlineSeconds` from the ElasticJob's run policy.
The template, podFailurePolicy, backoffLimitPerIndex and successPolicy of a Job cannot change, so
reconcile.py replaces the Job when SPEC_HASH_ANNOTATION differs from the newly rendered one.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from controller import exit_codes

# The ElasticJob's names, the container the exit codes are read from, the label on the Job and every
# pod (the watches select by it): the platform's contract (elastic_training.elasticjob).
from elastic_training.elasticjob import (ELASTICJOB_LABEL, GROUP, KIND, PLURAL, SPEC_HASH_ANNOTATION,  # noqa: F401
                                         VERSION, WORKER, WORKER_CONTAINER)

# The archived controller's labels that still mean something (kubeflow/common job_controller.go
# GenLabels, pod.go createNewPod); `replica-index` is now the Job's batch.kubernetes.io/job-completion-index
# and `job-name` is set by the Job controller itself (to the Job's name, which is the ElasticJob's).
COMPATIBLE_LABELS = {"group-name": GROUP, "replica-type": "worker"}
# Retries of one worker index for exits the table counts (1, 137 OOM, ...) when spec.backoffLimit is
# not given. Our choice: a transient fault twice more, not a crash loop for hours.
DEFAULT_BACKOFF_LIMIT_PER_INDEX = 2


class InvalidSpec(ValueError):
    """An ElasticJob this controller cannot run; the message says what is wrong and what is allowed."""


def replica_bounds(elasticjob: dict[str, Any]) -> tuple[int, int, int]:
    """(minReplicas, replicas, maxReplicas); min and max default to replicas (as the archived
    controller's computeDesiredReplicas did)."""
    spec = elasticjob.get("spec") or {}
    worker = (spec.get("replicaSpecs") or {}).get(WORKER) or {}
    replicas = worker.get("replicas")
    if not isinstance(replicas, int) or replicas < 1:
        raise InvalidSpec(f"spec.replicaSpecs.Worker.replicas is {replicas!r}: a whole number of at least 1 is needed")
    low, high = spec.get("minReplicas", replicas), spec.get("maxReplicas", replicas)
    if not low <= replicas <= high:
        raise InvalidSpec(f"minReplicas {low}, replicas {replicas}, maxReplicas {high}: "
                          "minReplicas <= replicas <= maxReplicas is needed")
    return low, replicas, high


def rendezvous_args(elasticjob: dict[str, Any]) -> list[str]:
    """What the controller prepends to the worker container's args: the archived controller's
    prefix minus `--rdzv_backend` (pytorch/elastic controllers/pod.go SetClusterSpecForPod); the
    template's own args name the backend, and a later flag wins in torchrun's argparse."""
    low, _, high = replica_bounds(elasticjob)
    return [f"--rdzv_endpoint={elasticjob['spec']['rdzvEndpoint']}", f"--rdzv_id={elasticjob['metadata']['name']}",
            f"--nnodes={low}:{high}"]


def pod_failure_policy() -> dict[str, Any]:
    def on_exit(action: str, codes: tuple[int, ...]) -> dict[str, Any]:
        return {"action": action, "onExitCodes": {"containerName": WORKER_CONTAINER, "operator": "In",
                                                   "values": sorted(codes)}}
    return {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        on_exit("Ignore", exit_codes.RETRYABLE),
        on_exit("FailIndex", exit_codes.PERMANENT),
    ]}


def _template(elasticjob: dict[str, Any]) -> dict[str, Any]:
    name = elasticjob["metadata"]["name"]
    template = copy.deepcopy(elasticjob["spec"]["replicaSpecs"][WORKER].get("template") or {})
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **COMPATIBLE_LABELS, ELASTICJOB_LABEL: name}
    pod = template.setdefault("spec", {})
    # podFailurePolicy needs Never; the archived controller turned ExitCode into Never too.
    pod["restartPolicy"] = "Never"
    workers = [c for c in pod.get("containers") or [] if c.get("name") == WORKER_CONTAINER]
    if not workers:
        raise InvalidSpec(f"the Worker template has no container named {WORKER_CONTAINER}: the controller reads "
                          "exit codes from that container and gives it the rendezvous arguments")
    workers[0]["args"] = [*rendezvous_args(elasticjob), *(workers[0].get("args") or [])]
    return template


def spec_hash(job_spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(job_spec, sort_keys=True).encode()).hexdigest()[:16]


def job(elasticjob: dict[str, Any]) -> dict[str, Any]:
    """The Job for `elasticjob` (an API dict); InvalidSpec when it cannot be run."""
    meta = elasticjob["metadata"]
    spec = elasticjob["spec"]
    low, replicas, _ = replica_bounds(elasticjob)
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": replicas,
        "parallelism": replicas,
        "podReplacementPolicy": "Failed",
        "backoffLimitPerIndex": spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT_PER_INDEX),
        "maxFailedIndexes": replicas - low,
        "podFailurePolicy": pod_failure_policy(),
        "successPolicy": {"rules": [{"succeededCount": low}]},
        "template": _template(elasticjob),
    }
    if spec.get("activeDeadlineSeconds") is not None:
        job_spec["activeDeadlineSeconds"] = spec["activeDeadlineSeconds"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {**(meta.get("labels") or {}), ELASTICJOB_LABEL: meta["name"]},
            "annotations": {SPEC_HASH_ANNOTATION: spec_hash(job_spec)},
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": meta["name"],
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": job_spec,
    }
