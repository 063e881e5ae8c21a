"""`elastic-training local` can start a second run (issue 21, item 14).

jobs.training.train trains nothing in a run directory that holds model.pt (jobs/training/train.py, step 1 of its
docstring), so `local`, which always used runs/<data>/, ran the pipeline once and then only
re-evaluated the same model. Now each call is a new run, runs/<data>/run-<n>/. The rule is checked on
the real jobs.training.train; the pipeline's commands are recorded instead of run (tests/jobs runs them for real).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


from infra.cli import local
from synth_support import REPO


def finished_run(root: Path, run_id: str) -> Path:
    run = root / "runs" / "synthetic" / run_id
    run.mkdir(parents=True)
    (run / "model.pt").write_bytes(b"a finished run's model")
    return run


def test_jobs_train_trains_nothing_where_a_model_is(tmp_path):
    run = finished_run(tmp_path, "run-1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.training.train",
            "--data",
            str(tmp_path / "no-data"),
            "--run-dir",
            str(run),
            "--epochs",
            "1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "this run is finished, nothing to train" in result.stdout + result.stderr


def test_a_model_without_a_finished_record_gets_one_once(tmp_path):
    """Review ctrl-1 item 2: a crash between writing model.pt and appending `finished` left a run the
    controller calls unfinished (Failed) however often its workers come back; rank 0 records the end."""
    import json

    run = finished_run(tmp_path, "run-1")
    (run / "history.jsonl").write_text(json.dumps({"event": "start", "epochs_done": 0, "epochs": 1, "time": 1}) + "\n")
    for _ in range(2):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "jobs.training.train",
                "--data",
                str(tmp_path / "no-data"),
                "--run-dir",
                str(run),
                "--epochs",
                "1",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
    events = [json.loads(line)["event"] for line in (run / "history.jsonl").read_text().splitlines()]
    assert events == ["start", "finished"]


def run_dir(commands: list[list[str]]) -> str:
    (train,) = [c for c in commands if "jobs.training.train" in c]
    return train[train.index("--run-dir") + 1]


def test_a_second_call_is_a_new_run(tmp_path, recorded, capsys):
    commands, runner = recorded
    finished_run(tmp_path, "run-1")
    assert local.main([], root=tmp_path, step_runner=runner) == 0
    assert run_dir(commands) == "runs/synthetic/run-2"
    assert not (tmp_path / run_dir(commands) / "model.pt").exists()  # so jobs.training.train trains
    assert capsys.readouterr().err.startswith(
        f"local: run run-2 in {tmp_path}/runs/synthetic/run-2 (project folder {tmp_path})"
    )


def test_run_id_goes_back_to_a_run(tmp_path, recorded):
    commands, runner = recorded
    finished_run(tmp_path, "run-1")
    assert local.main(["--run-id", "run-1"], root=tmp_path, step_runner=runner) == 0
    assert run_dir(commands) == "runs/synthetic/run-1"


def test_a_bad_run_id_is_one_line(tmp_path, recorded, capsys):
    commands, runner = recorded
    assert local.main(["--run-id", "../x"], root=tmp_path, step_runner=runner) == 2
    assert capsys.readouterr().err == "local: --run-id '../x' is invalid: letters, digits, '.', '_' and '-' only\n"
    assert commands == []


def test_what_local_shows_of_a_finished_run_names_no_option_local_lacks(tmp_path):
    """jobs.training.train's line for a finished run, which `local --run-id` shows, once said "use a new
    --run-dir to train again": an option of jobs.training.train that `local` does not have (issue 30, item 6)."""
    import re

    run = finished_run(tmp_path, "run-1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.training.train",
            "--data",
            str(tmp_path / "no-data"),
            "--run-dir",
            str(run),
            "--epochs",
            "1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next(line for line in (result.stdout + result.stderr).splitlines() if "nothing to train" in line)
    local_options = {option for action in local.build_parser()._actions for option in action.option_strings}
    assert set(re.findall(r"--[\w-]+", line)) <= local_options, line
