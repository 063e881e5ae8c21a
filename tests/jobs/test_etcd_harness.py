"""The etcd the torchrun tests rendezvous through is their own: a port probed free can be bound by
the pytest process beside this one before etcd binds it, and the harness must then start again on
fresh ports instead of handing out the other process's etcd (whose keys the other tests write)."""

from __future__ import annotations

import json
import urllib.request

from torchrun_harness import EtcdServer


def members(endpoint: str) -> list[str]:
    with urllib.request.urlopen(f"http://{endpoint}/v2/members", timeout=5) as response:
        return [member["name"] for member in json.loads(response.read())["members"]]


def test_an_etcd_on_a_taken_port_starts_again_elsewhere_and_is_never_mistaken_for_another(tmp_path):
    first = EtcdServer(tmp_path / "first").start()
    try:
        second = EtcdServer(tmp_path / "second")
        second.client_port, second.peer_port = first.client_port, first.peer_port  # the race, made certain
        second.start()
        try:
            assert second.endpoint != first.endpoint
            assert members(second.endpoint) == [second.name] and members(first.endpoint) == [first.name]
            assert second.name != first.name
        finally:
            second.stop()
    finally:
        first.stop()
