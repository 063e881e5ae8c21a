"""The cluster tier: the stacks' Kubernetes half against a real control plane, built from source.

One control plane for the whole session (scripts/control_plane.py: etcd, kube-apiserver with RBAC and
EKS's admission plugins, kube-controller-manager, kube-scheduler, kwok), from the binaries
scripts/build-tools.sh builds. The tier never skips: missing tools are built, and a build that fails
fails the session. Run it as its own pytest process (`pytest tests/cluster -p no:randomly`): the tests
share one control plane and take turns on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from synth_support import REPO, STACKS, Synth, load_synth

sys.path.insert(0, str(REPO / "scripts"))
from control_plane import ControlPlane, alive  # noqa: E402

CLUSTER_TOOLS = ("kubernetes", "etcd", "kwok")
# The build is cold at most once per cache key; a cold build of the three takes about 20 minutes on two cores.
BUILD_TIMEOUT_SECONDS = 60 * 60
SYNTH_TIMEOUT_SECONDS = 600


@pytest.fixture(scope="session")
def tools_bin() -> Path:
    """The cache's bin directory, with the cluster's tools in it (built now if missing)."""
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-tools.sh"), *CLUSTER_TOOLS],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
    )
    assert result.returncode == 0, f"scripts/build-tools.sh failed:\n{result.stderr[-3000:]}"
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def rendering(tmp_path_factory):
    """Every stack being rendered by `elastic-training synth`, each in its own subprocess, started
    before the control plane so that both proceed at once."""

    def render(stack: str) -> Synth:
        out = tmp_path_factory.mktemp(f"cluster-synth-{stack}") / "out"
        # synth_support.run_synth's command, with room for five renders sharing two busy cores.
        result = subprocess.run(
            [sys.executable, "-m", "infra.cli", "synth", stack, "--out", str(out)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=SYNTH_TIMEOUT_SECONDS,
        )
        assert result.returncode == 0, result.stderr
        return load_synth(out)

    pool = ThreadPoolExecutor(len(STACKS))
    yield {stack: pool.submit(render, stack) for stack in STACKS}
    pool.shutdown()


@pytest.fixture(scope="session")
def rendered(rendering) -> dict[str, Synth]:
    """Every stack as `elastic-training synth` renders it."""
    return {stack: future.result() for stack, future in rendering.items()}


@pytest.fixture(scope="session")
def control_plane(rendering, tools_bin, tmp_path_factory) -> ControlPlane:
    """A control plane of the stacks' Kubernetes version, up for the session; down, and no process
    left, at its end."""
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"), tools_bin)
    plane.up()
    os.environ["KUBECONFIG"] = str(plane.kubeconfig)
    try:
        yield plane
    finally:
        pids = dict(plane.state.pids)
        plane.down()
        left = [name for name, pid in pids.items() if alive(pid)]
        assert not left, f"still running after down: {left}"
