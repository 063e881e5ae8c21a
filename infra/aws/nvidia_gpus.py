"""What each NVIDIA GPU of the GPU table is, and whether the stack's nodes can train on it.

Two things must hold for a GPU node to train here:
- the node's driver must know the GPU. GPU node groups boot the EKS-optimised AL2023 NVIDIA AMI
  (infra/versions.py NVIDIA_NODE_AMI_TYPE), which installs NVIDIA driver branch 580
  (awslabs/amazon-eks-ami templates/al2023/variables-default.json, nvidia_driver_major_version, @
  81fec2e8). G7's RTX PRO 4500 Blackwell "require driver version 595 or later. The EKS-optimized
  accelerated AMI ships with driver version 580 by default, which does not support G7"
  (doc/usage/g7-ami.md @ 62c9f3b0); its device, 0x2C3A, is in the AMI's
  nvidia-open-supported-devices-595.txt and not in ...-580.txt (templates/al2023/runtime/gpu/).
- the image's torch must have kernels for it. The CUDA image installs PyPI's torch 2.13.0, a CUDA
  13.0 build (infra/versions.py TORCH_INDEX_URLS), and PyTorch's support matrix for CUDA 13.0 is
  "Turing(7.5), Ampere(8.0, 8.6), Hopper(9.0), Blackwell(10.0, 12.0+PTX)" (pytorch/pytorch
  RELEASE.md "PyTorch CUDA Support Matrix", updated by pytorch/pytorch#175253; #172352): nothing
  below compute capability 7.5, so Volta (V100, 7.0) gets "no kernel image is available".
  A cubin runs on its own major version at the same or a higher minor one, so 8.9 (Ada) and
  10.3 (B300) run the 8.6 and 10.0 kernels.

Architectures and compute capabilities: NVIDIA's "CUDA GPU Compute Capability" page
(developer.nvidia.com/cuda-gpus; V100 on developer.nvidia.com/cuda-legacy-gpus). The names are the
`GpuInfo.Gpus[].Name` values of the GPU table (infra/aws/gpu_instances.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.aws.gpu_instances import NVIDIA_INSTANCES

# The driver branch of the EKS AL2023 NVIDIA AMI (see above).
EKS_AMI_NVIDIA_DRIVER = 580
# The oldest compute capability PyPI's CUDA 13.0 torch wheels have kernels for (see above).
TORCH_CUDA_MIN_CAPABILITY = (7, 5)


@dataclass(frozen=True)
class NvidiaGpu:
    architecture: str
    compute_capability: tuple[int, int]
    driver: int  # the NVIDIA driver branch the node needs at least for this GPU, as the EKS AMI ships it


NVIDIA_GPUS: dict[str, NvidiaGpu] = {
    "T4": NvidiaGpu("Turing", (7, 5), 580),
    "A10G": NvidiaGpu("Ampere", (8, 6), 580),
    "A100": NvidiaGpu("Ampere", (8, 0), 580),
    "L4": NvidiaGpu("Ada Lovelace", (8, 9), 580),
    "L40S": NvidiaGpu("Ada Lovelace", (8, 9), 580),
    "H100": NvidiaGpu("Hopper", (9, 0), 580),
    "H200": NvidiaGpu("Hopper", (9, 0), 580),
    "B200": NvidiaGpu("Blackwell", (10, 0), 580),
    "B300": NvidiaGpu("Blackwell", (10, 3), 580),
    "RTX PRO Server 6000": NvidiaGpu("Blackwell", (12, 0), 580),  # G7e
    "RTX PRO 4500": NvidiaGpu("Blackwell", (12, 0), 595),  # G7: g7-ami.md
    # The AMI drives it with its 580 closed kernel module; the g7 page warns that 595 is "not
    # compatible with P3, P3dn".
    "V100": NvidiaGpu("Volta", (7, 0), 580),
}

# Families the GPU table has no row for (moto's instance data has no p3), with their GPU: P3 has
# "up to 8 NVIDIA Tesla V100 GPUs" (the AWS News Blog's P3 announcement, 2017, as translated at
# infoq.cn/article/j629I8X512fg8tuKd6ke, listing p3.2xlarge, p3.8xlarge, p3.16xlarge).
FAMILY_GPUS = {"p3": "V100"}

# What to pick instead, by the reason a type cannot train.
DRIVER_ALTERNATIVES = "g7e (RTX PRO 6000 Blackwell, same generation) or g6e/g6"
ARCHITECTURE_ALTERNATIVES = "g4dn (T4) or newer: g5, g6, g6e, p4d, p5"


def gpu_of(instance_type: str) -> str | None:
    """The GPU model of an instance type: from the GPU table, else from its family."""
    instance = NVIDIA_INSTANCES.get(instance_type)
    if instance is not None:
        return instance.gpu
    return FAMILY_GPUS.get(instance_type.split(".")[0])


def why_it_cannot_train(instance_type: str) -> str | None:
    """One line saying why GPU nodes of this type train nothing here and what to pick, or None."""
    name = gpu_of(instance_type)
    if name is None:
        return None
    gpu = NVIDIA_GPUS[name]
    major, minor = gpu.compute_capability
    if gpu.compute_capability < TORCH_CUDA_MIN_CAPABILITY:
        return (
            f"has {gpu.architecture} GPUs ({name}, compute capability {major}.{minor}), for which PyPI's CUDA 13 "
            f"torch has no kernels (Turing 7.5 and newer only): pick {ARCHITECTURE_ALTERNATIVES}"
        )
    if gpu.driver > EKS_AMI_NVIDIA_DRIVER:
        return (
            f"has {name} GPUs, which need NVIDIA driver {gpu.driver} or later; the EKS NVIDIA AMI the nodes boot "
            f"ships {EKS_AMI_NVIDIA_DRIVER}: pick {DRIVER_ALTERNATIVES}"
        )
    return None
