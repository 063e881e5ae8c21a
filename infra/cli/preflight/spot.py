"""Preflight's Spot market check (capacityType spot): the current Spot price of each worker type in the
stack's zones, and the region's Spot placement score for the pool at its size (infra/aws/spot_market.py
says which EC2 calls, and what their answers mean).

PASS with the prices and the score; WARN when EC2 rates the request unlikely to succeed (a score below
LOW_SCORE) or a worker type has no Spot price in a zone of the stack (not offered there as Spot); SKIP
for on-demand workers. What it reads also prices the cost estimate's Spot workers: the median of the
current prices of nodeInstanceType over the stack's zones.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any, Callable

from infra.aws import prices, spot_market
from infra.cli.preflight.result import PASS, SKIP, WARN, Check
from infra.config import SPOT, Settings, worker_instance_types

CHECK_ID = "spot-market"
# Spot workers count against the Spot vCPU quota of their family, which the EC2 user guide names
# ("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", using-spot-limits.html) but whose
# Service Quotas code no source read here states: preflight does not read it, and says so.
SPOT_QUOTA_NOT_READ = (
    "not checked: Spot workers count against the Spot vCPU quota of their family (Service Quotas, "
    "EC2, e.g. 'All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests'), which preflight "
    "does not read; nodeMaxCount x the type's vCPUs must fit it"
)
# Our threshold, not AWS's: the score runs from 1 ("not likely to succeed") to 10 ("highly likely",
# botocore's EC2 model, SpotPlacementScore.Score); below the middle we warn.
LOW_SCORE = 5


def check(
    settings: Settings,
    zones: list[str],
    now: datetime,
    call: Callable[..., dict[str, Any]],
) -> tuple[Check, prices.Price | None]:
    """(the Check, the Spot price of one worker node for the estimate or None). `call` is preflight's
    aws_call on the stack region's EC2 client."""
    if settings.capacity_type != SPOT:
        return Check(CHECK_ID, SKIP, f"capacityType {settings.capacity_type}: the workers buy no Spot capacity"), None
    types = list(worker_instance_types(settings))
    current = spot_market.current_prices(call, types, zones, now)
    score = spot_market.placement_score(call, types, settings.node_max_count, settings.region)
    missing = [f"{t} in {z}" for t in types for z in zones if (t, z) not in current]
    shown = "; ".join(
        f"{t} ${min(p for (k, _), p in current.items() if k == t):g}-"
        f"${max(p for (k, _), p in current.items() if k == t):g}"
        for t in types
        if any(k == t for k, _ in current)
    )
    text = (
        f"Spot now, per hour: {shown or 'no prices'}; placement score {score if score is not None else 'none'}/10 "
        f"for {settings.node_max_count} nodes in {settings.region}"
    )
    own = [p for (t, _), p in current.items() if t == settings.node_instance_type]
    node_price = None
    if own:
        node_price = prices.Price(
            round(statistics.median(own), 6),
            "instance-hour",
            f"EC2 Spot price history (median over {len(own)} zones, read {now.date().isoformat()})",
            now.date().isoformat(),
        )
    if score is not None and score < LOW_SCORE:
        return Check(
            CHECK_ID,
            WARN,
            f"{text}: EC2 rates a Spot request of this size unlikely to succeed",
            "add instance types of the same shape to nodeInstanceTypes, lower nodeMaxCount, or use another region",
        ), node_price
    if missing:
        return Check(
            CHECK_ID,
            WARN,
            f"{text}; no Spot price for {', '.join(missing)}",
            "those types are not sold as Spot there: the pool uses the others",
        ), node_price
    return Check(CHECK_ID, PASS, text), node_price
