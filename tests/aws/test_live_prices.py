"""Prices read from AWS (infra/aws/live_prices.py), answered through botocore's Stubber: Stubber checks
each request against the operation's input shape and each canned answer against its output shape in
botocore's service models (pricing GetProducts, ec2 DescribeSpotPriceHistory), so the answers below
are shaped as AWS sends them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from infra.aws import live_prices

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=timezone.utc)


def client(service: str, region: str = "us-west-2"):
    return boto3.client(service, region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing")


def product(usd: str) -> str:
    """One EC2 product of the Price List (a JSON string per product, shape SynthesizedJsonPriceListJsonItem)."""
    return json.dumps(
        {
            "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": "c5.4xlarge"}},
            "terms": {
                "OnDemand": {
                    "SKU.T": {
                        "priceDimensions": {
                            "SKU.T.R": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": usd},
                                "description": "$0.68 per On Demand Linux",
                            }
                        }
                    }
                }
            },
        }
    )


def test_on_demand_reads_the_one_hourly_usd_price_and_names_the_api():
    pricing = client("pricing", "us-east-1")
    with Stubber(pricing) as stub:
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [product("0.6800000000")]},
            {
                "ServiceCode": "AmazonEC2",
                "MaxResults": 10,
                "Filters": [
                    {"Type": "TERM_MATCH", "Field": f, "Value": v}
                    for f, v in (
                        ("instanceType", "c5.4xlarge"),
                        ("regionCode", "us-west-2"),
                        ("operatingSystem", "Linux"),
                        ("tenancy", "Shared"),
                        ("preInstalledSw", "NA"),
                        ("capacitystatus", "Used"),
                    )
                ],
            },
        )
        price, why = live_prices.on_demand(pricing, "c5.4xlarge", "us-west-2", "2026-11-24")
    assert (price.usd, why) == (
        0.68,
        "",
    ) and price.source == "AWS Price List API (pricing.get_products, read 2026-11-24)"


@pytest.mark.parametrize(
    "answer, expected",
    [
        ({"FormatVersion": "aws_v1", "PriceList": []}, "gave 0 On-Demand Linux prices"),
        ({"FormatVersion": "aws_v1", "PriceList": [product("0.68"), product("0.70")]}, "gave 2 On-Demand Linux prices"),
    ],
)
def test_on_demand_uses_nothing_but_one_unambiguous_answer(answer, expected):
    pricing = client("pricing", "us-east-1")
    with Stubber(pricing) as stub:
        stub.add_response("get_products", answer)
        price, why = live_prices.on_demand(pricing, "c5.4xlarge", "us-west-2", "2026-11-24")
    assert price is None and expected in why


def test_a_denied_price_list_call_is_one_line_not_a_traceback():
    pricing = client("pricing", "us-east-1")
    with Stubber(pricing) as stub:
        stub.add_client_error(
            "get_products", "AccessDeniedException", "User is not authorized to perform pricing:GetProducts"
        )
        price, why = live_prices.on_demand(pricing, "c5.4xlarge", "us-west-2", "2026-11-24")
    assert price is None and why == (
        "Price List API not used for c5.4xlarge: AccessDeniedException: "
        "User is not authorized to perform pricing:GetProducts"
    )


def history(zone: str, usd: str, minutes_ago: int) -> dict:
    return {
        "AvailabilityZone": zone,
        "InstanceType": "c5.4xlarge",
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": usd,
        "Timestamp": NOW - timedelta(minutes=minutes_ago),
    }


def test_spot_takes_each_zones_latest_price_and_the_median_over_the_stacks_zones():
    ec2 = client("ec2")
    with Stubber(ec2) as stub:
        expected = {
            "InstanceTypes": ["c5.4xlarge"],
            "ProductDescriptions": ["Linux/UNIX"],
            "StartTime": NOW,
            "EndTime": NOW,
            "Filters": [{"Name": "availability-zone", "Values": ["us-west-2a", "us-west-2b", "us-west-2c"]}],
        }
        stub.add_response(
            "describe_spot_price_history",
            {
                "NextToken": "page-2",
                "SpotPriceHistory": [history("us-west-2a", "0.250000", 90), history("us-west-2a", "0.225600", 10)],
            },
            expected,
        )
        stub.add_response(
            "describe_spot_price_history",
            {
                "NextToken": "",
                "SpotPriceHistory": [history("us-west-2b", "0.232900", 30), history("us-west-2c", "0.282600", 5)],
            },
            {**expected, "NextToken": "page-2"},
        )
        price, why = live_prices.spot(ec2, "c5.4xlarge", ["us-west-2a", "us-west-2b", "us-west-2c"], NOW)
    assert why == "" and price.usd == 0.2329  # the median of 0.2256, 0.2329, 0.2826: the older 0.25 is superseded
    assert price.source == (
        "EC2 Spot price history (describe_spot_price_history, read 2026-11-24); "
        "median of 3 zones, range $0.2256-$0.2826"
    )


def test_no_spot_price_in_the_zones_is_said_not_zero():
    ec2 = client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response("describe_spot_price_history", {"SpotPriceHistory": []})
        price, why = live_prices.spot(ec2, "g6.xlarge", ["us-west-2b"], NOW)
    # Issue 39: the estimate once fell back to the catalog and priced a type without a Spot market there.
    assert price is not None and price.usd is None and why == "EC2 has no Spot price for g6.xlarge in us-west-2b"
    assert price.source.startswith("NOT READ: EC2 has no Spot price for g6.xlarge in us-west-2b: no Spot market there")


def test_preflight_asks_the_spot_history_for_a_spot_stacks_workers_in_its_zones():
    """A `capacityType: spot` stack: On-Demand for each node type, Spot for the workers, in the chosen zones."""
    from types import SimpleNamespace

    from infra.cli import cost
    from infra.cli.preflight.checks import Preflight
    from infra.config import load_settings
    from infra.config.stack_file import read_stack_file

    settings = SimpleNamespace(
        **{**vars(load_settings(read_stack_file("dev"), "dev", NOW.date())), "capacity_type": "spot"}
    )
    clients = {"pricing": client("pricing", "us-east-1"), "ec2": client("ec2")}
    with Stubber(clients["pricing"]) as prices_stub, Stubber(clients["ec2"]) as ec2_stub:
        prices_stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [product("0.68")]})
        # the on-demand system nodes every eks stack runs (m5.large)
        prices_stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [product("0.096")]})
        ec2_stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": [history("us-west-2a", "0.2256", 1), history("us-west-2b", "0.2329", 1)]},
            {
                "InstanceTypes": ["c5.4xlarge"],
                "ProductDescriptions": ["Linux/UNIX"],
                "StartTime": NOW,
                "EndTime": NOW,
                "Filters": [{"Name": "availability-zone", "Values": ["us-west-2a", "us-west-2b"]}],
            },
        )
        check = Preflight(settings, lambda service, region: clients[service], NOW.date())
        check.zones = ["us-west-2a", "us-west-2b"]
        live, notes = check.node_prices(now=NOW)
    estimate = cost.estimate(settings, NOW.date(), live=live)
    workers = next(i for i in estimate["items"] if i["what"].startswith("worker nodes while a run trains:"))
    assert notes == [] and live.on_demand["c5.4xlarge"].usd == 0.68
    assert workers["unitUsd"] == pytest.approx((0.2256 + 0.2329) / 2) and workers["source"].startswith(
        "EC2 Spot price history"
    )


def test_a_type_without_a_spot_market_is_not_priced_from_the_catalog():
    """With EC2's answer "no Spot price there", the estimate leaves the workers unpriced and says why,
    instead of charging the catalog's Spot median of zones the stack does not use (issue 39)."""
    from datetime import date

    from infra.cli import cost
    from infra.config import load_settings
    from infra.config.stack_file import read_stack_file

    settings = load_settings(read_stack_file("spot"), "spot", date(2026, 11, 24))
    ec2 = client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response("describe_spot_price_history", {"SpotPriceHistory": []})
        price, _ = live_prices.spot(ec2, settings.node_instance_type, ["us-west-2a"], NOW)
    live = cost.LivePrices(spot={settings.node_instance_type: price})
    estimate = cost.estimate(settings, date(2026, 11, 24), live=live)
    (workers,) = [item for item in estimate["items"] if item["what"].startswith("worker nodes")]
    assert workers["unitUsd"] is None and "no Spot market there" in workers["source"]
    assert any(line.startswith("  NOT IN THE TOTALS: worker nodes") for line in cost.lines(estimate))
