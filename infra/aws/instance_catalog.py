"""EC2 instance shapes and prices from the committed catalog table (infra/aws/data/), with its source.

The table is a slice of skypilot-org/skypilot-catalog `catalogs/v7/aws/vms.csv` (upstream-facts-2.md
fact 20), built by `scripts/refresh_prices.py` (infra/aws/catalog_build.py says how); the source
file records the commit it was read at. Lookups never guess: a type, region or zone the table does
not price comes back as a `CatalogPrice` with `usd=None` and the reason.

Spot prices are per Availability Zone *ID* (`usw2-az1`): the stack knows its zones by *name*, and
names map to IDs per account, so offline the estimate uses a region-wide figure: the median of the
region's zone prices (`SpotSummary.median`), with the range (`low`, `high`) shown beside it. Spot
prices move; with credentials, preflight reads the current ones from EC2's Spot price history.
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from functools import cache

from infra.aws import catalog_build

_SOURCE = json.loads((catalog_build.DATA_DIR / catalog_build.SOURCE_FILE).read_text(encoding="utf-8"))

REPOSITORY: str = _SOURCE["repository"]
PATH: str = _SOURCE["path"]
COMMIT: str = _SOURCE["commit"]
# The commit's date when the refresh could read it (from GitHub's commits API); None otherwise, and
# COMMIT_DATE_NOTE says why. READ_ON is the day the copy was read.
COMMIT_DATE: str | None = _SOURCE.get("commitDate")
COMMIT_DATE_NOTE: str = _SOURCE.get("commitDateNote", "")
READ_ON: str = _SOURCE["readOn"]


def source_line() -> str:
    """'skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @ 27f67dd4 (commit of 2026-..., read 2026-11-24)'."""
    dated = f"commit of {COMMIT_DATE}" if COMMIT_DATE else "commit date not recorded"
    return f"{REPOSITORY} {PATH} @ {COMMIT[:8]} ({dated}, read {READ_ON})"


@dataclass(frozen=True)
class Shape:
    vcpus: float
    memory_gib: float
    gpus: int
    gpu: str | None


@dataclass(frozen=True)
class CatalogPrice:
    usd: float | None   # None: not priced, and `reason` says why
    source: str
    reason: str = ""

    @property
    def known(self) -> bool:
        return self.usd is not None


@dataclass(frozen=True)
class SpotSummary:
    """The region's Spot prices by zone ID; median/low/high over the zones that have one."""
    by_zone: dict[str, float]

    @property
    def median(self) -> float:
        return statistics.median(self.by_zone.values())

    @property
    def low(self) -> float:
        return min(self.by_zone.values())

    @property
    def high(self) -> float:
        return max(self.by_zone.values())


@cache
def _shapes() -> dict[str, Shape]:
    with (catalog_build.DATA_DIR / catalog_build.SHAPES_FILE).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {row["InstanceType"]: Shape(vcpus=float(row["vCPUs"]), memory_gib=float(row["MemoryGiB"]),
                                       gpus=int(float(row["GPUs"])), gpu=row["GPU"] or None) for row in rows}


@cache
def _zone_rows() -> dict[tuple[str, str], list[dict[str, str]]]:
    table: dict[tuple[str, str], list[dict[str, str]]] = {}
    with (catalog_build.DATA_DIR / catalog_build.PRICES_FILE).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        table.setdefault((row["InstanceType"], row["Region"]), []).append(row)
    return table


def zone_ids(region: str) -> frozenset[str]:
    """The zone IDs the table lists in the region, over every carried type: the zones known to exist
    there offline (a region may have more, where none of the carried types is offered)."""
    return frozenset(row["AvailabilityZone"] for (_, where), rows in _zone_rows().items() if where == region for row in rows)


def carried() -> tuple[str, ...]:
    return tuple(sorted(_shapes()))


def shape(instance_type: str) -> Shape | None:
    """vCPUs, memory and GPUs of one node of the type as the price catalog states them; None when the
    table does not carry (price) it. What sizes nodes is infra/aws/instance_shapes.py, which knows
    every type; tests/aws/test_instance_shapes.py checks that the two agree."""
    return _shapes().get(instance_type)


def _not_carried(instance_type: str) -> str:
    return (f"{instance_type} is not in the table ({source_line()}); add it with "
            f"`scripts/refresh_prices.py --add {instance_type}` from a copy of the catalog")


def on_demand(instance_type: str, region: str) -> CatalogPrice:
    """The On-Demand $/hour of one instance in the region."""
    if instance_type not in _shapes():
        return CatalogPrice(None, source_line(), _not_carried(instance_type))
    rows = _zone_rows().get((instance_type, region))
    if not rows:
        return CatalogPrice(None, source_line(), f"the catalog lists no {instance_type} in {region} (not offered there)")
    return CatalogPrice(float(rows[0]["OnDemandUsd"]), source_line())


def spot(instance_type: str, region: str) -> tuple[SpotSummary | None, str]:
    """The region's Spot prices, or (None, why not)."""
    if instance_type not in _shapes():
        return None, _not_carried(instance_type)
    rows = _zone_rows().get((instance_type, region))
    if not rows:
        return None, f"the catalog lists no {instance_type} in {region} (not offered there)"
    by_zone = {row["AvailabilityZone"]: float(row["SpotUsd"]) for row in rows if row["SpotUsd"]}
    if not by_zone:
        return None, f"the catalog has no Spot price for {instance_type} in any zone of {region}"
    return SpotSummary(by_zone), ""


def spot_median(instance_type: str, region: str) -> CatalogPrice:
    """The median Spot $/hour over the region's zones (what an offline estimate charges a Spot node)."""
    summary, why = spot(instance_type, region)
    if summary is None:
        return CatalogPrice(None, source_line(), why)
    return CatalogPrice(round(summary.median, 6), f"{source_line()}; Spot median of {len(summary.by_zone)} zones, "
                        f"range ${summary.low:g}-${summary.high:g}")
