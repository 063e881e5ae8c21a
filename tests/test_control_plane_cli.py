"""scripts/control-plane.sh refuses bad input with one line and exit status 2, before it builds or
starts anything (the control plane itself is tested in tests/cluster/)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def control_plane(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "control-plane.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )


@pytest.mark.parametrize(
    "args, line",
    [
        (("up", "--stack", "nosuch"), "control-plane: no stack 'nosuch'; the stacks are: dev gpu local smoke spot"),
        (
            ("frob",),
            "control-plane: unknown command 'frob'; usage: control-plane.sh up [--stack NAME] [--run-pods] | env | "
            "down | lose-node NODE, each with [--name INSTANCE | --dir DIR]",
        ),
        (("up", "--name", "a b"), "control-plane: --name 'a b' may use only letters, digits, '.', '_' and '-'"),
        (
            ("down", "--color"),
            "control-plane: unknown option --color; usage: control-plane.sh up [--stack NAME] [--run-pods] | "
            "env | down | lose-node NODE, each with [--name INSTANCE | --dir DIR]",
        ),
        (
            ("lose-node",),
            "control-plane: lose-node needs a node name; usage: control-plane.sh up [--stack NAME] [--run-pods] | "
            "env | down | lose-node NODE, each with [--name INSTANCE | --dir DIR]",
        ),
    ],
)
def test_bad_input_gets_one_line_and_status_2(args, line, tmp_path):
    result = control_plane(*args, home=tmp_path)
    assert (result.returncode, result.stderr, result.stdout) == (2, line + "\n", "")
    assert not (tmp_path / ".cache").exists(), "nothing may be written for bad input"
