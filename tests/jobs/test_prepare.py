"""jobs.data.prepare against a real HTTP server on 127.0.0.1 (and moto's S3 server): download,
checksum, atomic extraction, the quick no-op rerun, and clean failures."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from archive_server import ArchiveServer, make_tarball, md5
from conftest import assert_one_line_error, make_synthetic_cifar, run_job
from moto_server import running_moto_server
from torchrun_harness import REPO_ROOT, free_port

from jobs.data import cifar as data
from jobs.data.prepare import MANIFEST_NAME

CIFAR_FILES = {*data.REQUIRED_FILES, data.SYNTHETIC_MARKER}


@pytest.fixture(scope="module")
def source_folder(tmp_path_factory) -> Path:
    return make_synthetic_cifar(tmp_path_factory.mktemp("source"), train_per_class=20, test_per_class=5)


@pytest.fixture(scope="module")
def archive(source_folder) -> bytes:
    return make_tarball(source_folder)


def listing(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()} if folder.exists() else set()


def test_downloads_verifies_and_extracts(tmp_path, server, archive, source_folder):
    url = server.serve("/ok/cifar-10-python.tar.gz", archive)
    result = run_job("jobs.data.prepare", "--dest", str(tmp_path / "dest"), "--source", url, "--md5", md5(archive))

    assert result.returncode == 0, result.stderr
    target = tmp_path / "dest" / data.FOLDER_NAME
    assert listing(tmp_path / "dest") == {data.FOLDER_NAME}  # no work folder or archive left
    assert listing(target) == CIFAR_FILES | {MANIFEST_NAME}
    for name in CIFAR_FILES:
        assert (target / name).read_bytes() == (source_folder / name).read_bytes()
    manifest = json.loads((target / MANIFEST_NAME).read_text())
    assert manifest["request"] == {"source": url, "md5": md5(archive)}
    assert manifest["images"] == 10 * 20 + 10 * 5
    assert "MD5" in result.stdout and "verified" in result.stdout


def test_second_run_is_a_no_op_in_under_a_second_of_cpu(tmp_path, server, archive):
    url = server.serve("/twice/cifar-10-python.tar.gz", archive)
    arguments = ("--dest", str(tmp_path), "--source", url, "--md5", md5(archive))
    first = run_job("jobs.data.prepare", *arguments)
    assert first.returncode == 0, first.stderr
    manifest_before = (tmp_path / data.FOLDER_NAME / MANIFEST_NAME).stat().st_mtime_ns

    # The rerun's own CPU time (wait4 on exactly that child), not the wall clock: under the test command's
    # load the process can wait longer than a second for a core while doing well under a second of work.
    # The wall clock still bounds a rerun that would block instead of work.
    log = tmp_path / "second.log"
    started = time.monotonic()
    with open(log, "wb") as log_file:
        second = subprocess.Popen(
            [sys.executable, "-m", "jobs.data.prepare", *arguments],
            cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    pid = 0
    while pid == 0 and time.monotonic() - started < 30:
        pid, status, usage = os.wait4(second.pid, os.WNOHANG)
        time.sleep(0.05)
    if pid == 0:
        second.kill()
        second.wait()
        pytest.fail(f"a no-op rerun still ran after 30 s: {log.read_text(errors='replace')}")
    second.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    output, cpu_seconds = log.read_text(), usage.ru_utime + usage.ru_stime

    assert second.returncode == 0, output
    assert "nothing to do" in output
    assert cpu_seconds <= 1.0, f"no-op rerun took {cpu_seconds:.2f} s of CPU"
    assert server.requests.count("/twice/cifar-10-python.tar.gz") == 1  # nothing downloaded again
    assert (tmp_path / data.FOLDER_NAME / MANIFEST_NAME).stat().st_mtime_ns == manifest_before


def test_a_different_source_replaces_the_data(tmp_path, server, archive):
    assert run_job("jobs.data.prepare", "--dest", str(tmp_path), "--synthetic", "1").returncode == 0
    url = server.serve("/replace/cifar.tar.gz", archive)
    result = run_job("jobs.data.prepare", "--dest", str(tmp_path), "--source", url)
    assert result.returncode == 0, result.stderr
    assert "no --md5 given" in result.stdout  # a custom source has no published checksum
    assert json.loads((tmp_path / data.FOLDER_NAME / MANIFEST_NAME).read_text())["images"] == 250
    assert listing(tmp_path) == {data.FOLDER_NAME}


def _failure_cases(archive: bytes, source_folder: Path, server: ArchiveServer, tmp_path: Path):
    """(name, source args, phrase expected in the error line)."""
    broken_pickle_folder = tmp_path / "broken"
    shutil.copytree(source_folder, broken_pickle_folder)
    (broken_pickle_folder / "data_batch_3").write_bytes(b"\x80\x04 this is not a pickle")
    escaping = make_tarball(source_folder, {"../escaped.txt": b"outside the destination"})
    no_folder = io.BytesIO()
    with tarfile.open(fileobj=no_folder, mode="w:gz") as tar:
        tar.add(source_folder, arcname="something-else")
    random_bytes = os.urandom(len(archive))
    return [
        ("wrong checksum", ["--source", server.serve("/a.tgz", archive), "--md5", "0" * 32], "checksum mismatch"),
        (
            "truncated archive",
            ["--source", server.serve("/b.tgz", archive[: len(archive) // 2])],
            "corrupt or truncated",
        ),
        ("corrupt archive", ["--source", server.serve("/c.tgz", random_bytes)], "corrupt or truncated"),
        ("connection cut short", ["--source", server.serve("/d.tgz", archive[:5000], len(archive))], "download of"),
        ("HTTP 404", ["--source", server.url("/not-served.tgz")], "HTTP 404"),
        ("nothing listening", ["--source", f"http://127.0.0.1:{free_port()}/x.tgz"], "cannot reach"),
        ("missing local file", ["--source", str(tmp_path / "absent.tar.gz")], "does not exist"),
        (
            "corrupt pickle inside",
            ["--source", server.serve("/f.tgz", make_tarball(broken_pickle_folder))],
            "data_batch_3",
        ),
        ("member escaping dest", ["--source", server.serve("/g.tgz", escaping)], "escaped.txt"),
        ("not the CIFAR archive", ["--source", server.serve("/h.tgz", no_folder.getvalue())], "cifar-10-batches-py"),
    ]


def test_failures_exit_with_one_line_and_leave_nothing(tmp_path, server, archive, source_folder):
    """Every case runs twice: into a destination that does not exist yet (it must not be
    left behind) and into one holding good data (which must survive untouched). All runs
    are independent processes and go a few at a time, the failing runs into the good
    folder concurrently, as several pods might."""
    good = tmp_path / "good"
    assert run_job("jobs.data.prepare", "--dest", str(good), "--synthetic", "2").returncode == 0
    good_manifest = (good / data.FOLDER_NAME / MANIFEST_NAME).read_text()
    cases = _failure_cases(archive, source_folder, server, tmp_path)
    attempts = [(name, tmp_path / f"fresh-{index}", args, phrase) for index, (name, args, phrase) in enumerate(cases)]
    attempts += [(name, good, args, phrase) for name, args, phrase in cases]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda attempt: run_job("jobs.data.prepare", "--dest", str(attempt[1]), *attempt[2]), attempts)
        )

    for (name, dest, _, phrase), result in zip(attempts, results):
        # Content that fails its check once extracted: downloading it again gives the same (exit 3).
        assert_one_line_error(result, 3 if name == "corrupt pickle inside" else 1, phrase)
        if dest != good:
            assert not dest.exists(), (name, listing(dest))
    assert listing(good) == {data.FOLDER_NAME}
    assert (good / data.FOLDER_NAME / MANIFEST_NAME).read_text() == good_manifest
    assert not (tmp_path / "escaped.txt").exists()


BAD_COMMAND_LINES = [
    ([], "--dest"),
    (["--synthetic", "0"], "--synthetic"),
    (["--synthetic", "many"], "--synthetic"),
    (["--synthetic", "5001"], "1..5000"),
    (["--md5", "xyz"], "32 hexadecimal"),
    (["--source", "ftp://example.com/c.tgz"], "unsupported scheme ftp://"),
    (["--source", "s3://bucket-only"], "s3://bucket/key"),
    (["--synthetic", "3", "--source", "/x.tgz"], "not allowed with"),
    (["--synthetic", "3", "--md5", "0" * 32], "--md5 applies to a downloaded archive"),
    (["--colour", "blue"], "unrecognized arguments"),
]


def test_bad_command_lines(tmp_path):
    def attempt(case):
        arguments, _ = case
        dest_args = [] if arguments == [] else ["--dest", str(tmp_path / "dest")]
        return run_job("jobs.data.prepare", *dest_args, *arguments)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(attempt, BAD_COMMAND_LINES))
    for (_, phrase), result in zip(BAD_COMMAND_LINES, results):
        assert_one_line_error(result, 2, phrase)
    assert not (tmp_path / "dest").exists()


def test_synthetic_data_is_cifar_format_and_says_so(tmp_path):
    result = run_job("jobs.data.prepare", "--dest", str(tmp_path), "--synthetic", "5")
    assert result.returncode == 0, result.stderr
    assert "SYNTHETIC" in result.stdout
    folder = tmp_path / data.FOLDER_NAME
    # Read the way most CIFAR-10 code reads the official files.
    with open(folder / "data_batch_1", "rb") as file:
        batch = pickle.load(file, encoding="bytes")
    assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
    assert batch[b"data"].dtype.name == "uint8" and batch[b"data"].shape == (10, 3072)
    with open(folder / "batches.meta", "rb") as file:
        meta = pickle.load(file, encoding="bytes")
    assert meta[b"label_names"][0] == b"airplane" and meta[b"num_vis"] == 3072
    assert (folder / data.SYNTHETIC_MARKER).exists()


def test_extracted_folder_appears_complete_or_not_at_all(tmp_path, server, tmp_path_factory):
    """Watch the destination while a larger archive is being extracted: the folder name
    must never show a partial set of files."""
    big_archive = make_tarball(make_synthetic_cifar(tmp_path_factory.mktemp("big"), 200, 100))
    url = server.serve("/big.tgz", big_archive)
    target = tmp_path / data.FOLDER_NAME
    observations: list[frozenset[str]] = []
    process = subprocess.Popen(
        [sys.executable, "-m", "jobs.data.prepare", "--dest", str(tmp_path), "--source", url, "--md5", md5(big_archive)],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        while process.poll() is None:
            try:
                observations.append(frozenset(os.listdir(target)))
            except FileNotFoundError:
                observations.append(frozenset())
    finally:
        process.kill() if process.poll() is None else None
        process.wait(timeout=30)
    assert process.returncode == 0, process.stderr.read()
    complete = frozenset(CIFAR_FILES | {MANIFEST_NAME})
    assert set(observations) <= {frozenset(), complete}
    assert frozenset() in observations  # we did watch while it worked


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server on 127.0.0.1 (tests/moto_server.py), stopped by PID."""
    with running_moto_server() as endpoint:
        yield endpoint


def test_s3_source(tmp_path, s3_endpoint, archive):
    import boto3

    credentials = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    s3.create_bucket(Bucket="datasets")
    s3.put_object(Bucket="datasets", Key="cifar/cifar-10-python.tar.gz", Body=archive)
    environment = {"AWS_ENDPOINT_URL_S3": s3_endpoint, **credentials}

    result = run_job("jobs.data.prepare", "--dest", str(tmp_path / "ok"), "--source",
                     "s3://datasets/cifar/cifar-10-python.tar.gz", "--md5", md5(archive), **environment)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert listing(tmp_path / "ok" / data.FOLDER_NAME) == CIFAR_FILES | {MANIFEST_NAME}

    missing = run_job(
        "jobs.data.prepare", "--dest", str(tmp_path / "missing"), "--source", "s3://datasets/nope.tar.gz", **environment
    )
    assert_one_line_error(missing, 1, "s3://datasets/nope.tar.gz", "404")
    assert not (tmp_path / "missing").exists()
