"""The rendezvous store: a torch.distributed.TCPStore server, the process of the store's pod.

    python -m jobs.elastic.store_server --host 0.0.0.0 --port 29400

It holds the training runs' rendezvous (jobs/elastic/rendezvous.py) in memory: a restart empties it, and
the agents put their state back (jobs/elastic/rendezvous.py ReseedingBackend), so the store needs no
volume and its pod may run on any node in any zone. It runs until SIGTERM or SIGINT (exit 0).

The listening socket is bound here, to `--host`, and handed to the TCPStore (`master_listen_fd`):
torch's own server would listen on every address of the machine.
"""

from __future__ import annotations

import argparse
import signal
import socket
import threading
import time
from collections.abc import Sequence

import torch.distributed as dist

from jobs import cli
from jobs.elastic.rendezvous import DEFAULT_PORT

READY = "jobs.elastic.store_server: serving the rendezvous store on"  # the line a harness waits for


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restarted store takes its port back at once
    server.bind((host, port))
    server.listen(socket.SOMAXCONN)
    return server


def serve(host: str, port: int, stop: threading.Event) -> None:
    listener = listen(host, port)
    bound = listener.getsockname()[1]
    # is_master also makes a client of this process: it connects to the address listened on, or to the
    # loopback address when that is a wildcard (a pod's 127.0.0.1 is its own; where pods share a machine's,
    # as on the pods-that-run tier, their own address is the one that is surely this store).
    if host in ("0.0.0.0", "::", ""):
        host_for_client = "::1" if listener.family == socket.AF_INET6 else "127.0.0.1"
    else:
        host_for_client = host
    store = dist.TCPStore(
        host_for_client, bound, is_master=True, wait_for_workers=False, master_listen_fd=listener.fileno()
    )
    listener.detach()  # the store owns the socket now, and closes it
    print(f"{READY} {host}:{bound}", flush=True)
    while not stop.wait(1):
        pass
    del store


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m jobs.elastic.store_server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", required=True, help="the address to listen on (0.0.0.0 in a pod)")
    parser.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT}; 0: any free one)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        serve(args.host, args.port, stop)
    except OSError as error:
        raise cli.JobError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None
    print(f"{time.strftime('%H:%M:%S')} jobs.elastic.store_server: stopped", flush=True)
    return cli.EXIT_OK


def port_number(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(text)
    return port


port_number.__name__ = "port (0-65535)"


if __name__ == "__main__":
    cli.run(main, "jobs.elastic.store_server", clean_up_on_sigterm=False)
