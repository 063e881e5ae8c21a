"""Stack configuration: every key, its type, default, description and rule, validated once.

`load_settings()` turns the raw stack config (what `pulumi config` holds) into a frozen
`Settings` before any resource is registered. A bad value raises `ConfigError`, whose text is
one line naming the key, the value and what is allowed; the program and `synth` print that
line and stop, with no traceback.

`CONFIG_KEYS` is the single list of project keys: `Pulumi.yaml`'s config schema and the
README's table are checked against it by the tests.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Callable, Mapping

from infra import gpu_instances, regions, versions

PROJECT = "elastic-training"

# Every pattern is applied with fullmatch: `$` alone also matches before a trailing newline, which
# a YAML block scalar (`runId: |`) leaves on the value.
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kubernetes quantities as users write them for CPU and memory ("15", "500m", "24Gi", "1.5").
QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
# family + generation + attributes, then size: c5.4xlarge, m6id.large, g5.12xlarge, p4d.24xlarge
INSTANCE_TYPE = re.compile(r"^(?P<family>[a-z]+)(?P<generation>[0-9]+)(?P<attributes>[a-z-]*)\.(?P<size>[0-9]*[a-z]+)$")
IAM_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[\w+=,.@/-]+$")
ECR_OR_OCI_IMAGE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[\w.-]+)?(@sha256:[0-9a-f]{64})?$")
# What CloudWatch Logs accepts as a retention (botocore 1.44.5, logs service model, shape `Days` of
# PutRetentionPolicy: "Possible values are: 1, 3, 5, ... 3653"; "never expire" is no value there).
CLOUDWATCH_LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
                                 2557, 2922, 3288, 3653)
MD5_HEX = re.compile(r"^[0-9a-f]{32}$")
DATA_URL = re.compile(r"^(https|s3)://[^/\s]+/\S+$")

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"


class ConfigError(ValueError):
    """A stack config value that breaks its rule. `str()` is the one line a user sees."""

    def __init__(self, key: str, value: Any, rule: str):
        self.key, self.value, self.rule = key, value, rule
        super().__init__(f"config {key}={_show(value)} is invalid: {rule}")


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


# --- parsing raw config strings into typed values -------------------------------------------

def _parse_int(raw: str) -> int:
    if not re.fullmatch(r"-?[0-9]+", raw.strip()):
        raise ValueError("must be a whole number")
    return int(raw)


def _parse_decimal(raw: str) -> float:
    # Plain decimal notation only: float() would also take "nan", "inf", "1e-1" and "0_5".
    if not re.fullmatch(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)", raw):
        raise ValueError("must be a decimal number such as 0.7")
    return float(raw)


def _parse_bool(raw: str) -> bool:
    # Exactly the two words the Pulumi CLI takes for a boolean key (ValidateConfigValue in
    # pulumi/pulumi sdk/go/common/workspace/project.go); a YAML True in a stack file arrives as "true".
    if raw in ("true", "false"):
        return raw == "true"
    raise ValueError("must be true or false")


def _parse_string_list(raw: str) -> list[str]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError('must be a JSON list of strings, e.g. ["203.0.113.0/24"]') from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError('must be a JSON list of strings, e.g. ["203.0.113.0/24"]')
    return value


# By the Pulumi.yaml type of the key: the Pulumi CLI knows string, integer, boolean, array (and
# object) and has no number type (upstream-facts.md, fact 21), so a fraction is a string key with
# its own parser (ConfigKey.parse).
PARSERS: dict[str, Callable[[str], Any]] = {
    "integer": _parse_int,
    "boolean": _parse_bool,
    "string": str,
    "array": _parse_string_list,
}


# --- rules on single values -----------------------------------------------------------------
# Each rule returns None when the value is fine, else the text of what is allowed.

def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def _fraction(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be between 0 and 1 (a fraction: 0.7 means 70 %)"


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
        return (f"must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending "
                f"with a letter or digit, at most {max_len} characters")
    return rule


# Namespaces the cluster already has, or that the stack creates for the controller: labelling one
# of them for the restricted Pod Security Standard would stop system pods, and two Namespace
# objects of one name would fight over it.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "elastic-job")


def _workload_namespace(v: str) -> str | None:
    if v in RESERVED_NAMESPACES:
        return f"must not be one of {', '.join(RESERVED_NAMESPACES)} (the stack creates and labels its own namespace)"
    return _dns_label()(v)


def _instance_type(v: str) -> str | None:
    match = INSTANCE_TYPE.fullmatch(v)
    if not match:
        return "must be an EC2 instance type such as c5.4xlarge (family, generation, size)"
    # Graviton types carry a 'g' attribute after the generation (c6g, m7gd, c6gn), except the
    # first generation, family 'a' (a1.large); the TorchElastic controller image is amd64-only.
    if "g" in match["attributes"] or match["family"] == "a":
        return "must be an x86-64 instance type: the TorchElastic controller image is amd64-only (Graviton 'g' types and a1 are not)"
    return None


def _worker_instance_type(v: str) -> str | None:
    problem = _instance_type(v)
    if problem:
        return problem
    # A G or P type must be one whose GPUs we know (infra/gpu_instances.py): the AMI type, the
    # device plugin, the workers' nvidia.com/gpu and --nproc_per_node all follow from that entry.
    if gpu_instances.is_gpu_family(v) and gpu_instances.nvidia_instance(v) is None:
        return ("is a G/P family type that is not an x86-64 type with whole NVIDIA GPUs in infra/gpu_instances.py "
                "(fractional-GPU and AMD-GPU types are not supported), e.g. g6.xlarge or g5.xlarge")
    return None


def _system_instance_type(v: str) -> str | None:
    problem = _instance_type(v)
    if problem:
        return problem
    if gpu_instances.is_gpu_family(v):
        return "must be a CPU instance type such as m5.large (the system nodes are there to keep GPUs free)"
    return None


IMAGE_VARIANTS = ("", "cpu", "cuda")
CPU, CUDA = "cpu", "cuda"


def _cidrs(v: list[str]) -> str | None:
    if not v:
        return "must list at least one CIDR block (e.g. your office range, or 0.0.0.0/0)"
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
    return None if not bad else f"{bad[0]!r} is not an IAM role or user ARN (arn:aws:iam::<12-digit account>:role/<name>)"


_MEMORY_UNITS_MIB = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024,
                     "k": 1000 / 1048576, "M": 1000**2 / 1048576, "G": 1000**3 / 1048576, "T": 1000**4 / 1048576}
# The least /dev/shm a GPU worker gets (infra/specs/workloads.py sizes it at half workerMemory):
# PyTorch's tutorials CI runs its NCCL jobs with `docker run --shm-size=2gb` because with less
# NCCL crashed in ncclShmOpen (pytorch/tutorials commit 0ba3e39d736a1f5d46da5728e564569f8cd3fe8c,
# .github/workflows/build-tutorials.yml).
NCCL_SHM_MIN_MIB = 2048


def memory_mib(quantity: str) -> float:
    """A memory quantity that passed _quantity, in MiB ("24Gi" -> 24576; a bare number is bytes).
    The millis suffix 'm' makes no sense for memory and counts as bytes/1000."""
    match = QUANTITY.fullmatch(quantity)
    number, unit = float(match[1]), match[3]
    if unit == "m":
        return number / 1000 / 1048576
    return number * _MEMORY_UNITS_MIB[unit] if unit else number / 1048576


def _quantity(v: str) -> str | None:
    match = QUANTITY.fullmatch(v)
    # A zero request and limit would leave the worker no CPU or memory at all.
    if match and float(match[1]) > 0:
        return None
    return "must be a Kubernetes quantity above zero such as 15, 500m, 24Gi or 512Mi"


def _image_uri(v: str) -> str | None:
    if v == "" or ECR_OR_OCI_IMAGE.fullmatch(v):
        return None
    return "must be empty (build images/ and push to ECR) or an image reference registry/repo[:tag][@sha256:<digest>]"


# jobs.prepare's --synthetic limit (jobs/prepare.py MAX_SYNTHETIC_PER_CLASS; infra does not import
# jobs, tests/jobs/test_prepare_source.py compares the two): a larger count would pass here and
# fail only in the data-prep Job, after the cluster was built.
MAX_SYNTHETIC_PER_CLASS = 5000


def _data_source(v: str) -> str | None:
    # A host and a path after the scheme; plain http:// is refused, since with an empty dataMd5
    # nothing else would notice a tampered download.
    if DATA_URL.fullmatch(v):
        return None
    synthetic = re.fullmatch(r"synthetic(?::([1-9][0-9]*))?", v)
    if synthetic and (synthetic[1] is None or int(synthetic[1]) <= MAX_SYNTHETIC_PER_CLASS):
        return None
    return ("must be an https:// or s3:// URL of a CIFAR-10 python tarball, 'synthetic' or 'synthetic:<images per class>' "
            f"with 1 to {MAX_SYNTHETIC_PER_CLASS} images per class")


def _md5(v: str) -> str | None:
    return None if v == "" or MD5_HEX.fullmatch(v) else "must be empty or 32 lowercase hex digits"


@dataclass(frozen=True)
class ConfigKey:
    name: str           # key in the project namespace, as in `pulumi config set <name>`
    field: str          # attribute on Settings
    type: str           # Pulumi.yaml schema type: integer, boolean, string, array
    default: Any        # as Pulumi.yaml declares it, of that type
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
    return None if v == "" or (v.strip() == v and "\n" not in v) else "must be empty (the current context) or a context name of the kubeconfig"


CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("target", "target", "string", EKS,
              "Where the stack runs: `eks` creates the AWS platform (VPC, EKS, EFS, ECR); `existing` deploys into "
              "the cluster of `kubeconfig`/`kubeContext` and creates no AWS resources.", _one_of(TARGETS)),
    ConfigKey("kubeconfig", "kubeconfig", "string", "~/.kube/config",
              "target existing: path of the kubeconfig file of the cluster.", _kubeconfig_path),
    ConfigKey("kubeContext", "kube_context", "string", "",
              "target existing: context of that kubeconfig to use; empty uses its current-context.", _kube_context),
    # network + cluster
    ConfigKey("availabilityZoneCount", "availability_zone_count", "integer", 2,
              "Availability zones to spread subnets, nodes and EFS mount targets over (2-4).", _between(2, 4)),
    ConfigKey("kubernetesVersion", "kubernetes_version", "string", versions.DEFAULT_KUBERNETES_VERSION,
              "EKS Kubernetes version (target existing: the cluster's version, which the manifests are checked against).",
              _one_of(versions.SUPPORTED_KUBERNETES_VERSIONS)),
    ConfigKey("nodeInstanceType", "node_instance_type", "string", "c5.4xlarge",
              "EC2 instance type of the training nodes (x86-64); a G/P type with NVIDIA GPUs makes a GPU stack.",
              _worker_instance_type),
    ConfigKey("nodeCount", "node_count", "integer", 2, "Desired number of nodes.", _between(1, 100)),
    ConfigKey("nodeMinCount", "node_min_count", "integer", 1, "Minimum nodes of the node group.", _between(0, 100)),
    ConfigKey("nodeMaxCount", "node_max_count", "integer", 4, "Maximum nodes of the node group.", _between(1, 100)),
    ConfigKey("systemNodeInstanceType", "system_node_instance_type", "string", "m5.large",
              "GPU stacks only: CPU instance type of the untainted system node group (CoreDNS, metrics-server, "
              "controller, etcd, CSI controller, the small Jobs), so nothing but training takes GPU nodes.",
              _system_instance_type),
    ConfigKey("systemNodeCount", "system_node_count", "integer", 2,
              "GPU stacks only: nodes of the system node group (fixed size).", _between(1, 10)),
    ConfigKey("nodeDiskGiB", "node_disk_gib", "integer", 100, "Root volume size of each node in GiB.", _between(20, 16384)),
    ConfigKey("apiAllowedCidrs", "api_allowed_cidrs", "array", ["0.0.0.0/0"],
              "IPv4 CIDR blocks allowed to reach the public Kubernetes API endpoint (private access is always on).", _cidrs),
    ConfigKey("clusterAdminArns", "cluster_admin_arns", "array", [],
              "Extra IAM role/user ARNs given cluster-admin through EKS access entries (the deployer always is).",
              _principal_arns),
    ConfigKey("logRetentionDays", "log_retention_days", "integer", 30,
              "Days the EKS control-plane log group keeps its logs (the stack creates the group, so destroy removes it).",
              _log_retention),
    # storage + names others refer to
    ConfigKey("namespace", "namespace", "string", "training",
              "Namespace of the training workloads, the PVC and etcd.", _workload_namespace),
    ConfigKey("storageClassName", "storage_class_name", "string", "efs-sc",
              "StorageClass of the shared volume: the EFS class the stack creates (eks), or an existing class of "
              "the cluster (existing), e.g. kind's `standard`.", _dns_label(253)),
    ConfigKey("storageAccessMode", "storage_access_mode", "string", READ_WRITE_MANY,
              "Access mode of the shared volume: ReadWriteMany (EFS, NFS; workers on many nodes) or ReadWriteOnce "
              "(target existing only: one node's disk, so every worker runs on that node).", _one_of(ACCESS_MODES)),
    ConfigKey("persistentVolumeName", "persistent_volume_name", "string", "efs-pv", "PersistentVolume of the EFS file system.", _dns_label(253)),
    ConfigKey("pvcName", "pvc_name", "string", "efs-pvc", "ReadWriteMany PersistentVolumeClaim the jobs mount.", _dns_label(253)),
    ConfigKey("retainData", "retain_data", "boolean", False,
              "Keep the EFS file system and the ECR repository (with their data) when the stack is destroyed.", None),
    # workloads
    ConfigKey("imageUri", "image_uri", "string", "",
              "Prebuilt training image to use; empty builds images/ and pushes it to the stack's ECR repository "
              "(target eks only; existing needs an image the cluster can pull, or one loaded into kind).", _image_uri),
    ConfigKey("imageVariant", "image_variant", "string", "",
              "torch build of the image: cpu or cuda; empty picks it from nodeInstanceType (cuda on G/P types). "
              "Must be set (and match the nodes) when imageUri is given on a GPU stack.", _one_of(IMAGE_VARIANTS)),
    ConfigKey("dataSource", "data_source", "string", CIFAR10_URL,
              "Where data-prep gets CIFAR-10: https:// or s3:// tarball URL, or 'synthetic[:N]' for generated data.", _data_source),
    ConfigKey("dataMd5", "data_md5", "string", CIFAR10_MD5,
              "Expected MD5 of the dataSource tarball; empty skips the check (the official tarball's is the default).", _md5),
    ConfigKey("runId", "run_id", "string", "run-1",
              "Training run id: part of the Job/ElasticJob names and of the run directory on EFS. A new id is a new run.",
              _dns_label(40)),
    ConfigKey("workers", "workers", "integer", 2, "Training workers (pods) to start.", _between(1, 100)),
    ConfigKey("workersPerNode", "workers_per_node", "integer", 1,
              "Most training workers on one node: 1 spreads them one per node; with ReadWriteOnce storage it must "
              "be at least maxWorkers (all workers share the volume's node).", _between(1, 100)),
    ConfigKey("minWorkers", "min_workers", "integer", 1, "Fewest workers the elastic job keeps training with.", _between(1, 100)),
    ConfigKey("maxWorkers", "max_workers", "integer", 2, "Most workers the elastic job admits.", _between(1, 100)),
    ConfigKey("maxRestarts", "max_restarts", "integer", 3,
              "Times each worker's torchrun may restart its workers (each re-formation after a lost or evicted "
              "peer uses one): size it for the evictions a run should survive.", _between(0, 100)),
    ConfigKey("epochs", "epochs", "integer", 10, "Training epochs.", _between(1, 1000)),
    ConfigKey("batchSize", "batch_size", "integer", 128, "Mini-batch size per worker.", _between(1, 65536)),
    # A string key: the Pulumi CLI has no number type, and a string key still takes `minAccuracy: 0.3`
    # in a stack file and `pulumi config set minAccuracy 0.3` (the CLI passes both as the text "0.3").
    ConfigKey("minAccuracy", "min_accuracy", "string", "0.7",
              "Test accuracy, a decimal from 0 to 1, below which the test Job, and so `pulumi up`, fails.",
              _fraction, parse=_parse_decimal),
    ConfigKey("workerCpu", "worker_cpu", "string", "15", "CPU request and limit of each training worker.", _quantity),
    ConfigKey("workerMemory", "worker_memory", "string", "24Gi", "Memory request and limit of each training worker.", _quantity),
    ConfigKey("jobTimeoutMinutes", "job_timeout_minutes", "integer", 120,
              "Deadline of each workload (data-prep, training, test) in minutes.", _between(5, 10080)),
)

KEYS_BY_NAME = {key.name: key for key in CONFIG_KEYS}


@dataclass(frozen=True)
class Settings:
    """Validated, typed stack settings: what components receive instead of raw config."""

    project: str
    stack: str
    region: str  # "" for target existing without aws:region: nothing there talks to AWS
    target: str
    kubeconfig: str
    kube_context: str
    availability_zone_count: int
    kubernetes_version: str
    node_instance_type: str
    node_count: int
    node_min_count: int
    node_max_count: int
    system_node_instance_type: str
    system_node_count: int
    node_disk_gib: int
    api_allowed_cidrs: tuple[str, ...]
    cluster_admin_arns: tuple[str, ...]
    log_retention_days: int
    namespace: str
    storage_class_name: str
    storage_access_mode: str
    persistent_volume_name: str
    pvc_name: str
    retain_data: bool
    image_uri: str
    image_variant: str
    data_source: str
    data_md5: str
    run_id: str
    workers: int
    workers_per_node: int
    min_workers: int
    max_workers: int
    max_restarts: int
    epochs: int
    batch_size: int
    min_accuracy: float
    worker_cpu: str
    worker_memory: str
    job_timeout_minutes: int
    warnings: tuple[str, ...] = ()


def load_settings(raw: Mapping[str, str], stack: str, today: date | None = None) -> Settings:
    """Validate `raw` (full keys such as "elastic-training:nodeCount" -> string) into Settings.

    Raises ConfigError on the first problem, in CONFIG_KEYS order, then relations. `today` (UTC,
    default: the real date) decides the Kubernetes version's EKS support phase.
    """
    _reject_unknown_keys(raw)
    values: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        full = f"{PROJECT}:{key.name}"
        if full not in raw:
            values[key.field] = key.default_value
            continue
        text = raw[full]
        try:
            value = key.parse_text(text)
        except ValueError as err:
            raise ConfigError(full, text, str(err)) from None
        problem = key.rule(value) if key.rule else None
        if problem:
            raise ConfigError(full, value, problem)
        values[key.field] = value

    region = raw.get("aws:region", "")
    # target existing creates nothing in AWS and calls no AWS API, so it needs no region; one that
    # is set anyway is still checked (a typo should not wait until someone switches to eks).
    if not region and values["target"] == EKS:
        raise ConfigError("aws:region", region, "must be set to an AWS region of the commercial aws partition "
                                                "such as us-west-2 (pulumi config set aws:region us-west-2)")
    # Regions of the commercial `aws` partition only, as botocore's partition data lists them.
    problem = regions.region_problem(region) if region else None
    if problem:
        raise ConfigError("aws:region", region, problem)

    _check_relations(values)
    if values["target"] == EXISTING:
        _check_existing(values)
    warnings = []
    if values["target"] == EKS:
        support_warning = _kubernetes_support(values["kubernetes_version"],
                                              today if today is not None else datetime.now(timezone.utc).date())
        if support_warning:
            warnings.append(support_warning)
    if values["target"] == EKS and "0.0.0.0/0" in values["api_allowed_cidrs"]:
        warnings.append(
            f"config {PROJECT}:apiAllowedCidrs includes 0.0.0.0/0: the Kubernetes API endpoint is reachable "
            "from the whole internet (still authenticated by IAM); list your own ranges to close it")
    for field in ("api_allowed_cidrs", "cluster_admin_arns"):
        values[field] = tuple(values[field])
    return Settings(project=PROJECT, stack=stack, region=region, warnings=tuple(warnings), **values)


def _reject_unknown_keys(raw: Mapping[str, str]) -> None:
    prefix = f"{PROJECT}:"
    for full in sorted(raw):
        if full.startswith(prefix) and full[len(prefix):] not in KEYS_BY_NAME:
            name = full[len(prefix):]
            close = difflib.get_close_matches(name, KEYS_BY_NAME, n=1)
            hint = f"did you mean {close[0]}?" if close else f"known keys: {', '.join(KEYS_BY_NAME)}"
            raise ConfigError(full, raw[full], f"unknown key ({hint})")


def _check_relations(v: dict[str, Any]) -> None:
    """Rules that tie keys together; the message names the key whose value breaks them."""
    p = PROJECT
    if not v["node_min_count"] <= v["node_count"]:
        raise ConfigError(f"{p}:nodeMinCount", v["node_min_count"], f"must be <= nodeCount ({v['node_count']})")
    if not v["node_count"] <= v["node_max_count"]:
        raise ConfigError(f"{p}:nodeCount", v["node_count"], f"must be <= nodeMaxCount ({v['node_max_count']})")
    if not v["min_workers"] <= v["workers"]:
        raise ConfigError(f"{p}:minWorkers", v["min_workers"], f"must be <= workers ({v['workers']})")
    if not v["workers"] <= v["max_workers"]:
        raise ConfigError(f"{p}:workers", v["workers"], f"must be <= maxWorkers ({v['max_workers']})")
    # At most workersPerNode workers per node and no cluster autoscaler: more workers than the
    # nodes hold would never schedule. (Node counts are the stack's own on eks only.)
    per_node = v["workers_per_node"]
    if v["target"] == EKS and not v["workers"] <= v["node_count"] * per_node:
        raise ConfigError(f"{p}:workers", v["workers"], f"must be <= nodeCount ({v['node_count']})"
                          + (": each worker takes a whole node" if per_node == 1 else f" x workersPerNode ({per_node})"))
    if v["target"] == EKS and not v["max_workers"] <= v["node_max_count"] * per_node:
        raise ConfigError(f"{p}:maxWorkers", v["max_workers"], f"must be <= nodeMaxCount ({v['node_max_count']})"
                          + (": each worker takes a whole node" if per_node == 1 else f" x workersPerNode ({per_node})"))
    if v["target"] == EKS and v["storage_access_mode"] != READ_WRITE_MANY:
        raise ConfigError(f"{p}:storageAccessMode", v["storage_access_mode"],
                          f"must be {READ_WRITE_MANY} with target eks (the EFS volume is shared by nodes in every zone)")
    # A ReadWriteOnce volume is attached to one node at a time: every worker must fit on that node,
    # including the most the elastic job admits.
    if v["storage_access_mode"] == READ_WRITE_ONCE and per_node < v["max_workers"]:
        raise ConfigError(f"{p}:workersPerNode", per_node,
                          f"must be >= maxWorkers ({v['max_workers']}) with storageAccessMode {READ_WRITE_ONCE}: "
                          "the volume is on one node, so every worker must fit there")
    _check_image_variant(v)
    _check_gpu_worker_fits(v)
    if v["data_source"].startswith("synthetic") and v["data_md5"] not in ("", CIFAR10_MD5):
        raise ConfigError(f"{p}:dataMd5", v["data_md5"], "must be empty when dataSource is synthetic (generated data has no fixed checksum)")


def _check_existing(v: dict[str, Any]) -> None:
    """Rules of target existing: nothing is built or pushed, and nothing in AWS is reachable."""
    p = PROJECT
    if not v["image_uri"]:
        raise ConfigError(f"{p}:imageUri", v["image_uri"],
                          "must be set with target existing (an image the cluster can pull, or one loaded with "
                          "`kind load docker-image`): only target eks builds images/ and pushes it to ECR")
    if not pins_the_image(v["image_uri"]):
        raise ConfigError(f"{p}:imageUri", v["image_uri"],
                          "must name a tag other than latest, or a digest, with target existing: Kubernetes pulls "
                          "a :latest or untagged image on every start (pull policy Always), so an image loaded "
                          "into kind would never be used")
    if v["data_source"].startswith("s3://"):
        raise ConfigError(f"{p}:dataSource", v["data_source"],
                          "must not be an s3:// URL with target existing (data-prep reads S3 through an EKS IAM "
                          "role); use an https:// URL or synthetic")


def pins_the_image(image: str) -> bool:
    """Whether a reference names a digest or a tag other than latest (the last path part's `:tag`;
    a `:port` belongs to the registry, before the first `/`)."""
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    return ":" in last and last.rsplit(":", 1)[1] != "latest"


def image_pull_policy(image: str) -> str:
    """The pull policy Kubernetes itself would choose for this reference, written out: IfNotPresent
    for a digest or a tag other than latest, Always for :latest or no tag (Kubernetes docs,
    concepts/containers/images "Image pull policy": "if you omit the imagePullPolicy field, and you
    specify the digest ..., or the tag ... is not :latest, IfNotPresent"). An image loaded into kind
    needs IfNotPresent or Never (kind quick start, "Loading an Image Into Your Cluster")."""
    return "IfNotPresent" if pins_the_image(image) else "Always"


def _check_image_variant(v: dict[str, Any]) -> None:
    """Refuse an image that cannot use the nodes (image_variant() resolves an empty imageVariant):
    a CPU torch on GPU nodes would train on the CPUs beside idle GPUs, a CUDA build on CPU nodes is
    gigabytes of unused libraries. A prebuilt imageUri cannot be inspected offline, so on a GPU
    stack its variant must be declared (imageVariant=cuda): the user states what it holds."""
    key = f"{PROJECT}:imageVariant"
    wanted = CUDA if gpu_instances.nvidia_instance(v["node_instance_type"]) else CPU
    nodes = f"nodeInstanceType {v['node_instance_type']} has {'NVIDIA GPUs' if wanted == CUDA else 'no GPUs'}"
    if v["image_variant"] == "" and v["image_uri"] and wanted == CUDA:
        raise ConfigError(key, "", f"must be cuda when imageUri is given on a GPU stack ({nodes}): "
                                   "declare that the image holds a CUDA build of torch")
    if v["image_variant"] not in ("", wanted):
        raise ConfigError(key, v["image_variant"], f"must be {wanted} or empty: {nodes}")


def image_variant(settings: Settings) -> str:
    """The torch build the image holds or is built with: cuda on NVIDIA nodes, else cpu (an empty
    imageVariant follows the nodes; a set one was checked to match them)."""
    return CUDA if gpu_instances.nvidia_instance(settings.node_instance_type) else CPU


def _check_gpu_worker_fits(v: dict[str, Any]) -> None:
    """On GPU nodes, where we know the node (infra/gpu_instances.py): the worker must fit on one,
    and leave /dev/shm room for NCCL. (Allocatable is less than the instance's memory; the kubelet
    tells the rest by leaving the pod Pending.)"""
    instance = gpu_instances.nvidia_instance(v["node_instance_type"])
    if instance is None:
        return
    if v["workers_per_node"] != 1:
        raise ConfigError(f"{PROJECT}:workersPerNode", v["workers_per_node"],
                          "must be 1 on GPU nodes: each worker takes every GPU of its node")
    memory = memory_mib(v["worker_memory"])
    if memory >= instance.memory_mib:
        raise ConfigError(f"{PROJECT}:workerMemory", v["worker_memory"],
                          f"must be below the {instance.memory_mib} MiB of one {v['node_instance_type']} node")
    if memory / 2 < NCCL_SHM_MIN_MIB:
        raise ConfigError(f"{PROJECT}:workerMemory", v["worker_memory"],
                          f"must be at least {2 * NCCL_SHM_MIN_MIB}Mi on GPU nodes: half of it is /dev/shm, "
                          f"which NCCL needs {NCCL_SHM_MIN_MIB}Mi of")
    cpu = v["worker_cpu"]
    cpus = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(QUANTITY.fullmatch(cpu)[1])
    if cpus >= instance.vcpus:
        raise ConfigError(f"{PROJECT}:workerCpu", cpu, f"must be below the {instance.vcpus} vCPUs of one "
                                                       f"{v['node_instance_type']} node")


def gpus_per_node(settings: Settings) -> int:
    """GPUs of one training node (0 on CPU stacks): each worker pod takes them all."""
    instance = gpu_instances.nvidia_instance(settings.node_instance_type)
    return instance.gpus if instance else 0


def is_gpu_stack(settings: Settings) -> bool:
    return gpus_per_node(settings) > 0


def _kubernetes_support(version: str, today: date) -> str | None:
    """Refuse a version past EKS extended support on `today`; a warning when it is in extended support."""
    key = f"{PROJECT}:kubernetesVersion"
    support = versions.EKS_SUPPORT[version]
    phase = versions.eks_support_phase(version, today)
    in_standard = [v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(v, today) == versions.STANDARD]
    if phase == versions.ENDED:
        usable = [v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(v, today) != versions.ENDED]
        raise ConfigError(key, version, f"EKS extended support for Kubernetes {version} ended on "
                                        f"{support.end_of_extended.isoformat()} (EKS creates no such cluster); "
                                        f"must be one of {', '.join(usable) or 'none (infra/versions.py needs a newer version)'}")
    if phase == versions.EXTENDED:
        return (f"config {key}={version!r} is in EKS extended support since {support.end_of_standard.isoformat()}: "
                f"the control plane costs {versions.EKS_EXTENDED_PRICE_PER_HOUR}/hour instead of "
                f"{versions.EKS_STANDARD_PRICE_PER_HOUR}/hour, and EKS upgrades it on its own from "
                f"{support.end_of_extended.isoformat()}; versions in standard support: {', '.join(in_standard) or 'none'}")
    return None


def data_md5_for(settings: Settings) -> str:
    """The checksum data-prep verifies: generated data has none; a mirror of the official
    tarball (https or s3) has the official one, which is the default."""
    return "" if settings.data_source.startswith("synthetic") else settings.data_md5
