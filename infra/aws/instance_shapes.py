"""Every EC2 instance type offered for Linux, and what one instance has: vCPUs, memory, GPUs (count,
manufacturer, model), the architectures it runs, and how many EFA interfaces it takes. Known offline, so `synth`, `cost` and config
checks size any type a user names without asking AWS, and a misspelt one gets "did you mean".

The table (infra/aws/data/ec2_shapes.csv, with its source in ec2_shapes_source.json) is EC2's own
DescribeInstanceTypes answers as moto ships them (moto/ec2/resources/instance_types.json.gz, the
file infra/aws/gpu_instances.py and infra/aws/eni_limits.csv are read from too), less the Mac types
(architectures `x86_64_mac`, `arm64_mac`: macOS only). `scripts/refresh_instance_shapes.py`
rebuilds it from the installed moto (infra/aws/shapes_build.py says how), and
tests/aws/test_instance_shapes.py rebuilds it and compares, so a moto upgrade that changes the data
fails there until the table is refreshed.

Prices are another table (infra/aws/instance_catalog.py, a slice of SkyPilot's catalog for the
types the stacks use); a type this table knows and that one does not price is sized, and its cost
is reported as not read.
"""

from __future__ import annotations

import csv
import difflib
import json
from dataclasses import dataclass
from functools import cache

from infra.aws import shapes_build

AMD64 = "x86_64"  # DescribeInstanceTypes' name for what Kubernetes calls amd64


@dataclass(frozen=True)
class Shape:
    vcpus: int
    memory_mib: int
    gpus: int  # GpuInfo.Gpus[].Count, summed (0: none)
    gpu_manufacturer: str | None  # NVIDIA, AMD, ...
    gpu: str | None  # the model: H100, L4, ...
    architectures: tuple[str, ...]  # x86_64, arm64, i386
    efa_interfaces: int = 0  # NetworkInfo.EfaInfo.MaximumEfaInterfaces (0: no EFA)

    @property
    def amd64(self) -> bool:
        return AMD64 in self.architectures


@cache
def source() -> dict[str, object]:
    return json.loads((shapes_build.DATA_DIR / shapes_build.SOURCE_FILE).read_text(encoding="utf-8"))


def source_line() -> str:
    """'infra/aws/data/ec2_shapes.csv (EC2 DescribeInstanceTypes as moto 5.2.5 ships it, read 2026-11-26)'."""
    found = source()
    return (
        f"infra/aws/data/{shapes_build.SHAPES_FILE} ({found['types']} types: EC2 DescribeInstanceTypes as "
        f"moto {found['motoVersion']} ships it, read {found['readOn']})"
    )


@cache
def table() -> dict[str, Shape]:
    with (shapes_build.DATA_DIR / shapes_build.SHAPES_FILE).open(newline="", encoding="utf-8") as handle:
        rows = csv.DictReader(handle)
        if tuple(rows.fieldnames or ()) != shapes_build.COLUMNS:
            raise ValueError(f"{shapes_build.SHAPES_FILE} must have the columns {', '.join(shapes_build.COLUMNS)}")
        return {
            row["InstanceType"]: Shape(
                vcpus=int(row["vCPUs"]),
                memory_mib=int(row["MemoryMiB"]),
                gpus=int(row["GPUs"]),
                gpu_manufacturer=row["GPUManufacturer"] or None,
                gpu=row["GPU"] or None,
                architectures=tuple(row["Architectures"].split()),
                efa_interfaces=int(row["EfaInterfaces"]),
            )
            for row in rows
        }


def shape(instance_type: str) -> Shape | None:
    """One instance of the type; None when EC2 offers no such type for Linux."""
    return table().get(instance_type)


def close_matches(instance_type: str, limit: int = 3) -> list[str]:
    """The known types nearest in spelling (difflib's ratio, 0.8 or more): 'c5.4xlarg' -> ['c5.4xlarge', ...];
    the type in lower case first when that is one ('C5.4XLARGE')."""
    exact = [instance_type.lower()] if instance_type.lower() in table() else []
    near = difflib.get_close_matches(instance_type.lower(), table(), n=limit, cutoff=0.8)
    return list(dict.fromkeys(exact + near))[:limit]


def unknown_type_problem(instance_type: str) -> str:
    """Why a name is not a type, for a config error: what is wrong, the nearest names, and what is allowed."""
    near = close_matches(instance_type)
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    return (
        f"is not an EC2 instance type offered for Linux{hint} (the types are those of {source_line()}; "
        "for a type newer than that: upgrade moto, then `python scripts/refresh_instance_shapes.py`)"
    )
