"""Pod and container hardening shared by every workload we run (Pod Security Standard "restricted")."""

from __future__ import annotations

from typing import Any

# The training image's user, and the owner of the EFS access point's root directory.
APP_UID = 1000
APP_GID = 1000

# Labels that make the API server enforce, audit and warn on the "restricted" Pod Security Standard.
PSA_RESTRICTED_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
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
