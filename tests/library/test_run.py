"""elastic_training.Run on its own (one process, no torchrun: rank 0 of 1), as a user's script calls it:
a non-finite loss ends the run with the contract's exit 3 and a `failed` line; SIGTERM saves at the next
step and exits 143; a rerun resumes from the newest verified checkpoint, falling back past a damaged one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from elastic_training import checkpoints, exit_codes, history, run_directory

REPO = Path(__file__).resolve().parents[2]

# A plain loop with the library's calls; the loss is NaN from step NAN_AT on, and a file appears after
# every step so that the test can time its SIGTERM.
SCRIPT = """
import os, sys, time, torch
import elastic_training
steps, nan_at = int(sys.argv[1]), int(sys.argv[2])
run = elastic_training.Run(checkpoint_every_seconds=0)
model = torch.nn.Linear(2, 1)
state = run.resume()
start = state["step"] if state else 0
if state:
    model.load_state_dict(state["model"])
print("start", start, flush=True)
for step in range(start, steps):
    loss = model(torch.ones(1, 2)).sum() * (float("nan") if step >= nan_at else 1.0)
    run.check_loss(loss, step)
    run.log(step + 1, loss=loss.item())
    time.sleep(0.05)
    open(os.path.join(os.environ["ELASTIC_TRAINING_RUN_DIR"], "stepped"), "w").close()
    run.step_done(step + 1, lambda: {"model": model.state_dict()})
run.finish({"model": model.state_dict()})
"""


def start(run_dir: Path, steps: int, nan_at: int) -> subprocess.Popen:
    environment = {**os.environ, run_directory.RUN_DIR_ENV: str(run_dir), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(steps), str(nan_at)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip


def finish(process: subprocess.Popen) -> tuple[int, str]:
    output, _ = process.communicate(timeout=120)
    return process.returncode, output


def test_a_non_finite_loss_ends_the_run_with_exit_3_and_a_failed_line(tmp_path):
    code, output = finish(start(tmp_path, steps=10, nan_at=3))
    assert code == exit_codes.CANNOT_CONTINUE, output
    assert "elastic_training: error: the training loss is nan at step 3" in output
    failed = history.read(tmp_path / run_directory.HISTORY)[-1]
    assert failed["event"] == history.FAILED and failed["exit_code"] == 3
    assert not (tmp_path / run_directory.MODEL).exists()


def test_sigterm_saves_the_step_reached_and_exits_143_then_a_rerun_resumes_there(tmp_path):
    process = start(tmp_path, steps=400, nan_at=10**6)
    deadline = time.monotonic() + 60
    while not (tmp_path / "stepped").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    code, output = finish(process)
    assert code == exit_codes.TERMINATED, output
    saved = checkpoints.newest_checkpoint(tmp_path)
    assert saved is not None and 0 < saved.state["step"] < 400
    records = history.read(tmp_path / run_directory.HISTORY)
    assert [r["event"] for r in records if r["event"] in (history.CHECKPOINT, history.STOP)] == [
        history.CHECKPOINT,
        history.STOP,
    ]

    code, output = finish(start(tmp_path, steps=saved.state["step"] + 3, nan_at=10**6))
    assert code == 0, output
    assert f"start {saved.state['step']}" in output
    assert (tmp_path / run_directory.MODEL).exists()
    assert history.read(tmp_path / run_directory.HISTORY)[-1]["event"] == history.FINISHED


def test_resume_falls_back_past_a_damaged_checkpoint(tmp_path):
    checkpoints.save_checkpoint(tmp_path, {"model": {"w": torch.ones(2)}, "step": 5})
    checkpoints.save_checkpoint(tmp_path, {"model": {"w": torch.ones(2)}, "step": 9})
    newest = tmp_path / run_directory.CHECKPOINT
    data = bytearray(newest.read_bytes())
    data[-200] ^= 0xFF  # a flipped byte
    newest.write_bytes(bytes(data))
    found = checkpoints.newest_checkpoint(tmp_path)
    assert found.path.name == run_directory.PREVIOUS_CHECKPOINT and found.state["step"] == 5 and found.rejected
