"""The controller's work queue: ElasticJob names to reconcile, one pass at a time (controller/__main__.py's
worker takes them; the watches in controller/watches.py and the resync put them)."""

from __future__ import annotations

import threading
import time


class WorkQueue:
    """ElasticJob names to reconcile, as client-go's workqueue keeps them (k8s.io/client-go
    util/workqueue: queue.go, delaying_queue.go, default_rate_limiters.go): a name is at most once
    ready and at most once waiting (the earliest time wins), so events, resyncs and retries never
    multiply its passes; a name that keeps failing or stays blocked waits longer each time
    (BACKOFF_BASE_SECONDS doubling to BACKOFF_MAX_SECONDS, as ItemExponentialFailureRateLimiter),
    until `forget`."""

    def __init__(self, base: float = 0.5, cap: float = 120.0) -> None:
        self._ready: list[str] = []
        self._waiting: dict[str, float] = {}  # name -> when it becomes ready (monotonic)
        self._failures: dict[str, int] = {}
        self._base, self._cap = base, cap
        self._cv = threading.Condition()

    def add(self, name: str, after: float = 0.0) -> None:
        with self._cv:
            if after > 0:
                due = time.monotonic() + after
                if name not in self._ready and due < self._waiting.get(name, float("inf")):
                    self._waiting[name] = due
            else:
                self._waiting.pop(name, None)
                if name not in self._ready:
                    self._ready.append(name)
            self._cv.notify()

    def add_unless_waiting(self, name: str) -> None:
        """A resync's add: a name already waiting (a backoff, a TTL) keeps its time."""
        with self._cv:
            if name not in self._waiting:
                self.add(name)

    def add_rate_limited(self, name: str) -> float:
        """Again after this name's next backoff delay; returns the delay."""
        with self._cv:
            failures = self._failures[name] = self._failures.get(name, 0) + 1
            delay = min(self._base * 2 ** (failures - 1), self._cap)
            self.add(name, after=delay)
            return delay

    def forget(self, name: str) -> None:
        with self._cv:
            self._failures.pop(name, None)

    def waiting(self) -> dict[str, float]:
        with self._cv:
            return dict(self._waiting)

    def get(self) -> str:
        with self._cv:
            while True:
                now = time.monotonic()
                for name, due in sorted(self._waiting.items(), key=lambda item: item[1]):
                    if due <= now:
                        del self._waiting[name]
                        if name not in self._ready:
                            self._ready.append(name)
                if self._ready:
                    return self._ready.pop(0)
                self._cv.wait(timeout=(min(self._waiting.values()) - now) if self._waiting else None)
