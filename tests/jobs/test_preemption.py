"""A preemption costs a step, not an epoch: real torchrun agents, the real rendezvous store, real signals.

- "preempt": 3 agents (jobs.elastic.agent, as the worker pods run it) with --nnodes=2:3. Mid-epoch the
  agent whose worker is rank 0 gets SIGTERM (the kubelet's signal on a Spot notice). Its worker
  saves and every worker stops at the same step; the two survivors re-form at world size 2 and go
  on from that step; once they have trained at 2, a new agent starts (the recreated pod), the group
  stops again (torchrun SIGTERMs every worker to let the new node in) and goes on at 3. One model,
  3 epochs, and the images of every step are exactly the uninterrupted run's.
- "kill"/"term": one process alone, stopped mid-epoch by SIGKILL (nothing can be saved: it resumes
  at the last checkpoint by time, not at the epoch's start) or by SIGTERM (it saves: it resumes at
  the very next step); both end with the uninterrupted run's model, bit for bit.

The uninterrupted run ("reference") trains alone: one process, the same seed. The image order of
an epoch does not depend on the world size (jobs.data.sampling), so the 3 -> 2 -> 3 run must train on
exactly its images in its order; only how they are grouped into steps differs (a step holds
world size x batch size images).

The jobs share one store and run at the same time, so the waits (process start-ups) overlap.
`last_call_timeout=2` in the rendezvous configuration shortens the time torch waits for more nodes
once the minimum is there (jobs.elastic.rendezvous.DEFAULTS): with it the survivors form their group of 2
in seconds, which is what this test needs to see, not a property of the training code.
"""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from conftest import make_synthetic_cifar
from torchrun_harness import (
    TorchrunJob,
    agent_environment,
    cluster_style_torchrun_flags,
    descendants_of,
    run_torchrun_jobs,
    worker_rank,
)

from jobs.training import checkpoint
from jobs.results import evaluate
from jobs.training.sample_trace import committed_and_lost, read_traces, traced_steps

DEADLINE_SECONDS = 150
EPOCHS = 3
BATCH = 5  # 300 images: about 20 steps an epoch at 3 workers, 30 at 2, 60 alone


# The replacement "pod", started with the others and standing by: jobs.elastic.torchrun (torch's launcher
# with our rendezvous, what a worker pod runs) imported first, the slow part of a start on this busy
# machine (the CUDA build of torch: up to 10 s), then a ready file; torchrun runs in that process once
# the gate file exists. So it joins within a second or two of being let in, while the group of 2 is
# still training. (Started only once the preempted agent had exited, its import once outlasted the
# group of 2: the run had finished when it asked to join.)
REPLACEMENT = """
import sys, time, pathlib
from jobs.elastic import torchrun
gate, ready = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
ready.touch()
while not gate.exists():
    time.sleep(0.05)
sys.exit(torchrun.main(sys.argv[3:]))
"""


@dataclass
class Agents:
    job: TorchrunJob
    run_dir: Path
    trace_dir: Path
    gate: Path
    ready: Path  # the standing-by replacement has loaded its modules
    replacement: int  # its index among the job's agents
    preempted_at: float | None = None  # time.time() of the SIGTERM
    preempted_agent: int | None = None
    preempted_exit: int | None = None
    events: list[str] = field(default_factory=list)


@dataclass
class Alone:
    """One `python -m jobs.training.train` process stopped by `stop_signal` once a checkpoint by time
    exists mid-epoch 2, then started again."""

    name: str
    stop_signal: signal.Signals
    run_dir: Path
    trace_dir: Path
    command: list[str]
    job: TorchrunJob  # reuses the harness's process handling: a "job" of one plain process
    stopped_at: float | None = None
    restarted: bool = False


def _train_args(data_dir: Path, run_dir: Path, trace_dir: Path, *extra: str) -> list[str]:
    return ["--data", str(data_dir), "--run-dir", str(run_dir), "--epochs", str(EPOCHS), "--batch-size", str(BATCH),
            "--log-every", "4", "--trace-samples", str(trace_dir), *extra]  # fmt: skip


def _steps(trace_dir: Path):
    return traced_steps(read_traces(trace_dir)) if trace_dir.exists() else []


def _drive_agents(run: Agents) -> None:
    """SIGTERM the agent of rank 0 three steps into epoch 2; once it has gone and the survivors have
    trained at world size 2, let the standing-by replacement join."""
    job = run.job
    now = f"{time.monotonic() - job.started_at:.1f} s"
    if run.preempted_at is None:
        if any(s.epoch == 1 and s.start >= 3 * 3 * BATCH and s.world_size == 3 for s in _steps(run.trace_dir)):
            for index, agent in enumerate(job.agents):
                # jobs.elastic.agent -> torchrun -> the worker
                if agent.poll() is None and any(worker_rank(pid) == 0 for pid in descendants_of(agent.pid)):
                    agent.send_signal(signal.SIGTERM)
                    run.preempted_at, run.preempted_agent = time.time(), index
                    run.events.append(f"{now}: SIGTERM to agent {index}")
                    return
    elif run.preempted_exit is None and job.agents[run.preempted_agent].poll() is not None:
        run.preempted_exit = job.agents[run.preempted_agent].returncode
        run.events.append(f"{now}: agent {run.preempted_agent} exited {run.preempted_exit}")
    elif run.preempted_exit is not None and not run.gate.exists():
        if sum(s.world_size == 2 for s in _steps(run.trace_dir)) >= 2 and run.ready.exists():
            run.gate.touch()
            run.events.append(f"{now}: the group of 2 has trained; replacement agent {run.replacement} let in")


def _drive_alone(run: Alone) -> None:
    """Stop the process once it has finished a step after a checkpoint by time taken mid-epoch (so
    that SIGKILL loses work); once it has exited, start it again."""
    process = run.job.agents[0]
    if run.stopped_at is None:
        history = checkpoint.read_history(run.run_dir)
        saved = [(r["epochs_done"], r["position"]) for r in history if r["event"] == "checkpoint"]
        if saved and any((s.epoch, s.start) >= saved[-1] and s.epoch == saved[-1][0] for s in _steps(run.trace_dir)):
            process.send_signal(run.stop_signal)
            run.stopped_at = time.time()
    elif not run.restarted and process.poll() is not None:
        run.restarted = True
        run.job.add_agent(run.command)


@pytest.fixture(scope="module")
def runs(store_server, tmp_path_factory):
    base = tmp_path_factory.mktemp("preemption")
    # 300 images: long enough that the replacement, let in once the group of 2 has trained, joins before
    # the run ends even on a loaded machine (200 ended first once, with the cluster tier beside it).
    data_dir = make_synthetic_cifar(base / "data", train_per_class=30, test_per_class=2)

    # The reference runs beside the others, as a process of its own with the same one thread as
    # the "kill"/"term" processes: the same arithmetic, so their models can be compared bit for bit.
    command = [
        sys.executable,
        "-m",
        "jobs.training.train",
        *_train_args(data_dir, base / "reference", base / "reference-trace", "--checkpoint-every-seconds", "0"),
    ]
    reference = TorchrunJob("reference", [command], base / "logs", agent_environment())

    run_dir, trace_dir = base / "preempt", base / "preempt-trace"
    flags = cluster_style_torchrun_flags(store_server.endpoint, "preempt", nnodes="2:3") + [
        "--rdzv_conf=last_call_timeout=2"
    ]
    torchrun_args = [
        *flags,
        "-m",
        "jobs.training.train",
        *_train_args(data_dir, run_dir, trace_dir, "--pg-timeout", "20"),
    ]
    command = [sys.executable, "-m", "jobs.elastic.agent", *torchrun_args]
    (base / "replacement.py").write_text(REPLACEMENT)
    replacement = [
        sys.executable,
        str(base / "replacement.py"),
        str(base / "gate"),
        str(base / "ready"),
        *torchrun_args,
    ]
    job = TorchrunJob("preempt", [command] * 3 + [replacement], base / "logs", agent_environment(LOGLEVEL="INFO"))
    agents = Agents(job, run_dir, trace_dir, base / "gate", base / "ready", replacement=3)

    alone = {}
    for name, stop_signal in [("kill", signal.SIGKILL), ("term", signal.SIGTERM)]:
        run_dir, trace_dir = base / name, base / f"{name}-trace"
        # A checkpoint by time every 0.5 s: at least one in most epochs of 40 steps.
        command = [
            sys.executable,
            "-m",
            "jobs.training.train",
            *_train_args(data_dir, run_dir, trace_dir, "--checkpoint-every-seconds", "0.5"),
        ]
        job = TorchrunJob(name, [command], base / "logs", agent_environment())
        alone[name] = Alone(name, stop_signal, run_dir, trace_dir, command, job)

    def drive():
        _drive_agents(agents)
        for run in alone.values():
            _drive_alone(run)

    run_torchrun_jobs([agents.job, reference, *(run.job for run in alone.values())], DEADLINE_SECONDS,
                      on_tick=drive, tick_seconds=0.05)  # fmt: skip
    assert [r.returncode for r in reference.results()] == [0], reference.results()[0].log[-3000:]
    print(
        f"\npreempt: {agents.job.seconds:.1f} s, {agents.events}, agents {[r.returncode for r in agents.job.results()]}"
    )
    for run in alone.values():
        print(
            f"{run.name}: {run.job.seconds:.1f} s, stopped {run.stopped_at}, exits {[r.returncode for r in run.job.results()]}"
        )
    return {"base": base, "data": data_dir, "agents": agents, **alone}


def _sequence(steps) -> dict[int, list[int]]:
    """Each epoch's images in the order the steps took them."""
    by_epoch: dict[int, list[int]] = {}
    for step in sorted(steps, key=lambda s: (s.epoch, s.start)):
        assert len(by_epoch.setdefault(step.epoch, [])) == step.start, f"a gap or an overlap before {step}"
        by_epoch[step.epoch] += step.indices
    return by_epoch


def test_a_preempted_agent_costs_no_step_and_the_world_goes_3_2_3(runs, tmp_path):
    run: Agents = runs["agents"]
    results = run.job.results()
    logs = "\n".join(f"--- agent {i}\n{r.log[-2500:]}" for i, r in enumerate(results))
    assert run.preempted_at is not None, f"never reached epoch 2 at world size 3: {run.events}\n{logs}"
    assert run.preempted_exit == 143, logs
    assert run.gate.exists(), f"the survivors never trained at world size 2: {run.events}\n{logs}"
    assert [r.returncode for i, r in enumerate(results) if i != run.preempted_agent] == [0, 0, 0], logs

    history = checkpoint.read_history(run.run_dir)
    starts = [r for r in history if r["event"] == "start"]
    # 3 workers, then the two survivors from exactly where the leaving rank 0 saved, then 3 again.
    assert [s["world_size"] for s in starts] == [3, 2, 3], history
    stops = [r for r in history if r["event"] == "stop"]
    assert [(s["epochs_done"], s["position"]) for s in stops] == [(s["epochs_done"], s["position"]) for s in starts[1:]]
    assert stops[0]["world_size"] == 3 and stops[0]["epochs_done"] == 1 and stops[0]["position"] > 0, history
    assert stops[0]["time"] > run.preempted_at
    assert [r["epoch"] for r in history if r["event"] == "epoch"] == list(range(1, EPOCHS + 1)), history
    assert [r["event"] for r in history].count("finished") == 1 and (run.run_dir / "model.pt").is_file()

    steps = _steps(run.trace_dir)
    assert all(step.ranks == step.world_size for step in steps), "a worker's trace is missing a step"
    committed, lost = committed_and_lost(history, steps)
    assert lost == [], f"steps computed in vain: {lost}"  # every worker stopped at the saved step
    sizes = [step.world_size for step in committed]  # in the order they were taken
    assert [k for i, k in enumerate(sizes) if i == 0 or sizes[i - 1] != k] == [3, 2, 3]
    reference = _sequence(traced_steps(read_traces(runs["base"] / "reference-trace")))
    assert _sequence(committed) == reference
    assert evaluate.main(["--data", str(runs["data"]), "--model", str(run.run_dir / "model.pt"),
                          "--metrics-out", str(tmp_path / "metrics.json"), "--min-accuracy", "0"]) == 0  # fmt: skip


@pytest.mark.parametrize("name", ["kill", "term"])
def test_stopped_mid_epoch_resumes_at_the_next_step_with_the_uninterrupted_model(runs, name):
    run: Alone = runs[name]
    logs = "\n".join(r.log[-2000:] for r in run.job.results())
    assert run.stopped_at is not None and run.restarted, logs
    assert [r.returncode for r in run.job.results()] == [-run.stop_signal if name == "kill" else 143, 0], logs

    history = checkpoint.read_history(run.run_dir)
    starts = [r for r in history if r["event"] == "start"]
    assert len(starts) == 2 and starts[1]["position"] > 0, history
    before_stop = [r for r in history if r["event"] == "checkpoint" and r["time"] < starts[1]["time"]]
    # It resumes where the last checkpoint before the stop left off: mid-epoch, not at its start.
    assert (starts[1]["epochs_done"], starts[1]["position"]) == (
        before_stop[-1]["epochs_done"],
        before_stop[-1]["position"],
    )
    steps = _steps(run.trace_dir)
    first_after = min((s for s in steps if s.group == starts[1]["group"]), key=lambda s: s.time)
    assert (first_after.epoch, first_after.start) == (starts[1]["epochs_done"], starts[1]["position"])
    committed, lost = committed_and_lost(history, steps)
    if name == "kill":  # the steps after the last checkpoint by time were lost, and only those
        assert lost and all((s.epoch, s.start) >= (starts[1]["epochs_done"], starts[1]["position"]) for s in lost), lost
        assert before_stop[-1]["reason"] == "time"
    else:  # SIGTERM: saved at the next step boundary, nothing lost
        assert lost == [] and before_stop[-1]["reason"] == "sigterm", history
    assert _sequence(committed) == _sequence(traced_steps(read_traces(runs["base"] / "reference-trace")))

    model = checkpoint.load(run.run_dir / "model.pt", "model")["state_dict"]
    reference = checkpoint.load(runs["base"] / "reference" / "model.pt", "model")["state_dict"]
    assert all(torch.equal(model[key], reference[key]) for key in reference)
