"""The torchrun command line of the worker pod our controller's Indexed Job creates from our rendered
ElasticJob (tests/worker_pods.py, through controller/render.py: its injected arguments in front of ours) runs
here: 2 agents, our rendezvous on the real store, a finished model. Which backend, rendezvous id and node range torchrun
really uses is read through torchrun's own argument parser.

Only what the cluster itself provides is substituted: the kubelet expands $(POD_IP), the store's
Service name resolves to our local store, the EFS claim is mounted at /efs-shared. (The archived
controller's --rdzv_backend=etcd prefix is run in tests/jobs/test_torchrun_entry.py.)
"""

from __future__ import annotations

import sys
import uuid

from torch.distributed.run import get_args_parser
from torchrun_harness import run_torchrun_agents

from worker_pods import command_line, worker_pod
from jobs.elastic import agent, rendezvous
from infra.config import load_settings
from infra.specs import workloads as specs
from infra.specs.elastic import rendezvous_endpoint
from infra.config.stack_file import read_stack_file

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "0" * 64


def local_command(command: list[str], store_endpoint: str, mount: str) -> list[str]:
    """The pod's command line as this machine runs it."""
    assert command[:3] == ["python", "-m", "jobs.elastic.agent"]  # the image's python; here, this venv's
    local = [sys.executable, "-m", "jobs.elastic.agent"]
    for arg in command[3:]:
        arg = arg.replace("$(POD_IP)", "127.0.0.1").replace(rendezvous_endpoint(), store_endpoint)
        local.append(arg.replace(specs.MOUNT_PATH, mount))
    return local


def test_rendered_elasticjob_command_trains_with_two_agents(store_server, tiny_cifar, tmp_path):
    run_id = f"render-{uuid.uuid4().hex[:8]}"  # the store keeps a closed rendezvous until it restarts
    raw = {
        **read_stack_file("dev"),
        "elastic-training:runId": run_id,
        "elastic-training:epochs": "2",
        "elastic-training:batchSize": "20",
    }
    settings = load_settings(raw, "dev")
    rdzv_id = specs.rendezvous_id(settings, IMAGE)
    elasticjob = specs.elastic_job(settings, IMAGE, f"--rdzv_id={rdzv_id}")
    command = command_line(worker_pod(elasticjob), specs.WORKER_CONTAINER)

    # What torchrun makes of it: jobs.elastic.agent hands every argument on to jobs.elastic.torchrun, which parses
    # them with torchrun's own parser; the controller's --rdzv_id=<job name>
    # come first, ours later, and argparse keeps the last; --nnodes is the controller's min:max.
    assert command[:3] == ["python", "-m", "jobs.elastic.agent"]
    torchrun_argv = agent.torchrun_command(command[3:])
    assert torchrun_argv[1:3] == ["-m", "jobs.elastic.torchrun"]
    parsed = get_args_parser().parse_args(torchrun_argv[3:])
    assert parsed.rdzv_id == rdzv_id != elasticjob["metadata"]["name"]
    assert parsed.nnodes == f"{settings.min_workers}:{settings.max_workers}"
    assert (parsed.rdzv_backend, parsed.rdzv_endpoint) == (rendezvous.BACKEND, rendezvous_endpoint())

    mount = tmp_path / "efs-shared"
    (mount / "data").mkdir(parents=True)
    (mount / "data" / "cifar-10-batches-py").symlink_to(tiny_cifar)
    local = local_command(command, store_server.endpoint, str(mount))
    backends = [arg for arg in local if arg.startswith("--rdzv_backend=")]
    # Our controller prepends only where and who (controller/render.py); the template names the backend.
    assert backends == [f"--rdzv_backend={rendezvous.BACKEND}"]
    assert f"--rdzv_endpoint={store_server.endpoint}" in local

    results = run_torchrun_agents([local, local], tmp_path / "logs", deadline_seconds=150, name=run_id, LOGLEVEL="INFO")
    assert [r.returncode for r in results] == [0, 0], "\n".join(r.log[-3000:] for r in results)
    run_dir = mount / "runs" / run_id
    assert (run_dir / "model.pt").is_file()
    # both agents joined one rendezvous: a world of 2 (the jobs' log lines carry "rank R/W")
    logs = "\n".join(r.log for r in results)
    assert "rank 0/2" in logs and "rank 1/2" in logs
    # jobs.elastic.rendezvous's handler ran (torchrun logs its config)
    assert f"rdzv_backend             : {rendezvous.BACKEND}" in logs
