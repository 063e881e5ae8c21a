"""Offline price table: what each billed item of a stack costs, where the number was read, and when.

Used by `infra/cli/cost.py` when no AWS Price List answer is at hand (synth, CI, no credentials).
Every entry names its source and the date it was read (UTC). A price that could not be read from
any source available to this project is recorded as NOT_READ with the reason, never guessed: the
cost estimate then lists that item as unpriced, and `preflight` with credentials reads it from
the AWS Price List API (`pricing.get_products`).

A stack item with NO entry at all (say a new region or instance type in a stack file) is unpriced
in the estimate, and `cost.missing_prices` names it: tests/test_cost.py asserts that no stack in
stacks/ has one, so adding a stack without recording its prices (or why they could not be read)
fails the suite.

Read on 2026-11-22. The AWS pricing pages render most per-region rates with JavaScript, so the
stored copies reachable here hold only the rates written in their text and examples; the EC2
On-Demand rates and the EBS gp3 rate were not among them.
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


EKS_BLOG = ("AWS Containers blog, 'Amazon EKS extended support for Kubernetes versions pricing' "
            "(aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing): "
            "'$0.60 per cluster per hour' in extended support, '$0.10 per cluster per hour' in standard support; "
            "upstream-facts.md fact 16")
NAT_US_EAST_1 = ("sst.dev docs, component aws/vpc, 'Managed NAT': 'a NAT Gateway per az at $0.045 per hour ... "
                 "rough estimates for us-east-1' (sst.dev/docs/component/aws/vpc/); the AWS page "
                 "(aws.amazon.com/vpc/pricing/) renders its region rates dynamically")
NAT_US_WEST_2 = ("cloudpipelines 'AWS NAT Gateway pricing 2026' region table: 'US West (Oregon, N. California) "
                 "~$0.045' hourly (cloudpipelines.pages.dev/guides/aws-nat-gateway-pricing-2026/); a third-party "
                 "transcription, the AWS page renders its region rates dynamically")
EFS_PAGE = ("aws.amazon.com/efs/pricing/ (stored copy): '$0.30/GB-month' for storage; the copy names no region "
            "and no storage class (an older single-rate version of the page)")
ECR_US_EAST_1 = ("cloudburn 'Amazon ECR pricing' (cloudburn.io/blog/amazon-ecr-pricing): 'Private storage "
                 "$0.10/GB/month', 'US East (N. Virginia) rates from the Amazon ECR pricing page as of March 2026'")
EC2_NOT_READ = ("NOT READ: no source reachable here states this On-Demand rate for this region (the AWS EC2 "
                "On-Demand page renders rates dynamically; the AWS Auto Scaling guide's c5 table is us-east-1 "
                "'example pricing and not current pricing'). preflight with credentials reads it from the Price List API")
EBS_NOT_READ = ("NOT READ: no source reachable here states the gp3 GB-month rate for this region (aws.amazon.com/ebs/pricing "
                "renders it dynamically; the stored aws.eu copy shows only a EUR example)")
ECR_NOT_READ = "NOT READ: the sources reachable here state ECR storage for US East (N. Virginia) only"

# Hours in the month that GB-month storage rates are divided by: the EBS pricing page's own worked
# gp3 example bills '43,200 seconds / (86,400 seconds/day * 30-day month)' (aws.eu/ebs/pricing, stored copy).
HOURS_PER_BILLING_MONTH = 24 * 30

# (what, region) -> Price. `what` is "eks-standard", "eks-extended", "nat-gateway", "ebs-gp3",
# "efs-standard", "ecr-storage" or "ec2:<instance type>".
PRICES: dict[tuple[str, str], Price] = {}

for _region in ("us-west-2", "us-east-1"):
    PRICES[("eks-standard", _region)] = Price(0.10, "cluster-hour", EKS_BLOG)
    PRICES[("eks-extended", _region)] = Price(0.60, "cluster-hour", EKS_BLOG)
    PRICES[("ebs-gp3", _region)] = Price(None, "GB-month", EBS_NOT_READ)
    PRICES[("efs-standard", _region)] = Price(0.30, "GB-month", EFS_PAGE)

PRICES[("nat-gateway", "us-east-1")] = Price(0.045, "NAT-gateway-hour", NAT_US_EAST_1)
PRICES[("nat-gateway", "us-west-2")] = Price(0.045, "NAT-gateway-hour", NAT_US_WEST_2)
PRICES[("ecr-storage", "us-east-1")] = Price(0.10, "GB-month", ECR_US_EAST_1)
PRICES[("ecr-storage", "us-west-2")] = Price(None, "GB-month", ECR_NOT_READ)
# The shipped stacks' node types: dev (us-west-2, c5.4xlarge) and smoke (us-east-1, m5.xlarge).
PRICES[("ec2:c5.4xlarge", "us-west-2")] = Price(None, "instance-hour", EC2_NOT_READ)
PRICES[("ec2:m5.xlarge", "us-east-1")] = Price(None, "instance-hour", EC2_NOT_READ)
# The gpu stack: GPU nodes and the CPU system nodes beside them.
PRICES[("ec2:g6.xlarge", "us-west-2")] = Price(None, "instance-hour", EC2_NOT_READ)
PRICES[("ec2:m5.large", "us-west-2")] = Price(None, "instance-hour", EC2_NOT_READ)


def lookup(what: str, region: str) -> Price:
    """The recorded price; MissingPrice when there is no entry at all (tests run this for every stack)."""
    try:
        return PRICES[(what, region)]
    except KeyError:
        raise MissingPrice(f"no price recorded for {what} in {region}: add it to infra/aws/prices.py with its source "
                           "and date (or NOT READ and why)") from None


def find(what: str, region: str, unit: str) -> Price:
    """The recorded price, or an unknown one saying that nothing is recorded: a user's own region or
    instance type still gets an estimate, with that item unpriced, never zero."""
    try:
        return lookup(what, region)
    except MissingPrice as missing:
        return Price(None, unit, f"NOT RECORDED: {missing}")
