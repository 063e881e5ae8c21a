"""A run's directory on the shared volume: where it is (two environment variables every worker gets,
locally and in pods) and the files the platform reads there. Training code of any kind writes these
names; the controller, `elastic-training status`, the test Job and the export Job read them.

    $ELASTIC_TRAINING_RUN_DIR/
        checkpoint.pt           the newest checkpoint (elastic_training.checkpoints: atomic, with a checksum)
        checkpoint.previous.pt  the one before it: the fallback when checkpoint.pt fails its check
        checkpoint.rejected.pt  a checkpoint.pt that failed its check, kept to look at
        model.pt                the finished model: its presence means "this run is done"
        history.jsonl           one JSON line per event (elastic_training.history), read by the status
        metrics.json            the test command's results; the gate reads one metric of it
    $ELASTIC_TRAINING_DATA_DIR/ the data-prep command's output, read by training and testing
"""

from __future__ import annotations

import os
from pathlib import Path

RUN_DIR_ENV = "ELASTIC_TRAINING_RUN_DIR"
DATA_DIR_ENV = "ELASTIC_TRAINING_DATA_DIR"

CHECKPOINT = "checkpoint.pt"
PREVIOUS_CHECKPOINT = "checkpoint.previous.pt"
REJECTED_CHECKPOINT = "checkpoint.rejected.pt"
MODEL = "model.pt"
HISTORY = "history.jsonl"
METRICS = "metrics.json"


def from_environment(default: str | os.PathLike | None = None) -> Path | None:
    """$ELASTIC_TRAINING_RUN_DIR, else `default` (None when neither is set)."""
    value = os.environ.get(RUN_DIR_ENV) or default
    return Path(value) if value else None


def data_from_environment(default: str | os.PathLike | None = None) -> Path | None:
    """$ELASTIC_TRAINING_DATA_DIR, else `default`."""
    value = os.environ.get(DATA_DIR_ENV) or default
    return Path(value) if value else None
