"""etcd, the rendezvous store, goes away in the middle of a two-node run (issue 22): real torchrun
agents (jobs.agent, the worker pod's command, with the flags the ElasticJob gives them), each run
with its own real etcd (Debian's, v2 API), killed (SIGKILL: an OOM kill, a lost node) once epoch
1's checkpoint is written and started again on the same address:
- "stock": plain torch.distributed.run, as before the fix: both agents exit 1 (torch 2.13.0's
  monitor loop meets EtcdConnectionFailed), which the controller never retries;
- "empty": etcd back EMPTY (an etcd pod with an emptyDir, rescheduled) once the group has trained
  two epochs without it; meanwhile a third agent has started (a pod the controller creates) and
  waits for the store; when etcd is back it finds no round and opens one: the group must see that
  round is not its own, re-form with the newcomer on the emptied store and resume from its
  checkpoint (torch's own rule would let the newcomer train alone beside it);
- "kept": the same outage, etcd back with its data (a volume that outlives the pod);
- "gone": etcd away for longer than the agents' bound (`store_outage_timeout`): each agent exits
  138, and is started again at once, as the controller recreates the pod (below), until etcd is
  back (empty) and the run resumes from its checkpoint.

The controller's part, modelled from kubeflow/common @ 0b3a4c3fca853dcca31f16bcb56960557130ef06
(the version pytorch/elastic kubernetes/go.mod pins), pkg/controller.v1/common/pod.go ReconcilePods:
a worker pod in phase Failed whose `elasticjob-worker` container exited with a code that
pkg/util/train/train_util.go IsRetryableExitCode accepts (130, 137, 138, 143) is deleted, and the
next reconcile finds the replica's slot empty and creates a new pod from the same template: the
same command, started again. Any other code leaves the pod Failed for good.

The runs go at the same time (each its own etcd and rendezvous id), as in test_elastic.py.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import make_synthetic_cifar
from torchrun_harness import (
    EtcdServer,
    TorchrunJob,
    agent_environment,
    cluster_style_torchrun_flags,
    run_torchrun_jobs,
    torchrun_command,
)

from jobs import checkpoint, evaluate
from jobs.torchrun import EXIT_STORE_UNAVAILABLE

DEADLINE_SECONDS = 200
EPOCHS = 8
EMPTY_EPOCHS = 40  # the outage lasts until the newcomer is up, and the group must still be training then
# "gone": the group trains through the outage until the bound, so it must still be training then (8 epochs
# of 2 steps finished inside the 6 s bound on a quiet machine, and the agents then exited 0)
GONE_EPOCHS = 40
STALLED_SECONDS = 60
BOUND_SECONDS = 6  # "gone": store_outage_timeout
GONE_EXTRA_SECONDS = 3  # "gone": etcd comes back this long after the first agents gave up
RETRYABLE = {130, 137, 138, 143}  # kubeflow/common IsRetryableExitCode


@dataclass
class Run:
    name: str
    run_dir: Path
    etcd: EtcdServer
    job: TorchrunJob
    command: list[str]
    keep_data: bool = False
    newcomer: bool = False
    epochs: int = EPOCHS
    recreate: bool = False
    killed_at: float | None = None  # time.time() of etcd's SIGKILL
    back_at: float | None = None  # time.time() etcd answered again
    newcomer_at: float | None = None
    exits: list[tuple[int, int, float]] = field(default_factory=list)  # (agent index, code, time.time())

    def history(self) -> list[dict]:
        return checkpoint.read_history(self.run_dir)


def _epochs_since(history: list[dict], moment: float) -> int:
    return sum(1 for record in history if record["event"] == "epoch" and record["time"] > moment)


def _step(run: Run, final: bool = False) -> None:
    """One tick of fault injection. Faults follow the training's progress, not the clock, so a
    fast machine cannot finish the run before a fault lands and a slow one still sees each fault."""
    now = time.time()
    history = run.history()
    if final:
        pass
    elif run.killed_at is None:
        if _epochs_since(history, 0) >= 1:
            run.etcd.kill()
            run.killed_at = now
    elif run.back_at is None and run.recreate:
        # "gone": back once the first two agents gave up, a little later, so the recreated ones
        # start against a store that is still away
        if len(run.exits) >= 2 and now - max(at for _, _, at in run.exits) >= GONE_EXTRA_SECONDS:
            run.etcd.restart(keep_data=False)
            run.back_at = time.time()
    elif run.newcomer and run.newcomer_at is None:
        run.job.add_agent(run.command)
        run.newcomer_at = now
    elif run.back_at is None:
        # back once the group has trained two more epochs without it and the newcomer, if any,
        # waits for the store (or after a while, so that a group that stopped still gets its etcd
        # back and the tests can say what happened)
        trained = _epochs_since(history, run.killed_at) >= 2
        waiting = not run.newcomer or "is unreachable" in run.job.log_path(2).read_text(errors="replace")
        if (trained and waiting) or now - run.killed_at > STALLED_SECONDS:
            run.etcd.restart(keep_data=run.keep_data)
            run.back_at = time.time()
    seen = {index for index, _, _ in run.exits}
    for index, agent in enumerate(run.job.agents):
        if index not in seen and agent.poll() is not None:
            run.exits.append((index, agent.returncode, now))
            if run.recreate and agent.returncode in RETRYABLE and not final:
                run.job.add_agent(run.command)  # the controller recreates the pod


@pytest.fixture(scope="module")
def outage_runs(tmp_path_factory) -> dict[str, Run]:
    base = tmp_path_factory.mktemp("outage")
    data = make_synthetic_cifar(base / "data", train_per_class=4, test_per_class=2)  # 2 steps per worker and epoch
    runs: dict[str, Run] = {}
    try:
        for name in ["stock", "empty", "kept", "gone"]:
            etcd = EtcdServer(base / f"etcd-{name}").start()
            run_dir = base / name
            flags = cluster_style_torchrun_flags(etcd.endpoint, name)
            if name == "gone":
                flags.append(f"--rdzv_conf=store_outage_timeout={BOUND_SECONDS}")
            if name == "empty":  # room for a third node; its last call short, as it waits for one that may not come
                flags += ["--nnodes=1:3", "--rdzv_conf=last_call_timeout=5"]
            epochs = {"empty": EMPTY_EPOCHS, "gone": GONE_EPOCHS}.get(name, EPOCHS)
            train_args = ["--data", str(data), "--run-dir", str(run_dir), "--epochs", str(epochs),
                          "--batch-size", "10", "--log-every", "50", "--pg-timeout", "20"]  # fmt: skip
            if name == "stock":
                command = torchrun_command(flags, "jobs.train", train_args)
            else:
                command = [sys.executable, "-m", "jobs.agent", *flags, "-m", "jobs.train", *train_args]
            job = TorchrunJob(name, [command, command], base / "logs", agent_environment(LOGLEVEL="INFO"))
            runs[name] = Run(name, run_dir, etcd, job, command, keep_data=name == "kept", newcomer=name == "empty",
                             recreate=name == "gone", epochs=epochs)  # fmt: skip

        def inject():
            for run in runs.values():
                _step(run)

        run_torchrun_jobs([run.job for run in runs.values()], DEADLINE_SECONDS, on_tick=inject)
        for run in runs.values():
            _step(run, final=True)  # the last exits
    finally:
        for run in runs.values():
            run.etcd.stop()
    return runs


def _epochs(history: list[dict]) -> list[int]:
    return [record["epoch"] for record in history if record["event"] == "epoch"]


def _assert_finished_once_with_one_model(run: Run, tmp_path: Path) -> list[dict]:
    history = run.history()
    logs = "\n".join(result.log[-3000:] for result in run.job.results())
    assert _epochs(history) == list(range(1, run.epochs + 1)), f"{run.name}: {history}\n{logs}"
    assert [record["event"] for record in history].count("finished") == 1 and history[-1]["event"] == "finished"
    assert evaluate.main(["--data", str(run.run_dir.parent / "data" / "cifar-10-batches-py"),
                          "--model", str(run.run_dir / "model.pt"), "--metrics-out", str(tmp_path / "metrics.json"),
                          "--min-accuracy", "0"]) == 0  # fmt: skip
    return history


def _in_outage(run: Run, history: list[dict]) -> list[int]:
    return [r["epoch"] for r in history if r["event"] == "epoch" and run.killed_at < r["time"] < run.back_at]


def test_stock_torchrun_ends_both_agents_with_exit_1(outage_runs):
    run = outage_runs["stock"]
    assert run.killed_at is not None, run.history()
    results = run.job.results()
    assert [result.returncode for result in results] == [1, 1], "\n".join(r.log[-2000:] for r in results)
    assert all("etcd.EtcdConnectionFailed" in result.log for result in results)
    assert all(code not in RETRYABLE for _, code, _ in run.exits)  # so the controller never recreates them


def test_etcd_back_empty_the_group_trains_through_then_re_forms_with_a_newcomer(outage_runs, tmp_path):
    run = outage_runs["empty"]
    results = run.job.results()
    logs = "\n".join(f"--- agent {i}\n{r.log[-3000:]}" for i, r in enumerate(results))
    assert run.back_at is not None and run.newcomer_at is not None, run.history()
    assert [code for _, code, _ in run.exits] == [0, 0, 0], logs
    history = _assert_finished_once_with_one_model(run, tmp_path)
    trained_in_outage = _in_outage(run, history)
    assert len(trained_in_outage) >= 2, history  # the workers trained on while etcd was away
    # the group saw the newcomer's round was not its own, and all three re-formed from the checkpoint
    assert all("the rendezvous store holds a round other than this group's" in r.log for r in results[:2]), logs
    after = [r for r in history if r["event"] == "start" and r["time"] > run.back_at]
    assert after and after[-1]["world_size"] == 3 and after[-1]["epochs_done"] >= 3, history
    assert all(r["world_size"] == 3 for r in history if r["event"] == "epoch" and r["time"] > after[-1]["time"]), history
    next_epoch = min(r["time"] for r in history if r["event"] == "epoch" and r["time"] > run.back_at)
    print(f"\nempty: {len(trained_in_outage)} epochs finished while etcd was away ({run.back_at - run.killed_at:.1f} s), "
          f"next epoch {next_epoch - run.back_at:.1f} s after its return, 0 s of work lost; etcd's return to "
          f"training resumed at world size 3 with the newcomer: {after[-1]['time'] - run.back_at:.1f} s")


def test_etcd_back_with_its_data_the_group_never_stops(outage_runs, tmp_path):
    run = outage_runs["kept"]
    assert run.back_at is not None, run.history()
    assert [code for _, code, _ in run.exits] == [0, 0], "\n".join(r.log[-3000:] for r in run.job.results())
    history = _assert_finished_once_with_one_model(run, tmp_path)
    assert [record["event"] for record in history].count("start") == 1, history  # no restart: nothing lost
    trained_in_outage = _in_outage(run, history)
    assert len(trained_in_outage) >= 2, history
    next_epoch = min(r["time"] for r in history if r["event"] == "epoch" and r["time"] > run.back_at)
    print(f"\nkept: {len(trained_in_outage)} epochs finished while etcd was away ({run.back_at - run.killed_at:.1f} s), "
          f"next epoch {next_epoch - run.back_at:.1f} s after its return, 0 s of work lost")


def test_etcd_gone_past_the_bound_agents_exit_138_naming_the_store_and_the_recreated_ones_resume(outage_runs, tmp_path):
    run = outage_runs["gone"]
    results = run.job.results()
    logs = "\n".join(f"--- agent {i}\n{r.log[-3000:]}" for i, r in enumerate(results))
    assert run.back_at is not None, logs
    codes = [code for _, code, _ in run.exits]
    assert codes[:2] == [EXIT_STORE_UNAVAILABLE] * 2, logs  # the first two gave up on the store
    assert all(code == EXIT_STORE_UNAVAILABLE for code in codes[:-2]) and codes[-2:] == [0, 0], codes
    first_exit = min(at for _, _, at in run.exits)
    assert BOUND_SECONDS <= first_exit - run.killed_at < BOUND_SECONDS + 30, (run.killed_at, run.exits)
    # one line, naming the store, for the wait to read (log, and the termination message in a pod)
    line = [text for text in results[0].log.splitlines() if text.startswith("jobs.torchrun:")]
    assert len(line) == 1 and f"the rendezvous store {run.etcd.endpoint} (etcd)" in line[0], results[0].log[-3000:]
    assert f"exiting {EXIT_STORE_UNAVAILABLE}" in line[0]

    history = _assert_finished_once_with_one_model(run, tmp_path)
    stopped = [r for r in history if r["event"] == "epoch" and r["time"] < first_exit]
    resumed = [r for r in history if r["event"] == "start" and r["time"] > run.back_at]
    assert resumed and resumed[0]["epochs_done"] == stopped[-1]["epoch"] and resumed[0]["world_size"] == 2, history
    print(f"\ngone: agents gave up {first_exit - run.killed_at:.1f} s after etcd died (bound {BOUND_SECONDS} s); "
          f"training resumed {resumed[0]['time'] - run.back_at:.1f} s after etcd's return, from epoch "
          f"{resumed[0]['epochs_done']}; work lost: {first_exit - stopped[-1]['time']:.1f} s since the last checkpoint")
