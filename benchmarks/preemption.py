"""What a preemption costs: goodput of jobs.training.train under preemption, before and after checkpoints by time.

    .venv/bin/python benchmarks/preemption.py [--scale 0.1] [--images-per-class 200] [--epochs 5]

The local harness of tests/jobs: the real rendezvous store, 3 torchrun agents started as the worker
pods start them (jobs.elastic.agent, --nnodes=2:3, our rendezvous with its default timeouts), training on
generated CIFAR-format data with a trace of every step (--trace-samples). Every `300 s x scale` of
a group's training (the issue's one preemption per 5 minutes, scaled down) the agent of rank 1 is
preempted and, once it has exited, a new agent with the same command starts (the recreated pod,
with a node ready at once). Three runs, one after the other:

  SIGTERM, before   epoch checkpoints only (--checkpoint-every-seconds 0 --no-save-on-sigterm):
                    what jobs.training.train did before; the agent gets SIGTERM as on a Spot notice
  SIGTERM, after    checkpoints every 30 s x scale, saving on SIGTERM
  SIGKILL, after    the same, but the agent and its worker are killed: a node lost without notice

From each run's trace and history.jsonl (jobs.training.sample_trace): steps computed, the steps the final
model contains (useful), goodput = useful / computed; per preemption the work lost (seconds of
steps computed and thrown away) and the re-formation (seconds from the old group's last step to
the new group's first). Time is scaled; the re-formation costs (a lost node's heartbeat expiring,
the last call, process start-up) are not, so they weigh 1 / scale times more here than on a cluster.

Before those, the loop's throughput with and without checkpoints by time, in the same workers
(benchmarks/checkpoint_overhead.py). After them, the unannounced loss of a node with nothing to
replace it, a join and a restart of the store, each timed to the new group's first step
(benchmarks/reformation.py; `--no-reformation` skips them).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.training import checkpoint  # noqa: E402
from jobs.data import cifar as data  # noqa: E402
from jobs.training.model import WorkshopCNN  # noqa: E402
from jobs.training.progress import Progress, save_checkpoint  # noqa: E402
from jobs.training.recipes import RunSettings, build_optimizer  # noqa: E402
from jobs.training.sample_trace import TracedStep, committed_and_lost, read_traces, traced_steps  # noqa: E402
from jobs.data.transforms import Normalization  # noqa: E402
import checkpoint_overhead  # noqa: E402  (beside this file)
import reformation  # noqa: E402  (beside this file)
from tests.jobs.torchrun_harness import (  # noqa: E402
    StoreServer, TorchrunJob, agent_environment, cluster_style_torchrun_flags, descendants_of, run_torchrun_jobs,
    worker_rank,
)  # fmt: skip

WORLD = 3
PREEMPT_EVERY_SECONDS = 300.0  # the rate: one preemption per 5 minutes of training
CHECKPOINT_EVERY_SECONDS = 30.0  # jobs.training.train's default


@dataclass
class Run:
    name: str
    policy: list[str]
    stop_signal: signal.Signals | None  # None: uninterrupted
    interval: float  # the checkpoint interval of the policy (0: epoch ends only)
    directory: Path
    job: TorchrunJob | None = None
    preempted: list[tuple[float, int]] = field(default_factory=list)  # (time, agent index)
    preempted_groups: set[int] = field(default_factory=set)  # a group is preempted once; the next must form
    waiting_for: int | None = None  # the preempted agent, until it has exited

    @property
    def run_dir(self) -> Path:
        return self.directory / "run"

    @property
    def trace_dir(self) -> Path:
        return self.directory / "trace"


def _preempt(run: Run, every: float, epochs: int) -> None:
    """Called every tick: preempt the agent of rank 1 once the current group has trained for
    `every` seconds (not in the last epoch: the run would end before a new group forms); start
    its replacement once it has exited."""
    job = run.job
    if run.waiting_for is not None:
        if job.agents[run.waiting_for].poll() is not None:
            job.add_agent(job.commands[run.waiting_for])
            run.waiting_for = None
        return
    history = checkpoint.read_history(run.run_dir)
    starts = [r for r in history if r["event"] == "start"]
    if not starts or starts[-1]["group"] in run.preempted_groups or starts[-1]["epochs_done"] >= epochs - 1:
        return
    group_steps = [s for s in traced_steps(read_traces(run.trace_dir)) if s.group == starts[-1]["group"]]
    if not group_steps or time.time() - group_steps[0].time < every:
        return
    for index, agent in enumerate(job.agents):
        if agent.poll() is None and any(worker_rank(pid) == 1 for pid in descendants_of(agent.pid)):
            if run.stop_signal == signal.SIGKILL:  # the node is gone: worker, torchrun and jobs.elastic.agent
                for pid in reversed(descendants_of(agent.pid)):
                    os.kill(pid, signal.SIGKILL)
            agent.send_signal(run.stop_signal)
            run.preempted.append((time.time(), index))
            run.preempted_groups.add(starts[-1]["group"])
            run.waiting_for = index
            return


def execute(run: Run, store: StoreServer, data_dir: Path, args) -> None:
    train_args = ["--data", str(data_dir), "--run-dir", str(run.run_dir), "--epochs", str(args.epochs),
                  "--batch-size", str(args.batch_size), "--log-every", "1000", "--pg-timeout", "20",
                  "--trace-samples", str(run.trace_dir), *run.policy]  # fmt: skip
    flags = cluster_style_torchrun_flags(
        store.endpoint, run.name.replace(" ", "-"), max_restarts=20, nnodes=f"2:{WORLD}"
    )
    command = [sys.executable, "-m", "jobs.elastic.agent", *flags, "-m", "jobs.training.train", *train_args]
    run.job = TorchrunJob(run.name.replace(" ", "-"), [command] * WORLD, run.directory / "logs", agent_environment())
    every = PREEMPT_EVERY_SECONDS * args.scale
    started = time.monotonic()
    run_torchrun_jobs([run.job], args.deadline, on_tick=lambda: _preempt(run, every, args.epochs), tick_seconds=0.2)
    finished = (run.run_dir / checkpoint.MODEL_NAME).exists()
    print(
        f"  {run.name}: {time.monotonic() - started:.0f} s, {len(run.preempted)} preemptions, "
        f"{'finished' if finished else 'NOT FINISHED (see ' + str(run.directory / 'logs') + ')'}",
        flush=True,
    )


@dataclass
class Result:
    computed: int
    useful: int
    lost_work: list[float]  # per preemption, seconds
    reformation: list[float]
    train_seconds: float  # wall time from the first step to the last
    useful_seconds: float  # the useful steps' own durations

    @property
    def goodput(self) -> float:
        return self.useful / self.computed


def _durations(steps: list[TracedStep]) -> dict[TracedStep, float]:
    """Each step's seconds: the time since the group's previous step (its first: the group's median)."""
    durations: dict[TracedStep, float] = {}
    for group in {s.group for s in steps}:
        mine = sorted((s for s in steps if s.group == group), key=lambda s: s.time)
        gaps = [b.time - a.time for a, b in zip(mine, mine[1:])]
        typical = statistics.median(gaps) if gaps else 0.0
        for index, step in enumerate(mine):
            durations[step] = gaps[index - 1] if index else typical
    return durations


def analyse(run: Run) -> Result:
    history = checkpoint.read_history(run.run_dir)
    steps = traced_steps(read_traces(run.trace_dir))
    committed, lost = committed_and_lost(history, steps)
    durations = _durations(steps)
    groups = [r["group"] for r in history if r["event"] == "start"]
    lost_work, reformation = [], []
    for old, new in zip(groups, groups[1:]):
        old_steps = [s for s in steps if s.group == old]
        new_steps = [s for s in steps if s.group == new]
        if not old_steps or not new_steps:
            continue
        lost_work.append(sum(durations[s] for s in lost if s.group == old))
        reformation.append(min(s.time for s in new_steps) - durations[min(new_steps, key=lambda s: s.time)]
                           - max(s.time for s in old_steps))  # fmt: skip
    return Result(len(steps), len(committed), lost_work, reformation, max(s.time for s in steps) - min(s.time for s in steps),
                  sum(durations[s] for s in committed))  # fmt: skip


def save_seconds(directory: Path, repeats: int = 5) -> float:
    """How long rank 0 takes to write one checkpoint of this model here (median)."""
    model = WorkshopCNN()
    optimizer = build_optimizer(model, RunSettings("improved", 1, 1, 0.05, 0))
    model(torch.zeros(2, 3, 32, 32)).sum().backward()
    optimizer.step()  # momentum buffers exist, as in a real checkpoint
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        save_checkpoint(directory, model, optimizer, RunSettings("improved", 1, 1, 0.05, 0), Normalization.unit_scale_only(),
                        50_000, Progress(0, 100))  # fmt: skip
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--scale",
        type=float,
        default=0.1,
        help="time scale: preemption every 300 s x scale, checkpoint every 30 s x scale",
    )
    parser.add_argument("--images-per-class", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--throughput-epochs", type=int, default=24, help="timed epochs of the throughput measurement")
    parser.add_argument("--deadline", type=float, default=900, help="seconds per run before it is killed")
    parser.add_argument("--no-reformation", action="store_true", help="skip benchmarks/reformation.py's cases")
    parser.add_argument("--reformation-repeats", type=int, default=2, help="runs of each re-formation case")
    args = parser.parse_args()
    interval = CHECKPOINT_EVERY_SECONDS * args.scale
    before = ["--checkpoint-every-seconds", "0", "--no-save-on-sigterm"]
    after = ["--checkpoint-every-seconds", f"{interval:g}"]

    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        data_dir = base / data.FOLDER_NAME
        data.write_synthetic(data_dir, args.images_per_class)
        print(f"{WORLD} workers, {args.images_per_class * 10} images, batch {args.batch_size} per worker; torch "
              f"{torch.__version__}, {os.cpu_count()} CPUs", flush=True)  # fmt: skip
        saving = save_seconds(base)
        rates = checkpoint_overhead.measure(WORLD, args.throughput_epochs, 100, args.batch_size)
        runs = [
            Run("SIGTERM, before", before, signal.SIGTERM, 0, base / "t-before"),
            Run("SIGTERM, after", after, signal.SIGTERM, interval, base / "t-after"),
            Run("SIGKILL, after", after, signal.SIGKILL, interval, base / "k-after"),
        ]
        print(f"preemption every {PREEMPT_EVERY_SECONDS * args.scale:g} s of training, checkpoint interval "
              f"{interval:g} s (scale {args.scale:g}), {args.epochs} epochs", flush=True)  # fmt: skip
        store = StoreServer(base / "store").start()
        try:
            for run in runs:
                execute(run, store, data_dir, args)
            results = {run.name: analyse(run) for run in runs}
        finally:
            store.stop()
    report(runs, results, rates, interval, saving)
    if not args.no_reformation:
        print("\nre-formation (benchmarks/reformation.py):", flush=True)
        reformation.report(reformation.measure(args.reformation_repeats))


def report(runs: list[Run], results: dict[str, Result], rates: list[dict], interval: float, saving: float) -> None:
    parameters = sum(p.numel() for p in WorkshopCNN().parameters())
    print(
        f"\none checkpoint of the workshop CNN (weights + momentum, {parameters:,} parameters) takes {saving:.3f} s here"
    )
    print("throughput of the loop, 3 workers, alternating epochs (benchmarks/checkpoint_overhead.py):")
    checkpoint_overhead.report(rates)
    print()
    print(f"{'run':<16} {'preemptions':>11} {'steps':>6} {'useful':>6} {'goodput':>8} {'work lost / preemption':>23} "
          f"{'re-formation':>13} {'wall s':>7} {'useful s':>9}")  # fmt: skip
    for run in runs:
        r = results[run.name]
        lost = f"{statistics.mean(r.lost_work):.1f} s (max {max(r.lost_work):.1f})" if r.lost_work else "-"
        reform = f"{statistics.mean(r.reformation):.1f} s" if r.reformation else "-"
        print(f"{run.name:<16} {len(run.preempted):>11} {r.computed:>6} {r.useful:>6} {100 * r.goodput:>7.1f}% {lost:>23} "
              f"{reform:>13} {r.train_seconds:>7.1f} {r.useful_seconds:>9.1f}")  # fmt: skip
    for run in runs[1:]:
        r = results[run.name]
        if r.lost_work:
            print(
                f"{run.name}: work lost per preemption <= checkpoint interval ({interval:g} s): "
                f"{'yes' if max(r.lost_work) <= interval else 'NO'}; goodput >= 90 %: {'yes' if r.goodput >= 0.9 else 'NO'}"
            )


if __name__ == "__main__":
    main()
