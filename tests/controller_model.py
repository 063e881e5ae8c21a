"""The worker pod the TorchElastic controller really creates from an ElasticJob, modelled from its source.

Read in (each step below cites where):
- pytorch/elastic @ bc88e6982961d4117e53c4c8163ecf277f35c2c5, directory kubernetes/
  - go.mod: `replace k8s.io/api => k8s.io/api v0.15.10`, so the ElasticJob (and its pod template)
    is decoded into Kubernetes 1.15 Go types; a field those types lack is silently dropped.
  - controllers/pod.go SetClusterSpecForPod: prepends "--rdzv_backend=etcd",
    "--rdzv_endpoint=" + spec.rdzvEndpoint, "--rdzv_id=" + job name, "--nnodes=" + min + ":" + max
    to the args of every container (min/max fall back to Worker.replicas, controllers/util.go
    computeDesiredReplicas); `command` is left alone.
  - controllers/elasticjob_controller.go: GetGroupNameLabelValue is the API group,
    "elastic.pytorch.org"; SetClusterSpec calls SetClusterSpecForPod.
- kubeflow/common @ 0b3a4c3fca853dcca31f16bcb56960557130ef06 (the version that go.mod requires,
  v0.0.0-20200327002023-0b3a4c3fca85), pkg/controller.v1/common/
  - pod.go createNewPod: deep-copies Worker.template, names it GenGeneralName(job, "worker", index)
    (util.go: "<job>-worker-<i>"), adds GenLabels (job_controller.go: group-name, job-name) plus
    replica-type ("worker", lowercased) and replica-index to the template's labels, calls
    SetClusterSpec, then setRestartPolicy: ExitCode becomes Never, any other value is copied.
  - pod_control.go GetPodFromTemplate: the pod gets the template's labels, annotations,
    finalizers and name, a deep copy of its spec, and the ElasticJob as controller owner;
    createPod sets the job's namespace.
The 1.15 field list is tests/fixtures/k8s-1.15-pod-fields.json (how it was made: its README).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

FIELDS_FILE = Path(__file__).resolve().parent / "fixtures" / "k8s-1.15-pod-fields.json"
GROUP = "elastic.pytorch.org"
REPLICA_TYPE = "worker"  # strings.ToLower(string(v1alpha1.ElasticReplicaTypeWorker))


@cache
def pod_template_fields_1_15() -> dict[str, Any]:
    return json.loads(FIELDS_FILE.read_text())["fields"]


def keep_known_fields(value: Any, known: dict[str, Any] | bool) -> Any:
    """`value` as the 1.15 Go types hold it: unknown keys of every object dropped, lists walked."""
    if known is True or value is None:
        return copy.deepcopy(value)
    if isinstance(value, list):
        return [keep_known_fields(item, known) for item in value]
    return {key: keep_known_fields(item, known[key]) for key, item in value.items() if key in known}


def injected_args(elasticjob: dict[str, Any]) -> list[str]:
    """controllers/pod.go launchDefaultArgs, in its order."""
    spec = elasticjob["spec"]
    replicas = spec["replicaSpecs"]["Worker"]["replicas"]
    low, high = spec.get("minReplicas", replicas), spec.get("maxReplicas", replicas)
    return ["--rdzv_backend=etcd", f"--rdzv_endpoint={spec['rdzvEndpoint']}",
            f"--rdzv_id={elasticjob['metadata']['name']}", f"--nnodes={low}:{high}"]


def _restart_policy(replica_policy: str) -> str:
    return "Never" if replica_policy == "ExitCode" else replica_policy


def worker_pod(elasticjob: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """The Pod object the controller submits to the API server for worker `index`."""
    job = elasticjob["metadata"]["name"]
    worker = elasticjob["spec"]["replicaSpecs"]["Worker"]
    template = keep_known_fields(worker["template"], pod_template_fields_1_15())
    metadata = template.get("metadata", {})
    labels = {**metadata.get("labels", {}), "group-name": GROUP, "job-name": job.replace("/", "-"),
              "replica-type": REPLICA_TYPE, "replica-index": str(index)}
    spec = template["spec"]
    for container in spec["containers"]:
        container["args"] = [*injected_args(elasticjob), *container.get("args", [])]
    spec["restartPolicy"] = _restart_policy(worker["restartPolicy"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{REPLICA_TYPE}-{index}".replace("/", "-"),
            "namespace": elasticjob["metadata"]["namespace"],
            "labels": labels,
            "annotations": dict(metadata.get("annotations", {})),
            "finalizers": list(metadata.get("finalizers", [])),
            "ownerReferences": [{"apiVersion": f"{GROUP}/v1alpha1", "kind": "ElasticJob", "name": job,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }


def command_line(pod: dict[str, Any], container_name: str) -> list[str]:
    """What the container runs: its command, then its args (the kubelet expands $(VAR) later)."""
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == container_name]
    return [*container.get("command", []), *container.get("args", [])]
