"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.

The `kubernetes` Python client (36.0.3) ships only a ConfigMap lock (kubernetes/leaderelection/
resourcelock/configmaplock.py), so this is a Lease lock of our own that follows client-go's
LeaderElector (kubernetes/kubernetes @ 0138c828, staging/src/k8s.io/client-go/tools/leaderelection/
leaderelection.go tryAcquireOrRenew, release, isLeaseValid):
- a lease held by another identity is valid while the time *this process* observed its record
  change, plus its leaseDurationSeconds, is in the future: the holder's clock is never compared
  with ours (tolerant to clock skew, not to skew rate: client-go's doc.go);
- an empty holderIdentity is free to take;
- taking the lease from another holder counts one more leaseTransitions and sets acquireTime;
  renewing keeps both and moves renewTime;
- every write is an update carrying the resourceVersion read, so of two candidates only one wins
  (the API server answers the other 409 Conflict);
- release writes an empty holder with leaseDurationSeconds 1, so a standby takes over at once
  instead of after the full duration.
- every call carries `_request_timeout`, and a renew (`renew`: a try every retry period until one
  succeeds) gives up at RENEW_DEADLINE_SECONDS, each call getting only what is left of it, as
  client-go bounds tryAcquireOrRenew by a context with RenewDeadline (upstream-facts-4 #11): one
  half-open connection can no longer hold a leader past its deadline (issue 36 items 6, 15);
- acquireTime and renewTime are written as MicroTime wants them, RFC 3339 with exactly six
  fractional digits (apimachinery MicroTime, RFC3339Micro), also when the time read back has none.
The timings are controller-runtime's defaults (leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s).
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any, Callable

LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2


class Forbidden(Exception):
    """The API server refuses this candidate the Lease (401/403): no retry can help (review ctrl-1 item 14)."""


def _forbidden(lock: "LeaseLock", error: Any) -> Forbidden:
    return Forbidden(
        f"lease {lock.namespace}/{lock.name}: the API server refuses it ({error.status} {error.reason}): "
        f"the controller's Role must allow get, create and update of the Lease named {lock.name!r} "
        "(--lease-name)"
    )


def without_retries(api: Any) -> Any:
    """A CoordinationV1Api like `api` on a client of its own whose transport never retries: urllib3
    retries a timed-out read three times by default (Retry(3)), so a call bounded by
    `_request_timeout` t would take up to 4 t; the renew loop is the retry (as client-go's)."""
    import copy

    from kubernetes import client

    configuration = copy.deepcopy(api.api_client.configuration)
    configuration.retries = False
    return client.CoordinationV1Api(client.ApiClient(configuration))


def micro_time(moment: datetime.datetime) -> str:
    """Kubernetes' MicroTime: RFC 3339 with microseconds."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseLock:
    """One candidate's view of the Lease `namespace/name`; `api` is a CoordinationV1Api."""

    def __init__(
        self,
        api: Any,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int = LEASE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.timezone.utc),
    ):
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.lease_seconds, self._clock, self._wall = lease_seconds, clock, wall
        self._observed: dict[str, Any] | None = None  # the record (spec) last seen or written
        self._observed_at = 0.0
        self._resource_version: str | None = None
        self._deadline = float("inf")  # no call of the try in progress may run past this (monotonic)
        self.renewed_at: float | None = None  # when this candidate last held the lease for sure (monotonic)
        self.last_error: str | None = None

    def _timeout(self) -> float:
        """The `_request_timeout` of the next call: what is left of the try's deadline."""
        left = self._deadline - self._clock()
        if left <= 0:
            raise TimeoutError(f"lease {self.namespace}/{self.name}: the renew deadline passed")
        return left

    def leading(self, deadline: float = RENEW_DEADLINE_SECONDS) -> bool:
        """Held for sure within the last `deadline` seconds (the workers stop at once when not)."""
        return self.renewed_at is not None and self._clock() - self.renewed_at < deadline

    @property
    def is_leader(self) -> bool:
        return self._observed is not None and self._observed.get("holderIdentity") == self.identity

    def holder(self) -> str:
        return (self._observed or {}).get("holderIdentity") or ""

    def _valid(self) -> bool:
        return self._observed_at + (self._observed or {}).get("leaseDurationSeconds", 0) > self._clock()

    def _observe(self, record: dict[str, Any], resource_version: str | None) -> None:
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()
        self._resource_version = resource_version

    def try_acquire_or_renew(self, timeout: float = RENEW_DEADLINE_SECONDS) -> bool:
        """True when this candidate holds the lease after the call; all of it within `timeout` seconds
        (a call that does not answer in time raises, as a refused one returns False)."""
        sent = self._clock()
        self._deadline = sent + timeout
        try:
            held = self._try()
        finally:
            self._deadline = float("inf")
        if held:  # the lease runs from when the request was sent, not answered (review ctrl-1 item 10)
            self.renewed_at = sent
        return held

    def renew(
        self,
        deadline: float = RENEW_DEADLINE_SECONDS,
        retry: float = RETRY_SECONDS,
        stopping: threading.Event | None = None,
    ) -> bool:
        """client-go's renew: a try every `retry` seconds until one succeeds, all within `deadline`.
        False: not renewed in time (or asked to stop); last_error says why."""
        end = self._clock() + deadline
        while not (stopping and stopping.is_set()):
            left = end - self._clock()
            if left <= 0:
                return False
            try:
                if self.try_acquire_or_renew(timeout=left):
                    self.last_error = None
                    return True
                self.last_error = (
                    f"held by {self.holder()!r}"
                    if self.holder() != self.identity
                    else "the API server refused the update"
                )
            except Exception as error:  # noqa: BLE001 - a failed try; the deadline decides
                self.last_error = f"{type(error).__name__}: {error}"
            left = end - self._clock()
            if left <= 0:
                return False
            (stopping.wait if stopping else time.sleep)(min(retry, left))
        return False

    def _read_record(self, lease: Any) -> dict[str, Any]:
        """The Lease's spec as the API holds it, its times back in MicroTime form (the client's model
        holds datetimes, which isoformat() would write without a fraction when microseconds are 0)."""
        current = self.api.api_client.sanitize_for_serialization(lease.spec) or {}
        for key, attribute in (("acquireTime", "acquire_time"), ("renewTime", "renew_time")):
            value = getattr(lease.spec, attribute, None) if lease.spec is not None else None
            if isinstance(value, datetime.datetime):
                current[key] = micro_time(value)
        return current

    def _try(self) -> bool:
        from kubernetes.client.exceptions import ApiException

        now = micro_time(self._wall())
        record = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self._timeout())
        except ApiException as error:
            if error.status in (401, 403):
                raise _forbidden(self, error) from None
            if error.status != 404:
                return False
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": record,
            }
            try:
                created = self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self._timeout())
            except ApiException as error:
                if error.status in (401, 403):
                    raise _forbidden(self, error) from None
                return False  # another candidate created it first
            self._observe(record, created.metadata.resource_version)
            return True
        current = self._read_record(lease)
        self._observe(current, lease.metadata.resource_version)
        if current.get("holderIdentity") and self._valid() and not self.is_leader:
            return False
        transitions = current.get("leaseTransitions") or 0
        if self.is_leader:
            record.update(acquireTime=current.get("acquireTime") or now, leaseTransitions=transitions)
        else:
            record["leaseTransitions"] = transitions + 1
        return self._write(record)

    def _write(self, record: dict[str, Any]) -> bool:
        from kubernetes.client.exceptions import ApiException

        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace, "resourceVersion": self._resource_version},
            "spec": record,
        }
        try:
            updated = self.api.replace_namespaced_lease(
                self.name, self.namespace, body, _request_timeout=self._timeout()
            )
        except ApiException as error:
            if error.status in (401, 403):
                raise _forbidden(self, error) from None
            return False  # 409: someone wrote it since we read it
        self._observe(record, updated.metadata.resource_version)
        return True

    def release(self, timeout: float = RENEW_DEADLINE_SECONDS) -> bool:
        """Give the lease up if held (client-go release), within `timeout` seconds."""
        if not self.is_leader:
            return True
        now = micro_time(self._wall())
        self._deadline = self._clock() + timeout
        try:
            return self._write(
                {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": (self._observed or {}).get("leaseTransitions") or 0,
                }
            )
        finally:
            self._deadline = float("inf")

    def stop_message(self) -> str:
        """Why a leader stops: another holder only when one was seen; after an outage the last record
        read is still this candidate's own, which says nothing about who holds it now."""
        since = self._clock() - self.renewed_at if self.renewed_at is not None else float("nan")
        if self.holder() and self.holder() != self.identity:
            return f"lost lease {self.namespace}/{self.name} to {self.holder()!r}: stopping"
        return (
            f"could not renew lease {self.namespace}/{self.name} for {since:.1f} s (last renewed {since:.1f} s ago; "
            f"{self.last_error or 'no answer'}): stopping, so that a standby can lead"
        )
