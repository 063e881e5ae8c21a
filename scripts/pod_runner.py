"""The pod runner: the kubelet of `scripts/control-plane.sh up --run-pods`. Every pod bound to a node of
the control plane runs for real, as processes of this machine.

    python scripts/pod_runner.py --dir PLANE_DIR --shared-volumes DIR

The image is this checkout: a container's `command` + `args` run from the checkout's root (the image's
WORKDIR, /app, holds the same jobs/ and controller/: images/Dockerfile) with the checkout's `.venv/bin`
first on PATH (the image's /opt/venv), whatever the pod's `image` says. A pod gets:

- its own loopback address as podIP (127.1.0.1, 127.1.0.2, ...: a /16 of the loopback range that no other
  pod runner on this machine holds, so control planes run side by side; nothing of a pod listens elsewhere
  unless its process binds the wildcard itself, as torch's TCPStore server does);
- its environment (pod_environment.py): env, envFrom, the downward API, KUBERNETES_SERVICE_HOST/PORT
  (the API server's own address: the `kubernetes` Service has no proxy here), HOSTNAME;
- its volumes (pod_volumes.py) under its root, `<PLANE_DIR>/pods/<namespace>_<name>_<uid>/root`, its
  strings rewritten to name them, its Service names and `0.0.0.0` rewritten to addresses
  (pod_environment.py), Services served by service_proxy.py; the in-cluster credentials found by
  Python's `kubernetes` client under the root (pod_site/sitecustomize.py);
- status as a kubelet writes it: Running with podIP, hostIP, startTime and the containers' states;
  Ready once the readiness and startup probes pass (tcpSocket, httpGet, exec); Succeeded or Failed with
  each container's exit code, reason and termination message (its terminationMessagePath's file, or
  the log's tail for FallbackToLogsOnError); restartPolicy Always and OnFailure restart the container
  after the kubelet's back-off (10 s, doubled each time, at most 300 s: pkg/kubelet/kubelet.go
  backOffPeriod and MaxContainerBackOff);
- deletion as a kubelet does it: SIGTERM to each container's main process, the pod's grace period,
  then SIGKILL of all its processes (a container's processes go with its main one, as in a PID
  namespace), the terminal phase written, then the pod deleted with grace period 0;
- node loss: a node named in `<PLANE_DIR>/lost-nodes` (control_plane.py lose-node) has its pods'
  processes SIGKILLed, and its pods are never written again (kwok stops its heartbeats).

Each container's output is in `<pod dir>/<container>.log`, its main process id in `<container>.pid`. Not done: init containers, ephemeral
containers, resource limits, users and security contexts (processes run as this user), `readOnly`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import pod_volumes  # noqa: E402
from kube_api import ApiError, KubeApi  # noqa: E402
from pod_environment import Rewriter, container_env, expand, rewritten_env  # noqa: E402
from service_proxy import ServiceProxy  # noqa: E402

REPO = HERE.parent
SITE = HERE / "pod_site"
log = logging.getLogger("pod-runner")
# Where a runner holds the two /16s it uses (pods', Services'): a socket bound to this port on 127.<n>.255.254,
# an address neither network hands out (they end at .249.250), released when the runner's process ends.
CLAIM_PORT = 29399


def claim_networks() -> tuple[str, str, socket.socket]:
    """(the pods' network, the Services' network, the socket that holds them): 127.1 and 127.2 unless
    another runner holds them, else 127.3 and 127.4, and so on."""
    for second in range(1, 254, 2):
        claim = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            claim.bind((f"127.{second}.255.254", CLAIM_PORT))
        except OSError:
            claim.close()
            continue
        return f"127.{second}", f"127.{second + 1}", claim
    raise SystemExit("pod runner: every /16 of the loopback range is held by another pod runner")


LOOP_SECONDS = 0.5
BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 10, 300
MESSAGE_LIMIT = 4096  # the kubelet reads at most 4096 bytes of the termination message file
FALLBACK_LOG_LINES = 80  # FallbackToLogsOnError: the last 80 lines, at most 2048 bytes (Kubernetes API)
FALLBACK_LOG_BYTES = 2048
LOST_NODES = "lost-nodes"


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_path(pod: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"


@dataclass
class Container:
    spec: dict[str, Any]
    log_path: Path
    process: subprocess.Popen | None = None
    restarts: int = 0
    started_at: str = ""
    terminated: dict[str, Any] | None = None
    last_terminated: dict[str, Any] | None = None
    restart_at: float = 0.0
    started_probe: bool = False
    ready: bool = False
    probe_due: dict[str, float] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    message_file: Path | None = None


@dataclass
class RunningPod:
    uid: str
    key: str
    node: str
    ip: str
    directory: Path
    containers: list[Container]
    restart_policy: str
    started_at: str
    terminating_since: float | None = None
    kill_at: float | None = None
    written: dict[str, Any] | None = None
    done: bool = False


class PodRunner:
    def __init__(self, plane_dir: Path, shared_volumes: Path, server: str, api_port: int):
        self.dir = plane_dir
        self.shared = shared_volumes
        self.api = KubeApi(server, plane_dir / "pki", "pod-runner")
        self.api_port = api_port
        self.pod_network, service_network, self._claim = claim_networks()
        self.proxy = ServiceProxy(service_network)
        self.pods: dict[str, RunningPod] = {}
        self.addresses: dict[str, str] = {}  # pod uid -> its address, kept while the pod object exists
        self.next_address = 0
        self.lost: set[str] = set()
        self.stopping = False
        self.last_claims = 0.0

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        while not self.stopping:
            started = time.monotonic()
            try:
                self.step()
            except (ApiError, OSError) as error:  # the API server away (a restart): try again next loop
                log.warning("loop: %s", error)
            time.sleep(max(0.0, LOOP_SECONDS - (time.monotonic() - started)))
        self.shutdown()

    def step(self) -> None:
        self.read_lost_nodes()
        if time.monotonic() - self.last_claims > 2:
            pod_volumes.bind_claims(self.api, self.shared)
            self.last_claims = time.monotonic()
        pods = self.api.items("/api/v1/pods")
        self.proxy.update(self.api.items("/api/v1/services"), pods)
        seen = set()
        for pod in pods:
            uid, node = pod["metadata"]["uid"], pod["spec"].get("nodeName")
            seen.add(uid)
            if not node or node in self.lost:
                continue
            try:
                self.sync(pod)
            except ApiError as error:
                if error.status not in (404, 409):
                    log.warning("%s: %s", pod_path(pod), error)
            except (LookupError, ValueError) as error:
                # A volume or env source missing (a ConfigMap not yet created): the kubelet retries too.
                log.warning("%s: cannot start yet: %s", pod_path(pod), error)
        for uid in [u for u in self.pods if u not in seen]:
            self.forget(self.pods.pop(uid))
        for uid in [u for u in self.addresses if u not in seen]:
            del self.addresses[uid]

    def read_lost_nodes(self) -> None:
        path = self.dir / LOST_NODES
        lost = set(json.loads(path.read_text())) if path.exists() else set()
        for node in lost - self.lost:
            log.info("node %s lost: SIGKILL of its pods' processes", node)
            for pod in [p for p in self.pods.values() if p.node == node]:
                self.kill(pod)
                del self.pods[pod.uid]
        self.lost = lost
        write_whole(self.dir / f"{LOST_NODES}.done", json.dumps(sorted(lost)))  # control_plane.py waits on it

    def sync(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        running = self.pods.get(uid)
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        if running is None:
            if phase in ("Succeeded", "Failed"):
                if deleting:
                    self.final_delete(pod)
                return
            if deleting:
                self.final_delete(pod)
                return
            running = self.start(pod)
        self.watch(running, pod, deleting)
        status = self.status(running, pod)
        if status != running.written:
            self.api.patch_status(pod_path(pod), status)
            running.written = status
        if running.done and deleting:
            self.final_delete(pod)

    # -- starting ------------------------------------------------------------------------------------
    def address(self, uid: str) -> str:
        if uid not in self.addresses:
            n = self.next_address
            self.next_address += 1
            self.addresses[uid] = f"{self.pod_network}.{n // 250}.{n % 250 + 1}"
        return self.addresses[uid]

    def start(self, pod: dict[str, Any]) -> RunningPod:
        meta = pod["metadata"]
        directory = self.dir / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"
        (directory / "root").mkdir(parents=True, exist_ok=True)
        running = RunningPod(
            meta["uid"],
            pod_path(pod),
            pod["spec"]["nodeName"],
            self.address(meta["uid"]),
            directory,
            [Container(c, directory / f"{c['name']}.log") for c in pod["spec"]["containers"]],
            pod["spec"].get("restartPolicy", "Always"),
            now(),
        )
        # The podIP is in the status before the processes start: the downward API reads it.
        pod.setdefault("status", {})["podIP"] = running.ip
        pod["status"]["hostIP"] = "127.0.0.1"
        folders = pod_volumes.materialize(pod, directory, self.shared, self.read, self.token)
        for container in running.containers:
            self.launch(running, container, pod, folders)
        self.pods[running.uid] = running
        log.info("%s on %s: started at %s", running.key, running.node, running.ip)
        return running

    def read(self, kind: str, namespace: str, name: str) -> dict[str, str] | None:
        plural = "configmaps" if kind == "ConfigMap" else "secrets"
        try:
            return self.api.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}").get("data") or {}
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def token(self, namespace: str, account: str, pod: dict[str, Any], seconds: int, audience: str | None) -> str:
        spec: dict[str, Any] = {
            "expirationSeconds": seconds,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        }
        if audience:
            spec["audiences"] = [audience]
        answer = self.api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        return answer["status"]["token"]

    def launch(self, running: RunningPod, container: Container, pod: dict[str, Any], folders: dict[str, Path]) -> None:
        spec, root = container.spec, running.directory / "root"
        mounts = pod_volumes.link_mounts(root, spec, folders)
        container.message_file = pod_volumes.termination_log(root, spec)
        # The termination message file is the container's too: its path is rewritten like a mount's.
        mounts.append(spec.get("terminationMessagePath", "/dev/termination-log"))
        rewrite = Rewriter(
            str(root), mounts, pod["metadata"]["namespace"], self.proxy.names(pod["metadata"]["namespace"]), running.ip
        )
        base = {
            "PATH": f"{REPO / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOSTNAME": pod["spec"].get("hostname") or pod["metadata"]["name"],
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.api_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(self.api_port),
            "LANG": "C.UTF-8",
            # The image's ENV (images/Dockerfile), with the checkout in /app's place.
            "PYTHONPATH": f"{SITE}:{REPO}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "HOME": "/tmp",
        }
        env = rewritten_env(container_env(pod, spec, self.read, base), base, rewrite)
        env["POD_RUNNER_ROOT"] = str(root)
        env["POD_RUNNER_CONTAINER"] = _tag(running, container)
        # jobs/termination.py writes the termination message where this names (its documented override).
        env["JOBS_TERMINATION_LOG"] = str(container.message_file)
        if "/tmp" in mounts:
            env["TMPDIR"] = str(root / "tmp")
        command = [rewrite(expand(part, env)) for part in (spec.get("command") or []) + (spec.get("args") or [])]
        if not command:
            raise ValueError(f"container {spec['name']} has no command: the image's default is not known here")
        with open(container.log_path, "ab") as output:
            container.process = subprocess.Popen(
                command,
                env=env,
                cwd=REPO,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        # The main process's id, for tests that crash a container from outside (as an OOM kill would).
        write_whole(running.directory / f"{spec['name']}.pid", str(container.process.pid))  # the tests read it
        container.started_at, container.terminated = now(), None
        container.started_probe = "startupProbe" not in spec
        container.ready = "readinessProbe" not in spec and container.started_probe
        container.probe_due, container.failures = {}, {}

    # -- watching ------------------------------------------------------------------------------------
    def watch(self, running: RunningPod, pod: dict[str, Any], deleting: bool) -> None:
        if deleting and running.terminating_since is None:
            running.terminating_since = time.monotonic()
            grace = pod["metadata"].get("deletionGracePeriodSeconds")
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace
            running.kill_at = time.monotonic() + grace
            for container in running.containers:
                if container.process and container.process.poll() is None:
                    container.process.send_signal(signal.SIGTERM)
            log.info("%s: deleted: SIGTERM, %ss to stop", running.key, grace)
        if running.kill_at is not None and time.monotonic() >= running.kill_at:
            self.kill(running)
        for container in running.containers:
            process = container.process
            if process is not None and process.poll() is not None:
                self.exited(running, container, process.returncode)
            elif (
                process is None
                and not deleting
                and container.terminated is not None
                and time.monotonic() >= container.restart_at > 0
            ):
                self.restart(running, container, pod)
            elif process is not None and not deleting:
                self.probe(running, container, pod)
        running.done = all(
            c.process is None and (deleting or not self.will_restart(running, c)) for c in running.containers
        )

    def exited(self, running: RunningPod, container: Container, code: int) -> None:
        _kill_all(_tag(running, container))  # the container's other processes end with its main one
        container.process = None
        container.ready = False
        container.terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": container.started_at,
            "finishedAt": now(),
            **({"signal": -code} if code < 0 else {}),
        }
        if code < 0:  # killed by a signal: a container runtime reports 128 + the signal
            container.terminated["exitCode"] = 128 - code
            container.terminated.pop("signal")
        message = self.message(container, code)
        if message:
            container.terminated["message"] = message
        log.info("%s: container %s exited %d", running.key, container.spec["name"], container.terminated["exitCode"])
        if running.terminating_since is None and self.will_restart(running, container):
            delay = min(MAX_BACKOFF_SECONDS, BACKOFF_SECONDS * 2**container.restarts)
            container.restart_at = time.monotonic() + delay

    def message(self, container: Container, code: int) -> str:
        text = ""
        if container.message_file and container.message_file.is_file():
            text = container.message_file.read_bytes()[:MESSAGE_LIMIT].decode(errors="replace")
        if not text and code != 0 and container.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            lines = container.log_path.read_bytes().decode(errors="replace").splitlines()[-FALLBACK_LOG_LINES:]
            text = "\n".join(lines)[-FALLBACK_LOG_BYTES:]
        return text

    def will_restart(self, running: RunningPod, container: Container) -> bool:
        if container.terminated is None:
            return True
        if running.restart_policy == "Always":
            return True
        return running.restart_policy == "OnFailure" and container.terminated["exitCode"] != 0

    def restart(self, running: RunningPod, container: Container, pod: dict[str, Any]) -> None:
        container.last_terminated, container.restarts = container.terminated, container.restarts + 1
        pod.setdefault("status", {})["podIP"] = running.ip
        folders = pod_volumes.materialize(pod, running.directory, self.shared, self.read, self.token)
        self.launch(running, container, pod, folders)
        log.info("%s: container %s restarted (%d)", running.key, container.spec["name"], container.restarts)

    def probe(self, running: RunningPod, container: Container, pod: dict[str, Any]) -> None:
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            spec = container.spec.get(kind)
            if not spec or (kind != "startupProbe" and not container.started_probe):
                continue
            if kind == "startupProbe" and container.started_probe:
                continue
            due = container.probe_due.get(kind, time.monotonic() + spec.get("initialDelaySeconds", 0))
            container.probe_due.setdefault(kind, due)
            if time.monotonic() < due:
                continue
            container.probe_due[kind] = time.monotonic() + spec.get("periodSeconds", 10)
            ok = _probe(spec, running.ip)
            failures = 0 if ok else container.failures.get(kind, 0) + 1
            container.failures[kind] = failures
            if kind == "startupProbe" and ok:
                container.started_probe = True
                container.ready = "readinessProbe" not in container.spec
            elif kind == "readinessProbe":
                if ok and failures == 0:
                    container.ready = True
                elif failures >= spec.get("failureThreshold", 3):
                    container.ready = False
            elif not ok and failures >= spec.get("failureThreshold", 3):
                log.info("%s: %s of %s failed %d times: SIGKILL", running.key, kind, container.spec["name"], failures)
                _kill_all(_tag(running, container))

    # -- status --------------------------------------------------------------------------------------
    def status(self, running: RunningPod, pod: dict[str, Any]) -> dict[str, Any]:
        states = []
        for container in running.containers:
            if container.process is not None:
                state = {"running": {"startedAt": container.started_at}, "terminated": None, "waiting": None}
            elif (
                container.terminated is not None
                and self.will_restart(running, container)
                and running.terminating_since is None
            ):
                state = {"waiting": {"reason": "CrashLoopBackOff"}, "running": None, "terminated": None}
            else:
                state = {"terminated": container.terminated, "running": None, "waiting": None}
            entry = {
                "name": container.spec["name"],
                "image": container.spec.get("image", ""),
                "imageID": "",
                "containerID": f"pod-runner://{running.uid[:8]}-{container.spec['name']}-{container.restarts}",
                "ready": container.ready,
                "started": container.process is not None,
                "restartCount": container.restarts,
                "state": state,
            }
            if container.last_terminated:
                entry["lastState"] = {"terminated": container.last_terminated}
            states.append(entry)
        terminal = all(c.process is None and c.terminated is not None for c in running.containers) and (
            running.terminating_since is not None or not any(self.will_restart(running, c) for c in running.containers)
        )
        if terminal:
            phase = "Succeeded" if all(c.terminated["exitCode"] == 0 for c in running.containers) else "Failed"
        else:
            phase = "Running"
        ready = not terminal and all(c.ready for c in running.containers) and running.terminating_since is None
        reason = {"reason": "PodCompleted"} if terminal else {}
        conditions = [
            {"type": "PodReadyToStartContainers", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True" if ready else "False", **reason},
            {"type": "Ready", "status": "True" if ready else "False", **reason},
        ]
        written = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
        for condition in conditions:
            old = written.get(condition["type"])
            same = old and old.get("status") == condition["status"]
            condition["lastTransitionTime"] = (
                old["lastTransitionTime"] if same and old.get("lastTransitionTime") else now()
            )
            condition["lastProbeTime"] = None
        return {
            "phase": phase,
            "conditions": conditions,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": running.ip,
            "podIPs": [{"ip": running.ip}],
            "startTime": running.started_at,
            "containerStatuses": states,
        }

    # -- ending --------------------------------------------------------------------------------------
    def final_delete(self, pod: dict[str, Any]) -> None:
        try:
            self.api.delete(
                pod_path(pod),
                {
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": pod["metadata"]["uid"]},
                },
            )
        except ApiError as error:
            if error.status not in (404, 409):
                raise

    def kill(self, running: RunningPod) -> None:
        """SIGKILL of every process of the pod; the main ones reaped (their exit codes kept for poll())."""
        for container in running.containers:
            if container.process is not None:
                _kill_all(_tag(running, container))
                try:
                    container.process.wait(10)
                except subprocess.TimeoutExpired:
                    log.warning("%s: %s did not die of SIGKILL within 10 s", running.key, container.spec["name"])

    def forget(self, running: RunningPod) -> None:
        """The pod object is gone: nothing of it may run on."""
        self.kill(running)
        for container in running.containers:
            if container.process is not None:
                container.process.wait()
        pod_volumes.remove(running.directory)  # its emptyDirs and files; its logs stay

    def shutdown(self) -> None:
        for running in self.pods.values():
            self.kill(running)
        self.proxy.close()


def _tag(running: RunningPod, container: Container) -> str:
    return f"{running.directory}/{container.spec['name']}"


def _kill_all(container: str) -> None:
    """SIGKILL of every process of one container, as the end of its PID namespace does: each process whose
    environment carries its POD_RUNNER_CONTAINER (every descendant inherits it; torchrun's workers are
    not in the main process's process group, so a group kill would miss them)."""
    marker = b"POD_RUNNER_CONTAINER=" + container.encode() + b"\0"
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes():
                os.kill(int(environ.parent.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _probe(spec: dict[str, Any], ip: str) -> bool:
    timeout = spec.get("timeoutSeconds", 1)
    try:
        if "tcpSocket" in spec:
            with socket.create_connection((ip, int(spec["tcpSocket"]["port"])), timeout=timeout):
                return True
        if "httpGet" in spec:
            get = spec["httpGet"]
            url = f"{get.get('scheme', 'HTTP').lower()}://{ip}:{get['port']}{get.get('path', '/')}"
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return 200 <= response.status < 400
        if "exec" in spec:
            return (
                subprocess.run(spec["exec"]["command"], cwd=REPO, capture_output=True, timeout=timeout).returncode == 0
            )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return False


def write_whole(path: Path, text: str) -> None:
    """Whole or not at all (a new file moved over the old), as control_plane.py writes the lost-nodes
    list: another process polls these files, and a read between write_text's truncation and its write
    finds an empty file (the lost-nodes list read so once ended this runner)."""
    writing = path.with_name(path.name + ".writing")
    writing.write_text(text)
    os.replace(writing, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pod_runner.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, type=Path, help="the control plane's directory (its state.json, pki)")
    parser.add_argument("--shared-volumes", required=True, type=Path, help="where each claim's folder is made")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout)
    state = json.loads((args.dir / "state.json").read_text())
    port = state["ports"]["kube-apiserver"]
    runner = PodRunner(args.dir.resolve(), args.shared_volumes.resolve(), f"https://127.0.0.1:{port}", port)

    def stop(*_: Any) -> None:
        runner.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    runner.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
