"""A changed training spec is a new ElasticJob, and the wait never takes an older spec's verdict
(issue 21 item 4, upstream-facts-2.md facts 7 and 11).

What `pulumi up` does with the registered inputs is modelled from the sources
(tests/engine_replace_model.py: pulumi-kubernetes diff.go forceNewProperties, the engine's
applyReplaceOnChanges); the ElasticJobCompletion's own diff is the real provider's.
maxRestarts is the change to watch: it is in the worker's arguments but not in the rendezvous id
(infra/specs/workloads.py rendezvous_id), which is all the wait used to be keyed on.
"""

from __future__ import annotations

from engine_replace_model import step
from infra.components.completion import Snapshot, _CompletionProvider, wait_for
from infra.components.spec_identity import SPEC_HASH_ANNOTATION

ELASTICJOB = "kubernetes:elastic.pytorch.org/v1alpha1:ElasticJob"
COMPLETION = "workloads-training-complete"
DYNAMIC = "pulumi-python:dynamic:Resource"


def test_a_changed_training_spec_replaces_the_elasticjob_and_its_wait(dev, synth_stack):
    changed = synth_stack("dev", "maxRestarts=5")
    old, new = dev.one(ELASTICJOB), changed.one(ELASTICJOB)
    assert new["deleteBeforeReplace"] is True
    assert step(old["inputs"], new["inputs"], new["replaceOnChanges"]) == "replace"
    old_wait, new_wait = dev.one(DYNAMIC, COMPLETION)["inputs"], changed.one(DYNAMIC, COMPLETION)["inputs"]
    # the wait is for the new job's spec, and the completion's own diff makes it a new wait
    assert new_wait["specHash"] == new["inputs"]["metadata"]["annotations"][SPEC_HASH_ANNOTATION]
    assert "specHash" in _CompletionProvider().diff("id", old_wait, new_wait).replaces


def test_the_same_spec_or_a_refresh_replaces_nothing(dev, synth_stack):
    again = synth_stack("dev", "runId=run-1")  # a second render of the same config
    job = dev.one(ELASTICJOB)
    assert step(job["inputs"], again.one(ELASTICJOB)["inputs"], job["replaceOnChanges"]) == "same"
    assert dev.one(DYNAMIC, COMPLETION)["inputs"]["specHash"] == again.one(DYNAMIC, COMPLETION)["inputs"]["specHash"]


class OneJob:
    """A cluster whose ElasticJob says Succeeded, made from the spec hashed `made_from`."""

    namespace, name = "training", "train-run-1"

    def __init__(self, made_from: str):
        self.job = {
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": "u",
                "annotations": {SPEC_HASH_ANNOTATION: made_from},
            },
            "status": {"conditions": [{"type": "Succeeded", "status": "True"}]},
        }
        self.deleted = 0

    def read(self) -> Snapshot:
        return Snapshot(self.job)

    def worker_log_tail(self, pod: str, lines: int) -> str:
        return ""

    def delete_elasticjob(self) -> None:
        self.deleted += 1


def test_the_wait_never_takes_an_older_specs_verdict():
    stale = OneJob(made_from="0ld5pec0ld5pec00")
    verdict = wait_for(
        stale, 3600, poll_seconds=15, clock=lambda: 0.0, sleep=lambda _: None, spec_hash="n3w5pecn3w5pec00"
    )
    assert verdict.state == "failed"
    assert verdict.message.startswith(
        "ElasticJob training/train-run-1 was made from another spec (elastic-training/spec-hash 0ld5pec0ld5pec00, this "
        "update's is n3w5pecn3w5pec00): its result says nothing about this update"
    )
    assert stale.deleted == 1  # so `pulumi up --refresh` makes the current one
    current = OneJob(made_from="n3w5pecn3w5pec00")
    assert (
        wait_for(current, 3600, clock=lambda: 0.0, sleep=lambda _: None, spec_hash="n3w5pecn3w5pec00").state
        == "succeeded"
    )
    assert current.deleted == 0
