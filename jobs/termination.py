"""Where a failure that a retry cannot fix is said, besides the log: the container's termination
message, and a note to jobs.elastic.agent so that torchrun does not restart its workers for nothing.

- The kubelet copies the file the container's terminationMessagePath names (the default,
  /dev/termination-log, unless the spec sets another; Kubernetes API: Container
  .terminationMessagePath, at most 4096 bytes read) into the pod's status,
  `state.terminated.message`. It exists only inside a container, so outside one nothing is written.
  JOBS_TERMINATION_LOG names another path (a spec that sets its own terminationMessagePath, or a test).
- jobs.elastic.agent sets JOBS_PERMANENT_FAILURE_FILE for its torchrun: a worker that fails permanently
  (exit 2 or 3) writes "<code> <line>" there, and the agent then stops torchrun instead of letting it
  restart the group --max_restarts times, each failing the same way, and exits with that code.
"""

from __future__ import annotations

import os
from pathlib import Path

TERMINATION_LOG = Path("/dev/termination-log")
TERMINATION_LOG_ENV = "JOBS_TERMINATION_LOG"
PERMANENT_FAILURE_FILE_ENV = "JOBS_PERMANENT_FAILURE_FILE"
_MESSAGE_LIMIT = 4096


def termination_log() -> Path:
    return Path(os.environ.get(TERMINATION_LOG_ENV) or TERMINATION_LOG)


def write_termination_message(message: str, path: Path | None = None) -> bool:
    """Leave `message` where the kubelet reads it; nothing where no such file exists (outside a
    container, the kubelet creates it before the container starts)."""
    path = termination_log() if path is None else Path(path)
    if not path.is_file():
        return False
    try:
        path.write_text(message[:_MESSAGE_LIMIT])
    except OSError:
        return False
    return True


def tell_agent(exit_code: int, line: str) -> None:
    """Tell the jobs.elastic.agent above this worker (if any) that it failed permanently; the first
    worker to fail wins, the others' lines only reach their own logs."""
    notice = os.environ.get(PERMANENT_FAILURE_FILE_ENV)
    if not notice:
        return
    try:
        with open(notice, "x") as file:
            file.write(f"{exit_code} {line}\n")
    except OSError:
        pass


def read_agent_notice(path: Path) -> tuple[int, str] | None:
    """(exit code, line) a worker left for the agent, or None."""
    try:
        code, _, line = Path(path).read_text().strip().partition(" ")
        return int(code), line
    except (OSError, ValueError):
        return None


def report_permanent(exit_code: int, line: str) -> None:
    write_termination_message(line)
    tell_agent(exit_code, line)
