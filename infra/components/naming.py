"""Names and tags shared by every component."""

from __future__ import annotations

import re

from infra.config import Settings

TYPE_PREFIX = "elastic-training:infra"  # part of every URN: never change it


def component_type(name: str) -> str:
    return f"{TYPE_PREFIX}:{name}"


def aws_tags(settings: Settings, **extra: str) -> dict[str, str]:
    """Tags every AWS resource carries, so a stack's resources can be found and costed."""
    return {"project": settings.project, "stack": settings.stack, "managed-by": "pulumi", **extra}


def eks_cluster_name(settings: Settings) -> str:
    """The EKS cluster's name, fixed before the cluster exists: its control-plane log group is named
    after it (/aws/eks/<name>/cluster) and must be created first. EKS names allow letters, digits,
    '-' and '_' (1-100 characters, starting with a letter or digit); Pulumi stack names may also hold '.'."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{settings.project}-{settings.stack}")[:100]
