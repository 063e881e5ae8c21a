"""Fixtures for the jobs tests. Everything is real: torch, the rendezvous store, torchrun agents,
an HTTP server on 127.0.0.1. Reusable pieces live in torchrun_harness.py (this folder is on
sys.path because it has a conftest.py and no __init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from archive_server import ArchiveServer
from torchrun_harness import REPO_ROOT, StoreServer

from jobs.data import cifar as data


def make_synthetic_cifar(parent: Path, train_per_class: int, test_per_class: int, seed: int = 0) -> Path:
    """A generated CIFAR-10-format folder `parent/cifar-10-batches-py`; returns its path."""
    folder = Path(parent) / data.FOLDER_NAME
    data.write_synthetic(folder, train_per_class, seed=seed, test_images_per_class=test_per_class)
    return folder


def run_job(module: str, *args: str, timeout: float = 120, **environment: str) -> subprocess.CompletedProcess:
    """`python -m jobs.<module> args...` as the pods run it, with a hard timeout."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), **environment)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def assert_one_line_error(result: subprocess.CompletedProcess, exit_code: int, *phrases: str) -> str:
    """The bad-input contract: the given exit code, exactly one line on stderr, no traceback."""
    assert result.returncode == exit_code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="session")
def store_server(tmp_path_factory):
    """One rendezvous store (python -m jobs.elastic.store_server) on a free 127.0.0.1 port for the whole
    session, stopped by PID. Jobs share it as they share the store's Service on the cluster; each
    uses its own rdzv id."""
    server = StoreServer(tmp_path_factory.mktemp("store")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_cifar(tmp_path_factory) -> Path:
    """100 training and 100 test images: enough for the workshop CNN to learn the synthetic
    classes well above chance in 2-3 epochs, small enough for a few seconds of CPU."""
    return make_synthetic_cifar(tmp_path_factory.mktemp("tiny"), train_per_class=10, test_per_class=10)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tiny_cifar) -> Path:
    """A finished single-process run (3 epochs) of the improved recipe, trained in this process."""
    from jobs.training import train

    run_dir = tmp_path_factory.mktemp("trained") / "run"
    assert train.main(["--data", str(tiny_cifar), "--run-dir", str(run_dir), "--epochs", "3",
                       "--batch-size", "20", "--log-every", "5"]) == 0  # fmt: skip
    return run_dir


@pytest.fixture(scope="module")
def server():
    """An ArchiveServer per test module, closed at its end."""
    archive_server = ArchiveServer()
    yield archive_server
    archive_server.close()
