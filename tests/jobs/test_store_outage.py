"""The rendezvous store goes away in the middle of a run: real torchrun agents (jobs.elastic.agent, the worker
pod's command, with the flags the ElasticJob gives them), each run with its own real store
(python -m jobs.elastic.store_server, as the store's pod runs it):
- "stock": torch's own c10d backend (plain torch.distributed.run, --rdzv_backend=c10d) on the same
  store, restarted once epoch 1 is done: both agents exit 1 (torch 2.13.0's TCPStore client never
  reconnects: upstream-facts-3.md fact 9), which the controller never retries;
- "empty": the store SIGKILLed once epoch 1 is done and started again EMPTY (a new store pod) once
  the group has trained two epochs without it; meanwhile a third agent has started (a pod the
  controller creates) and waits for the store. When it is back the group puts its state back and
  the newcomer races it (the newcomer race): either way all three must re-form on the emptied store
  and resume from the checkpoint, never the newcomer alone beside the group;
- "stalled": the store SIGSTOPped for longer than a node may stay silent, then continued: it comes
  back with its data (a stalled or cut-off pod), and the group must never stop;
- "forming": one agent of a two-node job waits in the rendezvous when the store restarts empty;
  the second comes afterwards, and the round forms with both;
- "gone": the store away for longer than the agents' bound (`store_outage_timeout`): each agent
  exits 138 with one line naming the store, and is started again at once, as the controller
  recreates the pod (below), until the store is back (empty) and the run resumes from its
  checkpoint; the training wait, reading what the controller recorded, names the store.

The controller's part: the ElasticJob's Indexed Job replaces a worker pod that exited 130, 138 or 143
without counting it (controller/render.py's podFailurePolicy, from controller/exit_codes.py): the same
command, started again; the failed pod stays, with its exit code in its status.

The runs go at the same time (each its own store and rendezvous id), as in test_elastic.py.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import make_synthetic_cifar
from torchrun_harness import (
    StoreServer,
    TorchrunJob,
    agent_environment,
    cluster_style_torchrun_flags,
    gated_agent_command,
    run_torchrun_jobs,
)

from infra.components import rendezvous_health
from infra.specs.workloads import WORKER_CONTAINER
from jobs.training import checkpoint
from jobs.results import evaluate
from jobs.elastic import rendezvous
from jobs.elastic.torchrun import EXIT_STORE_UNAVAILABLE

DEADLINE_SECONDS = 360
EPOCHS = 8
LONG_EPOCHS = 60  # "empty", "gone": the group must still be training when the store comes back
STALLED_SECONDS = 60
BOUND_SECONDS = 6  # "gone": store_outage_timeout
GONE_EXTRA_SECONDS = 3  # "gone": the store comes back this long after the first agents gave up
# "stalled": longer than keep_alive_interval x keep_alive_max_attempt, after which torch's
# sanitizer would drop every node whose heartbeat is older
STOPPED_SECONDS = rendezvous.DEFAULTS["keep_alive_interval"] * rendezvous.DEFAULTS["keep_alive_max_attempt"] + 3
RETRYABLE = {130, 137, 138, 143}  # kubeflow/common IsRetryableExitCode


@dataclass
class Run:
    name: str
    run_dir: Path
    store: StoreServer
    job: TorchrunJob
    command: list[str]
    next_store: StoreServer | None = None  # the store after a restart: its process loaded from the start
    epochs: int = EPOCHS
    killed_at: float | None = None  # time.time() the store went away: just before SIGKILL, once stopped for SIGSTOP
    restarting: bool = False  # the new store let in (its process started right after the kill, loaded, waiting)
    back_at: float | None = None  # time.time() the store listened again
    newcomer_at: float | None = None
    joining_since: float | None = None  # "forming": when agent 0 began to wait in the rendezvous
    exits: list[tuple[int, int, float]] = field(default_factory=list)  # (agent index, code, time.time())

    def history(self) -> list[dict]:
        return checkpoint.read_history(self.run_dir)

    def log(self, index: int) -> str:
        return self.job.log_path(index).read_text(errors="replace")


def _epochs_since(history: list[dict], moment: float) -> int:
    return sum(1 for record in history if record["event"] == "epoch" and record["time"] > moment)


def _kill(run: Run, now: float) -> None:
    """SIGKILL the store (an OOM kill, a lost node)."""
    run.store.kill()
    run.killed_at = now


def _restart(run: Run) -> None:
    """The new store pod comes up, empty, on the same address: its process has loaded Python and
    torch since the run began (tens of seconds on this busy machine) and serves now; it is back when
    it listens (never waited for here: the tick goes on)."""
    (run.run_dir.parent / f"{run.name}-store-gate").touch()
    run.store = run.next_store
    run.restarting = True


def _step(run: Run) -> None:
    """One tick of fault injection. Faults follow the training's progress, not the clock, so a
    fast machine cannot finish the run before a fault lands and a slow one still sees each fault."""
    now = time.time()
    history = run.history()
    if run.restarting and run.back_at is None and run.store.is_ready():
        run.back_at = now
    if run.name == "forming":
        _step_forming(run, now)
    elif run.killed_at is None:
        if _epochs_since(history, 0) >= 1:
            if run.name == "stalled":
                run.store.pause()
                run.killed_at = time.time()
            else:
                _kill(run, now)
    elif run.name == "stock":
        if not run.restarting:
            _restart(run)
    elif run.name == "stalled":
        if run.back_at is None and now - run.killed_at >= STOPPED_SECONDS:
            run.store.resume()
            run.back_at = time.time()
    elif run.name == "gone":
        # back once the first two agents gave up, a little later, so the recreated ones start
        # against a store that is still away
        if not run.restarting and len(run.exits) >= 2 and now - max(at for _, _, at in run.exits) >= GONE_EXTRA_SECONDS:
            _restart(run)
    elif run.newcomer_at is None:  # "empty": the third agent, started with the others and loaded, comes now
        (run.run_dir.parent / "empty-newcomer-gate").touch()
        run.newcomer_at = now
    elif not run.restarting:
        # started again once the group has trained an epoch without it and the newcomer waits for
        # the store (or after a while, so that a group that stopped still gets its store back and
        # the tests can say what happened)
        trained = _epochs_since(history, run.killed_at) >= 1
        waiting = "is unreachable" in run.log(2)
        if (trained and waiting) or now - run.killed_at > STALLED_SECONDS:
            _restart(run)
    _record_exits(run, now)


def _step_forming(run: Run, now: float) -> None:
    """Agent 0 alone in a job of 2:2 waits for its peer in the rendezvous; the store restarts empty
    under it; then the peer starts."""
    if run.killed_at is None:
        if run.joining_since is None and "Rendezvous'ing worker group" in run.log(0):  # torch's agent log line
            run.joining_since = now  # (agent/server/api.py); the kill comes 3 s into its wait, once it is in the state
        elif run.joining_since is not None and now - run.joining_since >= 3:
            _kill(run, now)
    elif not run.restarting:
        if "is unreachable" in run.log(0):  # it noticed, in the middle of its wait
            _restart(run)
    elif run.back_at is not None and run.newcomer_at is None and "lost this run's state" in run.log(0):
        run.job.add_agent(run.command)
        run.newcomer_at = now


def _record_exits(run: Run, now: float, final: bool = False) -> None:
    seen = {index for index, _, _ in run.exits}
    for index, agent in enumerate(run.job.agents):
        if index not in seen and agent.poll() is not None:
            run.exits.append((index, agent.returncode, now))
            if run.name == "gone" and agent.returncode in RETRYABLE and not final:
                run.job.add_agent(run.command)  # the controller recreates the pod


@pytest.fixture(scope="module")
def outage_runs(tmp_path_factory) -> dict[str, Run]:
    base = tmp_path_factory.mktemp("outage")
    data = make_synthetic_cifar(base / "data", train_per_class=4, test_per_class=2)  # 2 steps per worker and epoch
    runs: dict[str, Run] = {}
    try:
        for name in ["stock", "empty", "stalled", "forming", "gone"]:
            store = StoreServer(base / f"store-{name}").start()
            next_store = None
            if name != "stalled":
                next_store = StoreServer(base / f"store-{name}-next", port=store.port).launch(
                    base / f"{name}-store-gate"
                )
            run_dir = base / name
            nnodes = {"empty": "1:3", "forming": "2:2"}.get(name, "1:2")
            flags = cluster_style_torchrun_flags(store.endpoint, name, nnodes=nnodes)
            if name == "gone":
                flags.append(f"--rdzv_conf=store_outage_timeout={BOUND_SECONDS}")
            epochs = LONG_EPOCHS if name in ("empty", "gone") else EPOCHS
            train_args = ["--data", str(data), "--run-dir", str(run_dir), "--epochs", str(epochs),
                          "--batch-size", "10", "--log-every", "50", "--pg-timeout", "20"]  # fmt: skip
            if name == "stock":  # torch's own backend on our store, which its client does not host
                flags = [*flags, "--rdzv_backend=c10d", "--rdzv_conf=is_host=false"]
                command = [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    *flags,
                    "-m",
                    "jobs.training.train",
                    *train_args,
                ]
            else:
                command = [sys.executable, "-m", "jobs.elastic.agent", *flags, "-m", "jobs.training.train", *train_args]
            commands = [command] if name == "forming" else [command, command]
            if name == "empty":  # the newcomer: a pod whose image is pulled, Python and torch loaded before it starts
                commands.append(gated_agent_command(base / "empty-newcomer-gate", command[3:]))
            job = TorchrunJob(name, commands, base / "logs", agent_environment(LOGLEVEL="INFO"))
            runs[name] = Run(name, run_dir, store, job, command, next_store=next_store, epochs=epochs)

        def inject():
            for run in runs.values():
                _step(run)

        run_torchrun_jobs([run.job for run in runs.values()], DEADLINE_SECONDS, on_tick=inject)
        for run in runs.values():
            _record_exits(run, time.time(), final=True)  # the last exits
    finally:
        for run in runs.values():
            for store in {run.store, run.next_store} - {None}:
                if store.process and store.process.poll() is None:
                    os.kill(store.process.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM until continued
                store.stop()
    return runs


def _epochs(history: list[dict]) -> list[int]:
    return [record["epoch"] for record in history if record["event"] == "epoch"]


def _logs(run: Run) -> str:
    return "\n".join(f"--- agent {i}\n{r.log[-3000:]}" for i, r in enumerate(run.job.results()))


def _assert_finished_once_with_one_model(run: Run, tmp_path: Path) -> list[dict]:
    history = run.history()
    assert _epochs(history) == list(range(1, run.epochs + 1)), f"{run.name}: {history}\n{_logs(run)}"
    assert [record["event"] for record in history].count("finished") == 1 and history[-1]["event"] == "finished"
    assert evaluate.main(["--data", str(run.run_dir.parent / "data" / "cifar-10-batches-py"),
                          "--model", str(run.run_dir / "model.pt"), "--metrics-out", str(tmp_path / "metrics.json"),
                          "--min-accuracy", "0"]) == 0  # fmt: skip
    return history


def _in_outage(run: Run, history: list[dict]) -> list[int]:
    return [r["epoch"] for r in history if r["event"] == "epoch" and run.killed_at < r["time"] < run.back_at]


def test_torch_s_c10d_backend_ends_both_agents_with_exit_1(outage_runs):
    run = outage_runs["stock"]
    assert run.back_at is not None, run.history()
    assert [code for _, code, _ in sorted(run.exits)] == [1, 1], _logs(run)
    assert all("RendezvousConnectionError" in result.log for result in run.job.results())
    assert all(code not in RETRYABLE for _, code, _ in run.exits)  # so the controller never recreates them


def test_store_back_empty_the_group_trains_through_then_re_forms_with_the_newcomer(outage_runs, tmp_path):
    run = outage_runs["empty"]
    results = run.job.results()
    assert run.back_at is not None and run.newcomer_at is not None, run.history()
    assert [code for _, code, _ in run.exits] == [0, 0, 0], _logs(run)
    history = _assert_finished_once_with_one_model(run, tmp_path)
    trained_in_outage = _in_outage(run, history)
    # the workers trained on while the store was away: the store comes back once they have finished an
    # epoch without it (_step), so one is what every run shows; a second only if the store is slow to start
    assert len(trained_in_outage) >= 1, history
    # whoever reached the emptied store first, all three re-formed from the checkpoint, never the
    # newcomer alone: the group put its state back, or saw the newcomer's round was not its own
    group_logs = "".join(r.log for r in results[:2])
    assert "put back this node's last one" in group_logs or "re-forming the group" in group_logs, _logs(run)
    after = [r for r in history if r["event"] == "start" and r["time"] > run.back_at]
    assert after and after[-1]["world_size"] == 3 and after[-1]["epochs_done"] >= 3, history
    assert all(r["world_size"] in (2, 3) for r in history if r["event"] == "start"), history
    assert all(r["world_size"] == 3 for r in history if r["event"] == "epoch" and r["time"] > after[-1]["time"]), (
        history
    )
    next_epoch = min(r["time"] for r in history if r["event"] == "epoch" and r["time"] > run.back_at)
    print(
        f"\nempty: {len(trained_in_outage)} epochs finished while the store was away ({run.back_at - run.killed_at:.1f} s), "
        f"next epoch {next_epoch - run.back_at:.1f} s after its return; training at world size 3 with the newcomer "
        f"{after[-1]['time'] - run.back_at:.1f} s after the store's return"
    )


def test_a_stalled_store_that_keeps_its_data_never_stops_the_group(outage_runs, tmp_path):
    run = outage_runs["stalled"]
    assert run.back_at is not None, run.history()
    assert [code for _, code, _ in run.exits] == [0, 0], _logs(run)
    history = _assert_finished_once_with_one_model(run, tmp_path)
    assert [record["event"] for record in history].count("start") == 1, history  # no restart: nothing lost
    assert len(_in_outage(run, history)) >= 1, history
    assert run.back_at - run.killed_at >= STOPPED_SECONDS


def test_a_store_restarted_while_a_round_forms_loses_nothing_of_the_round(outage_runs, tmp_path):
    run = outage_runs["forming"]
    assert run.back_at is not None and run.newcomer_at is not None, _logs(run)
    assert [code for _, code, _ in run.exits] == [0, 0], _logs(run)
    assert "put back this node's last one (round 0, 1 participants)" in run.log(0)
    history = _assert_finished_once_with_one_model(run, tmp_path)
    assert [(r["event"], r["world_size"]) for r in history if r["event"] == "start"] == [("start", 2)], history


def test_store_gone_past_the_bound_agents_exit_138_naming_it_and_the_recreated_ones_resume(outage_runs, tmp_path):
    run = outage_runs["gone"]
    results = run.job.results()
    assert run.back_at is not None, _logs(run)
    codes = [code for _, code, _ in run.exits]
    assert codes[:2] == [EXIT_STORE_UNAVAILABLE] * 2, _logs(run)  # the first two gave up on the store
    assert all(code == EXIT_STORE_UNAVAILABLE for code in codes[:-2]) and codes[-2:] == [0, 0], codes
    first_exit = min(at for _, _, at in run.exits)
    assert first_exit - run.killed_at >= BOUND_SECONDS, (run.killed_at, run.exits)
    # one line, naming the store, for the wait to read (log, and the termination message in a pod):
    # it gave up on the first try past the bound (a try takes a few seconds: connect, then a pause)
    line = [text for text in results[0].log.splitlines() if text.startswith("jobs.elastic.torchrun:")]
    assert len(line) == 1 and f"the rendezvous store {run.store.endpoint} was unreachable for " in line[0], results[
        0
    ].log[-3000:]
    waited = float(line[0].split(" was unreachable for ")[1].split(" s,")[0])
    # waited is the line's figure, rounded to 0.1 s: a give-up just past the bound reads as the bound itself.
    assert BOUND_SECONDS <= waited <= BOUND_SECONDS + 10 and f"exiting {EXIT_STORE_UNAVAILABLE}" in line[0], line[0]

    history = _assert_finished_once_with_one_model(run, tmp_path)
    stopped = [r for r in history if r["event"] == "epoch" and r["time"] < first_exit]
    resumed = [r for r in history if r["event"] == "start" and r["time"] > run.back_at]
    assert resumed and resumed[0]["epochs_done"] == stopped[-1]["epoch"] and resumed[0]["world_size"] == 2, history

    # The wait's verdict on a store that does not come back: the failed worker pods the ElasticJob's
    # Job keeps, one per exit, with the worker's code in its status (controller/render.py), and a
    # Deployment without a ready pod.
    pods = [
        {
            "metadata": {"name": f"train-gone-{index}-x{number}"},
            "status": {
                "phase": "Failed",
                "containerStatuses": [{"name": WORKER_CONTAINER, "state": {"terminated": {"exitCode": code}}}],
            },
        }
        for number, (index, code, _) in enumerate(run.exits)
    ]
    watch = rendezvous_health.StoreWatch("training")
    down = rendezvous_health.StoreState(False, "no store pod")
    assert watch.problem(down, pods, 0) is None
    verdict = watch.problem(down, pods, rendezvous_health.STORE_DOWN_SECONDS)
    gave_up = codes.count(EXIT_STORE_UNAVAILABLE)
    assert verdict.startswith("the rendezvous store rendezvous-store:29400 (StatefulSet training/rendezvous-store)")
    assert f"workers gave up on it (exit 138) {gave_up} times" in verdict and "\n" not in verdict
    print(
        f"\ngone: agents gave up {first_exit - run.killed_at:.1f} s after the store died (bound {BOUND_SECONDS} s); "
        f"training resumed {resumed[0]['time'] - run.back_at:.1f} s after its return, from epoch "
        f"{resumed[0]['epochs_done']}; work lost: {first_exit - stopped[-1]['time']:.1f} s since the last checkpoint"
    )
