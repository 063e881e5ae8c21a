"""AWS regions, from the partition data that ships inside botocore (`botocore/data/partitions.json`).

A pattern such as `[a-z]{2}-[a-z]+-[0-9]` lets `us-weest-2` and `us-west-9` through, and the typo
only shows up minutes into `pulumi up`. botocore's partition file lists every region of every
partition by name (the same file the AWS SDKs resolve endpoints with), so a region is checked
against that list. botocore is pinned in pyproject.toml; a newer region needs a botocore bump.
"""

from __future__ import annotations

import difflib
from functools import cache

import botocore.loaders

# The stack's IAM ARNs (managed policies, S3 objects) are written for this partition.
COMMERCIAL_PARTITION = "aws"


@cache
def _regions_by_partition() -> dict[str, tuple[str, ...]]:
    """{partition id: its region names}. Partition-wide pseudo-regions such as `aws-global`
    (the endpoint of global services) are not places a VPC can live, so they are left out."""
    data = botocore.loaders.create_loader().load_data("partitions")
    return {
        partition["id"]: tuple(
            sorted(name for name in partition.get("regions", {}) if not name.startswith(partition["id"] + "-"))
        )
        for partition in data["partitions"]
    }


def commercial_regions() -> tuple[str, ...]:
    return _regions_by_partition()[COMMERCIAL_PARTITION]


def region_problem(region: str) -> str | None:
    """None for a region of the commercial partition, else what is wrong and what is allowed."""
    if region in commercial_regions():
        return None
    for partition, names in _regions_by_partition().items():
        if region in names:
            return (
                f"is a region of the {partition} partition; the stack's IAM ARNs are written for the "
                f"commercial aws partition (e.g. us-west-2)"
            )
    close = difflib.get_close_matches(region, commercial_regions(), n=1)
    hint = f"did you mean {close[0]}?" if close else f"known regions: {', '.join(commercial_regions())}"
    return f"must be set to an AWS region of the commercial aws partition ({hint})"
