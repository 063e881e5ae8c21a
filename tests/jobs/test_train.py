"""jobs.train in one process (no torchrun): run directory contract, resume, recipes, bad input.
The multi-worker and fault behaviour is in test_elastic.py."""

from __future__ import annotations

import shutil
import time

import pytest
import torch
from conftest import assert_one_line_error, run_job

from jobs import checkpoint, cli, train
from jobs.distributed import WorkerPlace


def train_args(data_dir, run_dir, *extra: str) -> list[str]:
    return ["--data", str(data_dir), "--run-dir", str(run_dir), "--batch-size", "20", "--log-every", "5", *extra]


def test_finished_run_leaves_model_checkpoint_and_history(trained_run):
    assert sorted(path.name for path in trained_run.iterdir()) == ["checkpoint.pt", "history.jsonl", "model.pt"]
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
    improved = train.RunSettings("improved", epochs=10, batch_size=128, lr=0.05, seed=0)
    assert train.learning_rate(improved, 0.0) == pytest.approx(0.005)  # warm-up starts at lr / 10
    assert train.learning_rate(improved, 1.0) == pytest.approx(0.05)  # peak after one epoch
    assert train.learning_rate(improved, 5.5) == pytest.approx(0.025)  # half-way down the cosine
    assert train.learning_rate(improved, 10.0) == pytest.approx(0.0, abs=1e-12)
    workshop = train.RunSettings("workshop", epochs=10, batch_size=128, lr=0.001, seed=0)
    assert {train.learning_rate(workshop, p) for p in (0.0, 3.3, 9.9)} == {0.001}


def test_every_epoch_reshuffles_into_equal_disjoint_shares():
    settings = train.RunSettings("improved", epochs=2, batch_size=8, lr=0.05, seed=0)
    device = torch.device("cpu")

    def shares(epoch):
        return [torch.cat(train.epoch_batches(103, epoch, settings, WorkerPlace(rank, 3, 0, 0, True), device))
                for rank in range(3)]  # fmt: skip

    epoch0, epoch1 = shares(0), shares(1)
    assert [len(share) for share in epoch0] == [34, 34, 34]  # equal: DDP needs equal step counts
    assert len(set(torch.cat(epoch0).tolist())) == 102  # disjoint
    assert not torch.equal(epoch0[0], epoch1[0])  # a new order every epoch
    assert all(torch.equal(a, b) for a, b in zip(epoch0, shares(0)))  # every worker computes the same plan
    first_worker = train.epoch_batches(103, 0, settings, WorkerPlace(0, 3, 0, 0, True), device)
    assert [len(batch) for batch in first_worker] == [8, 8, 8, 8, 2]


@pytest.mark.parametrize(
    "extra, error, phrase",
    [
        (["--epochs", "0"], cli.UsageError, "--epochs: must be a whole number >= 1"),
        (["--recipe", "fancy"], cli.UsageError, "invalid choice: 'fancy'"),
        (["--lr", "-1"], cli.UsageError, "--lr: must be a number > 0"),
        (["--batch-size", "lots"], cli.UsageError, "--batch-size: invalid positive whole number value"),
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
    result = run_job("jobs.train", "--data", str(tmp_path / "missing"), "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(result, 1, "jobs.train: error:", "missing does not exist")
    assert not (tmp_path / "run").exists()
