"""What one EKS node gives its pods: the instance's vCPUs and memory less what the kubelet keeps.

The formula is the EKS AL2023 AMI's own: nodeadm writes the kubelet's configuration when the node
boots (awslabs/amazon-eks-ami @ 81fec2e895854f599974fe4d3d72f61c0a9aaffa):

- nodeadm/internal/kubelet/config.go `withDefaultReservedResources`: kubeReserved cpu is
  `getCPUMillicoresToReserve` (6 % of the first core, 1 % of the second, 0.5 % of the third and
  fourth, 0.25 % of every core above four, each range rounded down to whole millicores), kubeReserved
  memory is `getMemoryMebibytesToReserve(maxPods)` = 11 MiB x maxPods + 255 MiB. No systemReserved
  is set (only its cgroup).
- the same file, `defaultKubeletSubConfig`: evictionHard `memory.available: 100Mi`, which the kubelet
  also holds back from allocatable.
- nodeadm/internal/kubelet/eni_max_pods.go `calculateStandardMaxPods`: the maxPods that reservation
  uses is ENIs of the default network card x (IPv4 addresses per ENI - 1) + 2, read from the
  embedded instance-info.jsonl (infra/aws/eni_limits.py). An EKS managed node group writes its own
  maxPods into the kubelet configuration (at most 110 below 30 vCPUs: EKS user guide, prefix
  delegation, "Managed node groups enforces a maximum number on the value of maxPods"), but as a
  drop-in that does not change the reservation: nodeadm's e2e case
  nodeadm/test/e2e/cases/custom-max-pods-expression/scenarios/kubelet-config-max-pods expects
  kubeReserved memory 915Mi (60 pods) beside a drop-in `maxPods: 1`.

The kubelet's memory capacity is the kernel's MemTotal, less than the instance's nominal memory.
Karpenter, which has to predict allocatable before a node exists, subtracts a VM overhead of 7.5 %
of the nominal memory, rounded up to whole MiB (aws/karpenter-provider-aws
@ 1d927085dd81a9df9301e613f371dac5b4d16bfe, pkg/operator/options/options.go `vm-memory-overhead-percent`
default 0.075; pkg/providers/instancetype/types.go `memory`); so do we, so that a worker sized to
the most that fits is not refused by the real node.
"""

from __future__ import annotations

from dataclasses import dataclass

# getCPUMillicoresToReserve: the ranges' bounds in millicores and the share reserved of each, in
# basis points (600 = 6 %).
_CPU_RANGE_BOUNDS = (0, 1000, 2000, 4000)
_CPU_BASIS_POINTS = (600, 100, 50, 25)
# getMemoryMebibytesToReserve
MEMORY_MIB_PER_POD = 11
MEMORY_MIB_BASE = 255
# defaultKubeletSubConfig evictionHard memory.available
EVICTION_HARD_MEMORY_MIB = 100
# Karpenter's VMMemoryOverheadPercent default, as a fraction in thousandths (exact arithmetic:
# 7.5 % of 1000 MiB is 75 MiB, not 75.00000000000001).
VM_OVERHEAD_PER_MILLE = 75


@dataclass(frozen=True)
class Allocatable:
    cpu_millicores: int
    memory_mib: int


def kube_reserved_cpu_millicores(vcpus: int) -> int:
    """nodeadm's kubeReserved cpu for a node with `vcpus` online CPUs."""
    total = vcpus * 1000
    bounds = (*_CPU_RANGE_BOUNDS, total)
    reserved = 0
    for start, end, basis_points in zip(bounds, bounds[1:], _CPU_BASIS_POINTS):
        if total <= start:
            continue
        reserved += (min(total, end) - start) * basis_points // 10000
    return reserved


def kube_reserved_memory_mib(max_pods: int) -> int:
    """nodeadm's kubeReserved memory for the maxPods it computed."""
    return MEMORY_MIB_PER_POD * max_pods + MEMORY_MIB_BASE


def eni_max_pods(default_max_enis: int, ipv4_addresses_per_interface: int) -> int:
    """nodeadm's calculateStandardMaxPods (no custom maxPodsExpression)."""
    return default_max_enis * (ipv4_addresses_per_interface - 1) + 2


def vm_overhead_mib(memory_mib: int) -> int:
    """Karpenter's estimate of the memory the kernel and firmware keep, rounded up to whole MiB."""
    return -(-memory_mib * VM_OVERHEAD_PER_MILLE // 1000)


def allocatable(vcpus: int, memory_mib: int, max_pods: int) -> Allocatable:
    """The node's allocatable CPU and memory as the scheduler will see them (estimated from below for
    memory: see vm_overhead_mib)."""
    return Allocatable(
        cpu_millicores=vcpus * 1000 - kube_reserved_cpu_millicores(vcpus),
        memory_mib=(
            memory_mib - vm_overhead_mib(memory_mib) - kube_reserved_memory_mib(max_pods) - EVICTION_HARD_MEMORY_MIB
        ),
    )
