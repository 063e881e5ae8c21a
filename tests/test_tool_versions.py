"""The real tools' versions (scripts/tools.env, the one place they are pinned) agree with what the
project runs elsewhere: the stacks' default Kubernetes minor, and the pip pins of the Pulumi SDK and
Kubernetes provider that the CLI and plugin stand beside."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from infra import versions

REPO = Path(__file__).resolve().parent.parent


def tools() -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in (REPO / "scripts" / "tools.env").read_text().splitlines()
        if re.match(r"^[A-Z_]+=", line)
    )


def pip_pin(package: str) -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [d for extra in project.get("optional-dependencies", {}).values() for d in extra]
    return next(d.split("==")[1] for d in deps if d.split("==")[0] == package)


def test_the_control_plane_runs_the_stacks_default_kubernetes_minor():
    major, minor, patch = tools()["KUBERNETES_VERSION"].lstrip("v").split(".")
    assert f"{major}.{minor}" == versions.DEFAULT_KUBERNETES_VERSION
    # The staging modules (k8s.io/api, ...) are published as v0.<minor>.<patch> of the same release.
    assert tools()["KUBERNETES_STAGING_VERSION"] == f"v0.{minor}.{patch}"


def test_the_pulumi_pins_name_the_pip_pins_they_stand_beside():
    assert tools()["PULUMI_PIP_VERSION"] == pip_pin("pulumi")
    assert tools()["PULUMI_KUBERNETES_PIP_VERSION"] == pip_pin("pulumi-kubernetes")


def test_etcd_is_a_3_6_release():
    assert re.fullmatch(r"v3\.6\.\d+", tools()["ETCD_VERSION"])
