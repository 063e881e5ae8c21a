"""How a worker's exit code tells the controller what to do: the one table, read by the jobs and
(written once more, with a test comparing the two) by the maintained ElasticJob controller.

| code | meaning | the controller |
|---|---|---|
| 0 | done | the index succeeded |
| 130, 143 | SIGINT / SIGTERM: preempted, drained, stopped from outside | pod replaced, not counted |
| 138 | the rendezvous store stayed unreachable past its bound | pod replaced, not counted |
| 2 | bad input or usage | permanent: the index fails at once |
| 126, 127 | the image cannot run the command | permanent |
| 3 | the run cannot go on and a retry cannot help: non-finite loss, no valid checkpoint, data that fails its check, disk full, read-only run directory, more agents than the rendezvous admits | permanent |
| anything else (1, 137 OOM, ...) | a failure that may pass | counted against the per-index backoff limit |
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

PERMANENT = frozenset({USAGE, CANNOT_CONTINUE, CANNOT_EXECUTE, COMMAND_NOT_FOUND})
REPLACED_NOT_COUNTED = frozenset({INTERRUPTED, STORE_UNAVAILABLE, TERMINATED})


def from_returncode(returncode: int) -> int:
    """A child's exit status as a shell reports it: killed by signal N (negative in Python) is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode
