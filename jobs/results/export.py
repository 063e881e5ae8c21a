"""Export a finished run's results to S3.

    python -m jobs.results.export --run-dir RUN --dest s3://BUCKET/PREFIX

Uploads RUN/model.pt and RUN/metrics.json (both required) and RUN/history.jsonl (if present) to
s3://BUCKET/PREFIX/<name>, each with its SHA-256 checksum, and prints each object's URI. Exit 0 when
every object is in place, 1 on a missing file or an S3 error (one line), 2 on a bad command line.

How it relies on S3 (botocore 1.44.5, s3 service model):
- PutObject with `ChecksumSHA256` (the base64 SHA-256 of the body) makes S3 check the body it
  received against it ("a data integrity check to verify that the data received is the same data
  that was originally sent"); a body that does not match is refused, not stored.
- One PutObject per file, never a multipart upload: "Amazon S3 never adds partial objects; if you
  receive a success response, Amazon S3 added the entire object to the bucket" (PutObject
  documentation). So an upload that breaks off leaves nothing under the key (or the previous
  version, untouched); the files here are a model of a few megabytes and two small JSON files.
- Reruns upload nothing: HeadObject with `ChecksumMode=ENABLED` returns the stored object's
  `ChecksumSHA256`; when it equals the local file's, the file is skipped. HeadObject needs only
  s3:GetObject; without s3:ListBucket a missing key answers 403 instead of 404 (HeadObject
  documentation), so both mean "not there yet" and the PutObject that follows gives the real answer.
- Each file is read once into memory, hashed and sent from those bytes, so the checksum is that of
  exactly the bytes sent even if the file changes meanwhile.

boto3's default session finds the credentials (IRSA's web identity token in the pod) and honours
AWS_ENDPOINT_URL (the tests point it at moto's S3 server on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from elastic_training import run_directory
from jobs import cli

log = logging.getLogger(__name__)

REQUIRED = (run_directory.MODEL, run_directory.METRICS)
OPTIONAL = (run_directory.HISTORY,)
# Bucket names: 3-63 lowercase letters, digits, '.', '-' (S3 bucket naming rules); the prefix is optional.
DEST = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/(?P<prefix>[^\s]*))?")


@dataclass(frozen=True)
class Destination:
    bucket: str
    prefix: str  # without leading or trailing '/'; may be empty

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"


def destination(text: str) -> Destination:
    match = DEST.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"must look like s3://bucket/prefix, got {text}")
    return Destination(match["bucket"], (match["prefix"] or "").strip("/"))


destination.__name__ = "S3 destination"


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(prog="jobs.results.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="the run directory (model.pt, metrics.json)")
    parser.add_argument("--dest", type=destination, required=True, help="s3://BUCKET/PREFIX")
    return parser


def parse_args(argv: Sequence[str] | None) -> Any:
    return build_parser().parse_args(argv)


def sha256_base64(body: bytes) -> str:
    """What S3's ChecksumSHA256 holds: the base64 of the 32-byte digest."""
    return base64.b64encode(hashlib.sha256(body).digest()).decode()


def files_to_export(run_dir: Path) -> list[Path]:
    missing = [name for name in REQUIRED if not (run_dir / name).is_file()]
    if missing:
        raise cli.JobError(f"{run_dir} has no {' and no '.join(missing)}: nothing exported (is the run finished?)")
    return [run_dir / name for name in (*REQUIRED, *OPTIONAL) if (run_dir / name).is_file()]


def stored_checksum(s3: Any, bucket: str, key: str) -> str | None:
    """The object's ChecksumSHA256, or None when there is no object (404, or 403 without ListBucket)."""
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "403", "NoSuchKey", "NotFound"):
            return None
        raise
    return head.get("ChecksumSHA256")


def put(s3: Any, bucket: str, key: str, body: bytes, checksum: str) -> None:
    """One PutObject: S3 stores all of it, checked against `checksum`, or nothing."""
    # ChecksumAlgorithm names the algorithm of the x-amz-checksum-sha256 value (PutObject,
    # ChecksumAlgorithm: "there must be a corresponding x-amz-checksum-algorithm ... header"). moto
    # stores a checksum only when the algorithm header is there (moto/s3/responses.py _get_checksum).
    s3.put_object(Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm="SHA256", ChecksumSHA256=checksum)


def export(run_dir: Path, dest: Destination, s3: Any) -> list[tuple[str, bool]]:
    """[(uri, uploaded)] for every file; uploaded is False when S3 already held the same bytes."""
    results = []
    for path in files_to_export(run_dir):
        try:
            body = path.read_bytes()
        except OSError as error:
            raise cli.JobError(f"cannot read {path}: {error.strerror}") from None
        checksum = sha256_base64(body)
        key = dest.key(path.name)
        if stored_checksum(s3, dest.bucket, key) == checksum:
            log.info("%s unchanged (sha256 %s), not uploaded", dest.uri(path.name), checksum)
            results.append((dest.uri(path.name), False))
            continue
        try:
            put(s3, dest.bucket, key, body, checksum)
        except OSError as error:  # the connection or the body broke off mid-request
            raise cli.JobError(
                f"the upload of {dest.uri(path.name)} broke off ({str(error) or type(error).__name__}); "
                "S3 keeps no part of a PutObject: run the export again"
            ) from None
        log.info("%s uploaded, %d bytes, sha256 %s", dest.uri(path.name), len(body), checksum)
        results.append((dest.uri(path.name), True))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cli.configure_logging()
    # botocore logs where it found credentials at INFO; the log is for what was exported.
    logging.getLogger("botocore").setLevel(logging.WARNING)
    import boto3  # only here: slow to import, and --help needs none of it
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        results = export(args.run_dir, args.dest, boto3.client("s3"))
    except ClientError as error:
        details = error.response.get("Error", {})
        raise cli.JobError(
            f"S3 refused the export to {args.dest.uri('')}: {details.get('Code', '?')}: {details.get('Message', error)}"
        ) from None
    except BotoCoreError as error:
        raise cli.JobError(f"cannot reach S3 for {args.dest.uri('')}: {error}") from None
    for uri, _ in results:
        print(uri, flush=True)
    return cli.EXIT_OK


if __name__ == "__main__":
    cli.run(main, "jobs.results.export")
