"""The worker pool's Karpenter objects, validated against Karpenter's CRDs as modelled from source
(tests/karpenter_schema.py), and what they make Karpenter do with a running worker."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest

from infra.specs import capacity, gpu
from tests import karpenter_schema

SPOT_POOL = capacity.WorkerPool(
    capacity_type=capacity.SPOT,
    instance_types=("c5.4xlarge", "c5a.4xlarge", "c6i.4xlarge"),
    zones=("us-west-2a", "us-west-2b"),
    shape=capacity.WorkerShape(vcpus=16, memory_mib=32768),
    max_nodes=4,
    grace_seconds=90,
    disk_gib=100,
)
GPU_POOL = capacity.WorkerPool(
    capacity_type=capacity.ON_DEMAND,
    instance_types=("g6.xlarge",),
    zones=("us-west-2a", "us-west-2b", "us-west-2c"),
    shape=capacity.WorkerShape(vcpus=4, memory_mib=16384, gpus=1, gpu_model="L4"),
    max_nodes=2,
    grace_seconds=45,
    disk_gib=100,
)
SUBNETS = ["subnet-0a1b2c3d", "subnet-4e5f6a7b"]


def node_class(pool=SPOT_POOL):
    return capacity.node_class(pool, "workers-profile", SUBNETS, "sg-0123abcd", {"project": "elastic-training"})


@pytest.mark.parametrize("pool", [SPOT_POOL, GPU_POOL], ids=["spot-cpu", "on-demand-gpu"])
def test_the_node_pool_and_node_class_are_valid_karpenter_v1_objects(pool):
    assert karpenter_schema.problems(capacity.node_pool(pool)) == []
    assert karpenter_schema.problems(node_class(pool)) == []


@pytest.mark.parametrize(
    "breakage, expected",
    [
        (lambda p: p["spec"]["template"]["spec"].update(expireAfter="never"), "expireAfter"),
        (lambda p: p["spec"]["disruption"].update(consolidationPolicy="WhenIdle"), "consolidationPolicy"),
        (lambda p: p["spec"]["disruption"]["budgets"][0]["reasons"].append("Expired"), "reasons"),
        (lambda p: p["spec"]["template"]["spec"].update(terminationGracePeriod="90"), "terminationGracePeriod"),
        (
            lambda p: p["spec"]["template"]["spec"]["requirements"].append(
                {"key": "kubernetes.io/hostname", "operator": "Exists"}
            ),
            "kubernetes.io/hostname",
        ),
        (lambda p: p["spec"]["template"]["spec"]["requirements"][0].update(values=[]), "In needs values"),
        (lambda p: p["spec"]["disruption"].update(consolidateAfer="60s"), "consolidateAfer"),
    ],
)
def test_the_modelled_node_pool_schema_refuses_what_the_crd_refuses(breakage, expected):
    pool = copy.deepcopy(capacity.node_pool(SPOT_POOL))
    breakage(pool)
    assert any(expected in problem for problem in karpenter_schema.problems(pool))


@pytest.mark.parametrize(
    "breakage, expected",
    [
        (lambda c: c["spec"].update(role="KarpenterNodeRole"), "exactly one of role and instanceProfile"),
        (lambda c: c["spec"]["amiSelectorTerms"].append({"id": "ami-0123"}), "only amiSelectorTerm"),
        (lambda c: c["spec"]["amiSelectorTerms"][0].update(alias="al2023"), "family@version"),
        (lambda c: c["spec"]["subnetSelectorTerms"][0].update(id="vpc-123"), "subnet-"),
        (lambda c: c["spec"]["tags"].update({"kubernetes.io/cluster/x": "owned"}), "reserved for Karpenter"),
        (lambda c: c["spec"]["blockDeviceMappings"][0]["ebs"].update(volumeSize="100"), "volumeSize"),
    ],
)
def test_the_modelled_node_class_schema_refuses_what_the_crd_refuses(breakage, expected):
    node = copy.deepcopy(node_class())
    breakage(node)
    assert any(expected in problem for problem in karpenter_schema.problems(node))


def requirement(pool_obj, key):
    [found] = [r for r in pool_obj["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    return found


def test_spot_workers_come_from_every_listed_type_in_every_zone_of_the_stack():
    pool = capacity.node_pool(SPOT_POOL)
    assert requirement(pool, "karpenter.sh/capacity-type") == {
        "key": "karpenter.sh/capacity-type",
        "operator": "In",
        "values": ["spot"],
    }
    assert requirement(pool, "node.kubernetes.io/instance-type")["values"] == [
        "c5.4xlarge",
        "c5a.4xlarge",
        "c6i.4xlarge",
    ]
    assert requirement(pool, "topology.kubernetes.io/zone")["values"] == ["us-west-2a", "us-west-2b"]
    assert requirement(pool, "kubernetes.io/arch")["values"] == ["amd64"]


def test_the_pool_holds_at_most_max_nodes_of_the_shape():
    assert capacity.node_pool(SPOT_POOL)["spec"]["limits"] == {"cpu": "64", "memory": "131072Mi"}
    assert capacity.node_pool(GPU_POOL)["spec"]["limits"] == {"cpu": "8", "memory": "32768Mi", "nvidia.com/gpu": "2"}


def test_no_voluntary_disruption_can_take_a_node_that_runs_a_worker():
    spec = capacity.node_pool(SPOT_POOL)["spec"]
    # Only empty nodes are consolidated (a node with a running worker is never empty) ...
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    # ... drift, which a terminationGracePeriod lets through do-not-disrupt, has a budget of 0 ...
    assert {"nodes": "0", "reasons": ["Drifted", "Underutilized"]} in spec["disruption"]["budgets"]
    # ... and nodes never expire.
    assert spec["template"]["spec"]["expireAfter"] == "Never"
    assert capacity.worker_pod_annotations() == {"karpenter.sh/do-not-disrupt": "true"}


def karpenter_pod_delete_time(node_deleted_at: datetime, node_grace: str, pod_grace_seconds: int) -> datetime:
    """When Karpenter deletes a do-not-disrupt pod while draining its node: the node's grace period
    end minus the pod's own (kubernetes-sigs/karpenter v1.14.1, pkg/controllers/node/termination/
    terminator/terminator.go podDeleteTimeWithGracePeriod; the node's end is deletionTimestamp +
    NodeClaim.spec.terminationGracePeriod, pkg/controllers/nodeclaim/lifecycle/controller.go
    ensureTerminationGracePeriodTerminationTimeAnnotation). Without a node grace period, never."""
    assert node_grace.endswith("s")
    node_end = node_deleted_at + timedelta(seconds=int(node_grace[:-1]))
    return node_end - timedelta(seconds=pod_grace_seconds)


def test_on_a_spot_notice_the_worker_gets_sigterm_when_the_drain_starts_and_its_grace_ends_before_the_instance():
    notice = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
    reclaimed = notice + timedelta(seconds=120)  # the 2-minute Spot interruption notice
    # Karpenter deletes the NodeClaim when the warning arrives on its queue (CordonAndDrain).
    drain_starts = notice + timedelta(seconds=20)
    node_grace = capacity.node_pool(SPOT_POOL)["spec"]["template"]["spec"]["terminationGracePeriod"]
    sigterm = karpenter_pod_delete_time(drain_starts, node_grace, SPOT_POOL.grace_seconds)
    assert sigterm == drain_starts
    assert sigterm + timedelta(seconds=SPOT_POOL.grace_seconds) <= reclaimed


def test_worker_nodes_are_tainted_for_workers_only_and_workers_tolerate_exactly_that():
    assert capacity.worker_taints(False) == [
        {"key": "elastic-training/workers", "value": "true", "effect": "NoSchedule"}
    ]
    assert capacity.worker_taints(True) == [{"key": gpu.GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
    for gpu_stack in (False, True):
        [taint], [toleration] = capacity.worker_taints(gpu_stack), capacity.worker_tolerations(gpu_stack)
        assert toleration == {**taint, "operator": "Equal"}


def test_the_node_class_boots_the_pinned_al2023_release_hardened_like_the_system_group():
    spec = node_class()["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    assert (
        spec["metadataOptions"]["httpTokens"] == "required" and spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    )
    assert "seccompDefault: true" in spec["userData"]
    assert spec["subnetSelectorTerms"] == [{"id": s} for s in SUBNETS]
    assert spec["blockDeviceMappings"][0]["ebs"]["encrypted"] is True
