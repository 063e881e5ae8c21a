"""A CI deployer and a person taking turns at `pulumi up` keep the same access entries (issue 21
item 2, upstream-facts-2.md fact 13).

Each `up` is the real program (__main__.py, as `pulumi up` runs it) under the recording mocks,
with STS answering the run's caller and EKS answering what the cluster holds so far; between runs
the access entries it registered are applied to a model of EKS (tests/eks_access_model.py: an
explicit entry for a principal that has one, the creator's included, is refused with 409
ResourceInUseException, as botocore's EKS model and pulumi/pulumi-eks#2373 say).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from eks_access_model import FakeEks, apply_entries
from infra.components.cluster_creator import CREATOR_TAG
from infra.config import PROJECT
from infra.config.stack_file import apply_overrides, read_stack_file
from synth_support import REPO

ACCOUNT = "123456789012"
ALICE = f"arn:aws:iam::{ACCOUNT}:role/teams/ml/Alice-Admin"  # a person's SSO role, with a path
CI = f"arn:aws:iam::{ACCOUNT}:role/ci-deployer"
ALICE_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/Alice-Admin/alice@example.com"
CI_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/ci-deployer/GitHubActions"
INTERN_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/intern/bob"
CLUSTER = f"{PROJECT}-dev"


def deployments(sequences: list[tuple[dict[str, dict[str, str]], list[str]]], admins: list[str]) -> list[list[dict]]:
    """Runs of the program, one sequence after another: (the clusters the region has at first ->
    their tags, the callers in turn). A run that finds no cluster creates it, with the tags it
    registered. For each run: the access entries and cluster tags it registers, and its warnings.
    One process for all (each run costs seconds)."""
    config = apply_overrides(read_stack_file("dev"), [f"clusterAdminArns={json.dumps(admins)}"])
    script = textwrap.dedent(f"""
        import json, logging, runpy, pulumi
        from infra.cli.mocks import RecordingMocks

        class Collect(logging.Handler):  # pulumi.log.warn under the mocks goes to this logger
            def __init__(self):
                super().__init__()
                self.lines = []

            def emit(self, record):
                self.lines.append("warning: " + record.getMessage())

        class Deployment(RecordingMocks):
            def __init__(self, caller, clusters):
                super().__init__("{PROJECT}", "dev", "us-west-2")
                self.caller, self.clusters = caller, clusters

            def call(self, args):
                if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
                    return {{"accountId": "{ACCOUNT}", "arn": self.caller, "userId": "AROA:x", "id": "{ACCOUNT}"}}
                if args.token == "aws:eks/getClusters:getClusters":
                    return {{"names": sorted(self.clusters), "id": "us-west-2"}}
                if args.token == "aws:eks/getCluster:getCluster":
                    return {{"name": args.args["name"], "tags": self.clusters[args.args["name"]], "id": args.args["name"]}}
                return super().call(args)

        results = []
        for clusters, callers in {sequences!r}:
            runs = []
            for caller in callers:
                mocks = Deployment(caller, clusters)
                mocks.install()
                pulumi.runtime.set_all_config({config!r})
                collect = Collect()
                logging.getLogger("infra.cli.mocks.program").addHandler(collect)
                pulumi.runtime.test(lambda: runpy.run_path("infra", run_name="__main__"))()
                logging.getLogger("infra.cli.mocks.program").removeHandler(collect)
                (cluster,) = [r for r in mocks.registrations if r.type == "eks:index:Cluster"]
                inputs = cluster.inputs
                clusters.setdefault(inputs["name"], {{**inputs.get("tags", {{}}), **(inputs.get("clusterTags") or {{}})}})
                runs.append({{"entries": {{k: e["principalArn"] for k, e in (inputs.get("accessEntries") or {{}}).items()}},
                             "clusterTags": inputs.get("clusterTags") or {{}}, "tags": inputs.get("tags") or {{}},
                             "warnings": collect.lines}})
            results.append(runs)
        print("RESULT " + json.dumps(results))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.split("RESULT ", 1)[1])


@pytest.fixture(scope="module")
def runs() -> list[list[dict]]:
    return deployments(
        [
            ({}, [ALICE_SESSION, CI_SESSION, ALICE_SESSION, CI_SESSION]),  # a person creates it, then turns with CI
            ({CLUSTER: {CREATOR_TAG: CI}}, [ALICE_SESSION]),  # CI created it
            ({CLUSTER: {"project": PROJECT, "stack": "dev"}}, [CI_SESSION]),  # created before the record
            ({}, [INTERN_SESSION]),  # someone outside the list creates it
            ({CLUSTER: {CREATOR_TAG: CI}}, [INTERN_SESSION]),  # ... or deploys to CI's cluster
        ],
        [ALICE, CI],
    )


def test_alternating_deployers_change_no_entry_and_lock_nobody_out(runs):
    eks, admins, entries = FakeEks(), [ALICE, CI], {}
    for caller, run in zip((ALICE_SESSION, CI_SESSION, ALICE_SESSION, CI_SESSION), runs[0]):
        if CLUSTER not in eks.clusters:  # the first `up` creates the cluster, as its caller
            eks.create_cluster(CLUSTER, caller, {**run["tags"], **run["clusterTags"]})
        apply_entries(eks, CLUSTER, entries, run["entries"])  # raises the 409 where EKS would
        entries = run["entries"]
        for principal in (*admins, ALICE_SESSION, CI_SESSION):
            assert eks.can_reach(CLUSTER, principal), (caller, principal, eks.log)
    first = runs[0][0]
    # the creator is the first run's caller (its role), recorded on the cluster, and nothing moves after it
    assert first["clusterTags"] == {CREATOR_TAG: f"arn:aws:iam::{ACCOUNT}:role/Alice-Admin"}
    assert all(run["entries"] == first["entries"] == {"admin-0": CI} for run in runs[0])
    assert all(run["clusterTags"] == first["clusterTags"] for run in runs[0])
    assert [line for line in eks.log if "delete" in line or "409" in line] == []


def test_a_ci_role_that_created_the_cluster_is_its_creator_for_everyone(runs):
    (run,) = runs[1]
    assert run["entries"] == {"admin-0": ALICE} and run["clusterTags"] == {CREATOR_TAG: CI}
    eks = FakeEks()
    eks.create_cluster(CLUSTER, CI_SESSION, {CREATOR_TAG: CI})
    apply_entries(eks, CLUSTER, {}, run["entries"])
    assert eks.can_reach(CLUSTER, ALICE_SESSION) and eks.can_reach(CLUSTER, CI_SESSION)


def test_a_cluster_from_before_the_record_warns_and_is_not_tagged_with_a_guess(runs):
    (run,) = runs[2]
    assert run["clusterTags"] == {}  # no creator recorded from a guess
    assert any(f"carries no {CREATOR_TAG} tag" in line for line in run["warnings"]), run["warnings"]


def test_a_deployer_without_access_is_told_before_the_in_cluster_steps_fail(runs):
    # creating the cluster makes it the creator, which reaches it ...
    assert not [line for line in runs[3][0]["warnings"] if "has no access entry" in line]
    # ... on CI's cluster it has no entry
    assert any(
        "is neither the cluster's creator" in line and "add its IAM ARN to clusterAdminArns" in line
        for line in runs[4][0]["warnings"]
    ), runs[4][0]["warnings"]
