"""StorageClass, PersistentVolume and PersistentVolumeClaim of the shared EFS volume."""

from __future__ import annotations

from typing import Any

from infra.specs.labels import common_labels
from infra.specs.suppressions import annotate

EFS_CSI_DRIVER = "efs.csi.aws.com"
# EFS grows without bound; Kubernetes requires a capacity on PV and PVC, and ignores it for EFS.
NOMINAL_CAPACITY = "5Gi"


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": common_labels("shared-storage")}
    if namespace:
        meta["namespace"] = namespace
    return meta


def storage_class(name: str) -> dict[str, Any]:
    """A class for statically provisioned EFS volumes (no parameters: nothing is provisioned
    dynamically, so the driver's controller needs no AWS permissions to create access points)."""
    return annotate(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": _meta(name),
            "provisioner": EFS_CSI_DRIVER,
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "Immediate",
        }
    )


def persistent_volume(name: str, storage_class_name: str, volume_handle: Any) -> dict[str, Any]:
    """The file system, entered through its access point (uid/gid 1000, so non-root pods can write),
    mounted with TLS. `volume_handle` is "<file system id>::<access point id>" (or an Output of it)."""
    return annotate(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": _meta(name),
            "spec": {
                "capacity": {"storage": NOMINAL_CAPACITY},
                "volumeMode": "Filesystem",
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": storage_class_name,
                "mountOptions": ["tls"],
                "csi": {"driver": EFS_CSI_DRIVER, "volumeHandle": volume_handle},
            },
        }
    )


def persistent_volume_claim(name: str, namespace: str, storage_class_name: str, volume_name: str) -> dict[str, Any]:
    """Pre-bound to our PersistentVolume by `volumeName`, so it can only ever mean this file system."""
    return annotate(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(name, namespace),
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": storage_class_name,
                "volumeName": volume_name,
                "resources": {"requests": {"storage": NOMINAL_CAPACITY}},
            },
        }
    )


# What a claim on an existing cluster's StorageClass asks for. The data (CIFAR-10, about 180 MB
# unpacked, or generated images), checkpoints and metrics of a few runs fit in it with room to
# spare; a class that enforces sizes (EBS, Persistent Disk) provisions exactly this much.
PROVISIONED_CAPACITY = "5Gi"


def provisioned_claim(name: str, namespace: str, storage_class_name: str, access_mode: str) -> dict[str, Any]:
    """A claim that the cluster's own provisioner fills from an existing StorageClass (target
    existing): no PersistentVolume of ours, no volumeName."""
    return annotate(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(name, namespace),
            "spec": {
                "accessModes": [access_mode],
                "storageClassName": storage_class_name,
                "resources": {"requests": {"storage": PROVISIONED_CAPACITY}},
            },
        }
    )
