"""Build the committed instance-shape table (infra/aws/data/ec2_shapes.csv) from EC2's
DescribeInstanceTypes answers, as moto ships them (moto/ec2/resources/instance_types.json.gz: one
DescribeInstanceTypes `InstanceTypes` entry per type, keyed by its name).

Fields read, in EC2's own names (botocore's EC2 model, shape InstanceTypeInfo):
- VCpuInfo.DefaultVCpus -> vCPUs; MemoryInfo.SizeInMiB -> MemoryMiB;
- GpuInfo.Gpus[]: Count summed -> GPUs, Manufacturer and Name (one kind per type; a type with two
  kinds is a BuildError) -> GPUManufacturer, GPU;
- ProcessorInfo.SupportedArchitectures -> Architectures (space-separated);
- NetworkInfo.EfaInfo.MaximumEfaInterfaces where NetworkInfo.EfaSupported -> EfaInterfaces (0: no
  EFA). Karpenter attaches that many EFA interfaces to a node whose pod requests
  `vpc.amazonaws.com/efa` (aws/karpenter-provider-aws @ 1d927085, pkg/providers/instance/instance.go
  getEFACountForInstance: the instance type's EFA capacity), and its reference lists the same count
  per type (website/content/en/v1.14/reference/instance-types.md: p5.48xlarge `vpc.amazonaws.com/efa` 32).
Types whose architectures are all Mac ones (`x86_64_mac`, `arm64_mac`: EC2 Mac instances run macOS)
are left out: the table is what EC2 offers for Linux. Rows are sorted by name, so a refresh is a
readable diff.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
SHAPES_FILE = "ec2_shapes.csv"
SOURCE_FILE = "ec2_shapes_source.json"
COLUMNS = ("InstanceType", "vCPUs", "MemoryMiB", "GPUs", "GPUManufacturer", "GPU", "Architectures", "EfaInterfaces")
MOTO_DATA = "moto/ec2/resources/instance_types.json.gz"
MAC_ARCHITECTURES = frozenset({"x86_64_mac", "arm64_mac"})


class BuildError(ValueError):
    """An entry the table cannot represent; the message names it."""


def read_moto_file(path: Path) -> dict[str, dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def row(name: str, info: dict[str, Any]) -> dict[str, str] | None:
    """The table's row for one DescribeInstanceTypes entry; None for a Mac type."""
    architectures = info["ProcessorInfo"]["SupportedArchitectures"]
    if set(architectures) <= MAC_ARCHITECTURES:
        return None
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    kinds = {(g.get("Manufacturer", ""), g.get("Name", "")) for g in gpus}
    if len(kinds) > 1:
        raise BuildError(f"{name} has GPUs of {len(kinds)} kinds ({sorted(kinds)}): the table has one model per type")
    manufacturer, model = next(iter(kinds), ("", ""))
    network = info.get("NetworkInfo") or {}
    efa = (network.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0) if network.get("EfaSupported") else 0
    return {
        "InstanceType": name,
        "vCPUs": str(info["VCpuInfo"]["DefaultVCpus"]),
        "MemoryMiB": str(info["MemoryInfo"]["SizeInMiB"]),
        "GPUs": str(sum(g.get("Count", 0) for g in gpus)),
        "GPUManufacturer": manufacturer,
        "GPU": model,
        "Architectures": " ".join(sorted(architectures)),
        "EfaInterfaces": str(efa),
    }


def build(entries: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    rows = (row(name, info) for name, info in sorted(entries.items()))
    return [r for r in rows if r is not None]


def csv_text(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
