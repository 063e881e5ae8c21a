"""EC2 instance shapes and prices from the committed price tables (infra/aws/data/), each with its source.

Three tables, each rebuilt by `scripts/refresh_prices.py`, each with a `*_source.json` naming what it was
read from and when:
- the zone table (ec2_prices.csv, ec2_instances.csv): a slice of skypilot-org/skypilot-catalog
  `catalogs/v7/aws/vms.csv` (upstream-facts-2.md fact 20; infra/aws/catalog_build.py says how), a few
  dozen types with On-Demand per region and Spot per zone ID. Its types are the ones `carried()` lists
  (the pool of same-shape Spot types is chosen among them) and its zones are the ones `zone_ids` knows;
- Karpenter's generated On-Demand prices (ec2_on_demand_karpenter.csv, us-east-1 only, the newest);
- the region-wide table (ec2_region_prices.csv): the ec2instances.info data bundled in the Go module
  github.com/cristim/ec2-instances-info, Linux On-Demand and the zones' Spot prices (zones unnamed) for
  every type it lists in every commercial region it lists (infra/aws/region_prices_build.py says how).
A price comes from the first table that has it, in that order. Lookups never guess: a type, region or
zone no table prices comes back as a `CatalogPrice` with `usd=None` and the reason, and a type with an
On-Demand price but no Spot price says so (never the On-Demand price, never zero).

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

from infra.aws import catalog_build, region_prices_build

_SOURCE = json.loads((catalog_build.DATA_DIR / catalog_build.SOURCE_FILE).read_text(encoding="utf-8"))

REPOSITORY: str = _SOURCE["repository"]
PATH: str = _SOURCE["path"]
COMMIT: str = _SOURCE["commit"]
# The commit's date when the refresh could read it (from GitHub's commits API); None otherwise, and
# COMMIT_DATE_NOTE says why. READ_ON is the day the copy was read.
COMMIT_DATE: str | None = _SOURCE.get("commitDate")
COMMIT_DATE_NOTE: str = _SOURCE.get("commitDateNote", "")
READ_ON: str = _SOURCE["readOn"]


_REGION_SOURCE = json.loads(
    (region_prices_build.DATA_DIR / region_prices_build.REGION_SOURCE_FILE).read_text(encoding="utf-8")
)
_KARPENTER_SOURCE = json.loads(
    (region_prices_build.DATA_DIR / region_prices_build.KARPENTER_SOURCE_FILE).read_text(encoding="utf-8")
)
REGION_READ_ON: str = _REGION_SOURCE["readOn"]
KARPENTER_READ_ON: str = _KARPENTER_SOURCE["readOn"]


def region_source_line() -> str:
    """'github.com/cristim/ec2-instances-info@v0.0.0-... data/instances.json (ec2instances.info data, commit
    32acf84f42eb of 2025-05-28, read 2026-11-28)'."""
    s = _REGION_SOURCE
    commit = (
        f"commit {s['commitPrefix']} of {s['commitTime'][:10]}"
        if s.get("commitPrefix")
        else f"of {str(s.get('versionTime'))[:10]}"
    )
    return f"{s['module']}@{s['version']} {s['path']} (ec2instances.info data, {commit}, read {s['readOn']})"


def karpenter_source_line() -> str:
    """'github.com/aws/karpenter-provider-aws@v1.15.2 pkg/.../zz_generated.pricing_aws.go (generated 2026-07-20 for us-east-1, read ...)'."""
    s = _KARPENTER_SOURCE
    return (
        f"{s['module']}@{s['version']} {s['path']} (generated {s['generatedAt'][:10]} for {s['generatedFor']}, "
        f"read {s['readOn']})"
    )


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
    usd: float | None  # None: not priced, and `reason` says why
    source: str
    reason: str = ""
    read_on: str = READ_ON  # the day the table it came from was read

    @property
    def known(self) -> bool:
        return self.usd is not None


@dataclass(frozen=True)
class SpotSummary:
    """The region's Spot prices by zone ID (the zone table), or by zone without the zones' names (the
    region-wide table: `unnamed`); median/low/high over the zones that have one."""

    by_zone: dict[str, float]
    unnamed: tuple[float, ...] = ()

    @property
    def values(self) -> tuple[float, ...]:
        return (*self.by_zone.values(), *self.unnamed)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@cache
def _shapes() -> dict[str, Shape]:
    with (catalog_build.DATA_DIR / catalog_build.SHAPES_FILE).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {
        row["InstanceType"]: Shape(
            vcpus=float(row["vCPUs"]),
            memory_gib=float(row["MemoryGiB"]),
            gpus=int(float(row["GPUs"])),
            gpu=row["GPU"] or None,
        )
        for row in rows
    }


@cache
def _region_rows() -> dict[tuple[str, str], tuple[float, tuple[float, ...]]]:
    """(type, region) -> (On-Demand, the zones' Spot prices) from the region-wide table."""
    with (region_prices_build.DATA_DIR / region_prices_build.REGION_FILE).open(newline="", encoding="utf-8") as handle:
        return {
            (row["InstanceType"], row["Region"]): (
                float(row["OnDemandUsd"]),
                tuple(float(p) for p in row["SpotUsd"].split(";") if p),
            )
            for row in csv.DictReader(handle)
        }


@cache
def _karpenter_rows() -> dict[tuple[str, str], float]:
    with (region_prices_build.DATA_DIR / region_prices_build.KARPENTER_FILE).open(
        newline="", encoding="utf-8"
    ) as handle:
        return {(row["InstanceType"], row["Region"]): float(row["OnDemandUsd"]) for row in csv.DictReader(handle)}


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
    return frozenset(
        row["AvailabilityZone"] for (_, where), rows in _zone_rows().items() if where == region for row in rows
    )


def carried() -> tuple[str, ...]:
    return tuple(sorted(_shapes()))


def shape(instance_type: str) -> Shape | None:
    """vCPUs, memory and GPUs of one node of the type as the price catalog states them; None when the
    table does not carry (price) it. What sizes nodes is infra/aws/instance_shapes.py, which knows
    every type; tests/aws/test_instance_shapes.py checks that the two agree."""
    return _shapes().get(instance_type)


def tables_line() -> str:
    """The three tables in one short line, for the reasons a price is missing."""
    r, k = _REGION_SOURCE, _KARPENTER_SOURCE
    return (
        f"{REPOSITORY} @ {COMMIT[:8]}; {r['module']} @ {r.get('commitPrefix', r['version'])} of "
        f"{str(r.get('commitTime') or r.get('versionTime'))[:10]}; {k['module']} {k['version']} "
        f"({k['generatedFor']}, generated {k['generatedAt'][:10]})"
    )


def _not_carried(instance_type: str) -> str:
    return (
        f"{instance_type} is in none of the price tables ({tables_line()}): newer than they are, or not an EC2 "
        "type; `scripts/refresh_prices.py` or preflight's live prices can price it"
    )


@cache
def _listed_types() -> frozenset[str]:
    return frozenset(_shapes()) | {kind for kind, _ in _region_rows()} | {kind for kind, _ in _karpenter_rows()}


def listed(instance_type: str) -> bool:
    """Whether any of the three price tables names the type (in some region)."""
    return instance_type in _listed_types()


def _not_offered(instance_type: str, region: str) -> str:
    return (
        f"no price table lists {instance_type} in {region} ({tables_line()}): not offered there when they were "
        "read, or the region is newer than they are"
    )


def on_demand(instance_type: str, region: str) -> CatalogPrice:
    """The On-Demand $/hour of one instance in the region: the zone table's, else Karpenter's (us-east-1,
    the newer of the two others), else the region-wide table's."""
    rows = _zone_rows().get((instance_type, region))
    if rows:
        return CatalogPrice(float(rows[0]["OnDemandUsd"]), source_line())
    if (instance_type, region) in _karpenter_rows():
        return CatalogPrice(
            _karpenter_rows()[(instance_type, region)], karpenter_source_line(), read_on=KARPENTER_READ_ON
        )
    if (instance_type, region) in _region_rows():
        return CatalogPrice(_region_rows()[(instance_type, region)][0], region_source_line(), read_on=REGION_READ_ON)
    if not listed(instance_type):
        return CatalogPrice(None, source_line(), _not_carried(instance_type))
    return CatalogPrice(None, source_line(), _not_offered(instance_type, region))


def spot(instance_type: str, region: str) -> tuple[SpotSummary | None, str]:
    """The region's Spot prices, or (None, why not): the zone table's (by zone ID) where it has any, else
    the region-wide table's (the zones' prices, zones unnamed)."""
    rows = _zone_rows().get((instance_type, region)) or []
    by_zone = {row["AvailabilityZone"]: float(row["SpotUsd"]) for row in rows if row["SpotUsd"]}
    if by_zone:
        return SpotSummary(by_zone), ""
    regional = _region_rows().get((instance_type, region))
    if regional and regional[1]:
        return SpotSummary({}, unnamed=regional[1]), ""
    if not listed(instance_type):
        return None, _not_carried(instance_type)
    if not rows and not regional and (instance_type, region) not in _karpenter_rows():
        return None, _not_offered(instance_type, region)
    return None, (
        f"no Spot price for {instance_type} in {region} in the price tables ({tables_line()}; Karpenter's has "
        "On-Demand only): this Spot node is not priced offline; preflight reads it from EC2's Spot price history"
    )


def _spot_source(summary: SpotSummary) -> tuple[str, str]:
    if summary.by_zone:
        return source_line(), READ_ON
    return f"{region_source_line()}, zones unnamed", REGION_READ_ON


def spot_median(instance_type: str, region: str) -> CatalogPrice:
    """The median Spot $/hour over the region's zones (what an offline estimate charges a Spot node)."""
    summary, why = spot(instance_type, region)
    if summary is None:
        return CatalogPrice(None, source_line(), why)
    source, read_on = _spot_source(summary)
    return CatalogPrice(
        round(summary.median, 6),
        f"{source}; Spot median of {len(summary.values)} zones, range ${summary.low:g}-${summary.high:g}",
        read_on=read_on,
    )
