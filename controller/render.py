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
import re
from collections.abc import Mapping
from typing import Any

from controller import exit_codes

# The ElasticJob's names, the container the exit codes are read from, the label on the Job and every
# pod (the watches select by it): the platform's contract (elastic_training.elasticjob).
from elastic_training.elasticjob import (
    ELASTICJOB_LABEL,
    GROUP,
    KIND,
    SPEC_HASH_ANNOTATION,
    VERSION,
    WORKER,
    WORKER_CONTAINER,
)
from elastic_training.elasticjob import PLURAL  # noqa: F401 (the other modules' render.PLURAL)

# The archived controller's labels that still mean something (kubeflow/common job_controller.go
# GenLabels, pod.go createNewPod); `replica-index` is now the Job's batch.kubernetes.io/job-completion-index
# and `job-name` is set by the Job controller itself (to the Job's name, which is the ElasticJob's).
COMPATIBLE_LABELS = {"group-name": GROUP, "replica-type": "worker"}
# Retries of one worker index for exits the table counts (1, 137 OOM, ...) when spec.backoffLimit is
# not given. Our choice: a transient fault twice more, not a crash loop for hours.
DEFAULT_BACKOFF_LIMIT_PER_INDEX = 2
HOSTNAME_LIMIT = 63
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


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
        raise InvalidSpec(
            f"minReplicas {low}, replicas {replicas}, maxReplicas {high}: "
            "minReplicas <= replicas <= maxReplicas is needed"
        )
    return low, replicas, high


def rendezvous_args(elasticjob: dict[str, Any]) -> list[str]:
    """What the controller prepends to the worker container's args: the archived controller's
    prefix minus `--rdzv_backend` (pytorch/elastic controllers/pod.go SetClusterSpecForPod); the
    template's own args name the backend, and a later flag wins in torchrun's argparse."""
    low, _, high = replica_bounds(elasticjob)
    return [
        f"--rdzv_endpoint={elasticjob['spec']['rdzvEndpoint']}",
        f"--rdzv_id={elasticjob['metadata']['name']}",
        f"--nnodes={low}:{high}",
    ]


def pod_failure_policy() -> dict[str, Any]:
    def on_exit(action: str, codes: tuple[int, ...]) -> dict[str, Any]:
        return {
            "action": action,
            "onExitCodes": {"containerName": WORKER_CONTAINER, "operator": "In", "values": sorted(codes)},
        }

    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            on_exit("Ignore", exit_codes.RETRYABLE),
            on_exit("FailIndex", exit_codes.PERMANENT),
        ]
    }


def _expect(value: Any, kind: type, where: str, allowed: str, of_strings: bool = False) -> None:
    """The CRD's schema refuses these at create time; an ElasticJob stored before that schema (or
    under an older CRD) is refused here with the same line instead of crashing the renderer."""
    items: Any = (
        (value.values() if isinstance(value, dict) else value) if of_strings and isinstance(value, kind) else ()
    )
    if not isinstance(value, kind) or not all(isinstance(item, str) for item in items):
        raise InvalidSpec(f"{where} is {value!r}: {allowed} is needed")


def _template(elasticjob: dict[str, Any]) -> dict[str, Any]:
    name = elasticjob["metadata"]["name"]
    template = copy.deepcopy(elasticjob["spec"]["replicaSpecs"][WORKER].get("template") or {})
    where = "spec.replicaSpecs.Worker.template"
    _expect(template, dict, where, "an object")
    metadata = template.setdefault("metadata", {})
    _expect(metadata, dict, f"{where}.metadata", "an object")
    for key in ("labels", "annotations"):
        _expect(metadata.get(key) or {}, dict, f"{where}.metadata.{key}", "a map of strings to strings", True)
    metadata["labels"] = {**(metadata.get("labels") or {}), **COMPATIBLE_LABELS, ELASTICJOB_LABEL: name}
    pod = template.setdefault("spec", {})
    _expect(pod, dict, f"{where}.spec", "an object")
    containers = pod.get("containers") or []
    _expect(containers, list, f"{where}.spec.containers", "a list of containers")
    for position, container in enumerate(containers):
        _expect(container, Mapping, f"{where}.spec.containers[{position}]", "a container (an object)")
        for key in ("command", "args"):
            _expect(
                container.get(key) or [], list, f"{where}.spec.containers[{position}].{key}", "a list of strings", True
            )
    # podFailurePolicy needs Never; the archived controller turned ExitCode into Never too.
    pod["restartPolicy"] = "Never"
    workers = [c for c in containers if c.get("name") == WORKER_CONTAINER]
    if not workers:
        raise InvalidSpec(
            f"the Worker template has no container named {WORKER_CONTAINER}: the controller reads "
            "exit codes from that container and gives it the rendezvous arguments"
        )
    workers[0]["args"] = [*rendezvous_args(elasticjob), *(workers[0].get("args") or [])]
    return template


# What a running Job takes in place (issue 36 item 3; Kubernetes v1.35.8 pkg/apis/batch/validation
# validation.go: `completions` of an Indexed Job may change together with `parallelism` (elastic
# Indexed Jobs, validateCompletions), `maxFailedIndexes` and `activeDeadlineSeconds` are mutable). The
# rest (the pod template, completionMode, podFailurePolicy, backoffLimitPerIndex, successPolicy)
# cannot change, so only they are in the spec hash: a change there replaces the Job.
MUTABLE_FIELDS = ("completions", "parallelism", "maxFailedIndexes", "activeDeadlineSeconds")


def spec_hash(job_spec: dict[str, Any]) -> str:
    """The hash of what cannot change in place (MUTABLE_FIELDS left out)."""
    fixed = {key: value for key, value in job_spec.items() if key not in MUTABLE_FIELDS}
    return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


def whole_spec_hash(desired_spec: dict[str, Any], live_spec: dict[str, Any]) -> str:
    """The hash a controller before in-place resizes wrote (of the whole spec it rendered), for
    `desired_spec` read with the live Job's in-place fields: equal to the live Job's annotation when
    only MUTABLE_FIELDS differ, so an upgraded controller re-annotates that Job instead of replacing
    it (review ctrl-1 item 1)."""
    spec = {key: value for key, value in desired_spec.items() if key not in MUTABLE_FIELDS}
    spec.update({key: live_spec[key] for key in MUTABLE_FIELDS if key in live_spec})
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def mutable_changes(desired: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """The in-place fields of `desired` (a Job) that differ on `live`, as a merge patch of the spec
    (an absent activeDeadlineSeconds is removed with null)."""
    want, have = desired["spec"], live.get("spec") or {}
    return {key: want.get(key) for key in MUTABLE_FIELDS if want.get(key) != have.get(key)}


def job(elasticjob: dict[str, Any]) -> dict[str, Any]:
    """The Job for `elasticjob` (an API dict); InvalidSpec when it cannot be run."""
    meta = elasticjob["metadata"]
    spec = elasticjob["spec"]
    low, replicas, high = replica_bounds(elasticjob)
    # An Indexed Job's pod hostname is <job name>-<index> and must be a DNS label (upstream-facts-4 #13);
    # the CRD refuses such names at create time, this covers objects stored before it did.
    longest = f"{meta['name']}-{high - 1}"
    if len(longest) > HOSTNAME_LIMIT or not DNS_LABEL.fullmatch(meta["name"]):
        raise InvalidSpec(
            f"the name {meta['name']!r} cannot name the workers: {longest!r} must be a DNS label of at "
            f"most {HOSTNAME_LIMIT} characters (lowercase letters, digits, '-')"
        )
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
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": job_spec,
    }
