"""Services for the pod runner's pods (scripts/pod_runner.py): a small user-space TCP proxy, the part of
kube-proxy these tests need.

- Each Service with a selector gets its own loopback address (127.2.0.1, 127.2.0.2, ... in the order the
  runner first sees them; the pod runner gives each control plane's proxy a /16 of its own) and a listener on each of its ports there; pods name the Service and find
  that address (pod_environment.Rewriter).
- A connection is forwarded to one of the Service's ready endpoints, taking turns: a pod of its namespace
  that its selector matches, Running, Ready, not being deleted, with a podIP; the port is `targetPort`
  (a number, or a containerPort's name). With none ready the connection is closed at once, as
  kube-proxy's reject rule does for a Service without endpoints.
- A running pod's declared containerPorts are also served on 127.0.0.1:<port> (its `localhost`: a process
  that listens on `0.0.0.0`, rewritten to its own address, still reaches itself through the loopback;
  jobs/elastic/store_server.py does). Two running pods declaring the same port: the second is logged
  and not served there.

Endpoints are computed from the pods themselves, not read from EndpointSlices: the API server refuses
loopback addresses in an EndpointSlice (k8s.io/kubernetes pkg/apis/core/validation ValidateEndpointIP),
and pods here have nothing else.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from typing import Any

log = logging.getLogger("pod-runner")
SERVICE_NETWORK = "127.2"  # the first two octets: a /16 of the loopback range (the default one)
LOCALHOST = "127.0.0.1"
CONNECT_SECONDS = 2.0


def ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return (
        status.get("phase") == "Running"
        and bool(status.get("podIP"))
        and not pod["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
    )


def selects(selector: dict[str, str], pod: dict[str, Any]) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def target_port(port: dict[str, Any], pod: dict[str, Any]) -> int | None:
    target = port.get("targetPort", port["port"])
    if isinstance(target, int):
        return target
    for container in pod["spec"].get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return declared["containerPort"]
    return None


class ServiceProxy:
    def __init__(self, network: str = SERVICE_NETWORK):
        self.network = network
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="service-proxy").start()
        self.addresses: dict[tuple[str, str], str] = {}  # (namespace, service) -> its address
        self.listeners: dict[tuple[str, int], Any] = {}  # (address, port) -> asyncio server
        self.endpoints: dict[tuple[str, int], list[tuple[str, int]]] = {}
        self.turn = itertools.count()
        self.refused: set[tuple[str, int]] = set()

    def address_of(self, namespace: str, name: str) -> str:
        key = (namespace, name)
        if key not in self.addresses:
            n = len(self.addresses)
            self.addresses[key] = f"{self.network}.{n // 250}.{n % 250 + 1}"
        return self.addresses[key]

    def names(self, namespace: str) -> dict[str, str]:
        """The Services of `namespace` that have an address: name -> address."""
        return {name: address for (ns, name), address in self.addresses.items() if ns == namespace}

    def update(self, services: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        """The listeners and endpoints for what the API server holds now."""
        wanted: dict[tuple[str, int], list[tuple[str, int]]] = {}
        for service in services:
            meta, spec = service["metadata"], service["spec"]
            selector = spec.get("selector") or {}
            if not selector or spec.get("type", "ClusterIP") not in ("ClusterIP", "NodePort", "LoadBalancer"):
                continue
            address = self.address_of(meta["namespace"], meta["name"])
            members = [
                p for p in pods if p["metadata"]["namespace"] == meta["namespace"] and selects(selector, p) and ready(p)
            ]
            for port in spec.get("ports") or []:
                if port.get("protocol", "TCP") != "TCP":
                    continue
                wanted[(address, port["port"])] = [
                    (p["status"]["podIP"], t) for p in members if (t := target_port(port, p)) is not None
                ]
        running = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
            and (p.get("status") or {}).get("podIP")
            and not p["metadata"].get("deletionTimestamp")
        ]
        for pod in running:
            for container in pod["spec"].get("containers") or []:
                for declared in container.get("ports") or []:
                    if declared.get("protocol", "TCP") == "TCP":
                        wanted.setdefault((LOCALHOST, declared["containerPort"]), []).append(
                            (pod["status"]["podIP"], declared["containerPort"])
                        )
        self.endpoints = wanted
        for key in wanted:
            if key not in self.listeners and key not in self.refused:
                self._listen(*key)
        for key in [k for k in self.listeners if k not in wanted]:
            server = self.listeners.pop(key)
            self.loop.call_soon_threadsafe(server.close)
        self.refused &= set(wanted)

    def _listen(self, address: str, port: int) -> None:
        async def start():
            return await asyncio.start_server(
                lambda r, w: self._forward((address, port), r, w), address, port, reuse_address=True
            )

        try:
            self.listeners[(address, port)] = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        except OSError as error:
            self.refused.add((address, port))
            log.warning("service proxy: cannot listen on %s:%d: %s", address, port, error)

    async def _forward(self, key: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        targets = list(self.endpoints.get(key) or [])
        upstream = None
        if targets:
            start = next(self.turn) % len(targets)
            for ip, port in targets[start:] + targets[:start]:
                try:
                    upstream = await asyncio.wait_for(asyncio.open_connection(ip, port), CONNECT_SECONDS)
                    break
                except (OSError, asyncio.TimeoutError):
                    continue
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    def close(self) -> None:
        for server in self.listeners.values():
            self.loop.call_soon_threadsafe(server.close)
        self.listeners.clear()
        self.loop.call_soon_threadsafe(self.loop.stop)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except OSError:
            pass
