"""Argument parsing shared by the subcommands: a usage mistake is one line, exit status 2."""

from __future__ import annotations

import argparse
from pathlib import Path

# The repository root: where Pulumi.yaml, stacks/ and jobs/ are (the package is installed editable
# from a clone, docs/getting-started.md; a copy installed elsewhere has no stacks to read).
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class UsageError(Exception):
    """A command line that does not parse; `str()` is the one line printed."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see --help)")


def add_stack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="stack name (dev), or its file stacks/Pulumi.<stack>.yaml (required)")


def add_config_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, as `pulumi config set KEY VALUE` would (repeatable; default: "
                             "none, the stack file's values)")
