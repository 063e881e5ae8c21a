"""Does a worker fit its node, and do the side Jobs fit the system nodes? What one node of a type
gives pods; the check that `workersPerNode` workers of (`workerCpu`, `workerMemory`, the node's GPUs)
fit one node of `nodeInstanceType`; and the check that the data-prep, test and export Jobs find room
on the system nodes beside every system pod (`check_side_jobs_fit`).

A node gives pods its allocatable (infra/aws/node_allocatable.py: the EKS AMI's kubelet
reservation, its eviction threshold and the VM's own memory) less what the DaemonSets every node
runs request (infra/aws/node_daemonsets.py). The instance's vCPUs and memory come from the table
of every EC2 type offered for Linux (infra/aws/instance_shapes.py); the GPU table
(infra/aws/gpu_instances.py) says how many GPUs a worker takes: all of them, so GPU stacks run one
worker per node. A type whose ENI limits the max-pods table lacks (none of the x86-64 types the
shape table lists) is not checked: the stack gets a warning saying so, and the run's wait still
fails fast with the scheduler's reason if a worker never fits (infra/components/scheduling.py).

Checked on target eks only: on target existing the nodes are not the stack's, and nodeInstanceType
means nothing there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from infra.aws import eni_limits, gpu_instances, instance_shapes, node_allocatable, node_daemonsets, system_pods
from infra.config.errors import ConfigError
from infra.config.keys import PROJECT
from infra.config.parsers import QUANTITY, memory_mib

# Kubernetes quantity suffixes as multipliers of one CPU (apimachinery resource.Quantity: decimal
# SI k, M, G, T; binary Ki, Mi, Gi, Ti; m is a thousandth).
# Fractions, not floats or Decimal's 28 digits: a 40-digit workerCpu must compare exactly.
_CPU_UNITS = {
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
}


# What each of the data-prep, test and export Jobs requests (infra/specs/workloads.py SIDE_JOB_CPU and
# SIDE_JOB_MEMORY; config sits below specs, so tests/config/test_node_fit.py compares the two). They
# tolerate no worker taint, so on every `eks` stack they run on the on-demand system nodes, one at a
# time, before and after the workers (docs/design-notes.md, "Where the side Jobs run").
SIDE_JOB_CPU_MILLICORES = 500
SIDE_JOB_MEMORY_MIB = 4096


@dataclass(frozen=True)
class NodeRoom:
    """One node of a type, and what it leaves for pods."""

    instance_type: str
    vcpus: int
    memory_mib: int
    gpus: int
    kubelet_cpu_millicores: int  # kubeReserved cpu
    kubelet_memory_mib: int  # kubeReserved memory + evictionHard + the VM's own
    daemonset_cpu_millicores: int
    daemonset_memory_mib: int
    cpu_millicores: int  # for pods
    memory_mib_for_pods: int


def cpu_millicores(quantity: str) -> int:
    """A CPU quantity that passed the key's rule, in millicores, rounded up as the API server
    rounds a request below 1m (resource.Quantity keeps at most milli precision for cpu)."""
    match = QUANTITY.fullmatch(quantity)
    if match is None:
        raise ValueError(f"{quantity!r} is not a CPU quantity")  # the key's rule refuses it first
    return math.ceil(Fraction(match[1]) * _CPU_UNITS.get(match[3] or "", Fraction(1)) * 1000)


def node_room(instance_type: str) -> NodeRoom | None:
    """What one node of the type gives pods, or None when the tables cannot tell."""
    shape = instance_shapes.shape(instance_type)
    gpu = gpu_instances.nvidia_instance(instance_type)
    limits = eni_limits.eni_limits(instance_type)
    if limits is None or shape is None:
        return None
    vcpus, memory = shape.vcpus, shape.memory_mib
    max_pods = node_allocatable.eni_max_pods(limits.default_max_enis, limits.ipv4_addresses_per_interface)
    node = node_allocatable.allocatable(vcpus, memory, max_pods)
    for_pods = node_daemonsets.for_pods(node, gpu_node=gpu is not None)
    return NodeRoom(
        instance_type=instance_type,
        vcpus=vcpus,
        memory_mib=memory,
        gpus=gpu.gpus if gpu else 0,
        kubelet_cpu_millicores=vcpus * 1000 - node.cpu_millicores,
        kubelet_memory_mib=memory - node.memory_mib,
        daemonset_cpu_millicores=node.cpu_millicores - for_pods.cpu_millicores,
        daemonset_memory_mib=node.memory_mib - for_pods.memory_mib,
        cpu_millicores=for_pods.cpu_millicores,
        memory_mib_for_pods=for_pods.memory_mib,
    )


def check_worker_fits(v: dict[str, Any]) -> str | None:
    """Raise ConfigError when workersPerNode workers do not fit one node; a warning (or None) when
    the node cannot be sized. Checks CPU, then memory: the first misfit is the line a user sees."""
    instance_type, per_node = v["node_instance_type"], v["workers_per_node"]
    room = node_room(instance_type)
    if room is None:
        return (
            f"config {PROJECT}:nodeInstanceType={instance_type!r} is not in the ENI limits table "
            f"(infra/aws/eni_limits.csv), so whether a worker fits its node is not checked before `pulumi up`"
        )
    workers = f"{per_node} worker{'s' if per_node > 1 else ''} per node"
    most_cpu = room.cpu_millicores // per_node
    if cpu_millicores(v["worker_cpu"]) > most_cpu:
        raise ConfigError(
            f"{PROJECT}:workerCpu",
            v["worker_cpu"],
            f"must be at most {most_cpu}m for {workers}: one {instance_type} node gives pods "
            f"{room.cpu_millicores}m of its {room.vcpus} vCPUs (the kubelet keeps "
            f"{room.kubelet_cpu_millicores}m, the node's DaemonSets request {room.daemonset_cpu_millicores}m)",
        )
    most_memory = room.memory_mib_for_pods // per_node
    if memory_mib(v["worker_memory"]) > most_memory:
        raise ConfigError(
            f"{PROJECT}:workerMemory",
            v["worker_memory"],
            f"must be at most {most_memory}Mi for {workers}: one {instance_type} node gives pods "
            f"{room.memory_mib_for_pods}Mi of its {room.memory_mib} MiB (the kubelet, its eviction "
            f"threshold and the VM keep {room.kubelet_memory_mib}Mi, the node's DaemonSets request "
            f"{room.daemonset_memory_mib}Mi)",
        )
    return None


def _side_job_room(room: NodeRoom, system_nodes: int) -> tuple[int, int, Fraction]:
    """(cpu, memory) a system node keeps once its one-per-node pods run (Karpenter, taken to be on
    every node), and the share of the system nodes the other system pods can block for a side Job.

    Why a share: the scheduler may put the other pods (CoreDNS, the CSI controllers, metrics-server,
    the controller, the rendezvous store) anywhere, so the check must hold whichever way they land. A node is
    blocked for the Job once the pods on it take more than `room - job` of its CPU or of its memory;
    a pod of (c, m) does at most max(c / cpu_margin, m / memory_margin) of that, so if these shares
    add up to less than the number of nodes, some node is always left with room for the Job."""
    cpu = room.cpu_millicores - sum(
        p.cpu_millicores for p in system_pods.SYSTEM_PODS if p.one_per_node and p.count(system_nodes)
    )
    memory = room.memory_mib_for_pods - sum(
        p.memory_mib for p in system_pods.SYSTEM_PODS if p.one_per_node and p.count(system_nodes)
    )
    cpu_margin, memory_margin = cpu - SIDE_JOB_CPU_MILLICORES + 1, memory - SIDE_JOB_MEMORY_MIB + 1
    if cpu_margin <= 0 or memory_margin <= 0:
        return cpu, memory, Fraction(system_nodes)  # not even a node with no other pod has the room
    share = sum(
        (
            max(Fraction(p.cpu_millicores, cpu_margin), Fraction(p.memory_mib, memory_margin)) * p.count(system_nodes)
            for p in system_pods.SYSTEM_PODS
            if not p.one_per_node
        ),
        Fraction(0),
    )
    return cpu, memory, share


def check_side_jobs_fit(v: dict[str, Any]) -> None:
    """The data-prep, test and export Jobs find a system node with room for them, beside every
    DaemonSet (infra/aws/node_daemonsets.py) and every system Deployment (infra/aws/system_pods.py)
    at their requests, however the scheduler spreads those; ConfigError naming the sums if not."""
    instance_type, count = v["system_node_instance_type"], v["system_node_count"]
    room = node_room(instance_type)
    if room is None:
        return
    cpu, memory, share = _side_job_room(room, count)
    if share < count:
        return
    per_node = [p for p in system_pods.SYSTEM_PODS if p.one_per_node and p.count(count)]
    others = [
        p
        for p in system_pods.SYSTEM_PODS
        if not p.one_per_node and p.count(count) and (p.cpu_millicores or p.memory_mib)
    ]
    nodes = f"one of the {count} {instance_type} system nodes" if count > 1 else f"the one {instance_type} system node"
    raise ConfigError(
        f"{PROJECT}:systemNodeInstanceType",
        instance_type,
        f"must leave the data-prep, test and export Jobs {SIDE_JOB_CPU_MILLICORES}m and "
        f"{SIDE_JOB_MEMORY_MIB}Mi on {nodes} (systemNodeCount {count}) however the system pods "
        f"spread: a node gives pods {room.cpu_millicores}m and {room.memory_mib_for_pods}Mi after its "
        f"DaemonSets, {cpu}m and {memory}Mi after "
        + ", ".join(f"{p.name} ({p.cpu_millicores}m, {p.memory_mib}Mi)" for p in per_node)
        + ", and the other system pods take "
        f"{sum(p.cpu_millicores * p.count(count) for p in others)}m and "
        f"{sum(p.memory_mib * p.count(count) for p in others)}Mi ("
        + ", ".join(f"{p.count(count)} x {p.name}" for p in others)
        + "): choose a larger systemNodeInstanceType or a larger systemNodeCount",
    )


def largest_worker(instance_type: str, per_node: int = 1) -> tuple[str, str] | None:
    """(workerCpu, workerMemory) of the largest worker that fits, as config values."""
    room = node_room(instance_type)
    if room is None:
        return None
    return f"{room.cpu_millicores // per_node}m", f"{math.floor(room.memory_mib_for_pods / per_node)}Mi"
