"""A full or read-only volume, or a missing data folder, ends a job in one line naming the path and
the cause, exit 3 (a retry writes to the same volume), in the log, the history where it is writable,
and the termination message. Real volumes: a small tmpfs fills up, a tmpfs remounted read-only."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from archive_server import make_tarball
from conftest import assert_one_line_error, make_synthetic_cifar, run_job
from torchrun_harness import REPO_ROOT, agent_environment
from volumes import file_size_limit, remount_read_only, tmpfs

from jobs import cli
from jobs.training import checkpoint
from jobs.training import train


def train_args(data_dir, run_dir, *extra: str) -> list[str]:
    return ["--data", str(data_dir), "--run-dir", str(run_dir), "--batch-size", "20", "--log-every", "5",
            "--checkpoint-every-seconds", "0", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory, tiny_cifar) -> int:
    run_dir = tmp_path_factory.mktemp("size") / "run"
    assert train.main(train_args(tiny_cifar, run_dir, "--epochs", "1")) == 0
    return (run_dir / checkpoint.CHECKPOINT_NAME).stat().st_size


def test_a_volume_that_fills_up_ends_the_run_in_one_line_with_exit_3(tmp_path, tiny_cifar, checkpoint_bytes):
    """Room for two checkpoints and a bit: epoch 2 is saved (beside epoch 1, kept as the previous), the
    save of epoch 3 finds the volume full. Before: a traceback ending in torch's 'unexpected pos', and
    torchrun's restarts, each failing the same way."""
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")
    with tmpfs(tmp_path / "volume", f"{int(checkpoint_bytes * 2.5) // 1024}k") as volume:
        run_dir = volume / "run"
        result = run_job("jobs.training.train", *train_args(tiny_cifar, run_dir, "--epochs", "3"),
                         JOBS_TERMINATION_LOG=str(termination_log))  # fmt: skip
        line = assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, f"cannot write {run_dir / 'checkpoint.pt'}",
                                     "No space left on device", "the volume is full")  # fmt: skip
        assert "unexpected pos" not in result.stdout + result.stderr
        assert checkpoint.load(run_dir / checkpoint.CHECKPOINT_NAME, "checkpoint")["epochs_done"] == 2
        assert sorted(path.name for path in run_dir.iterdir() if path.name.startswith(".")) == []  # no temporary
        assert not (run_dir / checkpoint.MODEL_NAME).exists()
        assert termination_log.read_text() == line.replace("jobs.training.train: error: ", "jobs.training.train: ")


def test_a_file_size_limit_fails_the_same_way_without_privileges(tmp_path, tiny_cifar, checkpoint_bytes):
    """Where no tmpfs can be mounted: RLIMIT_FSIZE makes the checkpoint's write fail (EFBIG)."""
    run_dir = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "jobs.training.train", *train_args(tiny_cifar, run_dir, "--epochs", "1")],
                            cwd=REPO_ROOT, env=agent_environment(), capture_output=True, text=True, timeout=120,
                            preexec_fn=file_size_limit(checkpoint_bytes // 2))  # fmt: skip
    assert_one_line_error(
        result, cli.EXIT_CANNOT_CONTINUE, f"cannot write {run_dir / 'checkpoint.pt'}", "File too large"
    )
    assert not (run_dir / checkpoint.CHECKPOINT_NAME).exists()
    assert [path.name for path in run_dir.iterdir() if path.name.startswith(".")] == []


def test_a_read_only_run_directory_is_one_line_and_exit_3(tmp_path, tiny_cifar):
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")
    with tmpfs(tmp_path / "volume", "4m") as volume:
        (volume / "run").mkdir()
        remount_read_only(volume)
        result = run_job("jobs.training.train", *train_args(tiny_cifar, volume / "run", "--epochs", "1"),
                         JOBS_TERMINATION_LOG=str(termination_log))  # fmt: skip
        assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, f"cannot write {volume / 'run'}",
                              "Read-only file system", "mounted read-only")  # fmt: skip
        assert "Read-only file system" in termination_log.read_text()


def test_metrics_out_on_a_read_only_volume_is_one_line(tmp_path, tiny_cifar, trained_run):
    """Before: a traceback from the clean-up of the temporary, which the read-only volume refused too."""
    with tmpfs(tmp_path / "volume", "1m") as volume:
        remount_read_only(volume)
        result = run_job("jobs.results.evaluate", "--data", str(tiny_cifar), "--model", str(trained_run / "model.pt"),
                         "--metrics-out", str(volume / "metrics.json"))  # fmt: skip
        assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, f"cannot write metrics to {volume / 'metrics.json'}",
                              "Read-only file system")  # fmt: skip


def test_a_missing_data_folder_is_one_line_and_exit_3(tmp_path):
    result = run_job("jobs.training.train", *train_args(tmp_path / "missing", tmp_path / "run"))
    assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, f"data folder {tmp_path / 'missing'} does not exist")
    assert not (tmp_path / "run").exists()


def test_a_run_directory_that_cannot_be_created_is_one_line(tmp_path, tiny_cifar):
    with tmpfs(tmp_path / "volume", "1m") as volume:
        remount_read_only(volume)
        result = run_job("jobs.training.train", *train_args(tiny_cifar, volume / "new" / "run"))
        assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, "cannot write run directory", "Read-only file system")
    shutil.rmtree(tmp_path / "volume", ignore_errors=True)


def test_prepare_from_a_local_archive_onto_a_volume_that_fills_up_names_the_volume(tmp_path):
    """The archive is read from a local file and written to the volume: a write that fails is the
    volume's fault, not the source's. Before: "cannot read source file <archive>: File too large"."""
    archive = tmp_path / "cifar-10-python.tar.gz"
    archive.write_bytes(make_tarball(make_synthetic_cifar(tmp_path / "src", train_per_class=20, test_per_class=5)))
    dest = tmp_path / "volume" / "data"
    result = subprocess.run([sys.executable, "-m", "jobs.data.prepare", "--dest", str(dest), "--source", str(archive)],
                            cwd=REPO_ROOT, env=agent_environment(), capture_output=True, text=True, timeout=120,
                            preexec_fn=file_size_limit(archive.stat().st_size // 2))  # fmt: skip
    line = assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, "cannot write ", "File too large")
    assert str(archive) not in line.split("cannot write ")[1].split(":")[0], line
    assert not dest.exists()  # nothing half-written: the work folder and the folder it created are gone
