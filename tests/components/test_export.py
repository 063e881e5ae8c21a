"""jobs.results.export against a real S3 API: moto's server (moto[server] 5.2.5) on 127.0.0.1, started here
and stopped by its PID; boto3 reaches it through AWS_ENDPOINT_URL (upstream-facts.md, fact 20).

What moto does and does not stand in for (moto 5.2.5, moto/s3/responses.py `_get_checksum`): it
stores and returns the x-amz-checksum-sha256 a client sends, without recomputing it ("TODO: AWS
computes the provided value and verifies it's the same"). So these tests check that the checksum
jobs.results.export sends is the SHA-256 of the stored bytes (computed here from what GetObject returns),
which is what real S3 verifies; S3's refusal of a wrong checksum is S3's, documented in the
botocore s3 model (PutObject, ChecksumSHA256), and is not re-enacted here.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
from pathlib import Path

import boto3
import pytest
from moto_server import running_moto_server

from jobs.results import export
from scanner_helpers import PYTHON, REPO

BUCKET = "artifacts-test"


@pytest.fixture(scope="module")
def s3_endpoint():
    with running_moto_server() as url:
        yield url


@pytest.fixture
def aws_env(s3_endpoint, monkeypatch):
    env = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-west-2",
        "AWS_DEFAULT_REGION": "us-west-2",
    }
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def s3(aws_env):
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    yield client
    versions = client.list_object_versions(Bucket=BUCKET).get("Versions", [])
    for version in versions:
        client.delete_object(Bucket=BUCKET, Key=version["Key"], VersionId=version["VersionId"])
    client.delete_bucket(Bucket=BUCKET)


@pytest.fixture
def run_dir(tmp_path) -> Path:
    directory = tmp_path / "run-1"
    directory.mkdir()
    (directory / "model.pt").write_bytes(os.urandom(300_000))
    (directory / "metrics.json").write_text('{"accuracy": 0.71}\n')
    (directory / "history.jsonl").write_text('{"epoch": 1}\n{"epoch": 2}\n')
    return directory


def run_export(run_dir: Path, dest: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PYTHON), "-m", "jobs.results.export", "--run-dir", str(run_dir), "--dest", dest],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
    )


def export_in_process(run_dir: Path, dest: str, capsys) -> tuple[int, str, str]:
    """The same as the command (cli.run around main), without a new interpreter per call."""
    from jobs import cli

    sigterm = signal.getsignal(signal.SIGTERM)  # cli.run installs its own; give pytest's back
    try:
        with pytest.raises(SystemExit) as exit_status:
            cli.run(lambda _: export.main(["--run-dir", str(run_dir), "--dest", dest]), "jobs.results.export")
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    captured = capsys.readouterr()
    return exit_status.value.code, captured.out, captured.err


def versions_of(s3, prefix: str) -> list[tuple[str, str]]:
    found = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix).get("Versions", [])
    return sorted((v["Key"], v["VersionId"]) for v in found)


def test_uploads_every_file_with_a_sha256_that_matches_the_stored_bytes(s3, run_dir, aws_env):
    result = run_export(run_dir, f"s3://{BUCKET}/runs/run-1", aws_env)
    assert result.returncode == 0, result.stderr
    names = ("model.pt", "metrics.json", "history.jsonl")
    uris = [line for line in result.stdout.splitlines() if line.startswith("s3://")]
    assert uris == [f"s3://{BUCKET}/runs/run-1/{name}" for name in names]
    for name in names:
        stored = s3.get_object(Bucket=BUCKET, Key=f"runs/run-1/{name}", ChecksumMode="ENABLED")
        body = stored["Body"].read()
        assert body == (run_dir / name).read_bytes()
        assert stored["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(body).digest()).decode()


def test_a_rerun_with_the_same_files_uploads_nothing(s3, run_dir, aws_env, capsys):
    dest = f"s3://{BUCKET}/runs/run-1"
    assert export_in_process(run_dir, dest, capsys)[0] == 0
    before = versions_of(s3, "runs/run-1/")
    status, out, err = export_in_process(run_dir, dest, capsys)
    assert status == 0, err
    assert out.count("unchanged") == 3
    assert versions_of(s3, "runs/run-1/") == before  # no new version: nothing was put
    # A changed file is uploaded again, and only that one.
    (run_dir / "metrics.json").write_text('{"accuracy": 0.72}\n')
    assert export_in_process(run_dir, dest, capsys)[0] == 0
    after = versions_of(s3, "runs/run-1/")
    assert len(after) == len(before) + 1 and [k for k, _ in set(after) - set(before)] == ["runs/run-1/metrics.json"]


def test_history_is_optional(s3, run_dir, aws_env, capsys):
    (run_dir / "history.jsonl").unlink()
    status, _, err = export_in_process(run_dir, f"s3://{BUCKET}/runs/run-2", capsys)
    assert status == 0, err
    assert [k for k, _ in versions_of(s3, "runs/run-2/")] == ["runs/run-2/metrics.json", "runs/run-2/model.pt"]


def test_a_missing_required_file_is_one_line_and_uploads_nothing(s3, run_dir, aws_env, capsys):
    (run_dir / "model.pt").unlink()
    status, _, err = export_in_process(run_dir, f"s3://{BUCKET}/runs/run-3", capsys)
    assert status == 1
    (line,) = err.splitlines()
    assert line.startswith("jobs.results.export: error: ") and "model.pt" in line, line
    assert versions_of(s3, "runs/run-3/") == []


def test_a_missing_bucket_is_one_line(s3, run_dir, aws_env, capsys):
    status, _, err = export_in_process(run_dir, "s3://no-such-bucket-here/runs/run-1", capsys)
    assert status == 1
    (line,) = err.splitlines()
    assert "NoSuchBucket" in line and "Traceback" not in err, line


@pytest.mark.parametrize("dest", ["s3://", "https://bucket/x", "s3://UPPER/x", "bucket/prefix"])
def test_a_bad_destination_is_a_usage_error(run_dir, dest, capsys):
    status, _, err = export_in_process(run_dir, dest, capsys)
    assert status == 2
    (line,) = err.splitlines()
    assert "--dest" in line and "s3://bucket/prefix" in line, line


class BreaksOff:
    """A request body that stops halfway, as when the pod is killed or the connection drops mid-upload."""

    def __init__(self, body: bytes):
        self.body, self.sent = body, 0

    def read(self, size: int = -1) -> bytes:
        if self.sent >= len(self.body) // 2:
            raise ConnectionResetError("connection reset mid-upload")
        size = len(self.body) // 2 if size is None or size < 0 else min(size, len(self.body) // 2 - self.sent)
        chunk = self.body[self.sent : self.sent + size]
        self.sent += len(chunk)
        return chunk

    def seek(self, offset: int, whence: int = 0) -> int:
        self.sent = offset if whence == 0 else len(self.body) if whence == 2 else self.sent + offset
        return self.sent

    def tell(self) -> int:
        return self.sent


def test_an_interrupted_upload_leaves_nothing_under_the_final_key(s3, run_dir, aws_env, monkeypatch, capsys):
    """One PutObject per file: S3 "never adds partial objects" (PutObject documentation); moto's
    server, fed half a body and a broken connection, stores nothing either."""
    sent_whole = export.put

    def put_half(client, bucket, key, body, checksum):
        if key.endswith("model.pt"):
            client.put_object(
                Bucket=bucket, Key=key, Body=BreaksOff(body), ContentLength=len(body), ChecksumSHA256=checksum
            )
        else:
            sent_whole(client, bucket, key, body, checksum)

    monkeypatch.setattr(export, "put", put_half)
    status, _, err = export_in_process(run_dir, f"s3://{BUCKET}/runs/run-4", capsys)
    assert status == 1
    (line,) = err.splitlines()
    assert line.startswith(f"jobs.results.export: error: the upload of s3://{BUCKET}/runs/run-4/model.pt broke off"), (
        line
    )
    assert versions_of(s3, "runs/run-4/model.pt") == []


def test_a_connection_error_without_a_message_is_named_by_its_type(s3, run_dir, aws_env, monkeypatch, capsys):
    """An exception object is always true, so `error or name` never reached the name: the line
    ended in "()" for an OSError raised without arguments."""

    def reset(*_):
        raise ConnectionResetError()

    monkeypatch.setattr(export, "put", reset)
    status, _, err = export_in_process(run_dir, f"s3://{BUCKET}/runs/run-5", capsys)
    assert status == 1
    (line,) = err.splitlines()
    assert f"s3://{BUCKET}/runs/run-5/" in line and "broke off (ConnectionResetError);" in line, line
