#!/usr/bin/env python3
"""Rebuild infra/aws/data/ec2_shapes.csv (every EC2 instance type offered for Linux and its shape)
from the installed moto's DescribeInstanceTypes data, and record where it came from.

    .venv/bin/python scripts/refresh_instance_shapes.py            # from the installed moto
    .venv/bin/python scripts/refresh_instance_shapes.py --from FILE --moto-version X.Y.Z

moto is a pinned dev dependency (pyproject.toml); upgrade it, run this, review `git diff`. The
script prints the types added and dropped. infra/aws/shapes_build.py says which fields are read.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.aws import shapes_build  # noqa: E402


def installed_moto_file() -> tuple[Path, str]:
    distribution = metadata.distribution("moto")
    return Path(distribution.locate_file(shapes_build.MOTO_DATA)), distribution.version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--from", dest="source", type=Path, help="a copy of moto's instance_types.json.gz")
    parser.add_argument("--moto-version", help="the moto release that copy is from (required with --from)")
    args = parser.parse_args(argv)
    if args.source and not args.moto_version:
        parser.error("--from needs --moto-version")
    path, version = (args.source, args.moto_version) if args.source else installed_moto_file()
    rows = shapes_build.build(shapes_build.read_moto_file(path))
    target = shapes_build.DATA_DIR / shapes_build.SHAPES_FILE
    before = set()
    if target.exists():
        with target.open(newline="", encoding="utf-8") as handle:
            before = {r["InstanceType"] for r in csv.DictReader(handle)}
    target.write_text(shapes_build.csv_text(rows), encoding="utf-8")
    source = {
        "motoVersion": version,
        "path": shapes_build.MOTO_DATA,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "readOn": datetime.now(timezone.utc).date().isoformat(),
        "types": len(rows),
        "note": "EC2 DescribeInstanceTypes answers as moto ships them, less the Mac (macOS-only) types",
    }
    (shapes_build.DATA_DIR / shapes_build.SOURCE_FILE).write_text(
        json.dumps(source, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    after = {r["InstanceType"] for r in rows}
    for name in sorted(after - before):
        print(f"added {name}")
    for name in sorted(before - after):
        print(f"dropped {name}")
    print(f"{len(rows)} types from moto {version} -> {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
