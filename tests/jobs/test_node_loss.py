"""Nodes that come and go without notice: real torchrun agents (jobs.elastic.agent, the flags the ElasticJob
gives them) on one real rendezvous store (python -m jobs.elastic.store_server), three jobs at once:
- "join": a node joins a running group of 2 (--nnodes=1:3): the group takes it in at once, at
  maxWorkers, and goes on at world size 3 from the checkpoint;
- "rank0-lost": the node of rank 0 is lost without notice (its agent and worker SIGKILLed, nothing
  replaces it): the survivor notices, re-forms alone and finishes. Rank 0's node is the one whose
  address the old group used (MASTER_ADDR): with torch's shared store (TORCH_DISABLE_SHARE_RDZV_
  TCP_STORE unset) the survivor kept that dead address (upstream-facts-3.md fact 10);
- "agent-killed": a worker pod's processes SIGKILLed (an OOM kill of the container); the controller
  recreates a pod whose container ended that way (137 is retryable: kubeflow/common @ 0b3a4c3
  pkg/util/train/train_util.go IsRetryableExitCode), and the new agent brings the world back to 2.

Each finishes with one model and every epoch once. How long the group takes to train again after a
loss is measured in benchmarks/reformation.py; here the rendezvous itself must be quick: the
survivor's agent logs when it starts to re-form and when the round is complete, and that must take
less than torch's default last call alone (30 s), so the project's timeouts are the ones in force.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from conftest import make_synthetic_cifar
from torchrun_harness import (
    TorchrunJob,
    agent_environment,
    cluster_style_torchrun_flags,
    descendants_of,
    gated_agent_command,
    run_torchrun_jobs,
    worker_rank,
)

from jobs.training import checkpoint
from jobs.results import evaluate
from jobs.elastic import rendezvous

DEADLINE_SECONDS = 240
EPOCHS = 12
TORCH_DEFAULT_LAST_CALL = 30  # torch/distributed/elastic/rendezvous/dynamic_rendezvous.py _DEFAULT_TIMEOUTS
# torch's agent log lines (agent/server/api.py `_rendezvous`), with glog's time prefix "I1126 17:32:50.650000"
REFORMING = "Rendezvous'ing worker group"
FORMED = "Rendezvous complete for workers"


@dataclass
class Run:
    name: str
    run_dir: Path
    job: TorchrunJob
    command: list[str]
    gate: Path | None = None  # the joining agent's: started with the others, loaded, let in at the event
    event_at: float | None = None  # time.time() of the join, the loss or the kill
    victim: int | None = None  # agent index
    replacement: int | None = None
    exits: dict[int, int] = field(default_factory=dict)

    def history(self) -> list[dict]:
        return checkpoint.read_history(self.run_dir)


def _kill_node_of(run: Run, rank: int) -> bool:
    """SIGKILL every process of the agent whose worker holds `rank` (a node gone): workers first."""
    for index, agent in enumerate(run.job.agents):
        tree = descendants_of(agent.pid)
        if agent.poll() is None and any(worker_rank(pid) == rank for pid in tree):
            for pid in reversed(tree):
                os.kill(pid, signal.SIGKILL)
            agent.kill()
            run.event_at, run.victim = time.time(), index
            return True
    return False


def _step(run: Run) -> None:
    if run.event_at is None:
        if not any(r["event"] == "epoch" for r in run.history()):
            return
        if run.name == "join":
            run.gate.touch()
            run.replacement, run.event_at = 2, time.time()
        else:
            _kill_node_of(run, 0 if run.name == "rank0-lost" else 1)
    elif run.name == "agent-killed" and run.replacement is None and run.job.agents[run.victim].poll() is not None:
        run.gate.touch()  # the controller recreates the pod
        run.replacement = 2


@pytest.fixture(scope="module")
def loss_runs(store_server, tmp_path_factory) -> dict[str, Run]:
    base = tmp_path_factory.mktemp("node-loss")
    data = make_synthetic_cifar(base / "data", train_per_class=4, test_per_class=2)
    runs = {}
    for name, nnodes in [("join", "1:3"), ("rank0-lost", "1:2"), ("agent-killed", "1:2")]:
        train_args = ["--data", str(data), "--run-dir", str(base / name), "--epochs", str(EPOCHS),
                      "--batch-size", "10", "--log-every", "50", "--pg-timeout", "20"]  # fmt: skip
        flags = cluster_style_torchrun_flags(store_server.endpoint, name, nnodes=nnodes)
        command = [sys.executable, "-m", "jobs.elastic.agent", *flags, "-m", "jobs.training.train", *train_args]
        commands = [command, command]
        gate = None
        if name != "rank0-lost":  # the new pod: Python and torch loaded before it is let in (its image is pulled)
            gate = base / f"{name}-gate"
            commands.append(gated_agent_command(gate, command[3:]))
        job = TorchrunJob(name, commands, base / "logs", agent_environment(LOGLEVEL="INFO"))
        runs[name] = Run(name, base / name, job, command, gate=gate)

    def inject():
        for run in runs.values():
            _step(run)

    run_torchrun_jobs([run.job for run in runs.values()], DEADLINE_SECONDS, on_tick=inject)
    for run in runs.values():
        run.exits = {index: result.returncode for index, result in enumerate(run.job.results())}
    return runs


def _logs(run: Run) -> str:
    return "\n".join(f"--- agent {i}\n{r.log[-3000:]}" for i, r in enumerate(run.job.results()))


def _assert_finished_once_with_one_model(run: Run, tmp_path: Path) -> list[dict]:
    history = run.history()
    assert [r["epoch"] for r in history if r["event"] == "epoch"] == list(range(1, EPOCHS + 1)), (
        f"{history}\n{_logs(run)}"
    )
    assert [r["event"] for r in history].count("finished") == 1 and history[-1]["event"] == "finished"
    assert evaluate.main(["--data", str(run.run_dir.parent / "data" / "cifar-10-batches-py"),
                          "--model", str(run.run_dir / "model.pt"), "--metrics-out", str(tmp_path / "metrics.json"),
                          "--min-accuracy", "0"]) == 0  # fmt: skip
    return history


def _starts_after(history: list[dict], moment: float) -> list[dict]:
    return [r for r in history if r["event"] == "start" and r["time"] > moment]


def _logged_at(line: str) -> datetime:
    stamp = re.search(r"^[IWE]\d{4} (\d\d:\d\d:\d\d\.\d+)", line)
    return datetime.strptime(stamp.group(1), "%H:%M:%S.%f")


def rendezvous_seconds(log: str) -> list[float]:
    """Each re-formation in a torchrun agent's log: from its start to the round's completion."""
    started, took = None, []
    for line in log.splitlines():
        if REFORMING in line:
            started = _logged_at(line)
        elif FORMED in line and started is not None:
            took.append((_logged_at(line) - started).total_seconds())
            started = None
    return took


def test_a_node_joins_a_running_group_at_max_workers_at_once(loss_runs, tmp_path):
    run = loss_runs["join"]
    assert run.event_at is not None, _logs(run)
    assert set(run.exits.values()) == {0}, _logs(run)
    history = _assert_finished_once_with_one_model(run, tmp_path)
    assert [r["world_size"] for r in history if r["event"] == "start"] == [2, 3], history
    grown = _starts_after(history, run.event_at)[0]
    assert grown["epochs_done"] >= 1
    # the round is full (maxWorkers): torch completes it as soon as the last node is in, without the
    # last call; the group's agents re-form as soon as their workers have stopped
    for agent in (0, 1):
        took = rendezvous_seconds(run.job.results()[agent].log)
        assert len(took) == 2 and took[-1] < rendezvous.DEFAULTS["last_call_timeout"], (took, _logs(run))
    print(f"\njoin: world size 3 training {grown['time'] - run.event_at:.1f} s after the new agent started")


def test_rank_0_s_node_lost_without_notice_the_survivor_re_forms_alone_quickly(loss_runs, tmp_path):
    run = loss_runs["rank0-lost"]
    assert run.event_at is not None, _logs(run)
    survivor = 1 - run.victim
    assert run.exits[survivor] == 0, _logs(run)
    history = _assert_finished_once_with_one_model(run, tmp_path)
    restarted = _starts_after(history, run.event_at)
    assert restarted and restarted[0]["world_size"] == 1 and restarted[0]["epochs_done"] >= 1, history
    took = rendezvous_seconds(run.job.results()[survivor].log)
    assert took and max(took) < TORCH_DEFAULT_LAST_CALL, (took, _logs(run))
    print(
        f"\nrank 0's node lost: the survivor's rendezvous took {max(took):.1f} s; training again "
        f"{restarted[0]['time'] - run.event_at:.1f} s after the loss"
    )


def test_an_agent_sigkilled_comes_back_and_the_world_is_two_again(loss_runs, tmp_path):
    run = loss_runs["agent-killed"]
    assert run.event_at is not None and run.replacement is not None, _logs(run)
    assert run.exits[run.victim] == -signal.SIGKILL  # a container killed so reports 137: retryable
    assert {i: c for i, c in run.exits.items() if i != run.victim} == {1 - run.victim: 0, run.replacement: 0}, _logs(
        run
    )
    history = _assert_finished_once_with_one_model(run, tmp_path)
    back = [r for r in _starts_after(history, run.event_at) if r["world_size"] == 2]
    assert back and back[0]["epochs_done"] >= 1, history
    print(f"\nagent SIGKILLed: world size 2 again {back[0]['time'] - run.event_at:.1f} s after the kill")
