"""Evictions: Kubernetes stops a worker pod with SIGTERM (a drained node, a Spot interruption), and
the worker must come back instead of failing the run.

Real torchrun and a real etcd, as in test_elastic.py. What is modelled from upstream:
- torchrun exits 1 on SIGTERM (torch 2.13.0, distributed/elastic/agent/server/api.py `run`
  re-raises the SignalException after `_shutdown`): checked here on the installed torch, so a
  torch that changes this fails the test instead of silently changing what the cluster sees.
- the controller recreates a worker pod only for exit codes 130, 137, 138, 143 (kubeflow/common
  pkg/util/train/train_util.go IsRetryableExitCode), so jobs.agent must turn SIGTERM into 143.
- the kubelet sends SIGTERM to the container's main process (the pod's command: jobs.agent).

Two elastic jobs run together against one etcd, each with two agents started through jobs.agent
with the flags the ElasticJob gives them; right after epoch 1's checkpoint, agent 0 gets SIGTERM:
- "alone": the survivor re-forms the group at world size 1 and finishes;
- "rejoin": a new agent with the same command is started as soon as the evicted one has exited
  (the controller recreating the pod), and the group is back at world size 2.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import make_synthetic_cifar
from torchrun_harness import REPO_ROOT, TorchrunJob, agent_environment, cluster_style_torchrun_flags, run_torchrun_jobs

from jobs import agent, checkpoint, evaluate

DEADLINE_SECONDS = 170  # both jobs together; the survivor's re-formation waits etcd's 30 s last call
GRACE_SECONDS = 45  # terminationGracePeriodSeconds of the worker pods (infra/specs/workloads.py)
SLEEPER = "import time; print('worker up', flush=True); time.sleep(300)"


def agent_command(torchrun_flags: list[str], module: str, module_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "jobs.agent", *torchrun_flags, "-m", module, *module_args]


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
    assert code == 1, output  # upstream: permanent for the controller, the reason jobs.agent exists
    assert "got signal: 15" in output

    code, seconds, output = _stop_with_sigterm([sys.executable, "-m", "jobs.agent", *flags], tmp_path)
    assert code == agent.EXIT_STOPPED_FROM_OUTSIDE == 143, output
    assert seconds < GRACE_SECONDS, seconds
    assert "exiting 143" in output
    print(f"\nSIGTERM to exit 143: {seconds:.2f} s")


def test_other_outcomes_keep_torchrun_exit_code(tmp_path):
    failing = tmp_path / "fails.py"
    failing.write_text("raise SystemExit(5)")
    env = agent_environment()
    result = subprocess.run([sys.executable, "-m", "jobs.agent", "--standalone", "--nproc_per_node=1", str(failing)],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stderr  # a failed worker: torchrun's ChildFailedError, still permanent
    result = subprocess.run([sys.executable, "-m", "jobs.agent", "--no-such-flag", "x.py"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr  # torchrun's usage error
    # a torchrun killed by a signal other than ours reports as a shell would: 128 + N
    assert agent.exit_code(-signal.SIGKILL, stopped_from_outside=False) == 137
    assert agent.exit_code(0, stopped_from_outside=False) == 0
    assert agent.exit_code(0, stopped_from_outside=True) == 143  # stopped: retry, even if torchrun said 0


def test_sigterm_during_a_checkpoint_write_leaves_the_previous_checkpoint_loadable(tmp_path):
    """jobs.train keeps SIGTERM's default action (it dies at once; jobs/train.py __main__), so a
    SIGTERM can land in the middle of save_atomically: the checkpoint on disk is the last complete
    one, never a torn file."""
    writer = tmp_path / "writer.py"
    writer.write_text(
        "import sys, torch\n"
        "from pathlib import Path\n"
        "from jobs import checkpoint\n"
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
    checkpoint.remove_stale_temporary_files(tmp_path)  # what jobs.train does before it starts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "writer.py"]


@dataclass
class EvictedRun:
    name: str
    run_dir: Path
    job: TorchrunJob
    rejoin: bool
    evicted_at: float | None = None  # time.time() of the SIGTERM
    evicted_exit: int | None = None
    replacement: int | None = None  # agent index of the recreated worker
    events: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def evicted_runs(etcd_server, tmp_path_factory) -> dict[str, EvictedRun]:
    base = tmp_path_factory.mktemp("eviction")
    data_dir = make_synthetic_cifar(base / "data", train_per_class=4, test_per_class=2)
    runs = {}
    for name, rejoin in (("alone", False), ("rejoin", True)):
        run_dir = base / name
        train_args = ["--data", str(data_dir), "--run-dir", str(run_dir), "--epochs", "4", "--batch-size", "10",
                      "--log-every", "5", "--pg-timeout", "20"]  # fmt: skip
        command = agent_command(cluster_style_torchrun_flags(etcd_server.endpoint, f"evict-{name}"), "jobs.train",
                                train_args)  # fmt: skip
        job = TorchrunJob(name, [command, command], base / "logs", agent_environment(LOGLEVEL="INFO"))
        runs[name] = EvictedRun(name, run_dir, job, rejoin)

    def evict_and_recreate():
        for run in runs.values():
            evicted = run.job.agents[0] if run.job.agents else None
            if evicted is None:
                continue
            if run.evicted_at is None and any(r["event"] == "epoch" for r in checkpoint.read_history(run.run_dir)):
                evicted.send_signal(signal.SIGTERM)  # what the kubelet does to the pod's main process
                run.evicted_at = time.time()
            elif run.evicted_at is not None and run.evicted_exit is None and evicted.poll() is not None:
                run.evicted_exit = evicted.returncode
                run.events.append(f"agent 0 exited {evicted.returncode} after {time.time() - run.evicted_at:.1f} s")
                if run.rejoin:
                    run.replacement = run.job.add_agent(run.job.commands[0])

    run_torchrun_jobs([run.job for run in runs.values()], DEADLINE_SECONDS, on_tick=evict_and_recreate)
    for run in runs.values():
        print(f"\n{run.name}: {run.job.seconds:.1f} s, agents {[r.returncode for r in run.job.results()]}, {run.events}")
    return runs


def _history_after_eviction(run: EvictedRun) -> tuple[list[dict], list[dict]]:
    history = checkpoint.read_history(run.run_dir)
    assert run.evicted_at is not None, f"{run.name}: never reached epoch 1's checkpoint: {history}"
    return history, [r for r in history if r["event"] == "start" and r["time"] > run.evicted_at]


def _assert_finished_once(run: EvictedRun, history: list[dict], tmp_path: Path) -> None:
    assert [r["epoch"] for r in history if r["event"] == "epoch"] == [1, 2, 3, 4], history
    assert [r["event"] for r in history].count("finished") == 1 and history[-1]["event"] == "finished"
    metrics = tmp_path / f"{run.name}-metrics.json"
    assert evaluate.main(["--data", str(run.run_dir.parent / "data" / "cifar-10-batches-py"), "--model",
                          str(run.run_dir / "model.pt"), "--metrics-out", str(metrics), "--min-accuracy", "0"]) == 0  # fmt: skip


def test_evicted_agent_exits_143_and_the_survivor_finishes_alone(evicted_runs, tmp_path):
    run = evicted_runs["alone"]
    results = run.job.results()
    assert run.evicted_exit == 143, results[0].log[-3000:]
    assert results[1].returncode == 0, results[1].log[-3000:]
    history, restarts = _history_after_eviction(run)
    assert restarts and restarts[0]["world_size"] == 1 and restarts[0]["epochs_done"] >= 1, history
    print(f"\nlost peer to training resumed (alone): {restarts[0]['time'] - run.evicted_at:.1f} s")
    _assert_finished_once(run, history, tmp_path)


def test_recreated_agent_rejoins_and_the_world_is_back_to_two(evicted_runs, tmp_path):
    run = evicted_runs["rejoin"]
    results = run.job.results()
    assert run.evicted_exit == 143, results[0].log[-3000:]
    assert run.replacement is not None
    assert results[1].returncode == 0 and results[run.replacement].returncode == 0, \
        "\n".join(r.log[-2000:] for r in results)
    history, restarts = _history_after_eviction(run)
    assert any(r["world_size"] == 2 and r["epochs_done"] >= 1 for r in restarts), history
    back = next(r for r in restarts if r["world_size"] == 2)
    print(f"\nlost peer to training resumed at world 2 (rejoin): {back['time'] - run.evicted_at:.1f} s")
    _assert_finished_once(run, history, tmp_path)
