"""Elastic: the ElasticJob CRD, the workloads' namespace, the rendezvous store torchrun's agents
rendezvous through, and the NetworkPolicies that limit who reaches the store and the training pods.
The controller itself (it needs the image and the shared volume) is ElasticController (elastic_controller.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.config import Settings
from infra.components.k8s_object import KubernetesObject
from infra.components.naming import component_type
from infra.specs import elastic as specs
from infra.specs import network_policies, rendezvous_store
from infra.specs.workloads import image_by_tag, pull_policy


@dataclass
class ElasticArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    # The training image: the rendezvous store runs its jobs.elastic.store_server.
    image: pulumi.Input[str]
    # The store's StatefulSet (and the controller's Deployment, in elastic_controller.py) waits for nodes: without any, its pod stays Pending and
    # Pulumi's await of the Deployment times out. None on an existing cluster, whose nodes are there.
    nodes: pulumi.Resource | None = None


class Elastic(pulumi.ComponentResource):
    crd: KubernetesObject
    store: KubernetesObject
    workload_namespace: KubernetesObject
    workload_policies: list[KubernetesObject]  # every pod of the namespace comes after them

    def __init__(self, name: str, args: ElasticArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Elastic"), name, None, opts)
        settings = args.settings
        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)

        self.crd = KubernetesObject(f"{name}-crd", specs.elasticjob_crd(), in_cluster)
        nodes = [args.nodes] if args.nodes is not None else []
        self.workload_namespace = KubernetesObject(
            f"{name}-workload-ns",
            specs.namespace(settings.namespace, "workloads", specs.WORKLOAD_NAMESPACE_ENFORCE),
            in_cluster,
        )
        workload_policies = self._network_policies(
            name, network_policies.workload_network_policies(settings.namespace), args.provider, self.workload_namespace
        )
        self.workload_policies = workload_policies
        after_ns = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=[self.workload_namespace, *workload_policies]
        )
        after_ns_and_nodes = pulumi.ResourceOptions.merge(after_ns, pulumi.ResourceOptions(depends_on=nodes))
        # The store: its priority class (cluster-scoped) exists before its pod (rendezvous_store.py).
        priority = KubernetesObject(f"{name}-store-priorityclass", rendezvous_store.priority_class(), in_cluster)
        # The store runs the training image: an `imageUri` pinned by a tag gets the tag rows (suppressions.py).
        store_objects = {
            obj["kind"]: obj
            for obj in specs.store_objects(
                settings.namespace, args.image, pull_policy(settings), image_by_tag=image_by_tag(settings)
            )
        }
        KubernetesObject(f"{name}-store-service", store_objects["Service"], after_ns)
        KubernetesObject(f"{name}-store-poddisruptionbudget", store_objects["PodDisruptionBudget"], after_ns)
        self.store = KubernetesObject(
            f"{name}-store-statefulset",
            store_objects["StatefulSet"],
            pulumi.ResourceOptions.merge(after_ns_and_nodes, pulumi.ResourceOptions(depends_on=[priority])),
        )

        self.register_outputs({"rendezvousEndpoint": specs.rendezvous_endpoint(), "namespace": settings.namespace})

    def _network_policies(
        self, name: str, policies: list[dict], provider: pulumi.ProviderResource, namespace: KubernetesObject
    ) -> list[KubernetesObject]:
        after_ns = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[namespace])
        return [
            KubernetesObject(
                f"{name}-networkpolicy-{obj['metadata']['namespace']}-{obj['metadata']['name']}", obj, after_ns
            )
            for obj in policies
        ]
