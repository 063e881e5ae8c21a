"""`elastic-training local --script PATH` / `--module NAME`: any torchrun script, run on this machine the
way the worker pods run it.

    elastic-training local --script train.py [--nproc 2] [-- SCRIPT_ARGS...]
    elastic-training local --module mytrain  [--nproc 2] [-- SCRIPT_ARGS...]

As in the pods: the rendezvous store (python -m jobs.elastic.store_server, on 127.0.0.1), and one agent per
worker (python -m jobs.elastic.agent: torchrun with our rendezvous backend, one process each, as a CPU pod
runs it), every worker with ELASTIC_TRAINING_RUN_DIR and ELASTIC_TRAINING_DATA_DIR in its environment. A
worker that dies is restarted by its agent and the group re-forms (up to MAX_RESTARTS times), as on the
cluster. Each call is a new run directory, runs/<name>/run-<n>/, printed first; `--run-id` goes back to one.

Exit status: the first agent's non-zero status (elastic_training.exit_codes), else 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from elastic_training import run_directory
from infra.cli.args import PROJECT_ROOT
from infra.specs.elastic import RENDEZVOUS_BACKEND

MAX_RESTARTS = 3  # the stacks' maxRestarts default (infra/config/keys.py)
STORE_START_SECONDS = 120  # torch's import on a busy 2-core machine


def target_name(script: str | None, module: str | None) -> str:
    """runs/<name>/: the script's file name without .py, or the module's name."""
    return Path(script).stem if script else str(module)


def agent_command(
    target: Sequence[str], nproc: int, endpoint: str, rdzv_id: str, python: str = sys.executable
) -> list[str]:
    """One worker's agent, with the flags the ElasticJob gives it on the cluster (infra/specs/workloads.py
    training_args; the controller prepends --rdzv_endpoint, --rdzv_id and --nnodes)."""
    return [
        python,
        "-m",
        "jobs.elastic.agent",
        f"--rdzv_endpoint={endpoint}",
        f"--rdzv_id={rdzv_id}",
        f"--nnodes={nproc}",
        f"--rdzv_backend={RENDEZVOUS_BACKEND}",
        "--nproc_per_node=1",
        f"--max_restarts={MAX_RESTARTS}",
        "--local_addr=127.0.0.1",
        *target,
    ]


def worker_environment(run_dir: Path, data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        run_directory.RUN_DIR_ENV: str(run_dir),
        run_directory.DATA_DIR_ENV: str(data_dir),
        # The agent and our rendezvous backend come from this checkout, wherever the script is.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
        # One thread per worker: N workers share this machine's cores (torchrun sets it for nproc > 1 too).
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


def start_store(python: str, environment: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """The rendezvous store on a free port of 127.0.0.1; returns it and its endpoint."""
    # Imported here: it imports torch, which `elastic-training` needs only to train.
    from jobs.elastic.store_server import READY as STORE_READY

    store = subprocess.Popen([python, "-m", "jobs.elastic.store_server", "--host=127.0.0.1", "--port=0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                             env=environment)  # fmt: skip
    assert store.stdout is not None
    for line in store.stdout:  # the READY line names the address: "... on 127.0.0.1:PORT"
        if line.startswith(STORE_READY):
            return store, line.split()[-1]
    store.wait()
    raise RuntimeError(f"the rendezvous store did not start (exit {store.returncode})")


def run(target: Sequence[str], name: str, nproc: int, run_id: str, root: Path, python: str = sys.executable) -> int:
    run_dir = (root / "runs" / name / run_id).resolve()
    data_dir = (root / "data" / name).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    print(f"local: run {run_id} in {run_dir}", file=sys.stderr, flush=True)
    environment = worker_environment(run_dir, data_dir)
    store, endpoint = start_store(python, environment)
    # A fresh id per call: the store keeps a finished rendezvous closed.
    rdzv_id = f"{name}-{run_id}-{uuid.uuid4().hex[:8]}"
    agents: list[subprocess.Popen] = []
    try:
        for _ in range(nproc):
            agents.append(subprocess.Popen(agent_command(target, nproc, endpoint, rdzv_id, python), cwd=Path.cwd(),
                                           env=environment, stdin=subprocess.DEVNULL))  # fmt: skip
        codes = [agent.wait() for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.terminate()
                agent.wait()
        store.terminate()
        store.wait()
    failed = [code for code in codes if code != 0]
    print(f"local: run {run_id} {'failed, exit ' + str(failed[0]) if failed else 'done'}: {run_dir}", file=sys.stderr,
          flush=True)  # fmt: skip
    return failed[0] if failed else 0
