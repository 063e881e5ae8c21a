"""Names and tags shared by every component."""

from __future__ import annotations

from infra.config import Settings

TYPE_PREFIX = "elastic-training:infra"  # part of every URN: never change it


def component_type(name: str) -> str:
    return f"{TYPE_PREFIX}:{name}"


def aws_tags(settings: Settings, **extra: str) -> dict[str, str]:
    """Tags every AWS resource carries, so a stack's resources can be found and costed."""
    return {"project": settings.project, "stack": settings.stack, "managed-by": "pulumi", **extra}

