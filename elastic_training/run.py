"""elastic_training.Run: what a plain torchrun training script lacks on the platform, in a few calls.

    run = Run()                                   # rank, world size, device; joins the process group
    state = run.resume()                          # the newest verified checkpoint (a dict), or None
    start = state["step"] if state else 0
    for step in range(start, steps):
        ...                                       # forward, backward, optimizer step
        run.check_loss(loss, step)                # a non-finite loss ends the run: exit 3, nothing saved from it
        run.log(step, loss=float(loss))           # a progress line in the run's history (rank 0, at most every N s)
        run.step_done(step + 1, lambda: {"model": model.module.state_dict(), "optimizer": optimizer.state_dict()})
    run.finish(model.module.state_dict())         # model.pt: the run is done; the process exits 0

step_done is where the workers agree, every quarter second, to checkpoint (every
`checkpoint_every_seconds`) or to stop (one of them got SIGTERM: a Spot notice, a drain, a group
re-forming): all of them act after the same step, rank 0 saves the state the callable returns (with
"step") atomically with its SHA-256, keeping the checkpoint before it, and on a stop every worker exits
143, which the platform answers by replacing the pod without counting a failure. The machinery is the
CIFAR-10 job's own: elastic_training.step_boundary, step_vote and stopping, jobs.training.checkpoint, and
elastic_training.checkpoints.

A failure a retry cannot fix (every checkpoint damaged, a non-finite loss, a full or read-only run
directory) ends the process with one line, the exit code of elastic_training.exit_codes (3: the index
fails at once) and, on rank 0, a `failed` line in the history.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from elastic_training import checkpoints, exit_codes, history, run_directory
from elastic_training.step_boundary import StepBoundary
from elastic_training.stopping import StopSignal
from jobs import cli, termination
from jobs.training import checkpoint
from jobs.training.distributed import WorkerPlace, join_process_group, maxima_over_workers, wait_for_all_workers_on_cpu
from jobs.training.loop import NonFiniteLoss, check_finite_loss
from jobs.training.progress import CheckpointClock, Progress
from jobs.training.runtime import choose_device

log = logging.getLogger("elastic_training")

__all__ = ["Run", "NonFiniteLoss"]

DEFAULT_RUN_DIR = "run"  # without $ELASTIC_TRAINING_RUN_DIR or run_dir=: ./run


class Run:
    """One worker's view of the run. Create it once, early, in every worker (it joins the process
    group when started by torchrun; alone it is rank 0 of 1).

    run_dir: default $ELASTIC_TRAINING_RUN_DIR (set by the platform), else ./run.
    checkpoint_every_seconds: a checkpoint by time, voted by all workers; 0: only on SIGTERM and save().
    save_on_sigterm: SIGTERM stops every worker at an agreed step after rank 0 saved it (exit 143).
    progress_every_seconds: the least time between two `progress` lines of log().
    pg_timeout_seconds: how long a collective waits for a peer that is gone (torch's default is 30 min).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike | None = None,
        *,
        checkpoint_every_seconds: float = 30.0,
        save_on_sigterm: bool = True,
        progress_every_seconds: float = 10.0,
        pg_timeout_seconds: float = 30.0,
    ) -> None:
        self.place = WorkerPlace.from_environment()
        self.rank, self.world_size, self.local_rank = self.place.rank, self.place.world_size, self.place.local_rank
        self.is_leader = self.place.is_leader
        self.device = choose_device(self.place.local_rank)
        # Never None: a default is given (from_environment returns None only without one).
        self.dir: Path = run_directory.from_environment(run_dir or DEFAULT_RUN_DIR) or Path(DEFAULT_RUN_DIR)
        self.data_dir = run_directory.data_from_environment()
        self.progress_every_seconds = progress_every_seconds
        self._last_progress = -math.inf
        self._state: Callable[[], dict] | None = None
        self._step = 0
        with self._failures():
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise cli.volume_error(error, f"run directory {self.dir}") from None
        if self.place.launched_by_torchrun and not torch.distributed.is_initialized():
            join_process_group(self.place, self.device, pg_timeout_seconds)
        self._stop_signal = StopSignal() if save_on_sigterm else None
        self._boundary = None
        if checkpoint_every_seconds > 0 or self._stop_signal is not None:
            self._boundary = StepBoundary(self.place, self.dir, self._save_voted, CheckpointClock(checkpoint_every_seconds),
                                          self._stop_signal)  # fmt: skip
        self._watch = contextlib.ExitStack()
        if self._stop_signal is not None:
            self._watch.enter_context(self._stop_signal.watching())

    @property
    def finished(self) -> bool:
        """model.pt exists: this run is done (a rerun of a finished run trains nothing)."""
        return (self.dir / run_directory.MODEL).exists()

    def resume(self) -> dict | None:
        """The newest checkpoint that passes its content check (its dict, with "step"), or None.
        Every worker reads it; they must agree on the step, or the run restarts (exit 1)."""
        with self._failures():
            found = checkpoints.newest_checkpoint(self.dir)
            step = int(found.state.get("step", 0)) if found else 0
            agreed = maxima_over_workers([-step, step], self.device)
            if -agreed[0] != agreed[1]:
                raise cli.JobError(f"workers read different checkpoints (steps {-agreed[0]} to {agreed[1]}); "
                                   "restarting the group")  # fmt: skip
            if self.is_leader:
                checkpoint.remove_stale_temporary_files(self.dir)
                checkpoints.set_rejected_aside(self.dir, found)
                self._history(history.START, epochs_done=0, position=step, step=step, world_size=self.world_size,
                              restart_count=self.place.restart_count)  # fmt: skip
        self._step = step
        if found:
            log.info("resuming from %s at step %d", found.path, step)
        return found.state if found else None

    def check_loss(self, loss: float | torch.Tensor, step: int) -> None:
        """End the run (exit 3, a `failed` line) if `loss` is NaN or infinite. On a GPU this reads
        the loss, which waits for the device: call it every few steps if that matters."""
        with self._failures():
            check_finite_loss(loss.detach() if isinstance(loss, torch.Tensor) else loss, f"step {step}")

    def log(self, step: int, **numbers: float) -> None:
        """A `progress` line in the run's history (rank 0; at most one per progress_every_seconds),
        which `elastic-training status` and the ElasticJob's status show."""
        now = time.monotonic()
        if not self.is_leader or now - self._last_progress < self.progress_every_seconds:
            return
        self._last_progress = now
        with self._failures():
            self._history(history.PROGRESS, step=step, world_size=self.world_size,
                          **{name: _plain(value) for name, value in numbers.items()})  # fmt: skip

    def step_done(self, step: int, state: Callable[[], dict]) -> None:
        """After every optimizer step, on every worker: `step` steps are done. When the workers agree
        to checkpoint or to stop, rank 0 saves `state()` (plus "step"); on a stop every worker then
        exits 143."""
        self._state, self._step = state, step
        if self._boundary is not None:
            with self._failures():
                try:
                    self._boundary.after_step(0, step, self._no_sums)
                except SystemExit as stop:  # stopped on SIGTERM, after the save: 143 without teardown
                    _exit(stop.code if isinstance(stop.code, int) else exit_codes.TERMINATED)

    def save(self, step: int, state: dict) -> None:
        """Checkpoint now (rank 0 writes; the others return at once), e.g. at the end of an epoch."""
        if self.is_leader:
            with self._failures():
                checkpoints.save_checkpoint(self.dir, {**state, "step": step})

    def finish(self, model_state: dict | None = None, exit_process: bool = True) -> None:
        """The run is done: rank 0 writes model.pt (if given) and a `finished` line; every worker
        waits for it. Then the process exits 0 without tearing down the process group (gloo's
        teardown can hang: jobs.training.distributed), unless exit_process=False."""
        if self._boundary is not None:
            self._boundary.finish()
        if self.is_leader:
            with self._failures():
                if model_state is not None:
                    checkpoints.save_model(self.dir, model_state)
                self._history(history.FINISHED, step=self._step)
        wait_for_all_workers_on_cpu()
        self._watch.close()
        if exit_process:
            _exit(exit_codes.OK)

    # --- inside ---

    def _no_sums(self) -> torch.Tensor:
        # StepBoundary adds up the CIFAR job's epoch sums over the workers; a generic loop has none.
        return torch.zeros(3, dtype=torch.float64, device=self.device)

    def _save_voted(self, progress: Progress) -> None:
        if self._state is not None:
            checkpoints.save_checkpoint(self.dir, {**self._state(), "step": progress.position})

    def _history(self, event: str, **fields) -> None:
        checkpoint.append_history(self.dir, {"event": event, **fields})

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """A JobError becomes one line, a `failed` history line on rank 0 and the contract's exit code."""
        try:
            yield
        except cli.JobError as error:
            line = " ".join(str(error).split())
            if self.is_leader and isinstance(error, cli.RunCannotContinue):
                with contextlib.suppress(OSError, cli.JobError):
                    self._history(history.FAILED, exit_code=error.exit_code, reason=line)
            print(f"elastic_training: error: {line}", file=sys.stderr, flush=True)
            if error.exit_code in exit_codes.PERMANENT:
                termination.report_permanent(error.exit_code, f"elastic_training: {line}")
            _exit(error.exit_code)


def _plain(value) -> float | int | str:
    if isinstance(value, torch.Tensor):
        value = value.item()
    return round(value, 6) if isinstance(value, float) else value


def _exit(code: int) -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
