"""What runs beside a real control plane in a real cluster and is played here, for the engine test:
kind's volume provisioner, and the ElasticJob controller's part that the wait reads.

- `LocalPathProvisioner`: kind's default StorageClass `standard` is rancher.io/local-path with
  WaitForFirstConsumer and reclaimPolicy Delete, volumes under /var/local-path-provisioner
  (kubernetes-sigs/kind pkg/build/nodeimage/const_storage.go @ 01d9cb224b5bc63f81c33606c59d2715c69fea63,
  `KIND_STORAGE_CLASS` below); once the scheduler picks a node for a claim's first pod
  (annotation volume.kubernetes.io/selected-node), the provisioner makes a PersistentVolume bound to it.
- `PlayedController`: until the maintained controller (its own issue, branch `ctrl`) is merged, the test
  plays what the archived TorchElastic controller does that the wait reads (pytorch/elastic kubernetes/
  @ bc88e69 on kubeflow/common @ 0b3a4c3): it creates `replicas` worker pods per ElasticJob from the
  Worker template, named `<job>-worker-<index>`, owned by the ElasticJob (pkg/controller.v1/common/pod.go
  createNewPod), and marks the job Succeeded (a `Succeeded` condition, status "True": kubeflow/common
  pkg/util/status.go) once every worker runs. A job named in `failing` gets workers carrying the kwok
  stage's fail label (scripts/kwok-stages/pod-failed.yaml): kwok ends each with exit code 1 and the job is
  never marked, as the archived controller leaves a job with a permanently failed worker Running.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from kube import pod_from_template

KIND_STORAGE_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                      "metadata": {"name": "standard",
                                   "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                      "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer",
                      "reclaimPolicy": "Delete"}
SELECTED_NODE = "volume.kubernetes.io/selected-node"
ELASTICJOB_API = "elastic.pytorch.org/v1alpha1"
FAIL_LABEL = "kwok.elastic-training.test/fail"
EXIT_CODE_ANNOTATION = "kwok.elastic-training.test/exit-code"


class _Loop(threading.Thread):
    def __init__(self, plane):
        super().__init__(daemon=True)
        self.plane, self.stop, self.errors = plane, threading.Event(), []

    def get(self, *args: str) -> list[dict[str, Any]]:
        result = self.plane.kubectl("get", *args, "-o", "json", check=False)
        return json.loads(result.stdout)["items"] if result.returncode == 0 else []

    def run(self) -> None:
        while not self.stop.wait(0.3):
            try:
                self.step()
            except Exception as error:  # noqa: BLE001 - kept for the test to report, the loop goes on
                self.errors.append(repr(error))

    def __exit__(self, *_):
        self.stop.set()
        self.join()

    def __enter__(self):
        self.start()
        return self


class LocalPathProvisioner(_Loop):
    def step(self) -> None:
        for claim in self.get("pvc", "-A"):
            node = (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE)
            if not node or claim["spec"].get("volumeName"):
                continue
            meta = claim["metadata"]
            volume = {
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": f"pvc-{meta['uid']}",
                             "annotations": {"pv.kubernetes.io/provisioned-by": "rancher.io/local-path"}},
                "spec": {"capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                         "accessModes": claim["spec"]["accessModes"],
                         "storageClassName": claim["spec"]["storageClassName"],
                         "persistentVolumeReclaimPolicy": "Delete",
                         "claimRef": {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                         "hostPath": {"path": f"/var/local-path-provisioner/pvc-{meta['uid']}", "type": "DirectoryOrCreate"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}
            self.plane.kubectl("apply", "-f", "-", input=json.dumps(volume), check=False)
        # The provisioner deletes a released volume of reclaim policy Delete.
        for volume in self.get("pv"):
            if (volume.get("status") or {}).get("phase") == "Released":
                self.plane.kubectl("delete", "pv", volume["metadata"]["name"], "--wait=false", check=False)


class PlayedController(_Loop):
    def __init__(self, plane, namespace: str, job_label: str):
        super().__init__(plane)
        self.namespace, self.job_label = namespace, job_label
        self.failing: set[str] = set()
        self.succeeded: list[str] = []

    def step(self) -> None:
        for job in self.get("elasticjobs", "-n", self.namespace):
            meta = job["metadata"]
            if meta.get("deletionTimestamp") or any(c.get("type") == "Succeeded"
                                                    for c in (job.get("status") or {}).get("conditions") or []):
                continue
            name = meta["name"]
            pods = self.get("pods", "-n", self.namespace, "-l", f"{self.job_label}={name}")
            if not pods:
                self._create_workers(job)
            elif name not in self.failing and all((p.get("status") or {}).get("phase") == "Running" for p in pods):
                self._succeed(job)

    def _create_workers(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        owner = {"apiVersion": ELASTICJOB_API, "kind": "ElasticJob", "name": meta["name"], "uid": meta["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        for index in range(job["spec"]["replicaSpecs"]["Worker"]["replicas"]):
            pod = pod_from_template(job, f"{meta['name']}-worker-{index}")
            pod["metadata"]["ownerReferences"] = [owner]
            if meta["name"] in self.failing:
                pod["metadata"]["labels"] = {**pod["metadata"]["labels"], FAIL_LABEL: "true"}
                pod["metadata"]["annotations"] = {**pod["metadata"]["annotations"], EXIT_CODE_ANNOTATION: "1"}
            self.plane.kubectl("create", "-f", "-", input=json.dumps(pod), check=False)

    def _succeed(self, job: dict[str, Any]) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"status": {"conditions": [{"type": "Succeeded", "status": "True", "reason": "ElasticJobSucceeded",
                                             "message": "played by the engine test", "lastUpdateTime": now,
                                             "lastTransitionTime": now}]}}
        self.plane.kubectl("patch", "elasticjob", job["metadata"]["name"], "-n", self.namespace, "--type=merge",
                           "-p", json.dumps(status))
        self.succeeded.append(job["metadata"]["name"])
