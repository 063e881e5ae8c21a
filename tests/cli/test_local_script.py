"""`elastic-training local --script/--module` (issue 38): its command line, one line per mistake; the agents
it starts are the pods' (tests/examples runs it for real, with a worker killed mid-run)."""

from __future__ import annotations

import pytest

from elastic_training import run_directory
from infra.cli import local, local_script
from infra.specs.elastic import RENDEZVOUS_BACKEND


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--nproc", "2"], "local: --nproc and script arguments after `--` need --script or --module\n"),
        (["--", "--steps", "5"], "local: --nproc and script arguments after `--` need --script or --module\n"),
        (
            ["--module", "my train"],
            "local: --module 'my train' is invalid: a Python module name such as mytrain or pkg.train\n",
        ),
        (["--script", "no-such.py"], "local: --script no-such.py: no such file\n"),
        (["--module", "m", "--nproc", "0"], "local: --nproc 0 is invalid: must be a whole number from 1 to 16\n"),
        (["--module", "m", "--nproc", "two"], "local: --nproc 'two' is invalid: must be a whole number from 1 to 16\n"),
        (
            ["--module", "m", "--epochs", "2"],
            "local: --cifar10 and --epochs are the CIFAR-10 pipeline's; pass your script's own options after `--`\n",
        ),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, line):
    monkeypatch.chdir(tmp_path)
    assert local.main(argv, root=tmp_path) == 2
    assert capsys.readouterr().err == line
    assert not (tmp_path / "runs").exists()


def test_script_and_module_exclude_each_other(tmp_path, capsys):
    assert local.main(["--script", "a.py", "--module", "b"], root=tmp_path) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_each_worker_is_an_agent_as_in_a_pod():
    command = local_script.agent_command(["-m", "mytrain", "--steps", "5"], 3, "127.0.0.1:5000", "rid", python="py")
    assert command[:3] == ["py", "-m", "jobs.elastic.agent"]
    assert f"--rdzv_backend={RENDEZVOUS_BACKEND}" in command and "--nnodes=3" in command
    assert "--nproc_per_node=1" in command
    assert command[-4:] == ["-m", "mytrain", "--steps", "5"]  # the user's command, unchanged, last


def test_workers_are_told_the_run_and_data_directories(tmp_path):
    environment = local_script.worker_environment(tmp_path / "run", tmp_path / "data")
    assert environment[run_directory.RUN_DIR_ENV] == str(tmp_path / "run")
    assert environment[run_directory.DATA_DIR_ENV] == str(tmp_path / "data")
