"""What the workers do between two steps: checkpoint by time, and stop on SIGTERM, all together.

The workers vote (elastic_training.step_vote) every quarter second of training: "stop" if one got SIGTERM
(elastic_training.stopping), "checkpoint" if rank 0's clock says `--checkpoint-every-seconds` will have passed
since the last save by the time the vote takes effect. When a vote carries, every worker acts on it
at the same step boundary:
- checkpoint: the epoch's loss and accuracy sums are added up over the workers and rank 0 writes
  checkpoint.pt (atomically, jobs.training.checkpoint) with the position reached;
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
import time
from collections.abc import Callable
from pathlib import Path

import torch

from jobs.training import checkpoint
from jobs.training.distributed import WorkerPlace, sum_over_workers, wait_for_all_workers_on_cpu
from jobs.training.progress import CheckpointClock, Progress
from elastic_training.step_vote import Outcome, StepVote, proposed_gap
from elastic_training.stopping import EXIT_STOPPED, StopSignal

log = logging.getLogger("jobs.training.train")


class StepBoundary:
    def __init__(self, place: WorkerPlace, run_dir: Path, save: Callable[[Progress], None], clock: CheckpointClock,
                 stop_signal: StopSignal | None):  # fmt: skip
        self.place = place
        self.run_dir = run_dir
        self.save = save
        self.clock = clock
        self.stop_signal = stop_signal
        self.vote = StepVote()
        self._last_vote = time.monotonic()
        self._steps_since_vote = 0

    def after_step(self, epoch: int, position: int, sums: Callable[[], torch.Tensor]) -> None:
        """After a step that left `position` < N of epoch `epoch`; `sums` gives this worker's
        [loss sum, correct, seen] of the epoch so far (carried sums included on rank 0)."""
        self._boundary(epoch, position, sums)

    def after_epoch(self, epochs_done: int) -> None:
        """After rank 0 wrote the epoch's checkpoint (not after the last epoch)."""
        if self.place.is_leader:
            self.clock.saved(at=time.monotonic())
        self._boundary(epochs_done, 0, None)

    def finish(self) -> None:
        self.vote.settle()

    def _boundary(self, epoch: int, position: int, sums: Callable[[], torch.Tensor] | None) -> None:
        if self.stop_signal is not None:
            self.stop_signal.step_boundary()
        self._steps_since_vote += 1
        if not self.vote.is_voting_boundary():
            return
        now = time.monotonic()
        step_seconds = (now - self._last_vote) / self._steps_since_vote
        self._last_vote, self._steps_since_vote = now, 0
        self._act(self.vote.collect(), epoch, position, sums, now)
        leader = self.place.is_leader
        due = leader and self.clock.due(now, lookahead=self.vote.steps_until_effect() * step_seconds)
        stop_requested = self.stop_signal is not None and self.stop_signal.requested.is_set()
        immediate = self.vote.cast(stop_requested, due, proposed_gap(step_seconds) if leader else 0)
        if immediate is not None:  # alone
            self._act(immediate, epoch, position, sums, now)

    def _act(self, outcome: Outcome, epoch: int, position: int, sums, now: float) -> None:
        if not (outcome.stop or outcome.checkpoint):
            return
        with self.stop_signal.busy() if self.stop_signal else contextlib.nullcontext():
            if sums is None:  # at an epoch's end: its checkpoint is written already
                progress = Progress(epoch)
            else:
                loss_sum, correct, seen = sum_over_workers(sums().clone()).tolist()
                progress = Progress(epoch, position, loss_sum, int(correct), int(seen))
                if self.place.is_leader:
                    self.save(progress)
                    self.clock.saved(at=now)
                    self._history("checkpoint", progress, reason="sigterm" if outcome.stop else "time")
                    log.info("checkpoint saved (%s): epoch %d, %d images into it", "stopping" if outcome.stop else "time",
                             epoch + 1, position)  # fmt: skip
            if outcome.stop:
                self._stop(progress)

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
