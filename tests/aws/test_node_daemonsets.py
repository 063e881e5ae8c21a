"""infra/aws/node_daemonsets.py: what the per-node DaemonSets take from a node (sources in its docstring)."""

from __future__ import annotations

from infra.aws import node_daemonsets
from infra.aws.node_allocatable import Allocatable
from infra.specs import gpu


def test_the_device_plugin_row_is_what_our_daemonset_requests():
    spec = gpu.device_plugin_daemonset()["spec"]["template"]["spec"]
    row = node_daemonsets.DEVICE_PLUGIN
    assert node_daemonsets.pod_request(spec) == (row.cpu_millicores, row.memory_mib) == (50, 64)


def test_a_pod_requests_the_larger_of_its_containers_sum_and_its_largest_init_container():
    # aws-node's shape (config/master/aws-k8s-cni.yaml v1.23.1): two 25m containers, one 25m init container.
    aws_node = {
        "initContainers": [{"resources": {"requests": {"cpu": "25m"}}}],
        "containers": [{"resources": {"requests": {"cpu": "25m"}}}, {"resources": {"requests": {"cpu": "25m"}}}],
    }
    assert node_daemonsets.pod_request(aws_node) == (50, 0)
    big_init = {
        "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "containers": [{"resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}, {}],
    }
    assert node_daemonsets.pod_request(big_init) == (1000, 1024)


def test_cpu_nodes_lose_the_every_node_daemonsets_and_gpu_nodes_the_device_plugin_too():
    node = Allocatable(cpu_millicores=3920, memory_mib=14162)
    assert node_daemonsets.for_pods(node, gpu_node=False) == Allocatable(3920 - 180, 14162 - 154)
    assert node_daemonsets.for_pods(node, gpu_node=True) == Allocatable(3920 - 230, 14162 - 218)
    assert [d.name for d in node_daemonsets.on_node(False)] == [
        "aws-node",
        "kube-proxy",
        "ebs-csi-node",
        "efs-csi-node",
    ]


def test_the_ebs_csi_node_row_is_its_three_containers():
    """kubernetes-sigs/aws-ebs-csi-driver @ 429e202e, deploy/kubernetes/base/node.yaml: ebs-plugin
    (10m, 40Mi), node-driver-registrar (10m, 32Mi), liveness-probe (10m, 32Mi); it tolerates every
    taint (`operator: Exists`), so it runs on the worker nodes and the system nodes alike."""
    manifest_pod = {
        "containers": [
            {"resources": {"requests": {"cpu": "10m", "memory": "40Mi"}}},
            {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}},
            {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}},
        ]
    }
    (row,) = [d for d in node_daemonsets.EVERY_NODE if d.name == "ebs-csi-node"]
    assert node_daemonsets.pod_request(manifest_pod) == (row.cpu_millicores, row.memory_mib) == (30, 104)
