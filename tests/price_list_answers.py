"""Price List API answers shaped like real GetProducts answers, for the tests of
infra/aws/live_service_prices.py (tests/aws/test_live_service_prices.py) and of preflight's estimate
(tests/cli/test_preflight_service_prices.py).

Shapes from TypeOneLabs/tellury @ 38f9187895782b23f18ff6953e921cb0215ecbe0,
pkg/pricing/aws/testdata/getproducts-recorded.json (recorded GetProducts answers): a JSON string per
product, product.attributes with regionCode/servicecode/usagetype (productFamily beside attributes,
absent for the public IPv4 products), terms.OnDemand.<sku>.<offer>.priceDimensions with unit,
beginRange, endRange, pricePerUnit.USD. Usage types carry the region prefixes real answers carry:
`EU-` in eu-west-1; in us-east-1 none for NAT and gp3, `USE1-` for EKS and public IPv4. The prices
are test answers (eu-west-1's gp3 $0.088 and public IPv4 $0.005 are the recorded ones).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from botocore.stub import Stubber

from infra.aws import live_service_prices as live


def product(
    service: str,
    usagetype: str,
    unit: str,
    *tiers: tuple[str, str, str],
    region: str = "eu-west-1",
    family: str | None = None,
    **attributes: str,
) -> str:
    """One product as GetProducts answers it; `tiers` are (beginRange, endRange, USD)."""
    sku = f"{zlib.crc32(repr((service, usagetype, region, tiers)).encode()):08X}"
    body: dict[str, Any] = {
        "attributes": {
            "regionCode": region,
            "servicecode": service,
            "usagetype": usagetype,
            "locationType": "AWS Region",
            "operation": "",
            **attributes,
        },
        "sku": sku,
    }
    if family:
        body["productFamily"] = family
    dimensions = {
        f"{sku}.JRTCKXETXF.{i}": {
            "unit": unit,
            "beginRange": begin,
            "endRange": end,
            "appliesTo": [],
            "description": f"${usd} per {unit}",
            "rateCode": f"{sku}.JRTCKXETXF.{i}",
            "pricePerUnit": {"USD": usd},
        }
        for i, (begin, end, usd) in enumerate(tiers)
    }
    return json.dumps(
        {
            "product": body,
            "serviceCode": service,
            "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "priceDimensions": dimensions,
                        "sku": sku,
                        "offerTermCode": "JRTCKXETXF",
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "termAttributes": {},
                    }
                }
            },
        }
    )


def flat(usd: str) -> tuple[str, str, str]:
    return ("0", "Inf", usd)


def world(
    region: str = "eu-west-1",
    eks: str = "EU-",
    nat: str = "EU-",
    ipv4: str = "EU-",
    ebs: str = "EU-",
    efs: str = "EU-",
    ecr: str = "EU-",
) -> dict[live.Query, list[str]]:
    """Every query's answer in the region, with the siblings a real answer holds next to the wanted product."""
    return {
        live.EKS: [
            product(
                "AmazonEKS",
                f"{eks}AmazonEKS-Hours:perCluster",
                "Hours",
                flat("0.1000000000"),
                region=region,
                family="Compute",
                tiertype="HAStandard",
            ),
            product(
                "AmazonEKS",
                f"{eks}AmazonEKS-Hours:extendedSupport",
                "Hours",
                flat("0.5000000000"),
                region=region,
                family="Compute",
            ),
            product(
                "AmazonEKS",
                f"{eks}AmazonEKSHybridNodes-Hours:pervCPU",
                "Hours",
                flat("0.0200000000"),
                region=region,
                family="Compute",
            ),
        ],
        live.NAT: [
            product(
                "AmazonEC2", f"{nat}NatGateway-Hours", "Hrs", flat("0.0480000000"), region=region, family="NAT Gateway"
            ),
            product(
                "AmazonEC2", f"{nat}NatGateway-Bytes", "GB", flat("0.0480000000"), region=region, family="NAT Gateway"
            ),
            product(
                "AmazonEC2",
                f"{nat}RegionalNatGateway-Hours",
                "Hrs",
                flat("0.0600000000"),
                region=region,
                family="NAT Gateway",
            ),
            product(
                "AmazonEC2",
                f"{nat}NatGateway-Prvd-Gbps",
                "Gbps-hrs",
                flat("1.1640000000"),
                region=region,
                family="NAT Gateway",
            ),
        ],
        live.IPV4: [
            product(
                "AmazonVPC",
                f"{ipv4}PublicIPv4:InUseAddress",
                "Hrs",
                flat("0.0050000000"),
                region=region,
                group="VPCPublicIPv4Address",
            ),
            product(
                "AmazonVPC",
                f"{ipv4}PublicIPv4:IdleAddress",
                "Hrs",
                flat("0.0060000000"),
                region=region,
                group="VPCPublicIPv4Address",
            ),
        ],
        live.GP3: [
            product(
                "AmazonEC2",
                f"{ebs}EBS:VolumeUsage.gp3",
                "GB-Mo",
                flat("0.0880000000"),
                region=region,
                family="Storage",
                volumeApiName="gp3",
            )
        ],
        live.EFS: [
            product(
                "AmazonEFS",
                f"{efs}TimedStorage-ByteHrs",
                "GB-Mo",
                flat("0.3300000000"),
                region=region,
                family="Storage",
                storageClass="General Purpose",
            ),
            product(
                "AmazonEFS",
                f"{efs}IATimedStorage-ByteHrs",
                "GB-Mo",
                flat("0.0250000000"),
                region=region,
                family="Storage",
                storageClass="Infrequent Access",
            ),
            product(
                "AmazonEFS",
                f"{efs}TimedStorage-Z-ByteHrs",
                "GB-Mo",
                flat("0.1760000000"),
                region=region,
                family="Storage",
                storageClass="One Zone-General Purpose",
            ),
        ],
        live.ECR: [
            product(
                "AmazonECR",
                f"{ecr}TimedStorage-ByteHrs",
                "GB-Mo",
                flat("0.1000000000"),
                region=region,
                family="EC2 Container Registry",
            )
        ],
    }


QUERIES = [live.EKS, live.NAT, live.IPV4, live.GP3, live.EFS, live.ECR]  # the order the items ask them


def expected_params(query: live.Query, region: str) -> dict[str, Any]:
    return {
        "ServiceCode": query.service,
        "MaxResults": 100,
        "Filters": [
            {"Type": "TERM_MATCH", "Field": field, "Value": value}
            for field, value in (("regionCode", region), *query.filters)
        ],
    }


def queue(stub: Stubber, answers: dict[live.Query, list[str]], region: str, until: int = len(QUERIES)) -> None:
    for query in QUERIES[:until]:
        stub.add_response(
            "get_products", {"FormatVersion": "aws_v1", "PriceList": answers[query]}, expected_params(query, region)
        )
