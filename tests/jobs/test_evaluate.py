"""jobs.results.evaluate: accuracy report, JSON metrics, the quality gate."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import assert_one_line_error, run_job

from jobs import cli
from jobs.data import cifar as data
from jobs.results import evaluate


def test_reports_overall_and_per_class_accuracy(trained_run, tiny_cifar, tmp_path, capsys):
    metrics_path = tmp_path / "metrics.json"
    assert evaluate.main(["--data", str(tiny_cifar), "--model", str(trained_run / "model.pt"),
                          "--metrics-out", str(metrics_path), "--min-accuracy", "0.3"]) == 0  # fmt: skip
    metrics = json.loads(metrics_path.read_text())
    assert metrics["total"] == 100 and metrics["passed"] is True and metrics["synthetic_data"] is True
    assert metrics["accuracy"] >= 0.3  # chance is 0.1
    assert set(metrics["per_class"]) == set(data.CLASS_NAMES)
    assert sum(c["correct"] for c in metrics["per_class"].values()) == metrics["correct"]
    assert all(c["total"] == 10 for c in metrics["per_class"].values())
    output = capsys.readouterr().out
    assert "Accuracy of the network on the 100 test images:" in output and "airplane" in output


def test_the_run_cost_is_kept_in_the_metrics_and_the_run_history(trained_run, tiny_cifar, tmp_path):
    """The stack passes the wait's measure (infra/components/run_cost.py) to the test Job, which keeps it
    on the shared volume: in metrics.json and as a line of the run's history.jsonl."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(trained_run / "model.pt", run / "model.pt")
    measured = {
        "durationSeconds": 5400.0,
        "workerNodeHours": 2.916667,
        "estimatedCostUsd": 1.983333,
        "note": "complete",
    }
    assert evaluate.main(["--data", str(tiny_cifar), "--model", str(run / "model.pt"),
                          "--run-cost", json.dumps(measured)]) == 0  # fmt: skip
    assert json.loads((run / "metrics.json").read_text())["run_cost"] == measured
    (line,) = [json.loads(text) for text in (run / "history.jsonl").read_text().splitlines()]
    assert {k: v for k, v in line.items() if k != "time"} == {"event": "run-cost", **measured}


def test_gate_fails_below_min_accuracy_but_still_writes_metrics(trained_run, tiny_cifar, tmp_path):
    measured = tmp_path / "measured.json"
    evaluate.main(["--data", str(tiny_cifar), "--model", str(trained_run / "model.pt"), "--metrics-out", str(measured)])
    accuracy = json.loads(measured.read_text())["accuracy"]
    assert accuracy < 1.0  # the synthetic classes overlap: there is room above

    gated = tmp_path / "gated.json"
    with pytest.raises(evaluate.AccuracyBelowGate, match=f"accuracy {accuracy:.4f} is below --min-accuracy"):
        evaluate.main(["--data", str(tiny_cifar), "--model", str(trained_run / "model.pt"),
                       "--metrics-out", str(gated), "--min-accuracy", str(accuracy + 0.005)])  # fmt: skip
    assert json.loads(gated.read_text())["passed"] is False


def test_command_line_gate_exit_code_and_default_metrics_path(trained_run, tiny_cifar, tmp_path):
    shutil.copy(trained_run / "model.pt", tmp_path / "model.pt")
    result = run_job(
        "jobs.results.evaluate", "--data", str(tiny_cifar), "--model", str(tmp_path / "model.pt"), "--min-accuracy", "1"
    )
    assert_one_line_error(
        result, cli.EXIT_BELOW_GATE, "jobs.results.evaluate: error: accuracy", "below --min-accuracy 1"
    )
    assert json.loads((tmp_path / "metrics.json").read_text())["min_accuracy"] == 1.0  # next to the model


def test_predictions_do_not_depend_on_the_batch(trained_run, tiny_cifar):
    """eval mode: batch normalisation uses learnt statistics, so an image's prediction is the
    same whatever else is in its batch (the workshop's test script got this wrong)."""
    model, normalization = evaluate.load_model(trained_run / "model.pt", torch.device("cpu"))
    images = torch.from_numpy(data.load_split(tiny_cifar, "test").images)
    assert torch.equal(evaluate.predict(model, normalization, images, batch_size=100),
                       evaluate.predict(model, normalization, images, batch_size=1))  # fmt: skip


@pytest.mark.parametrize(
    "arguments, error, phrase",
    [
        (["--min-accuracy", "70"], cli.UsageError, "fraction between 0 and 1"),
        (["--min-accuracy", "high"], cli.UsageError, "fraction between 0 and 1"),
        (["--model", "{run}/checkpoint.pt"], cli.JobError, "not a workshop-cnn model"),
        (["--model", "{run}/nothing.pt"], cli.JobError, "does not exist"),
        (["--model", "{run}/history.jsonl"], cli.JobError, "not readable"),
        (["--run-cost", "[1, 2]"], cli.UsageError, "must be a JSON object"),
    ],
)
def test_bad_input(trained_run, tiny_cifar, tmp_path, arguments, error, phrase):
    arguments = [argument.format(run=trained_run) for argument in arguments]
    defaults = {"--model": str(trained_run / "model.pt")}
    for flag, value in defaults.items():
        if flag not in arguments:
            arguments += [flag, value]
    with pytest.raises(error, match=phrase):
        evaluate.main(["--data", str(tiny_cifar), "--metrics-out", str(tmp_path / "m.json"), *arguments])
    assert not (tmp_path / "m.json").exists()
