"""The training worker's entrypoint: torchrun, with SIGTERM meaning "stopped from outside, retry".

    python -m jobs.agent TORCHRUN_ARGS...      e.g. --standalone --nproc_per_node=2 -m jobs.train ...

It runs `torchrun TORCHRUN_ARGS...` as a child and waits for it, so it runs the same in a pod
and on a laptop. The child is jobs.torchrun: torch.distributed.run with an etcd rendezvous that
outlasts a restart of etcd, and exits 138 (retryable) when etcd stays away too long.

Why it exists: Kubernetes stops a pod it evicts (a node drained for an upgrade or scale-in, a
Spot interruption, kubelet pressure) with SIGTERM. torchrun answers SIGTERM by stopping its
workers (SIGTERM to them, then SIGKILL after its 30 s shutdown timeout; torch
distributed/elastic/agent/server/api.py `run` -> `_shutdown`) and then exits with code 1
(torch.distributed.elastic.multiprocessing.api.SignalException, re-raised by `run`; checked with
torch 2.13.0 in tests/jobs/test_eviction.py). The TorchElastic controller, under
`restartPolicy: ExitCode`, recreates a pod only for exit codes 130, 137, 138 and 143
(kubeflow/common pkg/util/train/train_util.go `IsRetryableExitCode`; the exit code is read
from the container named `elasticjob-worker`); 1 is permanent, so one routine drain would end the run.

So this wrapper forwards SIGTERM to torchrun, lets it stop its workers, and then exits 143
(128 + SIGTERM): the controller recreates the worker pod, which rejoins the rendezvous once there
is a node for it. Every other outcome keeps torchrun's own exit code (a child killed by signal N
gives 128 + N, as a shell reports it), 138 from jobs.torchrun included.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Sequence

EXIT_STOPPED_FROM_OUTSIDE = 128 + signal.SIGTERM  # 143: retryable for the controller


def torchrun_command(torchrun_args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "jobs.torchrun", *torchrun_args]


def exit_code(returncode: int, stopped_from_outside: bool) -> int:
    """What this process exits with, given torchrun's return code (negative: killed by that signal)."""
    if stopped_from_outside:
        return EXIT_STOPPED_FROM_OUTSIDE
    return 128 - returncode if returncode < 0 else returncode


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("jobs.agent: error: no torchrun arguments (usage: python -m jobs.agent TORCHRUN_ARGS...; "
              "`python -m jobs.agent --help` shows torchrun's)", file=sys.stderr)
        return 2
    torchrun: subprocess.Popen | None = None
    stopped = False

    def forward_sigterm(signum, frame):
        nonlocal stopped
        if not stopped:
            print("jobs.agent: SIGTERM: stopping torchrun and its workers; exiting 143 so that the "
                  "controller recreates this worker", file=sys.stderr, flush=True)
        stopped = True
        if torchrun is not None:
            torchrun.send_signal(signal.SIGTERM)

    # Installed before the child starts, so no SIGTERM is lost in between.
    signal.signal(signal.SIGTERM, forward_sigterm)
    # Ctrl-C on a laptop reaches torchrun directly (same process group); here it only must not
    # raise KeyboardInterrupt while we wait. A Python handler, unlike SIG_IGN, is not inherited.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    torchrun = subprocess.Popen(torchrun_command(args))
    if stopped:  # SIGTERM came while the child was being started
        torchrun.send_signal(signal.SIGTERM)
    return exit_code(torchrun.wait(), stopped)


if __name__ == "__main__":
    sys.exit(main())
