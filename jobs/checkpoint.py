"""The files a training run keeps in RUN_DIR, each written so that no reader ever sees half of it.

    checkpoint.pt   after every epoch: weights, optimizer state, next epoch, run settings
    model.pt        when the run is finished: weights + what evaluate needs to use them
    history.jsonl   one JSON line per start-up and per finished epoch, for people and tests

RUN_DIR is on EFS, shared by every worker pod: a crash at any moment must leave either the
old file or the new one, never a torn one. So we write a temporary file next to the target,
fsync it, and rename it over the target (rename is atomic on POSIX and on NFS).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from jobs.cli import JobError

CHECKPOINT_NAME = "checkpoint.pt"
MODEL_NAME = "model.pt"
HISTORY_NAME = "history.jsonl"
_TEMPORARY_MARK = ".tmp-"


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable on local file systems; NFS commits it on rename already.
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def save_atomically(payload: dict, path: Path) -> None:
    path = Path(path)
    temporary = path.with_name(f".{path.name}{_TEMPORARY_MARK}{os.getpid()}")
    try:
        with open(temporary, "wb") as file:
            torch.save(payload, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def remove_stale_temporary_files(run_dir: Path) -> None:
    """Delete temporaries left by a writer that was SIGKILLed mid-write (only call this when
    no other process can be writing, i.e. before training starts)."""
    for leftover in Path(run_dir).glob(f".*{_TEMPORARY_MARK}*"):
        leftover.unlink(missing_ok=True)


def load(path: Path, what: str) -> dict:
    """Load a checkpoint or model file; `weights_only` refuses anything but tensors and plain data."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise JobError(f"{what} {path} does not exist") from None
    except Exception as error:
        raise JobError(f"{what} {path} is not readable as a file written by jobs.train ({error})") from None
    if not isinstance(payload, dict):
        raise JobError(f"{what} {path} is not a file written by jobs.train")
    return payload


def append_history(run_dir: Path, record: dict) -> None:
    """One JSON line per event. A single writer (rank 0) appends; a torn last line after a
    crash is tolerated by read_history."""
    line = json.dumps({"time": round(time.time(), 3), **record}, sort_keys=True)
    path = Path(run_dir) / HISTORY_NAME
    # After a crash mid-append the last line has no newline: start on a new line, or this record
    # would be glued to the fragment and skipped with it.
    torn = _ends_without_newline(path)
    with open(path, "a") as file:
        file.write(("\n" if torn else "") + line + "\n")
        file.flush()
        os.fsync(file.fileno())


def _ends_without_newline(path: Path) -> bool:
    try:
        with open(path, "rb") as file:
            if file.seek(0, os.SEEK_END) == 0:
                return False
            file.seek(-1, os.SEEK_END)
            return file.read(1) != b"\n"
    except FileNotFoundError:
        return False


def read_history(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / HISTORY_NAME
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a crash mid-append
    return records
