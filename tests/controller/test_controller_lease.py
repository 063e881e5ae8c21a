"""controller/lease.py against a real HTTP server on 127.0.0.1 that speaks the Lease API (the
kubernetes client's own requests and parsing, not a mock of it): every call is bounded and the whole
renew gives up at its deadline (issue 36 items 6, 15; client-go leaderelection.go bounds
tryAcquireOrRenew by RenewDeadline, upstream-facts-4 #11); times are written as MicroTime
(RFC3339Micro, exactly six fractional digits: upstream-facts-4 #12, item 7); the message a leader
stops with after an outage does not name itself as the holder."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from api_server import JsonHandler
from kubernetes import client

from controller import lease

NS, NAME = "training", "elastic-job-controller"
PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"
MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


class LeaseServer:
    """One Lease; `frozen` makes every request wait unanswered (a half-open connection)."""

    def __init__(self, holder: str, acquired: str = "2026-11-28T09:00:00.000000Z"):
        self.spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": acquired,
            "renewTime": acquired,
            "leaseTransitions": 3,
        }
        self.version, self.puts, self.frozen, self.release = 1, [], False, threading.Event()
        self.forbidden = False  # answer 403, as RBAC does for a Lease name the Role does not list
        server = self

        class Handler(JsonHandler):
            def _lease(self) -> dict:
                return {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": NAME, "namespace": NS, "resourceVersion": str(server.version)},
                    "spec": server.spec,
                }

            def do_GET(self):
                if server.forbidden:
                    self._send(
                        403,
                        {
                            "kind": "Status",
                            "status": "Failure",
                            "reason": "Forbidden",
                            "code": 403,
                            "message": f'leases.coordination.k8s.io "{NAME}" is forbidden',
                        },
                    )
                    return
                if server.frozen:
                    server.release.wait(60)
                    return
                self._send(200, self._lease())

            def do_PUT(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.frozen:
                    server.release.wait(60)
                    return
                server.puts.append(body)
                server.spec, server.version = body["spec"], server.version + 1
                self._send(200, self._lease())

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def api(self) -> client.CoordinationV1Api:
        config = client.Configuration()
        config.host = f"http://127.0.0.1:{self.http.server_address[1]}"
        return lease.without_retries(client.CoordinationV1Api(client.ApiClient(config)))

    def close(self) -> None:
        self.release.set()
        self.http.shutdown()


@pytest.fixture
def server():
    made = []
    yield lambda *args, **kwargs: made.append(LeaseServer(*args, **kwargs)) or made[-1]
    for one in made:
        one.close()


def test_a_renew_keeps_microtime_with_six_digits(server):
    """The time read back has no fraction (microseconds 0): isoformat() would write "09:00:00+00:00"."""
    api = server("me")
    lock = lease.LeaseLock(api.api(), NS, NAME, "me")
    assert lock.try_acquire_or_renew(timeout=5)
    sent = api.puts[-1]["spec"]
    assert sent["acquireTime"] == "2026-11-28T09:00:00.000000Z", sent
    assert MICRO.fullmatch(sent["renewTime"]) and sent["leaseTransitions"] == 3


def test_a_frozen_connection_cannot_hold_a_try_or_a_renew_past_its_deadline(server):
    api = server("me")
    lock = lease.LeaseLock(api.api(), NS, NAME, "me")
    assert lock.try_acquire_or_renew(timeout=5) and lock.leading()
    api.frozen = True
    result: dict = {}

    def try_once():
        started = time.monotonic()
        try:
            result["held"] = lock.try_acquire_or_renew(timeout=1.0)
        except Exception as error:  # noqa: BLE001 - what it raised is checked below
            result["error"] = error
        result["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=try_once, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "a try on a frozen connection never returned"
    assert "error" in result and result["seconds"] < 3, result
    started = time.monotonic()
    assert lock.renew(deadline=1.5, retry=0.2) is False
    took = time.monotonic() - started
    assert took < 3, took  # the whole renew, several tries, within its deadline (plus a little)
    assert "Timeout" in lock.last_error or "timed out" in lock.last_error, lock.last_error


def test_the_workers_stop_when_the_last_renew_is_older_than_the_deadline(server):
    api = server("me")
    now = [100.0]
    lock = lease.LeaseLock(api.api(), NS, NAME, "me", clock=lambda: now[0])
    assert lock.try_acquire_or_renew(timeout=5)
    now[0] += lease.RENEW_DEADLINE_SECONDS - 0.1
    assert lock.leading()
    now[0] += 0.2
    assert not lock.leading()


def test_the_stop_message_after_an_outage_does_not_name_itself_as_the_holder(server):
    api = server("me")
    lock = lease.LeaseLock(api.api(), NS, NAME, "me")
    assert lock.try_acquire_or_renew(timeout=5)
    api.frozen = True
    assert lock.renew(deadline=0.5, retry=0.1) is False
    message = lock.stop_message()
    assert message.startswith(f"could not renew lease {NS}/{NAME} for ") and "'me'" not in message, message
    api.frozen = False
    api.release.set()
    api.spec = {**api.spec, "holderIdentity": "other", "renewTime": "2026-11-28T09:00:01.000000Z"}
    assert lock.renew(deadline=0.5, retry=0.1) is False
    assert lock.stop_message() == f"lost lease {NS}/{NAME} to 'other': stopping"


def test_a_lease_the_role_does_not_grant_is_said_at_once(server):
    """Review ctrl-1 item 14: a 403 (the Role names one Lease; any other --lease-name is refused) made
    a silent candidate for ever: try_acquire_or_renew returned False, as for a lease held by another."""
    from controller import __main__ as main

    api = server("other")
    api.forbidden = True
    lock = lease.LeaseLock(api.api(), NS, NAME, "me")
    try:
        outcome = main._attempt(lock)
    except Exception as error:  # noqa: BLE001 - what it raised is checked below
        outcome = error
    assert type(outcome).__name__ == "Forbidden" and f"Lease named '{NAME}'" in str(outcome), outcome


def test_the_lease_runs_from_when_the_renew_was_sent(server):
    """Review ctrl-1 item 10: renewed_at was taken when the answer came; an answer that took long
    made this candidate believe in its lease for that much longer than the API server did."""
    api = server("me")
    now = [100.0]
    real_put = api.http.RequestHandlerClass.do_PUT

    def slow_put(handler):
        now[0] += 4.0  # the answer takes 4 s
        real_put(handler)

    api.http.RequestHandlerClass.do_PUT = slow_put
    lock = lease.LeaseLock(api.api(), NS, NAME, "me", clock=lambda: now[0])
    assert lock.try_acquire_or_renew(timeout=10)
    assert lock.renewed_at == 100.0
