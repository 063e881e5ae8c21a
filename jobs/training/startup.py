"""How long a worker took from its start to its first training step, phase by phase.

The worker's start is its process's start as the kernel recorded it (/proc/self/stat field 22,
starttime, in clock ticks after boot; /proc/uptime, seconds after boot now: proc(5)), so the
interpreter's start and every import before main() count too. Where /proc is missing (not
Linux), the start is when this module was imported.

    clock = StartupClock()
    ... clock.lap("data") ...
    log.info(clock.summary())   # first step 4.1 s after the worker started: imports 1.9 s, ...
"""

from __future__ import annotations

import os
import time

_IMPORTED_AT = time.time()


def process_start_time() -> float | None:
    """This process's start, in seconds since the epoch (time.time()'s clock), or None."""
    try:
        with open("/proc/self/stat") as stat_file, open("/proc/uptime") as uptime_file:
            now, stat, uptime = time.time(), stat_file.read(), float(uptime_file.read().split()[0])
        # Field 2 (the command) may hold spaces and parentheses: count fields after its closing ")".
        start_ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    return now - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


class StartupClock:
    """Phases in the order they ran; the first, "imports", runs from the process's start to the
    clock's creation (at the top of main())."""

    def __init__(self) -> None:
        started = process_start_time()
        # Both /proc clocks tick in hundredths: never later than this module's import.
        self.started = min(started, _IMPORTED_AT) if started is not None else _IMPORTED_AT
        self._last = time.time()
        self.phases: list[tuple[str, float]] = [("imports", self._last - self.started)]
        self.background = ""  # what ran in threads beside the phases, for the summary

    def lap(self, phase: str) -> float:
        """End `phase` now (it began where the last one ended); returns its seconds."""
        now = time.time()
        seconds, self._last = now - self._last, now
        self.phases.append((phase, seconds))
        return seconds

    @property
    def total(self) -> float:
        return self._last - self.started

    def summary(self) -> str:
        parts = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.phases)
        beside = f" ({self.background})" if self.background else ""
        return f"first step {self.total:.2f} s after the worker started: {parts}{beside}"
