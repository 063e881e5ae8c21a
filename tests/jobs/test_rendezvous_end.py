"""How a rendezvous ends, with real torchrun agents (jobs.elastic.agent) on the real rendezvous store.

torch 2.13.0 closes the rendezvous whenever an agent's run ends, failed or finished
(launcher/api.py `launch_agent`; upstream-facts-4 fact 1), and a closed rendezvous is one bool
(fact 3). Before this was fixed, a replacement that found the rendezvous of a FAILED run closed
exited 0 ("arrived after the end"), so a failed run could end Succeeded, and a worker retried by
the Job while its group still trained could never rejoin. Now the rendezvous closes only when a
run finished, with a record saying so (jobs/elastic/rendezvous.py RunEnd), and an agent whose
workers failed leaves it open.
"""

from __future__ import annotations

import pickle
import sys
import time
from base64 import b64decode
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import create_backend as torch_c10d_backend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler as torch_create_handler
from torchrun_harness import TorchrunJob, agent_environment, cluster_style_torchrun_flags, run_torchrun_jobs

from jobs import exit_codes
from jobs.elastic import rendezvous

# One worker script for every agent; what it does comes from its arguments (each agent's own):
#   fail              -> exit 1 at once (a bad GPU, a crash)
#   run RELEASE       -> "worker up", then exit 0 once the file RELEASE exists (bounded)
WORKER = """
import os, pathlib, sys, time
mode = sys.argv[1]
print(f"worker up rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}", flush=True)
if mode == "fail":
    sys.exit(1)
release = pathlib.Path(sys.argv[2])
deadline = time.monotonic() + 150
while not release.exists() and time.monotonic() < deadline:
    time.sleep(0.1)
sys.exit(0 if release.exists() else 5)
"""


def agent_command(flags: list[str], script: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "jobs.elastic.agent", *flags, str(script), *args]


def said(log: str, prefix: str = "jobs.elastic.torchrun:") -> list[str]:
    return [line for line in log.splitlines() if line.startswith(prefix)]


def wait_for(what: str, check, job: TorchrunJob, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.record_descendants()
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout} s: " + "\n---\n".join(r.log[-1500:] for r in job.results()))


def test_the_retried_workers_of_a_failed_run_rejoin_it_and_finish(store_server, tmp_path):
    """The issue's reproduction: two agents on --nnodes=2:2 --max_restarts=0 whose workers exit 1,
    then the Job's retries of both indexes with the same rendezvous id. Before: each retry found
    the rendezvous closed and exited 0 at once, without running a worker (the Job then counted two
    succeeded indexes: Succeeded). Now they form a new round, train, and exit 0 because they finished."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    release = tmp_path / "release"
    release.write_text("")
    flags = cluster_style_torchrun_flags(store_server.endpoint, "failed", max_restarts=0, nnodes="2:2")
    failing = TorchrunJob("first", [agent_command(flags, script, "fail") for _ in range(2)], tmp_path / "first")
    run_torchrun_jobs([failing], deadline_seconds=150)
    first = failing.results()
    assert [r.returncode for r in first] == [exit_codes.FAILURE] * 2, [r.log[-2000:] for r in first]

    retries = TorchrunJob(
        "retry", [agent_command(flags, script, "run", str(release)) for _ in range(2)], tmp_path / "retry"
    )
    run_torchrun_jobs([retries], deadline_seconds=150)
    second = retries.results()
    assert [r.returncode for r in second] == [0, 0], [r.log[-2000:] for r in second]
    for result in second:
        assert "worker up rank" in result.log and "of 2" in result.log, result.log[
            -2000:
        ]  # they trained, as a group of 2
        assert not said(result.log), result.log[-2000:]  # no "arrived after the end"


def test_a_lone_replacement_of_a_failed_run_waits_for_its_group_and_never_exits_0(store_server, tmp_path):
    """The same failed run, and a single agent with its rendezvous id (the Job retried one index; the
    other's retry is not there yet). Before: exit 0 at once ("the group it was to join has
    finished"). Now it joins and waits for the minimum; with nobody coming it times out: exit 1, a
    failure the Job counts, never a success."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    flags = cluster_style_torchrun_flags(store_server.endpoint, "lone", max_restarts=0, nnodes="2:2")
    failing = TorchrunJob("first", [agent_command(flags, script, "fail") for _ in range(2)], tmp_path / "first")
    run_torchrun_jobs([failing], deadline_seconds=150)
    assert [r.returncode for r in failing.results()] == [exit_codes.FAILURE] * 2

    lone = TorchrunJob(
        "lone",
        [agent_command([*flags, "--rdzv_conf=join_timeout=10"], script, "run", str(tmp_path / "x"))],
        tmp_path / "lone",
    )
    started = time.monotonic()
    run_torchrun_jobs([lone], deadline_seconds=150)
    (result,) = lone.results()
    assert result.returncode == exit_codes.FAILURE, result.log[-2000:]
    assert time.monotonic() - started >= 10, result.log[-2000:]  # it waited out its join timeout
    assert "worker up" not in result.log
    assert not any("exiting 0" in line for line in said(result.log)), result.log[-2000:]


def test_a_worker_retried_while_its_group_trains_rejoins_it(store_server, tmp_path):
    """--nnodes=1:2: agent A's worker fails past --max_restarts (0) while B's trains on. Before: A
    closed the rendezvous as it exited, and A's retry (the Job's, within backoffLimitPerIndex)
    found it closed and exited 0 without a worker: B finished alone. Now A leaves the rendezvous
    open, B trains on, and A's retry joins: B re-forms the group at 2 and both finish."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    release = tmp_path / "release"
    flags = cluster_style_torchrun_flags(store_server.endpoint, "rejoin", max_restarts=0, nnodes="1:2")
    job = TorchrunJob(
        "rejoin",
        [agent_command(flags, script, "fail"), agent_command(flags, script, "run", str(release))],
        tmp_path / "logs",
    )
    try:
        job.start()
        wait_for("agent A ended", lambda: job.agents[0].poll() is not None, job)
        assert job.agents[0].returncode == exit_codes.FAILURE, job.results()[0].log[-2000:]
        assert job.agents[1].poll() is None, job.results()[1].log[-2000:]  # B trains on
        retry = job.add_agent(agent_command(flags, script, "run", str(release)))
        wait_for(
            "A's retry runs a worker in a group of 2",
            lambda: "of 2" in job.log_path(retry).read_text(errors="replace") or job.agents[retry].poll() is not None,
            job,
        )
        release.write_text("")
        wait_for("every agent ended", job.is_finished, job)
    finally:
        job.kill_everything()
    results = job.results()
    assert [r.returncode for r in results] == [exit_codes.FAILURE, 0, 0], [r.log[-2000:] for r in results]
    assert "worker up rank" in results[2].log and "of 2" in results[2].log, results[2].log[-2000:]
    assert not said(results[2].log), results[2].log[-2000:]
    assert results[1].log.count("worker up rank") >= 2, results[1].log[-2000:]  # B re-formed the group


def test_a_replacement_that_finds_a_rendezvous_closed_without_a_finished_record_exits_3(store_server, tmp_path):
    """A rendezvous closed by torch's own handler (an agent of another launcher, or of an image from
    before this fix, closing after a failure, or `set_closed` by hand) carries no record that the run
    finished. Before: exit 0. Now one line and exit 3 (jobs/exit_codes.py: a retry cannot help, the
    closed rendezvous never opens again; the Job fails the index at once, under podFailurePolicy
    FailIndex, instead of retrying it with growing delays), and the termination message says why."""
    run_id = f"foreign-{time.time_ns()}"
    params = RendezvousParameters(
        rendezvous.BACKEND,
        store_server.endpoint,
        run_id,
        min_nodes=1,
        max_nodes=1,
        local_addr="127.0.0.1",
        is_host=False,
        last_call_timeout=1,
    )
    backend, client = torch_c10d_backend(params)
    foreign = torch_create_handler(client, backend, params)
    foreign.next_rendezvous()
    assert foreign.shutdown() is True  # torch's close: what launch_agent does after a failed group
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    termination_log = tmp_path / "termination-log"
    termination_log.write_text("")
    flags = [
        f"--rdzv_endpoint={store_server.endpoint}",
        f"--rdzv_id={run_id}",
        "--nnodes=1:2",
        f"--rdzv_backend={rendezvous.BACKEND}",
        "--nproc_per_node=1",
        "--local_addr=127.0.0.1",
    ]
    late = TorchrunJob(
        "late",
        [agent_command(flags, script, "run", str(tmp_path / "x"))],
        tmp_path / "late",
        agent_environment(JOBS_TERMINATION_LOG=str(termination_log)),
    )
    run_torchrun_jobs([late], deadline_seconds=120)
    (result,) = late.results()
    assert result.returncode == exit_codes.CANNOT_CONTINUE, result.log[-2000:]
    (line,) = said(result.log)
    assert f"the rendezvous {run_id} is closed, and no agent recorded that its run finished" in line, line
    assert line.endswith(f"exiting {exit_codes.CANNOT_CONTINUE}"), line
    assert "Traceback" not in result.log and "worker up" not in result.log
    assert termination_log.read_text().strip() == line


def test_a_finished_run_records_who_finished_it(store_server, tmp_path):
    """The record a late replacement reads: written by the agent whose run finished, before it closes."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    release = tmp_path / "release"
    release.write_text("")
    flags = cluster_style_torchrun_flags(store_server.endpoint, "record", nnodes="1:2")
    job = TorchrunJob("record", [agent_command(flags, script, "run", str(release))], tmp_path / "logs")
    run_torchrun_jobs([job], deadline_seconds=120)
    assert job.results()[0].returncode == 0, job.results()[0].log[-2000:]
    run_id = flags[-1].split("=", 1)[1]
    client = dist.TCPStore("127.0.0.1", store_server.port, is_master=False, timeout=timedelta(seconds=5))
    end = rendezvous.RunEnd.parse(client.get(rendezvous.RunEnd.key(run_id)))
    assert end is not None and end.outcome == rendezvous.FINISHED and end.round == 0, end  # its first round
    assert end.node.startswith("127.0.0.1_"), end  # torch's node descriptor: address_pid_localid


def stored_state(port: int, run_id: str):
    """The round's state in the store now, read by a client of our own (None: no state)."""
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5))
    value = client.compare_set(f"torch.rendezvous.{run_id}", rendezvous.MISSING, rendezvous.MISSING)
    return None if value == rendezvous.MISSING.encode() else pickle.loads(b64decode(value))


def test_a_spare_of_a_finished_run_exits_0(store_server, tmp_path):
    """Review rdzv-1 item 4, its reproduction: --nnodes=1:1, agent A trains, agent B comes and waits
    as a spare (torch's redundancy list); A finishes and closes the rendezvous. Before: B exited 3
    (SpareNotAdmitted), which fails its index under podFailurePolicy FailIndex beside A's succeeded
    one. Now B reads the run's RunEnd and exits 0 with one line: the run it waited for finished."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    release = tmp_path / "release"
    flags = cluster_style_torchrun_flags(store_server.endpoint, "spare", max_restarts=0, nnodes="1:1")
    run_id = flags[-1].split("=", 1)[1]
    job = TorchrunJob("spare", [agent_command(flags, script, "run", str(release))], tmp_path / "logs")
    try:
        job.start()
        wait_for("A's worker runs", lambda: "worker up rank" in job.log_path(0).read_text(errors="replace"), job)
        job.add_agent(agent_command(flags, script, "run", str(tmp_path / "never")))
        wait_for("B waits as a spare", lambda: len(stored_state(store_server.port, run_id).redundancy_list) == 1, job)
        release.write_text("")
        wait_for("every agent ended", job.is_finished, job)
    finally:
        job.kill_everything()
    results = job.results()
    assert [r.returncode for r in results] == [0, 0], [r.log[-2000:] for r in results]
    assert "worker up" not in results[1].log, results[1].log[-2000:]
    (line,) = said(results[1].log)
    assert "waited as a spare" in line and "the group finished" in line and line.endswith("exiting 0"), line


def test_a_spare_of_a_rendezvous_closed_without_a_finished_record_exits_3(store_server, tmp_path):
    """The other side of item 4: a spare whose rendezvous torch's own handler closed (no RunEnd: the
    run may have failed) still ends with one line and exit 3, never 0."""
    run_id = f"foreign-spare-{time.time_ns()}"
    params = RendezvousParameters(
        rendezvous.BACKEND,
        store_server.endpoint,
        run_id,
        min_nodes=1,
        max_nodes=1,
        local_addr="127.0.0.1",
        is_host=False,
        last_call_timeout=1,
    )
    backend, client = torch_c10d_backend(params)
    foreign = torch_create_handler(client, backend, params)
    foreign.next_rendezvous()  # its round is full at 1; its keep-alive thread heartbeats meanwhile
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    flags = [
        f"--rdzv_endpoint={store_server.endpoint}",
        f"--rdzv_id={run_id}",
        "--nnodes=1:1",
        f"--rdzv_backend={rendezvous.BACKEND}",
        "--nproc_per_node=1",
        "--local_addr=127.0.0.1",
    ]
    job = TorchrunJob("spare", [agent_command(flags, script, "run", str(tmp_path / "x"))], tmp_path / "logs")
    try:
        job.start()
        wait_for(
            "the agent waits as a spare", lambda: len(stored_state(store_server.port, run_id).redundancy_list) == 1, job
        )
        assert foreign.shutdown() is True  # torch's close, as after a failed group: no RunEnd
        wait_for("the spare ended", job.is_finished, job)
    finally:
        foreign._stop_heartbeats()
        job.kill_everything()
    (result,) = job.results()
    assert result.returncode == exit_codes.CANNOT_CONTINUE, result.log[-2000:]
    (line,) = said(result.log)
    assert "waited as a spare" in line and line.endswith(f"exiting {exit_codes.CANNOT_CONTINUE}"), line
