"""Build the committed EC2 tables (infra/aws/data/) from a copy of SkyPilot's AWS catalog.

The catalog (skypilot-org/skypilot-catalog, `catalogs/v7/aws/vms.csv`; upstream-facts-2.md fact 20)
has one row per instance type and Availability Zone, in these columns:

    InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone

`Price` is the type's On-Demand $/hour in the region (the same on every zone row of a region),
`SpotPrice` the Spot $/hour in that zone (empty where the catalog has none), and `AvailabilityZone`
a zone *ID* (`usw2-az1`), which is the same in every account (zone *names* such as `us-west-2a` map
to different IDs per account). `GpuInfo` is a Python-literal blob that the tables do not need.

Two tables come out, both sorted so that a refresh is a readable diff:
- ec2_instances.csv: InstanceType,vCPUs,MemoryGiB,GPUs,GPU (one row per carried type)
- ec2_prices.csv: InstanceType,Region,AvailabilityZone,OnDemandUsd,SpotUsd (one row per zone)
and ec2_catalog_source.json records where they came from (repository, path, commit, its date).

Only the carried types are kept (see `scripts/refresh_prices.py` for how they are chosen): the whole
catalog is ~2.5 MB, and the project needs a few dozen types.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

CATALOG_COLUMNS = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "GpuInfo",
    "Price",
    "SpotPrice",
    "Region",
    "AvailabilityZone",
)
SHAPE_COLUMNS = ("InstanceType", "vCPUs", "MemoryGiB", "GPUs", "GPU")
PRICE_COLUMNS = ("InstanceType", "Region", "AvailabilityZone", "OnDemandUsd", "SpotUsd")

DATA_DIR = Path(__file__).resolve().parent / "data"
SHAPES_FILE = "ec2_instances.csv"
PRICES_FILE = "ec2_prices.csv"
SOURCE_FILE = "ec2_catalog_source.json"

REPOSITORY = "skypilot-org/skypilot-catalog"
CATALOG_PATH = "catalogs/v7/aws/vms.csv"


class CatalogError(ValueError):
    """The input is not the catalog's layout, or contradicts itself; the message says where."""


@dataclass(frozen=True)
class Tables:
    shapes: list[dict[str, str]]
    prices: list[dict[str, str]]


def _number(text: str) -> str:
    """'16.0' -> '16', '0.204200' -> '0.2042': the catalog's floats, written without noise (exact: no rounding)."""
    value = text.strip()
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return value


def read_catalog(text: str) -> list[dict[str, str]]:
    """The catalog's rows; CatalogError unless the header is exactly the catalog's columns."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != CATALOG_COLUMNS:
        raise CatalogError(
            f"not the catalog's vms.csv layout: header {reader.fieldnames}, expected {list(CATALOG_COLUMNS)}"
        )
    return list(reader)


def build(rows: Iterable[dict[str, str]], carried: set[str]) -> Tables:
    """The two tables for the carried types. A carried type the input lacks is simply absent (the loader
    then reports it as not in the table); a type whose rows disagree on its shape, or a region whose
    zones disagree on the On-Demand price, is a CatalogError (the tables would otherwise pick one)."""
    shapes: dict[str, dict[str, str]] = {}
    on_demand: dict[tuple[str, str], str] = {}
    prices: dict[tuple[str, str, str], dict[str, str]] = {}
    for line, row in enumerate(rows, start=2):
        name = row["InstanceType"]
        if name not in carried:
            continue
        count = _number(row["AcceleratorCount"]) if row["AcceleratorCount"].strip() else "0"
        shape = {
            "InstanceType": name,
            "vCPUs": _number(row["vCPUs"]),
            "MemoryGiB": _number(row["MemoryGiB"]),
            "GPUs": count,
            "GPU": row["AcceleratorName"].strip(),
        }
        if shapes.setdefault(name, shape) != shape:
            raise CatalogError(f"row {line}: {name} has shape {shape}, an earlier row {shapes[name]}")
        region, zone, price = row["Region"], row["AvailabilityZone"], _number(row["Price"])
        if on_demand.setdefault((name, region), price) != price:
            raise CatalogError(
                f"row {line}: {name} in {region} costs {price} On-Demand, another zone {on_demand[(name, region)]}"
            )
        prices[(name, region, zone)] = {
            "InstanceType": name,
            "Region": region,
            "AvailabilityZone": zone,
            "OnDemandUsd": price,
            "SpotUsd": _number(row["SpotPrice"]),
        }
    return Tables(shapes=[shapes[k] for k in sorted(shapes)], prices=[prices[k] for k in sorted(prices)])


def csv_text(columns: tuple[str, ...], rows: list[dict[str, str]]) -> str:
    """The rows as CSV text, a header of `columns` first (the carried tables' one format)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write(tables: Tables, source: dict[str, object], directory: Path = DATA_DIR) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SHAPES_FILE).write_text(csv_text(SHAPE_COLUMNS, tables.shapes), encoding="utf-8")
    (directory / PRICES_FILE).write_text(csv_text(PRICE_COLUMNS, tables.prices), encoding="utf-8")
    (directory / SOURCE_FILE).write_text(json.dumps(source, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def carried_types(directory: Path = DATA_DIR) -> set[str]:
    """The types the committed table carries now (a refresh keeps them)."""
    path = directory / SHAPES_FILE
    if not path.exists():
        return set()
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["InstanceType"] for row in csv.DictReader(handle)}
