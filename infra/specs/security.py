"""Pod and container hardening shared by every workload we run (Pod Security Standard "restricted"),
and the Pod Security labels of our namespaces."""

from __future__ import annotations

from typing import Any

# The uid/gid every workload pod runs as (the pod's securityContext overrides the image's USER).
# 10000 or above: without user namespaces a container's uid is the same number on the node, and
# low uids belong to node users (ec2-user is 1000 on the EKS AL2023 AMI), so a process that broke
# out of its container would own that user's files.
APP_UID = 10001
APP_GID = 10001

# The identity the EFS access point gives every NFS request, whatever uid the pod runs as, and the
# owner of the access point's root directory. It never reaches the node, so it needs no high uid;
# changing it would replace the access point and leave the existing data (owned by 1000, mode
# 0750) unreadable to the new identity.
EFS_UID = 1000
EFS_GID = 1000

# Pod Security Standard levels (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
RESTRICTED = "restricted"
BASELINE = "baseline"


def pod_security_labels(enforce: str) -> dict[str, str]:
    """Namespace labels that make the API server refuse pods below `enforce`, and warn and audit
    on every pod below "restricted" (so a pod that is admitted under "baseline" but would not be
    under "restricted" still shows up in `kubectl` warnings and the audit log)."""
    return {
        "pod-security.kubernetes.io/enforce": enforce,
        "pod-security.kubernetes.io/audit": RESTRICTED,
        "pod-security.kubernetes.io/warn": RESTRICTED,
    }


def pod_security_context(uid: int = APP_UID, gid: int = APP_GID) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "fsGroup": gid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def resources(cpu: str, memory: str) -> dict[str, Any]:
    """Requests equal to limits: Guaranteed QoS, so the scheduler's view is what the pod gets."""
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
