"""Two checkouts of the same sources at different paths give the image identical inputs, so moving
or re-cloning the repository does not rebuild the image nor re-run the pipeline (upstream-facts-2.md,
fact 19).

pulumi/pulumi-docker-build @ 7bad76a9 provider/internal/image.go `Diff` rebuilds (an update, i.e.
build and push) when `context.location` differs, when the Dockerfile argument differs, or when
`hashBuildContext` (context.go: file contents and paths relative to the context) differs; a rebuild
gives a new digest, and every workload pinned to it is replaced. Here the real `synth` renders each
checkout, with that checkout's own `infra` on the path. The provider resolves a relative location
with filepath.Abs (context.go validate) in its working directory, which the engine sets to the
project root (tests/provider_host.py engine_pwd, from pkg/engine/project.go).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from provider_host import engine_pwd
from synth_support import REPO

CHECKOUT = ("Pulumi.yaml", "__main__.py", ".dockerignore", "pyproject.toml", "infra", "jobs", "images", "stacks")


def clone(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for entry in CHECKOUT:
        source = REPO / entry
        if source.is_dir():
            shutil.copytree(source, directory / entry, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, directory / entry)
    return directory


def image_inputs(root: Path, out: Path) -> dict:
    """The docker-build Image's inputs as `synth` of that checkout renders them."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, "-m", "infra.cli", "synth", "dev", "--out", str(out)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (image,) = [r for r in json.loads((out / "resources.json").read_text()) if r["type"] == "docker-build:index:Image"]
    return image["inputs"]


def test_two_checkouts_render_the_same_image_inputs(tmp_path):
    first = clone(tmp_path / "a" / "elastic-training")
    second = clone(tmp_path / "b" / "some" / "other" / "place")
    inputs = image_inputs(first, tmp_path / "out-a")
    assert inputs == image_inputs(second, tmp_path / "out-b")

    # Resolved as the provider does, in the directory the engine starts it in: this checkout's files.
    for root in (first, second):
        pwd = engine_pwd(root, yaml.safe_load((root / "Pulumi.yaml").read_text()))
        assert (pwd / inputs["context"]["location"]).resolve() == root
        assert (pwd / inputs["dockerfile"]["location"]).resolve() == root / "images" / "Dockerfile"
