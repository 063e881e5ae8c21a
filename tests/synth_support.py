"""Running the real `synth` command and reading what it wrote (shared by the platform tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))


@dataclass
class Synth:
    """What `elastic-training synth` wrote for one stack."""

    directory: Path
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]

    @property
    def manifests(self) -> list[dict[str, Any]]:
        return [yaml.safe_load(p.read_text()) for p in sorted((self.directory / "manifests").glob("*.yaml"))]

    def manifest(self, kind: str, name_prefix: str = "") -> dict[str, Any]:
        found = [m for m in self.manifests if m["kind"] == kind and m["metadata"]["name"].startswith(name_prefix)]
        assert len(found) == 1, f"expected one {kind} {name_prefix}*, found {[m['metadata']['name'] for m in found]}"
        return found[0]

    def of_type(self, type_token: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_token]

    def one(self, type_token: str, name: str | None = None) -> dict[str, Any]:
        found = [r for r in self.of_type(type_token) if name is None or r["name"] == name]
        assert len(found) == 1, f"expected one {type_token} {name or ''}, found {[r['name'] for r in found]}"
        return found[0]

    def by_urn(self, urn: str) -> dict[str, Any]:
        return next(r for r in self.resources if r["urn"] == urn)


def run_synth(out: Path, stack: str, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "infra.cli", "synth", stack, "--out", str(out)]
    for override in overrides:
        command += ["-c", override]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def load_synth(directory: Path) -> Synth:
    return Synth(
        directory,
        json.loads((directory / "resources.json").read_text()),
        json.loads((directory / "outputs.json").read_text()),
    )
