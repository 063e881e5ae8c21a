"""Build the region-wide EC2 price tables (infra/aws/data/) from two Go modules' bundled data.

The zone table (infra/aws/catalog_build.py, skypilot-catalog) carries a few dozen types with Spot
prices by zone ID. These two tables price the other types, region by region:

- ec2_region_prices.csv, from the Go module github.com/cristim/ec2-instances-info, whose
  `data/instances.json` is the ec2instances.info data set: a JSON list with one object per instance
  type, `pricing[region]["linux"]` holding `ondemand` (a string, $/hour) and, where the data set has
  them, `spot` (a list of strings: the current Spot price of each Availability Zone of the region
  where the type is offered; the zones are not named) with `spot_min`/`spot_avg`/`spot_max` over it.
  Rows: InstanceType,Region,OnDemandUsd,SpotUsd, SpotUsd the zone prices sorted and joined with ';'
  (empty where the data set has none). Only the regions of the commercial partition are kept
  (infra/aws/regions.py; the data set also has GovCloud, Local Zones and Wavelength Zones).
- ec2_on_demand_karpenter.csv, from the Go module github.com/aws/karpenter-provider-aws, whose
  `pkg/providers/pricing/zz_generated.pricing_aws.go` is Karpenter's generated On-Demand price map
  (`InitialOnDemandPricesAWS`, a Go map literal `"region": {"type": price, ...}`; the file's header
  says `// generated at <time> for <region>`). It has us-east-1 only, but is newer and names types
  that the ec2instances.info copy lacks. Rows: InstanceType,Region,OnDemandUsd.

Each table has a `*_source.json` beside it: the module, its version and the version's time as the
Go module proxy states them, the commit prefix a pseudo-version encodes, the file read, its sha256,
and the day it was read. `scripts/refresh_prices.py --ec2-instances-info/--karpenter` rebuilds both.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from infra.aws.catalog_build import csv_text

DATA_DIR = Path(__file__).resolve().parent / "data"

EC2II_MODULE = "github.com/cristim/ec2-instances-info"
EC2II_PATH = "data/instances.json"
REGION_FILE = "ec2_region_prices.csv"
REGION_SOURCE_FILE = "ec2_region_prices_source.json"
REGION_COLUMNS = ("InstanceType", "Region", "OnDemandUsd", "SpotUsd")

KARPENTER_MODULE = "github.com/aws/karpenter-provider-aws"
KARPENTER_PATH = "pkg/providers/pricing/zz_generated.pricing_aws.go"
KARPENTER_FILE = "ec2_on_demand_karpenter.csv"
KARPENTER_SOURCE_FILE = "ec2_on_demand_karpenter_source.json"
KARPENTER_COLUMNS = ("InstanceType", "Region", "OnDemandUsd")

_GENERATED = re.compile(r"^// generated at (\S+) for (\S+)$", re.MULTILINE)
_REGION_BLOCK = re.compile(r'^\t"([a-z0-9-]+)": \{$(.*?)^\t\},$', re.MULTILINE | re.DOTALL)
_ENTRY = re.compile(r'"([a-z0-9-]+\.[a-z0-9-]+)": ([0-9]+(?:\.[0-9]+)?)')
_PSEUDO = re.compile(r"^v[0-9.]+-(?:[0-9.]+\.)?([0-9]{14})-([0-9a-f]{12})$")


class SourceError(ValueError):
    """The input is not the layout this builder reads; the message says what differs."""


@dataclass(frozen=True)
class Table:
    rows: list[dict[str, str]]
    source: dict[str, object]


def _number(value: object) -> str:
    """'0.096000' -> '0.096' (exact; the sources' strings, without trailing zeros)."""
    text = str(value).strip()
    float(text)  # a ValueError for anything that is not a number
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def pseudo_version_commit(version: str) -> tuple[str | None, str | None]:
    """(commit prefix, commit time YYYY-MM-DDTHH:MM:SSZ) a Go pseudo-version encodes; (None, None) for a release."""
    found = _PSEUDO.match(version)
    if not found:
        return None, None
    stamp, commit = found.groups()
    return commit, f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[8:10]}:{stamp[10:12]}:{stamp[12:14]}Z"


def module_source(
    module: str, version: str, version_time: str | None, path: str, data: bytes, read_on: str
) -> dict[str, object]:
    source: dict[str, object] = {
        "module": module,
        "version": version,
        "versionTime": version_time,
        "path": path,
        "sha256": hashlib.sha256(data).hexdigest(),
        "readOn": read_on,
    }
    commit, commit_time = pseudo_version_commit(version)
    if commit:
        source["commitPrefix"], source["commitTime"] = commit, commit_time
    return source


def build_region_table(data: bytes, regions: set[str], source: dict[str, object]) -> Table:
    """The ec2instances.info rows for the given regions (Linux On-Demand and the zones' Spot prices)."""
    try:
        instances = json.loads(data)
    except ValueError as error:
        raise SourceError(f"{EC2II_PATH} is not JSON: {error}") from None
    if not isinstance(instances, list):
        raise SourceError(f"{EC2II_PATH}: expected a JSON list of instance types, got {type(instances).__name__}")
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for entry in instances:
        if not isinstance(entry, dict) or "instance_type" not in entry or not isinstance(entry.get("pricing"), dict):
            raise SourceError(f"{EC2II_PATH}: an entry without instance_type and pricing: {str(entry)[:120]}")
        name = entry["instance_type"]
        for region, by_os in entry["pricing"].items():
            linux = by_os.get("linux") if region in regions and isinstance(by_os, dict) else None
            if not isinstance(linux, dict) or not linux.get("ondemand"):
                continue
            spot = sorted((_number(p) for p in linux.get("spot") or ()), key=float)
            rows[(name, region)] = {
                "InstanceType": name,
                "Region": region,
                "OnDemandUsd": _number(linux["ondemand"]),
                "SpotUsd": ";".join(spot),
            }
    ordered = [rows[key] for key in sorted(rows)]
    source = dict(
        source,
        rows=len(ordered),
        types=len({r["InstanceType"] for r in ordered}),
        regions=len({r["Region"] for r in ordered}),
        withSpot=sum(1 for r in ordered if r["SpotUsd"]),
    )
    return Table(ordered, source)


def build_karpenter_table(text: str, source: dict[str, object]) -> Table:
    """Karpenter's generated On-Demand map, every region block the file has (us-east-1 today)."""
    generated = _GENERATED.search(text)
    if "InitialOnDemandPricesAWS" not in text or not generated:
        raise SourceError(f"{KARPENTER_PATH}: no InitialOnDemandPricesAWS map with a '// generated at' header")
    rows = []
    for region, block in _REGION_BLOCK.findall(text):
        rows += [
            {"InstanceType": name, "Region": region, "OnDemandUsd": _number(price)}
            for name, price in _ENTRY.findall(block)
        ]
    if not rows:
        raise SourceError(f"{KARPENTER_PATH}: the map has no region block with prices")
    rows.sort(key=lambda r: (r["InstanceType"], r["Region"]))
    source = dict(source, generatedAt=generated.group(1), generatedFor=generated.group(2), rows=len(rows))
    return Table(rows, source)


def write(table: Table, name: str, source_name: str, columns: tuple[str, ...], directory: Path = DATA_DIR) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(csv_text(columns, table.rows), encoding="utf-8")
    (directory / source_name).write_text(json.dumps(table.source, indent=2, sort_keys=True) + "\n", encoding="utf-8")
