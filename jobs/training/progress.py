"""How far a run has got, as RUN_DIR/checkpoint.pt records it, and when to record it again.

A checkpoint holds the weights, the optimizer state and the place in the data: `epochs_done`
finished epochs plus `position` images of the next epoch's order (jobs.data.sampling), with the loss
and accuracy sums of that partial epoch so its history line covers all of it. Position 0 is an
epoch boundary, the only kind of checkpoint older versions wrote (they have no `position`).

Rank 0 writes it at the end of every epoch, every `--checkpoint-every-seconds` of training, and
when the workers stop on SIGTERM (jobs.elastic.stopping). The one before it stays as
checkpoint.previous.pt: a checkpoint that fails its content check (jobs.training.checkpoint) is never
trained from; the run resumes from the previous one, with one line saying which file and why
(elastic_training.checkpoints, which elastic_training.Run uses too).

An epoch-end checkpoint also carries that epoch's history line, so a worker killed between the
checkpoint's rename and its history line leaves nothing missing: the next start writes the line.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from elastic_training import checkpoints
from jobs import cli
from jobs.training import checkpoint

log = logging.getLogger("jobs.training.train")


@dataclass(frozen=True)
class Progress:
    epochs_done: int
    position: int = 0  # images of epoch `epochs_done`'s order already trained on
    loss_sum: float = 0.0  # that partial epoch so far, all workers together
    correct: int = 0
    seen: int = 0


@dataclass(frozen=True)
class SavedState:
    state: dict
    progress: Progress
    path: Path  # the file it came from: checkpoint.pt, or checkpoint.previous.pt after a fallback
    rejected: tuple[str, ...] = ()  # why each newer checkpoint was refused


def read_checkpoint(run_dir: Path, settings, num_images: int) -> SavedState | None:
    """The saved state and where it stands, or None without a checkpoint. `settings` is the
    run's RunSettings: a checkpoint of other settings, or of a data set of another size (its
    positions would point at other images), is refused with one line."""
    found = checkpoints.newest_checkpoint(run_dir)
    if found is None:
        return None
    saved, path, rejected = found.state, found.path, found.rejected
    saved_settings = saved.get("settings", {})
    differences = [
        f"{name} {saved_settings.get(name)!r} there, {value!r} now"
        for name, value in asdict(settings).items()
        if saved_settings.get(name) != value
    ]
    if saved.get("num_images", num_images) != num_images:
        differences.append(f"{saved['num_images']} training images there, {num_images} now")
    if differences:
        raise cli.UsageError(
            f"{path} belongs to a run with other settings ({'; '.join(differences)}): "
            "rerun with the same settings to resume it, or pass a new --run-dir"
        )
    sums = saved.get("epoch_sums", {})
    progress = Progress(saved["epochs_done"], saved.get("position", 0), sums.get("loss_sum", 0.0),
                        sums.get("correct", 0), sums.get("seen", 0))  # fmt: skip
    return SavedState(saved, progress, path, rejected)


def set_rejected_aside(run_dir: Path, saved: SavedState | None) -> None:
    """After a fallback, the refused checkpoint.pt is set aside (elastic_training.checkpoints)."""
    if saved is not None:
        checkpoints.set_rejected_aside(run_dir, checkpoints.Found(saved.state, saved.path, saved.rejected))


def recover_epoch_line(run_dir: Path, saved: SavedState | None) -> bool:
    """Write the history line of the epoch the checkpoint ended if the history lacks it (the
    worker died between the two writes). Rank 0 only. True when a line was written."""
    if saved is None or saved.progress.position or "epoch_record" not in saved.state:
        return False
    record = saved.state["epoch_record"]
    if any(line.get("event") == "epoch" and line.get("epoch") == record.get("epoch")
           for line in checkpoint.read_history(run_dir)):  # fmt: skip
        return False
    checkpoint.append_history(run_dir, {**record, "recovered": True})
    return True


def save_checkpoint(
    run_dir: Path,
    model,
    optimizer,
    settings,
    normalization,
    num_images: int,
    progress: Progress,
    epoch_record: dict | None = None,
) -> None:
    """`epoch_record`: the history line of the epoch this checkpoint ends (see recover_epoch_line)."""
    extra = {"epoch_record": epoch_record} if epoch_record is not None else {}
    checkpoints.save_checkpoint(
        run_dir,
        {
            **extra,
            "settings": asdict(settings),
            "epochs_done": progress.epochs_done,
            "position": progress.position,
            "num_images": num_images,
            "epoch_sums": {"loss_sum": progress.loss_sum, "correct": progress.correct, "seen": progress.seen},
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "normalization": normalization.to_dict(),
        },
    )


def time_left(images_left: int, images_per_second: float) -> str:
    """How long the rest of the training takes at the rate just measured, for a progress line:
    "about 4 min 05 s left". The evaluation after it is not counted."""
    if images_per_second <= 0:
        return "time left unknown"
    hours, rest = divmod(round(images_left / images_per_second), 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"about {hours} h {minutes:02d} min left"
    if minutes:
        return f"about {minutes} min {seconds:02d} s left"
    return f"about {seconds} s left"


class CheckpointClock:
    """Rank 0's timer for checkpoints by time. `interval` 0: only at epoch ends (and on SIGTERM).

    A checkpoint voted for now happens `lookahead` seconds of training later, at the next voting
    boundary (jobs.elastic.step_vote), so the vote goes out that much early: two saved states are never
    more than `interval` apart, and neither is the work a worker lost without warning costs (plus
    the step in progress). The interval counts from the state saved, not from the end of its save."""

    def __init__(self, interval: float):
        self.interval = interval
        self._last = time.monotonic()  # when the state last saved was reached
        self._asked = False  # voted for a checkpoint that has not happened yet

    def due(self, now: float, lookahead: float) -> bool:
        """True once per interval."""
        if self.interval <= 0 or self._asked or now - self._last + lookahead < self.interval:
            return False
        self._asked = True
        return True

    def saved(self, at: float) -> None:
        """The state reached at time `at` (time.monotonic) is on disk."""
        self._last = at
        self._asked = False
