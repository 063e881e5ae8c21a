"""Put CIFAR-10, or a synthetic stand-in, into DIR/cifar-10-batches-py: the data-prep Job.

    python -m jobs.data.prepare --dest DIR [--source URL|PATH|s3://bucket/key] [--md5 HEX] [--synthetic N]

- Default source: the official CIFAR-10 python tarball, checked against its published MD5.
- The download is streamed to disk while its MD5 is computed, extracted, and every file is
  read back and checked before the folder appears: everything is built in a hidden work folder
  inside DIR and renamed to `cifar-10-batches-py` as the last step, so a reader (or a training
  pod starting early) never sees a half-extracted folder under that name.
- A folder this tool already prepared from the same source (recorded in its `.prepared.json`,
  with every file's SHA-256: jobs.data.data_record) makes a rerun a no-op once every file still matches
  its digest (a fraction of a second for CIFAR-10's 180 MB). A file that does not match (flipped,
  truncated, deleted) makes the rerun build the folder again, saying which. Data prepared from
  another source is replaced.
- `--synthetic N` writes N generated images per class in CIFAR-10's format, for machines with
  no internet. The folder carries a SYNTHETIC file, and every job logs that the data is fake.
- Any failure (wrong checksum, truncated or corrupt archive, unreachable source) exits non-zero
  with one line and removes everything this run wrote.

Only numpy and the standard library (boto3 for s3:// only): this job must start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gzip
import hashlib
import http.client
import logging
import os
import re
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from jobs import cli
from jobs.data import cifar as data
from jobs.data import data_record

OFFICIAL_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
OFFICIAL_MD5 = "c58f30108f718f92721af3b95e74349a"
MANIFEST_NAME = data_record.MANIFEST_NAME
MAX_SYNTHETIC_PER_CLASS = 5000  # CIFAR-10's own size; more only costs memory and disk
_CHUNK_BYTES = 1 << 20
_HTTP_TIMEOUT_SECONDS = 60

log = logging.getLogger("jobs.data.prepare")


class SourceError(cli.JobError):
    """The source cannot be fetched, or what it delivered is not what it should be."""


# --- fetching ---------------------------------------------------------------------------------


class _HashingWriter:
    """File writer that computes the MD5 and counts bytes as the data streams through."""

    def __init__(self, file, label: str, expected_bytes: int | None = None):
        self._file = file
        self._label = label
        self.expected_bytes = expected_bytes
        self.md5 = hashlib.md5()
        self.bytes_written = 0
        self._next_report = time.monotonic() + 10

    def write(self, chunk: bytes) -> int:
        self.md5.update(chunk)
        self.bytes_written += len(chunk)
        if time.monotonic() >= self._next_report:
            self._next_report += 10
            of_total = f" of {self.expected_bytes / 1e6:.1f}" if self.expected_bytes else ""
            log.info("%s: %.1f%s MB so far", self._label, self.bytes_written / 1e6, of_total)
        return self._file.write(chunk)


# Makes the writer of a download, given its size in bytes when the source says it (else None).
WriterFor = Callable[[int | None], _HashingWriter]


def _fetch_http(url: str, writer_for: WriterFor) -> _HashingWriter:
    request = urllib.request.Request(url, headers={"User-Agent": "jobs.data.prepare"})
    try:
        with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT_SECONDS) as response:
            length = response.headers.get("Content-Length")
            writer = writer_for(int(length) if length and length.isdigit() else None)
            while chunk := response.read(_CHUNK_BYTES):
                writer.write(chunk)
    except urllib.error.HTTPError as error:
        raise SourceError(f"cannot download {url}: HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        raise SourceError(f"cannot reach {url}: {getattr(error.reason, 'strerror', None) or error.reason}") from None
    except http.client.IncompleteRead as error:
        raise SourceError(f"download of {url} was cut short after {len(error.partial)} bytes of this chunk") from None
    except (TimeoutError, ConnectionError, http.client.HTTPException) as error:
        raise SourceError(f"download of {url} failed: {str(error) or type(error).__name__}") from None
    if writer.expected_bytes is not None and writer.bytes_written != writer.expected_bytes:
        raise SourceError(
            f"download of {url} is truncated: got {writer.bytes_written} of {writer.expected_bytes} bytes"
        )
    return writer


def _fetch_s3(source: str, writer_for: WriterFor) -> _HashingWriter:
    bucket, _, key = source.removeprefix("s3://").partition("/")
    import boto3  # only here: it is slow to import and only s3:// needs it
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = boto3.client("s3")
    try:
        size = s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
        writer = writer_for(size)
        s3.download_fileobj(bucket, key, writer)
    except ClientError as error:
        details = error.response.get("Error", {})
        said = " ".join(text for text in (details.get("Code"), details.get("Message")) if text)
        raise SourceError(f"cannot download {source}: {said or error}") from None
    except BotoCoreError as error:
        raise SourceError(f"cannot download {source}: {error}") from None
    if writer.bytes_written != size:
        raise SourceError(f"download of {source} is truncated: got {writer.bytes_written} of {size} bytes")
    return writer


def _fetch_local(source: str, writer_for: WriterFor) -> _HashingWriter:
    """Only the reads are the source's errors: a write that fails (the volume full or read-only) raises
    its OSError for main, which names the volume, not the source."""
    path = Path(source.removeprefix("file://"))
    try:
        file = open(path, "rb")  # noqa: SIM115 (closed below; the reads and writes are told apart)
    except FileNotFoundError:
        raise SourceError(f"source file {path} does not exist") from None
    except IsADirectoryError:
        raise SourceError(f"source {path} is a folder; pass the .tar.gz file") from None
    except OSError as error:
        raise SourceError(f"cannot read source file {path}: {error.strerror}") from None
    with file:
        writer = writer_for(os.fstat(file.fileno()).st_size)
        while True:
            try:
                chunk = file.read(_CHUNK_BYTES)
            except OSError as error:
                raise SourceError(f"cannot read source file {path}: {error.strerror}") from None
            if not chunk:
                return writer
            writer.write(chunk)


def fetch(source: str, destination: Path) -> str:
    """Stream `source` into `destination`; returns the MD5 (hex) of what arrived."""
    fetcher: Callable[[str, WriterFor], _HashingWriter]
    if source.startswith("s3://"):
        fetcher = _fetch_s3
    elif source.startswith(("http://", "https://")):
        fetcher = _fetch_http
    else:
        fetcher = _fetch_local
    started = time.monotonic()
    with open(destination, "wb") as file:
        writer = fetcher(source, lambda size: _HashingWriter(file, f"fetching {source}", size))
    seconds = time.monotonic() - started
    log.info("fetched %s: %.1f MB in %.1f s", source, writer.bytes_written / 1e6, seconds)
    return writer.md5.hexdigest()


# --- checking, extracting, publishing ----------------------------------------------------------


def extract(archive: Path, into: Path, source: str) -> Path:
    """Extract the tarball and return its cifar-10-batches-py folder."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            # "data" filter: no absolute paths, no links or files outside `into`, no devices.
            tar.extractall(into, filter="data")
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise SourceError(f"{source} is not a readable .tar.gz archive, corrupt or truncated ({error})") from None
    except OSError as error:
        raise cli.volume_error(error, f"{into.parent} (extracting {source})") from None
    folder = into / data.FOLDER_NAME
    if not folder.is_dir():
        raise SourceError(f"{source} holds no {data.FOLDER_NAME}/ folder: it is not the CIFAR-10 python archive")
    return folder


def already_prepared(target: Path, request: dict) -> bool:
    """True when `target` was prepared by this tool for the same request and every file still
    matches the SHA-256 recorded for it; says why when a folder of the same request does not."""
    record = data_record.read(target)
    if record is None or record.get("request") != request:
        return False
    started = time.monotonic()
    changed = data_record.differences(target, record["files"])
    if changed:
        log.warning("WARNING: %s does not match its record (%s): preparing it again", target, "; ".join(changed))
        return False
    megabytes = sum(entry["bytes"] for entry in record["files"].values()) / 1e6
    seconds = time.monotonic() - started
    log.info("%s: all %d files match their SHA-256 (%.0f MB checked in %.2f s)", target, len(record["files"]),
             megabytes, seconds)  # fmt: skip
    return True


def _publish(staged: Path, target: Path, work_dir: Path) -> None:
    """Make `staged` appear as `target` with a rename, moving any previous folder out first."""
    if target.exists():
        os.rename(target, work_dir / "replaced")  # deleted together with the work folder
    try:
        os.rename(staged, target)
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        # Another prepare (another pod) published between our two renames: theirs stays.
        log.info("%s appeared meanwhile (another prepare run?); keeping it", target)


# --- command line -----------------------------------------------------------------------------


def _md5_hex(text: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{32}", text):
        raise argparse.ArgumentTypeError(f"must be 32 hexadecimal characters, got {text!r}")
    return text.lower()


def _synthetic_count(text: str) -> int:
    count = cli.positive_int(text)
    if count > MAX_SYNTHETIC_PER_CLASS:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_SYNTHETIC_PER_CLASS} images per class, got {text}")
    return count


def _check_source(source: str) -> str:
    scheme = source.partition("://")[0] if "://" in source else ""
    if scheme not in ("", "http", "https", "s3", "file"):
        raise argparse.ArgumentTypeError(
            f"unsupported scheme {scheme}://; use http(s)://..., s3://bucket/key or a local path"
        )
    if scheme == "s3" and not re.fullmatch(r"s3://[^/]+/.+", source):
        raise argparse.ArgumentTypeError(f"must look like s3://bucket/key, got {source}")
    return source


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m jobs.data.prepare",
        description="Download, check and extract CIFAR-10 (or generate a synthetic stand-in) into DEST/cifar-10-batches-py.",
    )
    parser.add_argument("--dest", required=True, type=Path, help="folder that receives cifar-10-batches-py/ (required)")
    origin = parser.add_mutually_exclusive_group()
    origin.add_argument(
        "--source", type=_check_source, help=f"URL, local path or s3://bucket/key (default: {OFFICIAL_URL})"
    )
    origin.add_argument("--synthetic", type=_synthetic_count, metavar="N",
                        help="generate N images per class instead of downloading (default: download --source)")  # fmt: skip
    parser.add_argument("--md5", type=_md5_hex,
                        help="expected MD5 of the archive (default: the official one for the default source)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="random seed of --synthetic (default: %(default)s)")
    return parser


def parse_args(argv: Sequence[str] | None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.synthetic is not None and args.md5:
        parser.error("--md5 applies to a downloaded archive, not to --synthetic")
    return args


def _request(args) -> dict:
    """What was asked for, as recorded in the manifest: same request twice means nothing to do."""
    if args.synthetic is not None:
        return {"synthetic_images_per_class": args.synthetic, "seed": args.seed}
    source = args.source or OFFICIAL_URL
    md5 = args.md5 or (OFFICIAL_MD5 if source == OFFICIAL_URL else None)
    return {"source": source, "md5": md5}


def _build(request: dict, work_dir: Path) -> Path:
    """Produce a complete, checked cifar-10-batches-py folder inside `work_dir`."""
    if "synthetic_images_per_class" in request:
        count = request["synthetic_images_per_class"]
        log.warning("WARNING: generating SYNTHETIC data (%d images per class), NOT CIFAR-10", count)
        folder = work_dir / data.FOLDER_NAME
        data.write_synthetic(folder, count, seed=request["seed"])
        return folder

    source, expected_md5 = request["source"], request["md5"]
    archive = work_dir / "archive"
    actual_md5 = fetch(source, archive)
    if expected_md5 is None:
        log.warning("no --md5 given for %s: only extraction and format checks guard against corruption", source)
    elif actual_md5 != expected_md5:
        raise SourceError(f"checksum mismatch for {source}: expected MD5 {expected_md5}, got {actual_md5}")
    else:
        log.info("MD5 %s verified", actual_md5)
    folder = extract(archive, work_dir / "extracted", source)
    archive.unlink()
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cli.configure_logging()
    request = _request(args)
    target = args.dest / data.FOLDER_NAME
    if already_prepared(target, request):
        log.info("%s is already prepared from the same source: nothing to do", target)
        return cli.EXIT_OK

    dest_existed = args.dest.is_dir()
    try:
        args.dest.mkdir(parents=True, exist_ok=True)
        work_dir = Path(tempfile.mkdtemp(prefix=".prepare-", dir=args.dest))
    except OSError as error:
        raise cli.volume_error(error, f"--dest {args.dest}") from None
    try:
        folder = _build(request, work_dir)
        images = data.check_folder(folder)  # reads every file back: catches what the checksum could not
        data_record.write(folder, request, images)
        _publish(folder, target, work_dir)
    except OSError as error:  # a volume that fills up or turns read-only while we write
        raise cli.volume_error(error, error.filename or args.dest) from None
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        if not dest_existed and not target.exists():
            with contextlib.suppress(OSError):
                args.dest.rmdir()  # the folder this run created, if it is still empty
    log.info("%s ready: %d images%s", target, images, " (SYNTHETIC)" if data.is_synthetic(target) else "")
    return cli.EXIT_OK


if __name__ == "__main__":
    cli.run(main, "jobs.data.prepare")
