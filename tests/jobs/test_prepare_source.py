"""jobs.data.prepare's sources and checksums as properties, in-process (test_prepare.py runs the
command in subprocesses): the default source is always checked against the official MD5, what
arrives is hashed byte for byte, every short or failed transfer is refused with one line."""

from __future__ import annotations

import argparse
import hashlib
import http.client
import io
import logging

import pytest
from conftest import make_synthetic_cifar
from archive_server import make_tarball, md5

from jobs.data import cifar as data
from jobs.data import prepare


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> bytes:
    return make_tarball(make_synthetic_cifar(tmp_path_factory.mktemp("src"), train_per_class=1, test_per_class=1))


def request_for(*argv: str) -> dict:
    return prepare._request(prepare.parse_args(["--dest", "/d", *argv]))


# --- what is asked for ---------------------------------------------------------------------------


def test_the_default_source_carries_the_official_checksum_and_no_other_source_gets_it():
    assert request_for() == {"source": prepare.OFFICIAL_URL, "md5": prepare.OFFICIAL_MD5}
    assert request_for("--source", prepare.OFFICIAL_URL) == {
        "source": prepare.OFFICIAL_URL,
        "md5": prepare.OFFICIAL_MD5,
    }
    assert request_for("--source", "https://mirror.example/c.tgz") == {
        "source": "https://mirror.example/c.tgz",
        "md5": None,
    }
    assert request_for("--md5", "A" * 32) == {"source": prepare.OFFICIAL_URL, "md5": "a" * 32}
    assert request_for("--synthetic", "3", "--seed", "4") == {"synthetic_images_per_class": 3, "seed": 4}
    assert request_for("--synthetic", "3") == {"synthetic_images_per_class": 3, "seed": 0}


def test_a_wrong_archive_from_the_default_source_is_refused_and_nothing_is_left(tmp_path, monkeypatch, archive):
    """The official URL with no --md5: what arrives must still match the official MD5."""
    fetched = []

    def fake_http(url, writer_for):
        fetched.append(url)
        writer = writer_for(len(archive))
        writer.write(archive)
        return writer

    monkeypatch.setattr(prepare, "_fetch_http", fake_http)
    dest = tmp_path / "dest"
    with pytest.raises(prepare.SourceError) as refused:
        prepare.main(["--dest", str(dest)])
    assert fetched == [prepare.OFFICIAL_URL]
    assert str(refused.value) == (
        f"checksum mismatch for {prepare.OFFICIAL_URL}: expected MD5 {prepare.OFFICIAL_MD5}, got {md5(archive)}"
    )
    assert not dest.exists()


def test_a_matching_checksum_is_verified_and_no_checksum_only_warns(tmp_path, server, archive, caplog):
    url = server.serve("/ok.tgz", archive)
    caplog.set_level(logging.INFO, logger="jobs.data.prepare")
    for work in "abc":
        (tmp_path / work).mkdir()
    folder = prepare._build({"source": url, "md5": md5(archive)}, tmp_path / "a")
    assert folder == tmp_path / "a" / "extracted" / data.FOLDER_NAME and folder.is_dir()
    assert not (tmp_path / "a" / "archive").exists()
    assert f"MD5 {md5(archive)} verified" in caplog.messages
    caplog.clear()
    prepare._build({"source": url, "md5": None}, tmp_path / "b")
    assert f"no --md5 given for {url}: only extraction and format checks guard against corruption" in caplog.messages
    with pytest.raises(prepare.SourceError) as refused:
        prepare._build({"source": url, "md5": "0" * 32}, tmp_path / "c")
    assert str(refused.value) == f"checksum mismatch for {url}: expected MD5 {'0' * 32}, got {md5(archive)}"


@pytest.mark.parametrize(
    "text, value",
    [
        ("c58f30108f718f92721af3b95e74349a",) * 2,
        ("C58F30108F718F92721AF3B95E74349A", "c58f30108f718f92721af3b95e74349a"),
    ],
)
def test_md5_arguments_are_32_hex_digits_stored_lowercase(text, value):
    assert prepare._md5_hex(text) == value


@pytest.mark.parametrize("text", ["0" * 31, "0" * 33, "g" * 32, "", " " + "0" * 32])
def test_other_md5_arguments_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        prepare._md5_hex(text)
    assert str(refused.value) == f"must be 32 hexadecimal characters, got {text!r}"


@pytest.mark.parametrize(
    "source",
    [
        "https://h/c.tgz",
        "https://h/c.tgz?from=s3://b/k",
        "http://h/c.tgz",
        "s3://b/k",
        "s3://b/k/deeper",
        "file:///x.tgz",
        "/x.tgz",
        "relative.tgz",
    ],
)
def test_accepted_sources(source):
    assert prepare._check_source(source) == source


@pytest.mark.parametrize(
    "source, message",
    [
        ("ftp://h/c.tgz", "unsupported scheme ftp://; use http(s)://..., s3://bucket/key or a local path"),
        ("S3://b/k", "unsupported scheme S3://; use http(s)://..., s3://bucket/key or a local path"),
        ("s3://bucket", "must look like s3://bucket/key, got s3://bucket"),
        ("s3://bucket/", "must look like s3://bucket/key, got s3://bucket/"),
        ("s3:///key", "must look like s3://bucket/key, got s3:///key"),
    ],
)
def test_refused_sources(source, message):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        prepare._check_source(source)
    assert str(refused.value) == message


# --- what arrives: hashed and counted byte for byte ----------------------------------------------


def test_the_hashing_writer_passes_every_byte_through_and_hashes_exactly_them(monkeypatch, caplog):
    clock = iter([0.0, 5.0, 10.0, 11.0, 25.0])
    monkeypatch.setattr(prepare.time, "monotonic", lambda: next(clock))
    caplog.set_level(logging.INFO, logger="jobs.data.prepare")
    sink = io.BytesIO()
    writer = prepare._HashingWriter(sink, "fetching x", expected_bytes=3_000_000)
    chunks = [b"a" * 1_000_000, b"b" * 1_000_000, b"c", b"d" * 999_999]
    assert [writer.write(c) for c in chunks] == [len(c) for c in chunks]
    assert sink.getvalue() == b"".join(chunks) and writer.bytes_written == 3_000_000
    assert writer.md5.hexdigest() == hashlib.md5(b"".join(chunks)).hexdigest()
    # One progress line per 10 s (at 10 s and 25 s), never two for one period.
    assert caplog.messages == ["fetching x: 2.0 of 3.0 MB so far", "fetching x: 3.0 of 3.0 MB so far"]
    monkeypatch.undo()
    unknown = prepare._HashingWriter(io.BytesIO(), "y")
    assert unknown.expected_bytes is None and unknown.bytes_written == 0


def test_a_local_file_a_file_url_and_an_http_url_deliver_the_same_bytes_and_md5(tmp_path, server, archive):
    local = tmp_path / "c.tgz"
    local.write_bytes(archive)
    for source in (str(local), f"file://{local}", server.serve("/same.tgz", archive)):
        destination = tmp_path / "out"
        assert prepare.fetch(source, destination) == md5(archive)
        assert destination.read_bytes() == archive


def test_the_announced_size_reaches_the_writer(tmp_path, server, archive):
    sizes = []
    url = server.serve("/sized.tgz", archive)
    local = tmp_path / "c.tgz"
    local.write_bytes(archive)
    for fetcher, source in ((prepare._fetch_http, url), (prepare._fetch_local, str(local))):
        fetcher(source, lambda size: sizes.append(size) or prepare._HashingWriter(io.BytesIO(), "t", size))
    assert sizes == [len(archive), len(archive)]


def test_a_connection_dropped_before_the_announced_length_is_refused(tmp_path, server, archive):
    url = server.serve("/short.tgz", archive[:100], announced_length=len(archive))
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(url, tmp_path / "out")
    assert str(refused.value) in (
        f"download of {url} was cut short after 100 bytes of this chunk",
        f"download of {url} is truncated: got 100 of {len(archive)} bytes",
    )


def test_http_errors_and_unreachable_hosts_are_one_line(tmp_path, server):
    missing = server.url("/missing.tgz")
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(missing, tmp_path / "out")
    assert str(refused.value) == f"cannot download {missing}: HTTP 404 Not Found"
    closed = "http://127.0.0.1:1/c.tgz"
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(closed, tmp_path / "out")
    assert str(refused.value) == f"cannot reach {closed}: Connection refused"


def test_local_sources_that_are_missing_or_folders_are_one_line(tmp_path):
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(str(tmp_path / "nope.tgz"), tmp_path / "out")
    assert str(refused.value) == f"source file {tmp_path / 'nope.tgz'} does not exist"
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(f"file://{tmp_path}", tmp_path / "out")
    assert str(refused.value) == f"source {tmp_path} is a folder; pass the .tar.gz file"


def test_each_scheme_goes_to_its_own_fetcher(tmp_path, monkeypatch):
    used = []
    for name in ("_fetch_http", "_fetch_s3", "_fetch_local"):
        monkeypatch.setattr(prepare, name, lambda source, writer_for, name=name: used.append(name) or writer_for(0))
    for source in ("s3://b/k", "http://h/k", "https://h/k", "/local", "file:///local", "https3://x"):
        prepare.fetch(source, tmp_path / "out")
    assert used == ["_fetch_s3", "_fetch_http", "_fetch_http", "_fetch_local", "_fetch_local", "_fetch_local"]


# --- s3:// (moto's in-process S3; the subprocess run against moto's server is in test_prepare.py) ----


@pytest.fixture
def s3(monkeypatch):
    from moto import mock_aws

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        import boto3

        client = boto3.client("s3")
        client.create_bucket(Bucket="datasets")
        yield client


def test_an_s3_object_arrives_whole_with_its_md5_and_a_missing_one_is_one_line(tmp_path, s3, archive):
    s3.put_object(Bucket="datasets", Key="cifar/c.tgz", Body=archive)
    assert prepare.fetch("s3://datasets/cifar/c.tgz", tmp_path / "out") == md5(archive)
    assert (tmp_path / "out").read_bytes() == archive
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch("s3://datasets/nope.tgz", tmp_path / "out")
    assert str(refused.value) == "cannot download s3://datasets/nope.tgz: 404 Not Found"


def test_an_s3_download_shorter_than_its_object_is_refused(tmp_path, s3, archive, monkeypatch):
    """A fault injected into boto3's transfer: it returns without error after part of the object."""
    import boto3

    s3.put_object(Bucket="datasets", Key="c.tgz", Body=archive)
    real_client = boto3.client

    def short_client(*args, **kwargs):
        client = real_client(*args, **kwargs)
        monkeypatch.setattr(client, "download_fileobj", lambda bucket, key, writer: writer.write(archive[:10]))
        return client

    monkeypatch.setattr(boto3, "client", short_client)
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch("s3://datasets/c.tgz", tmp_path / "out")
    assert str(refused.value) == f"download of s3://datasets/c.tgz is truncated: got 10 of {len(archive)} bytes"


def test_an_unreachable_s3_endpoint_is_one_line(tmp_path, monkeypatch):
    import boto3
    from botocore.exceptions import EndpointConnectionError

    class Unreachable:
        def head_object(self, **_):
            raise EndpointConnectionError(endpoint_url="https://s3.example")

    monkeypatch.setattr(boto3, "client", lambda *_: Unreachable())
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch("s3://datasets/c.tgz", tmp_path / "out")
    assert (
        str(refused.value)
        == 'cannot download s3://datasets/c.tgz: Could not connect to the endpoint URL: "https://s3.example"'
    )


def test_the_config_refuses_exactly_the_synthetic_counts_data_prep_refuses():
    from infra import config

    assert config.MAX_SYNTHETIC_PER_CLASS == prepare.MAX_SYNTHETIC_PER_CLASS
    assert prepare._synthetic_count(str(prepare.MAX_SYNTHETIC_PER_CLASS)) == prepare.MAX_SYNTHETIC_PER_CLASS
    with pytest.raises(argparse.ArgumentTypeError):
        prepare._synthetic_count(str(prepare.MAX_SYNTHETIC_PER_CLASS + 1))


def test_an_s3_object_announces_its_size_and_an_s3_refusal_says_what_s3_said(tmp_path, s3, archive, monkeypatch):
    from botocore.exceptions import ClientError

    s3.put_object(Bucket="datasets", Key="c.tgz", Body=archive)
    sizes = []
    prepare._fetch_s3(
        "s3://datasets/c.tgz", lambda size: sizes.append(size) or prepare._HashingWriter(io.BytesIO(), "t", size)
    )
    assert sizes == [len(archive)]

    import boto3

    answers = iter([{"Error": {"Code": "AccessDenied"}}, {"Error": {"Message": "slow down"}}, {}])

    class Refusing:
        def head_object(self, **_):
            raise ClientError(next(answers), "HeadObject")

    monkeypatch.setattr(boto3, "client", lambda *_: Refusing())
    said = []
    for _ in range(3):
        with pytest.raises(prepare.SourceError) as refused:
            prepare.fetch("s3://datasets/c.tgz", tmp_path / "out")
        said.append(str(refused.value))
    assert said == [
        "cannot download s3://datasets/c.tgz: AccessDenied",
        "cannot download s3://datasets/c.tgz: slow down",
        "cannot download s3://datasets/c.tgz: An error occurred (Unknown) when calling the HeadObject "
        "operation: Unknown",
    ]


# --- synthetic data: what --synthetic asks for is what is written ----------------------------------


def test_a_synthetic_request_writes_that_many_images_from_that_seed_and_says_they_are_fake(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="jobs.data.prepare")
    (tmp_path / "work").mkdir()
    folder = prepare._build({"synthetic_images_per_class": 2, "seed": 5}, tmp_path / "work")
    assert folder == tmp_path / "work" / data.FOLDER_NAME
    assert caplog.messages == ["WARNING: generating SYNTHETIC data (2 images per class), NOT CIFAR-10"]
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert data.is_synthetic(folder)
    train = data.load_split(folder, "train")
    assert len(train.labels) == 2 * len(train.class_names)
    # Exactly the images write_synthetic makes from seed 5, and not those of another seed.
    for seed, same in ((5, True), (6, False)):
        expected = tmp_path / f"seed-{seed}"
        data.write_synthetic(expected, 2, seed=seed)
        assert (train.images == data.load_split(expected, "train").images).all() == same
    assert not (tmp_path / "work" / "archive").exists()  # nothing was downloaded


def test_an_archive_that_is_not_a_tarball_is_named_by_its_source(tmp_path, server):
    url = server.serve("/not-a-tarball.tgz", b"<html>a login page</html>")
    (tmp_path / "work").mkdir()
    with pytest.raises(prepare.SourceError) as refused:
        prepare._build({"source": url, "md5": None}, tmp_path / "work")
    assert str(refused.value).startswith(f"{url} is not a readable .tar.gz archive, corrupt or truncated (")


# --- streaming: never the whole archive in memory, progress and timing told right --------------------


class _Chunks:
    """A writer that records the size of every chunk it is handed."""

    def __init__(self):
        self.sizes = []

    def __call__(self, size):
        writer = prepare._HashingWriter(io.BytesIO(), "t", size)
        real_write = writer.write
        writer.write = lambda chunk: self.sizes.append(len(chunk)) or real_write(chunk)
        return writer


def test_every_source_streams_in_bounded_chunks(tmp_path, server):
    """The official archive is 170 MB: no fetcher may read it whole."""
    body = bytes(range(256)) * 10_000  # 2.56 MB
    local = tmp_path / "big.bin"
    local.write_bytes(body)
    for fetcher, source in ((prepare._fetch_local, str(local)), (prepare._fetch_http, server.serve("/big.bin", body))):
        chunks = _Chunks()
        fetcher(source, chunks)
        assert sum(chunks.sizes) == len(body) and max(chunks.sizes) <= prepare._CHUNK_BYTES, fetcher.__name__


def test_progress_is_reported_every_10_seconds_from_the_start(monkeypatch, caplog):
    """Byte counts chosen so that MB rounding shows a wrong divisor (2_050_001 / 1e6 = 2.1,
    / 1_000_001 = 2.0), and reports exactly at the 10 s marks."""
    times = iter([0.0, 9.9, 10.0, 19.9, 20.0, 29.9, 30.0])
    monkeypatch.setattr(prepare.time, "monotonic", lambda: next(times))
    caplog.set_level(logging.INFO, logger="jobs.data.prepare")
    writer = prepare._HashingWriter(io.BytesIO(), "fetching x", expected_bytes=5_150_001)
    for chunk in (1_000_000, 1_050_001, 1_000_000, 1_000_000, 1_100_000, 0):
        writer.write(b"z" * chunk)
    assert caplog.messages == [
        "fetching x: 2.1 of 5.2 MB so far",
        "fetching x: 4.1 of 5.2 MB so far",
        "fetching x: 5.2 of 5.2 MB so far",
    ]
    caplog.clear()
    times = iter([0.0, 10.0])
    unknown = prepare._HashingWriter(io.BytesIO(), "fetching y")
    unknown.write(b"z" * 2_050_001)
    assert caplog.messages == ["fetching y: 2.1 MB so far"]


def test_fetch_labels_its_progress_and_times_the_whole_transfer(tmp_path, monkeypatch, caplog):
    local = tmp_path / "c.tgz"
    local.write_bytes(b"z" * 2_050_001)  # two chunks of at most 1 MiB
    times = iter([100.0, 100.0, 110.0, 111.0, 112.5])  # start, writer made, two writes, end
    monkeypatch.setattr(prepare.time, "monotonic", lambda: next(times))
    caplog.set_level(logging.INFO, logger="jobs.data.prepare")
    prepare.fetch(str(local), tmp_path / "out")
    assert caplog.messages == [f"fetching {local}: 1.0 of 2.1 MB so far", f"fetched {local}: 2.1 MB in 12.5 s"]


# --- HTTP as servers really answer -------------------------------------------------------------------


def test_the_download_says_who_is_asking(server, tmp_path):
    url = server.serve("/ua.tgz", b"x")
    prepare.fetch(url, tmp_path / "out")
    assert server.user_agents[-1] == "jobs.data.prepare"


@pytest.mark.parametrize("length_header, announced", [(None, None), ("soon", None), ("3", 3)])
def test_a_missing_or_unreadable_content_length_means_an_unknown_size(server, length_header, announced):
    url = server.serve(f"/length-{length_header}.tgz", b"abc", length_header=length_header)
    chunks = _Chunks()
    writer = prepare._fetch_http(url, chunks)
    assert writer.expected_bytes == announced and writer.bytes_written == 3


def test_a_server_that_stalls_past_the_timeout_is_one_line(server, tmp_path, monkeypatch):
    monkeypatch.setattr(prepare, "_HTTP_TIMEOUT_SECONDS", 0.3)
    url = server.serve("/stalled.tgz", b"late", delay_seconds=2.0)
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(url, tmp_path / "out")
    assert str(refused.value) == f"download of {url} failed: timed out"


def test_a_url_with_no_host_is_one_line(tmp_path):
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch("http:///c.tgz", tmp_path / "out")
    assert str(refused.value) == "cannot reach http:///c.tgz: no host given"


@pytest.mark.parametrize(
    "error, said",
    [
        (http.client.IncompleteRead(b"abc"), "download of {url} was cut short after 3 bytes of this chunk"),
        (ConnectionResetError(), "download of {url} failed: ConnectionResetError"),
        (
            ConnectionResetError(104, "Connection reset by peer"),
            "download of {url} failed: [Errno 104] Connection reset by peer",
        ),
        (
            http.client.RemoteDisconnected("Remote end closed connection without response"),
            "download of {url} failed: Remote end closed connection without response",
        ),
    ],
)
def test_a_transfer_that_breaks_is_one_line(tmp_path, monkeypatch, error, said):
    """Faults injected where urllib raises them: while the response is read."""
    url = "http://mirror.example/c.tgz"

    class Breaking:
        headers = {}

        def __enter__(self):
            return self

        def __exit__(self, *_):
            return False

        def read(self, _size):
            raise error

    monkeypatch.setattr(prepare.urllib.request, "urlopen", lambda *_, **__: Breaking())
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(url, tmp_path / "out")
    assert str(refused.value) == said.format(url=url)


def test_a_local_path_through_a_file_is_one_line(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(prepare.SourceError) as refused:
        prepare.fetch(str(tmp_path / "plain" / "c.tgz"), tmp_path / "out")
    assert str(refused.value) == f"cannot read source file {tmp_path / 'plain' / 'c.tgz'}: Not a directory"
