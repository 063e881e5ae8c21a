"""What a worker's exit code makes the platform do: the one table, read by the jobs (the numbers they
exit with), by the ElasticJob controller (the Job's podFailurePolicy, controller/render.py) and by any
training code (docs/train-your-own.md). Nothing else writes these numbers.

| code | meaning | the platform |
|---|---|---|
| 0 | done | the index succeeded |
| 130, 143 | SIGINT / SIGTERM: preempted, drained, stopped from outside | pod replaced, not counted |
| 138 | the rendezvous store stayed unreachable past its bound | pod replaced, not counted |
| 2 | bad input or usage | permanent: the index fails at once |
| 126, 127 | the image cannot run the command | permanent |
| 3 | the run cannot go on and a retry cannot help: non-finite loss, no valid checkpoint, data that fails its check, disk full, read-only run directory, more agents than the rendezvous admits | permanent |
| anything else (1, 137 OOM, ...) | a failure that may pass | counted against the per-index backoff limit |

130, 138 and 143 are the codes the archived TorchElastic controller already retried
(kubeflow/common pkg/util/train/train_util.go `IsRetryableExitCode`); 2 is argparse's usage error;
126 and 127 are POSIX shells' "cannot execute" and "not found".
"""

from __future__ import annotations

import signal

OK = 0
FAILURE = 1  # may pass on a retry (a network error, a crash): counted against the backoff limit
USAGE = 2
CANNOT_CONTINUE = 3
CANNOT_EXECUTE = 126
COMMAND_NOT_FOUND = 127
INTERRUPTED = 128 + signal.SIGINT  # 130
KILLED = 128 + signal.SIGKILL  # 137: an OOM kill or SIGKILL, counted
STORE_UNAVAILABLE = 128 + signal.SIGUSR1  # 138
TERMINATED = 128 + signal.SIGTERM  # 143

# In the order the controller's podFailurePolicy lists them.
RETRYABLE = (INTERRUPTED, STORE_UNAVAILABLE, TERMINATED)
PERMANENT = (USAGE, CANNOT_CONTINUE, CANNOT_EXECUTE, COMMAND_NOT_FOUND)

# What the Job controller does with a worker pod that ended with a code (meaning()).
REPLACED, COUNTED, INDEX_FAILED = "replaced, not counted", "counted against the retry limit", "index failed for good"


def meaning(exit_code: int | None, disrupted: bool = False) -> str:
    """What the platform does with a worker pod that ended so (the podFailurePolicy, in order: a
    DisruptionTarget condition first, then the exit codes)."""
    if disrupted or exit_code in RETRYABLE:
        return REPLACED
    if exit_code in PERMANENT:
        return INDEX_FAILED
    return COUNTED


def from_returncode(returncode: int) -> int:
    """A child's exit status as a shell reports it: killed by signal N (negative in Python) is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode
