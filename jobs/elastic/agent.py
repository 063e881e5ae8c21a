"""The training worker's entrypoint: torchrun, with SIGTERM meaning "stopped from outside, retry".

    python -m jobs.elastic.agent TORCHRUN_ARGS...      e.g. --standalone --nproc_per_node=2 -m jobs.training.train ...

It runs `torchrun TORCHRUN_ARGS...` as a child and waits for it, so it runs the same in a pod
and on a laptop. The child is jobs.elastic.torchrun: torch.distributed.run with a rendezvous that outlasts a
restart of its store, and exits 138 (retryable) when the store stays away too long.

Why it exists: Kubernetes stops a pod it evicts (a node drained for an upgrade or scale-in, a
Spot interruption, kubelet pressure) with SIGTERM. torchrun answers SIGTERM by stopping its
workers (SIGTERM to them, then SIGKILL after its 30 s shutdown timeout; torch
distributed/elastic/agent/server/api.py `run` -> `_shutdown`) and then exits with code 1
(torch.distributed.elastic.multiprocessing.api.SignalException, re-raised by `run`; checked with
torch 2.13.0 in tests/jobs/test_eviction.py; our jobs.elastic.torchrun says so in one line and
exits 128 + the signal instead). The TorchElastic controller, under
`restartPolicy: ExitCode`, recreates a pod only for exit codes 130, 137, 138 and 143
(kubeflow/common pkg/util/train/train_util.go `IsRetryableExitCode`; the exit code is read
from the container named `elasticjob-worker`); 1 is permanent, so one routine drain would end the run.

So this wrapper forwards SIGTERM to torchrun, lets it stop its workers, and then exits 143
(128 + SIGTERM): the controller recreates the worker pod, which rejoins the rendezvous once there
is a node for it. Every other outcome keeps torchrun's own exit code (a child killed by signal N
gives 128 + N, as a shell reports it), 138 from jobs.elastic.torchrun included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from jobs import exit_codes, termination
from jobs.elastic import torchrun_options

EXIT_STOPPED_FROM_OUTSIDE = exit_codes.TERMINATED  # 143: retryable for the controller
# A group re-formed this often this fast is not elastic churn (a preemption or a scale-up re-forms
# it once): its workers keep failing and torchrun keeps restarting them (a high --max_restarts, as
# Spot runs need), or an agent keeps joining and leaving. Surplus agents do not churn it: torch's
# dynamic rendezvous keeps them as spares (review rdzv-1 item 7). Environment overrides for tests.
MAX_REFORMATIONS = int(os.environ.get("JOBS_AGENT_MAX_REFORMATIONS", "10"))
REFORMATION_WINDOW_SECONDS = float(os.environ.get("JOBS_AGENT_REFORMATION_WINDOW_SECONDS", "600"))
_POLL_SECONDS = 0.2


def torchrun_command(torchrun_args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "jobs.elastic.torchrun", *torchrun_args]


def exit_code(returncode: int, stopped_from_outside: bool) -> int:
    """What this process exits with, given torchrun's return code (negative: killed by that signal)."""
    if stopped_from_outside:
        return EXIT_STOPPED_FROM_OUTSIDE
    return exit_codes.from_returncode(returncode)


def _process_start(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[19]


def _children(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of each live child: a PID alone could be reused."""
    found: set[tuple[int, str]] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            pids = [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
        found |= {(child, start) for child in pids if (start := _process_start(child))}
    return found


class GroupWatch:
    """Counts the generations of torchrun's worker processes (each re-formation of the group
    starts a new set) and says when they come too often."""

    def __init__(self, limit: int = MAX_REFORMATIONS, window: float = REFORMATION_WINDOW_SECONDS):
        self.limit, self.window = limit, window
        self._current: set[tuple[int, str]] = set()
        self._generations: list[float] = []  # when each generation started

    def observe(self, workers: set[tuple[int, str]], now: float) -> None:
        if workers and not workers & self._current:  # none of the previous workers lives on
            self._generations.append(now)
        if workers:
            self._current = workers
        self._generations = [at for at in self._generations if now - at <= self.window]

    def too_many(self) -> bool:
        return len(self._generations) > self.limit  # the first generation is no re-formation


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(
            "jobs.elastic.agent: error: no torchrun arguments (usage: python -m jobs.elastic.agent TORCHRUN_ARGS...; "
            "`python -m jobs.elastic.agent --help` shows torchrun's)",
            file=sys.stderr,
        )
        return 2
    try:
        torchrun_options.check(args)
    except torchrun_options.BadOption as error:
        line = f"jobs.elastic.agent: error: {error} (see torchrun --help)"
        print(line, file=sys.stderr, flush=True)
        termination.report_permanent(exit_codes.USAGE, line)
        return exit_codes.USAGE
    torchrun: subprocess.Popen | None = None
    stopped = False

    def forward_sigterm(signum, frame):
        nonlocal stopped
        if not stopped:
            print(
                "jobs.elastic.agent: SIGTERM: stopping torchrun and its workers; exiting 143 so that the "
                "controller recreates this worker",
                file=sys.stderr,
                flush=True,
            )
        stopped = True
        if torchrun is not None:
            torchrun.send_signal(signal.SIGTERM)

    # Installed before the child starts, so no SIGTERM is lost in between.
    signal.signal(signal.SIGTERM, forward_sigterm)
    # Ctrl-C on a laptop reaches torchrun directly (same process group); here it only must not
    # raise KeyboardInterrupt while we wait. A Python handler, unlike SIG_IGN, is not inherited.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    notice_dir = Path(tempfile.mkdtemp(prefix="jobs-agent-"))
    notice = notice_dir / "permanent-failure"
    try:
        torchrun = subprocess.Popen(torchrun_command(args),
                                    env={**os.environ, termination.PERMANENT_FAILURE_FILE_ENV: str(notice)})  # fmt: skip
        if stopped:  # SIGTERM came while the child was being started
            torchrun.send_signal(signal.SIGTERM)
        returncode, permanent = _wait(torchrun, notice)
    finally:
        shutil.rmtree(notice_dir, ignore_errors=True)
    if permanent is not None:
        return permanent
    code = exit_code(returncode, stopped)
    if code not in (exit_codes.OK, exit_codes.INTERRUPTED, exit_codes.TERMINATED, exit_codes.STORE_UNAVAILABLE):
        print(f"jobs.elastic.agent: torchrun ended with exit {code} (its workers failed more often than --max_restarts "
              f"allows, or its rendezvous failed: the lines above say which); exiting {code}, which the controller "
              "retries within the job's backoff limit", file=sys.stderr, flush=True)  # fmt: skip
    return code


def _wait(torchrun: subprocess.Popen, notice: Path) -> tuple[int, int | None]:
    """Wait for torchrun; stop it early when a worker failed permanently or the group keeps
    re-forming. Returns torchrun's return code and the exit code that overrides it, if any."""
    watch = GroupWatch()
    while True:
        try:
            returncode = torchrun.wait(timeout=_POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:
            pass
        reported = termination.read_agent_notice(notice)
        if reported is not None:
            code, line = reported
            print(f"jobs.elastic.agent: a worker failed and a retry cannot help (exit {code}): {line}; stopping torchrun "
                  f"instead of restarting its workers, exiting {code}", file=sys.stderr, flush=True)  # fmt: skip
            _stop(torchrun)
            return torchrun.returncode, code
        watch.observe(_children(torchrun.pid), time.monotonic())
        if watch.too_many():
            line = (f"jobs.elastic.agent: the worker group re-formed more than {watch.limit} times in "
                    f"{watch.window:g} s: its workers keep failing (their errors are above in this log) or an agent "
                    f"keeps joining and leaving the rendezvous; stopping, exiting {exit_codes.CANNOT_CONTINUE}")  # fmt: skip
            print(line, file=sys.stderr, flush=True)
            termination.write_termination_message(line)
            _stop(torchrun)
            return torchrun.returncode, exit_codes.CANNOT_CONTINUE
    reported = termination.read_agent_notice(notice)  # torchrun gave up before we looked
    return returncode, reported[0] if reported else None


def _stop(torchrun: subprocess.Popen) -> None:
    """SIGTERM: torchrun stops its workers (SIGTERM, then SIGKILL after its shutdown timeout)."""
    torchrun.send_signal(signal.SIGTERM)
    torchrun.wait()


if __name__ == "__main__":
    sys.exit(main())
