"""The prices of a stack's non-EC2 items read from the Price List API (infra/aws/live_service_prices.py),
answered through botocore's Stubber on a real pricing client: Stubber checks each request against the
GetProducts input shape and each canned answer against its output shape (botocore 1.44.5's pricing
model), and the expected params below pin the filters asked.

The products are shaped like real GetProducts answers, with the region prefixes real usage types carry
(tests/price_list_answers.py, which names the recorded answers it follows).
"""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from price_list_answers import QUERIES, expected_params, flat, product, queue, world

from infra.aws import live_service_prices as live

TODAY = "2026-11-22"
API = f"AWS Price List API (pricing.get_products, read {TODAY})"


def client():
    return boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def read_all(answers: dict[live.Query, list[str]], region: str = "eu-west-1"):
    pricing = client()
    with Stubber(pricing) as stub:
        queue(stub, answers, region)
        found, notes = live.service_prices(pricing, region, TODAY)
        stub.assert_no_pending_responses()
    return found, notes


def test_eu_west_1_usage_types_with_their_region_prefix_are_read_by_suffix():
    found, notes = read_all(world())
    assert notes == []
    assert {what: (p.usd, p.unit) for what, p in found.items()} == {
        "eks-standard": (0.1, "cluster-hour"),
        "eks-extended": (0.6, "cluster-hour"),
        "nat-gateway": (0.048, "NAT-gateway-hour"),
        "nat-data": (0.048, "GB"),
        "public-ipv4": (0.005, "address-hour"),
        "ebs-gp3": (0.088, "GB-month"),
        "efs-standard": (0.33, "GB-month"),
        "ecr-storage": (0.1, "GB-month"),
    }
    # not the regional NAT gateway ($0.06), the idle address ($0.006), EFS infrequent access or one zone
    assert found["nat-gateway"].source == f"{API}; usagetype EU-NatGateway-Hours"
    assert found["efs-standard"].source == f"{API}; usagetype EU-TimedStorage-ByteHrs"
    assert found["eks-extended"].source == (
        f"{API}; $0.1 usagetype EU-AmazonEKS-Hours:perCluster + $0.5 usagetype "
        "EU-AmazonEKS-Hours:extendedSupport: extended support bills both"
    )
    assert all(p.read_on == TODAY for p in found.values())


def test_us_east_1_usage_types_without_a_prefix_are_read_too():
    found, notes = read_all(
        world("us-east-1", eks="USE1-", nat="", ipv4="USE1-", ebs="", efs="USE1-", ecr="USE1-"), "us-east-1"
    )
    assert notes == [] and len(found) == 8
    assert found["nat-gateway"].source.endswith("; usagetype NatGateway-Hours")
    assert found["ebs-gp3"].source.endswith("; usagetype EBS:VolumeUsage.gp3") and found["ebs-gp3"].usd == 0.088


def test_two_different_prices_for_one_item_give_none_and_say_so():
    answers = world()
    answers[live.EKS] = [
        *answers[live.EKS],
        product(
            "AmazonEKS",
            "EU-AmazonEKS-Hours:perCluster",
            "Hours",
            flat("0.1200000000"),
            family="Compute",
            tiertype="HAExtended",
        ),
    ]
    found, notes = read_all(answers)
    assert "eks-standard" not in found and "eks-extended" not in found and len(found) == 6
    assert notes == [
        "eks-standard: Price List API gave 2 On-Demand prices for usagetype *AmazonEKS-Hours:perCluster (Hrs/Hours) "
        "in eu-west-1 ($0.1, $0.12); not used",
        "eks-extended: the Price List API gave the extended-support charge but not the standard cluster-hour it is "
        "billed on top of; not used",
    ]


def test_a_per_gb_rate_with_tiers_is_read_at_its_first_tier_and_says_so():
    answers = world()
    answers[live.ECR] = [
        product(
            "AmazonECR",
            "EU-TimedStorage-ByteHrs",
            "GB-Mo",
            ("100", "Inf", "0.0800000000"),
            ("0", "100", "0.1000000000"),
            family="EC2 Container Registry",
        )
    ]
    found, notes = read_all(answers)
    assert notes == [] and found["ecr-storage"].usd == 0.1
    assert found["ecr-storage"].source == f"{API}; usagetype EU-TimedStorage-ByteHrs, first tier (0-100 GB-Mo)"


def test_an_hourly_item_in_the_totals_with_tiers_is_not_used():
    answers = world()
    answers[live.NAT][0] = product(
        "AmazonEC2",
        "EU-NatGateway-Hours",
        "Hrs",
        ("0", "720", "0.0480000000"),
        ("720", "Inf", "0.0400000000"),
        family="NAT Gateway",
    )
    found, notes = read_all(answers)
    assert "nat-gateway" not in found and found["nat-data"].usd == 0.048
    assert notes == [
        "nat-gateway: Price List API gave a tiered price (2 ranges) for EU-NatGateway-Hours in eu-west-1; not used"
    ]


def test_an_answer_in_another_unit_is_not_a_price():
    answers = world()
    answers[live.GP3] = [
        product(
            "AmazonEC2",
            "EU-EBS:VolumeUsage.gp3",
            "IOPS-Mo",
            flat("0.0055000000"),
            family="Storage",
            volumeApiName="gp3",
        )
    ]
    found, notes = read_all(answers)
    assert "ebs-gp3" not in found
    assert notes == [
        "ebs-gp3: Price List API gave 0 On-Demand prices for usagetype *EBS:VolumeUsage.gp3 "
        "(GB-Mo/GB-month) in eu-west-1 (units answered: IOPS-Mo); not used"
    ]


def test_a_product_list_on_several_pages_is_read_to_its_end():
    answers = world()
    pricing = client()
    with Stubber(pricing) as stub:
        first, second = answers[live.EKS][:1], answers[live.EKS][1:]
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": first, "NextToken": "page-2"},
            expected_params(live.EKS, "eu-west-1"),
        )
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": second},
            {**expected_params(live.EKS, "eu-west-1"), "NextToken": "page-2"},
        )
        queue_rest = {q: a for q, a in answers.items() if q != live.EKS}
        for query in QUERIES[1:]:
            stub.add_response(
                "get_products",
                {"FormatVersion": "aws_v1", "PriceList": queue_rest[query]},
                expected_params(query, "eu-west-1"),
            )
        found, notes = live.service_prices(pricing, "eu-west-1", TODAY)
        stub.assert_no_pending_responses()
    assert notes == [] and found["eks-extended"].usd == 0.6


@pytest.mark.parametrize(
    "fails_at, priced, left",
    [
        (
            0,
            set(),
            "eks-standard, nat-gateway, public-ipv4, ebs-gp3, efs-standard, ecr-storage, nat-data, eks-extended",
        ),
        # the EKS and NAT answers came before the throttling: their items are still read, nat-data too
        (
            2,
            {"eks-standard", "nat-gateway", "nat-data", "eks-extended"},
            "public-ipv4, ebs-gp3, efs-standard, ecr-storage",
        ),
    ],
)
def test_a_throttled_call_is_one_line_no_number_and_the_last_call(fails_at, priced, left):
    pricing = client()
    calls = []
    pricing.meta.events.register("provide-client-params.pricing.GetProducts", lambda params, **_: calls.append(params))
    with Stubber(pricing) as stub:
        queue(stub, world(), "eu-west-1", until=fails_at)
        stub.add_client_error("get_products", "ThrottlingException", "Rate exceeded", http_status_code=400)
        found, notes = live.service_prices(pricing, "eu-west-1", TODAY)
        stub.assert_no_pending_responses()
    assert set(found) == priced and len(calls) == fails_at + 1
    assert notes == [f"Price List API not used for {left} in eu-west-1: ThrottlingException: Rate exceeded"]


def test_an_unreadable_answer_leaves_its_items_unpriced_and_the_other_queries_are_still_asked():
    """A product that is not JSON is a problem of that answer, not of the calls: the NAT query's three
    items are unpriced with one line each, and the queries after it are asked as usual (review of issue
    39: it once stopped every later call as if AWS had refused them)."""
    pricing = client()
    answers = world()
    answers[live.NAT] = ["<html>not a product</html>"]
    with Stubber(pricing) as stub:
        queue(stub, answers, "eu-west-1")
        found, notes = live.service_prices(pricing, "eu-west-1", TODAY)
        stub.assert_no_pending_responses()  # every query was asked
    assert set(found) == {"eks-standard", "eks-extended", "public-ipv4", "ebs-gp3", "efs-standard", "ecr-storage"}
    assert [note.split(":")[0] for note in notes] == ["nat-gateway", "nat-data"]
    assert all("Price List API answer unusable in eu-west-1: Expecting value" in note for note in notes), notes


@pytest.mark.parametrize(
    "usagetype, suffix, expected",
    [
        ("EU-NatGateway-Hours", "NatGateway-Hours", True),
        ("NatGateway-Hours", "NatGateway-Hours", True),
        ("EU-RegionalNatGateway-Hours", "NatGateway-Hours", False),
        ("EU-IATimedStorage-ByteHrs", "TimedStorage-ByteHrs", False),
        ("APN2-AmazonEKS-Hours:extendedSupport", "AmazonEKS-Hours:perCluster", False),
    ],
)
def test_a_usage_type_matches_its_suffix_after_a_dash_only(usagetype, suffix, expected):
    assert live.matches(usagetype, suffix) is expected
