"""Elastic: the ElasticJob CRD, the workloads' namespace, the etcd service torchrun rendezvous
through, and the NetworkPolicies that limit who reaches etcd and the training pods. The controller
itself (it needs the image and the shared volume) is ElasticController (elastic_controller.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.config import Settings
from infra.components.k8s_object import KubernetesObject
from infra.components.naming import component_type
from infra.specs import elastic as specs
from infra.specs import rendezvous_store


@dataclass
class ElasticArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    # The Deployments (etcd here, the controller in elastic_controller.py) wait for nodes: without any, their pods stay Pending and
    # Pulumi's await of the Deployment times out. None on an existing cluster, whose nodes are there.
    nodes: pulumi.Resource | None = None
    # The StorageClass of etcd's volume, and what must exist before a claim of it can be served
    # (target eks: the EBS class and its driver, infra/components/rendezvous_volume.py); an
    # existing cluster's is its storageClassName, already there.
    etcd_storage_class: str | None = None
    etcd_storage: pulumi.Resource | None = None


class Elastic(pulumi.ComponentResource):
    crd: KubernetesObject
    etcd: KubernetesObject
    workload_namespace: KubernetesObject
    workload_policies: list[KubernetesObject]  # every pod of the namespace comes after them

    def __init__(self, name: str, args: ElasticArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Elastic"), name, None, opts)
        settings = args.settings
        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)

        self.crd = KubernetesObject(f"{name}-crd", specs.elasticjob_crd(), in_cluster)
        nodes = [args.nodes] if args.nodes is not None else []
        self.workload_namespace = KubernetesObject(
            f"{name}-workload-ns", specs.namespace(settings.namespace, "workloads", specs.WORKLOAD_NAMESPACE_ENFORCE), in_cluster)
        workload_policies = self._network_policies(name, specs.workload_network_policies(settings.namespace), args.provider,
                                                   self.workload_namespace)
        self.workload_policies = workload_policies
        after_ns = pulumi.ResourceOptions(parent=self, provider=args.provider,
                                          depends_on=[self.workload_namespace, *workload_policies])
        after_ns_and_nodes = pulumi.ResourceOptions.merge(after_ns, pulumi.ResourceOptions(depends_on=nodes))
        # etcd: its priority class (cluster-scoped) and claim exist before its pod (rendezvous_store.py).
        priority = KubernetesObject(f"{name}-etcd-priorityclass", rendezvous_store.priority_class(), in_cluster)
        storage = [args.etcd_storage] if args.etcd_storage is not None else []
        etcd_objects = {obj["kind"]: obj for obj in
                        specs.etcd_objects(settings.namespace, args.etcd_storage_class or settings.storage_class_name)}
        KubernetesObject(f"{name}-etcd-service", etcd_objects["Service"], after_ns)
        claim = KubernetesObject(f"{name}-etcd-persistentvolumeclaim", etcd_objects["PersistentVolumeClaim"],
                                 pulumi.ResourceOptions.merge(after_ns, pulumi.ResourceOptions(depends_on=storage)))
        KubernetesObject(f"{name}-etcd-poddisruptionbudget", etcd_objects["PodDisruptionBudget"], after_ns)
        self.etcd = KubernetesObject(f"{name}-etcd-deployment", etcd_objects["Deployment"], pulumi.ResourceOptions.merge(
            after_ns_and_nodes, pulumi.ResourceOptions(depends_on=[priority, claim])))

        self.register_outputs({"rendezvousEndpoint": specs.rendezvous_endpoint(), "namespace": settings.namespace})

    def _network_policies(self, name: str, policies: list[dict], provider: pulumi.ProviderResource,
                          namespace: KubernetesObject) -> list[KubernetesObject]:
        after_ns = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[namespace])
        return [KubernetesObject(f"{name}-networkpolicy-{obj['metadata']['namespace']}-{obj['metadata']['name']}", obj, after_ns)
                for obj in policies]
