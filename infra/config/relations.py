"""Rules that tie config keys together, checked after every key passed its own rule.

Each raises ConfigError naming the key whose value breaks the rule, and what would be allowed.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from infra import versions
from infra.aws import gpu_instances
from infra.config.capacity import check_capacity
from infra.config.epoch_time import epochs_warning
from infra.config import own_training
from infra.config.errors import ConfigError
from infra.config.images import pins_the_image
from infra.config.node_fit import check_side_jobs_fit, check_worker_fits
from infra.config.keys import (
    CIFAR10_MD5,
    CPU,
    CUDA,
    EKS,
    KEYS_BY_NAME,
    NCCL_SHM_MIN_MIB,
    PROJECT,
    READ_WRITE_MANY,
    READ_WRITE_ONCE,
)
from infra.config.parsers import memory_mib


def check_relations(v: dict[str, Any]) -> list[str]:
    """Rules that tie keys together; the message names the key whose value breaks them. Returns the
    warnings of rules that could not be checked."""
    p = PROJECT
    if not v["min_workers"] <= v["workers"]:
        raise ConfigError(f"{p}:minWorkers", v["min_workers"], f"must be <= workers ({v['workers']})")
    if not v["workers"] <= v["max_workers"]:
        raise ConfigError(f"{p}:workers", v["workers"], f"must be <= maxWorkers ({v['max_workers']})")
    # At most workersPerNode workers per node, and the worker pool launches at most nodeMaxCount
    # nodes: more workers than that would never schedule. (The pool is the stack's own on eks only.)
    per_node = v["workers_per_node"]
    if v["target"] == EKS and not v["min_workers"] <= v["node_max_count"] * per_node:
        raise ConfigError(
            f"{p}:minWorkers",
            v["min_workers"],
            f"must be <= nodeMaxCount ({v['node_max_count']})"
            + (": each worker takes a whole node" if per_node == 1 else f" x workersPerNode ({per_node})")
            + ", the most the worker pool's limits allow",
        )
    if v["target"] == EKS and not v["max_workers"] <= v["node_max_count"] * per_node:
        raise ConfigError(
            f"{p}:maxWorkers",
            v["max_workers"],
            f"must be <= nodeMaxCount ({v['node_max_count']})"
            + (": each worker takes a whole node" if per_node == 1 else f" x workersPerNode ({per_node})"),
        )
    if v["target"] == EKS and v["storage_access_mode"] != READ_WRITE_MANY:
        raise ConfigError(
            f"{p}:storageAccessMode",
            v["storage_access_mode"],
            f"must be {READ_WRITE_MANY} with target eks (the EFS volume is shared by nodes in every zone)",
        )
    # A ReadWriteOnce volume is attached to one node at a time: every worker must fit on that node,
    # including the most the elastic job admits.
    if v["storage_access_mode"] == READ_WRITE_ONCE and per_node < v["max_workers"]:
        raise ConfigError(
            f"{p}:workersPerNode",
            per_node,
            f"must be >= maxWorkers ({v['max_workers']}) with storageAccessMode {READ_WRITE_ONCE}: "
            "the volume is on one node, so every worker must fit there",
        )
    if v["target"] == EKS:
        _check_existing_only_keys(v)
    _check_image_variant(v)
    own_training.check_own_training(v, p, EKS)
    _check_eks_image_by_digest(v)
    _check_gpu_worker_fits(v)
    _check_precision(v)
    check_capacity(v)
    warnings = []
    # The nodes are the stack's own on eks; a GPU type is the node a GPU worker needs on any target.
    if v["target"] == EKS or gpu_instances.nvidia_instance(v["node_instance_type"]):
        fit_warning = check_worker_fits(v)
        if fit_warning:
            warnings.append(fit_warning)
    if v["target"] == EKS:
        check_side_jobs_fit(v)
    too_long = epochs_warning(v)
    if too_long:
        warnings.append(too_long)
    if v["data_source"].startswith("synthetic") and v["data_md5"] not in ("", CIFAR10_MD5):
        raise ConfigError(
            f"{p}:dataMd5",
            v["data_md5"],
            "must be empty when dataSource is synthetic (generated data has no fixed checksum)",
        )
    return warnings


def _check_eks_image_by_digest(v: dict[str, Any]) -> None:
    """On eks no pod runs an image by tag (README, Security): the built image is pinned by its
    digest, so a prebuilt imageUri must be too. A tag can be moved to other contents, and a node
    that pulls later runs whatever it names then. (Target existing allows a tag: an image loaded
    into kind has no registry digest.)"""
    if v["target"] == EKS and v["image_uri"] and "@sha256:" not in v["image_uri"]:
        raise ConfigError(
            f"{PROJECT}:imageUri",
            v["image_uri"],
            "must be pinned by digest with target eks (registry/repo@sha256:<64 hex digits>): no pod "
            "runs an image by tag; `docker buildx imagetools inspect <image>` prints the digest",
        )


def check_existing(v: dict[str, Any]) -> None:
    """Rules of target existing: nothing is built or pushed, and nothing in AWS is reachable."""
    p = PROJECT
    if not v["image_uri"]:
        raise ConfigError(
            f"{p}:imageUri",
            v["image_uri"],
            "must be set with target existing (an image the cluster can pull, or one loaded with "
            "`kind load docker-image`): only target eks builds images/ and pushes it to ECR",
        )
    if not pins_the_image(v["image_uri"]):
        raise ConfigError(
            f"{p}:imageUri",
            v["image_uri"],
            "must name a tag other than latest, or a digest, with target existing: Kubernetes pulls "
            "a :latest or untagged image on every start (pull policy Always), so an image loaded "
            "into kind would never be used",
        )
    if v["data_source"].startswith("s3://"):
        raise ConfigError(
            f"{p}:dataSource",
            v["data_source"],
            "must not be an s3:// URL with target existing (data-prep reads S3 through an EKS IAM "
            "role); use an https:// URL or synthetic",
        )


def _check_existing_only_keys(v: dict[str, Any]) -> None:
    """kubeconfig and kubeContext choose the cluster of target existing; on eks the stack's own
    cluster's kubeconfig comes from EKS, so a value there would be silently ignored. The engine hands
    the program Pulumi.yaml's default for a key the stack does not set (pulumi/pulumi
    sdk/go/common/workspace/config.go `mergeConfig`: "not found at the stack level but has a default
    value at the project level: assign the value to the stack"), so "set" means "not the default"."""
    for name, field in (("kubeconfig", "kubeconfig"), ("kubeContext", "kube_context")):
        default = KEYS_BY_NAME[name].default
        if v[field] != default:
            raise ConfigError(
                f"{PROJECT}:{name}",
                v[field],
                "must not be set with target eks (it chooses the cluster of target existing; an eks "
                "stack talks to the cluster it creates): remove it, or set target existing",
            )


def _check_image_variant(v: dict[str, Any]) -> None:
    """Refuse an image that cannot use the nodes (image_variant() resolves an empty imageVariant):
    a CPU torch on GPU nodes would train on the CPUs beside idle GPUs, a CUDA build on CPU nodes is
    gigabytes of unused libraries. A prebuilt imageUri cannot be inspected offline, so on a GPU
    stack its variant must be declared (imageVariant=cuda): the user states what it holds."""
    key = f"{PROJECT}:imageVariant"
    wanted = CUDA if gpu_instances.nvidia_instance(v["node_instance_type"]) else CPU
    nodes = f"nodeInstanceType {v['node_instance_type']} has {'NVIDIA GPUs' if wanted == CUDA else 'no GPUs'}"
    if v["image_variant"] == "" and v["image_uri"] and wanted == CUDA:
        raise ConfigError(
            key,
            "",
            f"must be cuda when imageUri is given on a GPU stack ({nodes}): "
            "declare that the image holds a CUDA build of torch",
        )
    if v["image_variant"] not in ("", wanted):
        raise ConfigError(key, v["image_variant"], f"must be {wanted} or empty: {nodes}")


def _check_precision(v: dict[str, Any]) -> None:
    """tf32 and bf16 are GPU arithmetic: on a CPU stack every worker would refuse them at its start
    (jobs.training.runtime.resolve_precision), so the stack refuses them first, in one line."""
    if v["precision"] in ("tf32", "bf16") and not gpu_instances.nvidia_instance(v["node_instance_type"]):
        raise ConfigError(
            f"{PROJECT}:precision",
            v["precision"],
            f"needs a GPU stack (nodeInstanceType {v['node_instance_type']} has no NVIDIA GPU): use auto or fp32",
        )


def _check_gpu_worker_fits(v: dict[str, Any]) -> None:
    """On GPU nodes (infra/aws/gpu_instances.py): one worker per node, and /dev/shm room for NCCL.
    Whether the worker fits the node's CPU and memory is infra/config/node_fit.py's check, for every
    node type."""
    instance = gpu_instances.nvidia_instance(v["node_instance_type"])
    if instance is None:
        return
    if v["workers_per_node"] != 1:
        raise ConfigError(
            f"{PROJECT}:workersPerNode",
            v["workers_per_node"],
            "must be 1 on GPU nodes: each worker takes every GPU of its node",
        )
    if memory_mib(v["worker_memory"]) / 2 < NCCL_SHM_MIN_MIB:
        raise ConfigError(
            f"{PROJECT}:workerMemory",
            v["worker_memory"],
            f"must be at least {2 * NCCL_SHM_MIN_MIB}Mi on GPU nodes: half of it is /dev/shm, "
            f"which NCCL needs {NCCL_SHM_MIN_MIB}Mi of",
        )


# How far ahead a stack is warned that its version enters extended support: a stack lives for days to
# weeks between `up` and `destroy`, and the extended rate is six times the standard one.
EXTENDED_SUPPORT_NOTICE_DAYS = 30


def kubernetes_support(version: str, today: date) -> str | None:
    """Refuse a version past EKS extended support on `today`; a warning when it is in extended support."""
    key = f"{PROJECT}:kubernetesVersion"
    support = versions.EKS_SUPPORT[version]
    phase = versions.eks_support_phase(version, today)
    in_standard = [
        v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(v, today) == versions.STANDARD
    ]
    if phase == versions.ENDED:
        usable = [
            v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(v, today) != versions.ENDED
        ]
        raise ConfigError(
            key,
            version,
            f"EKS extended support for Kubernetes {version} ended on "
            f"{support.end_of_extended.isoformat()} (EKS creates no such cluster); "
            f"must be one of {', '.join(usable) or 'none (infra/versions.py needs a newer version)'}",
        )
    days_left = (support.end_of_standard - today).days
    if phase == versions.STANDARD and days_left <= EXTENDED_SUPPORT_NOTICE_DAYS:
        # A cluster created now is billed the extended rate from that day on, without any change of ours.
        return (
            f"config {key}={version!r} enters EKS extended support on {support.end_of_standard.isoformat()} "
            f"(in {days_left} day{'s' if days_left != 1 else ''}): from then the control plane costs {versions.EKS_EXTENDED_PRICE_PER_HOUR}/hour "
            f"instead of {versions.EKS_STANDARD_PRICE_PER_HOUR}/hour; versions in standard support for longer: "
            f"{', '.join(v for v in in_standard if versions.EKS_SUPPORT[v].end_of_standard > support.end_of_standard) or 'none'}"
        )
    if phase == versions.EXTENDED:
        return (
            f"config {key}={version!r} is in EKS extended support since {support.end_of_standard.isoformat()}: "
            f"the control plane costs {versions.EKS_EXTENDED_PRICE_PER_HOUR}/hour instead of "
            f"{versions.EKS_STANDARD_PRICE_PER_HOUR}/hour, and EKS upgrades it on its own from "
            f"{support.end_of_extended.isoformat()}; versions in standard support: {', '.join(in_standard) or 'none'}"
        )
    return None
