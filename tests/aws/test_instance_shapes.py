"""Every EC2 instance type offered for Linux is known offline with its shape (issue 30 item 3).

Source modelled: EC2's DescribeInstanceTypes answers as moto ships them (moto 5.2.5,
moto/ec2/resources/instance_types.json.gz; the installed dev dependency is read here, not a copy):
VCpuInfo.DefaultVCpus, MemoryInfo.SizeInMiB, GpuInfo.Gpus[] (Count, Manufacturer, Name) and
ProcessorInfo.SupportedArchitectures (botocore's EC2 model, shape InstanceTypeInfo). The committed
table must be exactly what scripts/refresh_instance_shapes.py builds from that file, and must agree
with the two other tables built from AWS data: the GPU table (also moto's file) and the shapes in
SkyPilot's catalog slice (skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @ 27f67dd4).
Cross-read once by hand: Karpenter's generated instance-types.md (aws/karpenter-provider-aws
@ 1d927085, website/content/en/v1.14/reference/instance-types.md, DescribeInstanceTypes in
us-east-1, us-east-2 and us-west-2) lists the same 1,363 types but g4ad (AMD GPUs, refused here
anyway) and moto lists 28 types Karpenter's page does not yet (r9g, t8i, trn2).
"""

from __future__ import annotations

import csv
import hashlib
import json
from importlib import metadata
from pathlib import Path

import pytest

from infra.aws import gpu_instances, instance_catalog, instance_shapes, shapes_build

MOTO = metadata.distribution("moto")
MOTO_FILE = Path(MOTO.locate_file(shapes_build.MOTO_DATA))


def committed_rows() -> list[dict[str, str]]:
    return list(csv.DictReader((shapes_build.DATA_DIR / shapes_build.SHAPES_FILE).open()))


def test_the_table_is_what_the_refresh_builds_from_the_installed_moto():
    source = json.loads((shapes_build.DATA_DIR / shapes_build.SOURCE_FILE).read_text())
    assert source["motoVersion"] == MOTO.version, "moto was upgraded: run scripts/refresh_instance_shapes.py"
    assert source["sha256"] == hashlib.sha256(MOTO_FILE.read_bytes()).hexdigest()
    rebuilt = shapes_build.build(shapes_build.read_moto_file(MOTO_FILE))
    assert shapes_build.csv_text(rebuilt) == (shapes_build.DATA_DIR / shapes_build.SHAPES_FILE).read_text()
    assert source["types"] == len(rebuilt) and source["readOn"]


def test_every_linux_type_is_there_and_only_mac_types_are_left_out():
    entries = shapes_build.read_moto_file(MOTO_FILE)
    mac = {
        name
        for name, info in entries.items()
        if set(info["ProcessorInfo"]["SupportedArchitectures"]) <= {"x86_64_mac", "arm64_mac"}
    }
    assert {"mac1.metal", "mac2.metal"} <= mac
    assert set(instance_shapes.table()) == set(entries) - mac
    assert len(instance_shapes.table()) > 1300


@pytest.mark.parametrize(
    "name, vcpus, memory_mib, gpus, gpu, architectures",
    [
        # The issue's types, as DescribeInstanceTypes describes them.
        ("c6i.4xlarge", 16, 32768, 0, None, ("x86_64",)),
        ("t3.micro", 2, 1024, 0, None, ("x86_64",)),
        ("p5.48xlarge", 192, 2097152, 8, "H100", ("x86_64",)),
        ("p6-b200.48xlarge", 192, 2097152, 8, "B200", ("x86_64",)),
        ("m6g.large", 2, 8192, 0, None, ("arm64",)),
    ],
)
def test_the_issue_types_have_their_shapes(name, vcpus, memory_mib, gpus, gpu, architectures):
    shape = instance_shapes.shape(name)
    assert (shape.vcpus, shape.memory_mib, shape.gpus, shape.gpu, shape.architectures) == (
        vcpus,
        memory_mib,
        gpus,
        gpu,
        architectures,
    )
    assert shape.amd64 == ("x86_64" in architectures)


def test_the_gpu_table_agrees_with_the_shapes():
    for name, nvidia in gpu_instances.NVIDIA_INSTANCES.items():
        shape = instance_shapes.shape(name)
        assert (shape.vcpus, shape.memory_mib, shape.gpus, shape.gpu, shape.gpu_manufacturer) == (
            nvidia.vcpus,
            nvidia.memory_mib,
            nvidia.gpus,
            nvidia.gpu,
            "NVIDIA",
        ), name


def test_the_price_catalogs_shapes_agree_with_the_shapes():
    """SkyPilot's catalog slice has its own vCPUs/MemoryGiB/GPUs columns: same numbers, other source."""
    for name in instance_catalog.carried():
        priced, shape = instance_catalog.shape(name), instance_shapes.shape(name)
        assert (priced.vcpus, priced.memory_gib * 1024, priced.gpus) == (shape.vcpus, shape.memory_mib, shape.gpus), (
            name
        )


@pytest.mark.parametrize(
    "typed, meant",
    [("c5.4xlarg", "c5.4xlarge"), ("C5.4XLARGE", "c5.4xlarge"), ("p5.48xlage", "p5.48xlarge"), ("m5.larg", "m5.large")],
)
def test_a_misspelt_type_gets_the_type_it_meant(typed, meant):
    assert instance_shapes.shape(typed) is None
    assert instance_shapes.close_matches(typed)[0] == meant
    assert f"did you mean {meant}" in instance_shapes.unknown_type_problem(typed)
