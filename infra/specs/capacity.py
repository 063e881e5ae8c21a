"""Worker capacity: the Karpenter objects that bring worker nodes up only while a run needs them.

Why Karpenter (docs/design-notes.md, "Worker capacity"): it launches nodes for pending pods and
removes empty ones with no node group minimum (zero workers between runs), asks EC2 Fleet for Spot
with the price-capacity-optimized strategy across every type and zone a NodePool allows
(aws/karpenter-provider-aws v1.14.1 pkg/providers/instance/types.go: SpotAllocationStrategy
PriceCapacityOptimized), and turns a Spot interruption warning from its SQS queue into a NodeClaim
deletion, i.e. a drain that starts seconds after the 2-minute notice (pkg/controllers/interruption/
utils.go: SpotInterruptionKind -> CordonAndDrain -> deleteNodeClaim).

The objects, and what each field is for (fields modelled from the CRDs at aws/karpenter-provider-aws
1d927085, pkg/apis/crds/, in tests/karpenter_schema.py):
- NodePool `workers`: requirements on capacity type, the instance types of one shape, every zone of
  the stack, amd64/linux; the worker taint, so nothing but training lands there and a preemption
  can only take workers; `limits` of nodeMaxCount nodes of the shape;
  `consolidationPolicy: WhenEmpty` (a node goes only once it runs no pod that counts: finished pods
  do not, kubernetes-sigs/karpenter v1.14.1 pkg/utils/pod/scheduling.go IsReschedulable/IsActive),
  budgets that allow no Drifted or Underutilized disruption, `expireAfter: Never`;
  `terminationGracePeriod` equal to the workers' own grace period (see `node_termination_grace`).
- EC2NodeClass `workers`: the EKS AL2023 AMI at a pinned release, our private subnets and the
  cluster security group by id, IMDSv2 with hop limit 1, an encrypted gp3 root
  volume, the stack's instance profile and the same kubelet NodeConfig (seccompDefault) as the system group (infra/specs/node_config.py).
- the workers' pod template: `karpenter.sh/do-not-disrupt: "true"` (no voluntary disruption while
  a worker runs) and the toleration of the worker taint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infra.aws import gpu_instances, instance_shapes
from infra.config import Settings, efa_interfaces_per_node, worker_instance_types
from infra.specs import gpu, node_config
from infra.specs.labels import common_labels

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"
WORKER_POOL = "workers"
COMPONENT = "worker-capacity"

# Well-known labels Karpenter sets and matches requirements against (kubernetes-sigs/karpenter
# pkg/apis/v1/labels.go: CapacityTypeLabelKey; Kubernetes' own topology and instance-type labels).
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
SPOT, ON_DEMAND = "spot", "on-demand"  # Karpenter's values of CAPACITY_TYPE_LABEL

# The pod annotation that keeps Karpenter from voluntarily disrupting a node the pod runs on
# (kubernetes-sigs/karpenter pkg/apis/v1/labels.go DoNotDisruptAnnotationKey; "true" is permanent).
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

# The taint of the worker nodes on CPU stacks; GPU stacks keep the GPU taint, which already keeps
# every pod but the workers and the device plugin away (infra/specs/gpu.py).
WORKER_TAINT_KEY = "elastic-training/workers"
WORKER_TAINT_VALUE = "true"
WORKER_TAINT_EFFECT = "NoSchedule"

# The EKS-optimised AL2023 AMI release the workers boot, pinned (an `@latest` alias would roll the
# nodes whenever AWS publishes one). Read in awslabs/amazon-eks-ami CHANGELOG.md @ 81fec2e8
# ("AMI Release v20260714", built for Kubernetes 1.30 to 1.36); Karpenter picks the NVIDIA variant
# of the same release for GPU types. The alias format is `family@version` (Karpenter docs v1.14,
# concepts/nodeclasses.md, amiSelectorTerms).
AL2023_AMI_RELEASE = "v20260714"
AMI_ALIAS = f"al2023@{AL2023_AMI_RELEASE}"

# How long empty worker nodes stay before Karpenter removes them: long enough that the next Job's
# pods of a run in progress (a worker pod recreated by the controller) find the node, short
# enough that an idle stack bills minutes of workers, not hours.
CONSOLIDATE_AFTER = "60s"

# The AL2023 EKS AMI's root volume (the same device the system group's launch template maps).
ROOT_DEVICE = "/dev/xvda"


@dataclass(frozen=True)
class WorkerShape:
    """What one worker node has: every instance type of the pool has this shape."""

    vcpus: int
    memory_mib: int
    gpus: int = 0
    gpu_model: str = ""


@dataclass(frozen=True)
class WorkerPool:
    """The plain values the pool is built from (validated in infra/config before any resource)."""

    capacity_type: str  # SPOT or ON_DEMAND
    instance_types: tuple[str, ...]  # all of `shape`
    zones: tuple[str, ...]  # every zone of the stack's private subnets
    shape: WorkerShape
    max_nodes: int  # nodeMaxCount
    grace_seconds: int  # the worker pods' terminationGracePeriodSeconds
    disk_gib: int  # nodeDiskGiB


def worker_taints(gpu_stack: bool) -> list[dict[str, str]]:
    if gpu_stack:
        return [{"key": gpu.GPU_TAINT_KEY, "value": gpu.GPU_TAINT_VALUE, "effect": gpu.GPU_TAINT_EFFECT}]
    return [{"key": WORKER_TAINT_KEY, "value": WORKER_TAINT_VALUE, "effect": WORKER_TAINT_EFFECT}]


def worker_tolerations(gpu_stack: bool) -> list[dict[str, str]]:
    """The workers tolerate exactly the taints of their nodes."""
    return [
        {"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]}
        for t in worker_taints(gpu_stack)
    ]


def worker_node_labels(gpu_stack: bool) -> dict[str, str]:
    """The labels the worker pods select (and, on GPU stacks, the device plugin)."""
    return gpu.gpu_node_labels() if gpu_stack else {gpu.NODE_ROLE_LABEL: gpu.WORKER_ROLE}


def worker_pod_annotations() -> dict[str, str]:
    return {DO_NOT_DISRUPT: "true"}


def node_termination_grace(pool: WorkerPool) -> str:
    """The NodePool's terminationGracePeriod: the workers' own grace period.

    Karpenter never evicts a pod marked do-not-disrupt while it drains a node, Spot interruption
    included: such a pod is only deleted once the node's grace period is about to run out, at
    `deletion + terminationGracePeriod - pod.terminationGracePeriodSeconds`
    (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/node/termination/terminator/terminator.go,
    DeleteExpiringPods / podDeleteTimeWithGracePeriod; Karpenter docs v1.14 disruption.md,
    "TerminationGracePeriod"). With no grace period on the node the worker would get no SIGTERM
    at all before EC2 reclaims a Spot instance. With both equal, the worker is deleted (a plain
    delete, which no PodDisruptionBudget blocks) the moment the drain starts, and its grace period
    ends before the 2-minute notice does (infra/config checks the sum for Spot)."""
    return f"{pool.grace_seconds}s"


def _limits(pool: WorkerPool) -> dict[str, str]:
    """At most max_nodes nodes of the shape at once (Karpenter counts every node of the pool)."""
    limits = {"cpu": str(pool.max_nodes * pool.shape.vcpus), "memory": f"{pool.max_nodes * pool.shape.memory_mib}Mi"}
    if pool.shape.gpus:
        limits[gpu.GPU_RESOURCE] = str(pool.max_nodes * pool.shape.gpus)
    return limits


def node_pool(pool: WorkerPool) -> dict[str, Any]:
    gpu_stack = pool.shape.gpus > 0
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": {"name": WORKER_POOL, "labels": common_labels(COMPONENT)},
        "spec": {
            "template": {
                "metadata": {"labels": worker_node_labels(gpu_stack)},
                "spec": {
                    "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": WORKER_POOL},
                    "requirements": [
                        {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [pool.capacity_type]},
                        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": sorted(pool.instance_types)},
                        {"key": ZONE_LABEL, "operator": "In", "values": list(pool.zones)},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "taints": worker_taints(gpu_stack),
                    # Expiration is a forceful disruption that do-not-disrupt does not stop; a worker
                    # node lives as long as its run and no longer (Karpenter docs v1.14 disruption.md, "Expiration").
                    "expireAfter": "Never",
                    "terminationGracePeriod": node_termination_grace(pool),
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": CONSOLIDATE_AFTER,
                # A node with a terminationGracePeriod may be disrupted for drift even when a
                # do-not-disrupt pod runs there (disruption.md, "TerminationGracePeriod"): no
                # drift or underutilisation budget at all; empty nodes all go.
                "budgets": [
                    {"nodes": "0", "reasons": ["Drifted", "Underutilized"]},
                    {"nodes": "100%", "reasons": ["Empty"]},
                ],
            },
            "limits": _limits(pool),
        },
    }


def node_class(
    pool: WorkerPool, instance_profile: Any, subnet_ids: Sequence[Any], security_group_id: Any, tags: dict[str, str]
) -> dict[str, Any]:
    """`instance_profile` (its name), the subnet ids and the security group id are the stack's own
    (strings or Outputs). The stack creates the instance profile, so `pulumi destroy` removes it and
    Karpenter needs no IAM write permission at all (infra/aws/karpenter_iam.py)."""
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": WORKER_POOL, "labels": common_labels(COMPONENT)},
        "spec": {
            "amiSelectorTerms": [{"alias": AMI_ALIAS}],
            "instanceProfile": instance_profile,
            "subnetSelectorTerms": [{"id": subnet} for subnet in subnet_ids],
            # The EKS cluster security group, which pulumi-eks reports as the nodes' group: the
            # control plane reaches kubelets through it and the EFS mount targets admit NFS from it.
            "securityGroupSelectorTerms": [{"id": security_group_id}],
            # Karpenter appends its own NodeConfig part (cluster, labels, taints); nodeadm merges ours in.
            "userData": node_config.user_data(node_config.node_config()),
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "blockDeviceMappings": [
                {
                    "deviceName": ROOT_DEVICE,
                    "rootVolume": True,
                    "ebs": {
                        "volumeSize": f"{pool.disk_gib}Gi",
                        "volumeType": "gp3",
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
            "tags": tags,
        },
    }


def worker_shape(instance_type: str) -> WorkerShape:
    """One node of the pool, from the table of every EC2 type offered for Linux (infra/aws/
    instance_shapes.py; config has already refused a type it lacks, with "did you mean"); the GPU
    table (infra/aws/gpu_instances.py) for the GPUs, which the device plugin advertises."""
    shape = instance_shapes.shape(instance_type)
    if shape is None:  # unreachable from user input: infra/config/keys.py checks the type first
        raise ValueError(f"{instance_type} is not an EC2 instance type: the worker pool's limits need its shape")
    nvidia = gpu_instances.nvidia_instance(instance_type)
    return WorkerShape(
        vcpus=shape.vcpus,
        memory_mib=shape.memory_mib,
        gpus=nvidia.gpus if nvidia else 0,
        gpu_model=nvidia.gpu if nvidia else "",
    )


def worker_pool(settings: Settings, zones: list[str]) -> WorkerPool:
    """The stack's pool: its capacity type and types, every zone of its private subnets; only the
    first zone with EFA, whose traffic does not cross Availability Zones (Amazon EC2 User Guide,
    "Elastic Fabric Adapter", EFA limitations: "EFA traffic can't cross Availability Zones or VPCs"),
    so that all workers of a run land where their EFA reaches each other."""
    pool_zones = zones[:1] if efa_interfaces_per_node(settings) else zones
    return WorkerPool(
        capacity_type=settings.capacity_type,
        instance_types=worker_instance_types(settings),
        zones=tuple(pool_zones),
        shape=worker_shape(settings.node_instance_type),
        max_nodes=settings.node_max_count,
        grace_seconds=settings.worker_grace_seconds,
        disk_gib=settings.node_disk_gib,
    )
