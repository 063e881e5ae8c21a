"""CoreDNS and kube-proxy are EKS add-ons, each managed exactly once, CoreDNS after the nodes it runs
on exist, both at the version EKS publishes for the stack's Kubernetes version (issue 21 item 10,
upstream-facts-2.md fact 15).

What pulumi-eks creates by itself is modelled from its source (tests/pulumi_eks_addons_model.py,
nodejs/eks/cluster/cluster.ts @ 0f5a5447, v4.3.0): under the mocks its component is remote and its
children are not registered here, so the model says which add-ons it adds to ours. A second
CreateAddon for an add-on the cluster already has is refused (EKS CreateAddon errors include
ResourceInUseException, botocore 1.44.5's EKS model), so "exactly once" matters as much as "at all".
"""

from __future__ import annotations

import botocore.session
import pytest

from infra import versions
from pulumi_eks_addons_model import created_by_pulumi_eks

ADDON = "aws:eks/addon:Addon"
CLUSTER = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"


def managed_addons(stack) -> list[str]:
    """Every EKS add-on of the stack: the stack's own Addons and those pulumi-eks creates."""
    ours = [r["inputs"]["addonName"] for r in stack.of_type(ADDON)]
    return sorted(ours + sorted(created_by_pulumi_eks(stack.one(CLUSTER)["inputs"])))


@pytest.mark.parametrize("stack_name", ["dev", "gpu"])
def test_coredns_and_kube_proxy_are_eks_addons_each_exactly_once(synth_stack, stack_name):
    stack = synth_stack(stack_name)
    addons = managed_addons(stack)
    for name in ("coredns", "kube-proxy", "vpc-cni"):
        assert addons.count(name) == 1, (name, addons)
    # not more than once either: EKS refuses a second CreateAddon for an add-on the cluster has
    eks = botocore.session.get_session().get_service_model("eks")
    assert "ResourceInUseException" in [shape.name for shape in eks.operation_model("CreateAddon").error_shapes]
    # kube-proxy is pulumi-eks's, asked for explicitly, so that a change of its default cannot drop it
    assert stack.one(CLUSTER)["inputs"]["kubeProxyAddonOptions"]["enabled"] is True
    assert "kube-proxy" not in [r["inputs"]["addonName"] for r in stack.of_type(ADDON)]


@pytest.mark.parametrize("stack_name, nodes", [("dev", "cluster-system-nodes"), ("gpu", "cluster-system-nodes")])
def test_coredns_waits_for_the_nodes_it_runs_on(synth_stack, stack_name, nodes):
    stack = synth_stack(stack_name)
    coredns = stack.one(ADDON, "addons-coredns")
    # Every eks stack: the on-demand system group, the only node group (workers come from
    # Karpenter's pool, whose taint CoreDNS does not tolerate)
    assert stack.one(NODE_GROUP, nodes)["urn"] in coredns["dependsOn"]
    inputs = coredns["inputs"]
    assert inputs["resolveConflictsOnCreate"] == "OVERWRITE" and inputs["preserve"] is True
    assert inputs["clusterName"] == stack.outputs["clusterName"]


def test_coredns_version_is_looked_up_for_the_stack_kubernetes_version(synth_stack):
    stack = synth_stack("dev", "kubernetesVersion=1.34")
    # The mocks answer aws:eks/getAddonVersion with the offline placeholder, and only that lookup
    # does: the Addon carries what the lookup answered.
    assert stack.one(ADDON, "addons-coredns")["inputs"]["addonVersion"] == versions.COREDNS_ADDON_VERSION
