"""`elastic-training compare A B`: two stacks side by side, per hour, per day and per run, and what B
saves or adds over A (e.g. `compare dev spot`: the same pipeline on Spot workers).

A run's cost is the run rate (the stack's items during a run, infra/cli/cost.py) for the run's
length: `--run-minutes` (default: each stack's jobTimeoutMinutes, the most a run can last). With
`--a`/`--b KEY=VALUE` one side can differ from its stack file (`compare dev dev --b capacityType=SPOT`).

Exit status: 0 printed, 2 bad config or usage.
"""

from __future__ import annotations

import argparse

import json
import sys
from datetime import date, datetime, timezone
from typing import Any

from infra.cli import cost
from infra.cli.args import OneLineParser, UsageError
from infra.config import ConfigError, load_settings
from infra.config.stack_file import StackConfigError, apply_overrides, read_stack_file, stack_name


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="the first stack: its name, or its file stacks/Pulumi.<a>.yaml (required)")
    parser.add_argument("b", help="the second stack: its name, or its file stacks/Pulumi.<b>.yaml (required)")
    for side in ("a", "b"):
        parser.add_argument(
            f"--{side}",
            dest=f"config_{side}",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"override a config value of stack {side} (repeatable; default: none)",
        )
    parser.add_argument(
        "--run-minutes",
        type=_minutes,
        default=None,
        help="length of the run to price on both (default: each stack's jobTimeoutMinutes)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=False,
        help="print the comparison as one JSON object instead of lines (default: off)",
    )
    return parser


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 100000:
        # ArgumentTypeError's text is argparse's whole message; a ValueError's names this function instead.
        raise argparse.ArgumentTypeError(f"must be a number of minutes above 0 and at most 100000, got {text}")
    return value


def side(estimate: dict[str, Any], run_minutes: float | None) -> dict[str, Any]:
    minutes = run_minutes if run_minutes is not None else estimate["runMaxMinutes"] or 0
    per_run = round(estimate["runHourlyUsd"] * minutes / 60, 6)
    return {
        "hourlyUsd": estimate["hourlyUsd"],
        "dailyUsd": estimate["dailyUsd"],
        "runHourlyUsd": estimate["runHourlyUsd"],
        "runMinutes": minutes,
        "perRunUsd": per_run,
        "capacityType": estimate["capacityType"],
        "complete": estimate["note"].startswith("complete") or not estimate["items"],
        "note": estimate["note"],
    }


def compare(a: dict[str, Any], b: dict[str, Any], run_minutes: float | None = None) -> dict[str, Any]:
    """Two cost objects side by side and B - A for each figure (negative: B is cheaper)."""
    left, right = side(a, run_minutes), side(b, run_minutes)
    difference = {
        key: round(right[key] - left[key], 6) for key in ("hourlyUsd", "dailyUsd", "runHourlyUsd", "perRunUsd")
    }
    return {"a": left, "b": right, "difference": difference, "complete": left["complete"] and right["complete"]}


def _signed(value: float) -> str:
    return ("+" if value > 0 else "-" if value < 0 else "") + cost.usd(abs(value))


def lines(names: tuple[str, str], result: dict[str, Any]) -> list[str]:
    a, b, diff = result["a"], result["b"], result["difference"]
    out = [f"{'':22}{names[0]:>16}{names[1]:>16}{'B - A':>16}"]
    for label, key in (
        ("per hour, between runs", "hourlyUsd"),
        ("per day, between runs", "dailyUsd"),
        ("per hour, during a run", "runHourlyUsd"),
    ):
        out.append(f"{label:22}{cost.usd(a[key]):>16}{cost.usd(b[key]):>16}{_signed(diff[key]):>16}")
    run_label = (
        f"per run ({a['runMinutes']:g}/{b['runMinutes']:g} min)"
        if a["runMinutes"] != b["runMinutes"]
        else f"per run ({a['runMinutes']:g} min)"
    )
    out.append(
        f"{run_label:22}{cost.usd(a['perRunUsd']):>16}{cost.usd(b['perRunUsd']):>16}{_signed(diff['perRunUsd']):>16}"
    )
    out.append(f"workers: {names[0]} {a['capacityType']}, {names[1]} {b['capacityType']}")
    if not result["complete"]:
        out.append(f"lower bounds: {names[0]}: {a['note']}; {names[1]}: {b['note']}")
    return out


def main(argv: list[str] | None = None, today: date | None = None) -> int:
    today = today or datetime.now(timezone.utc).date()
    try:
        args = build_parser().parse_args(argv)
        estimates, names = [], []
        for argument, overrides in ((args.a, args.config_a), (args.b, args.config_b)):
            stack = stack_name(argument)
            names.append(stack)
            estimates.append(
                cost.estimate(load_settings(apply_overrides(read_stack_file(stack), overrides), stack, today), today)
            )
    except (UsageError, ConfigError, StackConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = compare(estimates[0], estimates[1], args.run_minutes)
    print(json.dumps(result) if args.json else "\n".join(lines((names[0], names[1]), result)))
    return 0
