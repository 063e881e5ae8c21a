"""How far a run has got, as RUN_DIR/checkpoint.pt records it, and when to record it again.

A checkpoint holds the weights, the optimizer state and the place in the data: `epochs_done`
finished epochs plus `position` images of the next epoch's order (jobs.sampling), with the loss
and accuracy sums of that partial epoch so its history line covers all of it. Position 0 is an
epoch boundary, the only kind of checkpoint older versions wrote (they have no `position`).

Rank 0 writes it at the end of every epoch, every `--checkpoint-every-seconds` of training, and
when the workers stop on SIGTERM (jobs.stopping).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from jobs import checkpoint, cli


@dataclass(frozen=True)
class Progress:
    epochs_done: int
    position: int = 0  # images of epoch `epochs_done`'s order already trained on
    loss_sum: float = 0.0  # that partial epoch so far, all workers together
    correct: int = 0
    seen: int = 0


def read_checkpoint(run_dir: Path, settings, num_images: int) -> tuple[dict, Progress] | None:
    """The saved state and where it stands, or None without a checkpoint. `settings` is the
    run's RunSettings: a checkpoint of other settings, or of a data set of another size (its
    positions would point at other images), is refused with one line."""
    path = run_dir / checkpoint.CHECKPOINT_NAME
    if not path.exists():
        return None
    saved = checkpoint.load(path, "checkpoint")
    saved_settings = saved.get("settings", {})
    differences = [
        f"{name} {saved_settings.get(name)!r} there, {value!r} now"
        for name, value in asdict(settings).items()
        if saved_settings.get(name) != value
    ]
    if saved.get("num_images", num_images) != num_images:
        differences.append(f"{saved['num_images']} training images there, {num_images} now")
    if differences:
        raise cli.JobError(
            f"{path} belongs to a run with other settings ({'; '.join(differences)}): "
            "rerun with the same settings to resume it, or pass a new --run-dir"
        )
    sums = saved.get("epoch_sums", {})
    progress = Progress(saved["epochs_done"], saved.get("position", 0), sums.get("loss_sum", 0.0),
                        sums.get("correct", 0), sums.get("seen", 0))  # fmt: skip
    return saved, progress


def save_checkpoint(run_dir: Path, model, optimizer, settings, normalization, num_images: int, progress: Progress) -> None:
    checkpoint.save_atomically(
        {
            "settings": asdict(settings),
            "epochs_done": progress.epochs_done,
            "position": progress.position,
            "num_images": num_images,
            "epoch_sums": {"loss_sum": progress.loss_sum, "correct": progress.correct, "seen": progress.seen},
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "normalization": normalization.to_dict(),
        },
        run_dir / checkpoint.CHECKPOINT_NAME,
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
    boundary (jobs.step_vote), so the vote goes out that much early: two saved states are never
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
