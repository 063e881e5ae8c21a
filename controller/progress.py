"""status.progress: how far the run has got, read from its history on the shared volume.

jobs.training.train's rank 0 appends one JSON line per event to <run dir>/history.jsonl (jobs/training/checkpoint.py
append_history; every line has `time`, Unix seconds): `start` (epochs_done, position, epochs,
world_size, restart_count), `epoch` (epoch, loss, train_accuracy, images_per_second, seconds,
world_size), `checkpoint` and `stop` (epochs_done, position: jobs/step_boundary.py), `finished`.
The run directory is the worker container's ELASTIC_TRAINING_RUN_DIR (infra/specs/workloads.py sets it
for any training command; elastic_training.run_directory); the controller mounts the same volume read-only at the same path, and reads nothing outside it.

The history has no step counter: `imagesIntoEpoch` (the last saved position in the running epoch)
says how far into an epoch the run is. `goodput` is the share of wall time, since the first start,
that went into epochs that were kept (their `seconds`): restarts, rendezvous, lost work and
checkpoint saves are what it is short of 1 by; it is absent while no wall time has passed (the newest line stamped
in the same millisecond as the first start: a share of no time is no figure). `secondsLeft` is the epochs left times the mean
epoch time so far.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from controller.render import WORKER, WORKER_CONTAINER
from elastic_training import history, run_directory


def run_dir(elasticjob: dict[str, Any]) -> str | None:
    """The worker container's ELASTIC_TRAINING_RUN_DIR (run_directory.RUN_DIR_ENV, which the stack sets
    whatever command the workers run), or None."""
    template = (((elasticjob.get("spec") or {}).get("replicaSpecs") or {}).get(WORKER) or {}).get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        if container.get("name") != WORKER_CONTAINER:
            continue
        for variable in container.get("env") or []:
            if variable.get("name") == run_directory.RUN_DIR_ENV and isinstance(variable.get("value"), str):
                return variable["value"]
    return None


def history_file(elasticjob: dict[str, Any], shared_root: Path) -> Path | None:
    """<run dir>/history.jsonl when the run directory lies under `shared_root` (the mount), else None."""
    directory = run_dir(elasticjob)
    if not directory:
        return None
    path = (Path(directory) / run_directory.HISTORY).resolve()
    root = shared_root.resolve()
    return path if path.is_relative_to(root) else None


def read_records(path: Path) -> list[dict[str, Any]]:
    """The history's records (its last history.MAX_BYTES); a torn last line (a crash mid-append) is skipped."""
    return history.read(path, history.MAX_BYTES)


def summarize(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """status.progress from history records, or None when there are none."""
    starts = [r for r in records if r.get("event") == "start"]
    if not starts:
        return None
    epochs = [r for r in records if r.get("event") == "epoch"]
    total = starts[-1].get("epochs")
    done = max([r.get("epoch", 0) for r in epochs] + [s.get("epochs_done", 0) for s in starts])
    progress: dict[str, Any] = {"epoch": done, "epochs": total, "worldSize": starts[-1].get("world_size"),
                                "restarts": len(starts) - 1}
    latest = records[-1]
    saved = [r for r in records if r.get("event") in ("start", "checkpoint", "stop") and r.get("epochs_done") == done]
    if saved and total is not None and done < total:
        progress["imagesIntoEpoch"] = saved[-1].get("position", 0)
    # Steps: what a training script on elastic_training reports (its `progress` lines, its starts and its end).
    stepped = [r for r in records if isinstance(r.get("step"), int) and not isinstance(r.get("step"), bool)]
    if stepped:
        progress["step"] = stepped[-1]["step"]
    reported = [r for r in records if r.get("event") == "progress" and isinstance(r.get("loss"), (int, float))]
    if reported and not epochs:
        progress["loss"] = reported[-1]["loss"]
    if epochs:
        last = epochs[-1]
        progress.update(loss=last.get("loss"), accuracy=last.get("train_accuracy"),
                        imagesPerSecond=last.get("images_per_second"))
        useful = sum(r.get("seconds", 0.0) for r in epochs)
        if total is not None:
            progress["secondsLeft"] = round(max(0, total - done) * useful / len(epochs))
        wall = (latest.get("time") or 0) - (starts[0].get("time") or 0)
        if wall > 0:
            progress["goodput"] = round(min(1.0, useful / wall), 3)
    progress["finished"] = any(r.get("event") == "finished" for r in records)
    if latest.get("time"):
        progress["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(latest["time"]))
    return progress


def read(elasticjob: dict[str, Any], shared_root: Path | None) -> dict[str, Any] | None:
    """status.progress for `elasticjob`, or None (no shared volume, no run directory, no history yet)."""
    if shared_root is None:
        return None
    path = history_file(elasticjob, shared_root)
    return summarize(read_records(path)) if path else None
