"""The data-prep, test and export Jobs can be scheduled on every `eks` stack (issue 30 item 1).

They tolerate no worker taint, so they run on the on-demand system nodes, beside every DaemonSet
(infra/aws/node_daemonsets.py) and every system Deployment (infra/aws/system_pods.py; sources in
both docstrings: the Karpenter chart v1.14.1, the EBS and EFS CSI manifests, metrics-server v0.8.0,
Kubernetes' CoreDNS add-on). What is modelled, from Kubernetes' scheduler: a pod fits a node when
the node's allocatable less the requests of the pods already there covers its requests
(kube-scheduler NodeResourcesFit); a required hostname anti-affinity keeps two replicas off one
node; everything else may land on any system node. The check here does not trust the config
check's bound: it places the system pods on the nodes every possible way and asks whether a node
is left for the Job each time.
"""

from __future__ import annotations

import itertools

import pytest
from test_gpu_stack import WORKERS, can_land_on, node_groups, pod_templates

from infra.aws import node_daemonsets, system_pods
from infra.config import ConfigError, PROJECT, load_settings
from infra.config.node_fit import node_room
from infra.specs import elastic, karpenter_chart

SIDE_JOBS = ("data-prep", "test", "export")


def side_job_pods(synth) -> dict[str, dict]:
    return {name: pod for name, pod in pod_templates(synth).items() if name.startswith("Job/")}


def a_node_is_always_left(instance_type: str, nodes: int, job: tuple[int, int]) -> tuple[bool, list[list[str]]]:
    """Every placement of the system pods on `nodes` nodes (Karpenter's replicas on distinct nodes;
    the nodes are alike, so they take the first ones): is there always a node with room for `job`?
    Placements where the system pods themselves do not fit are not ones the scheduler makes.
    Returns (answer, a placement that leaves no node when there is one)."""
    room = node_room(instance_type)
    pinned = [
        (p.name, p.cpu_millicores, p.memory_mib)
        for p in system_pods.SYSTEM_PODS
        if p.one_per_node
        for _ in range(p.count(nodes))
    ]
    floating = [
        (p.name, p.cpu_millicores, p.memory_mib)
        for p in system_pods.SYSTEM_PODS
        if not p.one_per_node
        for _ in range(p.count(nodes))
    ]
    for placement in itertools.product(range(nodes), repeat=len(floating)):
        on = [[] for _ in range(nodes)]
        for index, pod in enumerate(pinned):
            on[index].append(pod)
        for node, pod in zip(placement, floating):
            on[node].append(pod)
        free = [
            (room.cpu_millicores - sum(c for _, c, _ in pods), room.memory_mib_for_pods - sum(m for _, _, m in pods))
            for pods in on
        ]
        if any(cpu < 0 or memory < 0 for cpu, memory in free):
            continue
        if not any(cpu >= job[0] and memory >= job[1] for cpu, memory in free):
            return False, [[name for name, _, _ in pods] for pods in on]
    return True, []


@pytest.mark.parametrize("stack", ["dev", "gpu", "spot", "smoke"])
def test_every_side_job_of_every_eks_stack_finds_a_system_node(synth_stack, stack):
    synth = synth_stack(stack)
    groups = node_groups(synth)
    system = groups["cluster-system-nodes"]
    system = {**system, "labels": {**system["labels"], "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}
    jobs = side_job_pods(synth)
    assert {pod["containers"][0]["name"] for pod in jobs.values()} == {"prepare", "evaluate", "export"}
    (instance_type,) = system["instanceTypes"]
    nodes = system["scalingConfig"]["desiredSize"]
    for name, pod in jobs.items():
        # Only the system nodes can take them (the worker nodes' taint) ...
        assert can_land_on(pod, system) and not can_land_on(pod, groups[WORKERS]), name
        # ... and whichever way the system pods spread there, one node keeps room for the Job.
        left, blocked = a_node_is_always_left(instance_type, nodes, node_daemonsets.pod_request(pod))
        assert left, f"{name} ({node_daemonsets.pod_request(pod)}) finds no node when the system pods land {blocked}"


@pytest.mark.parametrize("instance_type", ["c5.large", "t3.medium", "m5.large", "t3.large", "c5.xlarge", "m5.xlarge"])
@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_config_accepts_a_system_group_only_where_a_node_is_always_left(instance_type, nodes):
    """The config check's bound is sound: every group it accepts passes the exhaustive placement
    above. (It may refuse a group that would pass: none of these.)"""
    try:
        load_settings(
            {
                "aws:region": "us-west-2",
                f"{PROJECT}:workers": "1",
                f"{PROJECT}:minWorkers": "1",
                f"{PROJECT}:maxWorkers": "1",
                f"{PROJECT}:systemNodeInstanceType": instance_type,
                f"{PROJECT}:systemNodeCount": str(nodes),
            },
            "t",
        )
        accepted = True
    except ConfigError as error:
        assert "systemNodeInstanceType" in str(error)
        accepted = False
    left, _ = a_node_is_always_left(instance_type, nodes, (500, 4096))
    assert accepted == left


def test_karpenter_row_is_the_chart_values_we_set():
    (row,) = [p for p in system_pods.SYSTEM_PODS if p.name == "karpenter"]
    requests = karpenter_chart.CONTROLLER_RESOURCES["requests"]
    assert (row.cpu_millicores, row.memory_mib) == (500, 1024) and requests == {"cpu": "500m", "memory": "1Gi"}
    assert row.one_per_node and [row.count(n) for n in (1, 2, 3)] == [karpenter_chart.replicas(n) for n in (1, 2, 3)]


def test_our_deployments_rows_are_what_the_specs_render():
    rendered = {
        m["metadata"]["name"]: m
        for m in elastic.store_objects("ns", "trainer:1", "IfNotPresent")
        if m["kind"] == "StatefulSet"
    }
    rendered.update(
        {
            m["metadata"]["name"]: m
            for m in elastic.controller_objects("ns", "trainer:1", "efs-pvc")
            if m["kind"] == "Deployment"
        }
    )
    for name in (elastic.STORE_NAME, elastic.CONTROLLER_NAME):
        (row,) = [p for p in system_pods.SYSTEM_PODS if p.name == name]
        deployment = rendered[name]
        assert node_daemonsets.pod_request(deployment["spec"]["template"]["spec"]) == (
            row.cpu_millicores,
            row.memory_mib,
        )
        assert deployment["spec"]["replicas"] == row.replicas


@pytest.mark.parametrize(
    "name, containers, replicas",
    [
        # kubernetes-sigs/metrics-server v0.8.0 manifests/base/deployment.yaml.
        ("metrics-server", [("100m", "200Mi")], 1),
        # kubernetes/kubernetes @ 008b3652 cluster/addons/dns/coredns/coredns.yaml.base; two replicas on EKS.
        ("coredns", [("100m", "70Mi")], 2),
    ],
)
def test_the_add_on_rows_are_their_manifests(name, containers, replicas):
    (row,) = [p for p in system_pods.SYSTEM_PODS if p.name == name]
    pod = {"containers": [{"resources": {"requests": {"cpu": c, "memory": m}}} for c, m in containers]}
    assert node_daemonsets.pod_request(pod) == (row.cpu_millicores, row.memory_mib)
    assert row.replicas == replicas and not row.one_per_node
