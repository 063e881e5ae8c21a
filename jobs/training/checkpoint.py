"""The files a training run keeps in RUN_DIR, each written so that no reader ever sees half of it.

    checkpoint.pt           after every epoch: weights, optimizer state, next epoch, run settings
    checkpoint.previous.pt  the checkpoint before it: the fallback when checkpoint.pt fails its check
    model.pt                when the run is finished: weights + what evaluate needs to use them
    history.jsonl           one JSON line per start-up and per finished epoch, for people and tests

RUN_DIR is on EFS, shared by every worker pod: a crash at any moment must leave either the
old file or the new one, never a torn one. So we write a temporary file next to the target,
fsync it, and rename it over the target (rename is atomic on POSIX and on NFS).

A file can still be damaged after it was written (a disk, a copy, a person): torch reads a zip
without checking its CRCs, so a flipped byte in a tensor loads as a wrong (often NaN) weight. So
every file carries the SHA-256 of its content (`content_sha256`, over every tensor's bytes and
every other value, in a fixed order), and `load` refuses a file whose content does not match it.
The payload is serialised in memory first: a full disk then fails as the OSError it is (ENOSPC
on our own write), not as torch's "unexpected pos" from inside its zip writer.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import time
from pathlib import Path

import torch

from jobs.cli import VOLUME_ERRNOS, RunCannotContinue, volume_error

from elastic_training import run_directory

# The run directory's names are the platform's contract (elastic_training.run_directory).
CHECKPOINT_NAME = run_directory.CHECKPOINT
PREVIOUS_CHECKPOINT_NAME = run_directory.PREVIOUS_CHECKPOINT
REJECTED_CHECKPOINT_NAME = run_directory.REJECTED_CHECKPOINT  # a checkpoint that failed its check, kept to look at
DIGEST_KEY = "content_sha256"
MODEL_NAME = run_directory.MODEL
HISTORY_NAME = run_directory.HISTORY
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


class CorruptFile(RunCannotContinue):
    """A checkpoint or model file that is missing, unreadable, or fails its content check."""


def _feed(digest, value) -> None:
    # Every value with its type and length first, so that no two different payloads hash alike.
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        digest.update(f"T{tensor.dtype}{tuple(tensor.shape)};".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())
    elif isinstance(value, dict):
        digest.update(f"D{len(value)};".encode())
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f"L{len(value)};".encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, str):
        encoded = value.encode()
        digest.update(f"S{len(encoded)};".encode() + encoded)
    elif value is None or isinstance(value, (bool, int, float)):
        digest.update(f"{type(value).__name__}:{value!r};".encode())
    else:
        raise TypeError(f"cannot digest a {type(value).__name__} in a checkpoint")


def content_digest(payload: dict) -> str:
    """SHA-256 of a payload's content (its tensors' bytes and its other values), as saved and as loaded."""
    digest = hashlib.sha256()
    _feed(digest, {key: value for key, value in payload.items() if key != DIGEST_KEY})
    return digest.hexdigest()


def save_atomically(payload: dict, path: Path, keep_previous: bool = False) -> None:
    """Write `payload` (with its content digest) to `path` atomically; `keep_previous`: the file
    it replaces becomes PREVIOUS_CHECKPOINT_NAME, the fallback when the new one fails its check."""
    path = Path(path)
    buffer = io.BytesIO()
    torch.save({**payload, DIGEST_KEY: content_digest(payload)}, buffer)
    temporary = path.with_name(f".{path.name}{_TEMPORARY_MARK}{os.getpid()}")
    try:
        with open(temporary, "wb") as file:
            file.write(buffer.getbuffer())
            file.flush()
            os.fsync(file.fileno())
        if keep_previous and path.exists():
            # A crash between these two renames leaves only the previous file: load_newest_valid
            # then resumes from it.
            os.replace(path, path.with_name(PREVIOUS_CHECKPOINT_NAME))
        os.replace(temporary, path)
    except BaseException as error:
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only volume refuses even this; nothing was created there then
        if isinstance(error, OSError) and error.errno in VOLUME_ERRNOS:
            raise volume_error(error, path) from None
        raise
    _fsync_directory(path.parent)


def remove_stale_temporary_files(run_dir: Path) -> None:
    """Delete temporaries left by a writer that was SIGKILLed mid-write (only call this when
    no other process can be writing, i.e. before training starts)."""
    for leftover in Path(run_dir).glob(f".*{_TEMPORARY_MARK}*"):
        leftover.unlink(missing_ok=True)


def _why_unreadable(error: Exception) -> str:
    """torch's reason in one clause, without its advice to load with weights_only=False (which
    would run whatever code the file holds)."""
    if isinstance(error, pickle.UnpicklingError) and "Weights only load failed" in str(error):
        detail = next((line.split("error:", 1)[1].strip() for line in str(error).splitlines()
                       if "WeightsUnpickler error:" in line), "")  # fmt: skip
        return "it holds objects other than tensors and plain data" + (f" ({detail.split('. ')[0]})" if detail else "")
    first_line = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return first_line


def load(path: Path, what: str) -> dict:
    """Load a checkpoint or model file and check it against its content digest; `weights_only`
    refuses anything but tensors and plain data. Files written before digests load unchecked."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CorruptFile(f"{what} {path} does not exist") from None
    except OSError as error:
        raise CorruptFile(f"cannot read {what} {path}: {error.strerror}") from None
    if size == 0:
        raise CorruptFile(f"{what} {path} is empty (0 bytes): its write never completed")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as error:
        raise CorruptFile(f"cannot read {what} {path}: {error.strerror or error}") from None
    except Exception as error:
        raise CorruptFile(f"{what} {path} is not readable as a file written by jobs.training.train "
                          f"({_why_unreadable(error)}; {size} bytes)") from None  # fmt: skip
    if not isinstance(payload, dict):
        raise CorruptFile(f"{what} {path} is not a file written by jobs.training.train")
    expected = payload.pop(DIGEST_KEY, None)
    if expected is not None:
        try:
            actual = content_digest(payload)
        except TypeError as error:
            raise CorruptFile(f"{what} {path} is not a file written by jobs.training.train ({error})") from None
        if actual != expected:
            raise CorruptFile(f"{what} {path} is corrupted: its content does not match the SHA-256 saved with it "
                              f"({actual[:12]}... instead of {expected[:12]}...)")  # fmt: skip
    return payload


def append_history(run_dir: Path, record: dict) -> None:
    """One JSON line per event. A single writer (rank 0) appends; a torn last line after a
    crash is tolerated by read_history."""
    line = json.dumps({"time": round(time.time(), 3), **record}, sort_keys=True)
    path = Path(run_dir) / HISTORY_NAME
    # After a crash mid-append the last line has no newline: start on a new line, or this record
    # would be glued to the fragment and skipped with it.
    torn = _ends_without_newline(path)
    try:
        with open(path, "a") as file:
            file.write(("\n" if torn else "") + line + "\n")
            file.flush()
            os.fsync(file.fileno())
    except OSError as error:
        if error.errno in VOLUME_ERRNOS:
            raise volume_error(error, path) from None
        raise


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
