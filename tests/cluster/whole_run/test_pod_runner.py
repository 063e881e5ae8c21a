"""The pod runner (scripts/pod_runner.py) as a kubelet, each behaviour on the real control plane with
small `python -c` pods: what the container sees (env, downward API, the ServiceAccount's real token,
configMap/secret/emptyDir/PVC volumes), the status it writes (Running with podIP, exit codes, the
termination message, restarts), deletion (SIGTERM, the grace period, SIGKILL, removal), Services (a
name that reaches the ready endpoint), and node loss (processes SIGKILLed, the node NotReady)."""

from __future__ import annotations

import json
import os
import textwrap
import time

import pytest

from run_pods_plane import pod_network, start_plane, stop_plane
from kube import wait_until

NAMESPACE = "runner"


@pytest.fixture(scope="module")
def plane(tools_bin, tmp_path_factory):
    plane = start_plane(tmp_path_factory.mktemp("run-pods-runner"), tools_bin, node_count=2)
    plane.kubectl("create", "namespace", NAMESPACE)
    wait_until(
        "the default ServiceAccount",
        lambda: plane.kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
        timeout=60,
    )
    yield plane
    stop_plane(plane)


def pod(name: str, code: str, **spec) -> dict:
    container = {"name": "main", "image": "this-checkout", "command": ["python", "-c", textwrap.dedent(code)]}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }


def create(plane, *objects) -> None:
    """In order: a pod's ServiceAccount before it."""
    result = plane.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}), check=False
    )
    assert result.returncode == 0, result.stderr


def get(plane, name: str) -> dict | None:
    result = plane.kubectl("get", "pod", name, "-n", NAMESPACE, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def ended(plane, name: str, timeout: float = 90) -> dict:
    return wait_until(
        f"pod {name} ended",
        lambda: (p := get(plane, name)) and p["status"].get("phase") in ("Succeeded", "Failed") and p,
        timeout=timeout,
    )


def log_of(plane, name: str) -> str:
    return "\n".join(p.read_text() for p in (plane.dir / "pods").glob(f"{NAMESPACE}_{name}_*/main.log"))


def test_a_pod_sees_its_env_volumes_and_token_and_its_exit_is_written(plane):
    create(
        plane,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": NAMESPACE},
            "data": {"greeting": "hello"},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "keys", "namespace": NAMESPACE},
            "stringData": {"key": "s3cret"},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "shared", "namespace": NAMESPACE},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "read-pods", "namespace": NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader", "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-pods"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NAMESPACE}],
        },
        pod(
            "reader",
            """
               import os, sys
               from kubernetes import client, config
               assert open("/config/greeting").read() == "hello"
               assert open("/keys/key").read() == "s3cret"
               open("/data/written-by-pod", "w").write(os.environ["POD_NAME"] + " " + os.environ["POD_IP"])
               config.load_incluster_config()
               me = client.CoreV1Api().read_namespaced_pod(os.environ["POD_NAME"], os.environ["POD_NAMESPACE"])
               print("read myself as the ServiceAccount:", me.status.pod_ip)
               open("/dev/termination-log", "w").write("done: " + me.status.pod_ip)
               sys.exit(7)
           """,
            serviceAccountName="reader",
            container={
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                ],
                "volumeMounts": [
                    {"name": "config", "mountPath": "/config"},
                    {"name": "keys", "mountPath": "/keys"},
                    {"name": "data", "mountPath": "/data"},
                ],
            },
            volumes=[
                {"name": "config", "configMap": {"name": "settings"}},
                {"name": "keys", "secret": {"secretName": "keys"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            ],
        ),
    )
    done = ended(plane, "reader")
    status = done["status"]
    assert status["phase"] == "Failed", log_of(plane, "reader")
    assert pod_network(status["podIP"]), status
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 7 and terminated["reason"] == "Error", (terminated, log_of(plane, "reader"))
    assert terminated["message"] == f"done: {status['podIP']}", terminated
    written = (plane.shared_volumes / NAMESPACE / "shared" / "written-by-pod").read_text()
    assert written == f"reader {status['podIP']}"


def test_deletion_is_sigterm_then_the_grace_period_then_sigkill(plane):
    create(
        plane,
        pod(
            "polite",
            """
               import signal, sys, time
               signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
               print("up", flush=True)
               time.sleep(600)
           """,
            terminationGracePeriodSeconds=30,
        ),
        pod(
            "stubborn",
            """
               import signal, time
               signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
               print("up", flush=True)
               time.sleep(600)
           """,
            terminationGracePeriodSeconds=3,
        ),
    )
    for name in ("polite", "stubborn"):
        wait_until(f"{name} running", lambda n=name: "up" in log_of(plane, n), timeout=60)
    began = time.monotonic()
    plane.kubectl("delete", "pod", "polite", "stubborn", "-n", NAMESPACE, "--wait=false")
    wait_until("both pods removed", lambda: get(plane, "polite") is None and get(plane, "stubborn") is None, timeout=60)
    took = time.monotonic() - began
    assert "ignoring SIGTERM" in log_of(plane, "stubborn")
    assert 3 <= took < 30, f"removed after {took:.1f}s: the stubborn one had a 3 s grace period"


def test_restart_policy_on_failure_restarts_the_container(plane):
    create(
        plane,
        pod(
            "flaky",
            """
        import os, sys
        marker = os.environ["MARK"]
        if not os.path.exists(marker):
            open(marker, "w").close()
            sys.exit(1)
    """,
            restartPolicy="OnFailure",
            container={
                "env": [{"name": "MARK", "value": "/scratch/tried"}],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            },
            volumes=[{"name": "scratch", "emptyDir": {}}],
        ),
    )
    done = ended(plane, "flaky", timeout=120)
    status = done["status"]["containerStatuses"][0]
    assert done["status"]["phase"] == "Succeeded" and status["restartCount"] == 1, done["status"]
    assert status["lastState"]["terminated"]["exitCode"] == 1, status


def test_a_service_name_reaches_its_ready_endpoint(plane):
    create(
        plane,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "echo", "namespace": NAMESPACE},
            "spec": {"selector": {"app": "echo-server"}, "ports": [{"port": 7000, "targetPort": "echo"}]},
        },
        pod(
            "echo-server",
            """
               import socket
               server = socket.create_server(("0.0.0.0", 7001))
               while True:
                   connection, _ = server.accept()
                   connection.sendall(b"echo from " + connection.getsockname()[0].encode())
                   connection.close()
           """.replace('"0.0.0.0"', '"$(BIND)"'),
            container={
                "ports": [{"name": "echo", "containerPort": 7001}],
                "env": [{"name": "BIND", "value": "0.0.0.0"}],
                "readinessProbe": {"tcpSocket": {"port": 7001}, "periodSeconds": 1},
            },
        ),
    )
    server = wait_until(
        "echo-server ready",
        lambda: (
            (p := get(plane, "echo-server"))
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
            and p
        ),
        timeout=60,
    )
    create(
        plane,
        pod(
            "client",
            """
        import os, socket
        host, port = os.environ["TARGET"].split(":")
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            print(connection.recv(100).decode())
    """,
            container={"env": [{"name": "TARGET", "value": "echo:7000"}]},
        ),
    )
    done = ended(plane, "client")
    assert done["status"]["phase"] == "Succeeded", log_of(plane, "client")
    # The server listened on its own address (0.0.0.0 is the pod's), reached through the Service's.
    assert log_of(plane, "client").strip() == f"echo from {server['status']['podIP']}"


def test_a_lost_node_kills_its_pods_and_goes_not_ready(plane):
    node = "elastic-training-worker"
    create(
        plane,
        pod(
            "on-lost-node",
            """
        import os, time
        open(os.environ["PIDFILE"], "w").write(str(os.getpid()))
        time.sleep(600)
    """,
            nodeName=node,
            container={
                "env": [{"name": "PIDFILE", "value": "/scratch/pid"}],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            },
            volumes=[{"name": "scratch", "emptyDir": {}}],
        ),
    )
    pid_file = wait_until(
        "the pod's process",
        lambda: next(iter((plane.dir / "pods").glob(f"{NAMESPACE}_on-lost-node_*/volumes/scratch/pid")), None),
        timeout=60,
    )
    pid = int(wait_until("its pid", lambda: pid_file.read_text(), timeout=10))
    lost_at = time.monotonic()
    plane.lose_node(node)
    wait_until("the process killed", lambda: not os.path.exists(f"/proc/{pid}"), timeout=10)

    def not_ready():
        state = json.loads(plane.kubectl("get", "node", node, "-o", "json").stdout)
        return any(c["type"] == "Ready" and c["status"] != "True" for c in state["status"]["conditions"])

    wait_until("the node NotReady", not_ready, timeout=90)
    print(f"\nnode NotReady {time.monotonic() - lost_at:.0f}s after its loss")
    # Its pod is never written again by a kubelet: still Running in the API, marked not Ready by the node controller.
    assert get(plane, "on-lost-node")["status"]["phase"] == "Running"
