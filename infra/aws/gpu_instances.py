"""EC2 instance types with whole NVIDIA GPUs on x86-64, and what one node of each has.

Read from the EC2 instance-type data that moto ships (moto 5.2.5, file
`moto/ec2/resources/instance_types.json.gz`: DescribeInstanceTypes answers, AWS-derived): every
type whose `GpuInfo.Gpus` are all NVIDIA with `Count` >= 1 and whose `ProcessorInfo` lists x86_64.
Left out: fractional-GPU types (g6f, gr6f: `Count` 0, `GpuPartitionSize` < 1), which the NVIDIA
device plugin does not hand out as whole `nvidia.com/gpu`, and Graviton types (the training image,
which also runs our ElasticJob controller, is built for linux/amd64 only). tests/aws/test_gpu_instances.py compares this table with moto's file,
so a moto upgrade that changes the data fails there; it is a table, not a rule on names, because
names say nothing reliable about GPU counts (g5.12xlarge and g5.16xlarge: 4 and 1).

botocore has no instance data, and the program must not call EC2 to size pods (synth is offline).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NvidiaInstance:
    gpus: int  # GpuInfo.Gpus[].Count, summed: what the device plugin advertises as nvidia.com/gpu
    gpu: str  # GpuInfo.Gpus[].Name
    gpu_memory_mib: int  # per GPU
    vcpus: int  # VCpuInfo.DefaultVCpus
    memory_mib: int  # MemoryInfo.SizeInMiB


NVIDIA_INSTANCES: dict[str, NvidiaInstance] = {
    "g4dn.12xlarge": NvidiaInstance(gpus=4, gpu="T4", gpu_memory_mib=16384, vcpus=48, memory_mib=196608),
    "g4dn.16xlarge": NvidiaInstance(gpus=1, gpu="T4", gpu_memory_mib=16384, vcpus=64, memory_mib=262144),
    "g4dn.2xlarge": NvidiaInstance(gpus=1, gpu="T4", gpu_memory_mib=16384, vcpus=8, memory_mib=32768),
    "g4dn.4xlarge": NvidiaInstance(gpus=1, gpu="T4", gpu_memory_mib=16384, vcpus=16, memory_mib=65536),
    "g4dn.8xlarge": NvidiaInstance(gpus=1, gpu="T4", gpu_memory_mib=16384, vcpus=32, memory_mib=131072),
    "g4dn.metal": NvidiaInstance(gpus=8, gpu="T4", gpu_memory_mib=16384, vcpus=96, memory_mib=393216),
    "g4dn.xlarge": NvidiaInstance(gpus=1, gpu="T4", gpu_memory_mib=16384, vcpus=4, memory_mib=16384),
    "g5.12xlarge": NvidiaInstance(gpus=4, gpu="A10G", gpu_memory_mib=22888, vcpus=48, memory_mib=196608),
    "g5.16xlarge": NvidiaInstance(gpus=1, gpu="A10G", gpu_memory_mib=22888, vcpus=64, memory_mib=262144),
    "g5.24xlarge": NvidiaInstance(gpus=4, gpu="A10G", gpu_memory_mib=22888, vcpus=96, memory_mib=393216),
    "g5.2xlarge": NvidiaInstance(gpus=1, gpu="A10G", gpu_memory_mib=22888, vcpus=8, memory_mib=32768),
    "g5.48xlarge": NvidiaInstance(gpus=8, gpu="A10G", gpu_memory_mib=22888, vcpus=192, memory_mib=786432),
    "g5.4xlarge": NvidiaInstance(gpus=1, gpu="A10G", gpu_memory_mib=22888, vcpus=16, memory_mib=65536),
    "g5.8xlarge": NvidiaInstance(gpus=1, gpu="A10G", gpu_memory_mib=22888, vcpus=32, memory_mib=131072),
    "g5.xlarge": NvidiaInstance(gpus=1, gpu="A10G", gpu_memory_mib=22888, vcpus=4, memory_mib=16384),
    "g6.12xlarge": NvidiaInstance(gpus=4, gpu="L4", gpu_memory_mib=22888, vcpus=48, memory_mib=196608),
    "g6.16xlarge": NvidiaInstance(gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=64, memory_mib=262144),
    "g6.24xlarge": NvidiaInstance(gpus=4, gpu="L4", gpu_memory_mib=22888, vcpus=96, memory_mib=393216),
    "g6.2xlarge": NvidiaInstance(gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=8, memory_mib=32768),
    "g6.48xlarge": NvidiaInstance(gpus=8, gpu="L4", gpu_memory_mib=22888, vcpus=192, memory_mib=786432),
    "g6.4xlarge": NvidiaInstance(gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=16, memory_mib=65536),
    "g6.8xlarge": NvidiaInstance(gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=32, memory_mib=131072),
    "g6.xlarge": NvidiaInstance(gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=4, memory_mib=16384),
    "g6e.12xlarge": NvidiaInstance(gpus=4, gpu="L40S", gpu_memory_mib=45776, vcpus=48, memory_mib=393216),
    "g6e.16xlarge": NvidiaInstance(gpus=1, gpu="L40S", gpu_memory_mib=45776, vcpus=64, memory_mib=524288),
    "g6e.24xlarge": NvidiaInstance(gpus=4, gpu="L40S", gpu_memory_mib=45776, vcpus=96, memory_mib=786432),
    "g6e.2xlarge": NvidiaInstance(gpus=1, gpu="L40S", gpu_memory_mib=45776, vcpus=8, memory_mib=65536),
    "g6e.48xlarge": NvidiaInstance(gpus=8, gpu="L40S", gpu_memory_mib=45776, vcpus=192, memory_mib=1572864),
    "g6e.4xlarge": NvidiaInstance(gpus=1, gpu="L40S", gpu_memory_mib=45776, vcpus=16, memory_mib=131072),
    "g6e.8xlarge": NvidiaInstance(gpus=1, gpu="L40S", gpu_memory_mib=45776, vcpus=32, memory_mib=262144),
    "g6e.xlarge": NvidiaInstance(gpus=1, gpu="L40S", gpu_memory_mib=45776, vcpus=4, memory_mib=32768),
    "g7.12xlarge": NvidiaInstance(gpus=2, gpu="RTX PRO 4500", gpu_memory_mib=32768, vcpus=48, memory_mib=196608),
    "g7.24xlarge": NvidiaInstance(gpus=4, gpu="RTX PRO 4500", gpu_memory_mib=32768, vcpus=96, memory_mib=393216),
    "g7.2xlarge": NvidiaInstance(gpus=1, gpu="RTX PRO 4500", gpu_memory_mib=32768, vcpus=8, memory_mib=32768),
    "g7.48xlarge": NvidiaInstance(gpus=8, gpu="RTX PRO 4500", gpu_memory_mib=32768, vcpus=192, memory_mib=786432),
    "g7.4xlarge": NvidiaInstance(gpus=1, gpu="RTX PRO 4500", gpu_memory_mib=32768, vcpus=16, memory_mib=65536),
    "g7.8xlarge": NvidiaInstance(gpus=1, gpu="RTX PRO 4500", gpu_memory_mib=32768, vcpus=32, memory_mib=131072),
    "g7e.12xlarge": NvidiaInstance(
        gpus=2, gpu="RTX PRO Server 6000", gpu_memory_mib=98304, vcpus=48, memory_mib=524288
    ),
    "g7e.24xlarge": NvidiaInstance(
        gpus=4, gpu="RTX PRO Server 6000", gpu_memory_mib=98304, vcpus=96, memory_mib=1048576
    ),
    "g7e.2xlarge": NvidiaInstance(gpus=1, gpu="RTX PRO Server 6000", gpu_memory_mib=98304, vcpus=8, memory_mib=65536),
    "g7e.48xlarge": NvidiaInstance(
        gpus=8, gpu="RTX PRO Server 6000", gpu_memory_mib=98304, vcpus=192, memory_mib=2097152
    ),
    "g7e.4xlarge": NvidiaInstance(gpus=1, gpu="RTX PRO Server 6000", gpu_memory_mib=98304, vcpus=16, memory_mib=131072),
    "g7e.8xlarge": NvidiaInstance(gpus=1, gpu="RTX PRO Server 6000", gpu_memory_mib=98304, vcpus=32, memory_mib=262144),
    "gr6.4xlarge": NvidiaInstance(gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=16, memory_mib=131072),
    "gr6.8xlarge": NvidiaInstance(gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=32, memory_mib=262144),
    "p3dn.24xlarge": NvidiaInstance(gpus=8, gpu="V100", gpu_memory_mib=32768, vcpus=96, memory_mib=786432),
    "p4d.24xlarge": NvidiaInstance(gpus=8, gpu="A100", gpu_memory_mib=40960, vcpus=96, memory_mib=1179648),
    "p4de.24xlarge": NvidiaInstance(gpus=8, gpu="A100", gpu_memory_mib=81920, vcpus=96, memory_mib=1179648),
    "p5.48xlarge": NvidiaInstance(gpus=8, gpu="H100", gpu_memory_mib=81920, vcpus=192, memory_mib=2097152),
    "p5.4xlarge": NvidiaInstance(gpus=1, gpu="H100", gpu_memory_mib=81920, vcpus=16, memory_mib=262144),
    "p5e.48xlarge": NvidiaInstance(gpus=8, gpu="H200", gpu_memory_mib=144384, vcpus=192, memory_mib=2097152),
    "p5en.48xlarge": NvidiaInstance(gpus=8, gpu="H200", gpu_memory_mib=144384, vcpus=192, memory_mib=2097152),
    "p6-b200.48xlarge": NvidiaInstance(gpus=8, gpu="B200", gpu_memory_mib=183359, vcpus=192, memory_mib=2097152),
    "p6-b300.48xlarge": NvidiaInstance(gpus=8, gpu="B300", gpu_memory_mib=275040, vcpus=192, memory_mib=4194304),
}

# Instance families EC2 bills against the G/VT and P On-Demand vCPU quotas (upstream-facts.md, fact 18).
GPU_FAMILY_PREFIXES = ("g", "p")


def nvidia_instance(instance_type: str) -> NvidiaInstance | None:
    return NVIDIA_INSTANCES.get(instance_type)


def is_gpu_family(instance_type: str) -> bool:
    """G and P family types (g5, g6e, gr6, p4d ...): the ones that must be whole-NVIDIA-GPU types here."""
    return instance_type.startswith(GPU_FAMILY_PREFIXES)
