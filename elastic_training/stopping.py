"""SIGTERM during training: a request to save and stop at the next step boundary, with a deadline.

Who sends it (torch 2.13.0, torch/distributed/elastic/agent/server/api.py and
local_elastic_agent.py): torchrun's agent stops its workers with SIGTERM, then SIGKILLs them
after `--shutdown-timeout` (default 30 s, multiprocessing/api.py `_close`). It does so when its
own pod is stopped (a Spot interruption or a drain: the kubelet SIGTERMs jobs.elastic.agent, which
forwards it), and also when a new node waits to join (`_restart_workers` after
`num_nodes_waiting() > 0`): growing the world stops every worker too.

While training, SIGTERM therefore must not kill the worker: it sets `requested`, and the
training loop stops at a step boundary after saving (see jobs.training.train). Two cases still end the
process at once, with 143 (128 + SIGTERM, what the default action reports):
- before training starts and after it has finished, when there is nothing to save
  (`watching()` is only active around the loop);
- when the worker is stuck: blocked in a collective with a peer that is gone, its main thread
  never reaches a step boundary. Python runs signal handlers only in the main thread, between
  bytecodes, so a handler would never run there; instead CPython's C-level handler writes the
  signal number to a wakeup pipe (signal.set_wakeup_fd) and a thread reading that pipe sees it
  at once. If no step boundary follows within STUCK_SECONDS (or three times the slowest step
  seen, if more), that thread ends the process, so the agent can re-form the group without
  waiting for its own SIGKILL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

from elastic_training import exit_codes

log = logging.getLogger("jobs.training.train")

EXIT_STOPPED = exit_codes.TERMINATED  # 143, as if SIGTERM's default action had ended the worker
STUCK_SECONDS = 10.0


def _ignore(signum, frame) -> None:
    # A Python-level handler must be installed for CPython's C handler to write to the wakeup
    # fd; the work is done by the thread that reads it.
    pass


class StopSignal:
    """SIGTERM, turned into `requested` while `watching()` is active."""

    def __init__(self, stuck_seconds: float = STUCK_SECONDS):
        self.requested = threading.Event()
        self.stuck_seconds = stuck_seconds
        self._lock = threading.Lock()
        self._last_boundary = time.monotonic()
        self._slowest_step = 0.0
        self._busy = 0  # > 0 while saving or stopping: a long save is not a stuck worker

    def step_boundary(self) -> None:
        """Called by the training loop after every step: it is making progress."""
        now = time.monotonic()
        with self._lock:
            self._slowest_step = max(self._slowest_step, now - self._last_boundary)
            self._last_boundary = now

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Saving or stopping: bounded by the agent's own SIGKILL, never cut short here."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                self._last_boundary = time.monotonic()

    @contextlib.contextmanager
    def watching(self) -> Iterator[StopSignal]:
        """Catch SIGTERM for the duration; afterwards the previous handler (normally the default
        action: die at once) is back. Only the main thread may install handlers: elsewhere (a
        caller's thread) SIGTERM keeps its default action and nothing is saved on it."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)  # required by set_wakeup_fd
        previous_handler = signal.signal(signal.SIGTERM, _ignore)
        previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        reader = threading.Thread(target=self._read_signals, args=(read_end,), name="sigterm-reader", daemon=True)
        reader.start()
        try:
            yield self
        finally:
            signal.set_wakeup_fd(previous_fd)
            signal.signal(signal.SIGTERM, previous_handler)
            os.close(write_end)  # the reader sees end-of-file and returns
            reader.join(timeout=5)
            os.close(read_end)
        if self.requested.is_set() and previous_handler in (signal.SIG_DFL, None):
            # The SIGTERM was taken while watching: deliver its default action now, as it was meant.
            _exit_now("SIGTERM received during training")

    def _read_signals(self, read_end: int) -> None:
        while True:
            try:
                received = os.read(read_end, 64)
            except OSError:
                return
            if not received:
                return
            if signal.SIGTERM in received and not self.requested.is_set():
                self.requested.set()
                log.info("SIGTERM: saving a checkpoint and stopping after the current step")
                threading.Thread(target=self._exit_if_stuck, name="sigterm-deadline", daemon=True).start()

    def _exit_if_stuck(self) -> None:
        while True:
            time.sleep(0.2)
            with self._lock:
                if self._busy:
                    continue
                allowed = max(self.stuck_seconds, 3 * self._slowest_step)
                waited = time.monotonic() - self._last_boundary
            if waited > allowed:
                _exit_now(f"SIGTERM: no step finished for {waited:.0f} s (blocked on a peer that is gone?); "
                          "exiting without saving")  # fmt: skip


def _exit_now(reason: str) -> None:
    log.info("%s: exiting %d", reason, EXIT_STOPPED)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_STOPPED)
