"""ExistingCluster: a cluster someone already runs (kind, minikube, k3d, a company cluster), reached
through a kubeconfig file and context, and the shared volume claimed from one of its StorageClasses.

Nothing here talks to AWS. The Kubernetes provider reads the same kubeconfig file and context as
`kubectl --kubeconfig <file> --context <context>` would; the training wait (infra/components/completion.py)
reads them too, so both talk to the same cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.config import Settings
from infra.components.k8s_object import KubernetesObject
from infra.components.naming import component_type
from infra.specs import storage as storage_specs


@dataclass
class ExistingClusterArgs:
    settings: Settings


class ExistingCluster(pulumi.ComponentResource):
    provider: k8s.Provider
    kubeconfig: str  # the file's path, `~` expanded
    context: str  # "" is the file's current-context

    def __init__(self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("ExistingCluster"), name, None, opts)
        settings = args.settings
        # The provider takes "the contents of a kubeconfig file or the path to a kubeconfig file"
        # (pulumi-kubernetes ProviderArgs.kubeconfig); a path keeps credentials out of the state.
        self.kubeconfig = os.path.expanduser(settings.kubeconfig)
        self.context = settings.kube_context
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            context=self.context or None,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig, "context": self.context})


@dataclass
class SharedVolumeArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    namespace: pulumi.Resource  # the workloads' namespace, where the claim lives


class SharedVolume(pulumi.ComponentResource):
    """The volume every workload mounts, from the cluster's own StorageClass `storageClassName`."""

    claim: KubernetesObject

    def __init__(self, name: str, args: SharedVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("SharedVolume"), name, None, opts)
        settings = args.settings
        # A WaitForFirstConsumer class (kind's `standard`) leaves the claim Pending until a pod uses
        # it; the provider's await counts a Pending claim of such a class as ready
        # (pulumi/pulumi-kubernetes provider/pkg/await/awaiters.go untilCoreV1PersistentVolumeClaimReady).
        self.claim = KubernetesObject(
            f"{name}-pvc",
            storage_specs.provisioned_claim(
                settings.pvc_name, settings.namespace, settings.storage_class_name, settings.storage_access_mode
            ),
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.namespace]),
        )
        self.register_outputs({"pvcName": settings.pvc_name})
