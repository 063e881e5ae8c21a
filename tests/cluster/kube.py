"""Talking to the tier's control plane with the real kubectl: apply, read back, wait, and compare what
was sent with what the API server kept."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from control_plane import ControlPlane

# The order a deployment tool creates kinds in (Helm's InstallOrder, helm/helm pkg/release/util/kind_sorter.go,
# reduced to the kinds the stacks render): what an object needs exists before it.
KIND_ORDER = (
    "Namespace",
    "NetworkPolicy",
    "PriorityClass",
    "StorageClass",
    "PersistentVolume",
    "ServiceAccount",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Deployment",
    "StatefulSet",
    "Job",
    "PodDisruptionBudget",
)
CRD = "CustomResourceDefinition"
FIELD_MANAGER = "pulumi-kubernetes"
# Where each workload keeps the template of the pods its controller creates.
WORKLOAD_TEMPLATES = {
    "Deployment": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "ElasticJob": ("spec", "replicaSpecs", "Worker", "template"),
}


def kind_rank(obj: dict[str, Any]) -> int:
    return KIND_ORDER.index(obj["kind"]) if obj["kind"] in KIND_ORDER else len(KIND_ORDER)


def as_list(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def apply(plane: ControlPlane, objects: list[dict[str, Any]], *extra: str) -> list[dict[str, Any]]:
    """Server-side apply, as pulumi-kubernetes v4 does by default (enableServerSideApply); returns what
    the API server answered, in order."""
    result = plane.kubectl(
        "apply",
        "--server-side",
        f"--field-manager={FIELD_MANAGER}",
        "-o",
        "json",
        *extra,
        "-f",
        "-",
        input=as_list(objects),
        check=False,
    )
    assert result.returncode == 0, f"kubectl apply refused:\n{result.stderr}"
    answer = json.loads(result.stdout)
    return answer["items"] if answer.get("kind") == "List" else [answer]


def get(plane: ControlPlane, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result = plane.kubectl("get", "-o", "json", "-f", "-", input=as_list(objects))
    answer = json.loads(result.stdout)
    return answer["items"] if answer.get("kind") == "List" else [answer]


def wait_until(what: str, check: Callable[[], Any], timeout: float = 60, every: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(every)


def wait_established(plane: ControlPlane, crd_names: list[str]) -> None:
    if crd_names:
        plane.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            *[f"customresourcedefinition/{name}" for name in crd_names],
        )


def ref(obj: dict[str, Any]) -> str:
    namespace = obj["metadata"].get("namespace")
    return f"{obj['kind']} {namespace + '/' if namespace else ''}{obj['metadata']['name']}"


def differences(sent: Any, live: Any, path: str = "") -> list[str]:
    """Every field that was sent and is not what the API server kept (dropped, pruned, defaulted over
    or rewritten), as 'path: sent -> live'. Fields the server added are not differences."""
    if isinstance(sent, dict):
        if not isinstance(live, dict):
            return [f"{path or '.'}: {json.dumps(sent)[:120]} -> {json.dumps(live)[:120]}"]
        found = []
        for key, value in sent.items():
            if key not in live:
                found.append(f"{path}.{key}: {json.dumps(value)[:120]} -> (absent)")
            else:
                found += differences(value, live[key], f"{path}.{key}")
        return found
    if isinstance(sent, list):
        if not isinstance(live, list) or len(live) != len(sent):
            return [f"{path}: {json.dumps(sent)[:160]} -> {json.dumps(live)[:160]}"]
        return [d for i, (a, b) in enumerate(zip(sent, live)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if sent == live else [f"{path}: {json.dumps(sent)} -> {json.dumps(live)}"]


def pod_from_template(workload: dict[str, Any], name: str) -> dict[str, Any]:
    """The pod a controller would create from a workload's pod template (kubernetes pkg/controller
    controller_utils.go GetPodFromTemplate: the template's labels, annotations and spec)."""
    template = workload
    for key in WORKLOAD_TEMPLATES[workload["kind"]]:
        template = template[key]
    metadata = {
        "name": name,
        "namespace": workload["metadata"]["namespace"],
        "labels": template.get("metadata", {}).get("labels", {}),
        "annotations": template.get("metadata", {}).get("annotations", {}),
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def delete(plane: ControlPlane, objects: list[dict[str, Any]], timeout: int = 180) -> None:
    """Deletes the objects, newest first, and waits until they are gone; what is left after `timeout`
    is named. CRDs stay: every stack renders the same ones, and a CRD deleted while namespaces are
    being deleted makes the namespace controller's discovery fail and back off for minutes (seen
    here: a namespace left Terminating past 120 s). The session's control plane goes with its CRDs."""
    batch = [o for o in reversed(objects) if o["kind"] != CRD]
    if not batch:
        return
    result = plane.kubectl(
        "delete",
        "--ignore-not-found",
        "--wait=true",
        f"--timeout={timeout}s",
        "-f",
        "-",
        input=as_list(batch),
        check=False,
        timeout=timeout + 30,
    )
    if result.returncode != 0:
        left = plane.kubectl("get", "-f", "-", "-o", "name", "--ignore-not-found", input=as_list(batch), check=False)
        raise AssertionError(f"not deleted within {timeout}s: {left.stdout.split()} ({result.stderr.strip()})")
