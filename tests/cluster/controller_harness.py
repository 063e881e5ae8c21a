"""Our ElasticJob controller (controller/) as a process against the tier's control plane: its own
namespace (enforcing restricted), its real ServiceAccount, Role and RoleBinding from the stack
(infra/specs/elastic.py controller_objects) and a token of that account, so every call it makes is
checked by the API server's RBAC as in the cluster; kwok nodes for the worker pods; ElasticJobs whose
pods kwok ends as the scripts/kwok-stages say (run-for, fail, exit-code).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from control_plane import ControlPlane
from kube import apply, delete, wait_established, wait_until
from cluster_nodes import KWOK_ANNOTATION
from controller import render
from elastic_training import run_directory
from elastic_training.elasticjob import JOB_LABEL
from infra.specs import elastic
from infra.specs.security import container_security_context, pod_security_context, pod_security_labels

REPO = Path(__file__).resolve().parents[2]
NODE_LABEL = "elastic-training.test/controller-node"
RUN_FOR = "kwok.elastic-training.test/run-for"
FAIL = "kwok.elastic-training.test/fail"
EXIT_CODE = "kwok.elastic-training.test/exit-code"
IMAGE = "registry.example/trainer@sha256:" + "0" * 64


def kubectl_json(plane: ControlPlane, *args: str) -> Any:
    return json.loads(plane.kubectl(*args, "-o", "json").stdout)


def nodes(plane: ControlPlane, count: int = 2) -> list[str]:
    """kwok nodes for the workers (created once; kwok marks them Ready)."""
    names = [f"ctrl-node-{i}" for i in range(count)]
    items = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    NODE_LABEL: "true",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
                "annotations": dict(KWOK_ANNOTATION),
            },
            "status": {
                "capacity": {"cpu": "16", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "16", "memory": "32Gi", "pods": "110"},
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "v1.35.8",
                    "kubeProxyVersion": "v1.35.8",
                    "containerRuntimeVersion": "kwok",
                    "kernelVersion": "kwok",
                    "osImage": "kwok",
                    "bootID": "",
                    "machineID": "",
                    "systemUUID": "",
                },
            },
        }
        for name in names
    ]
    path = plane.dir / "controller-nodes.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    plane.apply_nodes(str(path))
    return names


def _workload_namespace(name: str) -> dict[str, Any]:
    return elastic.namespace(name, "workloads", elastic.WORKLOAD_NAMESPACE_ENFORCE)


def namespace(plane: ControlPlane, name: str) -> None:
    """The workload namespace as the stack makes it (restricted), the CRD, and the controller's RBAC.
    remove_namespace takes it away again (the CRD stays: kube.delete says why)."""
    ns = _workload_namespace(name)
    assert ns["metadata"]["labels"] == {**ns["metadata"]["labels"], **pod_security_labels("restricted")}
    crd = elastic.elasticjob_crd()
    apply(plane, [crd, ns])
    wait_established(plane, [crd["metadata"]["name"]])
    rbac = [o for o in elastic.controller_objects(name, IMAGE, "efs-pvc") if o["kind"] != "Deployment"]
    apply(plane, rbac)


def remove_namespace(plane: ControlPlane, name: str) -> None:
    """Takes the namespace away as `pulumi destroy` does: the ElasticJobs first (the garbage collector
    deletes their Jobs, which frees the pods), then the namespace. Deleting the namespace of a running
    ElasticJob directly never ends (test_namespace_deletion.py says why), so later tests on the shared
    control plane would see its objects."""
    plane.kubectl("delete", "elasticjobs", "--all", "-n", name, "--wait=true", "--timeout=120s", timeout=150)
    wait_until(
        f"the Jobs and pods of {name} collected",
        lambda: not plane.kubectl("get", "jobs,pods", "-n", name, "-o", "name").stdout.strip(),
        timeout=120,
    )
    delete(plane, [_workload_namespace(name)])


def controller_kubeconfig(plane: ControlPlane, ns: str) -> Path:
    """A kubeconfig with a token of the controller's ServiceAccount: the API server authorizes its calls by its Role."""
    token = plane.kubectl("create", "token", elastic.CONTROLLER_NAME, "-n", ns, "--duration=2h").stdout.strip()
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "controller", "user": {"token": token}}],
        "contexts": [{"name": "controller", "context": {"cluster": cluster["name"], "user": "controller"}}],
        "current-context": "controller",
    }
    path = plane.dir / f"controller-{ns}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


class Controller:
    """`python -m controller` of this checkout, as its ServiceAccount."""

    def __init__(self, plane: ControlPlane, ns: str, identity: str, shared_root: Path | None = None):
        self.log = plane.dir / f"controller-{ns}-{identity}.log"
        args = [
            sys.executable,
            "-m",
            "controller",
            f"--namespace={ns}",
            f"--identity={identity}",
            f"--kubeconfig={controller_kubeconfig(plane, ns)}",
            "--resync-seconds=1",
        ]
        if shared_root:
            args.append(f"--shared-root={shared_root}")
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


def controller_in_its_namespace(
    plane: ControlPlane, tmp_path_factory: Any, ns: str, identity: str
) -> Iterator[tuple[ControlPlane, Controller, Path]]:
    """A module fixture's body: nodes, the workload namespace `ns` and our controller running in it with a
    shared folder of its own; on the way out the controller must stop cleanly and the namespace is removed
    as `pulumi destroy` removes it."""
    nodes(plane)
    namespace(plane, ns)
    shared = tmp_path_factory.mktemp("shared")
    ctl = Controller(plane, ns, identity, shared_root=shared)
    yield plane, ctl, shared
    assert ctl.stop() == 0, ctl.output()[-3000:]
    remove_namespace(plane, ns)


def elasticjob(
    name: str,
    ns: str,
    replicas: int = 2,
    low: int = 1,
    high: int = 2,
    run_for: str = "4s",
    run_dir: str = "/efs-shared/runs/x",
    **spec: Any,
) -> dict[str, Any]:
    """An ElasticJob whose workers kwok runs for `run_for`, then ends 0; restricted-compliant."""
    container = {
        "name": render.WORKER_CONTAINER,
        "image": IMAGE,
        "command": ["python", "-m", "jobs.elastic.agent"],
        "args": ["--rdzv_backend=reconnecting-c10d", "-m", "jobs.training.train", "--run-dir", run_dir],
        "env": [{"name": run_directory.RUN_DIR_ENV, "value": run_dir}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": container_security_context(),
    }
    template = {
        "metadata": {
            "labels": {"app.kubernetes.io/component": "training", JOB_LABEL: name},
            "annotations": {RUN_FOR: run_for},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": pod_security_context(),
            "nodeSelector": {NODE_LABEL: "true"},
            "terminationGracePeriodSeconds": 1,
            "containers": [container],
        },
    }
    return {
        "apiVersion": f"{render.GROUP}/{render.VERSION}",
        "kind": render.KIND,
        "metadata": {"name": name, "namespace": ns, "labels": {JOB_LABEL: name}},
        "spec": {
            "rdzvEndpoint": "store:2379",
            "minReplicas": low,
            "maxReplicas": high,
            "replicaSpecs": {"Worker": {"replicas": replicas, "restartPolicy": "ExitCode", "template": template}},
            **spec,
        },
    }


def status(plane: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    return kubectl_json(plane, "get", "elasticjob", name, "-n", ns).get("status") or {}


def condition(plane: ControlPlane, ns: str, name: str, kind: str, timeout: float = 90) -> dict[str, Any]:
    def found():
        return next(
            (c for c in status(plane, ns, name).get("conditions") or [] if c["type"] == kind and c["status"] == "True"),
            None,
        )

    return wait_until(f"ElasticJob {ns}/{name} condition {kind}", found, timeout=timeout)


def pods(plane: ControlPlane, ns: str, name: str) -> list[dict[str, Any]]:
    return kubectl_json(plane, "get", "pods", "-n", ns, "-l", f"{render.ELASTICJOB_LABEL}={name}")["items"]


def job(plane: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    result = plane.kubectl("get", "job", name, "-n", ns, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def running_pods(plane: ControlPlane, ns: str, name: str, count: int, timeout: float = 60) -> list[dict[str, Any]]:
    def enough():
        up = [
            p
            for p in pods(plane, ns, name)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]
        return up if len(up) >= count else None

    return wait_until(f"{count} running worker pods of {ns}/{name}", enough, timeout=timeout)


def end_pod(plane: ControlPlane, ns: str, pod: str, exit_code: int) -> float:
    """kwok ends this one pod with `exit_code` (scripts/kwok-stages/pod-failed.yaml); returns when it was asked.
    One patch: annotated first, the pod-succeeded stage would end it 0 on the new run-for."""
    patch = {"metadata": {"labels": {FAIL: "true"}, "annotations": {EXIT_CODE: str(exit_code), RUN_FOR: "1ms"}}}
    asked = time.time()
    plane.kubectl("patch", "pod", pod, "-n", ns, "--type=merge", "-p", json.dumps(patch))
    return asked


class StackController:
    """`python -m controller` as the ServiceAccount a stack creates (for the engine test): started once
    the stack's RoleBinding for it exists, so that `up` itself makes the account the controller runs as.
    Stands in for the stack's controller Deployment, whose pod kwok only marks Running."""

    def __init__(self, plane: ControlPlane, ns: str, identity: str = "engine-test"):
        self.plane, self.ns, self.identity = plane, ns, identity
        self.process: Controller | None = None
        self.exit_codes: list[int] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()  # set by stop(): a start still waiting gives up
        self._thread: threading.Thread | None = None

    def start_when_granted(self, before_start: Callable[[], None] | None = None) -> None:
        """In the background: wait for the controller's RoleBinding, run `before_start`, then start."""
        self.stopping.clear()

        def run() -> None:
            try:
                wait_until(
                    f"RoleBinding {self.ns}/{elastic.CONTROLLER_NAME}",
                    lambda: (
                        self.stopping.is_set()
                        or self.plane.kubectl(
                            "get", "rolebinding", elastic.CONTROLLER_NAME, "-n", self.ns, check=False
                        ).returncode
                        == 0
                    ),
                    timeout=600,
                    every=0.5,
                )
                if before_start and not self.stopping.is_set():
                    before_start()
                if not self.stopping.is_set():
                    self.process = Controller(self.plane, self.ns, self.identity)
            except Exception as error:  # noqa: BLE001 - kept for the test to report
                self.errors.append(repr(error))

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self._thread:
            self._thread.join(timeout=60)
        if self.process:
            self.exit_codes.append(self.process.stop())
            self.process = None

    def output(self) -> str:
        log = self.plane.dir / f"controller-{self.ns}-{self.identity}.log"
        return log.read_text(errors="replace") if log.exists() else ""
