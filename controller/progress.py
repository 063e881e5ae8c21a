"""status.progress: how far the run has got, read from its history on the shared volume.

jobs.training.train's rank 0 appends one JSON line per event to <run dir>/history.jsonl (jobs/training/checkpoint.py
append_history; every line has `time`, Unix seconds): `start` (epochs_done, position, epochs,
world_size, restart_count), `epoch` (epoch, loss, train_accuracy, images_per_second, seconds,
world_size), `checkpoint` and `stop` (epochs_done, position: jobs/elastic/step_boundary.py), `finished`.
The run directory is the worker container's ELASTIC_TRAINING_RUN_DIR (infra/specs/workloads.py sets it
for any training command; elastic_training.run_directory); the controller mounts the same volume read-only
(`--shared-root`, the claim `--shared-claim`) and reads nothing outside it. The run directory is a path in
the worker's file system: when the worker container's deepest volumeMount holding it is a plain mount of that
claim, the controller reads the same place under its own mount (the mount's subPath, then the path below the
mount), so the two may mount the claim at different paths (a user's ElasticJob; the pods-that-run tier,
whose pods see their mounts under their own roots). On another volume (an emptyDir, another claim, a
subPathExpr) it has no history to read; under no mount at all, it is read at its own path when that lies
under the shared root.

The history has no step counter: `imagesIntoEpoch` (the last saved position in the running epoch)
says how far into an epoch the run is. `goodput` is the share of wall time, since the first start,
that went into epochs that were kept (their `seconds`): restarts, rendezvous, lost work and
checkpoint saves are what it is short of 1 by; it is absent while no wall time has passed (the newest line stamped
in the same millisecond as the first start: a share of no time is no figure). `secondsLeft` is the epochs left times the mean
epoch time so far.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.render import WORKER, WORKER_CONTAINER
from elastic_training import history as history_schema, run_directory

HISTORY_NAME = run_directory.HISTORY
# A history is a few hundred bytes per epoch; a bigger file is not read whole.
MAX_BYTES = history_schema.MAX_BYTES
# A read that takes longer (a hung NFS server: open() and read() block in the kernel) is given up;
# the reconcile goes on without progress (issue 36 item 8).
READ_SECONDS = 2.0
# The numeric fields of a history record (jobs/training/train.py and jobs/elastic/step_boundary.py
# write them); a record where one has another type is skipped, not trusted (issue 36 item 9).
NUMERIC_FIELDS = (
    "time",
    "epochs_done",
    "position",
    "epochs",
    "world_size",
    "restart_count",
    "epoch",
    "loss",
    "train_accuracy",
    "images_per_second",
    "seconds",
    "step",
)


class Unreadable(Exception):
    """The history exists but cannot be read as a history (not a regular file, too slow, an I/O error)."""


@dataclass(frozen=True)
class History:
    """What the controller knows of a run from its history: `known` when the run directory is on the
    mount (so a missing file means the run wrote nothing yet), `progress` its summary (None: no
    records), `error` why it could not be read."""

    known: bool
    progress: dict[str, Any] | None = None
    error: str | None = None

    @property
    def finished(self) -> bool | None:
        """True: the run recorded its end; False: its history has a `start` but no end; None: no
        history to ask (no mount, no run directory under it, no file or no `start` record: a script that
        writes none) or one that cannot be read now (`error`: status.derive waits, then falls back to
        the Job's word; a read that failed is never taken for an unfinished run)."""
        if not self.known or self.progress is None:
            return None
        return bool(self.progress.get("finished"))


def _worker(elasticjob: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the worker pod template's spec, its worker container), each {} when absent."""
    template = (((elasticjob.get("spec") or {}).get("replicaSpecs") or {}).get(WORKER) or {}).get("template") or {}
    pod = template.get("spec") or {}
    container: dict[str, Any] = next((c for c in pod.get("containers") or [] if c.get("name") == WORKER_CONTAINER), {})
    return pod, container


def run_dir(elasticjob: dict[str, Any]) -> str | None:
    """The worker container's ELASTIC_TRAINING_RUN_DIR (run_directory.RUN_DIR_ENV, which the stack sets
    whatever command the workers run), or None."""
    for variable in _worker(elasticjob)[1].get("env") or []:
        if variable.get("name") == run_directory.RUN_DIR_ENV and isinstance(variable.get("value"), str):
            return variable["value"]
    return None


_NOT_MOUNTED = "not mounted"  # _on_claim: no volumeMount of the worker holds the run directory


def _on_claim(elasticjob: dict[str, Any], directory: str, claim: str | None) -> str | None:
    """`directory` (a path in the worker's file system) as a path relative to the root of the claim the
    controller mounts (`claim`; None: any PersistentVolumeClaim), when the worker's deepest volumeMount
    holding it is a plain mount of that claim; _NOT_MOUNTED when no mount holds it; else None (it is on
    another volume: an emptyDir inside the claim's mount, another claim, a subPathExpr that only the pod's
    own environment settles)."""
    pod, container = _worker(elasticjob)
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
    holding = [
        (where, m)
        for m in container.get("volumeMounts") or []
        if Path(directory).is_relative_to(where := _normal(str(m.get("mountPath") or "/")))
    ]
    if not holding:
        return _NOT_MOUNTED
    where, mount = max(holding, key=lambda pair: len(pair[0]))
    source = (volumes.get(mount.get("name")) or {}).get("persistentVolumeClaim") or {}
    if not source or (claim is not None and source.get("claimName") != claim) or mount.get("subPathExpr"):
        return None
    return os.path.join(str(mount.get("subPath") or ""), os.path.relpath(directory, where))


def _normal(path: str) -> str:
    """A path as the kernel reads it: normalised, and one leading slash (normpath keeps a leading '//')."""
    return "/" + os.path.normpath(path).lstrip("/")


def history_file(elasticjob: dict[str, Any], shared_root: Path, claim: str | None = None) -> Path | None:
    """<run dir>/history.jsonl as the controller sees it under `shared_root`, its mount of `claim` (the
    module docstring), else None (the run directory is on no volume the controller has)."""
    directory = run_dir(elasticjob)
    if not directory or not os.path.isabs(directory):
        return None
    directory = _normal(directory)
    relative = _on_claim(elasticjob, directory, claim)
    if relative is None:
        return None
    # Lexical only: resolve() stats every component, which blocks on a hung NFS mount, and this runs
    # in the reconcile thread (review ctrl-1 item 3). Symbolic links are followed, and checked, in
    # the bounded read's own thread (_bounded_read, `root`).
    path = Path(
        os.path.abspath(
            os.path.join(directory, HISTORY_NAME)
            if relative == _NOT_MOUNTED
            else os.path.join(shared_root, relative, HISTORY_NAME)
        )
    )
    return path if path.is_relative_to(os.path.abspath(shared_root)) else None


class Outside(Exception):
    """The history's real path (its symbolic links followed) leaves the shared volume."""


def _read_tail(path: Path) -> bytes:
    """The last MAX_BYTES of a regular file. O_NONBLOCK: opening a FIFO for reading would otherwise
    wait for a writer for ever; fstat then refuses anything but a regular file (a FIFO, a device)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Unreadable(f"{path} is not a regular file")
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, max(0, size - MAX_BYTES), os.SEEK_SET)
        chunks, left = [], min(size, MAX_BYTES)
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_stuck: set[Path] = set()  # paths whose last read has not returned yet (a hung mount): not read again meanwhile
_stuck_lock = threading.Lock()


def _bounded_read(path: Path, seconds: float, root: Path | None = None) -> bytes:
    """_read_tail in a daemon thread, waited for at most `seconds`. A read that never returns keeps
    only its own thread (one per path at most), never the reconcile."""
    with _stuck_lock:
        if path in _stuck:
            raise Unreadable(f"reading {path} has not returned yet (a hung volume?)")
    result: dict[str, Any] = {}

    def read() -> None:
        try:
            if root is not None and not path.resolve().is_relative_to(root.resolve()):
                raise Outside(f"{path} leads out of {root}")
            result["data"] = _read_tail(path)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            result["error"] = error
        finally:
            with _stuck_lock:
                _stuck.discard(path)

    with _stuck_lock:
        _stuck.add(path)
    thread = threading.Thread(target=read, name=f"history-read {path}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Unreadable(f"reading {path} took more than {seconds:g} s")
    if "error" in result:
        raise result["error"]
    return result["data"]


def _valid(record: Any) -> bool:
    """A record whose known numeric fields are numbers (a bool is not one)."""
    if not isinstance(record, dict) or not isinstance(record.get("event", ""), str):
        return False
    return all(
        isinstance(record[key], (int, float)) and not isinstance(record[key], bool)
        for key in NUMERIC_FIELDS
        if key in record
    )


def read_records(path: Path, seconds: float = READ_SECONDS, root: Path | None = None) -> list[dict[str, Any]]:
    """The history's records; a torn last line (a crash mid-append) and a line that is not a record
    of the history's schema are skipped, as jobs/ reads it. No file: no records. Unreadable when it
    cannot be read as a regular file within `seconds`."""
    try:
        data = _bounded_read(path, seconds, root)
    except FileNotFoundError:
        return []
    except OSError as error:
        raise Unreadable(f"{path}: {error.strerror or error}") from None
    records = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if _valid(record):
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
    progress: dict[str, Any] = {
        "epoch": done,
        "epochs": total,
        "worldSize": starts[-1].get("world_size"),
        "restarts": len(starts) - 1,
    }
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
        progress.update(
            loss=last.get("loss"), accuracy=last.get("train_accuracy"), imagesPerSecond=last.get("images_per_second")
        )
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


def history(
    elasticjob: dict[str, Any], shared_root: Path | None, seconds: float = READ_SECONDS, claim: str | None = None
) -> History:
    """What the run's history says; never raises (progress is best effort, the lifecycle goes on)."""
    path = history_file(elasticjob, shared_root, claim) if shared_root is not None else None
    if path is None:
        return History(known=False)
    try:
        return History(known=True, progress=summarize(read_records(path, seconds, shared_root)))
    except Outside:
        return History(known=False)
    except Unreadable as error:
        return History(known=True, error=str(error))
    except Exception as error:  # noqa: BLE001 - a history we did not foresee must not stop the status write
        return History(known=True, error=f"{path}: {type(error).__name__}: {error}")


def read(elasticjob: dict[str, Any], shared_root: Path | None, claim: str | None = None) -> dict[str, Any] | None:
    """status.progress for `elasticjob`, or None (no shared volume, no run directory, no history yet,
    or a history that cannot be read)."""
    return history(elasticjob, shared_root, claim=claim).progress
