"""How long the group takes to train again after a change of membership or of the store.

    .venv/bin/python benchmarks/reformation.py [--repeats 1]

Real torchrun agents on the local harness of tests/jobs (jobs.elastic.agent, the flags the ElasticJob
gives them, the real rendezvous store), training on generated data with a trace of every step
(--trace-samples). Three cases, each measured from the event to the first step the new group takes:

  node lost      3 agents (--nnodes=2:3); the agent of rank 1 and its worker are SIGKILLed (a node
                 gone without notice) and nothing replaces it: the survivors must notice and re-form
  join           2 agents (--nnodes=2:3); a third, its Python already started (as a pod whose
                 image is pulled), joins: a join at maxWorkers
  store restart  2 agents (--nnodes=1:3); the store is SIGKILLed, started again EMPTY 5 s later, and a
                 third agent starts as it comes back: the group must take it in on the emptied store

torch's rendezvous timeouts are jobs.elastic.rendezvous.DEFAULTS (the worker pods' own). Times include the
workers' start (Python, torch, the process group, the checkpoint), which on this machine's shared
cores is most of it. benchmarks/preemption.py runs this after its goodput runs.

Measured once against the etcd rendezvous it replaced (issue 31, the same cases in one run, the
etcd path run from the tree before the change; 2 shared cores, load average about 11):
node lost 48.0 s before, 20.0 s after; join 18.3 s before, 11.5 s after; store restart 11.3 s
before, 11.9 s after (docs/design-notes.md, "Rendezvous timeouts").
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.data import cifar as data  # noqa: E402
from jobs.training.sample_trace import read_traces, traced_steps  # noqa: E402
from tests.jobs.torchrun_harness import (  # noqa: E402
    StoreServer, TorchrunJob, agent_environment, cluster_style_torchrun_flags, descendants_of, gated_agent_command,
    run_torchrun_jobs, worker_rank,
)  # fmt: skip

SETTLE_SECONDS = 4.0  # the group trains this long before the event
DEADLINE_SECONDS = 240


@dataclass
class Case:
    name: str
    nnodes: str
    agents: int
    world_after: int
    directory: Path
    job: TorchrunJob | None = None
    store: StoreServer | None = None
    gate: Path | None = None
    event_at: float | None = None  # time.time() of the loss, the join, or the store's return
    killed_store_at: float | None = None
    done: bool = False
    notes: list[str] = field(default_factory=list)

    def steps(self):
        trace = self.directory / "trace"
        return traced_steps(read_traces(trace)) if trace.exists() else []


def _first_step_at(case: Case, world: int) -> float | None:
    after = [s.time for s in case.steps() if s.world_size == world and s.time > case.event_at]
    return min(after) if after else None


def _drive(case: Case) -> None:
    job, now = case.job, time.time()
    steps = case.steps()
    if case.event_at is None and case.killed_store_at is None:
        settled = [s for s in steps if s.world_size == case.agents]
        if not settled or now - min(s.time for s in settled) < SETTLE_SECONDS:
            return
        if case.name == "node lost":
            for agent in job.agents:
                tree = descendants_of(agent.pid)
                if agent.poll() is None and any(worker_rank(pid) == 1 for pid in tree):
                    for pid in reversed(tree):
                        os.kill(pid, signal.SIGKILL)
                    agent.kill()
                    case.event_at = time.time()
                    return
        elif case.name == "join":
            case.gate.touch()
            case.event_at = time.time()
        else:
            case.store.kill()
            case.killed_store_at = now
    elif case.event_at is None and now - case.killed_store_at >= 5:
        case.store.restart()
        case.gate.touch()
        case.event_at = time.time()
    elif case.event_at is not None and _first_step_at(case, case.world_after) is not None and not case.done:
        case.done = True
        job.kill_everything()  # measured: the rest of the run tells nothing more


def run_case(name: str, base: Path, data_dir: Path) -> float | None:
    nnodes, agents, world_after = {"node lost": ("2:3", 3, 2), "join": ("2:3", 2, 3), "store restart": ("1:3", 2, 3)}[
        name
    ]
    case = Case(name, nnodes, agents, world_after, base / name.replace(" ", "-"))
    case.store = StoreServer(case.directory / "store").start()
    try:
        flags = cluster_style_torchrun_flags(
            case.store.endpoint, name.replace(" ", "-"), max_restarts=10, nnodes=nnodes
        )
        train = ["-m", "jobs.training.train", "--data", str(data_dir), "--run-dir", str(case.directory / "run"), "--epochs", "50",
                 "--batch-size", "8", "--log-every", "1000", "--pg-timeout", "20", "--trace-samples",
                 str(case.directory / "trace")]  # fmt: skip
        command = [sys.executable, "-m", "jobs.elastic.agent", *flags, *train]
        case.job = TorchrunJob(name.replace(" ", "-"), [command] * agents, case.directory / "logs", agent_environment())
        if world_after > agents:  # a third agent, loaded and let in at the event (as a pod whose image is pulled)
            case.gate = case.directory / "gate"
            case.job.commands.append(gated_agent_command(case.gate, [*flags, *train]))
        run_torchrun_jobs([case.job], DEADLINE_SECONDS, on_tick=lambda: _drive(case), tick_seconds=0.05)
    finally:
        case.store.stop()
    if case.event_at is None:
        return None
    first = _first_step_at(case, world_after)
    return None if first is None else first - case.event_at


CASES = ("node lost", "join", "store restart")


def measure(repeats: int, images_per_class: int = 40) -> dict[str, list[float | None]]:
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        data_dir = base / data.FOLDER_NAME
        data.write_synthetic(data_dir, images_per_class)
        return {name: [run_case(name, base / f"{index}", data_dir) for index in range(repeats)] for name in CASES}


def report(results: dict[str, list[float | None]]) -> None:
    print(f"{'case':<14} {'seconds to the new group first step':>36}  (each run)")
    for name, times in results.items():
        done = [t for t in times if t is not None]
        summary = f"{statistics.median(done):.1f} s" if done else "-"
        runs = ", ".join("never" if t is None else f"{t:.1f}" for t in times)
        print(f"{name:<14} {summary:>36}  ({runs})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each case")
    args = parser.parse_args()
    report(measure(args.repeats))


if __name__ == "__main__":
    main()
