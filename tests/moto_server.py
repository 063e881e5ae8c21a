"""moto's server (from the installed moto[server]) on a 127.0.0.1 port of its own, for tests that reach
AWS APIs the way the code does: through boto3's default session and AWS_ENDPOINT_URL."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MOTO_SERVER = Path(sys.executable).parent / "moto_server"


# werkzeug's line when it listens (moto_server runs werkzeug.serving.run_simple): " * Running on http://HOST:PORT".
LISTENING = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")


@contextmanager
def running_moto_server(start_timeout: float = 30) -> Iterator[str]:
    """Start moto_server on a port the OS picks for it (-p 0), yield its URL once it says where it
    listens, and stop it by PID whatever happens.

    The port is the one this process bound, never a port probed free and bound later: between the
    two, the pytest process beside this one could start its own server there, and both tests would
    share one server's state (a flaky failure seen once in the whole suite)."""
    server = subprocess.Popen(
        [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    ports: queue.Queue[int] = queue.Queue()

    def read_stderr() -> None:
        # Read to the end: the server logs every request to stderr and would block on a full pipe.
        for line in server.stderr:
            if match := LISTENING.search(line):
                ports.put(int(match[1]))

    threading.Thread(target=read_stderr, daemon=True).start()
    try:
        try:
            port = ports.get(timeout=start_timeout)
        except queue.Empty:
            raise AssertionError(
                f"moto_server did not say where it listens within {start_timeout:.0f} s (exit code {server.poll()})"
            ) from None
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)
