"""What a stack costs per hour while it exists, item by item (the `cost` object of synth and preflight).

    {"hourlyUsd", "dailyUsd", "items": [{"what", "quantity", "unitUsd", "unit", "hourlyUsd"}],
     "pricesFrom", "unpriced", "note"}

Items: the EKS control plane at the standard or extended-support rate for the stack's Kubernetes
version on the day (infra/versions.py, or EKS's own answer in preflight), the NAT gateway hours, the
nodes (on-demand price x nodeCount), their gp3 root volumes (nodeDiskGiB each), and the per-GB rates
of EFS and ECR storage, shown as rates (they bill what is stored, not time): their hourlyUsd is null
and they are not in the total. An item whose price was not read from any source (infra/aws/prices.py)
has unitUsd and hourlyUsd null and is named in `unpriced`: the total then covers the priced items
only, and says so. Nothing here is a guess: no price, no number.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from infra import versions
from infra.aws import prices
from infra.config import Settings, is_gpu_stack


def _item(what: str, quantity: float | None, price: prices.Price, hourly_factor: float | None) -> dict[str, Any]:
    """hourly_factor turns quantity x unit price into USD per hour (1 for hourly units); None: a rate only."""
    hourly = None
    if price.known and quantity is not None and hourly_factor is not None:
        hourly = round(quantity * price.usd * hourly_factor, 6)
    return {"what": what, "quantity": quantity, "unitUsd": price.usd, "unit": price.unit, "hourlyUsd": hourly}


def billed_items(settings: Settings) -> list[tuple[str, str]]:
    """(what, region) of every price the stack's estimate needs, as infra/aws/prices.py keys them."""
    if getattr(settings, "target", "eks") != "eks":
        return []
    system = [f"ec2:{settings.system_node_instance_type}"] if is_gpu_stack(settings) else []
    return [(what, settings.region) for what in (
        "eks-standard", "eks-extended", "nat-gateway", f"ec2:{settings.node_instance_type}", *system, "ebs-gp3",
        "efs-standard", "ecr-storage")]


def missing_prices(settings: Settings) -> list[str]:
    """Items of the stack with no entry at all in infra/aws/prices.py (not even NOT READ)."""
    missing = []
    for what, region in billed_items(settings):
        try:
            prices.lookup(what, region)
        except prices.MissingPrice as error:
            missing.append(str(error))
    return missing


def control_plane_phase(settings: Settings, today: date) -> str:
    return versions.eks_support_phase(settings.kubernetes_version, today)


def estimate(settings: Settings, today: date, *, phase: str | None = None,
             node_price: prices.Price | None = None, node_price_from: str | None = None) -> dict[str, Any]:
    """The cost object. `phase` (standard/extended) and `node_price` replace the offline answers when
    preflight has EKS's and the Price List API's; `node_price_from` says where node_price came from."""
    if getattr(settings, "target", "eks") != "eks":
        return {"hourlyUsd": 0.0, "dailyUsd": 0.0, "items": [], "pricesFrom": "none needed", "unpriced": [],
                "note": "target is not eks: the stack creates no AWS resources that bill by the hour"}
    region = settings.region
    phase = phase or control_plane_phase(settings, today)
    rate = "eks-extended" if phase == versions.EXTENDED else "eks-standard"
    support = "extended support" if phase == versions.EXTENDED else "standard support"
    ec2 = node_price or prices.find(f"ec2:{settings.node_instance_type}", region, "instance-hour")
    # GPU stacks run a CPU system node group beside the GPU one (infra/components/cluster.py), on the same disk size.
    system_nodes = settings.system_node_count if is_gpu_stack(settings) else 0
    all_nodes = settings.node_count + system_nodes
    disk_gib = all_nodes * settings.node_disk_gib
    per_month = 1 / prices.HOURS_PER_BILLING_MONTH
    system_items = [_item(f"system nodes: {system_nodes} x {settings.system_node_instance_type} on-demand", system_nodes,
                          prices.find(f"ec2:{settings.system_node_instance_type}", region, "instance-hour"), 1)
                    ] if system_nodes else []
    items = [
        _item(f"EKS control plane (Kubernetes {settings.kubernetes_version}, {support})", 1, prices.find(rate, region, "cluster-hour"), 1),
        _item("NAT gateway", 1, prices.find("nat-gateway", region, "NAT-gateway-hour"), 1),
        _item(f"nodes: {settings.node_count} x {settings.node_instance_type} on-demand", settings.node_count, ec2, 1),
        *system_items,
        _item(f"EBS gp3 root volumes: {all_nodes} x {settings.node_disk_gib} GiB", disk_gib,
              prices.find("ebs-gp3", region, "GB-month"), per_month),
        _item("EFS storage, per GB stored (not in the total)", None, prices.find("efs-standard", region, "GB-month"), None),
        _item("ECR storage, per GB of images (not in the total)", None, prices.find("ecr-storage", region, "GB-month"), None),
    ]
    hourly = round(sum(item["hourlyUsd"] for item in items if item["hourlyUsd"] is not None), 6)
    unpriced = [item["what"] for item in items if item["unitUsd"] is None]
    sources = f"offline table infra/aws/prices.py (read {prices.READ_ON})"
    if node_price_from:
        sources = f"{node_price_from} for the nodes; {sources} for the rest"
    timed_unpriced = [item["what"] for item in items if item["unitUsd"] is None and item["quantity"] is not None]
    note = ("complete for the hourly items" if not timed_unpriced else
            "lower bound: no price read for " + "; ".join(timed_unpriced))
    return {"hourlyUsd": hourly, "dailyUsd": round(hourly * 24, 6), "items": items, "pricesFrom": sources,
            "unpriced": unpriced, "note": note}


def usd(value: float | None) -> str:
    """$0.10, $0.045, $3.48: at least two decimals, at most four."""
    if value is None:
        return "not read"
    text = f"{value:,.4f}".rstrip("0")
    return "$" + (text if len(text.split(".")[1]) >= 2 else f"{value:,.2f}")


def summary(cost_object: dict[str, Any]) -> str:
    """One line: '$0.145/hour or more, $3.48/day or more'."""
    hourly, daily = readme_cells(cost_object)
    return f"{hourly} per hour, {daily} per day"


def readme_cells(cost_object: dict[str, Any]) -> tuple[str, str]:
    """The README stack table's hourly and daily cells for a cost object (tests/test_cost.py keeps them in step)."""
    bound = "" if cost_object["note"].startswith("complete") or not cost_object["items"] else " or more"
    return f"{usd(cost_object['hourlyUsd'])}{bound}", f"{usd(cost_object['dailyUsd'])}{bound}"
