"""The `gpu` stack, as the real `synth` renders it: the system node group and the worker pool, AMI
type, taints and tolerations, the NVIDIA device plugin, the workers' GPUs, and nothing of the system
side on GPU nodes. (The same placement rules on every eks stack: tests/test_worker_capacity.py.)

Upstream behaviour modelled here, from its source:
- toleration matching: k8s.io/api core/v1 toleration.go, `ToleratesTaint` (empty effect matches
  every effect, otherwise equal; empty key with Exists matches every key; operator "" or Equal
  compares the value, Exists matches any value);
- managed node group values: the EKS API's `AMITypes` and `TaintEffect` enums (botocore 1.44.5,
  data/eks/2017-11-01/service-2.json, read here through botocore's loader); the API's `NO_SCHEDULE`
  is Kubernetes' `NoSchedule` on the nodes ("When using AWS CLI or API, taint effects must be
  NO_SCHEDULE, PREFER_NO_SCHEDULE, or NO_EXECUTE. When using Kubernetes directly or kubectl, taint
  effects must be NoSchedule, PreferNoSchedule, or NoExecute": AWS CDK reference, enum TaintEffect,
  https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_eks_v2.TaintEffect.html);
- GPUs per node: moto's EC2 instance data (moto/ec2/resources/instance_types.json.gz, `GpuInfo`),
  read here directly rather than through our table.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import botocore.session
import moto
import pytest

from infra import versions
from infra.config import load_settings
from infra.specs import gpu
from infra.specs import workloads as specs
from infra.config.stack_file import read_stack_file
from pod_security import BASELINE, violations

EKS_MODEL = botocore.session.get_session().get_service_model("eks")
MOTO_INSTANCE_TYPES = json.loads(
    gzip.decompress((Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz").read_bytes())
)
# EKS API taint effect -> the Kubernetes effect it puts on the node.
EKS_TO_KUBERNETES_EFFECT = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


def tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' Toleration.ToleratesTaint (k8s.io/api core/v1 toleration.go)."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    operator = toleration.get("operator", "")
    if operator in ("", "Equal"):
        return toleration.get("value", "") == taint.get("value", "")
    return operator == "Exists"


def moto_gpu_count(instance_type: str) -> int:
    return sum(g["Count"] for g in MOTO_INSTANCE_TYPES[instance_type]["GpuInfo"]["Gpus"])


@pytest.fixture(scope="module")
def gpu_stack(synth_stack):
    return synth_stack("gpu")


WORKERS = "nodepool/workers"  # the worker pool Karpenter launches nodes from (infra/specs/capacity.py)


def node_groups(synth) -> dict[str, dict]:
    """The managed node groups, and each Karpenter NodePool as the nodes it launches: its template's
    labels and Kubernetes taints (Karpenter puts both on every node, kubernetes-sigs/karpenter
    pkg/apis/v1/nodepool.go NodeClaimTemplate), any of its instance types."""
    groups = {r["name"]: r["inputs"] for r in synth.of_type("eks:index:ManagedNodeGroup")}
    for pool in (m for m in synth.manifests if m["kind"] == "NodePool"):
        template = pool["spec"]["template"]
        (types,) = [
            r["values"] for r in template["spec"]["requirements"] if r["key"] == "node.kubernetes.io/instance-type"
        ]
        groups[f"nodepool/{pool['metadata']['name']}"] = {
            "labels": template["metadata"]["labels"],
            "instanceTypes": types,
            "kubernetesTaints": template["spec"].get("taints", []),
        }
    return groups


def node_taints(group: dict) -> list[dict]:
    """The taints on the group's nodes, in Kubernetes' terms (EKS API effects translated)."""
    if "kubernetesTaints" in group:
        return group["kubernetesTaints"]
    return [
        {"key": t["key"], "value": t.get("value", ""), "effect": EKS_TO_KUBERNETES_EFFECT[t["effect"]]}
        for t in group.get("taints", [])
    ]


def pod_templates(synth) -> dict[str, dict]:
    """Every pod spec the stack makes the cluster run, by '<kind>/<name>'."""
    pods = {}
    for m in synth.manifests:
        name = f"{m['kind']}/{m['metadata']['name']}"
        if m["kind"] in ("Deployment", "Job", "DaemonSet", "StatefulSet"):
            pods[name] = m["spec"]["template"]["spec"]
        elif m["kind"] == "ElasticJob":
            pods[name] = m["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    return pods


def can_land_on(pod: dict, group: dict) -> bool:
    """Taints tolerated and nodeSelector matched by the group's node labels (node affinity unused here)."""
    labels = {**group.get("labels", {}), "node.kubernetes.io/instance-type": group["instanceTypes"][0]}
    selected = all(labels.get(k) == v for k, v in pod.get("nodeSelector", {}).items())
    tolerated = all(any(tolerates(t, taint) for t in pod.get("tolerations", [])) for taint in node_taints(group))
    return selected and tolerated


def test_gpu_worker_pool_and_system_node_group(gpu_stack):
    groups = node_groups(gpu_stack)
    assert set(groups) == {WORKERS, "cluster-system-nodes"}
    workers, system = groups[WORKERS], groups["cluster-system-nodes"]
    assert workers["instanceTypes"] == ["g6.xlarge"] and system["instanceTypes"] == ["m5.large"]
    assert system["amiType"] == "AL2023_x86_64_STANDARD" and system["amiType"] in EKS_MODEL.shape_for("AMITypes").enum
    assert system["capacityType"] == "ON_DEMAND" and system["capacityType"] in EKS_MODEL.shape_for("CapacityTypes").enum
    assert node_taints(workers) == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert "taints" not in system
    assert system["scalingConfig"] == {"desiredSize": 2, "minSize": 2, "maxSize": 2}
    # The GPU nodes boot the EKS AL2023 AMI (Karpenter picks its NVIDIA variant for GPU types) with
    # the system group's NodeConfig (seccompDefault).
    (node_class,) = [m for m in gpu_stack.manifests if m["kind"] == "EC2NodeClass"]
    assert node_class["spec"]["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]


def test_cpu_stacks_have_no_device_plugin(dev):
    assert not [m for m in dev.manifests if m["kind"] == "DaemonSet"]


def test_device_plugin_runs_only_on_gpu_nodes(gpu_stack):
    plugin = gpu_stack.manifest("DaemonSet", "nvidia-device-plugin")
    pod = plugin["spec"]["template"]["spec"]
    groups = node_groups(gpu_stack)
    assert can_land_on(pod, groups[WORKERS])
    assert not can_land_on(pod, groups["cluster-system-nodes"])
    (container,) = pod["containers"]
    assert container["image"] == versions.NVIDIA_DEVICE_PLUGIN_IMAGE == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert pod["volumes"] == [
        {"name": "device-plugins", "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}}
    ]
    assert container["volumeMounts"][0]["mountPath"] == "/var/lib/kubelet/device-plugins"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False


def test_device_plugin_is_outside_every_namespace_we_label(gpu_stack):
    """Its hostPath breaks Pod Security baseline, so it cannot run in the training namespace; it runs
    in kube-system, which the stack neither creates nor labels."""
    plugin = gpu_stack.manifest("DaemonSet", "nvidia-device-plugin")
    template = plugin["spec"]["template"]
    assert "HostPath Volumes" in violations(
        {"metadata": template.get("metadata", {}), "spec": template["spec"]}, BASELINE
    )
    assert plugin["metadata"]["namespace"] == gpu.DEVICE_PLUGIN_NAMESPACE == "kube-system"
    ours = {m["metadata"]["name"] for m in gpu_stack.manifests if m["kind"] == "Namespace"}
    assert "kube-system" not in ours


def test_workers_take_every_gpu_of_their_node(gpu_stack):
    job = gpu_stack.manifest("ElasticJob")
    pod = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    (worker,) = pod["containers"]
    gpus = str(moto_gpu_count("g6.xlarge"))
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == worker["resources"]["requests"]["nvidia.com/gpu"] == gpus
    assert f"--nproc_per_node={gpus}" in worker["args"]
    assert can_land_on(pod, node_groups(gpu_stack)[WORKERS])
    assert not can_land_on(pod, node_groups(gpu_stack)["cluster-system-nodes"])
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    # half of workerMemory 12Gi; the ElasticJob is a custom resource, which the API server keeps as sent
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "6144Mi"}


@pytest.mark.parametrize("instance_type", ["g6.12xlarge", "p4d.24xlarge", "g5.16xlarge"])
def test_a_multi_gpu_node_runs_one_local_worker_per_gpu(instance_type):
    raw = {**read_stack_file("gpu"), "elastic-training:nodeInstanceType": instance_type}
    settings = load_settings(raw, "gpu")
    job = specs.elastic_job(settings, "image", "--rdzv_id=x")
    (worker,) = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    count = moto_gpu_count(instance_type)
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == str(count)
    assert f"--nproc_per_node={count}" in worker["args"]


def test_nothing_of_the_system_side_lands_on_gpu_nodes(gpu_stack):
    gpu_group = node_groups(gpu_stack)[WORKERS]
    on_gpu = {name for name, pod in pod_templates(gpu_stack).items() if can_land_on(pod, gpu_group)}
    assert on_gpu == {"ElasticJob/train-run-1", "DaemonSet/nvidia-device-plugin"}


# The EFS CSI driver's pods as its chart sets their tolerations (kubernetes-sigs/aws-efs-csi-driver
# charts/aws-efs-csi-driver/values.yaml @ 00a24b481f2104d06205431b24a2305d6fd8a446): the controller
# tolerates CriticalAddonsOnly and efs.csi.aws.com/agent-not-ready only, the node DaemonSet every taint.
EFS_CSI_CONTROLLER_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "efs.csi.aws.com/agent-not-ready", "operator": "Exists"},
]
EFS_CSI_NODE_TOLERATIONS = [{"operator": "Exists"}]


def test_efs_csi_controller_stays_off_gpu_nodes_and_its_node_plugin_reaches_them(gpu_stack):
    """The workers mount EFS, so the CSI node plugin must run on GPU nodes; the controller must not."""
    gpu_group = node_groups(gpu_stack)[WORKERS]
    assert not can_land_on({"tolerations": EFS_CSI_CONTROLLER_TOLERATIONS}, gpu_group)
    assert can_land_on({"tolerations": EFS_CSI_NODE_TOLERATIONS}, gpu_group)


def test_the_toleration_model_follows_kubernetes():
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert tolerates(
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, taint
    )  # upstream plugin's
    assert tolerates({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, taint)
    assert tolerates({"operator": "Exists"}, taint)
    assert not tolerates({"key": "nvidia.com/gpu", "operator": "Equal", "value": "yes"}, taint)
    assert not tolerates({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert not tolerates({"key": "CriticalAddonsOnly", "operator": "Exists"}, taint)


def test_gpu_stack_builds_the_cuda_image(gpu_stack, dev):
    image = gpu_stack.one("docker-build:index:Image")["inputs"]
    assert image["buildArgs"] == {"TORCH_INDEX_URL": "https://pypi.org/simple"}
    assert image["tags"][0].endswith("-cuda")
    assert dev.one("docker-build:index:Image")["inputs"]["buildArgs"] == {
        "TORCH_INDEX_URL": "https://download.pytorch.org/whl/cpu"
    }


def test_dockerfile_takes_the_torch_index_as_a_build_argument():
    dockerfile = (Path(specs.__file__).resolve().parents[2] / "images" / "Dockerfile").read_text()
    assert f"ARG TORCH_INDEX_URL={versions.TORCH_INDEX_URLS['cpu']}" in dockerfile
    assert '--index-url "${TORCH_INDEX_URL}"' in dockerfile
