"""python -m controller's own command line: a user's setup mistake is one line and exit 2 (issue 41)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_controller(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    }
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "controller", "--namespace", "training", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_outside_a_pod_without_a_kubeconfig_it_says_what_it_needs():
    result = run_controller()
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "python -m controller: not running in a pod (no service account to use): outside a pod pass "
        "--kubeconfig FILE or set KUBECONFIG"
    ]


def test_a_missing_kubeconfig_file_is_one_line(tmp_path):
    result = run_controller("--kubeconfig", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"python -m controller: --kubeconfig {tmp_path / 'nowhere'}: ")


def test_a_kubeconfig_that_is_not_yaml_is_one_line_naming_it(tmp_path):
    broken = tmp_path / "config"
    broken.write_text("clusters: [\n")
    result = run_controller(env_extra={"KUBECONFIG": str(broken)})
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert f"kubeconfig {broken}: " in result.stderr and "line 2" in result.stderr
