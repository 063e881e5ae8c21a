"""Command-line conventions shared by the jobs.

A pod's log is read by a person who did not write this code, so bad input is reported as
ONE line naming what is wrong and what is allowed, never as a traceback. Real bugs still
raise normally: their traceback is what a developer needs.
"""

from __future__ import annotations

import argparse
import errno
import logging
import math
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence

from jobs import exit_codes, termination

EXIT_OK = exit_codes.OK
EXIT_FAILURE = exit_codes.FAILURE  # may pass on a retry: an unreachable source, a crash
EXIT_USAGE = exit_codes.USAGE  # bad command line (argparse's convention)
EXIT_CANNOT_CONTINUE = exit_codes.CANNOT_CONTINUE  # permanent: see jobs.exit_codes
EXIT_BELOW_GATE = exit_codes.CANNOT_CONTINUE  # evaluate: accuracy below --min-accuracy


class JobError(Exception):
    """A problem the user can fix; reported as one line and a non-zero exit."""

    exit_code = EXIT_FAILURE


class UsageError(JobError):
    exit_code = EXIT_USAGE


class RunCannotContinue(JobError):
    """A retry cannot help (a corrupt checkpoint, data that fails its check, a full or read-only
    volume, a non-finite loss): exit 3, which the controller does not retry."""

    exit_code = EXIT_CANNOT_CONTINUE


# A full, read-only or forbidden volume: the same write fails the same way on a retry.
VOLUME_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG})


class VolumeError(RunCannotContinue):
    """A write refused by the volume (full, read-only, no permission): exit 3."""


def volume_error(error: OSError, path) -> JobError:
    """One line for a write to `path` that failed: VolumeError (exit 3) for a full or read-only
    volume, else a JobError (exit 1, may pass on a retry: an NFS hiccup)."""
    cause = error.strerror or str(error)
    hint = {errno.ENOSPC: " (the volume is full: free space or grow it, then rerun)",
            errno.EDQUOT: " (the volume's quota is used up: free space, then rerun)",
            errno.EROFS: " (the volume is mounted read-only: mount it read-write)",
            errno.EFBIG: " (the file size limit of this process was reached)"}.get(error.errno or 0, "")  # fmt: skip
    kind = VolumeError if error.errno in VOLUME_ERRNOS else JobError
    return kind(f"cannot write {path}: {cause}{hint}")


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad command line as one line instead of usage + error."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see --help)")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def bounded_int(low: int, high: int):
    """A whole number in low..high, for argparse's `type`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, got {text}")
        return value

    parse.__name__ = f"whole number {low}..{high}"
    return parse


def bounded_float(low: float, high: float, low_inclusive: bool = True):
    """A finite number in [low, high] (or (low, high]), for argparse's `type`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        above_low = value >= low if low_inclusive else value > low
        if not (above_low and value <= high):  # NaN fails both
            bound = f"{'>=' if low_inclusive else '>'} {low:g} and <= {high:g}"
            raise argparse.ArgumentTypeError(f"must be a number {bound}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


# argparse prints the function name in "invalid <name> value"; give it a readable one.
positive_int.__name__ = "positive whole number"
positive_float.__name__ = "positive number"
non_negative_float.__name__ = "non-negative number"


def configure_logging(tag: str = "") -> None:
    """Timestamped INFO lines on stdout, which is what `kubectl logs` and torchrun show."""
    prefix = f"[{tag}] " if tag else ""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stdout,
        format=f"%(asctime)s {prefix}%(message)s",
        datefmt="%H:%M:%S",
        force=True,
    )


def _exit_on_sigterm(signum, frame):
    # Kubernetes stops a pod with SIGTERM. Turning it into SystemExit runs the `finally`
    # blocks that remove temporary files, so nothing half-written is left behind.
    raise SystemExit(128 + signum)


def run(
    main: Callable[[Sequence[str] | None], int],
    prog: str,
    *,
    clean_up_on_sigterm: bool = True,
    skip_interpreter_teardown: bool = False,
) -> None:
    """Run a job's main(), turning JobError into one line on stderr and an exit code.

    skip_interpreter_teardown: end with os._exit once output is flushed, running no
    destructors. For torchrun workers, whose process group must not be torn down (see
    jobs.training.distributed.join_process_group). Everything a run writes is fsynced before main() returns.
    """
    if clean_up_on_sigterm:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        code = main(None)
    except JobError as error:
        logging.shutdown()
        one_line = " ".join(str(error).split())  # messages quoted from libraries may span lines
        print(f"{prog}: error: {one_line}", file=sys.stderr, flush=True)
        code = error.exit_code
        if code in exit_codes.PERMANENT:
            termination.report_permanent(code, f"{prog}: {one_line}")
    except SystemExit as exit_request:  # --help, or SIGTERM turned into SystemExit
        if not skip_interpreter_teardown:
            raise
        code = exit_request.code if isinstance(exit_request.code, int) else int(exit_request.code is not None)
    except BaseException:  # a bug: its traceback is what a developer needs
        if not skip_interpreter_teardown:
            raise
        traceback.print_exc()
        code = EXIT_FAILURE
    if skip_interpreter_teardown:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
