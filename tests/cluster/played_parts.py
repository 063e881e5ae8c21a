"""What runs beside a real control plane in a kind cluster and is played here, for the engine test:
kind's volume provisioner.

- `LocalPathProvisioner`: kind's default StorageClass `standard` is rancher.io/local-path with
  WaitForFirstConsumer and reclaimPolicy Delete, volumes under /var/local-path-provisioner
  (kubernetes-sigs/kind pkg/build/nodeimage/const_storage.go @ 01d9cb224b5bc63f81c33606c59d2715c69fea63,
  `KIND_STORAGE_CLASS` below); once the scheduler picks a node for a claim's first pod
  (annotation volume.kubernetes.io/selected-node), the provisioner makes a PersistentVolume bound to it.

The ElasticJob controller is not played: the engine test runs ours (`python -m controller`, as the
stack's ServiceAccount: controller_harness.StackController).
"""

from __future__ import annotations

import json
import threading
from typing import Any


KIND_STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": "rancher.io/local-path",
    "volumeBindingMode": "WaitForFirstConsumer",
    "reclaimPolicy": "Delete",
}
SELECTED_NODE = "volume.kubernetes.io/selected-node"


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
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {
                    "name": f"pvc-{meta['uid']}",
                    "annotations": {"pv.kubernetes.io/provisioned-by": "rancher.io/local-path"},
                },
                "spec": {
                    "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                    "accessModes": claim["spec"]["accessModes"],
                    "storageClassName": claim["spec"]["storageClassName"],
                    "persistentVolumeReclaimPolicy": "Delete",
                    "claimRef": {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                    "hostPath": {"path": f"/var/local-path-provisioner/pvc-{meta['uid']}", "type": "DirectoryOrCreate"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
            self.plane.kubectl("apply", "-f", "-", input=json.dumps(volume), check=False)
        # The provisioner deletes a released volume of reclaim policy Delete.
        for volume in self.get("pv"):
            if (volume.get("status") or {}).get("phase") == "Released":
                self.plane.kubectl("delete", "pv", volume["metadata"]["name"], "--wait=false", check=False)
