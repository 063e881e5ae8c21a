"""status.progress: how far the run has got, read from its history on the shared volume.

jobs.training.train's rank 0 appends one JSON line per event to <run dir>/history.jsonl (jobs/training/checkpoint.py
append_history; every line has `time`, Unix seconds): `start` (epochs_done, position, epochs,
world_size, restart_count), `epoch` (epoch, loss, train_accuracy, images_per_second, seconds,
world_size), `checkpoint` and `stop` (epochs_done, position: jobs/elastic/step_boundary.py), `finished`.
The run directory is the worker's `--run-dir` argument (infra/specs/workloads.py training_args);
the controller mounts the same volume read-only at the same path, and reads nothing outside it.

The history has no step counter: `imagesIntoEpoch` (the last saved position in the running epoch)
says how far into an epoch the run is. `goodput` is the share of wall time, since the first start,
that went into epochs that were kept (their `seconds`): restarts, rendezvous, lost work and
checkpoint saves are what it is short of 1 by. `secondsLeft` is the epochs left times the mean
epoch time so far.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from controller.render import WORKER, WORKER_CONTAINER

HISTORY_NAME = "history.jsonl"  # jobs/training/checkpoint.py HISTORY_NAME
# A history is a few hundred bytes per epoch; a bigger file is not read whole.
MAX_BYTES = 4 * 1024 * 1024


def run_dir(elasticjob: dict[str, Any]) -> str | None:
    """The worker's --run-dir, or None."""
    template = (((elasticjob.get("spec") or {}).get("replicaSpecs") or {}).get(WORKER) or {}).get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        if container.get("name") != WORKER_CONTAINER:
            continue
        args = [str(a) for a in container.get("args") or []]
        for position, arg in enumerate(args):
            if arg.startswith("--run-dir="):
                return arg.partition("=")[2]
            if arg == "--run-dir" and position + 1 < len(args):
                return args[position + 1]
    return None


def history_file(elasticjob: dict[str, Any], shared_root: Path) -> Path | None:
    """<run dir>/history.jsonl when the run directory lies under `shared_root` (the mount), else None."""
    directory = run_dir(elasticjob)
    if not directory:
        return None
    path = (Path(directory) / HISTORY_NAME).resolve()
    root = shared_root.resolve()
    return path if path.is_relative_to(root) else None


def read_records(path: Path) -> list[dict[str, Any]]:
    """The history's records; a torn last line (a crash mid-append) is skipped, as jobs/ reads it."""
    try:
        with open(path, "rb") as file:
            size = file.seek(0, 2)
            file.seek(max(0, size - MAX_BYTES))
            text = file.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


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
    if "step" in latest:
        progress["step"] = latest["step"]
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
