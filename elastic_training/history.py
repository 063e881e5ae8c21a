"""The run's history (run_directory.HISTORY): one JSON object per line, appended by rank 0 only, read
by the controller (status.progress) and `elastic-training status`. Every line has `time` (Unix
seconds) and `event`; the fields each event carries:

| event | written when | fields |
|---|---|---|
| start | the workers (re)start | epochs_done, position, epochs, world_size, restart_count, group |
| epoch | an epoch ends | epoch, loss, train_accuracy, images_per_second, seconds, world_size |
| checkpoint | a checkpoint by time or on SIGTERM | epochs_done, position, reason |
| stop | the workers stop on SIGTERM | epochs_done, position |
| progress | a training script reports a step (elastic_training.Run.log) | step, and its own numbers |
| finished | model.pt is written | epochs |
| failed | the run cannot go on (exit 3) | exit_code, reason |
| run-cost | the test Job, with the wait's measure of the run | its fields |
| evaluated | the gate read an own testCommand's metric (jobs.results.gate) | metric, value, min |

Readers ignore fields and events they do not know; a torn last line (a crash mid-append) is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

START, EPOCH, CHECKPOINT, STOP, PROGRESS, FINISHED, FAILED, RUN_COST, EVALUATED = (
    "start",
    "epoch",
    "checkpoint",
    "stop",
    "progress",
    "finished",
    "failed",
    "run-cost",
    "evaluated",
)
# A history is a few hundred bytes per epoch; a bigger file is read from its last MAX_BYTES.
MAX_BYTES = 4 * 1024 * 1024


def read(path: Path, max_bytes: int | None = None) -> list[dict[str, Any]]:
    """The records of a history file (its last `max_bytes`, if given); [] when it cannot be read."""
    try:
        with open(path, "rb") as file:
            if max_bytes is not None:
                size = file.seek(0, 2)
                file.seek(max(0, size - max_bytes))
            text = file.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line torn by a crash mid-append
        if isinstance(record, dict):
            records.append(record)
    return records
