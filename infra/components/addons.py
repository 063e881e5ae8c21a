"""Cluster add-ons: metrics-server, as the EKS community add-on, for `kubectl top`; CoreDNS as the
EKS add-on; and the lookup of the exact version each EKS add-on is installed at (infra/versions.py
says why it is looked up).

CoreDNS: EKS bootstraps a self-managed CoreDNS Deployment, which a `kubernetesVersion` bump does not
upgrade. pulumi-eks turns it into the EKS add-on only when it has a node group to put it on (its
default node group, Fargate or Auto Mode: nodejs/eks/cluster/cluster.ts @ 0f5a5447, v4.3.0, lines
1175-1184); our node groups are our own, so the add-on is created here, once they exist, at the
version EKS publishes for the stack's Kubernetes version. OVERWRITE takes over the bootstrapped
Deployment, as pulumi-eks does; `preserve` keeps the pods if the add-on resource is ever removed
(pulumi-eks sets it too), so cluster DNS never goes away with it. kube-proxy needs no node to become
active: pulumi-eks already creates it as an add-on by default, resolved the same way
(infra/components/cluster.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra import versions
from infra.config import Settings
from infra.components.naming import aws_tags, component_type


def addon_version(addon_name: str, kubernetes_version: str) -> pulumi.Output[str]:
    """The newest version EKS publishes of `addon_name` for exactly `kubernetes_version`, in the
    stack's region, resolved at `pulumi up` (pulumi-aws `aws.eks.get_addon_version`, invoke
    aws:eks/getAddonVersion:getAddonVersion with addonName, kubernetesVersion, mostRecent)."""
    return aws.eks.get_addon_version_output(
        addon_name=addon_name, kubernetes_version=kubernetes_version, most_recent=True
    ).version


@dataclass
class AddonsArgs:
    settings: Settings
    cluster_name: pulumi.Input[str]
    nodes: pulumi.Resource  # add-ons with pods only become active once nodes exist


class Addons(pulumi.ComponentResource):
    metrics_server: aws.eks.Addon
    coredns: aws.eks.Addon

    def __init__(self, name: str, args: AddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Addons"), name, None, opts)
        version = addon_version(versions.METRICS_SERVER_ADDON, args.settings.kubernetes_version)
        self.metrics_server = aws.eks.Addon(
            f"{name}-metrics-server",
            cluster_name=args.cluster_name,
            addon_name=versions.METRICS_SERVER_ADDON,
            addon_version=version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=aws_tags(args.settings),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.nodes]),
        )
        coredns_version = addon_version(versions.COREDNS_ADDON, args.settings.kubernetes_version)
        self.coredns = aws.eks.Addon(
            f"{name}-coredns",
            cluster_name=args.cluster_name,
            addon_name=versions.COREDNS_ADDON,
            addon_version=coredns_version,
            preserve=True,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=aws_tags(args.settings),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.nodes]),
        )
        self.register_outputs({"metricsServerVersion": version, "corednsVersion": coredns_version})
