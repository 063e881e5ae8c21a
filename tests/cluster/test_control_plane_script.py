"""scripts/control-plane.sh as a person uses it: `up --stack local` brings up a control plane of the
pinned Kubernetes version with one node like kind's, `env` prints what a shell evals, and `down`
leaves no process behind."""

from __future__ import annotations

import json
import os
import subprocess

from cluster_nodes import tools_version
from control_plane import alive
from synth_support import REPO


def script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "control-plane.sh"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_up_env_down(tools_bin, tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(os.path.expanduser("~/.cache")))}
    state = tmp_path / "plane"
    up = script("up", "--stack", "local", "--dir", str(state), env=env)
    try:
        assert up.returncode == 0, up.stderr
        exports = script("env", "--dir", str(state), env=env)
        assert exports.stdout == f"export KUBECONFIG={state / 'kubeconfig'}\nexport PATH={tools_bin}:$PATH\n"
        shell = subprocess.run(
            ["bash", "-c", exports.stdout + "kubectl version -o json && kubectl get nodes -o json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert shell.returncode == 0, shell.stderr
        decoder = json.JSONDecoder()
        version, end = decoder.raw_decode(shell.stdout)
        nodes = json.loads(shell.stdout[end:])
        assert version["serverVersion"]["gitVersion"] == tools_version("KUBERNETES_VERSION")
        assert [n["metadata"]["name"] for n in nodes["items"]] == ["elastic-training-control-plane"]
        ready = {c["type"]: c["status"] for c in nodes["items"][0]["status"]["conditions"]}
        assert ready["Ready"] == "True"
    finally:
        pids = json.loads((state / "state.json").read_text())["pids"] if (state / "state.json").exists() else {}
        down = script("down", "--dir", str(state), env=env)
    assert down.returncode == 0, down.stderr
    left = subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True)
    assert left.stdout == "", f"processes left after down: {left.stdout}"
    assert pids and not any(alive(pid) for pid in pids.values())
