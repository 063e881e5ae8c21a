"""What a stack costs, item by item: per hour and per day between runs, per hour during a run, and at
most per run (the `cost` object of synth, preflight and `elastic-training cost`).

    {"hourlyUsd", "dailyUsd",              # between runs (the stack exists, nothing trains)
     "runHourlyUsd", "runMaxUsd", "runMaxMinutes",   # during a run; a run's ceiling (jobTimeoutMinutes)
     "capacityType", "items": [{"what", "quantity", "unitUsd", "unit", "hourlyUsd", "runHourlyUsd", "source"}],
     "pricesFrom", "unpriced", "note"}

Items: the EKS control plane at the standard or extended-support rate for the stack's Kubernetes
version on the day (infra/versions.py, or EKS's own answer in preflight), the NAT gateway and its
public IPv4 address, the On-Demand system node group every eks stack runs, the worker nodes (the
type's On-Demand price, or its Spot price when `capacityType` is spot), the nodes' gp3 root volumes
(nodeDiskGiB each), and per-GB rates that bill what is stored or moved, not time (EFS and ECR
storage, NAT data processing): those have quantity and hourlyUsd null and are not in the totals.

Between runs and during a run: worker nodes exist only while a run needs them (Karpenter's pool,
infra/components/capacity.py), so between runs there are none, and during a run there are
ceil(workers / workersPerNode) of them (`_worker_nodes`). A run's ceiling is the run rate for
jobTimeoutMinutes, the longest the training wait lets a run go.

Prices: EC2 from the price tables (infra/aws/instance_catalog.py: the zone table, then Karpenter's us-east-1
On-Demand and the region-wide table, each price naming its table) or, in preflight with
credentials, from the Price List API and the Spot price history (infra/aws/live_prices.py); the
rest from infra/aws/prices.py (us-east-1 and us-west-2 only) or, in preflight with credentials and
in any region, from the Price List API (infra/aws/live_service_prices.py). Every item names its
source. An item whose price was not read has unitUsd and hourlyUsd null and is named in `unpriced`; the totals then cover the priced items only,
and say so. Nothing here is a guess: no price, no number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from infra import versions
from infra.aws import instance_catalog, prices
import math

from infra.config import Settings, is_gpu_stack
from infra.specs import efa
from infra.config.capacity import SPOT as SPOT_SETTING  # the config value "spot"

ON_DEMAND, SPOT = "ON_DEMAND", "SPOT"


@dataclass
class LivePrices:
    """What preflight read from AWS for the stack's instance types and, by infra/aws/prices.py key, for
    its other billed items in its region; what is missing falls back to the tables."""

    on_demand: dict[str, prices.Price] = field(default_factory=dict)
    spot: dict[str, prices.Price] = field(default_factory=dict)
    services: dict[str, prices.Price] = field(default_factory=dict)


def capacity_type(settings: Settings) -> str:
    """ON_DEMAND or SPOT for the worker nodes (the `capacityType` key; On-Demand where a stack has none)."""
    return SPOT if settings.capacity_type == SPOT_SETTING else ON_DEMAND


def _worker_nodes(settings: Settings) -> tuple[int, int]:
    """(between runs, during a run): none between runs, one per workersPerNode workers during one."""
    return 0, math.ceil(settings.workers / settings.workers_per_node)


def _catalog_price(instance_type: str, region: str, capacity: str) -> prices.Price:
    found = (instance_catalog.spot_median if capacity == SPOT else instance_catalog.on_demand)(instance_type, region)
    source = found.source if found.known else f"NOT READ: {found.reason}"
    return prices.Price(found.usd, "instance-hour", source, found.read_on)


def node_price(settings: Settings, instance_type: str, capacity: str, live: LivePrices | None) -> prices.Price:
    """The hourly price of one node: preflight's live answer when it has one, else the catalog table."""
    answered = (live.spot if capacity == SPOT else live.on_demand).get(instance_type) if live else None
    return answered or _catalog_price(instance_type, settings.region, capacity)


def service_price(what: str, region: str, unit: str, live: LivePrices | None) -> prices.Price:
    """The price of one non-EC2 item: preflight's Price List answer when it has one, else the offline table."""
    answered = live.services.get(what) if live else None
    return answered or prices.find(what, region, unit)


def _item(
    what: str, quantity: float | None, price: prices.Price, factor: float | None, run_quantity: float | None = None
) -> dict[str, Any]:
    """factor turns quantity x unit price into USD per hour (1 for hourly units); None: a rate only."""

    def hourly(count: float | None) -> float | None:
        if price.usd is not None and count is not None and factor is not None:
            return round(count * price.usd * factor, 6)
        return None

    run_quantity = quantity if run_quantity is None else run_quantity
    return {
        "what": what,
        "quantity": quantity,
        "unitUsd": price.usd,
        "unit": price.unit,
        "hourlyUsd": hourly(quantity),
        "runHourlyUsd": hourly(run_quantity),
        "source": price.source,
    }


def _describe_nodes(count: int, instance_type: str, capacity: str, price: prices.Price) -> str:
    if capacity != SPOT:
        return f"worker nodes while a run trains: {count} x {instance_type} On-Demand"
    return (
        f"worker nodes while a run trains: {count} x {instance_type} Spot (price moves; {price.source.split('; ')[-1]})"
    )


def billed_items(settings: Settings) -> list[tuple[str, str]]:
    """(what, region) of every infra/aws/prices.py entry the stack's estimate needs."""
    if getattr(settings, "target", "eks") != "eks":
        return []
    return [
        (what, settings.region)
        for what in (
            "eks-standard",
            "eks-extended",
            "nat-gateway",
            "public-ipv4",
            "ebs-gp3",
            "efs-standard",
            "ecr-storage",
            "nat-data",
        )
    ]


def node_types(settings: Settings) -> list[str]:
    if getattr(settings, "target", "eks") != "eks":
        return []
    return list(dict.fromkeys([settings.node_instance_type, settings.system_node_instance_type]))


def missing_prices(settings: Settings) -> list[str]:
    """What the stack bills that has no entry at all: in infra/aws/prices.py, or in the catalog table."""
    missing = []
    for what, region in billed_items(settings):
        try:
            prices.lookup(what, region)
        except prices.MissingPrice as error:
            missing.append(str(error))
    for kind in node_types(settings):
        if not instance_catalog.listed(kind):
            missing.append(instance_catalog.on_demand(kind, settings.region).reason)
    return missing


def control_plane_phase(settings: Settings, today: date) -> str:
    return versions.eks_support_phase(settings.kubernetes_version, today)


def estimate(
    settings: Settings, today: date, *, phase: str | None = None, live: LivePrices | None = None
) -> dict[str, Any]:
    """The cost object. `phase` (standard/extended) and `live` replace the offline answers when
    preflight has EKS's, the Price List API's and the Spot price history's."""
    if getattr(settings, "target", "eks") != "eks":
        return {
            "hourlyUsd": 0.0,
            "dailyUsd": 0.0,
            "runHourlyUsd": 0.0,
            "runMaxUsd": 0.0,
            "runMaxMinutes": None,
            "capacityType": None,
            "items": [],
            "pricesFrom": "none needed",
            "unpriced": [],
            "note": "target is not eks: the stack creates no AWS resources that bill by the hour",
        }
    region = settings.region
    phase = phase or control_plane_phase(settings, today)
    rate = "eks-extended" if phase == versions.EXTENDED else "eks-standard"
    support = "extended support" if phase == versions.EXTENDED else "standard support"
    capacity = capacity_type(settings)
    idle_nodes, run_nodes = _worker_nodes(settings)
    worker_price = node_price(settings, settings.node_instance_type, capacity, live)
    # Every eks stack runs an On-Demand system node group (infra/components/cluster.py), same disk size.
    system_nodes = settings.system_node_count
    system_items = (
        [
            _item(
                f"system nodes: {system_nodes} x {settings.system_node_instance_type} On-Demand",
                system_nodes,
                node_price(settings, settings.system_node_instance_type, ON_DEMAND, live),
                1,
            )
        ]
        if system_nodes
        else []
    )
    per_month = 1 / prices.HOURS_PER_BILLING_MONTH
    items = [
        _item(
            f"EKS control plane (Kubernetes {settings.kubernetes_version}, {support})",
            1,
            service_price(rate, region, "cluster-hour", live),
            1,
        ),
        _item("NAT gateway", 1, service_price("nat-gateway", region, "NAT-gateway-hour", live), 1),
        _item(
            "public IPv4 address (the NAT gateway's Elastic IP)",
            1,
            service_price("public-ipv4", region, "address-hour", live),
            1,
        ),
        _item(
            _describe_nodes(run_nodes, settings.node_instance_type, capacity, worker_price),
            idle_nodes,
            worker_price,
            1,
            run_nodes,
        ),
        *system_items,
        _item(
            f"EBS gp3 root volumes: {idle_nodes + system_nodes} x {settings.node_disk_gib} GiB",
            (idle_nodes + system_nodes) * settings.node_disk_gib,
            service_price("ebs-gp3", region, "GB-month", live),
            per_month,
            (run_nodes + system_nodes) * settings.node_disk_gib,
        ),
        _item(
            "EFS storage, per GB stored (not in the totals)",
            None,
            service_price("efs-standard", region, "GB-month", live),
            None,
        ),
        _item(
            "ECR storage, per GB of images (not in the totals)",
            None,
            service_price("ecr-storage", region, "GB-month", live),
            None,
        ),
        _item(
            "NAT data processing, per GB through the gateway: image pulls, data downloads (not in the totals)",
            None,
            service_price("nat-data", region, "GB", live),
            None,
        ),
    ]
    hourly = round(sum(i["hourlyUsd"] for i in items if i["hourlyUsd"] is not None), 6)
    run_hourly = round(sum(i["runHourlyUsd"] for i in items if i["runHourlyUsd"] is not None), 6)
    timed_unpriced = [i["what"] for i in items if i["unitUsd"] is None and i["quantity"] is not None]
    note = (
        "complete for the hourly items"
        if not timed_unpriced
        else "lower bound: no price read for " + "; ".join(timed_unpriced)
    )
    return {
        "hourlyUsd": hourly,
        "dailyUsd": round(hourly * 24, 6),
        "runHourlyUsd": run_hourly,
        "runMaxUsd": round(run_hourly * settings.job_timeout_minutes / 60, 6),
        "runMaxMinutes": settings.job_timeout_minutes,
        "capacityType": capacity,
        "items": items,
        "pricesFrom": _sources(live),
        "unpriced": [i["what"] for i in items if i["unitUsd"] is None],
        "note": note,
        # EFA or TCP (infra/specs/efa.py): EFA interfaces cost nothing of their own, the path is said here.
        "interNode": efa.network_path(settings.node_instance_type, is_gpu_stack(settings)),
    }


def _sources(live: LivePrices | None) -> str:
    offline = (
        f"EC2 from {instance_catalog.source_line()}, else the region tables ({instance_catalog.tables_line()}; "
        "each node names the one it came from); the rest from infra/aws/prices.py (each item names its source)"
    )
    read = []
    if live and (live.on_demand or live.spot):
        nodes = sorted({p.source for p in (*live.on_demand.values(), *live.spot.values())})
        read.append(f"{'; '.join(nodes)} for the nodes it answered")
    if live and live.services:
        api = sorted({p.source.split("; ")[0] for p in live.services.values()})
        read.append(f"{'; '.join(api)} for {', '.join(live.services)}")
    return f"{'; '.join(read)}; otherwise {offline}" if read else offline


def usd(value: float | None) -> str:
    """$0.10, $0.045, $3.48: at least two decimals, at most four."""
    if value is None:
        return "not read"
    text = f"{value:,.4f}".rstrip("0")
    return "$" + (text if len(text.split(".")[1]) >= 2 else f"{value:,.2f}")


def summary(cost_object: dict[str, Any]) -> str:
    """One line: '$1.555 per hour, $37.32 per day; a run at most $3.11 (120 minutes)'."""
    hourly, daily, run = readme_cells(cost_object)
    return f"{hourly} per hour, {daily} per day; a run at most {run}"


def readme_cells(cost_object: dict[str, Any]) -> tuple[str, str, str]:
    """The stack tables' (README.md, docs/costs.md) per hour, per day and a-run-at-most cells (tests/cli/test_cost.py)."""
    bound = "" if cost_object["note"].startswith("complete") or not cost_object["items"] else " or more"
    hourly = f"{usd(cost_object['hourlyUsd'])}{bound}"
    if cost_object["runHourlyUsd"] != cost_object["hourlyUsd"]:
        hourly = f"{hourly} between runs, {usd(cost_object['runHourlyUsd'])}{bound} during one"
    minutes = cost_object["runMaxMinutes"]
    run = f"{usd(cost_object['runMaxUsd'])}{bound}" + (f" ({minutes} min)" if minutes else "")
    return hourly, f"{usd(cost_object['dailyUsd'])}{bound}", run


def item_line(item: dict[str, Any]) -> tuple[str, str, str]:
    """(what, unit price, per hour) of one item, as the cost lines and the preflight report print it."""
    unit = "not read" if item["unitUsd"] is None else f"{usd(item['unitUsd'])}/{item['unit']}"
    if item["quantity"] is None:
        hourly = "per unit, not in the totals"
    elif item["hourlyUsd"] is None:
        hourly = "price not read"
    elif item["runHourlyUsd"] != item["hourlyUsd"]:
        hourly = f"{usd(item['hourlyUsd'])}/hour between runs, {usd(item['runHourlyUsd'])}/hour during one"
    else:
        hourly = f"{usd(item['hourlyUsd'])}/hour"
    return item["what"], unit, hourly


# How long a source's short name may be: the full citations (up to 700 characters) are for
# `elastic-training cost STACK --sources` and cost.json; every other listing names the source only.
SHORT_SOURCE = 90


def short_source(source: str) -> str:
    """The source's name without its quotes and reasons: up to its first ': ', ' (' or '; '."""
    if source.startswith(("NOT READ", "NOT RECORDED")):
        return source.split(": ", 1)[0] + " (see --sources)"
    cut = min((i for i in (source.find(": "), source.find(" ("), source.find("; ")) if i > 0), default=len(source))
    name = source[:cut].strip()
    return name if len(name) <= SHORT_SOURCE else name[: SHORT_SOURCE - 3].rstrip() + "..."


def lines(cost_object: dict[str, Any], sources: bool = True, stack: str = "STACK") -> list[str]:
    """What synth, preflight and `elastic-training cost` print: the totals, each item with its source
    (the full citation with `sources`, else its short name and where the citations are)."""
    out = [f"cost: {summary(cost_object)} ({cost_object['note']})"]
    # What the totals leave out, where no one reads past the first lines: the worker nodes of a type
    # the price table does not carry are the largest item there is.
    out += [
        f"  NOT IN THE TOTALS: {item['what']}: {item['source'].removeprefix('NOT READ: ')}"
        for item in cost_object["items"]
        if item["unitUsd"] is None and item["quantity"] is not None
    ]
    for item in cost_object["items"]:
        what, unit, hourly = item_line(item)
        out.append(f"  {what}: {unit} -> {hourly}")
        out.append(f"      source: {item['source'] if sources else short_source(item['source'])}")
    out.append(f"  prices from: {cost_object['pricesFrom']}")
    if cost_object.get("interNode"):
        out.append(f"  between worker nodes: {cost_object['interNode']}")
    if not sources:
        out.append(f"  the sources in full: elastic-training cost {stack} --sources")
    return out
