"""Elastic: the TorchElastic controller on current Kubernetes (our v1 CRD, RBAC, Deployment),
the workloads' namespace, the rendezvous store torchrun's agents rendezvous through, and the
NetworkPolicies that limit who reaches the controller, the store and the training pods."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.config import Settings
from infra.components.k8s_object import KubernetesObject
from infra.components.naming import component_type
from infra.specs import elastic as specs
from infra.specs import rendezvous_store
from infra.specs.workloads import pull_policy


@dataclass
class ElasticArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    # The training image: the rendezvous store runs its jobs.elastic.store_server.
    image: pulumi.Input[str]
    # The Deployments (controller, store) wait for nodes: without any, their pods stay Pending and
    # Pulumi's await of the Deployment times out. None on an existing cluster, whose nodes are there.
    nodes: pulumi.Resource | None = None


class Elastic(pulumi.ComponentResource):
    crd: KubernetesObject
    controller: KubernetesObject
    store: KubernetesObject
    workload_namespace: KubernetesObject

    def __init__(self, name: str, args: ElasticArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Elastic"), name, None, opts)
        settings = args.settings
        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)

        self.crd = KubernetesObject(f"{name}-crd", specs.elasticjob_crd(), in_cluster)
        controller_ns = KubernetesObject(
            f"{name}-controller-ns",
            specs.namespace(specs.CONTROLLER_NAMESPACE, "elastic-controller", specs.CONTROLLER_NAMESPACE_ENFORCE), in_cluster)
        # NetworkPolicies before the pods they guard, so no pod starts unguarded.
        controller_policies = self._network_policies(name, specs.controller_network_policies(), args.provider, controller_ns)
        nodes = [args.nodes] if args.nodes is not None else []
        objects: list[KubernetesObject] = []
        for obj in specs.controller_objects():
            pods_need_nodes = nodes if obj["kind"] == "Deployment" else []
            objects.append(KubernetesObject(
                f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj,
                pulumi.ResourceOptions(parent=self, provider=args.provider,
                                       depends_on=[controller_ns, self.crd, *controller_policies, *objects,
                                                   *pods_need_nodes])))
        self.controller = objects[-1]

        self.workload_namespace = KubernetesObject(
            f"{name}-workload-ns", specs.namespace(settings.namespace, "workloads", specs.WORKLOAD_NAMESPACE_ENFORCE), in_cluster)
        workload_policies = self._network_policies(name, specs.workload_network_policies(settings.namespace), args.provider,
                                                   self.workload_namespace)
        after_ns = pulumi.ResourceOptions(parent=self, provider=args.provider,
                                          depends_on=[self.workload_namespace, *workload_policies])
        after_ns_and_nodes = pulumi.ResourceOptions.merge(after_ns, pulumi.ResourceOptions(depends_on=nodes))
        # The store: its priority class (cluster-scoped) exists before its pod (rendezvous_store.py).
        priority = KubernetesObject(f"{name}-store-priorityclass", rendezvous_store.priority_class(), in_cluster)
        store_objects = {obj["kind"]: obj for obj in specs.store_objects(settings.namespace, args.image, pull_policy(settings))}
        KubernetesObject(f"{name}-store-service", store_objects["Service"], after_ns)
        KubernetesObject(f"{name}-store-poddisruptionbudget", store_objects["PodDisruptionBudget"], after_ns)
        self.store = KubernetesObject(f"{name}-store-deployment", store_objects["Deployment"], pulumi.ResourceOptions.merge(
            after_ns_and_nodes, pulumi.ResourceOptions(depends_on=[priority])))

        self.register_outputs({"rendezvousEndpoint": specs.rendezvous_endpoint(), "namespace": settings.namespace})

    def _network_policies(self, name: str, policies: list[dict], provider: pulumi.ProviderResource,
                          namespace: KubernetesObject) -> list[KubernetesObject]:
        after_ns = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[namespace])
        return [KubernetesObject(f"{name}-networkpolicy-{obj['metadata']['namespace']}-{obj['metadata']['name']}", obj, after_ns)
                for obj in policies]
