"""Argument parsing shared by the subcommands: a usage mistake is one line, exit status 2."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Callable

# The repository root: where Pulumi.yaml, stacks/ and jobs/ are (the package is installed editable
# from a clone, docs/getting-started.md; a copy installed elsewhere has no stacks to read).
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class UsageError(Exception):
    """A command line that does not parse; `str()` is the one line printed."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see --help)")


def whole_number(option: str, low: int, high: int) -> Callable[[str], int]:
    """An option's `type=`: a whole number from low to high, else one line in the project's words (a
    UsageError passes through argparse, which words its own errors "argument --epochs: invalid int value")."""

    def parse(text: str) -> int:
        if re.fullmatch(r"[0-9]+", text.strip()) and low <= int(text) <= high:
            return int(text)
        shown = text if re.fullmatch(r"-?[0-9]+", text) else repr(text)
        raise UsageError(f"{option} {shown} is invalid: must be a whole number from {low} to {high}")

    return parse


def add_stack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="stack name (dev), or its file stacks/Pulumi.<stack>.yaml (required)")


def add_config_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, as `pulumi config set KEY VALUE` would (repeatable; default: "
        "none, the stack file's values)",
    )
