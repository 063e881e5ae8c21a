"""What `elastic-training preflight` prints: the checks as a table or Markdown, and the stack's cost."""

from __future__ import annotations

from typing import Any

from infra.cli import cost
from infra.cli.preflight.checks import FAIL, Check
from infra.config import PROJECT, Settings


def where(settings: Settings) -> str:
    """Where the stack runs, for a header: its region, or, for target existing (no aws:region), what
    stands in for one, never an empty region."""
    return (
        f"in {settings.region}"
        if settings.region
        else f"on an existing cluster (target {settings.target}: no AWS region)"
    )


def header(settings: Settings) -> str:
    return f"preflight {PROJECT}/{settings.stack} {where(settings)}"


def verdict(checks: list[Check]) -> str:
    """The last line of every report but --json's (which has the exit status): failed, not checked, or passed."""
    unchecked = [c.id for c in checks if not c.checked]
    if any(c.status == FAIL for c in checks):
        return "FAILED: fix the checks marked FAIL before `pulumi up`"
    if unchecked:
        return (
            f"NOT CHECKED: {len(unchecked)} of {len(checks)} checks could not run ({', '.join(unchecked)}); "
            "nothing failed, but that is not a pass: rerun when AWS answers"
        )
    return "every check ran and nothing failed"


def table(checks: list[Check]) -> list[str]:
    width = max(len(c.id) for c in checks)
    lines = []
    for check in checks:
        lines.append(f"{check.status.upper():4}  {check.id:{width}}  {check.message}")
        if check.fix:
            lines.append(f"{'':4}  {'':{width}}  fix: {check.fix}")
    return lines


def markdown(settings: Settings, checks: list[Check], estimate: dict[str, Any], notes: list[str]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"### preflight of `{settings.stack}` {where(settings)}", ""]
    lines += [f"Warning: {cell(w)}" for w in settings.warnings] + ([""] if settings.warnings else [])
    lines += ["| check | status | message |", "|---|---|---|"]
    lines += [f"| `{c.id}` | {c.status.upper()} | {cell(c.as_json()['message'])} |" for c in checks]
    lines += [
        "",
        f"**Cost:** {cell(cost.summary(estimate))} ({cell(estimate['note'])})",
        "",
        "| item | unit price | per hour | source |",
        "|---|---|---|---|",
    ]
    for item in estimate["items"]:
        what, unit, hourly = cost.item_line(item)
        lines.append(f"| {cell(what)} | {unit} | {hourly} | {cell(item['source'])} |")
    lines += ["", f"Prices from: {cell(estimate['pricesFrom'])}"] + [f"Note: {cell(n)}" for n in notes]
    lines += ["", f"**preflight: {cell(verdict(checks))}**"]
    return "\n".join(lines) + "\n"
