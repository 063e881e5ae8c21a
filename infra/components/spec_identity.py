"""Which training spec an ElasticJob was made from, so that a changed spec is a new ElasticJob and
the wait never takes an older spec's result for the current one.

pulumi-kubernetes replaces a custom resource only when its name or namespace changes
(provider/pkg/provider/diff.go @ 00302beb, forceNewProperties); any other change is an update in
place, and our ElasticJob controller never starts a finished run again (controller/reconcile.py,
step 2: it only refreshes the status), and on a running one it replaces the Job, old pods first,
only when the rendered Job changes. So:
- the ElasticJob is replaced whenever its spec changes (`replaceOnChanges: ["spec"]`: the engine
  turns every detailed-diff entry under `spec` into a replacement, pulumi/pulumi
  pkg/resource/deploy/step_generator.go @ 1a16857a applyReplaceOnChanges), deleted before it is
  created again (pulumi-kubernetes deletes with Foreground propagation and waits until it is gone,
  provider/pkg/await/await.go Deletion, metadata/overrides.go DeletionPropagation @ 94977969, so the
  new job's pods never meet the old ones);
- it carries a hash of its spec in an annotation, the wait is given the same hash (a new hash is a
  new wait: ElasticJobCompletion's diff replaces on `specHash`), and a job that carries another
  hash is never taken as this spec's result.
The hash covers the whole spec as registered (image digest included), so a refresh that changes
nothing changes no hash (our controller never writes the spec, controller/reconcile.py, so a
refresh reads it as registered).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pulumi

SPEC_HASH_ANNOTATION = "elastic-training/spec-hash"


def spec_hash_of(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def with_spec_hash(elasticjob: dict[str, Any]) -> tuple[dict[str, Any], pulumi.Output[str]]:
    """(the ElasticJob with its spec's hash as an annotation, that hash); the spec may hold Outputs."""
    digest = pulumi.Output.from_input(elasticjob["spec"]).apply(spec_hash_of)
    metadata = {
        **elasticjob["metadata"],
        "annotations": {**elasticjob["metadata"].get("annotations", {}), SPEC_HASH_ANNOTATION: digest},
    }
    return {**elasticjob, "metadata": metadata}, digest


def stale_spec(elasticjob: dict[str, Any], expected: str) -> str | None:
    """Why this ElasticJob's status says nothing about the spec hashed `expected`, or None."""
    if not expected:
        return None
    meta = elasticjob.get("metadata") or {}
    found = (meta.get("annotations") or {}).get(SPEC_HASH_ANNOTATION)
    if found == expected:
        return None
    job = f"{meta.get('namespace')}/{meta.get('name')}"
    return (
        f"ElasticJob {job} was made from another spec ({SPEC_HASH_ANNOTATION} {found or 'missing'}, this "
        f"update's is {expected}): its result says nothing about this update"
    )
