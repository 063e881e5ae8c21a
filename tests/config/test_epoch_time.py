"""Epochs that cannot finish inside jobTimeoutMinutes at the measured rate are warned (issue 39), in one
line with both numbers and what to change; where no rate was measured nothing is said."""

from __future__ import annotations

import json

import pytest

import infra.cli.synth
from infra.aws import training_rates
from infra.config import load_settings
from infra.config.stack_file import read_stack_file
from synth_support import REPO

# One p5e.48xlarge (8 x H200) training fp32 at batch 128, the slowest measured setting, for 1000 epochs of
# CIFAR-10 inside the shortest deadline the key allows.
H200_FP32 = {
    "nodeInstanceType": "p5e.48xlarge",
    "precision": "fp32",
    "batchSize": "128",
    "epochs": "1000",
    "jobTimeoutMinutes": "5",
    "workers": "1",
    "minWorkers": "1",
    "maxWorkers": "1",
    "nodeMaxCount": "1",
    "workerCpu": "180",
    "workerMemory": "1800Gi",
}


def warnings_of(**overrides: str) -> list[str]:
    raw = read_stack_file("dev")
    raw.update({f"elastic-training:{k}": v for k, v in overrides.items()})
    return [w for w in load_settings(raw, "dev").warnings if "cannot finish inside jobTimeoutMinutes" in w]


def test_epochs_past_the_deadline_at_the_measured_rate_are_warned_with_both_numbers():
    (line,) = warnings_of(**H200_FP32)
    # 50000 / (20603 x 8) = 0.3033 s an epoch, x 1000 + 10.82 s to the first step = 314 s > 300 s.
    assert line == (
        "config elastic-training:epochs=1000 cannot finish inside jobTimeoutMinutes=5 (300 s) at the measured "
        "rate: 1000 epochs of 50000 images at 20603 images/s per H200 GPU (fp32, batch 128; "
        "benchmarks/results/h200-2026-11-28-session2.json, fp32-128) on 8 GPUs (maxWorkers 1 x 8) take at "
        "least 314 s, 10.82 s of it to the first step; set jobTimeoutMinutes to at least 6 or epochs to at "
        "most 953"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"jobTimeoutMinutes": "6"},
        {"epochs": "953"},
        {"maxWorkers": "2", "nodeMaxCount": "2"},
        {"precision": "auto", "batchSize": "1024"},
        {"dataSource": "synthetic:100"},
    ],
)
def test_what_the_line_says_to_change_silences_it(change):
    assert warnings_of(**{**H200_FP32, **change}) == []


@pytest.mark.parametrize(
    "change",
    [
        {"precision": "tf32", "batchSize": "256"},  # a batch no run measured
        {"nodeInstanceType": "p5.48xlarge"},  # H100: no rate measured on it
        {
            "nodeInstanceType": "c5.4xlarge",
            "workerCpu": "15",
            "workerMemory": "24Gi",
            "precision": "auto",
        },  # a CPU type
        {"trainingCommand": '["python", "-m", "mytrain"]'},  # the user's epochs
        {"dataPrepCommand": '["python", "-m", "myprep"]'},  # the user's data: the epoch's size is unknown
    ],
)
def test_nothing_is_said_without_a_measured_rate(change):
    assert warnings_of(**{**H200_FP32, **change}) == []


def test_synth_prints_the_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(infra.cli.synth, "run_program", lambda settings: ([], {}))
    argv = ["dev", "--out", str(tmp_path / "out")]
    for key, value in H200_FP32.items():
        argv += ["-c", f"{key}={value}"]
    infra.cli.synth.main(argv)
    printed = [line for line in capsys.readouterr().err.splitlines() if "cannot finish" in line]
    assert printed and printed[0].startswith(
        "warning: config elastic-training:epochs=1000 cannot finish inside jobTimeoutMinutes=5 (300 s)"
    )


@pytest.mark.parametrize("key, rate", sorted(training_rates.MEASURED.items()))
def test_every_rate_is_the_one_its_results_file_holds(key, rate):
    gpu, arithmetic, batch = key
    path, label = rate.source.split(", ")
    results = json.loads((REPO / path).read_text(encoding="utf-8"))
    assert results["card"] == f"NVIDIA {gpu}"
    (run,) = [run for run in results["pod_path"] if run["label"] == label]
    assert run["steady_images_per_s"] == rate.images_per_second
    assert run["worker_first_step"] == rate.first_step_seconds
    assert f"batch {batch} per worker" in run["settings_line"] and f", {arithmetic}" in run["settings_line"]
