"""An HTTP server on 127.0.0.1 that speaks the few REST calls a reconcile pass makes (get, list,
create, JSON merge patch, delete of objects by their API path), so that controller/reconcile.py runs
with the kubernetes client's own requests and parsing, as tests/controller/test_controller_lease.py
does for the Lease. It keeps objects as sent; it is not the API server (no validation, no defaults,
no garbage collector: the real one is tests/cluster's). `refuse[(method, path)] = (code, message)`
answers that call with a Status error; `frozen` leaves every call unanswered (a half-open connection), `frozen_watches` every watch;
`calls` records (method, path, body).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client

from controller import render
from controller.reconcile import Api

NS = "training"
ELASTICJOBS = f"/apis/{render.GROUP}/{render.VERSION}/namespaces/{NS}/{render.PLURAL}"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
EVENTS = f"/api/v1/namespaces/{NS}/events"


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet HTTP handler that answers JSON, as the API server does (the fake servers' shared part)."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ApiServer:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.refuse: dict[tuple[str, str], tuple[int, str]] = {}
        self.calls: list[tuple[str, str, Any]] = []
        self.frozen, self.frozen_watches, self.release = False, False, threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def _handle(self, method: str) -> None:
                path = urlsplit(self.path).path
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                if server.frozen or (server.frozen_watches and "watch=true" in self.path.lower()):
                    server.release.wait(60)
                    return
                with server._lock:
                    server.calls.append((method, path, body))
                    code, answer = server._answer(method, path, body)
                self._send(code, answer)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    @staticmethod
    def _status(code: int, message: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message, "code": code}

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        if (method, path) in self.refuse:
            code, message = self.refuse[(method, path)]
            return code, self._status(code, message)
        if method == "POST":
            name = body["metadata"]["name"]
            body["metadata"].setdefault("uid", f"uid-{name}-{len(self.calls)}")
            self.objects[f"{path}/{name}"] = body
            return 201, body
        if method == "GET" and path not in self.objects:
            items = [o for key, o in self.objects.items() if key.rpartition("/")[0] == path]
            if items or path in (PODS, EVENTS, JOBS, ELASTICJOBS):
                return 200, {"kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}
        target = path.removesuffix("/status") if path.endswith("/status") else path
        if target not in self.objects:
            return 404, self._status(404, f"{path} not found")
        if method == "GET":
            return 200, self.objects[target]
        if method == "PATCH":
            self.objects[target] = merge(self.objects[target], body)
            return 200, self.objects[target]
        if method == "DELETE":
            return 200, self.objects.pop(target)
        return 405, self._status(405, method)

    def api(self) -> Api:
        config = client.Configuration()
        config.host = f"http://127.0.0.1:{self.http.server_address[1]}"
        api_client = client.ApiClient(config)
        return Api(client.CustomObjectsApi(api_client), client.BatchV1Api(api_client), client.CoreV1Api(api_client))

    def writes(self) -> list[tuple[str, str, Any]]:
        return [call for call in self.calls if call[0] != "GET"]

    def close(self) -> None:
        self.release.set()
        self.http.shutdown()
        self.http.server_close()  # a late connection is refused, not left unanswered in the backlog
