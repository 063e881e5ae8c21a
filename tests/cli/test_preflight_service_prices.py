"""`elastic-training preflight` for a stack in a region the offline price table does not cover (eu-west-1):
the cost object prices the EKS control plane, the NAT gateway, its public IPv4 address, the gp3 volumes,
EFS, ECR and NAT data from the Price List API's answers, each naming it (issue 39).

The world is the preflight tests' (tests/cli/test_preflight.py): moto's server for STS and EC2 through
AWS_ENDPOINT_URL, botocore's Stubber for Service Quotas and EKS; the pricing client answers the node
types first (infra/aws/live_prices.py), then the other items' queries in the order
infra/aws/live_service_prices.py asks them, each request checked against its expected filters.
"""

from __future__ import annotations

import json

from botocore.stub import Stubber
from price_list_answers import queue, world
from test_preflight import OK_QUOTAS, TODAY, Scenario, price_list, statuses, stubbed_world
from test_preflight import aws_env, moto_url, tools  # noqa: F401 (fixtures)

from infra.cli import preflight

API = f"AWS Price List API (pricing.get_products, read {TODAY.isoformat()})"


def preflight_in_eu_west_1(scenario: Scenario, tools, capsys, services_first: bool) -> dict:
    """`preflight dev --json` in eu-west-1: the preflight tests' world, and a pricing client that answers
    the two node types and the other items' queries, the items first when `services_first` (the
    Kubernetes-version check asks them when it prices extended support); every answer is used."""
    stubbers: list[Stubber] = []
    others = stubbed_world(scenario, "eu-west-1", stubbers)

    def make(service: str, region: str):
        if service != "pricing":
            return others(service, region)
        client = preflight.default_client(service, region)
        stubber = Stubber(client)
        if services_first:
            queue(stubber, world("eu-west-1"), "eu-west-1")
        stubber.add_response("get_products", price_list("c5.4xlarge", "eu-west-1", "0.768"), None)  # the workers
        stubber.add_response("get_products", price_list("m5.large", "eu-west-1", "0.107"), None)  # the system nodes
        if not services_first:
            queue(stubber, world("eu-west-1"), "eu-west-1")
        stubber.activate()
        stubbers.append(stubber)
        return client

    preflight.main(["dev", "--json", "-c", "aws:region=eu-west-1"], make_client=make, today=TODAY, which=tools)
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
    return json.loads(capsys.readouterr().out)


def test_an_eu_west_1_stack_is_priced_from_the_price_list_api(aws_env, tools, capsys):
    report = preflight_in_eu_west_1(Scenario("eu-west-1", statuses(), quotas=OK_QUOTAS), tools, capsys, False)
    cost = report["cost"]
    assert (
        report["region"] == "eu-west-1" and cost["unpriced"] == [] and cost["note"] == "complete for the hourly items"
    )
    read = {
        item["what"].split(":")[0].split(" (")[0].split(",")[0]: (item["unitUsd"], item["source"])
        for item in cost["items"]
    }
    assert read == {
        "EKS control plane": (0.1, f"{API}; usagetype EU-AmazonEKS-Hours:perCluster"),
        "NAT gateway": (0.048, f"{API}; usagetype EU-NatGateway-Hours"),
        "public IPv4 address": (0.005, f"{API}; usagetype EU-PublicIPv4:InUseAddress"),
        "worker nodes while a run trains": (0.768, API),
        "system nodes": (0.107, API),
        "EBS gp3 root volumes": (0.088, f"{API}; usagetype EU-EBS:VolumeUsage.gp3"),
        "EFS storage": (0.33, f"{API}; usagetype EU-TimedStorage-ByteHrs"),
        "ECR storage": (0.1, f"{API}; usagetype EU-TimedStorage-ByteHrs"),
        "NAT data processing": (0.048, f"{API}; usagetype EU-NatGateway-Bytes"),
    }
    assert cost["pricesFrom"].startswith(
        f"{API} for the nodes it answered; {API} for eks-standard, nat-gateway, "
        "public-ipv4, ebs-gp3, efs-standard, ecr-storage, nat-data; "  # not eks-extended: not billed
    )
    gp3 = next(item for item in cost["items"] if item["what"].startswith("EBS gp3"))
    assert gp3["hourlyUsd"] == round(gp3["quantity"] * 0.088 / 720, 6)  # a GB-month is 720 hours (prices.py)
    assert cost["hourlyUsd"] == round(
        0.1 + 0.048 + 0.005 + sum(i["hourlyUsd"] for i in cost["items"] if i["what"].startswith(("system", "EBS"))), 6
    )


def test_extended_support_in_eu_west_1_is_priced_in_the_check_from_the_price_list_api(aws_env, tools, capsys):
    """The Kubernetes-version check says what extended support costs more, from the Price List API where
    the offline table has no price (eu-west-1): before, it said nothing there; the estimate bills the
    same rate, and names only the control plane's rate it bills."""
    scenario = Scenario("extended", statuses(kubernetes_version="warn"), quotas=OK_QUOTAS, cluster="extended-support")
    report = preflight_in_eu_west_1(scenario, tools, capsys, True)
    (check,) = [c for c in report["checks"] if c["id"] == "kubernetes-version"]
    assert check["status"] == "warn"
    assert "the control plane costs $0.60/hour instead of $0.10/hour (+$0.50/hour, +$12.00/day)" in check["message"]
    cost = report["cost"]
    control_plane = next(item for item in cost["items"] if item["what"].startswith("EKS control plane"))
    assert control_plane["unitUsd"] == 0.6 and "extended support bills both" in control_plane["source"]
    assert "eks-extended" in cost["pricesFrom"] and "eks-standard" not in cost["pricesFrom"]
