"""How long a `pulumi up` of a stack may take at most, and whether it fits a CI job's time limit.

  python -m infra.cli.limits STACK --job-minutes N     exit 0 when it fits, 1 (one line) when not

The bound adds up the deadlines on the path a first `up` waits through, each the point where a
step fails instead of waiting longer:
  - the EKS cluster, then its node groups: pulumi-aws's default create timeouts, 30 and 60 minutes
    (hashicorp/terraform-provider-aws internal/service/eks cluster.go and node_group.go,
    `Timeouts: Create: schema.DefaultTimeout(...)`; pulumi-aws bridges those resources);
  - then the workloads one after another (data-prep, training wait, test, and on eks the export),
    each at most jobTimeoutMinutes + AWAIT_MARGIN_MINUTES (their customTimeouts,
    infra/components/workloads.py).
Steps that wait on no such deadline (VPC, NAT, add-ons, the image build) take minutes and are not in
it. deploy.yml runs this check before it takes credentials, with its own timeout-minutes.
"""

from __future__ import annotations

import argparse
import sys

from infra.components.workloads import AWAIT_MARGIN_MINUTES
from infra.config import EKS, ConfigError, Settings, load_settings
from infra.config.stack_file import StackConfigError, read_stack_file, stack_name

EKS_CLUSTER_CREATE_MINUTES = 30
EKS_NODE_GROUP_CREATE_MINUTES = 60


def workload_stages(settings: Settings) -> int:
    """data-prep, training wait, test; plus the export Job on eks (the artifacts bucket)."""
    return 4 if settings.target == EKS else 3


def platform_minutes(settings: Settings) -> int:
    """The cluster, then its node groups; target existing creates neither."""
    return EKS_CLUSTER_CREATE_MINUTES + EKS_NODE_GROUP_CREATE_MINUTES if settings.target == EKS else 0


def up_minutes_bound(settings: Settings) -> int:
    return platform_minutes(settings) + workload_stages(settings) * (
        settings.job_timeout_minutes + AWAIT_MARGIN_MINUTES
    )


def largest_job_timeout(settings: Settings, job_minutes: int) -> int:
    """The largest jobTimeoutMinutes whose bound fits in job_minutes."""
    return (job_minutes - platform_minutes(settings)) // workload_stages(settings) - AWAIT_MARGIN_MINUTES


def check(settings: Settings, job_minutes: int) -> str | None:
    bound = up_minutes_bound(settings)
    if bound <= job_minutes:
        return None
    return (
        f"stack {settings.stack}: `pulumi up` may take up to {bound} minutes (cluster and node groups, then "
        f"{workload_stages(settings)} workloads of jobTimeoutMinutes {settings.job_timeout_minutes} + "
        f"{AWAIT_MARGIN_MINUTES}), longer than this job's {job_minutes}: set jobTimeoutMinutes to at most "
        f"{largest_job_timeout(settings, job_minutes)}, or run `elastic-training up {settings.stack}` yourself"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.cli.limits", description=__doc__.split("\n\n")[0])
    parser.add_argument("stack")
    parser.add_argument("--job-minutes", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        stack = stack_name(args.stack)
        settings = load_settings(read_stack_file(stack), stack)
    except (ConfigError, StackConfigError) as error:
        print(f"limits: {error}", file=sys.stderr)
        return 2
    problem = check(settings, args.job_minutes)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print(
        f"stack {settings.stack}: `pulumi up` takes at most {up_minutes_bound(settings)} of {args.job_minutes} minutes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
