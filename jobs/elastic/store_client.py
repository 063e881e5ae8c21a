"""A client of the rendezvous store (a TCPStore served by jobs.elastic.store_server) that outlasts the
store's restarts, for as long as a bound allows.

What torch 2.13.0 does on its own (measured with real processes; upstream-facts-3.md fact 9): a
`torch.distributed.TCPStore` client never reconnects once its server went away, every later call
fails with DistNetworkError ("Broken pipe"), and torch's c10d rendezvous backend
(torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py) keeps that one client for life,
so the agent's monitor loop meets RendezvousConnectionError and torchrun exits 1 within a second.

ReconnectingStore is a `torch.distributed.Store` (torch's PrefixStore and the agent call it like
any store: set/get/add/compare_set/check/wait/multi_get/multi_set) that, when the server does not
answer (DistNetworkError: refused, reset, broken pipe; or a call that does not wait for a key and
timed out), opens a new connection and tries the call again every PROBE_SECONDS, while the workers
keep training: they never needed this store (their process group's store is rank 0's own). A key
that is not there within the timeout (DistStoreError from get or wait) is an answer, raised to
the caller. Past `bound_seconds` without an
answer it raises StoreUnavailable, with one line naming the store, and every later call raises it
at once: jobs.elastic.torchrun turns it into the retryable exit 138.

`recovered()` tells the rendezvous backend, once, that the store answers again after an outage or
a stall, and when it last answered before it: no heartbeat could be written meanwhile, so the
backend renews those that were fresh then (jobs/elastic/rendezvous.py).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import torch.distributed as dist
from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError

PROBE_SECONDS = 1.0  # pause between two tries of an unreachable store
# A call that is not a wait for a key and took longer than this: the store stalled (a paused or
# cut-off pod) and no heartbeat was written meanwhile, as in an outage.
STALL_SECONDS = 1.0
WAITING_OPERATIONS = ("get", "wait")  # block until a key is there: a timeout is an answer
# One connection attempt: torch's client retries a refused connection until this passes (about
# 2.5 x this in all, measured), so it also bounds how long a call waits per try.
CONNECT_SECONDS = 1.0


class StoreUnavailable(RendezvousConnectionError):
    """The rendezvous store stayed unreachable for longer than the bound; the message is one line.

    A RendezvousConnectionError, so that torch's keep-alive thread (dynamic_rendezvous.py
    `_keep_alive`, which catches RendezvousError) logs it instead of dying on it; the agent's
    main thread lets it out of torchrun, where jobs.elastic.torchrun exits 138."""


def say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} jobs.elastic.rendezvous: {message}", file=sys.stderr, flush=True)


@dataclass
class Outage:
    """Since when the store has been unreachable, and the bound after which we give up."""

    endpoint: str
    bound_seconds: float
    clock: Callable[[], float] = time.monotonic
    since: float | None = None
    gave_up: str | None = None  # the line raised past the bound, raised again by every later call

    def note(self, error: BaseException) -> None:
        """One more failed call; raises StoreUnavailable once the outage is longer than the bound."""
        now = self.clock()
        if self.since is None:
            self.since = now
            say(
                f"the rendezvous store {self.endpoint} is unreachable ({_first_line(error)}); the workers "
                f"keep training; giving up after {self.bound_seconds:.0f} s"
            )
        if now - self.since > self.bound_seconds:
            self.gave_up = (
                f"the rendezvous store {self.endpoint} was unreachable for {now - self.since:.1f} s, "
                f"longer than store_outage_timeout={self.bound_seconds:.0f} s ({_first_line(error)})"
            )
            raise StoreUnavailable(self.gave_up)

    def end(self) -> bool:
        """The store answered; True if that ends an outage."""
        if self.since is None:
            return False
        say(f"the rendezvous store {self.endpoint} answers again after {self.clock() - self.since:.1f} s")
        self.since = None
        return True


def _first_line(error: BaseException) -> str:
    # torch's DistNetworkError carries the C++ stack after its first line.
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


class ReconnectingStore(dist.Store):
    """A TCPStore client that connects again after its server went away (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        read_timeout: timedelta,
        outage: Outage,
        sleep: Callable[[float], None] = time.sleep,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ):
        super().__init__()
        self.host, self.port = host, port
        self._read_timeout = read_timeout
        self._outage = outage
        self._sleep = sleep
        self._wall_clock = wall_clock  # heartbeats are wall-clock times (torch's _RendezvousState)
        self._client: dist.TCPStore | None = None
        self._lock = threading.Lock()  # guards the connection only: a blocking wait must not hold it
        self._answered_at: datetime | None = None  # when the store last answered a call
        self._recovered: datetime | None = None  # when it last answered before the outage it came back from
        self.set_timeout(read_timeout)  # `timeout` of this Store: what `wait` honours (PrefixStore sets it)

    # --- the connection -----------------------------------------------------------------------

    def _connection(self) -> dist.TCPStore:
        with self._lock:
            if self._client is None:
                client = dist.TCPStore(
                    self.host, self.port, is_master=False, timeout=timedelta(seconds=CONNECT_SECONDS)
                )
                client.set_timeout(self._read_timeout)
                self._client = client
            return self._client

    def _drop(self, client: dist.TCPStore | None) -> None:
        with self._lock:
            if self._client is client:
                self._client = None

    def _call(self, operation: str, *args: Any) -> Any:
        # Read before the call: another thread's call may end the same outage first and move it.
        answered_before = self._answered_at
        while True:
            if self._outage.gave_up:
                raise StoreUnavailable(self._outage.gave_up)
            client = None
            started = time.monotonic()
            try:
                client = self._connection()
                result = getattr(client, operation)(*args)
            except (dist.DistNetworkError, dist.DistStoreError) as error:
                if isinstance(error, dist.DistStoreError) and operation in WAITING_OPERATIONS:
                    raise  # the key did not come in time: an answer
                failure = error
            else:
                stalled = operation not in WAITING_OPERATIONS and time.monotonic() - started > STALL_SECONDS
                if (self._outage.end() or stalled) and answered_before is not None:
                    # (A process that never reached the store before knows nothing of the time before.)
                    self._note_recovery(answered_before)
                self._answered_at = self._wall_clock()
                return result
            self._drop(client)
            self._outage.note(failure)  # raises StoreUnavailable past the bound
            self._sleep(PROBE_SECONDS)

    def _note_recovery(self, answered_before: datetime) -> None:
        with self._lock:
            if self._recovered is None or answered_before < self._recovered:
                self._recovered = answered_before

    def recovered(self) -> datetime | None:
        """Once after each outage or stall the store came back from: when it last answered before it
        (wall clock). None otherwise, and for a process that had not reached the store before."""
        with self._lock:
            recovered, self._recovered = self._recovered, None
        return recovered

    # --- torch.distributed.Store --------------------------------------------------------------

    def set(self, key: str, value: Any) -> None:
        self._call("set", key, value)

    def get(self, key: str) -> bytes:
        return self._call("get", key)

    def add(self, key: str, amount: int) -> int:
        return self._call("add", key, amount)

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        return self._call("compare_set", key, expected, desired)

    def check(self, keys: list[str]) -> bool:
        return self._call("check", keys)

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        # Store.timeout is a property at run time; torch's stub (torch/_C/_distributed_c10d.pyi, torch 2.13.0) omits it.
        self._call("wait", keys, self.timeout if timeout is None else timeout)  # type: ignore[attr-defined]

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return self._call("multi_get", keys)

    def multi_set(self, keys: list[str], values: list[Any]) -> None:
        self._call("multi_set", keys, values)

    def append(self, key: str, value: Any) -> None:
        self._call("append", key, value)

    def delete_key(self, key: str) -> bool:
        return self._call("delete_key", key)

    def num_keys(self) -> int:
        return self._call("num_keys")
