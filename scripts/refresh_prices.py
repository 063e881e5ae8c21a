#!/usr/bin/env python3
"""Rebuild the EC2 price and shape tables (infra/aws/data/) from a newer copy of SkyPilot's AWS catalog.

One command, one reviewable diff:

    python scripts/refresh_prices.py --from-github            # newest commit of catalogs/v7/aws/vms.csv
    python scripts/refresh_prices.py --csv vms.csv --commit SHA [--commit-date YYYY-MM-DD]

Carried types: those the table carries now, the GPU table (infra/aws/gpu_instances.py), every
nodeInstanceType/systemNodeInstanceType in stacks/, and any `--add TYPE`; `--all` carries every type
of the catalog (what a machine that can reach GitHub should run: `--from-github --all`). The script prints what
changed (types added or dropped, On-Demand prices that moved) before `git diff` shows the rows.

--from-github asks GitHub's REST API "List commits" (GET /repos/{owner}/{repo}/commits with
`path` and `per_page=1`; docs.github.com/en/rest/commits/commits) for the newest commit that touched
the file, takes its `sha` and `commit.committer.date`, and downloads the file at that sha.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.aws import catalog_build  # noqa: E402
from infra.aws.gpu_instances import NVIDIA_INSTANCES  # noqa: E402

GITHUB_API = "https://api.github.com"
GITHUB_RAW = "https://raw.githubusercontent.com"
STACK_TYPE_KEYS = ("elastic-training:nodeInstanceType", "elastic-training:systemNodeInstanceType")


def stack_types(stacks_dir: Path) -> set[str]:
    found = set()
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        config = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("config", {})
        found.update(str(config[key]) for key in STACK_TYPE_KEYS if key in config)
    return found


def _get(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.github+json",
                                                   "User-Agent": "elastic-training-refresh-prices"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def newest_commit(api: str) -> tuple[str, str]:
    """(sha, YYYY-MM-DD) of the newest commit that touched the catalog file."""
    query = urllib.parse.urlencode({"path": catalog_build.CATALOG_PATH, "per_page": 1})
    commits = json.loads(_get(f"{api}/repos/{catalog_build.REPOSITORY}/commits?{query}"))
    if not commits:
        raise SystemExit(f"GitHub lists no commit of {catalog_build.CATALOG_PATH} in {catalog_build.REPOSITORY}")
    return commits[0]["sha"], commits[0]["commit"]["committer"]["date"][:10]


def _old_prices(directory: Path) -> dict[tuple[str, str], str]:
    path = directory / catalog_build.PRICES_FILE
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as handle:
        return {(row["InstanceType"], row["Region"]): row["OnDemandUsd"] for row in csv.DictReader(handle)}


def changes(before_types: set[str], before: dict[tuple[str, str], str], tables: catalog_build.Tables) -> list[str]:
    """Human lines for the summary: types added and dropped, On-Demand prices that moved."""
    after_types = {row["InstanceType"] for row in tables.shapes}
    after = {(row["InstanceType"], row["Region"]): row["OnDemandUsd"] for row in tables.prices}
    lines = [f"added {name}" for name in sorted(after_types - before_types)]
    lines += [f"dropped {name} (not in this copy of the catalog)" for name in sorted(before_types - after_types)]
    lines += [f"{name} in {region}: On-Demand ${before[(name, region)]} -> ${price}"
              for (name, region), price in sorted(after.items())
              if (name, region) in before and before[(name, region)] != price]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--csv", type=Path, help="a local copy of catalogs/v7/aws/vms.csv")
    source.add_argument("--from-github", action="store_true", help="download the newest commit's copy")
    parser.add_argument("--commit", help="the catalog commit the --csv copy was taken at (required with --csv)")
    parser.add_argument("--commit-date", help="that commit's date, YYYY-MM-DD")
    parser.add_argument("--add", action="append", default=[], metavar="TYPE", help="carry this instance type too")
    parser.add_argument("--all", action="store_true", default=False,
                        help="carry every instance type of the catalog (issue 39: about 1,400 types in every region "
                             "it lists; the tables then take a few MB)")
    parser.add_argument("--data-dir", type=Path, default=catalog_build.DATA_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--stacks-dir", type=Path, default=ROOT / "stacks", help=argparse.SUPPRESS)
    parser.add_argument("--github-api", default=GITHUB_API, help=argparse.SUPPRESS)
    parser.add_argument("--github-raw", default=GITHUB_RAW, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.csv:
        if not args.commit:
            parser.error("--csv needs --commit: the catalog commit the copy was taken at")
        text, commit, commit_date = args.csv.read_text(encoding="utf-8"), args.commit, args.commit_date
    else:
        commit, commit_date = newest_commit(args.github_api)
        raw = f"{args.github_raw}/{catalog_build.REPOSITORY}/{commit}/{catalog_build.CATALOG_PATH}"
        text = _get(raw).decode()
    try:
        rows = catalog_build.read_catalog(text)
        before_types = catalog_build.carried_types(args.data_dir)
        carried = before_types | set(NVIDIA_INSTANCES) | stack_types(args.stacks_dir) | set(args.add)
        if args.all:
            carried |= {row["InstanceType"] for row in rows}
        before = _old_prices(args.data_dir)
        tables = catalog_build.build(rows, carried)
    except catalog_build.CatalogError as error:
        print(f"refresh_prices: {error}", file=sys.stderr)
        return 2
    source = {"repository": catalog_build.REPOSITORY, "path": catalog_build.CATALOG_PATH, "commit": commit,
              "commitDate": commit_date, "readOn": datetime.now(timezone.utc).date().isoformat(), "rows": len(tables.prices)}
    if not commit_date:
        source["commitDateNote"] = "not given (--commit-date)"
    catalog_build.write(tables, source, args.data_dir)
    for line in changes(before_types, before, tables):
        print(line)
    print(f"{len(tables.shapes)} types, {len(tables.prices)} zone rows from {catalog_build.REPOSITORY} @ {commit[:8]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
