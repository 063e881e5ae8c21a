"""The one command, `elastic-training`: every subcommand reachable, its help, its exit codes, and `up`/`destroy`
running the Pulumi CLI exactly as scripts/up.sh did (synth, preflight, state directory, select, up)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from infra.cli import deploy, local
from infra.cli.main import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


def fake_pulumi(tmp_path: Path, exit_code: int = 0) -> Path:
    """A `pulumi` on PATH that records its arguments and its working directory."""
    log = tmp_path / "pulumi.log"
    tool = tmp_path / "bin" / "pulumi"
    tool.parent.mkdir()
    tool.write_text(f'#!/usr/bin/env bash\necho "$PWD pulumi $*" >> "{log}"\nexit {exit_code}\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return log


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the project's stacks in a root of its own, with the fake pulumi first on PATH."""
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    for stack in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        (root / "stacks" / stack.name).write_text(stack.read_text())
    log = fake_pulumi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    return root, log


def test_the_console_script_is_declared_and_runs_the_dispatcher():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"elastic-training": "infra.cli.main:run"}
    result = subprocess.run([sys.executable, "-m", "infra.cli", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0
    for name in COMMANDS:
        assert f"  {name} " in result.stdout, name
    assert "exit status:" in result.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"usage: elastic-training {name}" in capsys.readouterr().out


def test_unknown_command_is_one_line(capsys):
    assert main(["deploy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown command 'deploy'" in err and "synth" in err


def test_no_command_prints_the_overview_and_fails(capsys):
    assert main([]) == 2
    assert "commands:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "preflight_exit, pulumi_runs", [(1, False), (2, False), (0, True)], ids=["check-failed", "bad-config", "all-passed"]
)
def test_up_checks_offline_then_preflight_then_runs_pulumi(project, capsys, preflight_exit, pulumi_runs):
    root, log = project
    asked = []

    def preflight(argv):
        asked.append(argv)
        return preflight_exit

    status = deploy.up(["dev"], root=root, preflight=preflight)
    assert asked == [["dev"]]
    assert (root / ".synth" / "dev" / "resources.json").is_file(), "synth renders the stack before preflight"
    if pulumi_runs:
        assert status == 0
        assert (root / ".pulumi-state").is_dir(), "the file backend's directory exists before pulumi runs"
        assert log.read_text().splitlines() == [
            f"{root} pulumi stack select --create dev",
            f"{root} pulumi up --stack dev",
        ]
    else:
        assert status == preflight_exit and not log.exists()
        assert not (root / ".pulumi-state").exists()
        if preflight_exit == 1:
            assert "preflight failed for stack dev" in capsys.readouterr().err


def test_up_stops_on_bad_config_before_preflight(project, capsys, monkeypatch):
    root, log = project
    (root / "stacks" / "Pulumi.dev.yaml").write_text(
        "config:\n  elastic-training:nodeMaxCount: zero\n  aws:region: us-west-2\n"
    )
    assert deploy.up(["dev"], root=root, preflight=lambda argv: pytest.fail("preflight ran")) == 2
    assert "nodeMaxCount" in capsys.readouterr().err and not log.exists()


def test_up_returns_pulumis_own_failure(project, tmp_path):
    root, _ = project
    (tmp_path / "bin" / "pulumi").write_text("#!/usr/bin/env bash\n[ \"$1\" = up ] && exit 255\nexit 0\n")
    assert deploy.up(["dev"], root=root, preflight=lambda argv: 0) == 255


@pytest.mark.parametrize("command", ["up", "destroy"])
def test_a_missing_stack_names_the_stacks_there_are(project, capsys, command):
    root, log = project
    assert getattr(deploy, command)(["nope"], root=root) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stacks/Pulumi.nope.yaml" in err and "dev gpu local smoke" in err
    assert not log.exists()


def test_without_the_pulumi_cli_up_says_so_in_one_line(project, capsys, monkeypatch):
    root, _ = project
    monkeypatch.setenv("PATH", "/nonexistent")
    assert deploy.up(["dev"], root=root, preflight=lambda argv: pytest.fail("preflight ran")) == 2
    assert "Pulumi CLI is not on PATH" in capsys.readouterr().err


def test_destroy_selects_the_existing_stack_and_destroys_it(project):
    root, log = project
    assert deploy.destroy(["smoke"], root=root) == 0
    assert log.read_text().splitlines() == [f"{root} pulumi stack select smoke", f"{root} pulumi destroy --stack smoke"]


def test_local_runs_prepare_train_evaluate_with_the_jobs_own_command_lines():
    prepare, train, evaluate = local.steps(cifar10=False, epochs=None, python="py")
    assert prepare == ["py", "-m", "jobs.data.prepare", "--dest", "data/synthetic", "--synthetic", "100"]
    assert train[:6] == ["py", "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2"]
    assert train[6:] == [
        "-m",
        "jobs.training.train",
        "--data",
        "data/synthetic/cifar-10-batches-py",
        "--run-dir",
        "runs/synthetic/run-1",
        "--epochs",
        "3",
        "--batch-size",
        "50",
    ]
    assert evaluate[-2:] == ["--metrics-out", "runs/synthetic/run-1/metrics.json"]
    cifar = local.steps(cifar10=True, epochs=2, python="py")
    assert cifar[0][-1] == "data/cifar10" and cifar[1][cifar[1].index("--epochs") + 1] == "2"


def test_the_jobs_accept_the_local_command_lines():
    """Every option `local` passes is one the jobs' own parsers take (no subprocess needed to know)."""
    from jobs.results import evaluate
    from jobs.data import prepare
    from jobs.training import train

    for (_, _, _module, *args), parser in zip(
        [s for s in local.steps(False, None, "py") if s[2] != "torch.distributed.run"],
        [prepare.build_parser(), evaluate.build_parser()],
    ):
        parser.parse_args(args)
    train_args = local.steps(False, None, "py")[1]
    train.build_parser().parse_args(train_args[train_args.index("jobs.training.train") + 1 :])


@pytest.mark.parametrize(
    "argv, message", [(["--epochs", "0"], "--epochs 0 is invalid"), (["--gpu"], "unrecognized arguments")]
)
def test_local_bad_input_is_one_line(argv, message, capsys):
    assert local.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
