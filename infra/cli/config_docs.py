"""The configuration table of the docs, made from CONFIG_KEYS so the two cannot drift (a test compares)."""

from __future__ import annotations

import json
import sys

from infra.cli.args import OneLineParser, UsageError
from infra.config import CONFIG_KEYS, PROJECT


def config_table() -> str:
    rows = [
        "| key | type | default | what it sets |",
        "|---|---|---|---|",
        "| `aws:region` | string | (required for target eks) | AWS region of the stack; target existing needs none. |",
    ]
    for key in CONFIG_KEYS:
        default = (
            json.dumps(key.default)
            if not isinstance(key.default, str)
            else (f"`{key.default}`" if key.default else '`""`')
        )
        if not isinstance(key.default, str):
            default = f"`{default}`"
        rows.append(f"| `{PROJECT}:{key.name}` | {key.type} | {default} | {key.description} |")
    return "\n".join(rows) + "\n"


def build_parser() -> OneLineParser:
    return OneLineParser(
        prog="elastic-training config-table",
        description="print the configuration table (Markdown) of docs/configuration.md",
    )


def main(argv: list[str] | None = None) -> int:
    """`elastic-training config-table`: print the table (Markdown) to paste into the docs."""
    try:
        build_parser().parse_args(argv)
    except UsageError as error:
        print(f"config-table: {error}", file=sys.stderr)
        return 2
    print(config_table(), end="")
    return 0
