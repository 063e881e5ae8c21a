"""The kubelet reservation of the EKS AL2023 AMI, against the values its own sources state.

nodeadm (awslabs/amazon-eks-ami @ 81fec2e895854f599974fe4d3d72f61c0a9aaffa) has no unit test of
getCPUMillicoresToReserve / getMemoryMebibytesToReserve; its e2e cases boot nodeadm on a mock
instance and compare the kubelet config it writes with an expected file. The mock instance is an
m4.xlarge (nodeadm/test/e2e/infra/aemm-default-config.json "instance-type") with 2 online CPUs
(nodeadm/test/e2e/infra/mock/cpu/online "0-1"):
  cases/kubelet-config-dir/expected-kubelet-config.json            maxPods 58  -> cpu 70m, memory 893Mi
  cases/custom-max-pods-expression/expected-kubelet-config.json     maxPods 44  -> memory 739Mi
  cases/custom-max-pods-expression/scenarios/kubelet-config-max-pods/expected.json
                                                                    maxPods 60  -> memory 915Mi
  cases/kubelet-config-new-instance-type/expected-kubelet-config.json (unknown type, default 110)
                                                                    maxPods 110 -> memory 1465Mi
and nodeadm/internal/kubelet/eni_max_pods_test.go TestCalcMaxPods: 3 ENIs x 6 IPs -> 17, 6 x 12 -> 68.

Karpenter implements the same reservation to predict nodes (aws/karpenter-provider-aws
@ 1d927085dd81a9df9301e613f371dac5b4d16bfe, pkg/providers/instancetype/suite_test.go): "should use
defaults when no kubelet is specified" expects 80m and 893Mi for an m5.xlarge (4 vCPUs, 58 pods),
and its allocatable test lists what real nodes reported ("Actual allocatable values as reported by
the node from kubelet"): m5.large 1930m and 7220184Ki; its estimate must not exceed them.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import moto
import pytest

from infra.aws import eni_limits, node_allocatable
from infra.aws.eni_limits import EniLimits
from infra.aws.node_allocatable import Allocatable

MOTO_INSTANCE_TYPES = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"

# Lines of nodeadm/internal/kubelet/instance-info.jsonl (same commit) for the stacks' node types and
# the e2e mock instance: {"instanceType": ..., "defaultMaxENIs": ..., "ipv4AddressesPerInterface": ...}.
NODEADM_INSTANCE_INFO = {
    "c5.4xlarge": (8, 30),
    "m5.xlarge": (4, 15),
    "g6.xlarge": (4, 15),
    "m5.large": (3, 10),
    "m4.xlarge": (4, 15),
}


def moto_eni_limits() -> dict[str, EniLimits]:
    """nodeadm's getInstanceInfoFromDescribeResponse over moto's DescribeInstanceTypes data, x86-64 types."""
    data = json.loads(gzip.decompress(MOTO_INSTANCE_TYPES.read_bytes()))
    table = {}
    for name, info in sorted(data.items()):
        if "x86_64" not in info["ProcessorInfo"]["SupportedArchitectures"]:
            continue
        network = info["NetworkInfo"]
        card = next(c for c in network["NetworkCards"] if c["NetworkCardIndex"] == network["DefaultNetworkCardIndex"])
        table[name] = EniLimits(card["MaximumNetworkInterfaces"], network["Ipv4AddressesPerInterface"])
    return table


def render_csv(table: dict[str, EniLimits]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(eni_limits.COLUMNS)
    for name, limits in table.items():
        writer.writerow((name, limits.default_max_enis, limits.ipv4_addresses_per_interface))
    return out.getvalue()


def test_the_eni_table_is_nodeadms_computation_over_motos_data():
    assert eni_limits.TABLE.read_text() == render_csv(moto_eni_limits())


@pytest.mark.parametrize("instance_type", sorted(NODEADM_INSTANCE_INFO))
def test_the_stacks_types_have_the_limits_nodeadm_embeds(instance_type):
    enis, ips = NODEADM_INSTANCE_INFO[instance_type]
    assert eni_limits.eni_limits(instance_type) == EniLimits(enis, ips)


def test_graviton_types_are_not_in_the_table():
    assert eni_limits.eni_limits("c6g.4xlarge") is None and eni_limits.eni_limits("nonexistent.large") is None


@pytest.mark.parametrize(("enis", "ips", "max_pods"), [(3, 6, 17), (6, 12, 68), (4, 15, 58), (8, 30, 234)])
def test_max_pods_as_nodeadm_computes_it(enis, ips, max_pods):
    assert node_allocatable.eni_max_pods(enis, ips) == max_pods


@pytest.mark.parametrize(("max_pods", "memory_mib"), [(58, 893), (44, 739), (60, 915), (110, 1465)])
def test_kube_reserved_memory_of_nodeadms_e2e_cases(max_pods, memory_mib):
    assert node_allocatable.kube_reserved_memory_mib(max_pods) == memory_mib


@pytest.mark.parametrize(("vcpus", "millicores"), [(2, 70), (4, 80)])
def test_kube_reserved_cpu_of_the_sources_cases(vcpus, millicores):
    assert node_allocatable.kube_reserved_cpu_millicores(vcpus) == millicores


@pytest.mark.parametrize(("vcpus", "millicores"), [(1, 60), (3, 75), (8, 90), (16, 110), (96, 310)])
def test_kube_reserved_cpu_between_and_beyond_the_ranges(vcpus, millicores):
    # 6 % of the first 1000m, 1 % of the next 1000m, 0.5 % up to 4000m, 0.25 % above, each range
    # rounded down: 16 vCPUs = 60 + 10 + 10 + 12000 x 0.0025.
    assert node_allocatable.kube_reserved_cpu_millicores(vcpus) == millicores


def test_allocatable_cpu_matches_what_real_nodes_report():
    # Karpenter's table of node-reported allocatable: 2 vCPUs -> 1930m, 4 vCPUs -> 3920m.
    assert node_allocatable.allocatable(2, 8192, 29).cpu_millicores == 1930
    assert node_allocatable.allocatable(4, 16384, 58).cpu_millicores == 3920


def test_allocatable_memory_never_exceeds_what_a_real_m5_large_reports():
    m5_large = node_allocatable.eni_max_pods(*NODEADM_INSTANCE_INFO["m5.large"])
    estimate = node_allocatable.allocatable(2, 8192, m5_large).memory_mib
    # 8192 - ceil(8192 x 0.075) - (11 x 29 + 255) - 100
    assert estimate == 8192 - 615 - 574 - 100
    assert estimate * 1024 <= 7220184


def test_vm_overhead_is_rounded_up_and_exact_on_round_numbers():
    assert node_allocatable.vm_overhead_mib(8192) == 615  # 614.4
    assert node_allocatable.vm_overhead_mib(1000) == 75  # not 76 from a float's 75.00000000000001
    assert node_allocatable.allocatable(16, 32768, 234) == Allocatable(
        cpu_millicores=15890, memory_mib=32768 - 2458 - 2829 - 100
    )


if __name__ == "__main__":  # regenerate infra/aws/eni_limits.csv after a moto upgrade
    eni_limits.TABLE.write_text(render_csv(moto_eni_limits()))
