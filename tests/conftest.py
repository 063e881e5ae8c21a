"""Shared fixtures: stacks rendered offline by the real `synth` command, once per session."""

from __future__ import annotations

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
