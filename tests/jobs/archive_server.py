"""A real HTTP server on 127.0.0.1 serving CIFAR-10-shaped archives, for the jobs.prepare tests."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from jobs import data


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


class ArchiveServer:
    """A real HTTP server on 127.0.0.1 serving byte strings; records every request path.
    A route can announce more bytes than it sends, as a dropped connection would."""

    def __init__(self):
        self.routes: dict[str, tuple[bytes, int | None]] = {}
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                if self.path not in server.routes:
                    self.send_error(404)
                    return
                body, announced = server.routes[self.path]
                self.send_response(200)
                self.send_header("Content-Length", str(announced or len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}{path}"

    def serve(self, path: str, body: bytes, announced_length: int | None = None) -> str:
        self.routes[path] = (body, announced_length)
        return self.url(path)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
