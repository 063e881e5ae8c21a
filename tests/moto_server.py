"""moto's server (from the installed moto[server]) on a free 127.0.0.1 port, for tests that reach
AWS APIs the way the code does: through boto3's default session and AWS_ENDPOINT_URL."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MOTO_SERVER = Path(sys.executable).parent / "moto_server"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_moto_server(start_timeout: float = 30) -> Iterator[str]:
    """Start moto_server, yield its URL once it listens, and stop it by PID whatever happens."""
    port = free_port()
    server = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert server.poll() is None, "moto_server exited at start"
                assert time.monotonic() < deadline, f"moto_server did not listen within {start_timeout:.0f} s"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)
