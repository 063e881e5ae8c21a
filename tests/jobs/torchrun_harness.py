"""Real processes for the jobs tests: the rendezvous store and torchrun agents, bounded and killed by PID.

Reusable outside tests/jobs (e.g. to run the torchrun command line rendered from the
ElasticJob spec): `sys.path` gets tests/jobs when pytest loads tests/jobs/conftest.py;
elsewhere import it as `tests.jobs.torchrun_harness` from the repository root.

Process rules learnt the hard way (reference/offline-testing-details.md §5):
- torchrun starts each worker in a new session, so killing an agent does not kill its
  workers, and an orphaned worker is re-parented away from the agent. We therefore record
  every descendant of every agent while the job runs and, at the end, kill workers first,
  then agents, each by PID (checking the PID still names the same process).
- Every job gets a hard deadline: a hang becomes a failed test, never a stuck suite.
- the store keeps a closed rendezvous until it restarts: every job needs a fresh rdzv id.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jobs.elastic.rendezvous import BACKEND
from jobs.elastic.store_server import READY as STORE_READY

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- processes, by PID ------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: [state, ppid, ..., starttime at 19]."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


@dataclass(frozen=True)
class ProcessId:
    """A PID plus its start time, so a recycled PID is never mistaken for our process."""

    pid: int
    start_time: str

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        fields = _stat_fields(pid)
        return cls(pid, fields[19]) if fields else None

    def is_alive(self) -> bool:
        fields = _stat_fields(self.pid)
        return bool(fields) and fields[19] == self.start_time and fields[0] != "Z"

    def kill(self) -> None:
        if self.is_alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def children_of(pid: int) -> list[int]:
    children = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:  # the process ended between being found and being read
        return []
    for task in tasks:
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return children


def worker_rank(pid: int) -> int | None:
    """The RANK torchrun gave a worker process (from its environment), None for another process."""
    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ranks = [entry.split(b"=", 1)[1] for entry in environment if entry.startswith(b"RANK=")]
    return int(ranks[0]) if ranks else None


def descendants_of(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        kids = [kid for parent in frontier for kid in children_of(parent)]
        found += kids
        frontier = kids
    return found


# --- the rendezvous store ---------------------------------------------------------------------


# jobs.elastic.store_server, its modules loaded, started once the file named first exists.
GATED_STORE = """
import pathlib, sys, time
from jobs import cli
from jobs.elastic import store_server
gate = pathlib.Path(sys.argv.pop(1))
while not gate.exists():
    time.sleep(0.02)
cli.run(store_server.main, "jobs.elastic.store_server", clean_up_on_sigterm=False)
"""


# A new agent whose Python and torch are loaded already (a pod whose image is on its node): it runs
# jobs.elastic.torchrun with the arguments after the file named first, once that file exists.
GATED_AGENT = """
import pathlib, sys, time
from jobs.elastic import torchrun
gate = pathlib.Path(sys.argv[1])
while not gate.exists():
    time.sleep(0.02)
sys.exit(torchrun.main(sys.argv[2:]))
"""


def gated_agent_command(gate: Path, torchrun_args: Sequence[str]) -> list[str]:
    return [sys.executable, "-c", GATED_AGENT, str(gate), *torchrun_args]


class PortTaken(RuntimeError):
    """Another process bound the port between our probe and the store's bind."""


class StoreServer:
    """The rendezvous store as its pod runs it (`python -m jobs.elastic.store_server`), on 127.0.0.1.

    Its port is chosen once (free when probed) and kept across restarts, as the store's Service
    keeps its address when the pod is replaced; a restarted store is empty, as a new pod is."""

    def __init__(self, workdir: Path, port: int = 0):
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        self.starts = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60, attempts: int = 3) -> StoreServer:
        """Start the store and wait until it listens; a port probed free can be taken before it
        binds (the pytest process beside this one starts servers too): then it is started again on
        a fresh port."""
        for _ in range(attempts - 1):
            try:
                return self._start_once(timeout)
            except PortTaken:
                self.port = free_port()
        return self._start_once(timeout)

    def launch(self, gate: Path | None = None) -> StoreServer:
        """Start the store's process and return at once (Python and torch take seconds to load on a
        busy machine, as in a new pod): `is_ready()` says when it listens. With a `gate`, the process
        loads them and waits for that file before it serves: a fault injection can then choose the
        moment the store is back, whatever the machine's load."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.log_path = self.workdir / f"store-{self.starts}.log"
        program = ["-c", GATED_STORE, str(gate)] if gate else ["-m", "jobs.elastic.store_server"]
        with open(self.log_path, "wb") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, *program, "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
                env=agent_environment(),
            )  # fmt: skip
        return self

    def is_ready(self) -> bool:
        """Listening: its one line is in its log. Raises if it exited instead."""
        log = self.log_path.read_text(errors="replace")
        if f"{STORE_READY} 127.0.0.1:{self.port}" in log:
            return True
        if self.process.poll() is not None:
            if "Address already in use" in log:  # strerror of EADDRINUSE, in the store's one-line error
                raise PortTaken(f"the store could not bind {self.endpoint}")
            raise RuntimeError(f"the store exited with {self.process.returncode}: {log[-2000:]}")
        return False

    def _start_once(self, timeout: float) -> StoreServer:
        self.launch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.is_ready():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the store did not listen on {self.endpoint} within {timeout} s")

    def kill(self) -> None:
        """SIGKILL, as an OOM kill or a lost node ends the store's pod (by PID: exactly this process)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def pause(self, timeout: float = 30) -> None:
        """SIGSTOP, as a frozen or cut-off pod stalls the store: it keeps its data and answers nothing.

        Returns once every thread of the store has stopped. os.kill() returns before that: Linux
        hands SIGSTOP to one thread, and the others stop only once that thread has run (the group
        stop of kernel/signal.c), so on a busy machine the store's server thread answered calls made
        after os.kill() returned (measured: a compare_set answered in 0.000 s, the flaky heartbeat
        test). If the wait fails, the store is continued, so that the tests after it find it serving."""
        if self.process.poll() is not None:  # reaped: its PID may be another process's now
            raise RuntimeError(f"the store exited with {self.process.returncode} before it could be stopped")
        os.kill(self.process.pid, signal.SIGSTOP)  # by PID: exactly this process
        try:
            deadline = time.monotonic() + timeout
            while True:
                states = thread_states(self.process.pid)
                if not states or any(state in "ZX" for state in states):
                    raise RuntimeError(f"the store exited while it was being stopped (its threads: {states})")
                if all(state in "Tt" for state in states):  # t: stopped under a tracer (strace, gdb)
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the store's threads did not all stop within {timeout} s: {states}")
                time.sleep(0.01)
        except BaseException:
            self.resume()
            raise

    def resume(self) -> None:
        """SIGCONT: the stalled store answers again, with the data it had."""
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self, timeout: float = 60, wait: bool = True, gate: Path | None = None) -> StoreServer:
        """Start the store again on the same address, as a rescheduled store pod behind the same
        Service: empty. Same port, so a port taken in between fails the restart (no silent move).
        `wait=False`: return once it is started, not listening yet (see `is_ready` and `launch`)."""
        self.stop()
        return self._start_once(timeout) if wait else self.launch(gate)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()  # by PID: Popen signals exactly this process
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of a process (proc(5): the third field of /proc/PID/task/TID/stat;
    "T" is stopped by a signal, "t" stopped under a tracer, "Z" and "X" gone)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile (ESRCH between open and read)
            continue
        states.append(text.rsplit(")", 1)[1].split()[0])  # the name in parentheses may hold spaces
    return states


# --- torchrun agents --------------------------------------------------------------------------


def cluster_style_torchrun_flags(
    store_endpoint: str, run_name: str, max_restarts: int = 3, nnodes: str = "1:2"
) -> list[str]:
    """torchrun flags in the shape the ElasticJob produces on the cluster: the four the archived
    controller prepends (its --rdzv_backend=etcd included), then the template's, whose later
    --rdzv_backend and --rdzv_id win (argparse keeps the last). A fresh hash in the id: the store
    keeps a finished rendezvous (closed) until it restarts."""
    unique = uuid.uuid4().hex[:8]
    return [
        "--rdzv_backend=etcd", f"--rdzv_endpoint={store_endpoint}", f"--rdzv_id=train-{run_name}", f"--nnodes={nnodes}",
        f"--rdzv_backend={BACKEND}", "--nproc_per_node=1", f"--max_restarts={max_restarts}", "--local_addr=127.0.0.1",
        f"--rdzv_id={run_name}-{unique}",
    ]  # fmt: skip


def torchrun_command(torchrun_flags: Sequence[str], module: str, module_args: Sequence[str]) -> list[str]:
    """Plain torchrun (torch.distributed.run): our backend through its `torchrun.handlers` entry point."""
    return [sys.executable, "-m", "torch.distributed.run", *torchrun_flags, "-m", module, *module_args]


def agent_environment(**overrides: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
        # Two workers share this machine's 2 cores: one thread each avoids oversubscription.
        OMP_NUM_THREADS="1",
    )
    environment.update(overrides)
    return environment


@dataclass
class AgentResult:
    returncode: int | None  # None: still running at the deadline, then killed
    log: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


@dataclass
class TorchrunJob:
    """Several torchrun agents forming one elastic job (each agent plays one node)."""

    name: str
    commands: list[list[str]]
    log_dir: Path
    environment: dict[str, str] = field(default_factory=agent_environment)
    agents: list[subprocess.Popen] = field(default_factory=list)
    seen: set[ProcessId] = field(default_factory=set)  # every descendant ever observed
    started_at: float = 0.0
    finished_at: float | None = None

    def start(self) -> TorchrunJob:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.started_at = time.monotonic()
        for command in list(self.commands):
            self._launch(command)
        return self

    def add_agent(self, command: list[str]) -> int:
        """Start one more agent while the job runs (a recreated pod); returns its index."""
        self.commands.append(command)
        return self._launch(command)

    def _launch(self, command: list[str]) -> int:
        index = len(self.agents)
        with open(self.log_path(index), "wb") as log_file:
            self.agents.append(
                subprocess.Popen(
                    command,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=REPO_ROOT,
                    env=self.environment,
                )  # fmt: skip
            )
        return index

    def log_path(self, index: int) -> Path:
        return self.log_dir / f"{self.name}-agent{index}.log"

    def record_descendants(self) -> None:
        for agent in self.agents:
            for pid in descendants_of(agent.pid):
                process = ProcessId.of(pid)
                if process:
                    self.seen.add(process)

    def worker_pids(self, agent_index: int) -> list[int]:
        """The agent's live workers (its direct children)."""
        return children_of(self.agents[agent_index].pid)

    def is_finished(self) -> bool:
        done = all(agent.poll() is not None for agent in self.agents)
        if done and self.finished_at is None:
            self.finished_at = time.monotonic()
        return done

    @property
    def seconds(self) -> float:
        return (self.finished_at or time.monotonic()) - self.started_at

    def kill_everything(self) -> None:
        """Workers first (they outlive their agent), then agents; all by PID."""
        self.record_descendants()
        for process in self.seen:
            process.kill()
        for agent in self.agents:
            if agent.poll() is None:
                agent.kill()
            agent.wait(timeout=10)

    def results(self) -> list[AgentResult]:
        return [
            AgentResult(agent.returncode, self.log_path(index).read_text(errors="replace"))
            for index, agent in enumerate(self.agents)
        ]


def run_torchrun_jobs(
    jobs: Sequence[TorchrunJob],
    deadline_seconds: float,
    on_tick: Callable[[], None] | None = None,
    tick_seconds: float = 0.1,
) -> None:
    """Start the jobs together and wait until all agents exit or the deadline passes;
    `on_tick` runs every tick (fault injection). Whatever happens, everything is killed."""
    try:
        for job in jobs:
            job.start()
        deadline = time.monotonic() + deadline_seconds
        while time.monotonic() < deadline:
            for job in jobs:
                job.record_descendants()
            if on_tick:
                on_tick()
            if all(job.is_finished() for job in jobs):
                break
            time.sleep(tick_seconds)
    finally:
        for job in jobs:
            job.kill_everything()


def run_torchrun_agents(
    commands: Sequence[Sequence[str]], log_dir: Path, deadline_seconds: float, name: str = "job", **environment: str
) -> list[AgentResult]:
    """Run one job of N agents with a hard deadline; returns each agent's exit code and log."""
    job = TorchrunJob(name, [list(command) for command in commands], Path(log_dir), agent_environment(**environment))
    run_torchrun_jobs([job], deadline_seconds)
    return job.results()
