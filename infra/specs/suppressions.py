"""checkov checks that cannot apply to one object, each with the reason, as checkov annotations.

Suppressions are per object (kind + app.kubernetes.io/component label), never global; the README's
security section lists this table.
"""

from __future__ import annotations

from typing import Any

# (kind, component) -> [(check id, reason)]
SUPPRESSIONS: dict[tuple[str, str], list[tuple[str, str]]] = {}


def suppressions_for(obj: dict[str, Any]) -> list[tuple[str, str]]:
    component = obj.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component", "")
    return SUPPRESSIONS.get((obj["kind"], component), [])


def annotate(obj: dict[str, Any]) -> dict[str, Any]:
    """Add `checkov.io/skipN: CHECK=reason` annotations for this object's suppressions."""
    entries = suppressions_for(obj)
    if entries:
        annotations = obj["metadata"].setdefault("annotations", {})
        for index, (check, reason) in enumerate(entries, start=1):
            annotations[f"checkov.io/skip{index}"] = f"{check}={reason}"
    return obj
