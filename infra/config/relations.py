"""Rules that tie config keys together, checked after every key passed its own rule.

Each raises ConfigError naming the key whose value breaks the rule, and what would be allowed.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from infra import versions
from infra.aws import gpu_instances
from infra.config.errors import ConfigError
from infra.config.images import pins_the_image
from infra.config.keys import (CIFAR10_MD5, CPU, CUDA, EKS, NCCL_SHM_MIN_MIB, PROJECT, READ_WRITE_MANY, READ_WRITE_ONCE)
from infra.config.parsers import QUANTITY, memory_mib


def check_relations(v: dict[str, Any]) -> None:
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


def check_existing(v: dict[str, Any]) -> None:
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


def _check_gpu_worker_fits(v: dict[str, Any]) -> None:
    """On GPU nodes, where we know the node (infra/aws/gpu_instances.py): the worker must fit on one,
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


def kubernetes_support(version: str, today: date) -> str | None:
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
