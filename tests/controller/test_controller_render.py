"""The Job an ElasticJob renders (controller/render.py): golden, strict-valid on every supported
Kubernetes version, and the fields whose meaning the run depends on."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from controller import exit_codes, render
from infra.versions import SUPPORTED_KUBERNETES_VERSIONS

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UID = "5e1c7a3e-0000-4000-8000-000000000001"


def stack_elasticjob(stack: str = "dev") -> dict:
    """The ElasticJob the stack renders (its golden file), as the API server returns it (with a uid)."""
    elasticjob = yaml.safe_load((GOLDEN / f"{stack}-training.yaml").read_text())
    elasticjob["metadata"]["uid"] = UID
    return elasticjob


@pytest.mark.parametrize("stack", ["dev", "smoke"])
def test_job_matches_golden_file(stack):
    """Set UPDATE_GOLDEN=1 to rewrite it; the diff then shows in review."""
    path = GOLDEN / f"{stack}-training-job.yaml"
    rendered = yaml.safe_dump(render.job(stack_elasticjob(stack)), sort_keys=True)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(rendered)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert rendered == path.read_text()


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
@pytest.mark.parametrize("stack", ["dev", "smoke"])
def test_job_is_strict_valid_on_every_supported_version(stack, version):
    kubernetes_validate.validate(render.job(stack_elasticjob(stack)), version, strict=True)


def test_the_1_31_schema_knows_every_field_we_set():
    """A field the 1.31 schema lacked would be refused there: strict validation of a Job with a
    made-up field fails, so the test above does check field names."""
    job = render.job(stack_elasticjob())
    job["spec"]["podFailurePolicyTypo"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.31", strict=True)


def test_job_runs_one_indexed_pod_per_worker_and_succeeds_at_min_replicas():
    elasticjob = stack_elasticjob()
    spec = render.job(elasticjob)["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["maxFailedIndexes"] == 2 - 1
    assert spec["successPolicy"] == {"rules": [{"succeededCount": 1}]}
    assert spec["backoffLimitPerIndex"] == render.DEFAULT_BACKOFF_LIMIT_PER_INDEX
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_pod_failure_policy_is_the_exit_code_table():
    rules = render.job(stack_elasticjob())["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    by_action = {r["action"]: r["onExitCodes"] for r in rules[1:]}
    assert by_action["Ignore"]["values"] == [130, 138, 143]
    assert by_action["FailIndex"]["values"] == [2, 3, 126, 127]
    assert {r["containerName"] for r in by_action.values()} == {render.WORKER_CONTAINER}
    assert set(by_action["Ignore"]["values"]) == set(exit_codes.RETRYABLE)


def test_rendezvous_prefix_comes_before_the_templates_own_args():
    args = render.job(stack_elasticjob())["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["--rdzv_endpoint=rendezvous-store:29400", "--rdzv_id=train-run-1", "--nnodes=1:2"]
    assert args[3:] == stack_elasticjob()["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--rdzv_backend") for a in args[:3])


def test_job_is_owned_by_the_elasticjob_and_labels_its_pods():
    job = render.job(stack_elasticjob())
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "elastic.pytorch.org/v1alpha1",
            "kind": "ElasticJob",
            "name": "train-run-1",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels[render.ELASTICJOB_LABEL] == "train-run-1"
    assert labels["elastic-training/job"] == "train-run-1"  # the template's own labels stay (NetworkPolicies, PDB)


def test_run_policy_reaches_the_job():
    elasticjob = stack_elasticjob()
    elasticjob["spec"].update(activeDeadlineSeconds=600, backoffLimit=5)
    spec = render.job(elasticjob)["spec"]
    assert (spec["activeDeadlineSeconds"], spec["backoffLimitPerIndex"]) == (600, 5)


def test_a_changed_template_changes_the_spec_hash_and_nothing_else_does():
    first = render.job(stack_elasticjob())
    changed = stack_elasticjob()
    changed["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = "other@sha256:" + "1" * 64
    relabelled = stack_elasticjob()
    relabelled["metadata"]["labels"] = {**relabelled["metadata"]["labels"], "extra": "x"}
    key = render.SPEC_HASH_ANNOTATION
    assert render.job(changed)["metadata"]["annotations"][key] != first["metadata"]["annotations"][key]
    assert render.job(relabelled)["metadata"]["annotations"][key] == first["metadata"]["annotations"][key]


@pytest.mark.parametrize(
    "change, complaint",
    [
        (lambda s: s.update(minReplicas=3), "minReplicas <= replicas <= maxReplicas"),
        (lambda s: s.update(maxReplicas=1), "minReplicas <= replicas <= maxReplicas"),
        (lambda s: s["replicaSpecs"]["Worker"].update(replicas=0), "at least 1"),
        (
            lambda s: s["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(name="main"),
            "no container named elasticjob-worker",
        ),
    ],
)
def test_an_elasticjob_that_cannot_run_is_refused_in_one_line(change, complaint):
    elasticjob = copy.deepcopy(stack_elasticjob())
    change(elasticjob["spec"])
    with pytest.raises(render.InvalidSpec, match=complaint) as error:
        render.job(elasticjob)
    assert "\n" not in str(error.value)


def test_the_worker_container_is_the_one_the_stack_renders():
    """The controller cannot import infra/ (it runs from the image alone), so the name it reads exit codes
    from is written twice; the stack's ElasticJob names its worker container by infra/specs/workloads.py."""
    from infra.specs import workloads

    assert render.WORKER_CONTAINER == workloads.WORKER_CONTAINER


def test_the_roles_lease_is_the_one_the_controller_elects_on():
    from controller.__main__ import LEASE_NAME
    from infra.specs import elastic

    assert elastic.CONTROLLER_LEASE == LEASE_NAME
    lease_rules = [r for r in elastic.controller_role_rules() if r["apiGroups"] == ["coordination.k8s.io"]]
    assert lease_rules == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "update"],
            "resourceNames": [LEASE_NAME],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]
