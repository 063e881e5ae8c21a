#!/usr/bin/env python3
"""Rebuild the EC2 price and shape tables (infra/aws/data/) from newer copies of their sources.

One command, one reviewable diff:

    python scripts/refresh_prices.py --from-github            # newest commit of catalogs/v7/aws/vms.csv
    python scripts/refresh_prices.py --csv vms.csv --commit SHA [--commit-date YYYY-MM-DD]
    python scripts/refresh_prices.py --ec2-instances-info latest   # the region-wide table (every type, every region)
    python scripts/refresh_prices.py --karpenter v1.15.2           # Karpenter's us-east-1 On-Demand table

--ec2-instances-info VERSION and --karpenter VERSION take the Go module (github.com/cristim/ec2-instances-info,
github.com/aws/karpenter-provider-aws) from the Go module proxy with the go command (`go mod download -json
MODULE@VERSION`, GOPROXY as the environment sets it), read the data file out of the module's zip and rebuild
ec2_region_prices.csv / ec2_on_demand_karpenter.csv with their *_source.json (infra/aws/region_prices_build.py
says what is read). Any of the four sources may be refreshed alone.

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
import os
import subprocess
import sys
import tempfile
import zipfile
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.aws import catalog_build, region_prices_build  # noqa: E402
from infra.aws.gpu_instances import NVIDIA_INSTANCES  # noqa: E402
from infra.aws.regions import commercial_regions  # noqa: E402

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
    request = urllib.request.Request(
        url, headers={"Accept": "application/vnd.github+json", "User-Agent": "elastic-training-refresh-prices"}
    )
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
    lines += [
        f"{name} in {region}: On-Demand ${before[(name, region)]} -> ${price}"
        for (name, region), price in sorted(after.items())
        if (name, region) in before and before[(name, region)] != price
    ]
    return lines


def go_module_file(module: str, version: str, path: str) -> tuple[bytes, str, str | None]:
    """(the file's bytes, the resolved version, the version's time) of MODULE@VERSION from the Go module
    proxy, by the go command. The file is read out of the downloaded zip: `go mod download` may refuse to
    extract a module whose go.mod needs a newer Go, but it has fetched the zip by then."""
    env = dict(os.environ, GOFLAGS="-mod=mod")
    with tempfile.TemporaryDirectory() as empty:
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise SystemExit(f"refresh_prices: go mod download {module}@{version} failed: {done.stderr.strip()}") from None
    zip_path = Path(answer.get("Zip") or "")
    if not zip_path.is_file():
        raise SystemExit(
            f"refresh_prices: go mod download {module}@{version}: {answer.get('Error') or done.stderr.strip()}"
        )
    resolved = answer["Version"]
    info = json.loads(Path(answer["Info"]).read_text(encoding="utf-8")) if answer.get("Info") else {}
    with zipfile.ZipFile(zip_path) as archive:
        data = archive.read(f"{module}@{resolved}/{path}")
    return data, resolved, info.get("Time")


def refresh_region_table(version: str, data_dir: Path, today: str, fetch=go_module_file) -> str:
    data, resolved, when = fetch(region_prices_build.EC2II_MODULE, version, region_prices_build.EC2II_PATH)
    source = region_prices_build.module_source(
        region_prices_build.EC2II_MODULE, resolved, when, region_prices_build.EC2II_PATH, data, today
    )
    table = region_prices_build.build_region_table(data, set(commercial_regions()), source)
    region_prices_build.write(
        table,
        region_prices_build.REGION_FILE,
        region_prices_build.REGION_SOURCE_FILE,
        region_prices_build.REGION_COLUMNS,
        data_dir,
    )
    return (
        f"{table.source['types']} types in {table.source['regions']} regions, {len(table.rows)} rows "
        f"({table.source['withSpot']} with Spot) from {region_prices_build.EC2II_MODULE}@{resolved}"
    )


def refresh_karpenter_table(version: str, data_dir: Path, today: str, fetch=go_module_file) -> str:
    data, resolved, when = fetch(region_prices_build.KARPENTER_MODULE, version, region_prices_build.KARPENTER_PATH)
    source = region_prices_build.module_source(
        region_prices_build.KARPENTER_MODULE, resolved, when, region_prices_build.KARPENTER_PATH, data, today
    )
    table = region_prices_build.build_karpenter_table(data.decode("utf-8"), source)
    region_prices_build.write(
        table,
        region_prices_build.KARPENTER_FILE,
        region_prices_build.KARPENTER_SOURCE_FILE,
        region_prices_build.KARPENTER_COLUMNS,
        data_dir,
    )
    return (
        f"{len(table.rows)} On-Demand rows (generated {table.source['generatedAt']} for "
        f"{table.source['generatedFor']}) from {region_prices_build.KARPENTER_MODULE}@{resolved}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--csv", type=Path, help="a local copy of catalogs/v7/aws/vms.csv")
    source.add_argument("--from-github", action="store_true", help="download the newest commit's copy")
    parser.add_argument("--commit", help="the catalog commit the --csv copy was taken at (required with --csv)")
    parser.add_argument("--commit-date", help="that commit's date, YYYY-MM-DD")
    parser.add_argument("--add", action="append", default=[], metavar="TYPE", help="carry this instance type too")
    parser.add_argument(
        "--all",
        action="store_true",
        default=False,
        help="carry every instance type of the catalog (issue 39: about 1,400 types in every region "
        "it lists; the tables then take a few MB)",
    )
    parser.add_argument(
        "--ec2-instances-info",
        metavar="VERSION",
        help=f"rebuild the region-wide table from the Go module {region_prices_build.EC2II_MODULE} "
        "at VERSION ('latest' or a version)",
    )
    parser.add_argument(
        "--karpenter",
        metavar="VERSION",
        help=f"rebuild the Karpenter On-Demand table from the Go module {region_prices_build.KARPENTER_MODULE}",
    )
    parser.add_argument("--data-dir", type=Path, default=catalog_build.DATA_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--stacks-dir", type=Path, default=ROOT / "stacks", help=argparse.SUPPRESS)
    parser.add_argument("--github-api", default=GITHUB_API, help=argparse.SUPPRESS)
    parser.add_argument("--github-raw", default=GITHUB_RAW, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not (args.csv or args.from_github or args.ec2_instances_info or args.karpenter):
        parser.error("name a source: --from-github, --csv, --ec2-instances-info or --karpenter")
    today = datetime.now(timezone.utc).date().isoformat()
    try:
        if args.ec2_instances_info:
            print(refresh_region_table(args.ec2_instances_info, args.data_dir, today))
        if args.karpenter:
            print(refresh_karpenter_table(args.karpenter, args.data_dir, today))
    except region_prices_build.SourceError as error:
        print(f"refresh_prices: {error}", file=sys.stderr)
        return 2
    if not (args.csv or args.from_github):
        return 0

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
    source = {
        "repository": catalog_build.REPOSITORY,
        "path": catalog_build.CATALOG_PATH,
        "commit": commit,
        "commitDate": commit_date,
        "readOn": today,
        "rows": len(tables.prices),
    }
    if not commit_date:
        source["commitDateNote"] = "not given (--commit-date)"
    catalog_build.write(tables, source, args.data_dir)
    for line in changes(before_types, before, tables):
        print(line)
    print(f"{len(tables.shapes)} types, {len(tables.prices)} zone rows from {catalog_build.REPOSITORY} @ {commit[:8]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
