"""Real small and read-only volumes for the fault tests: a tmpfs of a given size (a full disk is a
real ENOSPC from the kernel) and a tmpfs remounted read-only (EROFS: root ignores file modes, so
chmod cannot make a folder unwritable for the root user these tests run as in the dev container).

Mounting needs CAP_SYS_ADMIN; where the tests run without it (a CI runner as a normal user) the
fixtures skip with that reason, and `file_size_limit` (RLIMIT_FSIZE, no privilege needed) stages
the same write failure another way (EFBIG).
"""

from __future__ import annotations

import contextlib
import resource
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    mounted = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): needs CAP_SYS_ADMIN")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount_read_only(where: Path) -> None:
    result = _mount("-o", "remount,ro", str(where))
    assert result.returncode == 0, result.stderr


def file_size_limit(limit_bytes: int):
    """preexec_fn for a child whose writes past `limit_bytes` fail with EFBIG (SIGXFSZ ignored)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return apply
