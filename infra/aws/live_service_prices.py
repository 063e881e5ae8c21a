"""The prices of a stack's billed items other than its EC2 instances (the infra/aws/prices.py items), read
for one region from the AWS Price List API in preflight, for the user's own account. Each answer is a
`prices.Price` whose source says where and when it was read; a failed call or an answer that does not
give exactly one price is None and one line saying why (the estimate then keeps the offline table's
entry, or names the item unpriced). The answers replace the table for that run only.

What is asked, and where it was read (facts, no code copied):

- ServiceCode, productFamily and the other attribute filters, and the usage types: infracost/infracost
  @ 95ba4f49a7abf5567b04f751a115543281a4ab18, internal/resources/aws/: eks_cluster.go (AmazonEKS,
  Compute, usagetype `AmazonEKS-Hours:perCluster`), nat_gateway.go (AmazonEC2, `NAT Gateway`,
  `NatGateway-Hours` and `NatGateway-Bytes`), ebs_volume.go (AmazonEC2, Storage, volumeApiName gp3),
  efs_file_system.go (AmazonEFS, Storage, usagetype `-TimedStorage-ByteHrs`: the leading dash keeps
  out `-IATimedStorage-ByteHrs`, and the exact ending the one-zone `-TimedStorage-Z-ByteHrs`),
  ecr_repository.go (AmazonECR, `EC2 Container Registry`, `TimedStorage-ByteHrs`, which infracost matches
  exactly, without a region prefix; matched here by its ending, as every item is, so that
  `EU-TimedStorage-ByteHrs` is found too). infracost prices EKS extended support
  with a fixed $0.60 (eks_cluster.go: "a placeholder until AWS provides the price") and has no in-use
  public IPv4 item (eip.go prices only `ElasticIP:IdleAddress`).
- The in-use public IPv4 address and real answers: TypeOneLabs/tellury
  @ 38f9187895782b23f18ff6953e921cb0215ecbe0, pkg/pricing/aws/testdata/getproducts-recorded.json,
  recorded GetProducts answers: AmazonVPC products with no productFamily, group `VPCPublicIPv4Address`,
  usagetype `USE1-PublicIPv4:InUseAddress` (us-east-1) and `EU-PublicIPv4:InUseAddress` (eu-west-1),
  unit `Hrs`; gp3 storage `EBS:VolumeUsage.gp3` (us-east-1, no prefix) and `EU-EBS:VolumeUsage.gp3`
  (eu-west-1), unit `GB-Mo` (io2 answers `GB-month`); every dimension with beginRange "0", endRange "Inf".
- EKS extended support: the usage type `AmazonEKS-Hours:extendedSupport` ($0.50 a cluster-hour) is
  billed on top of `AmazonEKS-Hours:perCluster` for the same hours: AWS's "$0.60 per cluster per hour"
  (prices.EKS_BLOG) is the sum, so the extended rate here is the sum of the two answers.
- The call: botocore 1.44.5's pricing model (GetProducts: ServiceCode, Filters of Type TERM_MATCH,
  MaxResults, NextToken; PriceList is a list of JSON strings, SynthesizedJsonPriceListJsonItem).

Usage types carry a region prefix that differs by service and is not derived from the region code
(us-east-1: none for NAT and gp3, `USE1-` for EKS and public IPv4; eu-west-1: `EU-`), so the filters
name the region by `regionCode` and the answer's usage type is matched by its suffix after a dash:
`EU-NatGateway-Hours` matches `NatGateway-Hours`, `EU-RegionalNatGateway-Hours` does not. Units are
checked loosely (an hour is `Hrs` or `Hours`, a GB-month `GB-Mo` or `GB-month`, both spellings seen in
answers). A price with tiers (several dimensions, beginRange/endRange) is taken at its first tier, the
one from 0, only for the per-GB rates that are not in the totals (EFS, ECR, NAT data), and the source
says so; an hourly item in the totals with tiers has no one unit price and is not used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from infra.aws import prices
from infra.aws.live_prices import why_failed

MAX_RESULTS = 100
MAX_PAGES = 10  # 1,000 products: far more than any of these filter sets selects
HOURS, GB_MONTH, GB = ("Hrs", "Hours"), ("GB-Mo", "GB-month"), ("GB",)


@dataclass(frozen=True)
class Query:
    service: str
    filters: tuple[tuple[str, str], ...]  # attribute filters besides regionCode


@dataclass(frozen=True)
class Item:
    what: str  # the infra/aws/prices.py key
    query: Query
    usagetype: str  # the usage type without its region prefix
    units: tuple[str, ...]  # the priceDimension units accepted
    unit: str  # the unit of prices.Price, as infra/aws/prices.py writes it
    first_tier: bool = False  # a per-GB rate (not in the totals): a tiered price is read at its first tier


EKS = Query("AmazonEKS", (("productFamily", "Compute"),))
NAT = Query("AmazonEC2", (("productFamily", "NAT Gateway"),))
IPV4 = Query("AmazonVPC", (("group", "VPCPublicIPv4Address"),))
GP3 = Query("AmazonEC2", (("productFamily", "Storage"), ("volumeApiName", "gp3")))
EFS = Query("AmazonEFS", (("productFamily", "Storage"),))
ECR = Query("AmazonECR", (("productFamily", "EC2 Container Registry"),))

ITEMS = (
    Item("eks-standard", EKS, "AmazonEKS-Hours:perCluster", HOURS, "cluster-hour"),
    Item("nat-gateway", NAT, "NatGateway-Hours", HOURS, "NAT-gateway-hour"),
    Item("public-ipv4", IPV4, "PublicIPv4:InUseAddress", HOURS, "address-hour"),
    Item("ebs-gp3", GP3, "EBS:VolumeUsage.gp3", GB_MONTH, "GB-month"),
    Item("efs-standard", EFS, "TimedStorage-ByteHrs", GB_MONTH, "GB-month", first_tier=True),
    Item("ecr-storage", ECR, "TimedStorage-ByteHrs", GB_MONTH, "GB-month", first_tier=True),
    Item("nat-data", NAT, "NatGateway-Bytes", GB, "GB", first_tier=True),
)
# Billed on top of eks-standard's usage type: eks-extended is the sum of the two.
EXTENDED_SUPPORT = Item("eks-extended", EKS, "AmazonEKS-Hours:extendedSupport", HOURS, "cluster-hour")


def matches(usagetype: str, suffix: str) -> bool:
    """The usage type is `suffix` itself or `suffix` after a region prefix and a dash."""
    return usagetype == suffix or usagetype.endswith("-" + suffix)


def products(pricing: Any, query: Query, region: str) -> list[dict[str, Any]]:
    """Every product of the query in the region, page by page (raises what the call or the answer raises)."""
    filters = [
        {"Type": "TERM_MATCH", "Field": name, "Value": value}
        for name, value in (("regionCode", region), *query.filters)
    ]
    kwargs: dict[str, Any] = {"ServiceCode": query.service, "Filters": filters, "MaxResults": MAX_RESULTS}
    found: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        answer = pricing.get_products(**kwargs)
        found += [json.loads(text) if isinstance(text, str) else text for text in answer.get("PriceList", [])]
        if not answer.get("NextToken"):
            return found
        kwargs["NextToken"] = answer["NextToken"]
    raise ValueError(f"more than {MAX_PAGES * MAX_RESULTS} {query.service} products in {region}")


def read(answer: list[dict[str, Any]], item: Item, region: str) -> tuple[float | None, str, str]:
    """(USD, what was read, why not) of the item in the products of its query."""
    found: dict[float, str] = {}
    units: set[str] = set()
    for product in answer:
        usagetype = str(product.get("product", {}).get("attributes", {}).get("usagetype", ""))
        if not matches(usagetype, item.usagetype):
            continue
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            dimensions = [d for d in term.get("priceDimensions", {}).values() if "USD" in d.get("pricePerUnit", {})]
            units |= {str(d.get("unit")) for d in dimensions}
            dimensions = [d for d in dimensions if d.get("unit") in item.units]
            read_as = f"usagetype {usagetype}"
            if len(dimensions) > 1:
                first = [d for d in dimensions if str(d.get("beginRange")) == "0"]
                if not item.first_tier or len(first) != 1:
                    return (
                        None,
                        "",
                        (
                            f"Price List API gave a tiered price ({len(dimensions)} ranges) for {usagetype} "
                            f"in {region}; not used"
                        ),
                    )
                dimensions = first
                read_as += (
                    f", first tier ({first[0].get('beginRange')}-{first[0].get('endRange')} {first[0].get('unit')})"
                )
            for dimension in dimensions:
                found.setdefault(float(dimension["pricePerUnit"]["USD"]), read_as)
    what = f"usagetype *{item.usagetype} ({'/'.join(item.units)}) in {region}"
    if len(found) != 1:
        listed = (
            f" (${', $'.join(f'{usd:g}' for usd in sorted(found))})"
            if found
            else (f" (units answered: {', '.join(sorted(units))})" if units else "")
        )
        return None, "", f"Price List API gave {len(found)} On-Demand prices for {what}{listed}; not used"
    ((usd, read_as),) = found.items()
    return usd, read_as, ""


def service_prices(pricing: Any, region: str, today: str) -> tuple[dict[str, prices.Price], list[str]]:
    """The Price List API's price of each item for the region, by prices.py key; a line for each item
    it did not give (after a failed call no other call is made, and one line names what was left)."""
    source = f"AWS Price List API (pricing.get_products, read {today})"
    answers: dict[Query, list[dict[str, Any]] | str] = {}  # the products, or why this query's answer is unusable
    read_usd: dict[str, tuple[float, str]] = {}
    notes: list[str] = []
    failed, left = "", []
    for item in (*ITEMS, EXTENDED_SUPPORT):
        if item.query not in answers:
            if failed:  # denied, throttled, unreachable: the next calls would fail the same way, and are not made
                left.append(item.what)
                continue
            try:
                answers[item.query] = products(pricing, item.query, region)
            except ValueError as error:  # this query's answer only (past MAX_PAGES, a product that is not JSON)
                answers[item.query] = why_failed(error)
            except Exception as error:  # noqa: BLE001 (the calls only: any other error is their answer, not our code)
                failed = why_failed(error)
                left.append(item.what)
                continue
        answer = answers[item.query]
        if isinstance(answer, str):
            notes.append(f"{item.what}: Price List API answer unusable in {region}: {answer}")
            continue
        try:
            usd, read_as, why = read(answer, item, region)
        except (ValueError, TypeError, AttributeError, KeyError) as error:  # a malformed product
            usd, read_as, why = None, "", f"Price List API answer unreadable in {region}: {why_failed(error)}"
        if usd is None:
            notes.append(f"{item.what}: {why}")
        else:
            read_usd[item.what] = (usd, read_as)
    if failed:
        notes.append(f"Price List API not used for {', '.join(left)} in {region}: {failed}")
    found = {
        i.what: prices.Price(read_usd[i.what][0], i.unit, f"{source}; {read_usd[i.what][1]}", today)
        for i in ITEMS
        if i.what in read_usd
    }
    if "eks-standard" in read_usd and EXTENDED_SUPPORT.what in read_usd:
        (standard, on), (extra, also) = read_usd["eks-standard"], read_usd.pop(EXTENDED_SUPPORT.what)
        found["eks-extended"] = prices.Price(
            round(standard + extra, 6),
            "cluster-hour",
            (f"{source}; ${standard:g} {on} + ${extra:g} {also}: extended support bills both"),
            today,
        )
    elif EXTENDED_SUPPORT.what in read_usd:
        notes.append(
            "eks-extended: the Price List API gave the extended-support charge but not the standard "
            "cluster-hour it is billed on top of; not used"
        )
    return found, notes
