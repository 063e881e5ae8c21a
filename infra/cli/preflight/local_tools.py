"""Preflight's check of the tools `pulumi up` needs on this machine (the one check that needs no AWS)."""

from __future__ import annotations

import re
import subprocess
from importlib import metadata
from typing import Callable

from infra.cli.preflight.result import FAIL, PASS, Check
from infra.config import Settings


def check(settings: Settings, which: Callable[[str], str | None]) -> Check:
    """The tools `pulumi up` runs on this machine: the Pulumi CLI (no older than the SDK), docker buildx
    (unless imageUri is set) and, for an eks stack, AWS CLI v2."""
    problems, found = [], []
    pin = metadata.version("pulumi")
    pulumi = tool_output(which, ["pulumi", "version"])
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", pulumi or "")
    if pulumi is None:
        problems.append("pulumi is not installed (https://www.pulumi.com/docs/install/)")
    elif not match or tuple(map(int, match.groups())) < tuple(map(int, pin.split(".")[:3])):
        problems.append(f"pulumi {pulumi.strip()} is older than the SDK pin {pin}: upgrade the CLI")
    else:
        found.append(f"pulumi {'.'.join(match.groups())}")
    if settings.image_uri:
        found.append("docker not needed (imageUri is set)")
    else:
        buildx = tool_output(which, ["docker", "buildx", "version"])
        if buildx is None:
            problems.append("docker with buildx is needed to build the training image (or set imageUri)")
        else:
            found.append("docker buildx")
    aws = tool_output(which, ["aws", "--version"]) if settings.target == "eks" else "not needed"
    if aws == "not needed":
        found.append("AWS CLI not needed (target existing)")
    elif aws is None:
        problems.append("AWS CLI v2 is not installed (the kubeconfig runs `aws eks get-token`)")
    elif not re.match(r"aws-cli/2\.", aws.strip()):
        problems.append(
            f"AWS CLI v2 is needed (the kubeconfig runs `aws eks get-token`); found {aws.split()[0] if aws.split() else aws!r}"
        )
    else:
        found.append(aws.split()[0])
    if problems:
        return Check(
            "local-tools", FAIL, "; ".join(problems), "install what is missing (docs/getting-started.md, Prerequisites)"
        )
    return Check("local-tools", PASS, ", ".join(found))


def tool_output(which: Callable[[str], str | None], command: list[str]) -> str | None:
    """The tool's output (stdout, else stderr), or None when it is missing or fails."""
    path = which(command[0])
    if path is None:
        return None
    try:
        result = subprocess.run([path, *command[1:]], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() or result.stderr.strip()
