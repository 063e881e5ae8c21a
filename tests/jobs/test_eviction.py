"""Evictions: Kubernetes stops a worker pod with SIGTERM (a drained node, a Spot interruption), and
the worker must come back instead of failing the run.

Real torchrun, as in test_elastic.py (which runs whole evicted two-agent jobs against the rendezvous store). What
is modelled from upstream:
- torchrun exits 1 on SIGTERM (torch 2.13.0, distributed/elastic/agent/server/api.py `run`
  re-raises the SignalException after `_shutdown`): checked here on the installed torch, so a
  torch that changes this fails the test instead of silently changing what the cluster sees.
- the controller recreates a worker pod only for exit codes 130, 137, 138, 143 (kubeflow/common
  pkg/util/train/train_util.go IsRetryableExitCode), so jobs.elastic.agent must turn SIGTERM into 143.
- the kubelet sends SIGTERM to the container's main process (the pod's command: jobs.elastic.agent).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from torchrun_harness import REPO_ROOT, agent_environment

from infra.specs.workloads import WORKER_GRACE_SECONDS
from jobs.elastic import agent
from jobs.training import checkpoint

GRACE_SECONDS = WORKER_GRACE_SECONDS  # terminationGracePeriodSeconds of the worker pods
SLEEPER = "import time; print('worker up', flush=True); time.sleep(300)"


def _stop_with_sigterm(command: list[str], tmp_path: Path) -> tuple[int, float, str]:
    """Start `command` (a standalone torchrun of one sleeping worker), SIGTERM it once the worker
    is up, and return (exit code, seconds from SIGTERM to exit, output)."""
    log_path = tmp_path / f"log-{time.monotonic_ns()}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                   env=agent_environment(), start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "worker up" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "worker up" in log_path.read_text(), log_path.read_text()
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=GRACE_SECONDS)
        return code, time.monotonic() - sent, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
        subprocess.run(["pkill", "-KILL", "-s", str(process.pid)], check=False)  # its worker's session, if left


def test_torchrun_exits_1_on_sigterm_and_jobs_agent_exits_143(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    flags = ["--standalone", "--nproc_per_node=1", str(script)]

    code, _, output = _stop_with_sigterm([sys.executable, "-m", "torch.distributed.run", *flags], tmp_path)
    assert code == 1, output  # upstream: permanent for the controller, the reason jobs.elastic.agent exists
    assert "got signal: 15" in output

    code, seconds, output = _stop_with_sigterm([sys.executable, "-m", "jobs.elastic.agent", *flags], tmp_path)
    assert code == agent.EXIT_STOPPED_FROM_OUTSIDE == 143, output
    assert seconds < GRACE_SECONDS, seconds
    assert "exiting 143" in output
    # Our torchrun says it in one line, where torch's prints its SignalException's traceback (seen in every
    # deleted worker's log on the whole-run tier, issue 37).
    assert "jobs.elastic.torchrun: stopped by SIGTERM" in output and "Traceback" not in output, output
    print(f"\nSIGTERM to exit 143: {seconds:.2f} s")


def test_other_outcomes_keep_torchrun_exit_code(tmp_path):
    failing = tmp_path / "fails.py"
    failing.write_text("raise SystemExit(5)")
    env = agent_environment()
    result = subprocess.run([sys.executable, "-m", "jobs.elastic.agent", "--standalone", "--nproc_per_node=1", str(failing)],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stderr  # a failed worker: torchrun's ChildFailedError, still permanent
    result = subprocess.run([sys.executable, "-m", "jobs.elastic.agent", "--no-such-flag", "x.py"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr  # torchrun's usage error
    # a torchrun killed by a signal other than ours reports as a shell would: 128 + N
    assert agent.exit_code(-signal.SIGKILL, stopped_from_outside=False) == 137
    assert agent.exit_code(0, stopped_from_outside=False) == 0
    assert agent.exit_code(0, stopped_from_outside=True) == 143  # stopped: retry, even if torchrun said 0


def test_sigterm_during_a_checkpoint_write_leaves_the_previous_checkpoint_loadable(tmp_path):
    """Outside its training loop jobs.training.train keeps SIGTERM's default action (it dies at once;
    jobs/elastic/stopping.py), and a SIGKILL can come at any time, so a signal can land in the middle of
    save_atomically: the checkpoint on disk is the last complete one, never a torn file."""
    writer = tmp_path / "writer.py"
    writer.write_text(
        "import sys, torch\n"
        "from pathlib import Path\n"
        "from jobs.training import checkpoint\n"
        "path = Path(sys.argv[1])\n"
        "for epoch in range(1, 10_000):\n"
        "    checkpoint.save_atomically({'epoch': epoch, 'weights': torch.full((4_000_000,), float(epoch))}, path)\n"
        "    print(epoch, flush=True)\n"
    )
    target = tmp_path / "checkpoint.pt"
    process = subprocess.Popen([sys.executable, str(writer), str(target)], stdout=subprocess.PIPE, text=True,
                               cwd=REPO_ROOT, env=agent_environment())  # fmt: skip
    try:
        assert process.stdout.readline().strip() == "1"  # one complete checkpoint exists
        time.sleep(0.05)  # into the next 16 MB write
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == -signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
    payload = checkpoint.load(target, "checkpoint")
    assert payload["weights"].eq(float(payload["epoch"])).all()
    checkpoint.remove_stale_temporary_files(tmp_path)  # what jobs.training.train does before it starts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "writer.py"]
