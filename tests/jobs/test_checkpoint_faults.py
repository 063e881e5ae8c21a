"""Every file a run keeps is written atomically: a fault injected at each step of a write leaves the
previous file loadable and no temporary file behind. In-process (no torchrun), so
scripts/mutation.sh can run them against jobs/training/checkpoint.py's mutants."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import torch

from jobs.training import checkpoint
from jobs.cli import JobError, VolumeError

OLD = {"epochs_done": 1, "model": {"w": torch.zeros(3)}}
NEW = {"epochs_done": 2, "model": {"w": torch.ones(3)}}


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != checkpoint.CHECKPOINT_NAME)


def assert_old_checkpoint_intact(path: Path) -> None:
    loaded = checkpoint.load(path, "checkpoint")
    assert loaded["epochs_done"] == 1 and torch.equal(loaded["model"]["w"], torch.zeros(3))
    assert leftovers(path.parent) == []


def test_a_save_replaces_the_file_and_leaves_nothing_else(tmp_path):
    path = tmp_path / checkpoint.CHECKPOINT_NAME
    checkpoint.save_atomically(OLD, path)
    checkpoint.save_atomically(NEW, path)
    loaded = checkpoint.load(path, "checkpoint")
    assert loaded["epochs_done"] == 2 and torch.equal(loaded["model"]["w"], torch.ones(3))
    assert leftovers(tmp_path) == []


def crash_mid_serialisation(payload, file):
    file.write(b"PK\x03\x04 half a zip")  # what torch.save had written when the process died
    raise KeyboardInterrupt  # BaseException: SIGINT, or SystemExit from a signal handler


def fail_fsync(_descriptor):
    raise OSError(5, "Input/output error")


def fail_replace(_source, _target):
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    "where, fault, error",
    [
        ("serialisation", ("torch", "save", crash_mid_serialisation), KeyboardInterrupt),
        ("fsync", ("os", "fsync", fail_fsync), OSError),
        ("rename", ("os", "replace", fail_replace), VolumeError),  # ENOSPC: one line, exit 3
    ],
)
def test_a_fault_at_any_step_keeps_the_previous_checkpoint_and_no_temporary(tmp_path, monkeypatch, where, fault, error):
    path = tmp_path / checkpoint.CHECKPOINT_NAME
    checkpoint.save_atomically(OLD, path)
    module, name, replacement = fault
    monkeypatch.setattr(getattr(checkpoint, module), name, replacement)
    with pytest.raises(error):
        checkpoint.save_atomically(NEW, path)
    monkeypatch.undo()
    assert_old_checkpoint_intact(path)


def test_the_temporary_is_a_hidden_sibling_fsynced_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    """Same folder (rename is atomic only within a file system), hidden, named so that
    remove_stale_temporary_files finds it; data on disk before it gets the real name."""
    path = tmp_path / checkpoint.MODEL_NAME
    events: list[tuple] = []
    real_fsync, real_replace, real_open = os.fsync, os.replace, os.open
    opened: dict[int, str] = {}

    def record_open(target, flags, *args):
        descriptor = real_open(target, flags, *args)
        opened[descriptor] = str(target)
        return descriptor

    def record_fsync(descriptor):
        events.append(("fsync", opened.get(descriptor, "file")))
        real_fsync(descriptor)

    def record_replace(source, target):
        events.append(("replace", Path(source), Path(target)))
        real_replace(source, target)

    monkeypatch.setattr(checkpoint.os, "fsync", record_fsync)
    monkeypatch.setattr(checkpoint.os, "replace", record_replace)
    monkeypatch.setattr(checkpoint.os, "open", record_open)
    checkpoint.save_atomically(NEW, path)
    assert [e[0] for e in events] == ["fsync", "replace", "fsync"]
    temporary = events[1][1]
    assert events[1][2] == path and temporary.parent == path.parent
    assert temporary.name == f".{path.name}.tmp-{os.getpid()}"
    assert events[0][1] == "file" and events[2][1] == str(tmp_path)


def test_a_folder_that_cannot_be_opened_or_fsynced_is_no_failure(tmp_path, monkeypatch):
    """Some file systems refuse to open or fsync a directory; the file itself is already safe."""
    real_open, real_fsync, real_close = os.open, os.fsync, os.close
    monkeypatch.setattr(checkpoint.os, "open", lambda *a: (_ for _ in ()).throw(PermissionError(13, "denied")))
    checkpoint.save_atomically(OLD, tmp_path / "a.pt")
    monkeypatch.setattr(checkpoint.os, "open", real_open)

    def fsync_files_only(descriptor):
        if stat.S_ISDIR(os.fstat(descriptor).st_mode):
            raise OSError(22, "Invalid argument")
        real_fsync(descriptor)

    closed = []
    monkeypatch.setattr(checkpoint.os, "fsync", fsync_files_only)
    monkeypatch.setattr(checkpoint.os, "close", lambda d: closed.append(d) or real_close(d))
    checkpoint.save_atomically(NEW, tmp_path / "a.pt")
    assert len(closed) == 1  # the folder's descriptor is closed even when its fsync fails
    assert checkpoint.load(tmp_path / "a.pt", "checkpoint")["epochs_done"] == 2
    assert leftovers(tmp_path) == ["a.pt"]


def test_stale_temporaries_and_only_they_are_removed(tmp_path):
    stale = [".checkpoint.pt.tmp-123", ".model.pt.tmp-9", ".metrics.json.tmp-77"]
    kept = [checkpoint.CHECKPOINT_NAME, checkpoint.HISTORY_NAME, ".hidden", "notes.tmp-1", "checkpoint.pt.tmp-5"]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    checkpoint.remove_stale_temporary_files(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_load_refuses_missing_torn_foreign_and_non_dict_files(tmp_path):
    with pytest.raises(JobError) as error:
        checkpoint.load(tmp_path / "nope.pt", "model")
    assert str(error.value) == f"model {tmp_path / 'nope.pt'} does not exist"

    torn = tmp_path / "torn.pt"
    torn.write_bytes(b"PK\x03\x04 half a zip")
    with pytest.raises(JobError) as error:
        checkpoint.load(torn, "checkpoint")
    assert str(error.value).startswith(f"checkpoint {torn} is not readable as a file written by jobs.training.train (")

    tensor = tmp_path / "tensor.pt"
    torch.save(torch.zeros(2), tensor)
    with pytest.raises(JobError) as error:
        checkpoint.load(tensor, "model")
    assert str(error.value) == f"model {tensor} is not a file written by jobs.training.train"

    # weights_only: a pickle that would build an arbitrary object is refused, not executed.
    foreign = tmp_path / "foreign.pt"
    torch.save({"x": Path("/etc")}, foreign)
    with pytest.raises(JobError, match="is not readable as a file written by jobs.training.train"):
        checkpoint.load(foreign, "model")


def test_loaded_tensors_are_on_the_cpu(tmp_path):
    checkpoint.save_atomically(NEW, tmp_path / "c.pt")
    assert checkpoint.load(tmp_path / "c.pt", "checkpoint")["model"]["w"].device.type == "cpu"


def test_history_is_one_sorted_json_line_per_event_and_a_torn_last_line_is_skipped(tmp_path, monkeypatch):
    assert checkpoint.read_history(tmp_path) == []
    monkeypatch.setattr(checkpoint.time, "time", lambda: 1700000000.12345)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(checkpoint.os, "fsync", lambda d: synced.append(d) or real_fsync(d))
    checkpoint.append_history(tmp_path, {"event": "start", "epoch": 0})
    checkpoint.append_history(tmp_path, {"event": "epoch", "epoch": 1})
    assert len(synced) == 2
    text = (tmp_path / checkpoint.HISTORY_NAME).read_text()
    assert text == (
        '{"epoch": 0, "event": "start", "time": 1700000000.123}\n'
        '{"epoch": 1, "event": "epoch", "time": 1700000000.123}\n'
    )
    with open(tmp_path / checkpoint.HISTORY_NAME, "a") as file:
        file.write('{"event": "epo')  # the writer died mid-line
    assert checkpoint.read_history(tmp_path) == [json.loads(line) for line in text.splitlines()]


def test_the_first_record_after_a_torn_line_is_kept_and_so_are_the_ones_after_it(tmp_path):
    """A crash mid-append leaves a line without its newline; the restarted run appends its start
    record next: it must not be glued to the fragment and lost with it."""
    checkpoint.append_history(tmp_path, {"event": "start", "n": 1})
    with open(tmp_path / checkpoint.HISTORY_NAME, "a") as file:
        file.write('{"event": "epo')
    checkpoint.append_history(tmp_path, {"event": "start", "n": 2})
    checkpoint.append_history(tmp_path, {"event": "epoch", "n": 3})
    assert [(r["event"], r["n"]) for r in checkpoint.read_history(tmp_path)] == [
        ("start", 1),
        ("start", 2),
        ("epoch", 3),
    ]


def test_a_failure_to_create_the_temporary_is_reported_as_itself(tmp_path, monkeypatch):
    """open() failing (no space, no permission) leaves no temporary to remove: the caller must see
    that error, not a FileNotFoundError from the clean-up."""

    def no_space(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "open", no_space, raising=False)
    with pytest.raises(VolumeError) as raised:
        checkpoint.save_atomically(NEW, tmp_path / "c.pt")
    assert str(raised.value).startswith(f"cannot write {tmp_path / 'c.pt'}: No space left on device")


def test_an_empty_history_file_gets_no_blank_first_line(tmp_path):
    (tmp_path / checkpoint.HISTORY_NAME).touch()
    checkpoint.append_history(tmp_path, {"event": "start"})
    text = (tmp_path / checkpoint.HISTORY_NAME).read_text()
    assert text.count("\n") == 1 and text.startswith('{"event": "start"')


def test_foreign_pickles_stay_refused_when_the_environment_turns_weights_only_off(tmp_path, monkeypatch):
    """torch 2.13.0 torch/serialization.py load(): TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD "can only override
    if callsite did not explicitly set weights_only": load() sets it, so the variable changes nothing."""
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    foreign = tmp_path / "foreign.pt"
    torch.save({"x": Path("/etc")}, foreign)
    with pytest.raises(JobError, match="is not readable as a file written by jobs.training.train"):
        checkpoint.load(foreign, "model")


def test_tensors_saved_on_any_device_are_mapped_to_the_cpu(tmp_path, monkeypatch):
    """A checkpoint written by GPU training must load on a CPU-only node: load() asks torch to map
    every storage to the CPU (there is no GPU here to write a CUDA checkpoint with)."""
    asked = []
    real_load = torch.load
    monkeypatch.setattr(checkpoint.torch, "load", lambda *a, **k: asked.append(k) or real_load(*a, **k))
    checkpoint.save_atomically(NEW, tmp_path / "c.pt")
    checkpoint.load(tmp_path / "c.pt", "checkpoint")
    assert [k.get("map_location") for k in asked] == ["cpu"]
