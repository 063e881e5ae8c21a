"""Shared fixtures: stacks rendered offline by the real `synth` command, once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from synth_support import Synth, load_synth, run_synth


@pytest.fixture(scope="session")
def synth_stack(tmp_path_factory):
    """synth_stack(stack, *overrides) -> Synth, rendered once per distinct arguments."""
    cache: dict[tuple[str, ...], Synth] = {}

    def render(stack: str, *overrides: str) -> Synth:
        key = (stack, *overrides)
        if key not in cache:
            out = tmp_path_factory.mktemp(f"synth-{stack}") / "out"
            result = run_synth(out, stack, *overrides)
            assert result.returncode == 0, result.stderr
            cache[key] = load_synth(out)
        return cache[key]
    return render


@pytest.fixture(scope="session")
def dev(synth_stack) -> Synth:
    return synth_stack("dev")


# Non-default values for many keys at once: one render serves every "config reaches the
# resources" test (each render costs seconds).
VARIANT = (
    "aws:region=eu-west-1", "availabilityZoneCount=3", "nodeMaxCount=3", "workers=3", "maxWorkers=3",
    'clusterAdminArns=["arn:aws:iam::123456789012:role/platform-admins"]',
    "storageClassName=shared", "persistentVolumeName=shared-pv", "pvcName=shared-claim", "namespace=ml",
    "imageUri=public.ecr.aws/example/trainer@sha256:" + "a" * 64,
)


@pytest.fixture(scope="session")
def variant(synth_stack) -> Synth:
    return synth_stack("dev", *VARIANT)


CLUSTER_TIER = Path(__file__).parent / "cluster"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Groups for `pytest -n 2 --dist loadgroup` (scripts/test.sh): each file is one group, as
    `--dist loadfile` made it (module fixtures such as the concurrent torchrun jobs run once), and the
    whole cluster tier is one group, so its one control plane starts in one worker only. tryfirst:
    xdist's worker reads the marks in its own pytest_collection_modifyitems (xdist/remote.py)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = "cluster" if CLUSTER_TIER in item.path.parents else str(item.path)
            item.add_marker(pytest.mark.xdist_group(group))
