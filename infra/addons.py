"""Cluster add-ons: metrics-server, as the EKS community add-on (pinned), for `kubectl top`."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra import versions
from infra.config import Settings
from infra.naming import aws_tags, component_type


@dataclass
class AddonsArgs:
    settings: Settings
    cluster_name: pulumi.Input[str]
    nodes: pulumi.Resource  # add-ons with pods only become active once nodes exist


class Addons(pulumi.ComponentResource):
    metrics_server: aws.eks.Addon

    def __init__(self, name: str, args: AddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Addons"), name, None, opts)
        self.metrics_server = aws.eks.Addon(
            f"{name}-metrics-server", cluster_name=args.cluster_name, addon_name="metrics-server",
            addon_version=versions.METRICS_SERVER_ADDON_VERSION,
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
            tags=aws_tags(args.settings), opts=pulumi.ResourceOptions(parent=self, depends_on=[args.nodes]))
        self.register_outputs({"metricsServerVersion": versions.METRICS_SERVER_ADDON_VERSION})
