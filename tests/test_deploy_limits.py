"""deploy.yml's job and credentials outlast any `pulumi up` it starts (issue 21, item 12).

A job GitHub stops halfway leaves the Pulumi state locked with pending operations; credentials that
expire mid-`up` fail every later AWS call. The bound is infra/cli/limits.py's: EKS cluster and node
group create deadlines (hashicorp/terraform-provider-aws internal/service/eks cluster.go 30 min,
node_group.go 60 min, bridged by pulumi-aws) plus each workload's customTimeouts
(jobTimeoutMinutes + AWAIT_MARGIN_MINUTES, infra/components/workloads.py). GitHub runs a job on a
hosted runner for at most 6 hours (docs.github.com "Usage limits, billing, and administration":
"Job execution time - Each job in a workflow can run for up to 6 hours of execution time").
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from infra.cli import limits
from infra.components.workloads import AWAIT_MARGIN_MINUTES
from infra.config import load_settings
from infra.config.stack_file import read_stack_file
from synth_support import REPO

GITHUB_HOSTED_JOB_LIMIT_MINUTES = 6 * 60


def deploy_job() -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / "deploy.yml").read_text())["jobs"]["pulumi"]


def step(job: dict, name: str) -> dict:
    (found,) = [s for s in job["steps"] if s.get("name") == name]
    return found


def test_the_job_and_its_credentials_last_as_long_as_github_allows():
    job = deploy_job()
    minutes = job["timeout-minutes"]
    assert minutes == GITHUB_HOSTED_JOB_LIMIT_MINUTES
    credentials = step(job, "AWS credentials (GitHub OIDC, deploy role)")["with"]
    assert credentials["role-duration-seconds"] >= minutes * 60  # obtained during the job, so they outlast it
    assert credentials["role-duration-seconds"] <= 12 * 3600  # IAM's MaxSessionDuration ceiling
    assert f"--max-session-duration {credentials['role-duration-seconds']}" in (REPO / "docs" / "ci.md").read_text()


def test_up_is_checked_against_the_jobs_own_limit_before_credentials():
    job = deploy_job()
    names = [s.get("name") for s in job["steps"]]
    check = step(job, "Check that pulumi up fits this job")
    assert names.index(check["name"]) < names.index("AWS credentials (GitHub OIDC, deploy role)")
    (minutes,) = re.findall(r'python -m infra\.cli\.limits "\$\{STACK\}" --job-minutes (\d+)', check["run"])
    assert int(minutes) == job["timeout-minutes"]


def settings_of(stack: str, **config: str):
    raw = {**read_stack_file(stack), **{f"elastic-training:{k}": v for k, v in config.items()}}
    return load_settings(raw, stack)


def test_the_bound_adds_the_cluster_and_every_workload_deadline():
    smoke = settings_of("smoke")
    assert limits.up_minutes_bound(smoke) == 30 + 60 + 4 * (smoke.job_timeout_minutes + AWAIT_MARGIN_MINUTES)
    local = settings_of("local")  # target existing: no cluster to create, no export
    assert limits.up_minutes_bound(local) == 3 * (local.job_timeout_minutes + AWAIT_MARGIN_MINUTES)


@pytest.mark.parametrize(
    "stack",
    yaml.safe_load((REPO / ".github" / "workflows" / "deploy.yml").read_text())[True]["workflow_dispatch"]["inputs"][
        "stack"
    ]["options"],
)
def test_each_deployable_stack_is_refused_exactly_when_it_could_outlast_the_job(stack):
    job_minutes = deploy_job()["timeout-minutes"]
    settings = settings_of(stack)
    problem = limits.check(settings, job_minutes)
    assert (problem is None) == (limits.up_minutes_bound(settings) <= job_minutes)
    largest = limits.largest_job_timeout(settings, job_minutes)
    assert limits.check(settings_of(stack, jobTimeoutMinutes=str(largest)), job_minutes) is None
    assert limits.check(settings_of(stack, jobTimeoutMinutes=str(largest + 1)), job_minutes) is not None


def test_the_check_is_one_line_through_the_command():
    result = subprocess.run(
        [sys.executable, "-m", "infra.cli.limits", "dev", "--job-minutes", "360"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    settings = settings_of("dev")
    if limits.up_minutes_bound(settings) <= 360:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 1 and result.stderr.count("\n") == 1
        assert result.stderr.startswith(
            f"stack dev: `pulumi up` may take up to {limits.up_minutes_bound(settings)} minutes"
        )
