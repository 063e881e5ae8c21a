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
The timings are controller-runtime's defaults (leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s).
"""

from __future__ import annotations

import datetime
import time
from typing import Any, Callable

LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2


def micro_time(moment: datetime.datetime) -> str:
    """Kubernetes' MicroTime: RFC 3339 with microseconds."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseLock:
    """One candidate's view of the Lease `namespace/name`; `api` is a CoordinationV1Api."""

    def __init__(self, api: Any, namespace: str, name: str, identity: str, lease_seconds: int = LEASE_SECONDS,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.timezone.utc)):
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.lease_seconds, self._clock, self._wall = lease_seconds, clock, wall
        self._observed: dict[str, Any] | None = None  # the record (spec) last seen or written
        self._observed_at = 0.0
        self._resource_version: str | None = None

    @property
    def is_leader(self) -> bool:
        return bool(self._observed) and self._observed.get("holderIdentity") == self.identity

    def holder(self) -> str:
        return (self._observed or {}).get("holderIdentity") or ""

    def _valid(self) -> bool:
        return self._observed_at + (self._observed or {}).get("leaseDurationSeconds", 0) > self._clock()

    def _observe(self, record: dict[str, Any], resource_version: str | None) -> None:
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()
        self._resource_version = resource_version

    def try_acquire_or_renew(self) -> bool:
        """True when this candidate holds the lease after the call."""
        from kubernetes.client.exceptions import ApiException

        now = micro_time(self._wall())
        record = {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                  "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                return False
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record}
            try:
                created = self.api.create_namespaced_lease(self.namespace, body)
            except ApiException:
                return False  # another candidate created it first
            self._observe(record, created.metadata.resource_version)
            return True
        current = self.api.api_client.sanitize_for_serialization(lease.spec) or {}
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

        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace, "resourceVersion": self._resource_version},
                "spec": record}
        try:
            updated = self.api.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException:
            return False  # 409: someone wrote it since we read it
        self._observe(record, updated.metadata.resource_version)
        return True

    def release(self) -> bool:
        """Give the lease up if held (client-go release)."""
        if not self.is_leader:
            return True
        now = micro_time(self._wall())
        return self._write({"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                            "leaseTransitions": (self._observed or {}).get("leaseTransitions") or 0})
