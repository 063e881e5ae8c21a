"""scripts/setup.sh says what it is doing (issue 39: minutes of silence while about 3 GB came down): a line per
step; on a terminal pip's own lines and progress bar; in a log (not a terminal) a line per large download and
a "still downloading: N MB so far" line every 30 s, through scripts/pip_progress.py; --quiet keeps the step
lines and the 30-second lines.

setup.sh runs here from a copy of its scripts, with a stand-in .venv/bin/python that records how it was
called and, as pip, prints what pip 26.3 prints at its default verbosity with `--progress-bar raw`
("Downloading NAME (SIZE)", "Progress CURRENT of TOTAL"; pip/_internal/network/download.py,
pip/_internal/cli/progress_bars.py).
"""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from synth_support import REPO

sys.path.insert(0, str(REPO / "scripts"))
import pip_progress  # noqa: E402

FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
case "$1" in
  --version) echo "Python 3.11.99" ;;
  -c) exit 1 ;;   # install-torch.sh asks which torch is installed: none
  -) exit 0 ;;    # install-torch.sh asks whether PyTorch's CPU index answers: it does
  -m)
    if [ "$4" = --help ]; then  # as pip 26.3 wraps it; OLD_PIP: as pip 23.2.1, without raw
      echo "  --progress-bar <progress_bar>"
      if [ -n "${OLD_PIP:-}" ]; then echo "              Specify whether the progress bar should be used [on, off] (default: on)"
      else echo "              will suppress all progress bars. [auto, on,"; echo "              off, raw] (default: auto)"; fi
      echo "  --resume-retries <attempts>"; exit 0
    fi
    case " $* " in *" --quiet "*) exit 0 ;; esac  # pip --quiet logs warnings and errors only
    echo "Collecting torch==2.13.0"
    echo "  Downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (900.1 MB)"
    echo "Progress 0 of 900100000"
    echo "Progress 450000000 of 900100000"
    echo "Progress 900100000 of 900100000"
    echo "  Downloading filelock-3.20.0-py3-none-any.whl (16 kB)"
    echo "Successfully installed torch-2.13.0"
    ;;
  scripts/mermaid.py) echo "mermaid: 11.17.2 in .cache/mermaid/11.17.2" ;;
esac
"""

STEPS = [
    "setup: [1/5] using .venv (Python 3.11.99)",
    "setup: [2/5] upgrading pip",
    "setup: [3/5] installing torch",
    "setup: [4/5] installing the project and its extras",
    "setup: [5/5] fetching mermaid for the docs site",
]


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "scripts").mkdir()
    for name in ("setup.sh", "install-torch.sh", "pip_progress.py"):
        (tmp_path / "scripts" / name).write_text((REPO / "scripts" / name).read_text())
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    stub = tmp_path / ".venv" / "bin" / "python"
    stub.write_text(FAKE_PYTHON)
    stub.chmod(0o755)
    return tmp_path


def environment(checkout: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(checkout),
        "PYTHON": sys.executable,
        "STUB_LOG": str(checkout / "calls.log"),
        "SETUP_PROGRESS_EVERY_S": "0",
    }


def pip_calls(checkout: Path) -> tuple[str, list[str]]:
    """(the call that upgrades pip, the installs after it)."""
    calls = [
        call
        for call in (checkout / "calls.log").read_text().splitlines()
        if call.startswith("-m pip install") and "--help" not in call
    ]
    (upgrade,) = [call for call in calls if call.endswith("--upgrade pip")]
    return upgrade, [call for call in calls if call != upgrade]


def assert_steps_in_order(lines: list[str]) -> None:
    found = [next(i for i, line in enumerate(lines) if line.startswith(step)) for step in STEPS]
    assert found == sorted(found), lines
    assert lines[-1].startswith("setup: .venv ready (Python 3.11.99) in "), lines


def test_in_a_log_each_step_and_large_download_is_a_line_and_pip_chatter_is_not(checkout):
    result = subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(checkout),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert_steps_in_order(lines)
    assert "setup:   downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (900.1 MB)" in lines
    assert "setup:   still downloading: 450 MB so far (0 s)" in lines
    assert not [
        line for line in lines if "filelock" in line or line.startswith(("Collecting", "Progress", "Successfully"))
    ]
    upgrade, calls = pip_calls(checkout)
    # The venv's own pip may not know raw: the upgrade is quiet; the pip it brings shows its progress raw.
    assert "--quiet" in upgrade and "--progress-bar" not in upgrade
    assert len(calls) >= 2 and all("--progress-bar raw" in call and "--quiet" not in call for call in calls), calls


def test_a_pip_without_the_raw_bar_installs_quietly_as_before(checkout):
    result = subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment(checkout), "OLD_PIP": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert_steps_in_order(result.stdout.splitlines())
    upgrade, calls = pip_calls(checkout)
    assert calls and all("--quiet" in call and "--progress-bar" not in call for call in calls), calls


def test_quiet_keeps_the_step_lines_and_the_periodic_line(checkout):
    result = subprocess.run(
        ["bash", "scripts/setup.sh", "--quiet"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(checkout),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert_steps_in_order(lines)
    assert "setup:   still downloading: 900 MB so far (0 s)" in lines
    assert not [line for line in lines if "downloading torch" in line]


def test_on_a_terminal_pip_shows_its_own_progress(checkout):
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        ["bash", "scripts/setup.sh"], cwd=checkout, stdout=terminal, stderr=terminal, env=environment(checkout)
    )
    os.close(terminal)
    output = io.BytesIO()
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal's other end closed: setup.sh is done
            break
        if not chunk:
            break
        output.write(chunk)
    assert process.wait(timeout=120) == 0
    lines = output.getvalue().decode().replace("\r\n", "\n").splitlines()
    assert_steps_in_order(lines)
    assert "Collecting torch==2.13.0" in lines  # pip's own output, as pip writes it
    upgrade, calls = pip_calls(checkout)
    assert "--quiet" not in upgrade
    assert len(calls) >= 2 and all("--progress-bar on" in call and "--quiet" not in call for call in calls), calls


def test_the_periodic_line_comes_at_most_every_interval_and_counts_every_download():
    now = [0.0]
    pip = [
        "  Downloading a.whl (400.0 MB)",
        "Progress 0 of 400000000",
        "Progress 200000000 of 400000000",
        "Progress 400000000 of 400000000",
        "  Downloading b.whl (2.0 MB)",
        "Progress 2000000 of 2000000",
        "  Resuming download c.whl (300.0 MB/500.0 MB)",
        "Progress 300000000 of 500000000",
        "Progress 500000000 of 500000000",
        "install-torch: torch 2.13.0 is installed",
        "Collecting d",
    ]
    times = iter([0, 10, 31, 40, 45, 70, 100])  # the start, then each Progress line

    def clock() -> float:
        now[0] = next(times)
        return now[0]

    out = io.StringIO()
    pip_progress.report(pip, out, every_s=30, clock=clock)
    assert out.getvalue().splitlines() == [
        "setup:   downloading a.whl (400.0 MB)",
        "setup:   still downloading: 200 MB so far (31 s)",  # the Progress lines at 10 s and 40 s came too soon
        "setup:   downloading c.whl (500.0 MB)",  # b.whl is under 10 MB
        "setup:   still downloading: 402 MB so far (70 s)",  # c's 300 MB came before this run
        "setup:   still downloading: 602 MB so far (100 s)",
        "install-torch: torch 2.13.0 is installed",
    ]
