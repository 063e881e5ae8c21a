"""A damaged checkpoint is never trained from: each file carries its content's SHA-256, a file that
fails it (flipped bytes, truncated, empty, foreign) is refused with one line naming it and why, and
the run falls back to the checkpoint before it. Faults staged on real files written by jobs.training.train."""

from __future__ import annotations

import shutil

import pytest
import torch
from conftest import assert_one_line_error, run_job

from jobs import cli
from jobs.training import checkpoint
from jobs.training import train
from jobs.training.progress import Progress, SavedState, recover_epoch_line


def train_args(data_dir, run_dir, *extra: str) -> list[str]:
    return ["--data", str(data_dir), "--run-dir", str(run_dir), "--batch-size", "20", "--log-every", "5", *extra]


@pytest.fixture(scope="module")
def three_epochs(tmp_path_factory, tiny_cifar):
    """A run of 3 epochs that died before model.pt: checkpoint.pt at epoch 3, the previous at 2."""
    run_dir = tmp_path_factory.mktemp("three") / "run"
    assert train.main(train_args(tiny_cifar, run_dir, "--epochs", "3", "--checkpoint-every-seconds", "0")) == 0
    (run_dir / checkpoint.MODEL_NAME).unlink()
    return run_dir


def copy_of(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def flip_middle(path, count=64):
    """What the issue staged: 64 bytes set to 0xFF in the middle of the file (inside the largest tensor)."""
    raw = bytearray(path.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + count] = b"\xff" * count
    path.write_bytes(bytes(raw))


def test_both_checkpoints_are_kept_and_each_passes_its_check(three_epochs):
    assert checkpoint.load(three_epochs / checkpoint.CHECKPOINT_NAME, "checkpoint")["epochs_done"] == 3
    assert checkpoint.load(three_epochs / checkpoint.PREVIOUS_CHECKPOINT_NAME, "checkpoint")["epochs_done"] == 2


def test_flipped_bytes_load_in_torch_but_are_refused_here(three_epochs, tmp_path):
    path = tmp_path / "checkpoint.pt"
    shutil.copy(three_epochs / checkpoint.CHECKPOINT_NAME, path)
    flip_middle(path)
    torch.load(path, weights_only=True)  # torch itself does not notice: the silent case of the issue
    with pytest.raises(checkpoint.CorruptFile, match=r"is corrupted: its content does not match the SHA-256"):
        checkpoint.load(path, "checkpoint")


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda raw: b"", r"is empty \(0 bytes\): its write never completed"),
        (
            lambda raw: raw[: len(raw) // 3],
            r"is not readable as a file written by jobs.training.train \(.+; \d+ bytes\)",
        ),
        (lambda raw: b"garbage" * 100, r"is not readable as a file written by jobs.training.train \(.+; 700 bytes\)"),
    ],
)
def test_truncated_empty_and_garbage_files_get_a_real_reason(three_epochs, tmp_path, damage, reason):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(damage((three_epochs / checkpoint.CHECKPOINT_NAME).read_bytes()))
    with pytest.raises(checkpoint.CorruptFile, match=reason) as refused:
        checkpoint.load(path, "checkpoint")
    assert "weights_only" not in str(refused.value) and "\n" not in str(refused.value)


def test_a_foreign_pickle_is_refused_without_torchs_advice_to_run_it(tmp_path):
    from pathlib import Path

    foreign = tmp_path / "foreign.pt"
    torch.save({"x": Path("/etc")}, foreign)
    with pytest.raises(checkpoint.CorruptFile) as refused:
        checkpoint.load(foreign, "model")
    message = str(refused.value)
    assert "holds objects other than tensors and plain data" in message
    assert "weights_only" not in message and "arbitrary code" not in message and "\n" not in message


def test_a_damaged_checkpoint_falls_back_to_the_previous_one_and_is_set_aside(
    three_epochs, tiny_cifar, tmp_path, capsys
):
    run_dir = copy_of(three_epochs, tmp_path)
    flip_middle(run_dir / checkpoint.CHECKPOINT_NAME)
    assert train.main(train_args(tiny_cifar, run_dir, "--epochs", "3", "--checkpoint-every-seconds", "0")) == 0
    starts = [record for record in checkpoint.read_history(run_dir) if record["event"] == "start"]
    assert starts[-1]["epochs_done"] == 2  # resumed from checkpoint.previous.pt, not the damaged epoch 3
    said = [line for line in capsys.readouterr().out.splitlines() if "trying the checkpoint before it" in line]
    assert len(said) == 1 and f"checkpoint {run_dir / 'checkpoint.pt'} is corrupted" in said[0]
    assert (run_dir / checkpoint.REJECTED_CHECKPOINT_NAME).exists()  # kept to look at, never the fallback
    final = checkpoint.load(run_dir / checkpoint.CHECKPOINT_NAME, "checkpoint")
    assert final["epochs_done"] == 3
    # The damaged file never becomes the fallback: the previous is still the good epoch 2.
    assert checkpoint.load(run_dir / checkpoint.PREVIOUS_CHECKPOINT_NAME, "checkpoint")["epochs_done"] == 2
    weights = checkpoint.load(run_dir / checkpoint.MODEL_NAME, "model")["state_dict"]
    assert all(torch.isfinite(tensor).all() for tensor in weights.values() if tensor.is_floating_point())


def test_no_usable_checkpoint_ends_the_run_in_one_line_with_exit_3(three_epochs, tiny_cifar, tmp_path):
    run_dir = copy_of(three_epochs, tmp_path)
    flip_middle(run_dir / checkpoint.CHECKPOINT_NAME)
    (run_dir / checkpoint.PREVIOUS_CHECKPOINT_NAME).write_bytes(b"")
    history_before = (run_dir / checkpoint.HISTORY_NAME).read_text()
    result = run_job("jobs.training.train", *train_args(tiny_cifar, run_dir, "--epochs", "3"))
    line = assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, "no usable checkpoint in", "checkpoint.pt is corrupted",
                                 "checkpoint.previous.pt is empty (0 bytes)")  # fmt: skip
    assert "weights_only" not in line
    assert not (run_dir / checkpoint.MODEL_NAME).exists()
    assert (run_dir / checkpoint.HISTORY_NAME).read_text() == history_before  # nothing trained


def test_a_kill_between_the_checkpoint_and_its_history_line_is_made_good_on_resume(three_epochs, tiny_cifar, tmp_path):
    """As if rank 0 died right after checkpoint.pt's rename: the history lacks epoch 3's line."""
    run_dir = copy_of(three_epochs, tmp_path)
    history = (run_dir / checkpoint.HISTORY_NAME).read_text().splitlines(keepends=True)
    last = [index for index, line in enumerate(history) if '"epoch": 3' in line and '"event": "epoch"' in line]
    del history[last[0] :]
    (run_dir / checkpoint.HISTORY_NAME).write_text("".join(history))
    assert train.main(train_args(tiny_cifar, run_dir, "--epochs", "3", "--checkpoint-every-seconds", "0")) == 0
    epochs = [record for record in checkpoint.read_history(run_dir) if record["event"] == "epoch"]
    assert [record["epoch"] for record in epochs] == [1, 2, 3]
    assert epochs[2].get("recovered") is True and epochs[2]["loss"] > 0 and "recovered" not in epochs[1]
    assert (run_dir / checkpoint.MODEL_NAME).exists()
    # Nothing to make good when the line is there: a second look writes nothing.
    saved = checkpoint.load(run_dir / checkpoint.CHECKPOINT_NAME, "checkpoint")
    assert not recover_epoch_line(run_dir, SavedState(saved, Progress(3), run_dir / checkpoint.CHECKPOINT_NAME))


def test_a_nan_loss_stops_the_run_before_any_checkpoint_or_model_with_exit_3(three_epochs, tiny_cifar, tmp_path):
    """A checkpoint whose weights hold NaN (but that is intact: its digest matches) trains to a NaN
    loss: the run stops at the first check, leaving the checkpoints as they were and no model.pt."""
    run_dir = copy_of(three_epochs, tmp_path)
    saved = checkpoint.load(run_dir / checkpoint.PREVIOUS_CHECKPOINT_NAME, "checkpoint")  # epoch 2
    name = next(key for key, value in saved["model"].items() if value.is_floating_point())
    saved["model"][name] = torch.full_like(saved["model"][name], float("nan"))
    checkpoint.save_atomically(saved, run_dir / checkpoint.CHECKPOINT_NAME)
    before = {path.name: path.read_bytes() for path in run_dir.glob("checkpoint*.pt")}
    result = run_job(
        "jobs.training.train", *train_args(tiny_cifar, run_dir, "--epochs", "3", "--checkpoint-every-seconds", "0")
    )
    assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, "the training loss is nan at epoch 3 step 5/5",
                          "training diverged")  # fmt: skip
    assert not (run_dir / checkpoint.MODEL_NAME).exists()
    assert {path.name: path.read_bytes() for path in run_dir.glob("checkpoint*.pt")} == before
    last = checkpoint.read_history(run_dir)[-1]
    assert last["event"] == "failed" and last["exit_code"] == 3 and "nan" in last["reason"]


def test_nan_weights_never_reach_model_pt(three_epochs, tiny_cifar, tmp_path):
    """All epochs done: the relaunch only writes model.pt from the checkpoint's weights, so they
    are checked too (an intact checkpoint of NaN weights trains no step that could show it)."""
    run_dir = copy_of(three_epochs, tmp_path)
    saved = checkpoint.load(run_dir / checkpoint.CHECKPOINT_NAME, "checkpoint")
    name = next(key for key, value in saved["model"].items() if value.is_floating_point())
    saved["model"][name][0] = float("inf")
    checkpoint.save_atomically(saved, run_dir / checkpoint.CHECKPOINT_NAME)
    with pytest.raises(cli.RunCannotContinue, match=f"{name} holds non-finite values"):
        train.main(train_args(tiny_cifar, run_dir, "--epochs", "3"))
    assert not (run_dir / checkpoint.MODEL_NAME).exists()
