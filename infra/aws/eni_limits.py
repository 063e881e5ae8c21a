"""The ENI limits nodeadm reads to size a node's maxPods, and so its kubelet's memory reservation.

nodeadm looks the instance type up in its embedded instance-info.jsonl (awslabs/amazon-eks-ami
@ 81fec2e895854f599974fe4d3d72f61c0a9aaffa, nodeadm/internal/kubelet/eni_max_pods.go
`GetInstanceInfo`), which its daily workflow (.github/workflows/sync-eni-max-pods.yaml) builds from
EC2 DescribeInstanceTypes with nodeadm/internal/util/ec2.go `getInstanceInfoFromDescribeResponse`:
MaximumNetworkInterfaces of the network card at DefaultNetworkCardIndex, and
Ipv4AddressesPerInterface. eni_limits.csv is that same computation over moto's DescribeInstanceTypes
data (moto 5.2.5, moto/ec2/resources/instance_types.json.gz), for the x86-64 types only (the
controller image is amd64-only); tests/aws/test_node_allocatable.py recomputes it from moto's file and
compares it with instance-info.jsonl for the stacks' types. moto is a dev dependency, so the
program reads the CSV, not moto.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("eni_limits.csv")
COLUMNS = ("instance_type", "default_max_enis", "ipv4_addresses_per_interface")


@dataclass(frozen=True)
class EniLimits:
    default_max_enis: int
    ipv4_addresses_per_interface: int


@cache
def table() -> dict[str, EniLimits]:
    with TABLE.open(newline="", encoding="utf-8") as handle:
        rows = csv.DictReader(handle)
        if tuple(rows.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{TABLE} must have the columns {', '.join(COLUMNS)}")
        return {
            row["instance_type"]: EniLimits(int(row["default_max_enis"]), int(row["ipv4_addresses_per_interface"]))
            for row in rows
        }


def eni_limits(instance_type: str) -> EniLimits | None:
    return table().get(instance_type)
