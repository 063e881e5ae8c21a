"""jobs.elastic.stopping with real signals: a process that watches for SIGTERM as jobs.training.train's loop does.

The main thread of a stuck worker sits in a C call (a collective) that Python signal handlers
cannot interrupt; `time.sleep` stands in for it here: with a Python handler installed, CPython
runs the handler and resumes the sleep (PEP 475), so the main thread never gets back to the loop.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from torchrun_harness import REPO_ROOT, agent_environment, free_port

SCRIPT = """
import logging, sys, time
from jobs.elastic.stopping import StopSignal
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")  # as jobs.cli does
mode = sys.argv[1]
stop = StopSignal(stuck_seconds=1.0)
with stop.watching():
    print("watching", flush=True)
    if mode == "stuck":
        time.sleep(60)
    while not stop.requested.is_set() and mode != "leave":
        time.sleep(0.05)  # a step
        stop.step_boundary()
    if mode == "loop":
        print("stopping at a step boundary", flush=True)
        raise SystemExit(7)  # jobs.training.train saves, then exits 143
    if mode == "busy":
        with stop.busy():  # a save slower than stuck_seconds
            time.sleep(3)
        print("saved", flush=True)
        raise SystemExit(7)
    if mode == "finish":
        time.sleep(0.5)  # the last steps: the run ends before stopping
print("after watching", flush=True)
time.sleep(60)
"""


def _sigterm_after_start(mode: str, tmp_path) -> tuple[int, float, str]:
    script = tmp_path / "watcher.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, cwd=REPO_ROOT, env=agent_environment())  # fmt: skip
    try:
        first = process.stdout.readline()
        assert first == "watching\n", first + process.stdout.read()
        if mode == "leave":
            assert process.stdout.readline() == "after watching\n"
        time.sleep(0.3)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
        return code, time.monotonic() - sent, process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_worker_between_steps_stops_at_the_next_boundary(tmp_path):
    code, seconds, output = _sigterm_after_start("loop", tmp_path)
    assert (code, output.splitlines()[-1]) == (7, "stopping at a step boundary"), output
    assert seconds < 1.0


def test_a_stuck_worker_exits_143_without_saving_once_no_step_has_finished_for_a_while(tmp_path):
    code, seconds, output = _sigterm_after_start("stuck", tmp_path)
    assert code == 143, output
    assert "no step finished for" in output and "exiting without saving" in output
    # stuck_seconds (1 s) after the last step boundary, the start of the watch here: not the agent's 30 s SIGKILL
    assert seconds < 5.0


def test_a_save_in_progress_is_never_cut_short(tmp_path):
    code, seconds, output = _sigterm_after_start("busy", tmp_path)
    assert (code, output.splitlines()[-1]) == (7, "saved"), output
    assert seconds >= 3.0


def test_a_sigterm_the_loop_did_not_act_on_ends_the_process_when_watching_ends(tmp_path):
    """The run finished its last steps instead of stopping: once nothing is left to save, the
    SIGTERM's default action (exit at once) is delivered; nothing runs after the watch."""
    code, _, output = _sigterm_after_start("finish", tmp_path)
    assert code == 143 and "after watching" not in output, output


def test_outside_the_watch_sigterm_has_its_default_action_again(tmp_path):
    code, seconds, output = _sigterm_after_start("leave", tmp_path)
    assert code == -signal.SIGTERM, output
    assert seconds < 1.0


COLLECTIVE = """
import logging, sys, time
from datetime import timedelta
import torch, torch.distributed as dist
from jobs.elastic.stopping import StopSignal
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
if dist.get_rank() == 1:
    print("hung", flush=True)
    time.sleep(120)  # a peer that never joins the collective
stop = StopSignal(stuck_seconds=2.0)
with stop.watching():
    stop.step_boundary()
    print("in the all-reduce", flush=True)
    dist.all_reduce(torch.ones(10))
"""


def test_a_worker_blocked_in_a_gloo_collective_still_exits_on_sigterm(tmp_path):
    """The real stuck case: the main thread waits in gloo's C++ all-reduce for a hung peer, where no
    Python signal handler can run; the wakeup-fd reader still sees the SIGTERM and ends the worker
    after stuck_seconds, not after the 60 s process-group timeout."""
    script = tmp_path / "collective.py"
    script.write_text(COLLECTIVE)
    port = str(free_port())
    processes = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=REPO_ROOT, env=agent_environment(MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                                                       RANK=str(rank), WORLD_SIZE="2"))
                 for rank in range(2)]  # fmt: skip
    try:
        assert processes[1].stdout.readline() == "hung\n"
        assert processes[0].stdout.readline() == "in the all-reduce\n"
        time.sleep(0.5)
        sent = time.monotonic()
        processes[0].send_signal(signal.SIGTERM)
        assert processes[0].wait(timeout=30) == 143, processes[0].stdout.read()
        assert time.monotonic() - sent < 10
        assert "exiting without saving" in processes[0].stdout.read()
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
