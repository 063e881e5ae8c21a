"""The whole stack, composed in dependency order. `__main__` runs it under `pulumi up`;
`synth` runs the same function under mocks."""

from __future__ import annotations

import pulumi

from elastic_training import run_directory
from infra.components.addons import Addons, AddonsArgs
from infra.components.artifacts import Artifacts, ArtifactsArgs, run_prefix
from infra.components.capacity import WorkerCapacity, WorkerCapacityArgs
from infra.components.cluster import Cluster, ClusterArgs
from infra.config import EKS, PROJECT, ConfigError, Settings, efa_interfaces_per_node, is_gpu_stack
from infra.components.device_plugin import DevicePlugin, DevicePluginArgs
from infra.components.efa import Efa, EfaArgs
from infra.components.elastic import Elastic, ElasticArgs
from infra.components.elastic_controller import ElasticController, ElasticControllerArgs
from infra.components.existing_cluster import ExistingCluster, ExistingClusterArgs, SharedVolume, SharedVolumeArgs
from infra.components.network import Network, NetworkArgs
from infra.components.registry import Registry, RegistryArgs
from infra.specs import capacity as capacity_specs
from infra.specs import workloads as workload_specs
from infra.components.storage import Storage, StorageArgs
from infra.components.workloads import Workloads, WorkloadsArgs
from infra.aws.zones import region_zone_names


def availability_zones(count: int) -> list[str]:
    """The first `count` zones EKS can use (no Local/Wavelength Zones, no refused zone IDs: infra/aws/zones.py)."""
    zones = region_zone_names()
    if len(zones) < count:
        error = ConfigError(
            f"{PROJECT}:availabilityZoneCount",
            count,
            f"the region has only {len(zones)} available zones that EKS accepts",
        )
        raise pulumi.RunError(str(error))
    return zones[:count]


def build(settings: Settings) -> dict[str, pulumi.Input]:
    """Register every resource for the stack's target; return the stack outputs."""
    return build_eks(settings) if settings.target == EKS else build_existing(settings)


def build_existing(settings: Settings) -> dict[str, pulumi.Input]:
    """target existing: the same Kubernetes objects in a cluster someone already runs; no AWS at all."""
    cluster = ExistingCluster("cluster", ExistingClusterArgs(settings))
    image_ref = pulumi.Output.from_input(settings.image_uri)
    elastic = Elastic("elastic", ElasticArgs(settings, cluster.provider, image_ref))
    volume = SharedVolume("storage", SharedVolumeArgs(settings, cluster.provider, elastic.workload_namespace))
    controller = ElasticController(
        "elastic-controller",
        ElasticControllerArgs(
            settings,
            cluster.provider,
            image_ref,
            [elastic.crd, elastic.workload_namespace, *elastic.workload_policies, volume.claim],
        ),
    )
    workloads = Workloads(
        "workloads",
        WorkloadsArgs(
            settings,
            cluster.provider,
            cluster.kubeconfig,
            image_ref,
            kube_context=cluster.context,
            prerequisites=[volume.claim, elastic.crd, controller.deployment, elastic.store],
        ),
    )
    context = f" --context {cluster.context}" if cluster.context else ""
    commands = _commands(settings, f"kubectl --kubeconfig {cluster.kubeconfig}{context}")
    del commands["topNodes"]  # needs a metrics-server, which only target eks installs
    return {
        "kubeconfig": cluster.kubeconfig,
        "kubeContext": cluster.context,
        "imageRef": image_ref,
        **_run_outputs(settings, workloads, commands),
    }


def build_eks(settings: Settings) -> dict[str, pulumi.Input]:
    """target eks: the AWS platform (network, EKS, EFS, ECR, add-ons), then the same Kubernetes objects."""
    zones = availability_zones(settings.availability_zone_count)
    network = Network("network", NetworkArgs(settings, zones))
    cluster = Cluster(
        "cluster", ClusterArgs(settings, network.vpc_id, network.public_subnet_ids, network.private_subnet_ids)
    )
    # Worker nodes only while a run needs them, in every zone of the private subnets (capacity.py).
    capacity = WorkerCapacity(
        "capacity",
        WorkerCapacityArgs(
            settings,
            capacity_specs.worker_pool(settings, zones),
            cluster.eks_cluster_name,
            cluster.oidc_provider_arn,
            cluster.oidc_issuer,
            network.private_subnet_ids,
            cluster.node_security_group_id,
            cluster.provider,
            cluster.system_nodes,
        ),
    )
    registry = Registry("registry", RegistryArgs(settings))
    # System pods wait for the nodes they run on: the on-demand system group (cluster.py). The
    # rendezvous store runs the training image.
    elastic = Elastic("elastic", ElasticArgs(settings, cluster.provider, registry.image_ref, cluster.system_nodes))
    storage = Storage(
        "storage",
        StorageArgs(
            settings,
            network.vpc_id,
            network.private_subnet_ids,
            cluster.node_security_group_id,
            cluster.eks_cluster_name,
            cluster.oidc_provider_arn,
            cluster.oidc_issuer,
            cluster.provider,
            elastic.workload_namespace,
            cluster.system_nodes,
        ),
    )
    addons = Addons("addons", AddonsArgs(settings, cluster.eks_cluster_name, cluster.system_nodes))
    controller = ElasticController(
        "elastic-controller",
        ElasticControllerArgs(
            settings,
            cluster.provider,
            registry.image_ref,
            [
                elastic.crd,
                elastic.workload_namespace,
                *elastic.workload_policies,
                storage.claim,
                storage.csi_driver,
                cluster.system_nodes,
            ],
        ),
    )
    artifacts = Artifacts("artifacts", ArtifactsArgs(settings))
    gpu_support = []
    if is_gpu_stack(settings):
        gpu_support.append(DevicePlugin("gpu", DevicePluginArgs(cluster.provider, capacity.node_pool)).daemonset)
    if efa_interfaces_per_node(settings):
        gpu_support.append(
            Efa(
                "efa", EfaArgs(settings, cluster.provider, capacity.node_pool, cluster.node_security_group_id)
            ).daemonset
        )
    workloads = Workloads(
        "workloads",
        WorkloadsArgs(
            settings,
            cluster.provider,
            cluster.kubeconfig,
            registry.workload_image_ref,
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            prerequisites=[
                storage.claim,
                storage.csi_driver,
                elastic.crd,
                controller.deployment,
                elastic.store,
                addons.metrics_server,
                capacity.node_pool,
                *gpu_support,
            ],
            artifacts_bucket=artifacts.bucket_name,
            artifacts_ready=artifacts.ready,
        ),
    )
    results = pulumi.Output.concat("s3://", artifacts.bucket_name, "/", run_prefix(settings.run_id))
    commands = _commands(settings, "kubectl")
    commands["exportLogs"] = f"kubectl logs -n {settings.namespace} job/{workload_specs.names(settings.run_id).export}"
    commands["kubeconfig"] = pulumi.Output.concat(
        "aws eks update-kubeconfig --region ", settings.region, " --name ", cluster.eks_cluster_name
    )
    return {
        "clusterName": cluster.eks_cluster_name,
        "kubeconfig": cluster.kubeconfig,
        "imageRef": registry.image_ref,
        "repositoryUrl": registry.repository_url,
        "efsFileSystemId": storage.file_system_id,
        "artifactsBucket": artifacts.bucket_name,
        "modelUri": pulumi.Output.concat(results, "/", run_directory.MODEL),
        "metricsUri": pulumi.Output.concat(results, "/", run_directory.METRICS),
        **_run_outputs(settings, workloads, commands),
    }


def _run_outputs(
    settings: Settings, workloads: Workloads, commands: dict[str, pulumi.Input[str]]
) -> dict[str, pulumi.Input]:
    """What both targets export about the run, with the commands to follow it."""
    return {
        "pvcName": settings.pvc_name,
        "namespace": settings.namespace,
        "runId": settings.run_id,
        "runDirectory": workload_specs.run_dir(settings.run_id),
        "trainingResult": workloads.training_complete.result,
        "runCost": workloads.training_complete.runCost,
        "commands": commands,
    }


def _commands(settings: Settings, kubectl: str) -> dict[str, pulumi.Input[str]]:
    """The kubectl commands to follow a run, as both targets export them."""
    names = workload_specs.names(settings.run_id)
    ns = settings.namespace
    return {
        "watchPods": f"{kubectl} get pods -n {ns} -l {workload_specs.RUN_LABEL}={settings.run_id} -o wide --watch",
        "workerLogs": f"{kubectl} logs -f -n {ns} -l {workload_specs.JOB_LABEL}={names.training} "
        f"--prefix --max-log-requests={settings.max_workers + 1}",
        "dataPrepLogs": f"{kubectl} logs -f -n {ns} job/{names.data_prep}",
        "testLogs": f"{kubectl} logs -n {ns} job/{names.test}",
        "topNodes": f"{kubectl} top nodes",
    }
