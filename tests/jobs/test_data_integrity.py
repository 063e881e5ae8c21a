"""Data verified, not sized: jobs.data.prepare records every file's SHA-256 and rechecks it on each run,
building the folder again when a file does not match; jobs.training.train and jobs.results.evaluate refuse data
that does not match the record, in one line, exit 3. Faults staged on real prepared folders."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import assert_one_line_error, run_job

from jobs import cli
from jobs.data import cifar as data
from jobs.data import data_record


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    dest = tmp_path_factory.mktemp("prepared")
    result = run_job("jobs.data.prepare", "--dest", str(dest), "--synthetic", "10")
    assert result.returncode == 0, result.stderr
    return dest / data.FOLDER_NAME


def copy_of(folder, tmp_path):
    copy = tmp_path / data.FOLDER_NAME
    shutil.copytree(folder, copy)
    return copy


def flip(path, offset: int, count: int, value: int = 0xFF) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset : offset + count] = bytes([value]) * count
    path.write_bytes(bytes(raw))


def test_the_record_holds_each_files_size_and_sha256(prepared):
    record = json.loads((prepared / data_record.MANIFEST_NAME).read_text())
    assert set(record["files"]) == {*data.REQUIRED_FILES, data.SYNTHETIC_MARKER}
    for name, entry in record["files"].items():
        assert entry == {
            "bytes": (prepared / name).stat().st_size,
            "sha256": data_record.sha256_of_file(prepared / name),
        }


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda path: flip(path, path.stat().st_size // 2, 1024), "data_batch_2: content changed"),  # same size
        (lambda path: flip(path, 0, 16, 0), "data_batch_2: content changed"),  # the pickle's header zeroed
        (lambda path: path.write_bytes(path.read_bytes()[:1000]), "data_batch_2: 1000 bytes"),
        (lambda path: path.unlink(), "data_batch_2: missing"),
    ],
)
def test_a_rerun_of_prepare_rebuilds_a_folder_whose_file_no_longer_matches(prepared, tmp_path, damage, said):
    """Before: sizes only, so a same-size flip was 'already prepared ... nothing to do'."""
    folder = copy_of(prepared, tmp_path)
    damage(folder / "data_batch_2")
    result = run_job("jobs.data.prepare", "--dest", str(tmp_path), "--synthetic", "10")
    assert result.returncode == 0, result.stderr
    assert "nothing to do" not in result.stdout
    assert "does not match its record" in result.stdout and said in result.stdout
    for name in data.REQUIRED_FILES:
        assert (folder / name).read_bytes() == (prepared / name).read_bytes()


def test_a_rerun_on_intact_data_checks_every_digest_and_does_nothing(prepared, tmp_path):
    folder = copy_of(prepared, tmp_path)
    before = (folder / data_record.MANIFEST_NAME).stat().st_mtime_ns
    result = run_job("jobs.data.prepare", "--dest", str(tmp_path), "--synthetic", "10")
    assert result.returncode == 0 and "nothing to do" in result.stdout
    assert f"all {len(data.REQUIRED_FILES) + 1} files match their SHA-256" in result.stdout
    assert (folder / data_record.MANIFEST_NAME).stat().st_mtime_ns == before


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda path: flip(path, path.stat().st_size // 2, 1024), "its content changed since it was prepared"),
        (lambda path: path.write_bytes(path.read_bytes()[:-100]), "when prepared"),
    ],
)
def test_training_refuses_data_that_does_not_match_the_record(prepared, tmp_path, damage, said):
    """Before: the flipped images were trained on without a word."""
    folder = copy_of(prepared, tmp_path)
    damage(folder / "data_batch_2")
    result = run_job("jobs.training.train", "--data", str(folder), "--run-dir", str(tmp_path / "run"), "--epochs", "1",
                     "--batch-size", "20")  # fmt: skip
    assert_one_line_error(result, cli.EXIT_CANNOT_CONTINUE, f"{folder / 'data_batch_2'} does not match the data "
                          "jobs.data.prepare recorded", said, "rerun jobs.data.prepare")  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_evaluate_refuses_a_changed_test_batch(prepared, tmp_path, trained_run):
    folder = copy_of(prepared, tmp_path)
    flip(folder / data.TEST_FILE, (folder / data.TEST_FILE).stat().st_size // 2, 64)
    result = run_job("jobs.results.evaluate", "--data", str(folder), "--model", str(trained_run / "model.pt"),
                     "--metrics-out", str(tmp_path / "metrics.json"))  # fmt: skip
    assert_one_line_error(
        result, cli.EXIT_CANNOT_CONTINUE, "test_batch does not match the data jobs.data.prepare recorded"
    )


def test_a_folder_without_a_record_trains_with_a_warning(tiny_cifar, tmp_path):
    """Data made by hand (or by an older prepare, sizes only) cannot be checked: said, not refused."""
    result = run_job("jobs.training.train", "--data", str(tiny_cifar), "--run-dir", str(tmp_path / "run"), "--epochs", "1",
                     "--batch-size", "50")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "has no record of jobs.data.prepare" in result.stdout
