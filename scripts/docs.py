"""The generated parts of README.md and docs/: made from the code, so the docs cannot drift from it.

    .venv/bin/python scripts/docs.py           rewrite every generated block in place
    .venv/bin/python scripts/docs.py --check   change nothing; exit 1 naming each block that differs

A generated block is the text between `<!-- generated: NAME -->` and `<!-- end: NAME -->` in one file;
everything around it is written by hand. tests/docs/test_generated.py runs the check, so a new config
key, command option, suppression, equivalent mutant or workflow without its doc fails the suite.
Run this after a merge that touched any of them, and commit what it rewrote.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere: infra/ and jobs/ of this checkout
    sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Block:
    name: str
    file: str  # relative to the repository root
    render: Callable[[], str]


# --- what the blocks hold ------------------------------------------------------------------------


def config_table() -> str:
    from infra.cli.config_docs import config_table as table

    return table()


def kubernetes_versions() -> str:
    from infra import versions

    rows = [
        "| version | extended support (control plane $0.60/hour instead of $0.10/hour) from | refused from |",
        "|---|---|---|",
    ]
    for version in versions.SUPPORTED_KUBERNETES_VERSIONS:
        support = versions.EKS_SUPPORT[version]
        label = f"{version} (default)" if version == versions.DEFAULT_KUBERNETES_VERSION else version
        rows.append(f"| {label} | {support.end_of_standard.isoformat()} | {support.end_of_extended.isoformat()} |")
    return "\n".join(rows) + "\n"


def suppressions() -> str:
    from infra.specs.suppressions import markdown_table

    return markdown_table()


def mutation_equivalents() -> str:
    equivalent = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutation"]["equivalent"]
    return "".join(f"- `{name}`: {reason}\n" for name, reason in equivalent.items())


def _triggers(on) -> str:
    if isinstance(on, str):
        on = {on: None}
    if isinstance(on, list):
        on = dict.fromkeys(on)
    said = []
    for event, spec in on.items():
        spec = spec or {}
        if event == "schedule":
            said.append("schedule (" + ", ".join(f"`{entry['cron']}`" for entry in spec) + " UTC)")
        elif isinstance(spec, dict) and spec.get("paths"):
            said.append(f"{event} (paths: " + ", ".join(f"`{p}`" for p in spec["paths"]) + ")")
        else:
            said.append(event)
    return "; ".join(said)


def _permissions(workflow: dict) -> str:
    granted = {}
    for job in (workflow.get("jobs") or {}).values():
        scopes = job.get("permissions", workflow.get("permissions"))
        for scope, level in (scopes or {}).items():
            granted.setdefault(scope, set()).add(level)
    return ", ".join(f"`{scope}: {'/'.join(sorted(levels))}`" for scope, levels in sorted(granted.items())) or "none"


def workflows() -> str:
    rows = ["| workflow | name | runs on | permissions of its jobs |", "|---|---|---|---|"]
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        workflow = yaml.safe_load(path.read_text())
        on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on:` key as True
        rows.append(
            f"| [`{path.name}`](#{anchor(path.name)}) | {workflow['name']} | {_triggers(on)} | {_permissions(workflow)} |"
        )
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    """Help text as one table cell: `|` would end the cell, `<stack>` would be read as an HTML tag."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def anchor(heading: str) -> str:
    """The id MkDocs' toc extension gives a heading (its default slugify, for plain ASCII text)."""
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def parser_reference(parser: argparse.ArgumentParser) -> str:
    """Usage and one row per argument, from the parser itself (what --help prints, as Markdown)."""
    # A fixed width: argparse otherwise wraps at the terminal's width ($COLUMNS). argparse has no
    # public way to expand %(default)s or format one argument, hence its formatter's methods.
    formatter = parser.formatter_class(prog=parser.prog, width=100)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    rows = ["```text", formatter.format_help().strip(), "```", "", "| argument | what it does |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            metavar = (
                ""
                if action.nargs == 0
                else " " + formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
            )
            label = ", ".join(f"`{option}{metavar}`" for option in action.option_strings)
        else:
            label = f"`{formatter._format_args(action, formatter._get_default_metavar_for_positional(action))}`"
        rows.append(f"| {label} | {_cell(formatter._expand_help(action) if action.help else '')} |")
    return "\n".join(rows) + "\n"


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of `elastic-training NAME`: its module's build_parser (deploy's takes the command)."""
    from infra.cli.main import COMMANDS

    module = importlib.import_module(COMMANDS[name][0].__module__)
    build = module.build_parser
    return build(name) if inspect.signature(build).parameters else build()


def command_reference(name: str) -> str:
    from infra.cli.main import COMMANDS

    _, summary, codes = COMMANDS[name]
    statuses = "\n".join(f"- {status.strip()}" for status in re.split(r",\s*(?=\d|a failing)", codes))
    return (
        f"{summary[0].upper()}{summary[1:]}.\n\n{parser_reference(command_parser(name))}\n"
        f"**Exit status**\n\n{statuses}\n"
    )


# The jobs' reference blocks in docs/commands/jobs.md, by block name: the module under jobs/.
JOBS = {
    "prepare": "data.prepare",
    "train": "training.train",
    "evaluate": "results.evaluate",
    "export": "results.export",
    "store_server": "elastic.store_server",
    "gate": "results.gate",
}


def job_reference(name: str) -> str:
    import importlib

    return parser_reference(importlib.import_module(f"jobs.{JOBS[name]}").build_parser())


def blocks() -> list[Block]:
    from infra.cli.main import COMMANDS

    found = [
        Block("config-table", "docs/configuration.md", config_table),
        Block("kubernetes-versions", "docs/configuration.md", kubernetes_versions),
        Block("suppressions", "docs/security.md", suppressions),
        Block("mutation-equivalents", "docs/development.md", mutation_equivalents),
        Block("workflows", "docs/ci.md", workflows),
    ]
    found += [
        Block(f"command-{name}", f"docs/commands/{name}.md", lambda name=name: command_reference(name))
        for name in COMMANDS
    ]
    found += [Block(f"job-{name}", "docs/commands/jobs.md", lambda name=name: job_reference(name)) for name in JOBS]
    return found


# --- the stack tables: hand-written rows whose cost cells come from the cost code ----------------

STACK_TABLES = ("README.md", "docs/costs.md")  # each has a `## Stacks` section with one row per stack


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def cost_cells(stack: str) -> tuple[str, ...]:
    """The cost cells of a stack's row (per hour, per day, a run at most): what `synth` writes to cost.json today."""
    from datetime import datetime, timezone

    from infra.cli import cost
    from infra.config import load_settings
    from infra.config.stack_file import read_stack_file

    settings = load_settings(read_stack_file(stack, ROOT / "stacks"), stack)
    return cost.readme_cells(cost.estimate(settings, datetime.now(timezone.utc).date()))


def stack_rows(text: str) -> tuple[int, int, dict[str, int]]:
    """(start, end) of the `## Stacks` section and the line index of each stack's row in it."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == "## Stacks")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    rows = {}
    for i in range(start, end):
        match = re.match(r"\| `([a-z0-9-]+)` \|", lines[i])
        if match:
            rows[match.group(1)] = i
    return start, end, rows


def rewrite_stack_table(text: str, cells: dict[str, tuple[str, ...]]) -> tuple[str, list[str]]:
    """The text with each row's last cells (as many as the cost cells) replaced; problems: stacks without a
    row, rows without a stack."""
    lines = text.splitlines(keepends=True)
    _, _, rows = stack_rows(text)
    problems = [f"no row for stack `{s}` in its Stacks table" for s in cells if s not in rows]
    problems += [f"a row for `{s}`, which has no stacks/Pulumi.{s}.yaml" for s in rows if s not in cells]
    for stack, i in rows.items():
        if stack in cells:
            parts = lines[i].rstrip("\n").split(" | ")
            count = len(cells[stack])
            lines[i] = " | ".join(parts[:-count] + list(cells[stack][:-1]) + [cells[stack][-1] + " |"]) + "\n"
    return "".join(lines), problems


# --- reading and writing blocks ------------------------------------------------------------------


def markers(name: str) -> tuple[str, str]:
    return f"<!-- generated: {name} -->\n", f"<!-- end: {name} -->"


def current(text: str, name: str) -> str | None:
    """The block's text in a file, None when its markers are not there (once each, in order)."""
    begin, end = markers(name)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        return None
    return text[text.index(begin) + len(begin) : text.index(end)]


def replaced(text: str, name: str, body: str) -> str:
    begin, end = markers(name)
    return text[: text.index(begin) + len(begin)] + body + text[text.index(end) :]


def stale(root: Path = ROOT) -> list[str]:
    """One line per block that is missing or differs from what the code makes."""
    problems = []
    for block in blocks():
        path = root / block.file
        text = path.read_text() if path.exists() else ""
        found = current(text, block.name)
        if found is None:
            problems.append(
                f"{block.file}: no block `{block.name}` (add the two marker lines {markers(block.name)[0].strip()} "
                f"and {markers(block.name)[1]}, then run scripts/docs.py)"
            )
        elif found != block.render():
            problems.append(f"{block.file}: block `{block.name}` is stale (run scripts/docs.py)")
    cells = {stack: cost_cells(stack) for stack in stack_names()}
    for name in STACK_TABLES:
        text = (root / name).read_text()
        new, missing = rewrite_stack_table(text, cells)
        problems += [f"{name}: {problem}" for problem in missing]
        if new != text:
            problems.append(f"{name}: the Stacks table's cost cells are stale (run scripts/docs.py)")
    return problems


def write(root: Path = ROOT) -> list[str]:
    """Rewrite every block whose markers are there; the problems left (missing markers)."""
    for block in blocks():
        path = root / block.file
        text = path.read_text() if path.exists() else ""
        if current(text, block.name) is not None:
            new = replaced(text, block.name, block.render())
            if new != text:
                path.write_text(new)
                print(f"docs: rewrote {block.file} ({block.name})")
    cells = {stack: cost_cells(stack) for stack in stack_names()}
    for name in STACK_TABLES:
        text = (root / name).read_text()
        new, _ = rewrite_stack_table(text, cells)
        if new != text:
            (root / name).write_text(new)
            print(f"docs: rewrote the cost cells of {name}")
    return stale(root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/docs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a block differs (default: off)"
    )
    args = parser.parse_args(argv)
    problems = stale() if args.check else write()
    for problem in problems:
        print(f"docs: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
