"""`elastic-training cost STACK`: what a stack costs while it exists, item by item, from the offline
price table (no AWS call; `preflight` asks the Price List API when there are credentials).

Exit status: 0 printed, 2 bad config or usage.
"""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, timezone

from infra.cli import cost
from infra.cli.args import OneLineParser, UsageError, add_config_overrides, add_stack_argument
from infra.config import ConfigError, load_settings
from infra.config.stack_file import StackConfigError, apply_overrides, read_stack_file


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training cost", description=__doc__.split("\n\n")[0])
    add_stack_argument(parser)
    add_config_overrides(parser)
    parser.add_argument("--json", action="store_true", default=False,
                        help="print the cost object as JSON instead of lines (default: off, lines)")
    return parser


def lines(estimate: dict) -> list[str]:
    out = [f"cost while the stack exists: {cost.summary(estimate)} ({estimate['note']})"]
    for item in estimate["items"]:
        per_hour = "per GB, not in the total" if item["quantity"] is None else (
            "price not read" if item["hourlyUsd"] is None else f"{cost.usd(item['hourlyUsd'])}/hour")
        unit = "not read" if item["unitUsd"] is None else f"{cost.usd(item['unitUsd'])}/{item['unit']}"
        out.append(f"  {item['what']}: {unit} -> {per_hour}")
    out.append(f"  prices from: {estimate['pricesFrom']}")
    return out


def main(argv: list[str] | None = None, today: date | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        settings = load_settings(apply_overrides(read_stack_file(args.stack), args.config), args.stack, today)
    except (UsageError, ConfigError, StackConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    estimate = cost.estimate(settings, today or datetime.now(timezone.utc).date())
    print(json.dumps(estimate) if args.json else "\n".join(lines(estimate)))
    return 0
