"""Every command line the README and the docs show runs as shown: `elastic-training` and job command
lines parse with the command's own parser (torchrun's with torch's), the options a synopsis names
exist, a stack named is a shipped one, and every scripts/ file named is there. (The config values
they set are checked against the Pulumi CLI's rules in tests/config/test_pulumi_project.py.)"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from docs_support import ROOT, doc_files, docs_script

SEPARATORS = ("&&", "||", ";", "|")


@dataclass(frozen=True)
class Shown:
    where: str
    words: tuple[str, ...]  # from the command's own name on, up to the end of that command
    runnable: bool  # a whole command line to paste (`.venv/bin/...`), not a mention or synopsis in prose


def shell_texts(path: Path) -> list[str]:
    """Lines of ```sh / ```bash blocks, and inline code spans outside any block."""
    text = path.read_text()
    blocks = re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.DOTALL)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    return [line for block in blocks for line in block.splitlines()] + [s.replace("\\|", "|") for s in spans]


def shown(pattern: str) -> list[Shown]:
    """Each place a command matching `pattern` (a regex for its first word) is shown."""
    found = []
    for path in doc_files():
        for line in shell_texts(path):
            for start in re.finditer(rf"(?:\.venv/bin/)?\b(?:{pattern})(?=\s|$)", line):
                try:
                    words = shlex.split(line[start.start() :], comments=True)
                except ValueError:
                    continue  # prose with an apostrophe, not a command
                words = words[: next((i for i, w in enumerate(words) if w in SEPARATORS), len(words))]
                found.append(Shown(str(path.relative_to(ROOT)), tuple(words), words[0].startswith(".venv/bin/")))
    return found


def parses(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
    from infra.cli.args import UsageError as CommandUsageError
    from jobs.cli import UsageError as JobUsageError

    try:
        return parser.parse_args(args)
    except SystemExit as exit_:  # plain argparse (synth, torchrun) exits; the project's parsers raise UsageError
        raise AssertionError(f"{parser.prog} {' '.join(args)}: refused (exit {exit_.code})") from None
    except (CommandUsageError, JobUsageError) as error:
        raise AssertionError(f"{parser.prog} {' '.join(args)}: refused: {error}") from None


def options_of(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def stacks() -> set[str]:
    return {p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml")}


COMMAND_LINES = shown("elastic-training")


def test_the_extraction_finds_the_commands_the_docs_show():
    """Not a hand-made list: the getting-started commands must be among what is found."""
    runnable = {" ".join(item.words) for item in COMMAND_LINES if item.runnable}
    assert {
        ".venv/bin/elastic-training up dev",
        ".venv/bin/elastic-training preflight dev",
        ".venv/bin/elastic-training local",
    } <= runnable
    assert len(JOB_LINES) >= 5 and any(item.words[0].endswith("torchrun") for item in JOB_LINES)


@pytest.mark.parametrize("item", COMMAND_LINES, ids=lambda item: f"{item.where}:{' '.join(item.words[:3])}")
def test_each_elastic_training_command_shown_parses(item):
    from infra.cli.main import COMMANDS

    words = list(item.words[1:])
    if not words or words[0] in ("-h", "--help", "COMMAND"):
        return  # the command itself, named in prose
    assert words[0] in COMMANDS, (
        f"{item.where}: `{' '.join(item.words)}`: no such command (commands: {', '.join(COMMANDS)})"
    )
    parser = docs_script().command_parser(words[0])
    args = words[1:]
    unknown = {w.split("=")[0] for w in args if w.startswith("-")} - options_of(parser)
    assert not unknown, f"{item.where}: `{' '.join(item.words)}`: {sorted(unknown)} are not options of {words[0]}"
    if item.runnable:
        namespace = parses(parser, args)
        if getattr(namespace, "stack", None) is not None:
            assert namespace.stack in stacks(), f"{item.where}: `{' '.join(item.words)}`: no stack {namespace.stack}"


JOB_LINES = shown(r"python -m jobs\.\w+|torchrun")


def job_parser(module: str) -> argparse.ArgumentParser:
    return importlib.import_module(module).build_parser()


@pytest.mark.parametrize("item", JOB_LINES, ids=lambda item: f"{item.where}:{' '.join(item.words[:3])}")
def test_each_job_command_shown_parses(item):
    words = list(item.words)
    if words[0].endswith("torchrun"):
        from torch.distributed.run import get_args_parser

        if "-m" not in words:
            return  # torchrun named in prose, or its arguments as a placeholder
        split = words.index("-m")
        torchrun_args = words[1:split]
        if item.runnable:  # torchrun's own parser, as `torchrun` itself runs it
            parses(get_args_parser(), [*torchrun_args, "-m", words[split + 1], *words[split + 2 :]])
        module, args = words[split + 1], words[split + 2 :]
    else:
        module, args = words[2], words[3:]
    assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), f"{item.where}: no module {module}"
    if module in ("jobs.elastic.agent", "jobs.elastic.torchrun"):  # take torchrun's arguments, none of their own
        return
    parser = job_parser(module)
    named = {w.split("=")[0].lstrip("[") for w in args if w.lstrip("[").startswith("--")}
    assert not named - options_of(parser), (
        f"{item.where}: `{' '.join(words)}`: {sorted(named - options_of(parser))} are not options of {module}"
    )
    if item.runnable:
        parses(parser, args)


def test_every_script_named_exists():
    named = set()
    for path in doc_files():
        named |= {(path.name, name) for name in re.findall(r"\bscripts/([\w.-]+\.(?:sh|py))", path.read_text())}
    assert {name for _, name in named} >= {"setup.sh", "test.sh"}
    missing = sorted(f"{where}: scripts/{name}" for where, name in named if not (ROOT / "scripts" / name).is_file())
    assert not missing, missing


def test_a_wrong_option_in_a_shown_command_is_caught():
    """The check itself: a misspelt option and a stack that does not exist are refused."""
    with pytest.raises(AssertionError, match="are not options of synth"):
        test_each_elastic_training_command_shown_parses(
            Shown("x.md", (".venv/bin/elastic-training", "synth", "dev", "--outdir", "o"), True)
        )
    with pytest.raises(AssertionError, match="no stack prod"):
        test_each_elastic_training_command_shown_parses(
            Shown("x.md", (".venv/bin/elastic-training", "preflight", "prod"), True)
        )
    with pytest.raises(AssertionError, match="refused"):
        test_each_job_command_shown_parses(
            Shown("x.md", (".venv/bin/python", "-m", "jobs.training.train", "--data", "d"), True)
        )
    with pytest.raises(AssertionError, match="are not options of jobs.results.evaluate"):
        test_each_job_command_shown_parses(
            Shown("x.md", ("python", "-m", "jobs.results.evaluate", "[--gate", "F]"), False)
        )
