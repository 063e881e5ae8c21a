"""jobs.training.train in one process (no torchrun): run directory contract, resume, recipes, bad input.
The multi-worker and fault behaviour is in test_elastic.py."""

from __future__ import annotations

import shutil
import time

import pytest
import torch
from conftest import assert_one_line_error, make_synthetic_cifar, run_job

from jobs import cli
from jobs.training import checkpoint
from jobs.training import recipes
from jobs.training import train


def train_args(data_dir, run_dir, *extra: str) -> list[str]:
    return ["--data", str(data_dir), "--run-dir", str(run_dir), "--batch-size", "20", "--log-every", "5", *extra]


def test_finished_run_leaves_model_checkpoint_and_history(trained_run):
    assert sorted(path.name for path in trained_run.iterdir()) == ["checkpoint.previous.pt", "checkpoint.pt",
                                                                   "history.jsonl", "model.pt"]  # fmt: skip
    history = checkpoint.read_history(trained_run)
    assert [record["event"] for record in history] == ["start", "epoch", "epoch", "epoch", "finished"]
    assert history[0]["epochs_done"] == 0 and history[0]["world_size"] == 1
    assert [record["epoch"] for record in history if record["event"] == "epoch"] == [1, 2, 3]
    losses = [record["loss"] for record in history if record["event"] == "epoch"]
    assert losses[-1] < losses[0]  # it learns
    saved = checkpoint.load(trained_run / "checkpoint.pt", "checkpoint")
    assert saved["epochs_done"] == 3 and saved["settings"]["recipe"] == "improved"
    model = checkpoint.load(trained_run / "model.pt", "model")
    assert model["architecture"] == "workshop-cnn" and model["synthetic_data"] is True
    assert len(model["class_names"]) == 10 and not any(key.startswith("module.") for key in model["state_dict"])


def test_second_launch_of_a_finished_run_trains_nothing(trained_run, tiny_cifar):
    before = (trained_run / "model.pt").stat().st_mtime_ns, (trained_run / "history.jsonl").read_text()
    started = time.monotonic()
    assert train.main(train_args(tiny_cifar, trained_run, "--epochs", "3")) == 0
    assert time.monotonic() - started < 1.0
    assert ((trained_run / "model.pt").stat().st_mtime_ns, (trained_run / "history.jsonl").read_text()) == before


def test_resumes_from_the_checkpoint_instead_of_starting_over(trained_run, tiny_cifar, tmp_path):
    """As after a crash between the last checkpoint and model.pt: all epochs are done, so the
    relaunch trains none and only writes the model, identical to the checkpoint's weights."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    (run_dir / "model.pt").unlink()
    assert train.main(train_args(tiny_cifar, run_dir, "--epochs", "3")) == 0
    history = checkpoint.read_history(run_dir)
    assert history[-2]["event"] == "start" and history[-2]["epochs_done"] == 3
    assert history[-1]["event"] == "finished"
    assert sum(record["event"] == "epoch" for record in history) == 3  # none added
    weights = checkpoint.load(run_dir / "model.pt", "model")["state_dict"]
    saved = checkpoint.load(run_dir / "checkpoint.pt", "checkpoint")["model"]
    assert all(torch.equal(weights[name], saved[name]) for name in saved)


def test_checkpoint_of_other_settings_is_refused(trained_run, tiny_cifar, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    (run_dir / "model.pt").unlink()
    with pytest.raises(cli.JobError, match="epochs 3 there, 5 now.*new --run-dir"):
        train.main(train_args(tiny_cifar, run_dir, "--epochs", "5"))


def test_workshop_recipe_trains_without_normalisation(tiny_cifar, tmp_path):
    assert train.main(train_args(tiny_cifar, tmp_path / "run", "--epochs", "1", "--recipe", "workshop")) == 0
    model = checkpoint.load(tmp_path / "run" / "model.pt", "model")
    assert model["normalization"] == {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]}
    assert model["settings"]["lr"] == 0.001


def test_learning_rate_schedules():
    improved = recipes.RunSettings("improved", epochs=10, batch_size=128, lr=0.05, seed=0)
    assert recipes.learning_rate(improved, 0.0) == pytest.approx(0.005)  # warm-up starts at lr / 10
    assert recipes.learning_rate(improved, 1.0) == pytest.approx(0.05)  # peak after one epoch
    assert recipes.learning_rate(improved, 5.5) == pytest.approx(0.025)  # half-way down the cosine
    assert recipes.learning_rate(improved, 10.0) == pytest.approx(0.0, abs=1e-12)
    workshop = recipes.RunSettings("workshop", epochs=10, batch_size=128, lr=0.001, seed=0)
    assert {recipes.learning_rate(workshop, p) for p in (0.0, 3.3, 9.9)} == {0.001}


def test_a_checkpoint_of_another_data_set_size_is_refused(trained_run, tmp_path):
    """Its position counts images of an order of another length: resuming would train on other images."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    (run_dir / "model.pt").unlink()
    other = make_synthetic_cifar(tmp_path / "other", train_per_class=11, test_per_class=2)
    with pytest.raises(cli.JobError, match="100 training images there, 110 now.*new --run-dir"):
        train.main(train_args(other, run_dir, "--epochs", "3"))


def test_a_checkpoint_without_a_position_resumes_at_its_epoch(trained_run, tiny_cifar, tmp_path):
    """Checkpoints written before checkpoints by time have no position: an epoch boundary."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained_run, run_dir)
    (run_dir / "model.pt").unlink()
    saved = checkpoint.load(run_dir / "checkpoint.pt", "checkpoint")
    old = {key: value for key, value in saved.items() if key not in ("position", "num_images", "epoch_sums")}
    checkpoint.save_atomically({**old, "epochs_done": 2}, run_dir / "checkpoint.pt")
    assert train.main(train_args(tiny_cifar, run_dir, "--epochs", "3")) == 0
    history = checkpoint.read_history(run_dir)
    restart = [record for record in history if record["event"] == "start"][-1]
    assert (restart["epochs_done"], restart["position"]) == (2, 0)
    assert history[-2]["event"] == "epoch" and history[-2]["epoch"] == 3 and history[-2]["train_accuracy"] > 0


@pytest.mark.parametrize(
    "extra, error, phrase",
    [
        (["--epochs", "0"], cli.UsageError, "--epochs: must be a whole number from 1 to 10000, got 0"),
        (["--epochs", "1000000000"], cli.UsageError, "--epochs: must be a whole number from 1 to 10000"),
        (["--batch-size", str(10**12)], cli.UsageError, "--batch-size: must be a whole number from 1 to 65536"),
        (["--lr", "inf"], cli.UsageError, "--lr: must be a number > 0 and <= 10"),
        (["--lr", "nan"], cli.UsageError, "--lr: must be a number > 0 and <= 10"),
        (["--pg-timeout", "1e9"], cli.UsageError, "--pg-timeout: must be a number > 0 and <= 3600"),
        (["--seed", "-1"], cli.UsageError, "--seed: must be a whole number from 0 to"),
        (["--log-every", "0"], cli.UsageError, "--log-every: must be a whole number from 1 to"),
        (["--recipe", "fancy"], cli.UsageError, "invalid choice: 'fancy'"),
        (["--lr", "-1"], cli.UsageError, "--lr: must be a number > 0"),
        (["--batch-size", "lots"], cli.UsageError, "--batch-size: must be a whole number from 1 to 65536, got lots"),
        (["--checkpoint-every-seconds", "-1"], cli.UsageError, "--checkpoint-every-seconds: must be a number >= 0"),
    ],
)
def test_bad_flags(tiny_cifar, tmp_path, extra, error, phrase):
    with pytest.raises(error, match=phrase):
        train.main(train_args(tiny_cifar, tmp_path / "run", *extra))
    assert not (tmp_path / "run").exists()


def test_bad_data_folder_fails_before_anything_is_written(tmp_path, tiny_cifar):
    with pytest.raises(cli.JobError, match="does not exist"):
        train.main(train_args(tmp_path / "missing", tmp_path / "run"))
    with pytest.raises(cli.JobError, match=r"folder above the data: pass .*cifar-10-batches-py"):
        train.main(train_args(tiny_cifar.parent, tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_command_line_error_is_one_line(tmp_path):
    result = run_job("jobs.training.train", "--data", str(tmp_path / "missing"), "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(result, 3, "jobs.training.train: error:", "missing does not exist")
    assert not (tmp_path / "run").exists()
