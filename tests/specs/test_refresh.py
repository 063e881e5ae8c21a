"""A refresh of an untouched run shows no change on the ElasticJob (issue 21 item 5,
upstream-facts-2.md facts 8 and 10).

The TorchElastic controller writes every ElasticJob back through its Go types (Kubernetes 1.15
pod template, its own spec struct, canonical quantities), and `pulumi refresh` records the live
object pruned to the inputs' shape; tests/elasticjob_writeback.py models both from their sources.
What the stack registers (resources.json, the inputs pulumi-kubernetes receives) must come back
unchanged from that round trip, for every stack and for quantities written the long way.
"""

from __future__ import annotations

import copy

import pytest

from elasticjob_writeback import refresh_changes
from synth_support import STACKS

ELASTICJOB = "kubernetes:elastic.pytorch.org/v1alpha1:ElasticJob"
TEMPLATE = ".spec.replicaSpecs.Worker.template.spec"


def registered_elasticjob(stack) -> dict:
    return stack.one(ELASTICJOB)["inputs"]


def test_the_model_sees_what_the_controller_drops(dev):
    """The model is not blind: fields the controller cannot hold, respelled quantities and a
    spec-level run policy all show as changes after a refresh."""
    job = copy.deepcopy(registered_elasticjob(dev))
    pod = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    pod["securityContext"]["seccompProfile"] = {"type": "RuntimeDefault"}
    pod["containers"][0]["resources"]["limits"]["cpu"] = "0.5"
    job["spec"]["cleanPodPolicy"] = "None"
    assert refresh_changes(job) == [".spec.cleanPodPolicy", f"{TEMPLATE}.containers[0].resources.limits.cpu",
                                    f"{TEMPLATE}.securityContext.seccompProfile"]


@pytest.mark.parametrize("stack_name", STACKS)
def test_a_refresh_of_an_untouched_run_shows_no_change(synth_stack, stack_name):
    assert refresh_changes(registered_elasticjob(synth_stack(stack_name))) == []


def test_quantities_written_the_long_way_are_stored_as_written(synth_stack):
    stack = synth_stack("gpu", "workerCpu=3.0", "workerMemory=12288Mi")
    job = registered_elasticjob(stack)
    assert refresh_changes(job) == []
    container = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["cpu"] == "3" and container["resources"]["limits"]["memory"] == "12Gi"
