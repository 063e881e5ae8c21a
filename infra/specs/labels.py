"""The recommended Kubernetes labels every object of the stack carries."""

from __future__ import annotations

PART_OF = "elastic-training"


def common_labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/component": component, "app.kubernetes.io/part-of": PART_OF,
            "app.kubernetes.io/managed-by": "pulumi"}
