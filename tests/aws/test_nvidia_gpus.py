"""The GPU table's architectures and drivers, checked against what their sources say (issue 21 item 8,
upstream-facts-2.md facts 16 and 17).

Excerpts, quoted from the sources the module names:
- awslabs/amazon-eks-ami templates/al2023/runtime/gpu/, the open kernel module's supported-device
  lists the AMI loads by driver branch (nvidia-kmod-load.sh: a device listed in the branch's file
  gets nvidia-open, any other the closed module): lines of nvidia-open-supported-devices-580.txt
  (@ 8061c53b) and -595.txt (@ 48853716) for the data-center GPUs of the table;
- templates/al2023/variables-default.json @ 81fec2e8: "nvidia_driver_major_version": "580";
- NVIDIA's CUDA GPU Compute Capability page (developer.nvidia.com/cuda-gpus) and its legacy page.
"""

from __future__ import annotations

import pytest

from infra.aws.gpu_instances import NVIDIA_INSTANCES
from infra.aws.nvidia_gpus import EKS_AMI_NVIDIA_DRIVER, NVIDIA_GPUS, gpu_of, why_it_cannot_train
from infra.config import ConfigError, load_settings

# "0x<device> <name>" lines of the two lists (nvidia-open-supported-devices-<branch>.txt).
OPEN_580 = {
    "0x1EB8": "Tesla T4",
    "0x2237": "NVIDIA A10G",
    "0x20B0": "NVIDIA A100-SXM4-40GB",
    "0x20B2": "NVIDIA A100-SXM4-80GB",
    "0x27B8": "NVIDIA L4",
    "0x26B9": "NVIDIA L40S",
    "0x2330": "NVIDIA H100 80GB HBM3",
    "0x2335": "NVIDIA H200",
    "0x2901": "NVIDIA B200",
    "0x3182": "NVIDIA B300 SXM6 AC",
    "0x2BB5": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
}
OPEN_595_ONLY = {"0x2C3A": "NVIDIA RTX PRO 4500 Blackwell Server Edition"}
# Which device each table GPU is (the instance data's GpuInfo name -> the lists' device).
DEVICE = {
    "T4": "0x1EB8",
    "A10G": "0x2237",
    "A100": "0x20B0",
    "L4": "0x27B8",
    "L40S": "0x26B9",
    "H100": "0x2330",
    "H200": "0x2335",
    "B200": "0x2901",
    "B300": "0x3182",
    "RTX PRO Server 6000": "0x2BB5",
    "RTX PRO 4500": "0x2C3A",
}
# developer.nvidia.com/cuda-gpus (data-center column) and /cuda-legacy-gpus.
COMPUTE_CAPABILITY = {
    "T4": "7.5",
    "A10G": "8.6",
    "A100": "8.0",
    "L4": "8.9",
    "L40S": "8.9",
    "H100": "9.0",
    "H200": "9.0",
    "B200": "10.0",
    "B300": "10.3",
    "RTX PRO Server 6000": "12.0",
    "RTX PRO 4500": "12.0",
    "V100": "7.0",
}


def test_every_gpu_of_the_instance_table_has_an_architecture_and_a_driver():
    assert {instance.gpu for instance in NVIDIA_INSTANCES.values()} <= set(NVIDIA_GPUS)
    for name, gpu in NVIDIA_GPUS.items():
        assert gpu.architecture and gpu.driver in (580, 595), name
        assert "%d.%d" % gpu.compute_capability == COMPUTE_CAPABILITY[name], name


def test_the_driver_column_is_what_the_ami_lists_say():
    assert EKS_AMI_NVIDIA_DRIVER == 580
    for name, device in DEVICE.items():
        needs_595 = device in OPEN_595_ONLY
        assert NVIDIA_GPUS[name].driver == (595 if needs_595 else 580), name
        assert (device in OPEN_580) != needs_595, name


@pytest.mark.parametrize("instance_type", sorted(NVIDIA_INSTANCES))
def test_only_g7_and_volta_types_are_refused(instance_type):
    refused = why_it_cannot_train(instance_type)
    gpu = gpu_of(instance_type)
    assert (refused is not None) == (gpu in ("RTX PRO 4500", "V100")), (instance_type, refused)
    if refused:
        assert "pick " in refused and "\n" not in refused


@pytest.mark.parametrize(
    "instance_type, reason, pick",
    [
        ("g7.48xlarge", "need NVIDIA driver 595 or later; the EKS NVIDIA AMI the nodes boot ships 580", "g7e"),
        ("p3dn.24xlarge", "Volta GPUs (V100, compute capability 7.0)", "g4dn (T4) or newer"),
        ("p3.16xlarge", "Volta GPUs (V100, compute capability 7.0)", "g4dn (T4) or newer"),
    ],
)
def test_config_refuses_them_in_one_line(instance_type, reason, pick):
    with pytest.raises(ConfigError) as refused:
        load_settings({"elastic-training:nodeInstanceType": instance_type}, "dev")
    line = str(refused.value)
    assert reason in line and pick in line and "\n" not in line


@pytest.mark.parametrize("instance_type", ["g7e.2xlarge", "p6-b300.48xlarge", "g4dn.xlarge"])
def test_their_neighbours_stay_accepted(instance_type):
    assert why_it_cannot_train(instance_type) is None


def test_the_gpu_page_table_is_the_module_table():
    """docs/gpu.md "Which NVIDIA GPUs can train here" says what infra/aws/nvidia_gpus.py says."""
    from pathlib import Path

    from infra.aws.nvidia_gpus import FAMILY_GPUS

    text = (Path(__file__).resolve().parents[2] / "docs" / "gpu.md").read_text()
    section = text.split("## Which NVIDIA GPUs can train here", 1)[1].split("\n## ", 1)[0]  # that section only
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| GPU ")
    ]
    families: dict[str, set[str]] = {}
    for instance_type, instance in NVIDIA_INSTANCES.items():
        families.setdefault(instance.gpu, set()).add(instance_type.split(".")[0])
    for family, name in FAMILY_GPUS.items():
        families.setdefault(name, set()).add(family)
    documented = {row[0]: row for row in rows}
    assert set(documented) == set(NVIDIA_GPUS)
    for name, gpu in NVIDIA_GPUS.items():
        _, shown_families, architecture, capability, driver, verdict = documented[name]
        assert set(shown_families.split(", ")) == families[name], name
        assert (architecture, capability, int(driver)) == (
            gpu.architecture,
            "%d.%d" % gpu.compute_capability,
            gpu.driver,
        )
        example = min(t for t, instance in NVIDIA_INSTANCES.items() if instance.gpu == name)
        assert verdict.startswith("yes" if why_it_cannot_train(example) is None else "no: "), name
