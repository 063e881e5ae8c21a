"""Know before you pay: check the account, zones, quotas, versions and local tools for a stack.

    elastic-training preflight STACK [-c KEY=VALUE ...] [--json | --markdown]

Reads the stack exactly as `synth` and `pulumi up` do (stacks/Pulumi.<STACK>.yaml, `-c` overrides
with `pulumi config set` meaning, infra/config/settings.py load_settings), then makes only read-only AWS calls
through boto3's default session (credentials chain, AWS_PROFILE, AWS_ENDPOINT_URL: upstream-facts.md
fact 20). One line per check: PASS, WARN, FAIL or SKIP, a short message, and for a failure the fix.
An AWS call that is denied, throttled or not implemented by the endpoint is `WARN could not check:
<reason>`, never a traceback. Then what the stack costs per hour (infra/cli/cost.py), with the Price
List API's node price when it answers.

The stack's `aws:profile`, when it sets one, is the profile the calls use (as `pulumi up` would); else
AWS_PROFILE and the rest of the credential chain. A check that could not run is not a pass: with
nothing failed and some not checked, the exit status is 3 (and `up` stops unless told to go on).

Exit status: 0 every check ran and nothing failed, 1 a check failed, 2 bad config, usage or AWS profile,
3 nothing failed but some checks could not run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import date
from typing import Callable

from botocore.exceptions import NoRegionError, ProfileNotFound

from infra.cli.args import OneLineParser, UsageError, add_config_overrides, add_stack_argument
from infra.cli.preflight.checks import FAIL, ClientMaker, Preflight, profile_clients
from infra.cli.cost_command import lines as cost_lines
from infra.cli.preflight.report import header, markdown, table, verdict
from infra.config import ConfigError, load_settings
from infra.config.stack_file import StackConfigError, apply_overrides, read_stack_file, stack_name


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training preflight", description=__doc__.split("\n\n")[0])
    add_stack_argument(parser)
    add_config_overrides(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json",
        action="store_true",
        default=False,
        help="print exactly one JSON object {stack, region, checks, cost} instead of the table "
        "(default: off, the table)",
    )
    output.add_argument(
        "--markdown",
        action="store_true",
        default=False,
        help="print the checks and the cost as Markdown, e.g. for a CI job summary (default: off, the table)",
    )
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


UNCHECKED = 3


def _profile_problem(error: ProfileNotFound, stack_profile: str | None) -> str:
    """One line: which setting named the profile, and the profiles that do exist (the files boto3 reads)."""
    import botocore.session

    named = (
        f"the stack's aws:profile '{stack_profile}'" if stack_profile else f"AWS_PROFILE={error.kwargs.get('profile')}"
    )
    known = botocore.session.Session().available_profiles  # reads ~/.aws/config and credentials; uses no profile
    allowed = f"profiles configured here: {', '.join(known)}" if known else "none is configured here"
    return (
        f"{named} names an AWS profile that is not in ~/.aws/config or ~/.aws/credentials ({allowed}; "
        "`aws configure --profile NAME` adds one)"
    )


def main(
    argv: list[str] | None = None,
    make_client: ClientMaker | None = None,
    today: date | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> int:
    try:
        args = parse_args(argv)
        stack = stack_name(args.stack)
        raw = apply_overrides(read_stack_file(stack), args.config)
        settings = load_settings(raw, stack, today)
    except (UsageError, ConfigError, StackConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if make_client is None:
        # An empty aws:profile is no profile (the provider then uses the default chain, as boto3 does).
        stack_profile = raw.get("aws:profile") or None
        try:
            make_client = profile_clients(stack_profile)
        except ProfileNotFound as error:
            print(f"error: {_profile_problem(error, stack_profile)}", file=sys.stderr)
            return 2
    try:
        checks, estimate, notes = Preflight(settings, make_client, today, which).run()
    except NoRegionError as error:  # cannot happen with aws:region set; kept as one line all the same
        print(f"error: {error}", file=sys.stderr)
        return 2
    failed = any(c.status == FAIL for c in checks)
    unchecked = [c.id for c in checks if not c.checked]
    if args.json:
        print(
            json.dumps(
                {
                    "stack": settings.stack,
                    "region": settings.region,
                    "checks": [c.as_json() for c in checks],
                    "cost": estimate,
                }
            )
        )
    elif args.markdown:
        print(markdown(settings, checks, estimate, notes), end="")
    else:
        print(header(settings))
        for warning in settings.warnings:
            print(f"warning: {warning}")
        print("\n".join(table(checks)))
        print("\n".join(cost_lines(estimate, False, settings.stack)))
        for note in notes:
            print(f"  note: {note}")
        print(f"preflight: {verdict(checks)}")
    return 1 if failed else UNCHECKED if unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
