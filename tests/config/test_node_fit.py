"""Every worker fits its node, at the boundaries: exactly the most that fits passes, one more is
refused with one line naming the key, the value and the most that fits (infra/config/node_fit.py).

What a node gives pods, worked out from the sources infra/aws/ cites:
  c5.4xlarge (EC2: 16 vCPUs, 32 GiB; nodeadm: 8 ENIs x 30 IPs -> 234 pods)
    cpu    16000 - 110 (kubeReserved) - 180 (aws-node 50, kube-proxy 100, ebs-csi-node 30)  = 15710m
    memory 32768 - 2458 (VM, 7.5 %) - 2829 (11 x 234 + 255) - 100 (eviction) - 154       = 27227Mi
           (kube-proxy 50, ebs-csi-node 104)
  g6.xlarge (EC2: 4 vCPUs, 16 GiB, 1 L4; 4 ENIs x 15 IPs -> 58 pods), a GPU node
    cpu    4000 - 80 - 230 (the device plugin's 50m too)                                 = 3690m
    memory 16384 - 1229 - 893 - 100 - 218 (the device plugin's 64Mi too)                = 13944Mi
  m5.xlarge (EC2: 4 vCPUs, 16 GiB; 58 pods): 3740m and 14008Mi for pods, halved for two workers.
"""

from __future__ import annotations

import pytest

from infra.config import PROJECT, ConfigError, load_settings
from infra.config.node_fit import cpu_millicores, largest_worker, node_room

P = PROJECT
EKS = {"aws:region": "us-west-2", f"{P}:workers": "1", f"{P}:minWorkers": "1", f"{P}:maxWorkers": "1"}


def load(**keys: str):
    return load_settings({**EKS, **{f"{P}:{k}": v for k, v in keys.items()}}, "t")


def refusal(**keys: str) -> str:
    with pytest.raises(ConfigError) as refused:
        load(**keys)
    return str(refused.value)


def test_what_the_stacks_node_types_give_pods():
    assert largest_worker("c5.4xlarge") == ("15710m", "27227Mi")
    assert largest_worker("g6.xlarge") == ("3690m", "13944Mi")
    assert largest_worker("m5.xlarge") == ("3740m", "14008Mi")
    assert largest_worker("m5.xlarge", per_node=2) == ("1870m", "7004Mi")


# (nodeInstanceType, workersPerNode, the most workerCpu, the most workerMemory)
BOUNDARIES = [("c5.4xlarge", 1, 15710, 27227), ("g6.xlarge", 1, 3690, 13944), ("m5.xlarge", 2, 1870, 7004)]


@pytest.mark.parametrize(("instance_type", "per_node", "cpu", "memory"), BOUNDARIES)
def test_exactly_the_most_that_fits_is_accepted(instance_type, per_node, cpu, memory):
    settings = load(
        nodeInstanceType=instance_type, workersPerNode=str(per_node), workerCpu=f"{cpu}m", workerMemory=f"{memory}Mi"
    )
    assert (settings.worker_cpu, settings.worker_memory) == (f"{cpu}m", f"{memory}Mi")
    assert not any("not checked" in warning for warning in settings.warnings)


@pytest.mark.parametrize(("instance_type", "per_node", "cpu", "memory"), BOUNDARIES)
def test_one_more_millicore_is_refused_with_the_most_that_fits(instance_type, per_node, cpu, memory):
    line = refusal(
        nodeInstanceType=instance_type,
        workersPerNode=str(per_node),
        workerCpu=f"{cpu + 1}m",
        workerMemory=f"{memory}Mi",
    )
    workers = "1 worker per node" if per_node == 1 else f"{per_node} workers per node"
    assert line.startswith(
        f"config {P}:workerCpu='{cpu + 1}m' is invalid: must be at most {cpu}m for {workers}: "
        f"one {instance_type} node gives pods {cpu * per_node}m of its "
    )
    assert "\n" not in line


@pytest.mark.parametrize(("instance_type", "per_node", "cpu", "memory"), BOUNDARIES)
def test_one_more_mebibyte_is_refused_with_the_most_that_fits(instance_type, per_node, cpu, memory):
    line = refusal(
        nodeInstanceType=instance_type,
        workersPerNode=str(per_node),
        workerCpu=f"{cpu}m",
        workerMemory=f"{memory + 1}Mi",
    )
    assert line.startswith(f"config {P}:workerMemory='{memory + 1}Mi' is invalid: must be at most {memory}Mi for ")


def test_workers_per_node_share_the_node():
    line = refusal(nodeInstanceType="m5.xlarge", workersPerNode="2", workerCpu="1886m", workerMemory="1Gi")
    assert "must be at most 1870m for 2 workers per node: one m5.xlarge node gives pods 3740m of its 4 vCPUs" in line


def test_a_forty_digit_cpu_is_one_clear_line():
    line = refusal(workerCpu="1" * 40)
    assert line == (
        f"config {P}:workerCpu='{'1' * 40}' is invalid: must be at most 15710m for 1 worker per node: one "
        "c5.4xlarge node gives pods 15710m of its 16 vCPUs (the kubelet keeps 110m, the node's DaemonSets "
        "request 180m)"
    )


@pytest.mark.parametrize(
    ("quantity", "millicores"),
    [
        ("15", 15000),
        ("500m", 500),
        ("1.5", 1500),
        ("0.0001", 1),
        ("1k", 1_000_000),
        ("2Ki", 2_048_000),
        ("9" * 40, int("9" * 40) * 1000),
    ],
)
def test_cpu_quantities_in_millicores(quantity, millicores):
    assert cpu_millicores(quantity) == millicores


def test_a_type_outside_the_price_catalog_is_sized_from_ec2s_shapes():
    """m7i-flex.large has no price here, and was left unchecked with a warning before: its shape
    (infra/aws/instance_shapes.py: 2 vCPUs, 8 GiB) now sizes it, and dev's worker does not fit."""
    assert node_room("m7i-flex.large").cpu_millicores == 2000 - 70 - 180
    assert refusal(nodeInstanceType="m7i-flex.large", workerCpu="15").startswith(
        f"config {P}:workerCpu='15' is invalid: must be at most 1750m for 1 worker per node: one m7i-flex.large node"
    )


def test_target_existing_checks_no_cpu_node():
    settings = load_settings(
        {f"{P}:target": "existing", f"{P}:imageUri": "docker.io/library/trainer:1", f"{P}:workerCpu": "64"}, "t"
    )
    assert settings.worker_cpu == "64" and settings.warnings == ()


def test_the_side_jobs_requests_are_the_specs():
    from infra.config import node_fit
    from infra.specs import workloads

    assert node_fit.SIDE_JOB_CPU_MILLICORES == cpu_millicores(workloads.SIDE_JOB_CPU) == 500
    assert node_fit.SIDE_JOB_MEMORY_MIB * 2**20 == 4 * 2**30 and workloads.SIDE_JOB_MEMORY == "4Gi"


def test_the_side_jobs_must_fit_the_system_nodes_beside_every_system_pod():
    """On every eks stack, CPU or GPU: the Jobs tolerate no worker taint. The system pods' sums are
    tests/aws/test_system_pods.py's; here, the lines a user gets."""
    gpu = dict(nodeInstanceType="g6.xlarge", workerCpu="3", workerMemory="12Gi")
    assert load(**gpu, systemNodeInstanceType="m5.large").system_node_instance_type == "m5.large"
    assert load(systemNodeInstanceType="m5.large").system_node_count == 2
    # c5.large: 1750m and 2960Mi after the DaemonSets, 1936Mi after Karpenter's 1Gi: not the Jobs' 4Gi.
    for stack in ({}, gpu):
        assert refusal(**stack, systemNodeInstanceType="c5.large").startswith(
            f"config {P}:systemNodeInstanceType='c5.large' is invalid: must leave the data-prep, test and export Jobs "
            "500m and 4096Mi on one of the 2 c5.large system nodes (systemNodeCount 2) however the system pods spread: "
            "a node gives pods 1750m and 2960Mi after its DaemonSets, 1250m and 1936Mi after karpenter (500m, 1024Mi)"
        )
    # One m5.large: 1250m and 5725Mi after Karpenter; the other system pods (2 x coredns, metrics-server,
    # the controller, the rendezvous store) take 500m and 980Mi of it, which leaves the Jobs their room.
    # (With etcd and the EBS CSI controller before issue 31 they took 770m: one m5.large was refused.)
    assert load(systemNodeCount="1").system_node_count == 1
    assert load(systemNodeCount="1", systemNodeInstanceType="m5.xlarge").system_node_count == 1
    # The training nodes are not where the Jobs run: a small one is the workers' business only.
    assert load(nodeInstanceType="c5.large", workerCpu="1", workerMemory="2Gi").node_instance_type == "c5.large"
