"""Preflight's Spot market check for the `spot` stack, with EC2 answered by botocore's Stubber (requests
and responses are checked against the EC2 service model in botocore; moto has no GetSpotPlacementScores),
and the cost estimate pricing the Spot workers at the Spot price it read."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from infra.aws import instance_catalog
from infra.cli import cost
from infra.cli.preflight import checks, spot
from infra.config import load_settings
from infra.config.stack_file import read_stack_file

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)
ZONES = ["us-west-2a", "us-west-2b"]
TYPES = ["c5.4xlarge", "c5a.4xlarge", "c5d.4xlarge"]


def settings(stack: str = "spot"):
    return load_settings(read_stack_file(stack), stack)


def history(prices: dict[tuple[str, str], str]) -> dict:
    return {
        "SpotPriceHistory": [
            {
                "InstanceType": t,
                "AvailabilityZone": z,
                "SpotPrice": p,
                "ProductDescription": "Linux/UNIX",
                "Timestamp": NOW - timedelta(minutes=3),
            }
            for (t, z), p in prices.items()
        ]
    }


def run_check(prices: dict[tuple[str, str], str], score: int):
    client = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        stubber.add_response(
            "describe_spot_price_history",
            history(prices),
            {"InstanceTypes": TYPES, "ProductDescriptions": ["Linux/UNIX"], "StartTime": NOW, "EndTime": NOW},
        )
        stubber.add_response(
            "get_spot_placement_scores",
            {"SpotPlacementScores": [{"Region": "us-west-2", "Score": score}]},
            {
                "InstanceTypes": TYPES,
                "TargetCapacity": 4,
                "TargetCapacityUnitType": "units",
                "SingleAvailabilityZone": False,
                "RegionNames": ["us-west-2"],
            },
        )
        result = spot.check(
            settings(),
            ZONES,
            NOW,
            lambda op, **kw: checks.aws_call(client, op, **kw),
        )
        stubber.assert_no_pending_responses()
    return result


EVERYWHERE = {(t, z): p for t, p in zip(TYPES, ("0.2400", "0.2900", "0.3100")) for z in ZONES}


def test_the_pool_types_prices_and_score_pass_and_price_the_workers():
    found, price = run_check({**EVERYWHERE, ("c5.4xlarge", "us-west-2b"): "0.2600"}, score=8)
    assert found.status == "pass"
    assert (
        "c5.4xlarge $0.24-$0.26" in found.message and "placement score 8/10 for 4 nodes in us-west-2" in found.message
    )
    assert price.usd == pytest.approx(0.25) and price.source.startswith("EC2 Spot price history")
    # The estimate charges the Spot workers that price, 3 of them while a run trains.
    estimate = cost.estimate(settings(), date(2026, 11, 24), live=cost.LivePrices(spot={"c5.4xlarge": price}))
    workers = next(i for i in estimate["items"] if i["what"].startswith("worker nodes while a run trains:"))
    assert "3 x c5.4xlarge Spot" in workers["what"] and workers["runHourlyUsd"] == pytest.approx(0.75)
    assert workers["hourlyUsd"] == 0  # none between runs


def test_a_low_score_warns_with_what_to_change():
    found, _ = run_check(EVERYWHERE, score=3)
    assert found.status == "warn" and "unlikely to succeed" in found.message
    assert "nodeInstanceTypes" in found.fix


def test_a_type_without_a_spot_price_in_a_zone_is_named():
    partial = {k: v for k, v in EVERYWHERE.items() if k != ("c5d.4xlarge", "us-west-2b")}
    found, _ = run_check(partial, score=9)
    assert found.status == "warn" and "no Spot price for c5d.4xlarge in us-west-2b" in found.message


def test_on_demand_workers_skip_the_spot_market_and_call_nothing():
    def no_call(*args, **kwargs):
        raise AssertionError("an on-demand stack must not read the Spot market")

    found, price = spot.check(settings("dev"), ZONES, NOW, no_call)
    assert (found.status, price) == ("skip", None)


def test_offline_the_spot_workers_cost_the_catalogs_median_spot_price():
    """Without preflight: infra/aws/instance_catalog.py's median over the region's zones (skypilot-catalog)."""
    estimate = cost.estimate(settings(), date(2026, 11, 24))
    workers = next(i for i in estimate["items"] if i["what"].startswith("worker nodes while a run trains:"))
    on_demand = cost.estimate(settings("dev"), date(2026, 11, 24))
    median = instance_catalog.spot_median("c5.4xlarge", "us-west-2")
    assert workers["unitUsd"] == median.usd and workers["unitUsd"] is not None and "Spot median" in median.source
    assert workers["runHourlyUsd"] == pytest.approx(3 * median.usd) and "Spot" in workers["what"]
    assert next(i for i in on_demand["items"] if i["what"].startswith("worker nodes"))["what"].endswith("On-Demand")


def test_the_vcpu_quota_of_spot_workers_is_not_passed_on_the_on_demand_quota():
    """The On-Demand quota says nothing about Spot workers: the check says it did not read theirs."""
    preflight = checks.Preflight(settings(), make_client=lambda service, region: None)
    found = preflight.vcpu_quota()
    assert found.status == "warn" and found.message.startswith(
        "not checked: Spot workers count against the Spot vCPU quota"
    )
