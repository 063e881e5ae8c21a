"""The whole stack, composed in dependency order. `__main__` runs it under `pulumi up`;
`synth` runs the same function under mocks."""

from __future__ import annotations

import pulumi

from infra.addons import Addons, AddonsArgs
from infra.artifacts import Artifacts, ArtifactsArgs, run_prefix
from infra.cluster import Cluster, ClusterArgs
from infra.config import PROJECT, ConfigError, Settings, is_gpu_stack
from infra.device_plugin import DevicePlugin, DevicePluginArgs
from infra.elastic import Elastic, ElasticArgs
from infra.network import Network, NetworkArgs
from infra.registry import Registry, RegistryArgs
from infra.specs import workloads as workload_specs
from infra.storage import Storage, StorageArgs
from infra.workloads import Workloads, WorkloadsArgs
from infra.zones import region_zone_names


def availability_zones(count: int) -> list[str]:
    """The first `count` zones EKS can use (no Local/Wavelength Zones, no refused zone IDs: infra/zones.py)."""
    zones = region_zone_names()
    if len(zones) < count:
        error = ConfigError(f"{PROJECT}:availabilityZoneCount", count,
                            f"the region has only {len(zones)} available zones that EKS accepts")
        raise pulumi.RunError(str(error))
    return zones[:count]


def build(settings: Settings) -> dict[str, pulumi.Input]:
    """Register every resource; return the stack outputs."""
    network = Network("network", NetworkArgs(settings, availability_zones(settings.availability_zone_count)))
    cluster = Cluster("cluster", ClusterArgs(settings, network.vpc_id, network.public_subnet_ids, network.private_subnet_ids))
    # System pods wait for the nodes they run on: the system group on GPU stacks (cluster.py).
    elastic = Elastic("elastic", ElasticArgs(settings, cluster.provider, cluster.system_nodes))
    storage = Storage("storage", StorageArgs(
        settings, network.vpc_id, network.private_subnet_ids, cluster.node_security_group_id, cluster.eks_cluster_name,
        cluster.oidc_provider_arn, cluster.oidc_issuer, cluster.provider, elastic.workload_namespace, cluster.system_nodes))
    addons = Addons("addons", AddonsArgs(settings, cluster.eks_cluster_name, cluster.system_nodes))
    registry = Registry("registry", RegistryArgs(settings))
    artifacts = Artifacts("artifacts", ArtifactsArgs(settings))
    gpu_support = []
    if is_gpu_stack(settings):
        gpu_support.append(DevicePlugin("gpu", DevicePluginArgs(cluster.provider, cluster.node_group)).daemonset)
    workloads = Workloads("workloads", WorkloadsArgs(
        settings, cluster.provider, cluster.kubeconfig, registry.image_ref,
        cluster.oidc_provider_arn, cluster.oidc_issuer,
        prerequisites=[storage.claim, storage.csi_driver, elastic.crd, elastic.controller, elastic.etcd,
                       addons.metrics_server, *gpu_support],
        artifacts_bucket=artifacts.bucket_name, artifacts_ready=artifacts.ready))

    names = workload_specs.names(settings.run_id)
    ns = settings.namespace
    return {
        "clusterName": cluster.eks_cluster_name,
        "kubeconfig": cluster.kubeconfig,
        "imageRef": registry.image_ref,
        "repositoryUrl": registry.repository_url,
        "efsFileSystemId": storage.file_system_id,
        "pvcName": settings.pvc_name,
        "namespace": ns,
        "runId": settings.run_id,
        "runDirectory": workload_specs.run_dir(settings.run_id),
        "trainingResult": workloads.training_complete.result,
        "artifactsBucket": artifacts.bucket_name,
        "modelUri": pulumi.Output.concat("s3://", artifacts.bucket_name, "/", run_prefix(settings.run_id), "/model.pt"),
        "metricsUri": pulumi.Output.concat("s3://", artifacts.bucket_name, "/", run_prefix(settings.run_id), "/metrics.json"),
        "commands": {
            "kubeconfig": pulumi.Output.concat("aws eks update-kubeconfig --region ", settings.region,
                                               " --name ", cluster.eks_cluster_name),
            "watchPods": f"kubectl get pods -n {ns} -l {workload_specs.RUN_LABEL}={settings.run_id} -o wide --watch",
            "workerLogs": f"kubectl logs -f -n {ns} -l {workload_specs.JOB_LABEL}={names.training} "
                          f"--prefix --max-log-requests={settings.max_workers + 1}",
            "dataPrepLogs": f"kubectl logs -f -n {ns} job/{names.data_prep}",
            "testLogs": f"kubectl logs -n {ns} job/{names.test}",
            "exportLogs": f"kubectl logs -n {ns} job/{names.export}",
            "topNodes": "kubectl top nodes",
        },
    }
