"""The pod runner's Services (scripts/service_proxy.py): a Service's own loopback address forwards to
whichever endpoint is ready now, and refuses at once when none is."""

from __future__ import annotations

import socket
import socketserver
import threading

import pytest

from service_proxy import ServiceProxy


def echo_server(address: str, reply: bytes):
    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.sendall(reply + self.request.recv(100))

    server = socketserver.ThreadingTCPServer((address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def pod(name: str, ip: str, port: int, ready: bool = True, deleting: bool = False) -> dict:
    meta = {"name": name, "namespace": "training", "labels": {"app": "store"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "ports": [{"name": "store", "containerPort": port}]}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def ask(address: str, port: int) -> bytes:
    """What the server behind answered; b"" when the connection was closed or reset without an answer."""
    with socket.create_connection((address, port), timeout=5) as connection:
        connection.sendall(b"?")
        try:
            return connection.recv(100)
        except ConnectionResetError:
            return b""


@pytest.fixture
def proxy():
    proxy = ServiceProxy()
    yield proxy
    proxy.close()


def test_a_service_forwards_to_its_ready_endpoint_only(proxy):
    first, second = echo_server("127.1.200.1", b"first"), echo_server("127.1.200.2", b"second")
    service_port = second.server_address[1] + 1 if second.server_address[1] < 65000 else 20000
    service = {
        "metadata": {"name": "store", "namespace": "training"},
        "spec": {"selector": {"app": "store"}, "ports": [{"port": service_port, "targetPort": "store"}]},
    }
    pods = [
        pod("a", "127.1.200.1", first.server_address[1]),
        pod("b", "127.1.200.2", second.server_address[1], ready=False),
    ]
    proxy.update([service], pods)
    address = proxy.names("training")["store"]
    assert address == "127.2.0.1"
    assert ask(address, service_port) == b"first?"
    # The first one is being deleted, the second is ready now: new connections go to the second.
    proxy.update(
        [service],
        [
            pod("a", "127.1.200.1", first.server_address[1], deleting=True),
            pod("b", "127.1.200.2", second.server_address[1]),
        ],
    )
    assert ask(address, service_port) == b"second?"
    # None ready: refused at once (closed without an answer), as kube-proxy rejects.
    proxy.update([service], [])
    assert ask(address, service_port) == b""
    first.shutdown(), second.shutdown()


def test_two_pod_runners_on_one_machine_take_networks_of_their_own():
    """Control planes side by side (the whole-run tier's files run in parallel): each pod runner holds its own
    pods' and Services' /16s, so no two pods anywhere share an address (two stores at 127.1.0.1:29400 was how
    a node-loss scenario lost its store while another file ran)."""
    from pod_runner import claim_networks

    first = claim_networks()
    second = claim_networks()
    try:
        networks = {first[0], first[1], second[0], second[1]}
        assert len(networks) == 4 and all(n.startswith("127.") for n in networks), networks
    finally:
        first[2].close()
        second[2].close()
