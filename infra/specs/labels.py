"""The recommended Kubernetes labels every object of the stack carries."""

from __future__ import annotations

from typing import Any

PART_OF = "elastic-training"


def common_labels(component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
    }


def named_labels(component: str, name: str) -> dict[str, str]:
    """The common labels and the object's own name (app.kubernetes.io/name), which selectors match."""
    return {"app.kubernetes.io/name": name, **common_labels(component)}


def object_meta(name: str, component: str, namespace: str | None = None) -> dict[str, Any]:
    """metadata of one of our objects: its name, its labels and, for a namespaced one, its namespace."""
    meta: dict[str, Any] = {"name": name, "labels": named_labels(component, name)}
    if namespace:
        meta["namespace"] = namespace
    return meta
