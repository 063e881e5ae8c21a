"""jobs.elastic.torchrun's own pieces and how torchrun finds our backend; its runs are in
test_store_outage.py (138 past the bound), test_rendered_elasticjob.py (the controller's
--rdzv_backend=etcd in front, ours after it) and test_eviction.py (--standalone, usage errors, SIGTERM)."""

from __future__ import annotations

import signal
import subprocess
import sys
from importlib.metadata import entry_points

from conftest import assert_one_line_error, run_job
from torchrun_harness import REPO_ROOT, agent_environment

from jobs.elastic import rendezvous
from jobs.elastic import torchrun


def test_exit_138_is_the_controller_s_user_defined_retryable_code():
    # kubeflow/common @ 0b3a4c3 pkg/util/train/train_util.go IsRetryableExitCode: "We decide to
    # take the exit code of SIGUSR1(138 = 128 + 10) for user defined retryable error." The line goes
    # to the termination message through jobs.termination (tested there).
    assert torchrun.EXIT_STORE_UNAVAILABLE == 128 + signal.SIGUSR1 == 138


def test_plain_torchrun_finds_our_backend_through_its_entry_point():
    """torch's registry loads the group `torchrun.handlers` when torch.distributed.elastic.rendezvous
    is imported (registry.py `_register_out_of_tree_handlers`), in a process that never imported jobs."""
    (entry,) = [e for e in entry_points(group="torchrun.handlers") if e.name == rendezvous.BACKEND]
    assert entry.value == "jobs.elastic.rendezvous_plugin:handler_creator"
    probe = (
        "import torch.distributed.elastic.rendezvous as r, sys; "
        f"sys.exit(0 if r.rendezvous_handler_registry._registry.get({rendezvous.BACKEND!r}) else 1)"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, env=agent_environment(), capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0 and "Exception while registering" not in result.stderr, result.stderr


def test_torch_s_etcd_backends_are_refused_in_one_line():
    for backend in torchrun.RETIRED_BACKENDS:
        result = run_job("jobs.elastic.torchrun", f"--rdzv_backend={backend}", "--rdzv_endpoint=127.0.0.1:29400",
                         "--nnodes=1:2", "-m", "jobs.training.train", timeout=120)  # fmt: skip
        line = assert_one_line_error(result, 2, f"--rdzv_backend={backend}", f"--rdzv_backend={rendezvous.BACKEND}")
        assert "etcd v2 API" in line
