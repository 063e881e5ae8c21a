"""The Spot market reads, against botocore's Stubber: requests and responses are checked against the
EC2 service model that ships in botocore (a parameter or field the model lacks fails the test)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from infra.aws import spot_market

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def ec2():
    client = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber


def entry(instance_type, zone, price, minutes_ago):
    return {
        "InstanceType": instance_type,
        "AvailabilityZone": zone,
        "SpotPrice": price,
        "ProductDescription": "Linux/UNIX",
        "Timestamp": NOW - timedelta(minutes=minutes_ago),
    }


def call_on(client):
    return lambda operation, **kwargs: getattr(client, operation)(**kwargs)


def test_the_price_in_force_per_type_and_stack_zone_over_every_page(ec2):
    client, stubber = ec2
    request = {
        "InstanceTypes": ["c5.4xlarge", "c6i.4xlarge"],
        "ProductDescriptions": ["Linux/UNIX"],
        "StartTime": NOW,
        "EndTime": NOW,
    }
    stubber.add_response(
        "describe_spot_price_history",
        {
            "SpotPriceHistory": [
                entry("c5.4xlarge", "us-west-2a", "0.2710", 90),
                entry("c5.4xlarge", "us-west-2a", "0.2650", 5),
                entry("c5.4xlarge", "us-west-2d", "0.1000", 5),
            ],
            "NextToken": "page-2",
        },
        request,
    )
    stubber.add_response(
        "describe_spot_price_history",
        {"SpotPriceHistory": [entry("c6i.4xlarge", "us-west-2b", "0.3010", 30)]},
        {**request, "NextToken": "page-2"},
    )
    prices = spot_market.current_prices(
        call_on(client), ["c5.4xlarge", "c6i.4xlarge"], ["us-west-2a", "us-west-2b"], NOW
    )
    assert prices == {("c5.4xlarge", "us-west-2a"): 0.265, ("c6i.4xlarge", "us-west-2b"): 0.301}
    stubber.assert_no_pending_responses()


def test_the_placement_score_is_asked_for_the_pool_size_across_the_region(ec2):
    client, stubber = ec2
    stubber.add_response(
        "get_spot_placement_scores",
        {"SpotPlacementScores": [{"Region": "us-west-2", "Score": 7}]},
        {
            "InstanceTypes": ["c5.4xlarge", "c6i.4xlarge"],
            "TargetCapacity": 4,
            "TargetCapacityUnitType": "units",
            "SingleAvailabilityZone": False,
            "RegionNames": ["us-west-2"],
        },
    )
    assert spot_market.placement_score(call_on(client), ["c5.4xlarge", "c6i.4xlarge"], 4, "us-west-2") == 7


def test_no_score_is_none_not_zero(ec2):
    client, stubber = ec2
    stubber.add_response("get_spot_placement_scores", {"SpotPlacementScores": []})
    assert spot_market.placement_score(call_on(client), ["c5.4xlarge", "c6i.4xlarge"], 4, "us-west-2") is None
