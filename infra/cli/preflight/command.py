"""Know before you pay: check the account, zones, quotas, versions and local tools for a stack.

    elastic-training preflight STACK [-c KEY=VALUE ...] [--json | --markdown]

Reads the stack exactly as `synth` and `pulumi up` do (stacks/Pulumi.<STACK>.yaml, `-c` overrides
with `pulumi config set` meaning, infra/config.load_settings), then makes only read-only AWS calls
through boto3's default session (credentials chain, AWS_PROFILE, AWS_ENDPOINT_URL: upstream-facts.md
fact 20). One line per check: PASS, WARN, FAIL or SKIP, a short message, and for a failure the fix.
An AWS call that is denied, throttled or not implemented by the endpoint is `WARN could not check:
<reason>`, never a traceback. Then what the stack costs per hour (infra/cli/cost.py), with the Price
List API's node price when it answers.

Exit status: 0 nothing failed, 1 a check failed, 2 bad config or usage.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import date
from typing import Callable

from botocore.exceptions import NoRegionError

from infra.cli.args import OneLineParser, UsageError, add_config_overrides, add_stack_argument
from infra.cli.preflight.checks import FAIL, ClientMaker, Preflight, default_client
from infra.cli.cost_command import lines as cost_lines
from infra.cli.preflight.report import header, markdown, table
from infra.config import ConfigError, load_settings
from infra.config.stack_file import StackConfigError, apply_overrides, read_stack_file, stack_name


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training preflight", description=__doc__.split("\n\n")[0])
    add_stack_argument(parser)
    add_config_overrides(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", default=False,
                        help="print exactly one JSON object {stack, region, checks, cost} instead of the table "
                             "(default: off, the table)")
    output.add_argument("--markdown", action="store_true", default=False,
                        help="print the checks and the cost as Markdown, e.g. for a CI job summary "
                             "(default: off, the table)")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None, make_client: ClientMaker = default_client, today: date | None = None,
         which: Callable[[str], str | None] = shutil.which) -> int:
    try:
        args = parse_args(argv)
        stack = stack_name(args.stack)
        raw = apply_overrides(read_stack_file(stack), args.config)
        settings = load_settings(raw, stack, today)
    except (UsageError, ConfigError, StackConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        checks, estimate, notes = Preflight(settings, make_client, today, which).run()
    except NoRegionError as error:  # cannot happen with aws:region set; kept as one line all the same
        print(f"error: {error}", file=sys.stderr)
        return 2
    failed = any(c.status == FAIL for c in checks)
    if args.json:
        print(json.dumps({"stack": settings.stack, "region": settings.region,
                          "checks": [c.as_json() for c in checks], "cost": estimate}))
    elif args.markdown:
        print(markdown(settings, checks, estimate, notes), end="")
    else:
        print(header(settings))
        for warning in settings.warnings:
            print(f"warning: {warning}")
        print("\n".join(table(checks)))
        print("\n".join(cost_lines(estimate)))
        for note in notes:
            print(f"  note: {note}")
        print("preflight: " + ("FAILED: fix the checks marked FAIL before `pulumi up`" if failed else "nothing failed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
