"""Every option a page names for one of our commands exists in that command's parser, wherever the
page names it: in a command line, or alone in a sentence about the command (issue 30, item 6: a page
sent `local`'s users to a `--run-dir` that `local` does not have). test_doc_commands.py checks the
whole command lines; this check also reads the options named in prose and those of scripts/.

An option belongs to the last command named before it: in its line of a code block (or the line it
continues); in prose, in the same paragraph or list item, a table's rows taking the command named in
the paragraph just before the table (or in its `generated:` marker); with none, on
docs/commands/<command>.md, to that page's command. (A whole section is too wide: pages name
torchrun in passing in sections about jobs.training.train's options.) The commands: `elastic-training <command>` (its parser, scripts/docs.py
command_parser), `jobs.<module>` (its build_parser; jobs.elastic.agent and jobs.elastic.torchrun take torchrun's
arguments), `torchrun` (torch.distributed.run's own parser), `scripts/<name>` (a Python script's
`--help`, a shell script's `case`/`[ ... = "--x" ]` patterns). An option after another tool's name
(pulumi, aws, kubectl, mkdocs, pytest, docker, ...) is that tool's, not checked here.
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from docs_support import ROOT, doc_files, docs_script

PAGES = [*doc_files(), ROOT / "CONTRIBUTING.md"]
MENTION = re.compile(
    r"<!-- generated: (?:command-(?P<generated_command>[\w-]+)|job-(?P<generated_job>\w+)) -->|"
    # where a command starts: a line, a code span or link text, after a shell separator (not `--name elastic-training`)
    r"(?:^|(?<=[`(])|(?<=&& )|(?<=\| )|(?<=; )|(?<=usage: ))(?:\.venv/bin/)?elastic-training(?![\w/:.-])(?: (?P<command>[a-z][\w-]*))?"
    r"|\bjobs\.(?P<job>[a-z_]+(?:\.[a-z_]+)*)\b"
    r"|\bscripts/(?P<script>[\w.-]+\.(?:sh|py))\b"
    r"|\b(?P<torchrun>torchrun)\b(?!\.py)"
    r"|\b(?P<other>pulumi|aws|kubectl|mkdocs|pytest|docker|kind|helm|gh|git|pip|checkov|kubernetes-validate|hadolint"
    r"|actionlint|eksctl|mutmut|benchmarks/[\w./-]+)\b",
    re.MULTILINE,
)
OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
UNIT_START = re.compile(r"^(?:\s*[-*] |\s*\d+\. |\|)")


@dataclass(frozen=True)
class Named:
    where: str  # page:line
    option: str
    owner: str  # "command:synth", "job:jobs.training.train", "torchrun", "script:setup.sh"; "" for none of ours


def units(text: str) -> list[tuple[int, str, bool]]:
    """(first line, text, is code) of each unit of a page."""
    found, current, start, fence = [], [], 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            if current:
                found.append((start, "\n".join(current), False))
                current = []
            fence = not fence
            continue
        if fence:
            found.append((number, line, True))
        elif not line.strip() or UNIT_START.match(line) or line.startswith("#"):
            if current:
                found.append((start, "\n".join(current), False))
            current, start = ([line], number) if line.strip() else ([], number)
        else:
            current, start = current + [line], start if current else number
    if current:
        found.append((start, "\n".join(current), False))
    return found


def owner_of(match: re.Match) -> str:
    if match["generated_command"]:
        return f"command:{match['generated_command']}"
    if match["generated_job"]:
        return f"job:jobs.{docs_script().JOBS[match['generated_job']]}"
    if match.group().endswith("elastic-training") or match["command"]:
        return f"command:{match['command'] or ''}"
    if match["job"]:
        return f"job:jobs.{match['job']}"
    if match["script"]:
        return f"script:{match['script']}"
    return "torchrun" if match["torchrun"] else ""


def page_owner(path: Path) -> str:
    from infra.cli.main import COMMANDS

    if path.parent.name == "commands" and path.stem in COMMANDS:
        return f"command:{path.stem}"
    return ""


def named_options(path: Path, root: Path = ROOT) -> list[Named]:
    named, owner, previous, table_owner, continued = [], "", "", "", False
    for line, text, code in units(path.read_text()):
        table = text.startswith("|") and not code
        if code:
            # a command line continued (`\` at its end, or argparse's wrapped usage), else its own
            start = owner if previous == "code" and continued else ""
        elif table:
            # a table's rows belong to the command named before the table, not to one a cell names
            table_owner = table_owner if previous == "table" else (owner or page_owner(path))
            start = table_owner
        else:
            start = page_owner(path)
        owner = start
        # in prose only the options inside code spans; a code block's line is all code
        spans = [(m.start(1), m.group(1)) for m in re.finditer(r"`([^`\n]+)`", text)] if not code else [(0, text)]
        events = [(m.start(), "mention", owner_of(m)) for m in MENTION.finditer(text)]
        events += [(offset + m.start(), "option", m.group()) for offset, span in spans for m in OPTION.finditer(span)]
        for _, kind, value in sorted(events, key=lambda event: (event[0], event[1] == "option")):
            if kind == "mention":
                owner = value
            elif not value.endswith("-"):  # `--no-…`: an abbreviation in prose
                named.append(Named(f"{path.relative_to(root)}:{line}", value, owner))
        previous = "code" if code else "table" if table else "prose"
        continued = code and (
            text.rstrip().endswith("\\") or text.startswith("usage:") or (continued and text[:1].isspace())
        )
    return named


def options_of(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


@cache
def script_options(name: str) -> set[str] | None:
    """What scripts/<name> accepts; None when it hands its arguments to another tool (test.sh: pytest)."""
    path = ROOT / "scripts" / name
    if path.suffix == ".py":
        help_text = subprocess.run(
            [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT, check=True
        ).stdout
        return set(OPTION.findall(help_text))
    text = path.read_text()
    if re.search(r"pytest\b.*\"\$@\"", text):
        return None
    return set(re.findall(r"(?:^\s*|\|)(--[\w-]+)(?=[|)])", text, re.MULTILINE)) | set(
        re.findall(r'= "(--[\w-]+)"', text)
    )


@cache
def accepted(owner: str) -> set[str] | None:
    """The options of one of our commands; None for a command that is not ours to check."""
    kind, _, name = owner.partition(":")
    if kind == "command":
        from infra.cli.main import COMMANDS

        if not name:  # `elastic-training --help`, `elastic-training COMMAND --help`
            return {"-h", "--help"}
        return options_of(docs_script().command_parser(name)) if name in COMMANDS else set()
    if kind == "job":
        if name in ("jobs.elastic.agent", "jobs.elastic.torchrun"):
            return accepted("torchrun")
        if not (ROOT / (name.replace(".", "/") + ".py")).is_file():
            return None  # jobs.<something> that is not a module: a name in prose
        module = importlib.import_module(name)
        return options_of(module.build_parser()) if hasattr(module, "build_parser") else set()
    if kind == "torchrun":
        from torch.distributed.run import get_args_parser

        return options_of(get_args_parser())
    if kind == "script":
        return script_options(name) if (ROOT / "scripts" / name).is_file() else None
    return None


NAMED = [item for path in PAGES for item in named_options(path)]


def test_the_reading_attributes_options_to_their_commands():
    """Not a hand-made list: options the pages are known to name, each to its command."""
    pairs = {(item.owner, item.option) for item in NAMED}
    assert {
        ("command:local", "--run-id"),
        ("command:synth", "--out"),
        ("script:setup.sh", "--gpu"),
        ("job:jobs.training.train", "--checkpoint-every-seconds"),
        ("torchrun", "--shutdown-timeout"),
    } <= pairs
    assert ("", "--strict") in pairs  # mkdocs's, not ours


def test_every_option_a_page_names_exists_in_its_commands_parser():
    wrong = [
        f"{item.where}: {item.option} is not an option of {item.owner.partition(':')[2] or item.owner} "
        f"(it has {', '.join(sorted(accepted(item.owner))) or 'none'})"
        for item in NAMED
        if accepted(item.owner) is not None and item.option not in accepted(item.owner)
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "text, page, expected",
    [
        (
            "Run `elastic-training local` again, or pass a new `--run-dir`.\n",
            "troubleshooting.md",
            Named("x:1", "--run-dir", "command:local"),
        ),
        ("- `--run-dir RUN` picks the run\n", "commands/local.md", Named("x:1", "--run-dir", "command:local")),
        (
            "`jobs.training.train` takes:\n\n| option | what |\n|---|---|\n| `--checkpoint-every-second` | x |\n",
            "runs.md",
            Named("x:5", "--checkpoint-every-second", "job:jobs.training.train"),
        ),
        ("```sh\nbash scripts/setup.sh --cpu-only\n```\n", "index.md", Named("x:2", "--cpu-only", "script:setup.sh")),
        ("torchrun waits for `--shutdown-timeout`, then `pulumi up --yes`.\n", "index.md", Named("x:1", "--yes", "")),
    ],
)
def test_the_check_itself(tmp_path, text, page, expected):
    """An option of another command, or one a command lacks, is found and given to the right command."""
    path = tmp_path / page
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    found = [
        Named("x:" + item.where.rsplit(":", 1)[1], item.option, item.owner) for item in named_options(path, tmp_path)
    ]
    assert found[-1] == expected
    if expected.owner:
        assert expected.option not in accepted(expected.owner)
