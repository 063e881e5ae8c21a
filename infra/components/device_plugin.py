"""GPU stacks only: the NVIDIA device plugin DaemonSet (infra/specs/gpu.py), rendered by us, so
`synth` and `pulumi up` need no Helm chart from the network. Without it the GPU nodes advertise no
`nvidia.com/gpu` and every worker pod stays Pending."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.components.k8s_object import KubernetesObject
from infra.components.naming import component_type
from infra.specs import gpu


@dataclass
class DevicePluginArgs:
    provider: pulumi.ProviderResource
    gpu_nodes: pulumi.Resource  # the worker NodePool that launches GPU nodes (none exist until a run needs them)


class DevicePlugin(pulumi.ComponentResource):
    daemonset: KubernetesObject
    network_policy: KubernetesObject

    def __init__(self, name: str, args: DevicePluginArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("DevicePlugin"), name, None, opts)
        self.daemonset = KubernetesObject(
            f"{name}-daemonset",
            gpu.device_plugin_daemonset(),
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.gpu_nodes]),
        )
        self.network_policy = KubernetesObject(
            f"{name}-deny-ingress",
            gpu.device_plugin_network_policy(),
            pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.register_outputs({})
