"""What the Spot market says about the worker types in the stack's region, right now (read-only).

- `current_prices`: EC2 DescribeSpotPriceHistory with StartTime = EndTime = now, which answers the
  price in force at that moment for each type and zone ("When you specify a start and end time,
  the operation returns the prices of the instance types within that time range. It also returns
  the last price change before the start time, which is the effective price as of the start
  time", botocore 1.44.5 ec2 model, DescribeSpotPriceHistory
  documentation), Linux only, paged through NextToken.
- `placement_score`: EC2 GetSpotPlacementScores for the worker types at the pool's size, for the
  region as a whole (SingleAvailabilityZone false: the pool may use every zone): "on a scale from 1
  to 10. A score of 10 indicates that your Spot request is highly likely to succeed in this Region
  or Availability Zone. A score of 1 indicates that your Spot request is not likely to succeed"
  (same model, SpotPlacementScore.Score).

`call(operation, **kwargs)` is the caller's way to reach EC2 (preflight's `aws_call`, which turns
a denial or an endpoint that lacks the operation into "could not check").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

LINUX = "Linux/UNIX"
Call = Callable[..., dict[str, Any]]


def current_prices(
    call: Call, instance_types: list[str], zones: list[str], now: datetime
) -> dict[tuple[str, str], float]:
    """(instance type, zone) -> USD per hour, for the zones of the stack only."""
    prices: dict[tuple[str, str], tuple[datetime, float]] = {}
    kwargs: dict[str, Any] = {
        "InstanceTypes": list(instance_types),
        "ProductDescriptions": [LINUX],
        "StartTime": now,
        "EndTime": now,
    }
    while True:
        page = call("describe_spot_price_history", **kwargs)
        for entry in page.get("SpotPriceHistory", []):
            key = (entry["InstanceType"], entry["AvailabilityZone"])
            if entry["AvailabilityZone"] not in zones:
                continue
            stamped = (entry["Timestamp"], float(entry["SpotPrice"]))
            # The newest entry per type and zone is the price in force.
            if key not in prices or stamped[0] > prices[key][0]:
                prices[key] = stamped
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    return {key: price for key, (_, price) in prices.items()}


def placement_score(call: Call, instance_types: list[str], nodes: int, region: str) -> int | None:
    """The region's score for `nodes` instances of any of the types; None when EC2 gives none."""
    answer = call(
        "get_spot_placement_scores",
        InstanceTypes=list(instance_types),
        TargetCapacity=nodes,
        TargetCapacityUnitType="units",
        SingleAvailabilityZone=False,
        RegionNames=[region],
    )
    scores = [s["Score"] for s in answer.get("SpotPlacementScores", []) if s.get("Region") == region and "Score" in s]
    return max(scores) if scores else None
