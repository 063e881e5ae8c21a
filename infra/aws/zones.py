"""Which availability zones of the region the stack may put subnets in.

Two kinds of zone that `aws.get_availability_zones()` returns must not be used:
- Local Zones and Wavelength Zones, which it returns once the account opted in to them, and which
  sort before the region's own zones (`us-west-2-lax-1a` < `us-west-2a`). EC2's
  DescribeAvailabilityZones filter `opt-in-status` = `opt-in-not-required` keeps only the regular
  Availability Zones (upstream-facts.md fact 13; pulumi-aws `get_availability_zones` docs, example
  "Only Availability Zones (no Local Zones)"). EKS refuses both for cluster subnets too.
- the Availability Zone IDs EKS refuses for cluster subnets (UnsupportedAvailabilityZoneException),
  listed in the EKS user guide, "View Amazon EKS networking requirements for VPC and subnets",
  section "Subnet requirements for clusters" (awsdocs/amazon-eks-user-guide
  latest/ug/networking/network-reqs.adoc @ f6004140). The list names zone IDs, which are the same in
  every account; zone names map to different zone IDs in different accounts, so the check is on IDs.

The data source sorts the zones by name and returns `names` and `zoneIds` as parallel lists
(hashicorp/terraform-provider-aws internal/service/ec2/ec2_availability_zones_data_source.go
@ 0a55e18a: one loop appends both), which `usable_zone_names` relies on.
"""

from __future__ import annotations

import pulumi_aws as aws

# EKS user guide, network-reqs.adoc @ f6004140: us-east-1 use1-az3, us-west-1 usw1-az2, ca-central-1 cac1-az3.
EKS_REFUSED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})

ONLY_AVAILABILITY_ZONES = aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])


def usable_zone_names(names: list[str], zone_ids: list[str]) -> list[str]:
    """The zone names, sorted, without those whose zone ID EKS refuses."""
    if len(names) != len(zone_ids):
        raise ValueError(f"names and zone IDs differ in length: {names} / {zone_ids}")
    return sorted(name for name, zone_id in zip(names, zone_ids) if zone_id not in EKS_REFUSED_ZONE_IDS)


def region_zone_names() -> list[str]:
    """The region's available regular Availability Zones that EKS accepts, by name, sorted."""
    result = aws.get_availability_zones(state="available", filters=[ONLY_AVAILABILITY_ZONES])
    return usable_zone_names(list(result.names), list(result.zone_ids))
