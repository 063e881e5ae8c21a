"""Cluster add-ons: metrics-server, as the EKS community add-on, for `kubectl top`; and the lookup
of the exact version each EKS add-on is installed at (infra/versions.py says why it is looked up)."""

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
    return aws.eks.get_addon_version_output(addon_name=addon_name, kubernetes_version=kubernetes_version,
                                            most_recent=True).version


@dataclass
class AddonsArgs:
    settings: Settings
    cluster_name: pulumi.Input[str]
    nodes: pulumi.Resource  # add-ons with pods only become active once nodes exist


class Addons(pulumi.ComponentResource):
    metrics_server: aws.eks.Addon

    def __init__(self, name: str, args: AddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Addons"), name, None, opts)
        version = addon_version(versions.METRICS_SERVER_ADDON, args.settings.kubernetes_version)
        self.metrics_server = aws.eks.Addon(
            f"{name}-metrics-server", cluster_name=args.cluster_name, addon_name=versions.METRICS_SERVER_ADDON,
            addon_version=version,
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
            tags=aws_tags(args.settings), opts=pulumi.ResourceOptions(parent=self, depends_on=[args.nodes]))
        self.register_outputs({"metricsServerVersion": version})
