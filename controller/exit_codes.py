"""What a worker's exit code means to the controller: the contract between the jobs, the controller
and the wait (the brief's table; tests/controller/test_controller_exit_codes.py compares it with the numbers
jobs/ exits with). The Job the controller renders carries it as its podFailurePolicy (render.py).

- 0 done;
- RETRYABLE: the pod is replaced and the failure is not counted: 130 SIGINT, 143 SIGTERM (a
  preemption or a drain: jobs.elastic.agent and jobs.elastic.stopping exit 143), 138 the rendezvous store stayed
  unreachable past its bound (jobs.elastic.torchrun EXIT_STORE_UNAVAILABLE; jobs/exit_codes.py is the workers' table, which a test compares);
- PERMANENT: the index fails at once, a retry cannot help: 2 bad input or usage (argparse's
  convention), 3 the run cannot go on (non-finite loss, no valid checkpoint, ...), 126 and 127 the
  image cannot run the command (POSIX shells' "cannot execute" and "not found");
- anything else (1, 137 OOM-killed, ...) counts against the per-index backoff limit.
"""

from __future__ import annotations

SUCCESS = 0
SIGINT_EXIT, STORE_UNREACHABLE_EXIT, SIGTERM_EXIT = 130, 138, 143
RETRYABLE = (SIGINT_EXIT, STORE_UNREACHABLE_EXIT, SIGTERM_EXIT)
USAGE_EXIT, CANNOT_GO_ON_EXIT, CANNOT_EXECUTE_EXIT, NOT_FOUND_EXIT = 2, 3, 126, 127
PERMANENT = (USAGE_EXIT, CANNOT_GO_ON_EXIT, CANNOT_EXECUTE_EXIT, NOT_FOUND_EXIT)

REPLACED, COUNTED, INDEX_FAILED = "replaced, not counted", "counted against the retry limit", "index failed for good"


def meaning(exit_code: int | None, disrupted: bool = False) -> str:
    """What the Job controller does with a worker pod that ended so (its podFailurePolicy, in order:
    a DisruptionTarget condition first, then the exit codes)."""
    if disrupted or exit_code in RETRYABLE:
        return REPLACED
    if exit_code in PERMANENT:
        return INDEX_FAILED
    return COUNTED
