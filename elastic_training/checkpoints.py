"""A run's checkpoints: the newest one that passes its check, and an atomic, checksummed save that keeps
the one before it. The CIFAR-10 job (jobs.training.progress) and elastic_training.Run both resume and
save through these functions; the file format (content SHA-256, write-then-rename) is
jobs.training.checkpoint's.

    found = newest_checkpoint(run_dir)        # None: no checkpoint yet; else found.state, found.path
    save_checkpoint(run_dir, {"model": ..., "optimizer": ..., "step": 1200})   # rank 0 only

A checkpoint that fails its check (a torn or damaged file) is never trained from: the previous one is
used, with one warning naming the file and why. When every checkpoint fails, the run cannot go on
(CorruptFile, exit 3): starting over silently would throw its work away.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from elastic_training import run_directory
from jobs.training import checkpoint

log = logging.getLogger("elastic_training")

CorruptFile = checkpoint.CorruptFile


@dataclass(frozen=True)
class Found:
    state: dict
    path: Path  # checkpoint.pt, or checkpoint.previous.pt after a fallback
    rejected: tuple[str, ...] = ()  # why each newer checkpoint was refused


def newest_checkpoint(run_dir: Path) -> Found | None:
    """The newest checkpoint in `run_dir` that passes its check; None when there is none at all.
    Raises CorruptFile (exit 3) when there are checkpoints and none passes."""
    run_dir = Path(run_dir)
    rejected: list[str] = []
    for name in (run_directory.CHECKPOINT, run_directory.PREVIOUS_CHECKPOINT):
        path = run_dir / name
        if not path.exists():
            continue
        try:
            return Found(checkpoint.load(path, "checkpoint"), path, tuple(rejected))
        except checkpoint.CorruptFile as error:
            log.warning("WARNING: %s; trying the checkpoint before it", error)
            rejected.append(str(error))
    if rejected:
        raise checkpoint.CorruptFile(
            f"no usable checkpoint in {run_dir}: {'; '.join(rejected)}. Move the checkpoint files away to "
            "start the run over, or use a new run directory"
        )
    return None


def set_rejected_aside(run_dir: Path, found: Found | None) -> None:
    """After a fallback, the refused checkpoint.pt becomes checkpoint.rejected.pt (kept to look at):
    the next save must not make it the fallback. Rank 0 only, once every worker has read."""
    if found is not None and found.rejected and found.path.name != run_directory.CHECKPOINT:
        bad = Path(run_dir) / run_directory.CHECKPOINT
        if bad.exists():
            bad.replace(Path(run_dir) / run_directory.REJECTED_CHECKPOINT)


def save_checkpoint(run_dir: Path, state: dict) -> None:
    """Write `state` (tensors and plain data) as run_dir/checkpoint.pt, atomically, with its SHA-256;
    the checkpoint it replaces becomes checkpoint.previous.pt. Rank 0 only."""
    checkpoint.save_atomically(state, Path(run_dir) / run_directory.CHECKPOINT, keep_previous=True)


def save_model(run_dir: Path, state: dict) -> None:
    """Write run_dir/model.pt (atomically, with its SHA-256): the run is finished. Rank 0 only."""
    checkpoint.save_atomically(state, Path(run_dir) / run_directory.MODEL)


def load_model(run_dir: Path) -> dict:
    """run_dir/model.pt, checked against its SHA-256 (CorruptFile, exit 3, when it fails)."""
    return checkpoint.load(Path(run_dir) / run_directory.MODEL, "model")
