"""`elastic-training cost STACK`: what a stack costs while it exists, item by item, from the offline
price table (no AWS call; `preflight` asks the Price List API when there are credentials).

Exit status: 0 printed, 2 bad config or usage.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import date, datetime, timezone

from infra.cli import cost
from infra.cli.args import OneLineParser, UsageError, add_config_overrides, add_stack_argument
from infra.config import ConfigError, load_settings
from infra.config.capacity import SPOT
from infra.config.stack_file import StackConfigError, apply_overrides, read_stack_file, stack_name


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training cost", description=__doc__.split("\n\n")[0])
    add_stack_argument(parser)
    add_config_overrides(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        default=False,
        help="print the cost object as JSON instead of lines (default: off, lines)",
    )
    parser.add_argument(
        "--sources",
        action="store_true",
        default=False,
        help="cite each price's source in full, as read (default: off, its short name)",
    )
    return parser


def stack_rows(stacks: list[str], today: date) -> list[str]:
    """docs/costs.md's stack table (a test keeps the page in step): the stack as its file says, and the
    same stack with Spot workers (the estimate reads `capacity_type`, which the capacityType key sets)."""
    rows = []
    for stack in stacks:
        settings = load_settings(read_stack_file(stack), stack, today)
        hourly, daily, run = cost.readme_cells(cost.estimate(settings, today))
        spot_hourly = spot_run = "n/a"
        if settings.target == "eks":
            spot = dataclasses.replace(settings, capacity_type=SPOT)
            spot_hourly, _, spot_run = cost.readme_cells(cost.estimate(spot, today))
        rows.append(f"| `{stack}` | {hourly} | {daily} | {run} | {spot_hourly} | {spot_run} |")
    return rows


def lines(estimate: dict, sources: bool = True, stack: str = "STACK") -> list[str]:
    return cost.lines(estimate, sources, stack)


def main(argv: list[str] | None = None, today: date | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        stack = stack_name(args.stack)
        settings = load_settings(apply_overrides(read_stack_file(stack), args.config), stack, today)
    except (UsageError, ConfigError, StackConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    estimate = cost.estimate(settings, today or datetime.now(timezone.utc).date())
    print(json.dumps(estimate) if args.json else "\n".join(lines(estimate, args.sources, stack)))
    return 0
