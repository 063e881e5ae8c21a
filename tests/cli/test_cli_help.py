"""Every option of every command line (synth, preflight, the jobs) says what it does and its default,
and the jobs table of docs/commands/jobs.md agrees with jobs.results.evaluate about --min-accuracy."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def parsers() -> dict[str, argparse.ArgumentParser]:
    from infra.cli import synth
    from infra.cli import preflight as preflight
    from jobs.results import evaluate
    from jobs.data import prepare
    from jobs.training import train

    return {
        "infra.cli.synth": synth.build_parser(),
        "infra.cli.preflight": preflight.build_parser(),
        "jobs.data.prepare": prepare.build_parser(),
        "jobs.training.train": train.build_parser(),
        "jobs.results.evaluate": evaluate.build_parser(),
    }


@pytest.mark.parametrize(
    "name",
    ["infra.cli.synth", "infra.cli.preflight", "jobs.data.prepare", "jobs.training.train", "jobs.results.evaluate"],
)
def test_every_option_has_help_with_its_default(name):
    parser = parsers()[name]
    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._HelpAction):
            continue
        text = (action.help or "") % {"default": action.default}
        label = "/".join(action.option_strings) or action.dest
        assert text, f"{name} {label}: no help text"
        assert re.search(r"\((default|required)\b|\(required\)|default: ", text), (
            f"{name} {label}: the help must say its default (or that it is required): {text!r}"
        )
        if action.default not in (None, False, [], argparse.SUPPRESS) and not action.required:
            assert str(action.default) in text, f"{name} {label}: help does not show the default {action.default!r}"


def test_the_jobs_page_and_evaluate_agree_on_min_accuracy():
    from jobs.results import evaluate

    assert evaluate.build_parser().get_default("min_accuracy") is None
    row = next(
        line
        for line in (ROOT / "docs" / "commands" / "jobs.md").read_text().splitlines()
        if line.startswith("| evaluate |")
    )
    assert "[--min-accuracy F]" in row and "no gate by default" in row and "[--min-accuracy 0.7]" not in row
