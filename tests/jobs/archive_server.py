"""A real HTTP server on 127.0.0.1 serving CIFAR-10-shaped archives, for the jobs.data.prepare tests."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from jobs.data import cifar as data


def make_tarball(folder: Path, extra_members: dict[str, bytes] | None = None) -> bytes:
    """A .tar.gz laid out like the official one: everything under cifar-10-batches-py/."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=data.FOLDER_NAME)
        for name, content in (extra_members or {}).items():
            member = tarfile.TarInfo(name)
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    return buffer.getvalue()


def md5(content: bytes) -> str:
    return hashlib.md5(content).hexdigest()


@dataclass(frozen=True)
class Route:
    body: bytes
    length_header: str | None  # the Content-Length sent; None sends none (the body ends at close)
    delay_seconds: float  # silence before the response, as a stalled server


class ArchiveServer:
    """A real HTTP server on 127.0.0.1 serving byte strings; records every request path and the
    User-Agent it came with. A route can announce more bytes than it sends, as a dropped
    connection would, announce none or something that is not a number, or stall first."""

    def __init__(self):
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        self.user_agents: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                server.user_agents.append(self.headers.get("User-Agent"))
                if self.path not in server.routes:
                    self.send_error(404)
                    return
                route = server.routes[self.path]
                time.sleep(route.delay_seconds)
                self.send_response(200)
                if route.length_header is not None:
                    self.send_header("Content-Length", route.length_header)
                self.end_headers()
                self.wfile.write(route.body)
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}{path}"

    def serve(
        self,
        path: str,
        body: bytes,
        announced_length: int | None = None,
        *,
        length_header: str | None = "",
        delay_seconds: float = 0.0,
    ) -> str:
        """`length_header` "" (the default) sends the announced length, or the body's."""
        if length_header == "":
            length_header = str(announced_length or len(body))
        self.routes[path] = Route(body, length_header, delay_seconds)
        return self.url(path)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
