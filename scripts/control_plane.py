"""A Kubernetes control plane on 127.0.0.1 from the binaries scripts/build-tools.sh builds: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake kubelets), as plain processes.

    python scripts/control_plane.py up   --bin DIR [--dir DIR] [--nodes FILE] [--run-pods]
    python scripts/control_plane.py env  [--dir DIR]
    python scripts/control_plane.py down [--dir DIR]
    python scripts/control_plane.py restart-apiserver [--dir DIR]
    python scripts/control_plane.py lose-node NODE [--dir DIR]

With --run-pods, kwok plays the nodes only (their Ready condition, heartbeats and Leases), one kwok
process per node (`kwok@<node>`), and the pod runner (scripts/pod_runner.py) runs every pod bound to them
as real processes of this checkout; each PersistentVolumeClaim is a folder under
`<DIR>/shared-volumes/<namespace>/<claim>` (SHARED_VOLUMES in `env`). `lose-node` is a node lost without
notice: its pods' processes SIGKILLed and its kwok SIGKILLed, so its Lease and heartbeats stop.

scripts/control-plane.sh is the command people use; it finds the binaries and renders the nodes. This
module is also imported by tests/cluster (ControlPlane), which needs the same processes and a restart
of the API server mid-run.

Why our own process management and not kwokctl's binary runtime: the tests must restart the API
server alone, choose its admission plugins (EKS's), and give the controller-manager and scheduler
their own identities under RBAC; with plain processes each flag is written here, once, and read
where it is set. Every process listens on 127.0.0.1 only, on ports picked free at `up`; all state
(certificates, etcd's data, logs, the kubeconfig, state.json) is under the instance's directory.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES_DIR = REPO / "scripts" / "kwok-stages"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "elastic-training" / "control-plane"
LOOPBACK = "127.0.0.1"
# Nodes kwok plays: the annotation it selects them by (kwok's documented convention).
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# Fake addresses kwok writes into pod and node status. No process listens on them and nothing is sent
# to them: the API server only contacts a pod's IP for webhooks and aggregated APIs, which no object
# under test declares. Loopback cannot be used: Endpoints and EndpointSlices refuse 127.0.0.0/8
# (k8s.io/kubernetes pkg/apis/core/validation ValidateEndpointIP), so the controllers would fail.
POD_CIDR = "10.244.0.1/16"
SERVICE_CIDR = "10.96.0.0/16"
# The admission plugins EKS enables, from the EKS user guide's platform-versions page
# (awsdocs/amazon-eks-user-guide @ 4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7,
# latest/ug/clusters/platform-versions.adoc: "The following admission controllers are enabled for all
# 1.31 platform versions", the newest list that snapshot has). kube-apiserver keeps its own default-on
# plugins (ValidatingAdmissionPolicy, ClusterTrustBundleAttest, ...) besides these.
EKS_ADMISSION_PLUGINS = (
    "NodeRestriction",
    "ExtendedResourceToleration",
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "TaintNodesByCondition",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Client identities, one certificate each. The controller-manager and scheduler use the users RBAC's
# bootstrap policy binds (system:kube-controller-manager, system:kube-scheduler). kwok plays every
# kubelet and writes any pod's status, which no single node identity may do, so it is an admin.
IDENTITIES = {
    "admin": ("kubernetes-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", ""),
    "scheduler": ("system:kube-scheduler", ""),
    "kwok": ("kwok-controller", "system:masters"),
    # The pod runner is every node's kubelet at once, and the volume provisioner: an admin too.
    "pod-runner": ("pod-runner", "system:masters"),
}
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
POD_RUNNER = "pod-runner"
# With --run-pods, one kwok per node: a node's heartbeats stop when its kwok does. kwok cannot be told to
# let go of one node: a node that stops matching its selector is filtered out of its watch events and
# its Lease goes on being renewed (sigs.k8s.io/kwok v0.8.0 pkg/utils/informer/informer.go: the filter
# drops the Modified and Deleted events of a node that no longer matches).
NODE_KWOK = "kwok@"
# With --run-pods kwok gets only the node Stages: with no pod Stage it starts no pod controller and never
# writes a pod (sigs.k8s.io/kwok v0.8.0 pkg/kwok/controllers/controller.go startStageController: a
# controller per resource that has Stages).
NODE_STAGES = ("node-ready.yaml", "node-heartbeat.yaml")
# Node loss is seen sooner than with the defaults (a 40 s lease renewed every 10 s, and a 50 s
# grace period: kube-controller-manager's --node-monitor-grace-period in 1.35), so that the scenarios
# stay short: a 16 s lease, renewed every 4 s (kwok renews at a quarter of it, as the kubelet does), and
# NotReady 20 s after the last renewal.
RUN_PODS_LEASE_SECONDS = 16
RUN_PODS_GRACE = "20s"
LOST_NODES = "lost-nodes"


class ControlPlaneError(Exception):
    """What went wrong, in one line."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive: reap it if it is our child.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        stat = Path(f"/proc/{pid}/stat")
        return stat.exists() and stat.read_text().split(") ")[-1][:1] != "Z"


@dataclass
class State:
    directory: str
    bin: str
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    run_pods: bool = False

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['kube-apiserver']}"


class ControlPlane:
    """One control plane, its state in `directory`."""

    def __init__(self, directory: Path | str, bin_dir: Path | str | None = None):
        self.dir = Path(directory).resolve()
        self.certs = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.state_file = self.dir / "state.json"
        self.kubeconfig = self.dir / "kubeconfig"
        self.state = self._load() or State(str(self.dir), str(bin_dir or ""))
        if bin_dir:
            self.state.bin = str(Path(bin_dir).resolve())

    # -- state -----------------------------------------------------------------------------------
    def _load(self) -> State | None:
        if not self.state_file.exists():
            return None
        return State(**json.loads(self.state_file.read_text()))

    def _save(self) -> None:
        self.state_file.write_text(json.dumps(asdict(self.state), indent=2) + "\n")

    @property
    def components(self) -> tuple[str, ...]:
        """The processes `up` starts (with --run-pods, the nodes' kwoks start with the nodes)."""
        return COMPONENTS[:-1] + (POD_RUNNER,) if self.state.run_pods else COMPONENTS

    @property
    def shared_volumes(self) -> Path:
        return self.dir / "shared-volumes"

    def running(self) -> dict[str, int]:
        return {name: pid for name, pid in self.state.pids.items() if alive(pid)}

    def binary(self, name: str) -> str:
        path = Path(self.state.bin) / name
        if not os.access(path, os.X_OK):
            raise ControlPlaneError(f"{path} is missing: run `bash scripts/build-tools.sh` first")
        return str(path)

    # -- certificates ----------------------------------------------------------------------------
    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=self.certs)

    def _make_certificates(self) -> None:
        """A CA, the API server's serving certificate, one client certificate per identity, and the
        service-account signing key pair. EC P-256 keys: fast to make, accepted everywhere here."""
        if (self.certs / "done").exists() and all((self.certs / f"{n}.crt").exists() for n in IDENTITIES):
            return
        self.certs.mkdir(parents=True, exist_ok=True)
        key = ("ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out")
        self._openssl(*key, "ca.key")
        self._openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-subj",
            "/CN=elastic-training-test-ca",
            "-days",
            "3650",
            "-out",
            "ca.crt",
        )
        (self.certs / "server.ext").write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
            "extendedKeyUsage=serverAuth\n"
        )
        (self.certs / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
        signed = [("apiserver", "/CN=kube-apiserver", "server.ext")]
        signed += [
            (name, f"/CN={cn}" + (f"/O={group}" if group else ""), "client.ext")
            for name, (cn, group) in IDENTITIES.items()
        ]
        for name, subject, extensions in signed:
            self._openssl(*key, f"{name}.key")
            self._openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr")
            self._openssl(
                "x509",
                "-req",
                "-in",
                f"{name}.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "3650",
                "-extfile",
                extensions,
                "-out",
                f"{name}.crt",
            )
        self._openssl(*key, "service-account.key")
        self._openssl("ec", "-in", "service-account.key", "-pubout", "-out", "service-account.pub")
        (self.certs / "done").write_text("")

    def _write_kubeconfig(self, path: Path, identity: str) -> None:
        c = self.certs
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "elastic-training-test",
                    "clusters": [
                        {
                            "name": "elastic-training-test",
                            "cluster": {"server": self.state.server, "certificate-authority": str(c / "ca.crt")},
                        }
                    ],
                    "users": [
                        {
                            "name": identity,
                            "user": {
                                "client-certificate": str(c / f"{identity}.crt"),
                                "client-key": str(c / f"{identity}.key"),
                            },
                        }
                    ],
                    "contexts": [
                        {
                            "name": "elastic-training-test",
                            "context": {"cluster": "elastic-training-test", "user": identity},
                        }
                    ],
                },
                indent=2,
            )
            + "\n"
        )

    # -- processes -------------------------------------------------------------------------------
    def _command(self, name: str) -> list[str]:
        p, c, d = self.state.ports, self.certs, self.dir
        if name == "etcd":
            peer = f"http://{LOOPBACK}:{p['etcd-peer']}"
            return [
                self.binary("etcd"),
                "--name=default",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls=http://{LOOPBACK}:{p['etcd']}",
                f"--advertise-client-urls=http://{LOOPBACK}:{p['etcd']}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--log-level=warn",
                # Test data only: a lost write on a host crash costs nothing.
                "--unsafe-no-fsync=true",
            ]
        if name == "kube-apiserver":
            return [
                self.binary("kube-apiserver"),
                f"--etcd-servers=http://{LOOPBACK}:{p['etcd']}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--secure-port={p['kube-apiserver']}",
                f"--tls-cert-file={c / 'apiserver.crt'}",
                f"--tls-private-key-file={c / 'apiserver.key'}",
                f"--client-ca-file={c / 'ca.crt'}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={c / 'service-account.pub'}",
                f"--service-account-signing-key-file={c / 'service-account.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                f"--enable-admission-plugins={','.join(EKS_ADMISSION_PLUGINS)}",
                "--allow-privileged=true",
                "--profiling=false",
                f"--cert-dir={d / 'apiserver-certs'}",
            ]
        if name == "kube-controller-manager":
            # With --run-pods: the endpoints are the pod runner's (scripts/service_proxy.py): the API server
            # refuses a pod's loopback address in an EndpointSlice, so the controllers that write them are off.
            grace = (
                [
                    f"--node-monitor-grace-period={RUN_PODS_GRACE}",
                    "--controllers=*,-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller",
                ]
                if self.state.run_pods
                else []
            )
            return [
                self.binary("kube-controller-manager"),
                f"--kubeconfig={d / 'controller-manager.kubeconfig'}",
                *grace,
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={c / 'service-account.key'}",
                f"--root-ca-file={c / 'ca.crt'}",
                f"--cluster-signing-cert-file={c / 'ca.crt'}",
                f"--cluster-signing-key-file={c / 'ca.key'}",
                "--leader-elect=false",
                f"--bind-address={LOOPBACK}",
                "--secure-port=0",
                "--profiling=false",
            ]
        if name == "kube-scheduler":
            return [
                self.binary("kube-scheduler"),
                f"--kubeconfig={d / 'scheduler.kubeconfig'}",
                "--leader-elect=false",
                f"--bind-address={LOOPBACK}",
                "--secure-port=0",
                "--profiling=false",
            ]
        if name == "kwok":
            stages = [f"--config={path}" for path in sorted(STAGES_DIR.glob("*.yaml"))]
            return [
                self.binary("kwok"),
                f"--kubeconfig={d / 'kwok.kubeconfig'}",
                *stages,
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={'='.join(KWOK_NODE_ANNOTATION)}",
                f"--cidr={POD_CIDR}",
                f"--node-ip={LOOPBACK}",
                f"--server-address={LOOPBACK}:{p['kwok']}",
                "--node-lease-duration-seconds=40",
            ]
        if name.startswith(NODE_KWOK):
            stages = [f"--config={STAGES_DIR / stage}" for stage in NODE_STAGES]
            return [
                self.binary("kwok"),
                f"--kubeconfig={d / 'kwok.kubeconfig'}",
                *stages,
                "--manage-all-nodes=false",
                f"--manage-single-node={name.removeprefix(NODE_KWOK)}",
                f"--cidr={POD_CIDR}",
                f"--node-ip={LOOPBACK}",
                f"--server-address={LOOPBACK}:{p[name]}",
                f"--node-lease-duration-seconds={RUN_PODS_LEASE_SECONDS}",
            ]
        if name == POD_RUNNER:
            python = REPO / ".venv" / "bin" / "python"
            return [
                str(python if python.exists() else sys.executable),
                str(REPO / "scripts" / "pod_runner.py"),
                f"--dir={d}",
                f"--shared-volumes={self.shared_volumes}",
            ]
        raise ValueError(name)

    def _start(self, name: str) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                self._command(name),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.dir,
            )
        self.state.pids[name] = process.pid
        self._save()

    def _stop(self, name: str, timeout: float = 15, how: signal.Signals = signal.SIGTERM) -> None:
        pid = self.state.pids.pop(name, None)
        self._save()
        if pid is None or not alive(pid):
            return
        os.kill(pid, how)
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            while alive(pid):
                time.sleep(0.05)

    def _wait(self, what: str, check, timeout: float, component: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.state.pids.get(component)
            if pid is not None and not alive(pid):
                raise ControlPlaneError(
                    f"{component} exited while waiting for {what}; its log: {self.logs / (component + '.log')}"
                )
            try:
                if check():
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready after {timeout:.0f}s; see {self.logs}")

    def _https_ok(self, path: str) -> bool:
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        context.load_cert_chain(self.certs / "admin.crt", self.certs / "admin.key")
        with urllib.request.urlopen(self.state.server + path, context=context, timeout=5) as response:
            return response.status == 200

    def _etcd_ok(self) -> bool:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.state.ports['etcd']}/health", timeout=5) as r:
            return json.loads(r.read()).get("health") == "true"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.binary("kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def wait_apiserver(self, timeout: float = 180) -> None:
        self._wait("kube-apiserver /readyz", lambda: self._https_ok("/readyz"), timeout, "kube-apiserver")

    # -- the commands ----------------------------------------------------------------------------
    def up(self, nodes: str | None = None, timeout: float = 240, run_pods: bool = False) -> None:
        if self.running():
            if set(self.components) <= set(self.running()) and self.state.run_pods == run_pods:
                if nodes:
                    self.apply_nodes(nodes)
                return
            self.down()
        self.state.run_pods = run_pods
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / LOST_NODES).unlink(missing_ok=True)
        (self.dir / f"{LOST_NODES}.done").unlink(missing_ok=True)
        self._make_certificates()
        self.state.ports = {name: free_port() for name in ("etcd", "etcd-peer", "kube-apiserver", "kwok")}
        self._save()
        self._write_kubeconfig(self.kubeconfig, "admin")
        for identity in ("controller-manager", "scheduler", "kwok", "pod-runner"):
            self._write_kubeconfig(self.dir / f"{identity}.kubeconfig", identity)
        try:
            self._start("etcd")
            self._wait("etcd /health", self._etcd_ok, 60, "etcd")
            self._start("kube-apiserver")
            self.wait_apiserver(timeout)
            for name in self.components[2:]:
                self._start(name)
            # The service-account controller (controller-manager) creates every namespace's `default`
            # ServiceAccount; pods cannot be created before it exists.
            self._wait(
                "the controller-manager (the default ServiceAccount)",
                lambda: self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0,
                120,
                "kube-controller-manager",
            )
            if nodes:
                self.apply_nodes(nodes)
        except BaseException:
            self.down()
            raise

    def apply_nodes(self, nodes_file: str, timeout: float = 120) -> None:
        """Creates the nodes (their status included: a Node's create keeps it) and waits for kwok to
        mark each Ready."""
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", nodes_file)
        names = [n["metadata"]["name"] for n in json.loads(Path(nodes_file).read_text())["items"]]
        if self.state.run_pods:
            for node in names:
                pid = self.state.pids.get(NODE_KWOK + node)
                if pid is None or not alive(pid):
                    self.state.ports[NODE_KWOK + node] = free_port()
                    self._start(NODE_KWOK + node)

        def ready() -> bool:
            out = self.kubectl("get", "nodes", "-o", "json").stdout
            states = {
                n["metadata"]["name"]: any(
                    c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])
                )
                for n in json.loads(out)["items"]
            }
            return all(states.get(name) for name in names)

        self._wait(
            f"{len(names)} kwok nodes Ready", ready, timeout, NODE_KWOK + names[0] if self.state.run_pods else "kwok"
        )

    def restart_apiserver(self, down_seconds: float = 0, how: signal.Signals = signal.SIGTERM) -> None:
        """Stops the API server (SIGTERM: a graceful stop; SIGKILL: a crash), waits, starts it again and
        waits until it is ready."""
        self._stop("kube-apiserver", how=how)
        time.sleep(down_seconds)
        self._start("kube-apiserver")
        self.wait_apiserver()

    def lose_node(self, node: str, timeout: float = 30) -> None:
        """A node lost without notice: the pod runner SIGKILLs its pods' processes (and never writes its
        pods again), and the node's kwok is SIGKILLed, so its Lease and heartbeats stop and the node
        controller marks it NotReady, then evicts."""
        if not self.state.run_pods:
            raise ControlPlaneError("lose-node needs a control plane started with --run-pods")
        if self.kubectl("get", "node", node, check=False).returncode != 0:
            raise ControlPlaneError(f"no node {node!r}")
        path = self.dir / LOST_NODES
        lost = set(json.loads(path.read_text())) if path.exists() else set()
        # Whole or not at all (a new file moved over the old): the pod runner reads it every pass, and an
        # empty file read between write_text's truncation and its write once ended the runner.
        writing = self.dir / f"{LOST_NODES}.writing"
        writing.write_text(json.dumps(sorted(lost | {node})))
        os.replace(writing, path)
        done = self.dir / f"{LOST_NODES}.done"
        self._wait(
            f"the pod runner to stop node {node}",
            lambda: done.exists() and node in json.loads(done.read_text() or "[]"),
            timeout,
            POD_RUNNER,
        )
        self._stop(NODE_KWOK + node, how=signal.SIGKILL)

    def down(self) -> None:
        # Every process this instance started, the last started first (the nodes' kwoks and the pod runner
        # before the control plane).
        for name in reversed([*self.components, *(n for n in self.state.pids if n not in self.components)]):
            self._stop(name)
        left = self.running()
        if left:
            raise ControlPlaneError(f"still running after down: {left}")

    def env(self) -> str:
        shared = f"export SHARED_VOLUMES={self.shared_volumes}\n" if self.state.run_pods else ""
        return f"export KUBECONFIG={self.kubeconfig}\nexport PATH={self.state.bin}:$PATH\n{shared}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="control_plane.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("up", "env", "down", "restart-apiserver", "status", "lose-node"))
    parser.add_argument("node", nargs="?", help="lose-node: the node")
    parser.add_argument("--dir", default=str(CACHE / "default"), help="the instance's state directory")
    parser.add_argument("--bin", help="where the binaries are (scripts/build-tools.sh prints it); up only")
    parser.add_argument("--nodes", help="a JSON v1 List of Node objects to create; up only")
    parser.add_argument(
        "--run-pods",
        action="store_true",
        help="run every pod for real (scripts/pod_runner.py); kwok plays the nodes only; up only",
    )
    args = parser.parse_args(argv)
    plane = ControlPlane(args.dir, args.bin)
    try:
        if args.command == "up":
            if not args.bin:
                raise ControlPlaneError("up needs --bin DIR (the directory scripts/build-tools.sh prints)")
            plane.up(args.nodes, run_pods=args.run_pods)
            print(f"control plane up: {plane.state.server}, kubeconfig {plane.kubeconfig}", file=sys.stderr)
        elif args.command == "env":
            if not plane.state_file.exists():
                raise ControlPlaneError(f"no control plane in {plane.dir}: run `up` first")
            print(plane.env(), end="")
        elif args.command == "down":
            plane.down()
        elif args.command == "restart-apiserver":
            plane.restart_apiserver()
        elif args.command == "lose-node":
            if not args.node:
                raise ControlPlaneError("lose-node needs the node's name")
            plane.lose_node(args.node)
        else:
            print(json.dumps({"dir": str(plane.dir), "running": plane.running(), "ports": plane.state.ports}))
    except (ControlPlaneError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", None) or ""
        print(
            f"control-plane: {error}{(': ' + detail.strip().splitlines()[-1]) if detail.strip() else ''}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
