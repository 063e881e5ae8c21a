"""A small JSON client of the Kubernetes API for the pod runner (scripts/pod_runner.py): HTTPS with a
client certificate from the control plane's pki, plain dicts in and out.

Why not the `kubernetes` package: the runner lists every pod each loop, and that client turns each
object into typed models, which costs more CPU than the two cores of a test machine can spare; here a
list is one json.loads.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


class KubeApi:
    def __init__(self, server: str, pki: Path, identity: str):
        self.server = server
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(pki / f"{identity}.crt", pki / f"{identity}.key")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        timeout: float = 15,
    ) -> Any:
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            url, data=data, method=method, headers={"Content-Type": content_type, "Accept": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except ValueError:
                pass
            raise ApiError(error.code, detail) from None

    def get(self, path: str, **query: str) -> Any:
        return self.request("GET", path, query=query or None)

    def items(self, path: str, **query: str) -> list[dict[str, Any]]:
        return self.get(path, **query).get("items") or []

    def create(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def patch_status(self, path: str, status: dict[str, Any]) -> Any:
        # A strategic merge patch, as the kubelet sends: conditions and containerStatuses merge by their
        # keys (type, name), so what others wrote (PodScheduled, DisruptionTarget) stays.
        return self.request(
            "PATCH", path + "/status", {"status": status}, content_type="application/strategic-merge-patch+json"
        )

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, body: Any = None) -> Any:
        return self.request("DELETE", path, body)
