"""What the workers do between two steps: checkpoint by time, and stop on SIGTERM, all together.

At every step boundary each worker votes (jobs.distributed.StepVote): "stop" if it got SIGTERM
(jobs.stopping), "checkpoint" if it is rank 0 and `--checkpoint-every-seconds` have passed since
the last save. When a vote carries, every worker acts on it at the same boundary:
- checkpoint: the epoch's loss and accuracy sums are added up over the workers and rank 0 writes
  checkpoint.pt (atomically, jobs.checkpoint) with the position reached;
- stop: the same save, then a barrier, so that no worker exits (and lets its agent start the
  next group, which reads checkpoint.pt) before the file is complete; then every worker exits 143.

Why rank 0 saves even when another worker got the SIGTERM: at the boundary every worker is
alive and holds the same weights and optimizer state (DistributedDataParallel keeps them
identical), and rank 0 also holds the batch-norm running statistics the others get from it at
the next step, so its state is the one an uninterrupted run would continue from. The worker that
got the SIGTERM only waits for the save; the agent gives it `--shutdown-timeout` (30 s) for that.
Workers that did not get a SIGTERM exit too: their agents then re-form the group without the
leaving node at once, instead of finding out through a failed collective.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

import torch

from jobs import checkpoint
from jobs.distributed import StepVote, WorkerPlace, sum_over_workers, wait_for_all_workers_on_cpu
from jobs.progress import CheckpointClock, Progress
from jobs.stopping import EXIT_STOPPED, StopSignal

log = logging.getLogger("jobs.train")


class StepBoundary:
    def __init__(self, place: WorkerPlace, run_dir: Path, save: Callable[[Progress], None], clock: CheckpointClock,
                 stop_signal: StopSignal | None):  # fmt: skip
        self.place = place
        self.run_dir = run_dir
        self.save = save
        self.clock = clock
        self.stop_signal = stop_signal
        self.vote = StepVote()

    def _stop_requested(self) -> bool:
        return self.stop_signal is not None and self.stop_signal.requested.is_set()

    def after_step(self, epoch: int, position: int, sums: Callable[[], torch.Tensor]) -> None:
        """After a step that left `position` < N of epoch `epoch`; `sums` gives this worker's
        [loss sum, correct, seen] of the epoch so far (carried sums included on rank 0)."""
        if self.stop_signal is not None:
            self.stop_signal.step_boundary()
        due = self.clock.due() if self.place.is_leader else False
        stop, save = self.vote.cast(self._stop_requested(), due)
        if not (stop or save):
            return
        with self.stop_signal.busy() if self.stop_signal else contextlib.nullcontext():
            loss_sum, correct, seen = sum_over_workers(sums().clone()).tolist()
            progress = Progress(epoch, position, loss_sum, int(correct), int(seen))
            if self.place.is_leader:
                self.save(progress)
                self.clock.saved()
                self._history("checkpoint", progress, reason="sigterm" if stop else "time")
                log.info("checkpoint saved (%s): epoch %d, %d images into it", "stopping" if stop else "time",
                         epoch + 1, position)  # fmt: skip
            if stop:
                self._stop(progress)

    def after_epoch(self, epochs_done: int) -> None:
        """After rank 0 wrote the epoch's checkpoint (not after the last epoch)."""
        if self.place.is_leader:
            self.clock.due()  # (the epoch's checkpoint is the state at this boundary)
            self.clock.saved()
        if self.stop_signal is not None:
            self.stop_signal.step_boundary()
        stop, _ = self.vote.cast(self._stop_requested(), False)  # a checkpoint voted for is the epoch's
        if stop:
            with self.stop_signal.busy():
                self._stop(Progress(epochs_done))

    def finish(self) -> None:
        self.vote.settle()

    def _stop(self, progress: Progress) -> None:
        if self.place.is_leader:
            self._history("stop", progress)
        wait_for_all_workers_on_cpu()  # checkpoint.pt is complete before any worker leaves
        log.info("stopped on SIGTERM after a checkpoint at epoch %d, %d images into it: exiting %d",
                 progress.epochs_done + 1, progress.position, EXIT_STOPPED)  # fmt: skip
        raise SystemExit(EXIT_STOPPED)

    def _history(self, event: str, progress: Progress, **extra) -> None:
        checkpoint.append_history(self.run_dir, {
            "event": event, "epochs_done": progress.epochs_done, "position": progress.position,
            "world_size": self.place.world_size, **extra,
        })  # fmt: skip

