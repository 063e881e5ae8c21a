"""Prices read from AWS for the user's own account, for preflight: On-Demand from the Price List API,
Spot from EC2's Spot price history. Each answer is a `prices.Price` whose source says where and when
it was read; a call that fails or answers something unusable gives None and one line saying why
(the estimate then keeps the catalog table's figure and says so).

- `pricing.get_products` (ServiceCode AmazonEC2; the Price List API is served from us-east-1 and
  answers for every region): one product per filter set, whose OnDemand term has a price dimension
  in `Hrs` with `pricePerUnit.USD` (botocore's pricing model: PriceList is a list of JSON strings,
  shape SynthesizedJsonPriceListJsonItem).
- `ec2.describe_spot_price_history` with StartTime = EndTime = now: "the last price change before
  the start time, which is the effective price as of the start time" (EC2 API reference,
  DescribeSpotPriceHistory), one per zone; the figure is the median over the stack's zones.
"""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from infra.aws import prices

PRICING_REGION = "us-east-1"
LINUX = "Linux/UNIX"


def why_failed(error: Exception) -> str:
    """One line on why an AWS call gave no answer (also live_service_prices.py's)."""
    if isinstance(error, ClientError):
        err = error.response.get("Error", {})
        return f"{err.get('Code', 'error')}: {err.get('Message', '')}".strip(": ")
    # A ResponseParserError quotes the endpoint's whole body (an HTML page from a proxy): its words, shortened.
    return " ".join(re.sub(r"<[^>]*>", " ", str(error)).split())[:160] or type(error).__name__


def on_demand(pricing: Any, instance_type: str, region: str, today: str) -> tuple[prices.Price | None, str]:
    """The On-Demand Linux $/hour of the type in the region, shared tenancy, no pre-installed software."""
    filters = [
        {"Type": "TERM_MATCH", "Field": name, "Value": value}
        for name, value in (
            ("instanceType", instance_type),
            ("regionCode", region),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
        )
    ]
    try:
        answer = pricing.get_products(ServiceCode="AmazonEC2", Filters=filters, MaxResults=10)
    except Exception as error:  # noqa: BLE001 (only the botocore call is inside: any error is its answer, not our code)
        return None, f"Price List API not used for {instance_type}: {why_failed(error)}"
    usd = set()
    for text in answer.get("PriceList", []):
        product = json.loads(text) if isinstance(text, str) else text
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                if dimension.get("unit") == "Hrs" and "USD" in dimension.get("pricePerUnit", {}):
                    usd.add(float(dimension["pricePerUnit"]["USD"]))
    if len(usd) != 1:
        return None, f"Price List API gave {len(usd)} On-Demand Linux prices for {instance_type} in {region}; not used"
    return prices.Price(
        usd.pop(), "instance-hour", f"AWS Price List API (pricing.get_products, read {today})", today
    ), ""


def spot(ec2: Any, instance_type: str, zones: list[str], now: datetime) -> tuple[prices.Price | None, str]:
    """The median over `zones` (all the region's zones when empty) of the current Spot $/hour."""
    kwargs: dict[str, Any] = {
        "InstanceTypes": [instance_type],
        "ProductDescriptions": [LINUX],
        "StartTime": now,
        "EndTime": now,
    }
    if zones:
        kwargs["Filters"] = [{"Name": "availability-zone", "Values": list(zones)}]
    latest: dict[str, tuple[datetime, float]] = {}
    try:
        while True:
            answer = ec2.describe_spot_price_history(**kwargs)
            for entry in answer.get("SpotPriceHistory", []):
                zone, stamp = entry["AvailabilityZone"], entry["Timestamp"]
                if zone not in latest or stamp > latest[zone][0]:
                    latest[zone] = (stamp, float(entry["SpotPrice"]))
            if not answer.get("NextToken"):
                break
            kwargs["NextToken"] = answer["NextToken"]
    except Exception as error:  # noqa: BLE001 (the calls and the reading of their answers only: a non-AWS answer)
        return None, f"Spot price history not used for {instance_type}: {why_failed(error)}"
    if not latest:
        # An answer, not a failure: no Spot market for the type there, so no Spot worker can start. The
        # estimate must not fall back to the catalog's prices of other zones and price it as if it could.
        where = ", ".join(zones) or "the region"
        return prices.Price(
            None,
            "instance-hour",
            f"NOT READ: EC2 has no Spot price for {instance_type} in {where}: "
            "no Spot market there, so no Spot worker can start (choose another type or region)",
            now.date().isoformat(),
        ), f"EC2 has no Spot price for {instance_type} in {where}"
    values = sorted(price for _, price in latest.values())
    low, high = values[0], values[-1]
    source = (
        f"EC2 Spot price history (describe_spot_price_history, read {now.date().isoformat()}); "
        f"median of {len(values)} zones, range ${low:g}-${high:g}"
    )
    return prices.Price(round(statistics.median(values), 6), "instance-hour", source, now.date().isoformat()), ""
