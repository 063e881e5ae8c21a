"""`elastic-training local` under a newcomer's mistakes (issue 39).

The Ctrl-C, full-disk and resume tests run the real pipeline (jobs.data.prepare, torchrun with two
workers, jobs.results.evaluate) on generated data in a root of their own; the others record the
steps' command lines instead (tests/jobs runs the jobs themselves).

- Ctrl-C: SIGINT to `local` alone, as a terminal sends it to the foreground process group: the steps
  run in a session of their own, so `local` stops them in order (SIGTERM: the training saves its
  checkpoint) and prints one line with the command that resumes the run.
- A full disk: RLIMIT_FSIZE makes a write past the limit fail with EFBIG (Python ignores SIGXFSZ, so the
  write fails instead of killing the process), which jobs/cli.py counts with ENOSPC and EROFS: exit 3.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.cli import local
from jobs import exit_codes, termination
from synth_support import REPO


def real_local(root: Path, *argv: str, limit_file_bytes: int | None = None) -> subprocess.Popen:
    """`elastic-training local` over the real jobs, its runs and data under `root`."""
    code = (
        f"import sys; from pathlib import Path; from infra.cli import local; "
        f"sys.exit(local.main(sys.argv[1:], root=Path({str(root)!r})))"
    )

    def limits():
        if limit_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limits,
    )


@pytest.fixture
def root(tmp_path):
    # The jobs run as `python -m jobs...` with cwd=root; PYTHONPATH finds them in the repository.
    return tmp_path


def history(run: Path) -> list[dict]:
    path = run / "history.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_ctrl_c_is_one_line_with_the_resume_command_and_resuming_needs_no_epochs(root):
    run = root / "runs" / "synthetic" / "run-1"
    process = real_local(root, "--epochs", "2")
    deadline = time.monotonic() + 240
    while not any(r.get("event") == "start" for r in history(run)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    time.sleep(2)  # a few steps into the first epoch
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=180)
    assert process.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err + out, err
    assert lines[1] == (
        "local: interrupted (Ctrl-C); run run-1 keeps what it saved. Resume it with: "
        "elastic-training local --run-id run-1"
    )
    assert (run / "checkpoint.pt").is_file() and not (run / "model.pt").exists()

    resumed = real_local(root, "--run-id", "run-1")
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    starts = [r for r in history(run) if r.get("event") == "start"]
    assert [s["epochs"] for s in starts] == [2, 2], "the resume trained on with the run's own epochs"
    assert history(run)[-1] == {**history(run)[-1], "event": "finished", "epochs": 2}
    assert (run / "metrics.json").is_file()


def test_a_full_disk_is_one_line_and_exit_3(root):
    """The worker's own line (jobs/cli.py) was buried in gloo's and torchrun's tracebacks, and torchrun's
    exit status 1 replaced the documented 3."""
    process = real_local(
        root, "--epochs", "1", limit_file_bytes=2 * 1024 * 1024
    )  # the data fits, a checkpoint does not
    out, err = process.communicate(timeout=600)
    assert process.returncode == exit_codes.CANNOT_CONTINUE, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err, err
    assert lines[1].startswith(
        "local: jobs.training.train failed (exit 3): jobs.training.train: cannot write "
        "runs/synthetic/run-1/checkpoint.pt: File too large"
    )
    assert "Traceback" in (root / "runs" / "synthetic" / "run-1" / local.LOG_NAME).read_text(encoding="utf-8"), (
        "the steps' own messages are kept in the run's log"
    )


def test_too_little_free_space_is_refused_before_an_epoch_is_spent(root, monkeypatch, capsys):
    free = __import__("shutil").disk_usage(root).free
    monkeypatch.setattr(local, "MIN_FREE_BYTES_RUN", free * 2)  # more than this disk has
    assert local.main([], root=root, step_runner=lambda *a: pytest.fail("no step runs")) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MiB free on the disk of" in err and "free some space, then rerun" in err
    assert not (root / "runs" / "synthetic" / "run-1").exists(), "a run that never started leaves nothing behind"


# --- recorded steps -----------------------------------------------------------------------------------


def epochs_of(commands: list[list[str]]) -> str:
    (train,) = [c for c in commands if "jobs.training.train" in c]
    return train[train.index("--epochs") + 1]


def started_run(root: Path, run_id: str, epochs: int, finished: bool = False) -> Path:
    run = root / "runs" / "synthetic" / run_id
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text(json.dumps({"event": "start", "epochs": epochs}) + "\n", encoding="utf-8")
    if finished:
        (run / "model.pt").write_bytes(b"model")
    return run


def test_a_run_id_that_does_not_exist_is_refused(root, recorded, capsys):
    commands, runner = recorded
    started_run(root, "run-1", 3)
    assert local.main(["--run-id", "run-99"], root=root, step_runner=runner) == 2
    err = capsys.readouterr().err
    assert err == (
        f"local: --run-id run-99: there is no run {root}/runs/synthetic/run-99 (runs there: run-1); "
        "leave out --run-id to start a new run\n"
    )
    assert commands == [] and not (root / "runs" / "synthetic" / "run-99").exists()


def test_epochs_on_a_finished_run_are_refused_not_dropped(root, recorded, capsys):
    commands, runner = recorded
    started_run(root, "run-1", 3, finished=True)
    assert local.main(["--run-id", "run-1", "--epochs", "5"], root=root, step_runner=runner) == 2
    assert capsys.readouterr().err == (
        "local: --epochs 5: run run-1 is finished (3 epochs), so it only re-evaluates "
        "and trains no more; leave out --run-id to train a new run with --epochs 5\n"
    )
    assert commands == []


def test_other_epochs_on_an_unfinished_run_are_refused(root, recorded, capsys):
    commands, runner = recorded
    started_run(root, "run-1", 4)
    assert local.main(["--run-id", "run-1", "--epochs", "2"], root=root, step_runner=runner) == 2
    assert "was started with 4 epochs and resumes only with those" in capsys.readouterr().err


def test_resuming_passes_the_runs_own_epochs(root, recorded):
    commands, runner = recorded
    started_run(root, "run-1", 7)
    assert local.main(["--run-id", "run-1"], root=root, step_runner=runner) == 0
    assert epochs_of(commands) == "7"


def test_a_new_run_records_its_epochs(root, recorded):
    commands, runner = recorded
    assert local.main(["--epochs", "4"], root=root, step_runner=runner) == 0
    record = json.loads((root / "runs" / "synthetic" / "run-1" / local.RUN_RECORD).read_text(encoding="utf-8"))
    assert record == {"epochs": 4} and epochs_of(commands) == "4"


def test_a_run_in_use_is_refused(root, recorded, capsys):
    """Two `local` on one run interleaved one history and both exited 0."""
    commands, runner = recorded
    run = started_run(root, "run-1", 3)
    held = local.lock_run(run)  # another `local` holds it (flock is per open file, so this process counts)
    try:
        assert local.main(["--run-id", "run-1"], root=root, step_runner=runner) == 2
    finally:
        held.close()
    err = capsys.readouterr().err
    assert err.startswith(f"local: run {run} is in use by another `elastic-training local` (pid {os.getpid()})")
    assert commands == []
    assert local.main(["--run-id", "run-1"], root=root, step_runner=runner) == 0, "free again once released"


def test_two_new_runs_at_once_take_two_directories(root):
    runs = root / "runs" / "synthetic"
    assert [local.claim_new_run(runs), local.claim_new_run(runs)] == ["run-1", "run-2"]


def test_a_failing_step_is_one_line_with_its_own_error(root, capsys):
    def fails(command, cwd, env, log):
        return local.StepResult(1, ["jobs.data.prepare: error: cannot reach the source"], "Traceback ...")

    assert local.main([], root=root, step_runner=fails) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[1] == (
        f"local: jobs.data.prepare failed (exit 1): jobs.data.prepare: error: cannot reach the source "
        f"(all its messages: {root}/runs/synthetic/run-1/local.log)"
    )


def test_the_constants_local_repeats_are_the_jobs_own():
    """infra/ does not import jobs/ (tests/test_architecture.py); these are written twice."""
    assert (local.FAILURE, local.USAGE, local.CANNOT_CONTINUE) == (
        exit_codes.FAILURE,
        exit_codes.USAGE,
        exit_codes.CANNOT_CONTINUE,
    )
    assert local.PERMANENT_FAILURE_FILE_ENV == termination.PERMANENT_FAILURE_FILE_ENV


# --- mistakes of our own (issue 39's closing list) -----------------------------------------------------


def test_epochs_past_the_trainings_bound_are_refused_before_a_run_is_made(root, recorded, capsys):
    commands, runner = recorded
    assert local.main(["--epochs", "99999"], root=root, step_runner=runner) == 2
    assert capsys.readouterr().err == "local: --epochs 99999 is invalid: must be a whole number from 1 to 10000\n"
    assert commands == [] and not (root / "runs").exists()
    from jobs.training import train

    assert local.MAX_EPOCHS == train.MAX_EPOCHS


@pytest.mark.parametrize("text, shown", [("abc", "'abc'"), ("2.5", "'2.5'"), ("", "''"), ("0", "0"), ("-3", "-3")])
def test_epochs_that_are_not_a_whole_number_are_one_line_in_our_words(root, recorded, capsys, text, shown):
    """argparse's own wording was "argument --epochs: invalid int value: 'abc'" (issue 39)."""
    commands, runner = recorded
    assert local.main(["--epochs", text], root=root, step_runner=runner) == 2
    assert capsys.readouterr().err == f"local: --epochs {shown} is invalid: must be a whole number from 1 to 10000\n"
    assert commands == [] and not (root / "runs").exists()


def test_a_file_where_the_runs_folder_goes_is_named(root, recorded, capsys):
    commands, runner = recorded
    (root / "runs").mkdir()
    (root / "runs" / "synthetic").write_text("", encoding="utf-8")
    assert local.main([], root=root, step_runner=runner) == 2
    assert capsys.readouterr().err == (
        f"local: {root}/runs/synthetic is a file, not the folder of the runs: move it away, then rerun\n"
    )
