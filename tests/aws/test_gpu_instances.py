"""infra/aws/gpu_instances.py is moto's EC2 instance data (moto 5.2.5,
moto/ec2/resources/instance_types.json.gz, DescribeInstanceTypes answers), filtered as its
docstring says: whole NVIDIA GPUs, x86-64."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import moto

from infra.aws.gpu_instances import NVIDIA_INSTANCES, NvidiaInstance, is_gpu_family, nvidia_instance

DATA = json.loads(
    gzip.decompress((Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz").read_bytes())
)


def expected_table() -> dict[str, NvidiaInstance]:
    table = {}
    for name, info in DATA.items():
        gpus = info.get("GpuInfo", {}).get("Gpus", [])
        if not gpus or "x86_64" not in info["ProcessorInfo"]["SupportedArchitectures"]:
            continue
        if any(g["Manufacturer"] != "NVIDIA" or g["Count"] < 1 for g in gpus):
            continue
        table[name] = NvidiaInstance(
            gpus=sum(g["Count"] for g in gpus),
            gpu=gpus[0]["Name"],
            gpu_memory_mib=gpus[0]["MemoryInfo"]["SizeInMiB"],
            vcpus=info["VCpuInfo"]["DefaultVCpus"],
            memory_mib=info["MemoryInfo"]["SizeInMiB"],
        )
    return table


def test_the_table_is_motos_data():
    assert NVIDIA_INSTANCES == expected_table()


def test_the_two_candidates_of_the_gpu_stack():
    # What docs/gpu.md compares: one 24 GB-class GPU, 4 vCPUs, 16 GiB each.
    assert nvidia_instance("g6.xlarge") == NvidiaInstance(
        gpus=1, gpu="L4", gpu_memory_mib=22888, vcpus=4, memory_mib=16384
    )
    assert nvidia_instance("g5.xlarge") == NvidiaInstance(
        gpus=1, gpu="A10G", gpu_memory_mib=22888, vcpus=4, memory_mib=16384
    )


def test_gpu_counts_do_not_follow_names():
    assert nvidia_instance("g5.12xlarge").gpus == 4 and nvidia_instance("g5.16xlarge").gpus == 1


def test_left_out_types_are_still_gpu_families():
    """Fractional-GPU types are G types that the table leaves out, so config refuses them."""
    assert DATA["g6f.xlarge"]["GpuInfo"]["Gpus"][0]["Count"] == 0
    assert nvidia_instance("g6f.xlarge") is None and is_gpu_family("g6f.xlarge")
    assert not is_gpu_family("c5.4xlarge") and not is_gpu_family("m5.large")
