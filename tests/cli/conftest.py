"""Fixtures shared by the `local` command's tests."""

from __future__ import annotations

import pytest

from infra.cli import local


@pytest.fixture
def recorded():
    """`local`'s steps recorded, not run: (the commands, a step runner that records each and succeeds)."""
    commands: list[list[str]] = []

    def run(command, cwd, env, log):
        commands.append(command)
        return local.StepResult(0, [], "")

    return commands, run
