"""The examples (examples/) run through `elastic-training local` with a worker SIGKILLed mid-run, as a
user would run them (issue 38): the plain torchrun DDP script, which uses none of the library, and the
text classifier, which uses elastic_training. Each must finish (exit 0) from a checkpoint, not from scratch.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elastic_training import history, run_directory
from tests.jobs.torchrun_harness import ProcessId, descendants_of, worker_rank

REPO = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 300
# `local` with its runs under a temporary root instead of the checkout's runs/.
LOCAL = (
    "import sys; from pathlib import Path; from infra.cli import local; "
    "sys.exit(local.main(sys.argv[2:], root=Path(sys.argv[1])))"
)


@dataclass
class LocalRun:
    returncode: int | None
    output: str
    run_dir: Path
    killed: dict = field(default_factory=dict)


def run_local(root: Path, args: list[str], run_dir: Path, kill_when: Callable[[Path], bool], rank: int = 1) -> LocalRun:
    """`elastic-training local ARGS`; SIGKILL the worker of `rank` once `kill_when(run_dir)`. Every
    process it started is killed by PID at the end, whatever happened."""
    log = root / "local.log"
    seen: set[ProcessId] = set()
    killed: dict = {}
    with open(log, "wb") as output:
        process = subprocess.Popen([sys.executable, "-c", LOCAL, str(root), *args], cwd=REPO, stdout=output,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
        started = time.monotonic()
        try:
            while process.poll() is None and time.monotonic() - started < DEADLINE_SECONDS:
                pids = descendants_of(process.pid)
                seen.update(filter(None, map(ProcessId.of, pids)))
                if not killed and kill_when(run_dir):
                    victims = [pid for pid in pids if worker_rank(pid) == rank]
                    if victims:
                        os.kill(victims[0], signal.SIGKILL)
                        killed = {"pid": victims[0], "after": round(time.monotonic() - started, 1)}
                time.sleep(0.05)
        finally:
            for leftover in seen:
                leftover.kill()
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
    return LocalRun(process.returncode, log.read_text(errors="replace"), run_dir, killed)


def test_a_plain_torchrun_script_resumes_by_itself_after_a_worker_is_killed(tmp_path):
    script = REPO / "examples" / "plain_ddp" / "train.py"
    run_dir = tmp_path / "runs" / "train" / "run-1"
    result = run_local(tmp_path, ["--script", str(script), "--nproc", "2", "--", "--steps", "150",
                                  "--checkpoint-every", "10", "--step-seconds", "0.05"], run_dir,
                       kill_when=lambda run: (run / "plain-checkpoint.pt").exists())  # fmt: skip
    assert result.killed, f"no worker was killed after a checkpoint:\n{result.output[-3000:]}"
    assert result.returncode == 0, result.output[-3000:]
    assert f"local: run run-1 in {run_dir}" in result.output  # the run directory it printed
    assert "resuming at step" in result.output, result.output[-3000:]
    # The digits only: two workers' lines can interleave mid-line ("resuming at step 10rank ...").
    resumed = [int(step) for step in re.findall(r"resuming at step (\d+)", result.output)]
    assert min(resumed) >= 10
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert abs(metrics["weight"] - 3) < 0.1 and abs(metrics["bias"] + 1) < 0.1, metrics
    assert (run_dir / "model.pt").exists()


def test_the_text_classifier_on_the_library_resumes_from_its_checkpoint_after_a_worker_is_killed(tmp_path):
    module = "examples.text_classifier.train"
    run_dir = tmp_path / "runs" / module / "run-1"
    result = run_local(tmp_path, ["--module", module, "--", "--steps", "300", "--checkpoint-every-seconds", "1",
                                  "--step-seconds", "0.03"], run_dir,
                       kill_when=lambda run: (run / run_directory.CHECKPOINT).exists())  # fmt: skip
    assert result.killed, f"no worker was killed after a checkpoint:\n{result.output[-3000:]}"
    assert result.returncode == 0, result.output[-3000:]
    records = history.read(run_dir / run_directory.HISTORY)
    starts = [record for record in records if record["event"] == history.START]
    assert len(starts) >= 2 and starts[-1]["step"] > 0, records  # restarted, from a checkpoint
    assert any(record["event"] == history.CHECKPOINT for record in records)
    assert any(record["event"] == history.PROGRESS for record in records)
    assert records[-1]["event"] == history.FINISHED and records[-1]["step"] == 300
    # Its test command: the model it finished with is one that learnt the task.
    evaluated = subprocess.run([sys.executable, "-m", "examples.text_classifier.evaluate", "--min-accuracy", "0.7"],
                               cwd=REPO, capture_output=True, text=True, timeout=120,
                               env={**os.environ, run_directory.RUN_DIR_ENV: str(run_dir)})  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert json.loads((run_dir / run_directory.METRICS).read_text())["accuracy"] >= 0.7
