"""Shared fixtures: stacks rendered offline by the real `synth` command, once per session."""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadFileScheduling

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
    "aws:region=eu-west-1",
    "availabilityZoneCount=3",
    "nodeMaxCount=3",
    "workers=3",
    "maxWorkers=3",
    'clusterAdminArns=["arn:aws:iam::123456789012:role/platform-admins"]',
    "storageClassName=shared",
    "persistentVolumeName=shared-pv",
    "pvcName=shared-claim",
    "namespace=ml",
    "imageUri=public.ecr.aws/example/trainer@sha256:" + "a" * 64,
)


@pytest.fixture(scope="session")
def variant(synth_stack) -> Synth:
    return synth_stack("dev", *VARIANT)


class FileAndClusterScheduling(LoadFileScheduling):
    """How `pytest -n 3` (scripts/test.sh) shares the tests between its workers: each file whole to one
    worker, as `--dist loadfile` does (so a module fixture, such as the concurrent torchrun jobs, runs
    once), and the whole cluster tier to one worker, so that its one control plane starts once (not the
    whole-run tier, tests/cluster/whole_run, whose files each start their own).

    Not `--dist loadgroup` with xdist_group marks: xdist 3.8.0 sends a group together by appending it
    to `item._nodeid` (xdist/remote.py), which pytest 9.2 no longer reads (Node.nodeid is `_id`), so
    every test went alone and the heavy module fixtures ran in both workers."""

    def _split_scope(self, nodeid: str) -> str:
        # The whole-run tier's files start control planes of their own: each may go to any worker.
        if nodeid.startswith("tests/cluster/") and not nodeid.startswith("tests/cluster/whole_run/"):
            return "tests/cluster"
        return super()._split_scope(nodeid)


@pytest.hookimpl(tryfirst=True)  # before xdist's own (trylast), which would pick by --dist
def pytest_xdist_make_scheduler(config, log):
    return FileAndClusterScheduling(config, log)
