"""Your own training on a stack (issue 38): trainingCommand, dataPrepCommand, testCommand, gateMetric,
minGate, imageContext. Rendered by the real synth; a malformed value is one line; the defaults render the
CIFAR-10 job unchanged (tests/specs/test_workloads.py's golden files)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from elastic_training import exit_codes, run_directory
from infra.config import ConfigError, load_settings
from infra.config.stack_file import apply_overrides, read_stack_file
from infra.specs import workloads
from synth_support import REPO, run_synth


def settings(stack: str = "dev", *overrides: str):
    return load_settings(apply_overrides(read_stack_file(stack), list(overrides)), stack)


def manifest(out, prefix: str) -> dict:
    (path,) = (out / "manifests").glob(f"{prefix}*")
    return yaml.safe_load(path.read_text())


def test_synth_renders_workers_that_run_exactly_the_training_command_under_our_agent(tmp_path):
    result = run_synth(tmp_path / "out", "local", 'trainingCommand=["python","-m","mytrain","--steps","5"]')
    assert result.returncode == 0, result.stderr
    job = manifest(tmp_path / "out", "elasticjob_")
    (worker,) = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert worker["command"] == ["python", "-m", "jobs.elastic.agent"]
    # torchrun's options, then the command (torchrun starts the interpreter, so "python" goes).
    assert worker["args"][-4:] == ["-m", "mytrain", "--steps", "5"]
    assert not any("jobs.training.train" in str(arg) for arg in worker["args"])
    environment = {variable["name"]: variable.get("value") for variable in worker["env"]}
    assert environment[run_directory.RUN_DIR_ENV] == workloads.run_dir("local-1")
    assert environment[run_directory.DATA_DIR_ENV] == workloads.DATA_ROOT


@pytest.mark.parametrize(
    "command, target",
    [
        (["python", "train.py", "--lr", "0.1"], ["train.py", "--lr", "0.1"]),
        (["-m", "pkg.train"], ["-m", "pkg.train"]),
        (["python3", "-m", "mytrain"], ["-m", "mytrain"]),
    ],
)
def test_the_command_torchrun_runs(command, target):
    assert workloads.training_target(settings("dev", f"trainingCommand={json.dumps(command)}")) == target


@pytest.mark.parametrize(
    "text",
    [
        '["python","-m"]',
        '["python"]',
        '["bash","-c","x"]',
        'python -m mytrain',
        '["python", 5]',
        '["python","-m","my train"]',
        '["python",""]',
    ],
)
def test_a_malformed_training_command_is_refused_with_one_line(tmp_path, text):
    result = run_synth(tmp_path / "out", "local", f"trainingCommand={text}")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: config elastic-training:trainingCommand="), result.stderr
    assert '["python", "-m", "mytrain", "--steps", "5"]' in lines[0]


def test_the_side_jobs_run_their_commands_and_the_test_job_gates_the_named_metric():
    stack = settings(
        "dev",
        'dataPrepCommand=["python","-m","myprep"]',
        'testCommand=["python","-m","mytest"]',
        "gateMetric=f1",
        "minGate=0.55",
    )
    prep = workloads.data_prep_job(stack, "img")["spec"]["template"]["spec"]["containers"][0]
    assert prep["command"] == ["python", "-m", "myprep"] and prep["args"] == []
    test = workloads.test_job(stack, "img")["spec"]["template"]["spec"]["containers"][0]
    assert test["command"] == ["python", "-m", "jobs.results.gate", "--metric", "f1", "--min", "0.55"]
    assert test["args"] == ["--", "python", "-m", "mytest"]
    assert {v["name"] for v in test["env"]} >= {run_directory.RUN_DIR_ENV, run_directory.DATA_DIR_ENV}


def test_min_gate_defaults_to_min_accuracy_so_todays_stacks_keep_their_gate():
    stack = settings("smoke")  # minAccuracy 0.3 there
    args = workloads.test_job(stack, "img")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--min-accuracy") + 1] == "0.3"
    args = workloads.test_job(settings("smoke", "minGate=0.45"), "img")["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    assert args[args.index("--min-accuracy") + 1] == "0.45"


@pytest.mark.parametrize(
    "overrides, key, allowed",
    [
        (["gateMetric=f1"], "gateMetric", "must be accuracy with the CIFAR-10 test command"),
        (["imageContext=examples/nowhere"], "imageContext", "must be a folder with a Dockerfile"),
        (["imageContext=../outside"], "imageContext", "a folder inside the project"),
        (["minGate=high"], "minGate", "must be a decimal number"),
        (['testCommand=["python",""]'], "testCommand", "a command as a JSON list of non-empty strings"),
    ],
)
def test_bad_own_training_values_name_the_key_and_what_is_allowed(overrides, key, allowed):
    with pytest.raises(ConfigError, match=allowed) as error:
        settings("dev", *overrides)
    assert f"elastic-training:{key}" in str(error.value) and "\n" not in str(error.value)


def test_image_context_needs_eks_and_no_image_uri(tmp_path, monkeypatch):
    from infra.config import own_training

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "Dockerfile").write_text("ARG ELASTIC_TRAINING_IMAGE\nFROM ${ELASTIC_TRAINING_IMAGE}\n")
    monkeypatch.setattr(own_training, "PROJECT_ROOT", tmp_path)
    assert settings("dev", "imageContext=mine").image_context == "mine"
    with pytest.raises(ConfigError, match="must be empty with target existing"):
        settings("local", "imageContext=mine")
    with pytest.raises(ConfigError, match="must be empty when imageUri is set"):
        settings("dev", "imageContext=mine", "imageUri=public.ecr.aws/org/repo@sha256:" + "0" * 64)


# --- jobs.results.gate: the test Job of an own testCommand ---------------------------------------


def gate(tmp_path, metrics: str | None, command_exit: int = 0, minimum: str = "0.7"):
    writer = (
        "import os, sys, pathlib; d = pathlib.Path(os.environ['ELASTIC_TRAINING_RUN_DIR']); "
        f"m = {metrics!r}; m is not None and (d / 'metrics.json').write_text(m); sys.exit({command_exit})"
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.results.gate",
            "--metric",
            "accuracy",
            "--min",
            minimum,
            "--",
            sys.executable,
            "-c",
            writer,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), run_directory.RUN_DIR_ENV: str(tmp_path)},
    )


def test_the_gate_passes_a_metric_at_or_above_the_minimum(tmp_path):
    assert gate(tmp_path, '{"accuracy": 0.7}').returncode == 0


@pytest.mark.parametrize(
    "metrics, line",
    [
        ('{"accuracy": 0.5}', "accuracy 0.5 in"),
        ('{"loss": 0.5}', "has no number under 'accuracy'"),
        (None, "the test command wrote no"),
        ("not json", "is not readable JSON"),
    ],
)
def test_the_gate_fails_the_job_with_exit_3_and_one_line(tmp_path, metrics, line):
    result = gate(tmp_path, metrics)
    assert result.returncode == exit_codes.CANNOT_CONTINUE
    (error,) = result.stderr.strip().splitlines()
    assert error.startswith("jobs.results.gate: error: ") and line in error


def test_the_test_commands_own_failure_is_the_jobs(tmp_path):
    assert gate(tmp_path, '{"accuracy": 0.9}', command_exit=1).returncode == 1
