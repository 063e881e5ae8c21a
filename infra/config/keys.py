"""Every project config key: its type, default, description and the rule its value must meet.

It is over 400 lines because it is the one table of keys (one entry each, read by Pulumi.yaml's schema, the docs
and the checks); splitting the table would make two places to look for a key.

`CONFIG_KEYS` is the single list of project keys: `Pulumi.yaml`'s config schema and docs/configuration.md's
table are checked against it by the tests. Rules here look at one value; rules that tie keys
together are in relations.py.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from infra import versions
from infra.aws import gpu_instances, instance_shapes, nvidia_gpus
from infra.config import image_reference, own_training
from infra.config.parsers import PARSERS, QUANTITY, memory_mib, parse_decimal, parse_optional_usd

PROJECT = "elastic-training"

# Every pattern is applied with fullmatch: `$` alone also matches before a trailing newline, which
# a YAML block scalar (`runId: |`) leaves on the value.
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# family + generation + attributes, then size: c5.4xlarge, m6id.large, g5.12xlarge, p4d.24xlarge; the
# attributes are letters, then optional "-" parts (m7i-flex, p6-b200, p6-b300).
INSTANCE_TYPE = re.compile(
    r"^(?P<family>[a-z]+)(?P<generation>[0-9]+)(?P<attributes>[a-z]*(?:-[a-z0-9]+)*)\.(?P<size>[0-9]*[a-z]+)$"
)
IAM_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]+$")
# What CloudWatch Logs accepts as a retention (botocore 1.44.5, logs service model, shape `Days` of
# PutRetentionPolicy: "Possible values are: 1, 3, 5, ... 3653"; "never expire" is no value there).
CLOUDWATCH_LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
MD5_HEX = re.compile(r"^[0-9a-f]{32}$")
DATA_URL = re.compile(r"^(https|s3)://[^/\s]+/\S+$")

# jobs.training.runtime.PRECISIONS, which the worker accepts (infra does not import jobs: that would
# load torch); tests/jobs/test_precision.py checks that the two agree.
PRECISIONS = ("auto", "fp32", "tf32", "bf16")

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"


# --- rules on single values -----------------------------------------------------------------
# Each rule returns None when the value is fine, else the text of what is allowed.


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def _fraction(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be between 0 and 1 (a fraction: 0.7 means 70 %)"


def _positive_or_none(v: float | None) -> str | None:
    return None if v is None or v > 0 else 'must be more than 0 (or "" for no ceiling)'


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def _log_retention(v: int) -> str | None:
    if v in CLOUDWATCH_LOG_RETENTION_DAYS:
        return None
    return f"must be a retention CloudWatch Logs accepts: one of {', '.join(map(str, CLOUDWATCH_LOG_RETENTION_DAYS))}"


def _dns_label(max_len: int = 63) -> Callable[[str], str | None]:
    def rule(v: str) -> str | None:
        if len(v) <= max_len and DNS_1123_LABEL.fullmatch(v):
            return None
        return (
            f"must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {max_len} characters"
        )

    return rule


# Namespaces the cluster already has, or that stacks before issue 33 created for the archived
# controller (elastic-job; it may still exist on a cluster they ran on): labelling one of them for
# the restricted Pod Security Standard would stop system pods, and two Namespace objects of one
# name would fight over it.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "elastic-job")


def _workload_namespace(v: str) -> str | None:
    if v in RESERVED_NAMESPACES:
        return f"must not be one of {', '.join(RESERVED_NAMESPACES)} (the stack creates and labels its own namespace)"
    return _dns_label()(v)


def _instance_type(v: str) -> str | None:
    """A type EC2 offers for Linux (infra/aws/instance_shapes.py, every one of them, offline), on x86-64."""
    shape = instance_shapes.shape(v)
    if shape is None:
        if not INSTANCE_TYPE.fullmatch(v) and not instance_shapes.close_matches(v):
            return "must be an EC2 instance type such as c5.4xlarge (family, generation, size)"
        return instance_shapes.unknown_type_problem(v)
    # The architectures are EC2's (ProcessorInfo.SupportedArchitectures): Graviton types are arm64
    # only, and the nodes run the x86-64 AMI and the training image (which also runs our ElasticJob
    # controller) is built for linux/amd64 only (infra/versions.py IMAGE_PLATFORM).
    if not shape.amd64:
        return (
            "must be an x86-64 instance type: EC2 lists it as arm64 only (Graviton), and the nodes run the "
            "x86-64 EKS AMI and the training and controller image, built for linux/amd64 only"
        )
    return None


_NOT_WHOLE_NVIDIA = (
    "is a GPU type that is not an x86-64 type with whole NVIDIA GPUs in infra/aws/gpu_instances.py "
    "(fractional-GPU and AMD-GPU types are not supported), e.g. g6.xlarge or g5.xlarge"
)


def _worker_instance_type(v: str) -> str | None:
    # The GPU rules come first: they name the family, which says more than "not offered" for a
    # retired type (p3.2xlarge) or one the shape table lacks (g4ad, missing from moto's data).
    # GPUs the nodes' driver or the image's torch cannot use (infra/aws/nvidia_gpus.py): G7, Volta.
    unusable = nvidia_gpus.why_it_cannot_train(v)
    if unusable:
        return unusable
    # A G or P type, or any type EC2 lists with GPUs, must be one whose GPUs we know
    # (infra/aws/gpu_instances.py): the AMI type, the device plugin, the workers' nvidia.com/gpu and
    # --nproc_per_node all follow from that entry.
    if gpu_instances.is_gpu_family(v) and gpu_instances.nvidia_instance(v) is None:
        return _NOT_WHOLE_NVIDIA
    problem = _instance_type(v)
    if problem:
        return problem
    shape = instance_shapes.shape(v)  # known: _instance_type passed
    if shape is not None and shape.gpus and gpu_instances.nvidia_instance(v) is None:
        return _NOT_WHOLE_NVIDIA
    return None


def _worker_instance_types(v: list[str]) -> str | None:
    for instance_type in v:
        problem = _worker_instance_type(instance_type)
        if problem:
            return f"{instance_type!r} {problem}"
    return None


def _system_instance_type(v: str) -> str | None:
    problem = _instance_type(v)
    if problem:
        return problem
    shape = instance_shapes.shape(v)  # known: _instance_type passed
    if gpu_instances.is_gpu_family(v) or (shape is not None and shape.gpus):
        return "must be a CPU instance type such as m5.large (the system nodes are there to keep GPUs free)"
    return None


IMAGE_VARIANTS = ("", "cpu", "cuda")
CPU, CUDA = "cpu", "cuda"


# EKS's quota "Public endpoint access CIDR ranges per cluster": 40, not adjustable (Amazon EKS User Guide,
# "View and manage Amazon EKS and Fargate service quotas", service-quotas.html, read at
# https://docs.amazonaws.cn/en_us/eks/latest/userguide/service-quotas.html; its "Configure network access to
# cluster API server endpoint" page says "There is a maximum number of CIDR blocks that you can specify" and
# points there). More would pass here and fail in CreateCluster, after the VPC was built.
EKS_PUBLIC_ACCESS_CIDRS_MAX = 40


def _cidrs(v: list[str]) -> str | None:
    if not v:
        return "must list at least one CIDR block (e.g. your office range, or 0.0.0.0/0)"
    if len(v) > EKS_PUBLIC_ACCESS_CIDRS_MAX:
        return (
            f"lists {len(v)} CIDR blocks; EKS allows at most {EKS_PUBLIC_ACCESS_CIDRS_MAX} for the public "
            "endpoint of a cluster (a quota it does not raise): merge neighbouring ranges into wider blocks"
        )
    for cidr in v:
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            return f"{cidr!r} is not a CIDR block with its host bits zero, e.g. 203.0.113.0/24"
        if network.version != 4:
            return f"{cidr!r} is IPv6; EKS public access CIDRs must be IPv4"
    return None


def _principal_arns(v: list[str]) -> str | None:
    bad = [arn for arn in v if not IAM_PRINCIPAL_ARN.fullmatch(arn)]
    if bad:
        return f"{bad[0]!r} is not an IAM role or user ARN (arn:aws:iam::<12-digit account>:role/<name>)"
    # Each ARN becomes an EKS access entry, and EKS refuses a second entry for one principal (409
    # ResourceInUseException, infra/aws/principals.py drop_creator). EKS documents no quota of access
    # entries per cluster (service-quotas.html lists none), so the count itself is not bounded.
    seen: set[str] = set()
    for arn in v:
        if arn in seen:
            return f"lists {arn} twice (each ARN is one EKS access entry): keep one"
        seen.add(arn)
    return None


# The least /dev/shm a GPU worker gets (infra/specs/workloads.py sizes it at half workerMemory):
# PyTorch's tutorials CI runs its NCCL jobs with `docker run --shm-size=2gb` because with less
# NCCL crashed in ncclShmOpen (pytorch/tutorials commit 0ba3e39d736a1f5d46da5728e564569f8cd3fe8c,
# .github/workflows/build-tutorials.yml).
NCCL_SHM_MIN_MIB = 2048


def _quantity(v: str) -> str | None:
    match = QUANTITY.fullmatch(v)
    # A zero request and limit would leave the worker no CPU or memory at all.
    if match and float(match[1]) > 0:
        return None
    return "must be a CPU quantity above zero such as 15, 3.5 or 500m (thousandths of a CPU)"


# The least memory a training worker can have: one worker of this CNN on CPU (batch 50, torchrun on
# generated data) peaked at 880 MiB resident, measured with getrusage(RUSAGE_CHILDREN).ru_maxrss (issue 39).
WORKER_MEMORY_MIN_MIB = 1024


def _worker_memory(v: str) -> str | None:
    allowed = (
        "must be a memory quantity of at least 1Gi, such as 24Gi, 3072Mi or 16G (Ki, Mi, Gi, Ti, k, M, G, T; "
        "a worker of this model needs about 900 MiB)"
    )
    match = QUANTITY.fullmatch(v)
    if not match:
        return allowed
    if memory_mib(v) >= WORKER_MEMORY_MIN_MIB:
        return None
    if match[3] is None:
        return f"{allowed}: {v} without a unit is {v} bytes"
    if match[3] == "m":
        return f"{allowed}: the unit m is thousandths (of a byte, for memory), not mebibytes (Mi)"
    return f"{allowed}: {v} is {memory_mib(v):g} MiB"


def _kubernetes_version(v: str) -> str | None:
    if v in versions.SUPPORTED_KUBERNETES_VERSIONS:
        return None  # one past its support is refused with its dates (relations.kubernetes_support)
    today = datetime.now(timezone.utc).date()
    usable = [
        k for k in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(k, today) != versions.ENDED
    ]
    problem = f"must be one of {', '.join(usable)}"
    # YAML reads an unquoted 1.40 as the number 1.4, and the Pulumi CLI passes the program "1.4".
    if re.fullmatch(r"[0-9]+\.[0-9]", v):
        problem += f" (quote the version in the stack file, kubernetesVersion: \"{v}0\": unquoted, YAML reads {v}0 as the number {v})"
    return problem


def _image_uri(v: str) -> str | None:
    # By the distribution reference grammar (infra/config/image_reference.py), with a registry named,
    # so the reference means the same to every runtime (no implied Docker Hub).
    if v == "":
        return None
    allowed = (
        "must be empty (build images/ and push to ECR) or an image reference registry/repo[:tag][@sha256:<digest>]"
    )
    try:
        named = image_reference.registry(v)
    except image_reference.ReferenceError as error:
        return f"{allowed} (distribution reference grammar: {error})"
    return None if named else f"{allowed} with its registry named (e.g. public.ecr.aws/org/repo:tag)"


# jobs.data.prepare's --synthetic limit (jobs/data/prepare.py MAX_SYNTHETIC_PER_CLASS; infra does not import
# jobs, tests/jobs/test_prepare_source.py compares the two): a larger count would pass here and
# fail only in the data-prep Job, after the cluster was built.
MAX_SYNTHETIC_PER_CLASS = 5000
# The count data-prep generates for a plain `synthetic` (infra/specs/workloads.py data_prep_args).
SYNTHETIC_DEFAULT_PER_CLASS = 1000


def _data_source(v: str) -> str | None:
    # A host and a path after the scheme; plain http:// is refused, since with an empty dataMd5
    # nothing else would notice a tampered download.
    if DATA_URL.fullmatch(v):
        return None
    synthetic = re.fullmatch(r"synthetic(?::([1-9][0-9]*))?", v)
    if synthetic and (synthetic[1] is None or int(synthetic[1]) <= MAX_SYNTHETIC_PER_CLASS):
        return None
    return (
        "must be an https:// or s3:// URL of a CIFAR-10 python tarball, 'synthetic' or 'synthetic:<images per class>' "
        f"with 1 to {MAX_SYNTHETIC_PER_CLASS} images per class"
    )


def _md5(v: str) -> str | None:
    return None if v == "" or MD5_HEX.fullmatch(v) else "must be empty or 32 lowercase hex digits"


@dataclass(frozen=True)
class ConfigKey:
    name: str  # key in the project namespace, as in `pulumi config set <name>`
    field: str  # attribute on Settings
    type: str  # Pulumi.yaml schema type: integer, boolean, string, array
    default: Any  # as Pulumi.yaml declares it, of that type
    description: str
    rule: Callable[[Any], str | None] | None = None
    parse: Callable[[str], Any] | None = None  # overrides PARSERS[type] (a number held in a string key)

    def parse_text(self, text: str) -> Any:
        return (self.parse or PARSERS[self.type])(text)

    @property
    def default_value(self) -> Any:
        """The default as Settings holds it (parsed when the key has its own parser)."""
        return self.parse(self.default) if self.parse else self.default


# Where the stack runs: `eks` builds the whole AWS platform; `existing` deploys the same
# Kubernetes objects into a cluster someone already has (kind, minikube, k3d, a company cluster)
# and creates no AWS resource at all.
EKS, EXISTING = "eks", "existing"
TARGETS = (EKS, EXISTING)
READ_WRITE_MANY, READ_WRITE_ONCE = "ReadWriteMany", "ReadWriteOnce"
ACCESS_MODES = (READ_WRITE_MANY, READ_WRITE_ONCE)


def _kubeconfig_path(v: str) -> str | None:
    # A path, as the Kubernetes provider and kubectl read it; `~` is the deployer's home.
    if v.strip() == v and v and "\n" not in v:
        return None
    return "must be the path of a kubeconfig file, e.g. ~/.kube/config"


def _kube_context(v: str) -> str | None:
    # Empty: the kubeconfig's current-context. Context names are free text in a kubeconfig, but
    # never blank or multi-line.
    return (
        None
        if v == "" or (v.strip() == v and "\n" not in v)
        else "must be empty (the current context) or a context name of the kubeconfig"
    )


CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "target",
        "target",
        "string",
        EKS,
        "Where the stack runs: `eks` creates the AWS platform (VPC, EKS, EFS, ECR); `existing` deploys into "
        "the cluster of `kubeconfig`/`kubeContext` and creates no AWS resources.",
        _one_of(TARGETS),
    ),
    ConfigKey(
        "kubeconfig",
        "kubeconfig",
        "string",
        "~/.kube/config",
        "target existing only (refused on eks): path of the kubeconfig file of the cluster.",
        _kubeconfig_path,
    ),
    ConfigKey(
        "kubeContext",
        "kube_context",
        "string",
        "",
        "target existing only (refused on eks): context of that kubeconfig to use; empty uses its current-context.",
        _kube_context,
    ),
    # network + cluster
    ConfigKey(
        "availabilityZoneCount",
        "availability_zone_count",
        "integer",
        2,
        "Availability zones to spread subnets, nodes and EFS mount targets over (2-4).",
        _between(2, 4),
    ),
    ConfigKey(
        "kubernetesVersion",
        "kubernetes_version",
        "string",
        versions.DEFAULT_KUBERNETES_VERSION,
        "EKS Kubernetes version (target existing: the cluster's version, which the manifests are checked against).",
        _kubernetes_version,
    ),
    ConfigKey(
        "nodeInstanceType",
        "node_instance_type",
        "string",
        "c5.4xlarge",
        "EC2 instance type of the training nodes (x86-64); a G/P type with NVIDIA GPUs makes a GPU stack.",
        _worker_instance_type,
    ),
    # worker capacity (infra/config/capacity.py): Karpenter brings worker nodes up for a run only
    ConfigKey(
        "nodeInstanceTypes",
        "node_instance_types",
        "array",
        [],
        "Instance types the worker pool may launch, all of nodeInstanceType's shape (vCPUs, memory, GPUs and "
        "GPU model); empty: every type of that shape in the instance catalog.",
        _worker_instance_types,
    ),
    ConfigKey(
        "capacityType",
        "capacity_type",
        "string",
        "on-demand",
        "Capacity of the worker nodes: on-demand or spot (several types of one shape, every zone of the stack, "
        "price-capacity-optimized). Everything else runs on the on-demand system nodes.",
        _one_of(("on-demand", "spot")),
    ),
    ConfigKey(
        "nodeMaxCount",
        "node_max_count",
        "integer",
        4,
        "Most worker nodes at once (the worker pool's limit); there are none while no run needs them.",
        _between(1, 100),
    ),
    ConfigKey(
        "systemNodeInstanceType",
        "system_node_instance_type",
        "string",
        "m5.large",
        "CPU instance type of the on-demand system node group (CoreDNS, metrics-server, Karpenter, the "
        "controller, the rendezvous store, the CSI controller, the data-prep/test/export Jobs): never a worker node.",
        _system_instance_type,
    ),
    ConfigKey(
        "systemNodeCount",
        "system_node_count",
        "integer",
        2,
        "Nodes of the system node group (fixed size, on-demand).",
        _between(1, 10),
    ),
    ConfigKey(
        "nodeDiskGiB", "node_disk_gib", "integer", 100, "Root volume size of each node in GiB.", _between(20, 16384)
    ),
    ConfigKey(
        "apiAllowedCidrs",
        "api_allowed_cidrs",
        "array",
        ["0.0.0.0/0"],
        "IPv4 CIDR blocks allowed to reach the public Kubernetes API endpoint (private access is always on); at most "
        f"{EKS_PUBLIC_ACCESS_CIDRS_MAX}, EKS's limit.",
        _cidrs,
    ),
    ConfigKey(
        "clusterAdminArns",
        "cluster_admin_arns",
        "array",
        [],
        "Extra IAM role/user ARNs given cluster-admin through EKS access entries (the deployer always is).",
        _principal_arns,
    ),
    ConfigKey(
        "logRetentionDays",
        "log_retention_days",
        "integer",
        30,
        "Days the EKS control-plane log group keeps its logs (the stack creates the group, so destroy removes it).",
        _log_retention,
    ),
    # storage + names others refer to
    ConfigKey(
        "namespace",
        "namespace",
        "string",
        "training",
        "Namespace of the training workloads, the PVC and the rendezvous store.",
        _workload_namespace,
    ),
    ConfigKey(
        "storageClassName",
        "storage_class_name",
        "string",
        "efs-sc",
        "StorageClass of the shared volume: the EFS class the stack creates (eks), or an existing class of "
        "the cluster (existing), e.g. kind's `standard`.",
        _dns_label(253),
    ),
    ConfigKey(
        "storageAccessMode",
        "storage_access_mode",
        "string",
        READ_WRITE_MANY,
        "Access mode of the shared volume: ReadWriteMany (EFS, NFS; workers on many nodes) or ReadWriteOnce "
        "(target existing only: one node's disk, so every worker runs on that node).",
        _one_of(ACCESS_MODES),
    ),
    ConfigKey(
        "persistentVolumeName",
        "persistent_volume_name",
        "string",
        "efs-pv",
        "PersistentVolume of the EFS file system.",
        _dns_label(253),
    ),
    ConfigKey(
        "pvcName",
        "pvc_name",
        "string",
        "efs-pvc",
        "ReadWriteMany PersistentVolumeClaim the jobs mount.",
        _dns_label(253),
    ),
    ConfigKey(
        "retainData",
        "retain_data",
        "boolean",
        False,
        "Keep the EFS file system and the ECR repository (with their data) when the stack is destroyed.",
        None,
    ),
    # workloads
    ConfigKey(
        "imageUri",
        "image_uri",
        "string",
        "",
        "Prebuilt training image to use; empty builds images/ and pushes it to the stack's ECR repository "
        "(target eks only; existing needs an image the cluster can pull, or one loaded into kind).",
        _image_uri,
    ),
    ConfigKey(
        "imageVariant",
        "image_variant",
        "string",
        "",
        "torch build of the image: cpu or cuda; empty picks it from nodeInstanceType (cuda on G/P types). "
        "Must be set (and match the nodes) when imageUri is given on a GPU stack.",
        _one_of(IMAGE_VARIANTS),
    ),
    ConfigKey(
        "dataSource",
        "data_source",
        "string",
        CIFAR10_URL,
        "Where data-prep gets CIFAR-10: https:// or s3:// tarball URL, or 'synthetic[:N]' for generated data.",
        _data_source,
    ),
    ConfigKey(
        "dataMd5",
        "data_md5",
        "string",
        CIFAR10_MD5,
        "Expected MD5 of the dataSource tarball; empty skips the check (the official tarball's is the default).",
        _md5,
    ),
    ConfigKey(
        "runId",
        "run_id",
        "string",
        "run-1",
        "Training run id: part of the Job/ElasticJob names and of the run directory on EFS. A new id is a new run.",
        _dns_label(40),
    ),
    ConfigKey("workers", "workers", "integer", 2, "Training workers (pods) to start.", _between(1, 100)),
    ConfigKey(
        "workersPerNode",
        "workers_per_node",
        "integer",
        1,
        "Most training workers on one node: 1 spreads them one per node; with ReadWriteOnce storage it must "
        "be at least maxWorkers (all workers share the volume's node).",
        _between(1, 100),
    ),
    ConfigKey(
        "minWorkers",
        "min_workers",
        "integer",
        1,
        "Fewest workers the elastic job keeps training with.",
        _between(1, 100),
    ),
    ConfigKey("maxWorkers", "max_workers", "integer", 2, "Most workers the elastic job admits.", _between(1, 100)),
    ConfigKey(
        "maxRestarts",
        "max_restarts",
        "integer",
        3,
        "Times each worker's torchrun may restart its workers (each re-formation after a lost or evicted "
        "peer uses one): size it for the evictions a run should survive.",
        _between(0, 100),
    ),
    ConfigKey(
        "workerGraceSeconds",
        "worker_grace_seconds",
        "integer",
        45,
        "Seconds a worker has between SIGTERM and SIGKILL (its terminationGracePeriodSeconds, and the worker "
        "pool's node grace period); with capacityType spot at most 90, inside the 2-minute notice.",
        _between(45, 3600),
    ),
    ConfigKey(
        "checkpointEverySeconds",
        "checkpoint_every_seconds",
        "integer",
        30,
        "Seconds between time checkpoints within an epoch (jobs.training.train --checkpoint-every-seconds): the most "
        "work a preemption can cost.",
        _between(10, 86400),
    ),
    ConfigKey("epochs", "epochs", "integer", 10, "Training epochs.", _between(1, 1000)),
    ConfigKey("batchSize", "batch_size", "integer", 128, "Mini-batch size per worker.", _between(1, 65536)),
    ConfigKey(
        "precision",
        "precision",
        "string",
        "auto",
        "Arithmetic of the training workers (jobs.training.train --precision): auto (bf16 autocast on a GPU "
        "with bf16 units, TF32 on an older GPU, fp32 on the CPU), fp32, tf32 or bf16 (these two need a GPU "
        "stack).",
        _one_of(PRECISIONS),
    ),
    # A string key: the Pulumi CLI has no number type, and a string key still takes `minAccuracy: 0.3`
    # in a stack file and `pulumi config set minAccuracy 0.3` (the CLI passes both as the text "0.3").
    ConfigKey(
        "minAccuracy",
        "min_accuracy",
        "string",
        "0.7",
        "Test accuracy, a decimal from 0 to 1, below which the test Job, and so `pulumi up`, fails.",
        _fraction,
        parse=parse_decimal,
    ),
    ConfigKey(
        "workerCpu",
        "worker_cpu",
        "string",
        "15",
        "CPU request and limit of each training worker; workersPerNode of them must fit one node of "
        "nodeInstanceType (checked before anything is created).",
        _quantity,
    ),
    ConfigKey(
        "workerMemory",
        "worker_memory",
        "string",
        "24Gi",
        "Memory request and limit of each training worker; workersPerNode of them must fit one node of "
        "nodeInstanceType (checked before anything is created); at least 1Gi.",
        _worker_memory,
    ),
    ConfigKey(
        "jobTimeoutMinutes",
        "job_timeout_minutes",
        "integer",
        120,
        "Deadline of each workload (data-prep, training, test) in minutes.",
        _between(5, 10080),
    ),
    # A string key for the same reason as minAccuracy; "" (the default) sets no ceiling.
    ConfigKey(
        "maxRunCostUsd",
        "max_run_cost_usd",
        "string",
        "",
        "Ceiling in US dollars on the worker-node cost of a training run (node-hours x price, docs/costs.md): "
        "the wait stops the run once its running estimate passes it. Empty: no ceiling.",
        _positive_or_none,
        parse=parse_optional_usd,
    ),
    # Your own training (infra/config/own_training.py); empty is today's CIFAR-10 job.
    ConfigKey(
        "trainingCommand",
        "training_command",
        "array",
        [],
        "What every training worker runs under torchrun (jobs.elastic.agent), as a list: "
        '["python", "-m", "mytrain", "--steps", "5"] or ["python", "train.py", ...]. Empty: the CIFAR-10 job.',
        own_training.training_command_rule,
        parse=own_training.parse_training_command,
    ),
    ConfigKey(
        "imageContext",
        "image_context",
        "string",
        "",
        "A folder of the project with a Dockerfile (typically FROM the project's image, passed as the build "
        "argument ELASTIC_TRAINING_IMAGE): the stack builds it and the workloads run it (target eks only). "
        "Empty: the project's image.",
        own_training.image_context_rule,
    ),
    ConfigKey(
        "dataPrepCommand",
        "data_prep_command",
        "array",
        [],
        "The data-prep Job's command, as a list; it writes to $ELASTIC_TRAINING_DATA_DIR. Empty: the "
        "CIFAR-10 preparation (dataSource).",
        own_training.command_rule,
        parse=own_training.parse_command,
    ),
    ConfigKey(
        "testCommand",
        "test_command",
        "array",
        [],
        "The test Job's command, as a list; it writes $ELASTIC_TRAINING_RUN_DIR/metrics.json, whose gateMetric "
        "must reach minGate. Empty: the CIFAR-10 evaluation.",
        own_training.command_rule,
        parse=own_training.parse_command,
    ),
    ConfigKey(
        "gateMetric",
        "gate_metric",
        "string",
        "accuracy",
        "The key of the run's metrics.json the test Job's gate reads.",
        own_training.gate_metric_rule,
    ),
    ConfigKey(
        "minGate",
        "min_gate",
        "string",
        "",
        "The least value of gateMetric that passes the gate (a decimal); below it the test Job, and so "
        "`pulumi up`, fails. Empty: minAccuracy's.",
        own_training.min_gate_rule,
        parse=own_training.parse_optional_decimal,
    ),
)

KEYS_BY_NAME = {key.name: key for key in CONFIG_KEYS}
