"""The record jobs.data.prepare keeps of the data it published: DIR/cifar-10-batches-py/.prepared.json.

    {"request": {...what was asked for...}, "images": N,
     "files": {"data_batch_1": {"bytes": 31035704, "sha256": "..."}, ...}}

Sizes alone miss a flipped byte, so every file's SHA-256 is recorded. jobs.data.prepare rechecks every
digest on each run (a mismatch: the folder is built again), and jobs.training.train checks each file it
reads against its digest as it reads it (no second read): a mismatch refuses the data in one line.
hashlib's SHA-256 runs in C without the GIL on large buffers, so the files are hashed in parallel
threads, in large reads.

numpy-free and torch-free: jobs.data.prepare must start fast.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MANIFEST_NAME = ".prepared.json"
_READ_BYTES = 8 << 20


def sha256_of_bytes(raw: bytes | memoryview) -> str:
    return hashlib.sha256(raw).hexdigest()


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(_READ_BYTES)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as file:
        while count := file.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


def describe_files(folder: Path) -> dict[str, dict]:
    """{name: {"bytes", "sha256"}} for every file of `folder` except the record itself."""
    paths = [path for path in sorted(Path(folder).iterdir()) if path.name != MANIFEST_NAME and path.is_file()]
    with ThreadPoolExecutor(max_workers=max(1, min(len(paths), os.cpu_count() or 1))) as pool:
        digests = list(pool.map(sha256_of_file, paths))
    return {path.name: {"bytes": path.stat().st_size, "sha256": digest} for path, digest in zip(paths, digests)}


def read(folder: Path) -> dict | None:
    """The record of `folder`, or None where there is none (a folder jobs.data.prepare did not write)
    or it is not a record of this version (file sizes only, unreadable)."""
    try:
        record = json.loads((Path(folder) / MANIFEST_NAME).read_text())
        files = record["files"]
        if not all(isinstance(entry, dict) and {"bytes", "sha256"} <= entry.keys() for entry in files.values()):
            return None
        return record
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write(folder: Path, request: dict, images: int) -> dict:
    record = {"request": request, "files": describe_files(folder), "images": images}
    (Path(folder) / MANIFEST_NAME).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def differences(folder: Path, files: dict[str, dict]) -> list[str]:
    """Which recorded files are missing or differ now ("data_batch_2: content changed"), reading all."""
    folder = Path(folder)
    paths = [folder / name for name in files]
    found = []

    def check(path: Path) -> str | None:
        expected = files[path.name]
        try:
            size = path.stat().st_size
            if size != expected["bytes"]:
                return f"{path.name}: {size} bytes, {expected['bytes']} recorded"
            if sha256_of_file(path) != expected["sha256"]:
                return f"{path.name}: content changed (SHA-256 differs from the record)"
        except FileNotFoundError:
            return f"{path.name}: missing"
        except OSError as error:
            return f"{path.name}: unreadable ({error.strerror})"
        return None

    with ThreadPoolExecutor(max_workers=max(1, min(len(paths), os.cpu_count() or 1))) as pool:
        found = [difference for difference in pool.map(check, paths) if difference]
    return found
