"""The store the torchrun tests rendezvous through is their own, and jobs.elastic.store_server reports bad
input in one line: a port probed free can be bound by the pytest process beside this one before the
store binds it, and the harness must then start again on a fresh port instead of handing out the
other process's store (whose keys the other tests write)."""

from __future__ import annotations

import socket

from conftest import assert_one_line_error, run_job
from torchrun_harness import StoreServer


def test_a_store_on_a_taken_port_starts_again_elsewhere_and_is_never_mistaken_for_another(tmp_path):
    first = StoreServer(tmp_path / "first").start()
    try:
        second = StoreServer(tmp_path / "second", port=first.port)  # the race, made certain
        second.start()
        try:
            assert second.endpoint != first.endpoint
            assert "Address already in use" in (tmp_path / "second" / "store-1.log").read_text()
        finally:
            second.stop()
    finally:
        first.stop()


def test_the_store_server_refuses_bad_input_in_one_line():
    result = run_job("jobs.elastic.store_server", "--host", "127.0.0.1", "--port", "70000", timeout=60)
    assert_one_line_error(result, 2, "--port", "70000", "port (0-65535)")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_job("jobs.elastic.store_server", "--host", "127.0.0.1", "--port", str(port), timeout=60)
    assert_one_line_error(result, 1, f"cannot listen on 127.0.0.1:{port}: Address already in use")
