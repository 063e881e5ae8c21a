"""scripts/up.sh runs preflight before `pulumi up` and stops on a failure (issue 9).

The script is run for real with bash, in a copy of the repository layout whose `scripts/setup.sh`,
`.venv/bin/python` and `pulumi` are stand-ins that record what they were asked to do."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("preflight_exit, pulumi_runs", [(1, False), (0, True)], ids=["check-failed", "all-passed"])
def test_up_runs_preflight_first_and_stops_on_failure(tmp_path, preflight_exit, pulumi_runs):
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    log = tmp_path / "calls.log"
    executable(tmp_path / "scripts" / "setup.sh", f'echo "setup" >> "{log}"\n')
    executable(tmp_path / ".venv" / "bin" / "python",
               f'echo "python $*" >> "{log}"\n'
               f'case "$*" in *infra.preflight*) exit {preflight_exit} ;; esac\nexit 0\n')
    executable(tmp_path / "bin" / "pulumi", f'echo "pulumi $*" >> "{log}"\n')
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "scripts/up.sh", "dev"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines()
    assert calls[:3] == ["setup", "python -m infra.synth dev --out .synth/dev", "python -m infra.preflight dev"]
    if pulumi_runs:
        assert result.returncode == 0, result.stderr
        assert calls[3:] == ["pulumi stack select --create dev", "pulumi up --stack dev"]
    else:
        assert result.returncode == 1 and not any(c.startswith("pulumi") for c in calls)
        assert "preflight failed" in result.stderr
