"""Every misuse of the config fails early and clearly: a table of bad values through `synth`.

For each row: exactly one line on stderr naming the key, the value and the rule; exit status 2;
no traceback; nothing registered; the --out folder not created. Most rows run in-process through
`infra.cli.synth.main` (fast); a handful run the real command in a subprocess.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import date
from functools import partial

import pytest

import infra.cli.synth
from infra import versions
from infra.config import CIFAR10_MD5, PROJECT, RESERVED_NAMESPACES, load_settings
from infra.config.stack_file import read_stack_file
from scanner_helpers import PYTHON, REPO, require_tool

P = PROJECT


@dataclass(frozen=True)
class Bad:
    id: str
    overrides: tuple[str, ...]  # -c arguments, on top of stacks/Pulumi.dev.yaml
    key: str  # the full key the line must name
    shown: str  # the value as the line shows it (strings quoted, numbers and lists as JSON)
    rule: str  # a part of the rule the line must state


# dev's relevant values: nodeMaxCount 4 (1..100), workers 2 (1..2), on-demand.
TABLE = [
    # types
    Bad("int-not-a-number", ("nodeMaxCount=three",), f"{P}:nodeMaxCount", "'three'", "must be a whole number"),
    Bad("int-fraction", ("workers=2.5",), f"{P}:workers", "'2.5'", "must be a whole number"),
    Bad(
        "number-not-a-number",
        ("minAccuracy=high",),
        f"{P}:minAccuracy",
        "'high'",
        "must be a decimal number such as 0.7",
    ),
    Bad("number-exponent", ("minAccuracy=7e-1",), f"{P}:minAccuracy", "'7e-1'", "must be a decimal number such as 0.7"),
    Bad("number-percent", ("minAccuracy=70%",), f"{P}:minAccuracy", "'70%'", "must be a decimal number such as 0.7"),
    Bad("bool-yes", ("retainData=yes",), f"{P}:retainData", "'yes'", "must be true or false"),
    Bad("bool-capitalised", ("retainData=True",), f"{P}:retainData", "'True'", "must be true or false"),
    Bad(
        "list-not-json",
        ("apiAllowedCidrs=203.0.113.0/24",),
        f"{P}:apiAllowedCidrs",
        "'203.0.113.0/24'",
        "must be a JSON list of strings",
    ),
    Bad(
        "list-of-numbers",
        ("clusterAdminArns=[1, 2]",),
        f"{P}:clusterAdminArns",
        "'[1, 2]'",
        "must be a JSON list of strings",
    ),
    # ranges
    Bad("zero-nodes", ("nodeMaxCount=0",), f"{P}:nodeMaxCount", "0", "must be between 1 and 100"),
    Bad("five-zones", ("availabilityZoneCount=5",), f"{P}:availabilityZoneCount", "5", "must be between 2 and 4"),
    Bad(
        "run-cost-ceiling-not-dollars",
        ("maxRunCostUsd=$5",),
        f"{P}:maxRunCostUsd",
        "'$5'",
        'must be an amount of US dollars such as 5 or 2.50, or "" for no ceiling',
    ),
    Bad(
        "run-cost-ceiling-zero",
        ("maxRunCostUsd=0",),
        f"{P}:maxRunCostUsd",
        "0",
        'must be more than 0 (or "" for no ceiling)',
    ),
    Bad(
        "accuracy-above-one",
        ("minAccuracy=1.5",),
        f"{P}:minAccuracy",
        "1.5",
        "must be between 0 and 1 (a fraction: 0.7 means 70 %)",
    ),
    # As the user wrote it, not the parsed float's 70.0 (issue 39).
    Bad(
        "accuracy-percentage",
        ("minAccuracy=70",),
        f"{P}:minAccuracy",
        "70",
        "must be between 0 and 1 (a fraction: 0.7 means 70 %)",
    ),
    Bad(
        "accuracy-leading-point",
        ("minAccuracy=.95e",),
        f"{P}:minAccuracy",
        "'.95e'",
        "must be a decimal number such as 0.7",
    ),
    Bad(
        "gate-percentage",
        ("minGate=95.50",),
        f"{P}:minGate",
        "95.5",
        "must be between 0 and 1 with the CIFAR-10 test command (testCommand empty)",
    ),
    Bad("accuracy-negative", ("minAccuracy=-0.1",), f"{P}:minAccuracy", "-0.1", "must be between 0 and 1"),
    Bad("accuracy-nan", ("minAccuracy=nan",), f"{P}:minAccuracy", "'nan'", "must be a decimal number such as 0.7"),
    Bad("negative-restarts", ("maxRestarts=-1",), f"{P}:maxRestarts", "-1", "must be between 0 and 100"),
    Bad("negative-epochs", ("epochs=-1",), f"{P}:epochs", "-1", "must be between 1 and 1000"),
    Bad("short-deadline", ("jobTimeoutMinutes=1",), f"{P}:jobTimeoutMinutes", "1", "must be between 5 and 10080"),
    Bad("tiny-disk", ("nodeDiskGiB=10",), f"{P}:nodeDiskGiB", "10", "must be between 20 and 16384"),
    # every relation
    Bad("min-workers-above-workers", ("minWorkers=3",), f"{P}:minWorkers", "3", "must be <= workers (2)"),
    Bad("workers-above-max", ("workers=3",), f"{P}:workers", "3", "must be <= maxWorkers (2)"),
    Bad(
        "workers-above-nodes",
        ("minWorkers=5", "workers=5", "maxWorkers=5"),
        f"{P}:minWorkers",
        "5",
        "must be <= nodeMaxCount (4): each worker takes a whole node, the most the worker pool's limits allow",
    ),
    # worker capacity (infra/config/capacity.py)
    Bad(
        "capacity-type-unknown",
        ("capacityType=preemptible",),
        f"{P}:capacityType",
        "'preemptible'",
        "must be one of on-demand, spot",
    ),
    Bad(
        "spot-with-one-type",
        ("capacityType=spot", "nodeInstanceTypes=[\"c5.4xlarge\"]", "maxRestarts=24"),
        f"{P}:capacityType",
        "'spot'",
        "needs at least two instance types of one shape",
    ),
    Bad(
        "pool-type-of-another-shape",
        ("nodeInstanceTypes=[\"c5.4xlarge\", \"m5.4xlarge\"]",),
        f"{P}:nodeInstanceTypes",
        '["c5.4xlarge", "m5.4xlarge"]',
        "m5.4xlarge (16 vCPUs, 64 GiB) is not of nodeInstanceType c5.4xlarge's shape",
    ),
    Bad(
        "pool-without-the-node-type",
        ("nodeInstanceTypes=[\"c5a.4xlarge\", \"c5d.4xlarge\"]",),
        f"{P}:nodeInstanceTypes",
        '["c5a.4xlarge", "c5d.4xlarge"]',
        "must include nodeInstanceType (c5.4xlarge)",
    ),
    Bad(
        "pool-graviton",
        ("nodeInstanceTypes=[\"c6g.4xlarge\"]",),
        f"{P}:nodeInstanceTypes",
        '["c6g.4xlarge"]',
        "must be an x86-64 instance type",
    ),
    Bad(
        "spot-grace-past-the-notice",
        ("capacityType=spot", "workerGraceSeconds=91", "maxRestarts=24"),
        f"{P}:workerGraceSeconds",
        "91",
        "must be <= 90 with capacityType spot",
    ),
    Bad(
        "spot-too-few-restarts",
        ("capacityType=spot", "maxRestarts=23"),
        f"{P}:maxRestarts",
        "23",
        "must be >= 24 with capacityType spot",
    ),
    Bad(
        "grace-below-torchrun-shutdown",
        ("workerGraceSeconds=30",),
        f"{P}:workerGraceSeconds",
        "30",
        "must be between 45 and 3600",
    ),
    Bad("max-workers-above-max-nodes", ("maxWorkers=5",), f"{P}:maxWorkers", "5", "must be <= nodeMaxCount (4)"),
    Bad(
        "md5-with-synthetic-data",
        ("dataSource=synthetic", "dataMd5=" + "0" * 32),
        f"{P}:dataMd5",
        repr("0" * 32),
        "must be empty when dataSource is synthetic",
    ),
    # DNS-1123 names and runId
    Bad("namespace-uppercase", ("namespace=Training",), f"{P}:namespace", "'Training'", "must be a DNS-1123 label"),
    Bad(
        "namespace-system",
        ("namespace=kube-system",),
        f"{P}:namespace",
        "'kube-system'",
        "must not be one of default, kube-system",
    ),
    Bad(
        "namespace-old-controllers",
        ("namespace=elastic-job",),
        f"{P}:namespace",
        repr("elastic-job"),
        "must not be one of",
    ),
    Bad("pvc-leading-dash", ("pvcName=-efs",), f"{P}:pvcName", "'-efs'", "must be a DNS-1123 label"),
    Bad(
        "storage-class-dot",
        ("storageClassName=efs.sc",),
        f"{P}:storageClassName",
        "'efs.sc'",
        "must be a DNS-1123 label",
    ),
    Bad("run-id-underscore", ("runId=run_1",), f"{P}:runId", "'run_1'", "must be a DNS-1123 label"),
    Bad("run-id-too-long", ("runId=" + "r" * 41,), f"{P}:runId", repr("r" * 41), "at most 40 characters"),
    Bad("run-id-trailing-newline", ("runId=run-1\n",), f"{P}:runId", "'run-1\\n'", "must be a DNS-1123 label"),
    # CIDR syntax and IPv6
    Bad(
        "cidr-host-bits",
        ('apiAllowedCidrs=["10.0.0.1/8"]',),
        f"{P}:apiAllowedCidrs",
        '["10.0.0.1/8"]',
        "'10.0.0.1/8' is not a CIDR block with its host bits zero",
    ),
    Bad(
        "cidr-garbage",
        ('apiAllowedCidrs=["office"]',),
        f"{P}:apiAllowedCidrs",
        '["office"]',
        "'office' is not a CIDR block",
    ),
    Bad("cidr-ipv6", ('apiAllowedCidrs=["2001:db8::/32"]',), f"{P}:apiAllowedCidrs", '["2001:db8::/32"]', "is IPv6"),
    Bad("cidr-empty", ("apiAllowedCidrs=[]",), f"{P}:apiAllowedCidrs", "[]", "must list at least one CIDR block"),
    # instance type shape and Graviton
    Bad("instance-no-size", ("nodeInstanceType=c5",), f"{P}:nodeInstanceType", "'c5'", "must be an EC2 instance type"),
    Bad(
        "instance-uppercase",
        ("nodeInstanceType=C5.4XLARGE",),
        f"{P}:nodeInstanceType",
        "'C5.4XLARGE'",
        "is not an EC2 instance type offered for Linux; did you mean c5.4xlarge",
    ),
    Bad(
        "instance-misspelt",
        ("nodeInstanceType=c5.4xlarg",),
        f"{P}:nodeInstanceType",
        "'c5.4xlarg'",
        "is not an EC2 instance type offered for Linux; did you mean c5.4xlarge",
    ),
    Bad(
        "system-instance-misspelt",
        ("systemNodeInstanceType=m5.larg",),
        f"{P}:systemNodeInstanceType",
        "'m5.larg'",
        "is not an EC2 instance type offered for Linux; did you mean m5.large",
    ),
    Bad(
        "instance-graviton",
        ("nodeInstanceType=m6g.xlarge",),
        f"{P}:nodeInstanceType",
        "'m6g.xlarge'",
        "must be an x86-64 instance type",
    ),
    Bad(
        "instance-graviton-1",
        ("nodeInstanceType=a1.large",),
        f"{P}:nodeInstanceType",
        "'a1.large'",
        "must be an x86-64 instance type",
    ),
    # Kubernetes version, region, IAM principals
    Bad(
        "kubernetes-too-old",
        ("kubernetesVersion=1.20",),
        f"{P}:kubernetesVersion",
        "'1.20'",
        # Only the versions EKS still creates today (issue 39: the list once named one it refused).
        "must be one of "
        + ", ".join(
            v
            for v in versions.SUPPORTED_KUBERNETES_VERSIONS
            if versions.eks_support_phase(v, date.today()) != versions.ENDED
        ),
    ),
    Bad(
        "kubernetes-patch-version",
        ("kubernetesVersion=1.33.1",),
        f"{P}:kubernetesVersion",
        "'1.33.1'",
        "must be one of",
    ),
    Bad("region-no-number", ("aws:region=us-west",), "aws:region", "'us-west'", "must be set to an AWS region"),
    Bad("region-is-a-zone", ("aws:region=us-west-2a",), "aws:region", "'us-west-2a'", "must be set to an AWS region"),
    Bad("region-govcloud", ("aws:region=us-gov-west-1",), "aws:region", "'us-gov-west-1'", "commercial aws partition"),
    Bad("region-china", ("aws:region=cn-north-1",), "aws:region", "'cn-north-1'", "commercial aws partition"),
    Bad(
        "region-iso",
        ("aws:region=us-iso-east-1",),
        "aws:region",
        "'us-iso-east-1'",
        "a region of the aws-iso partition",
    ),
    # Typos a pattern lets through: checked against botocore's partition data, with a suggestion.
    Bad("region-typo", ("aws:region=us-weest-2",), "aws:region", "'us-weest-2'", "(did you mean us-west-2?)"),
    Bad(
        "region-no-such-number", ("aws:region=us-west-9",), "aws:region", "'us-west-9'", "must be set to an AWS region"
    ),
    Bad(
        "admin-arn-short-account",
        ('clusterAdminArns=["arn:aws:iam::123:role/admin"]',),
        f"{P}:clusterAdminArns",
        '["arn:aws:iam::123:role/admin"]',
        "is not an IAM role or user ARN",
    ),
    Bad(
        "log-retention-not-offered",
        ("logRetentionDays=10",),
        f"{P}:logRetentionDays",
        "10",
        "must be a retention CloudWatch Logs accepts: one of 1, 3, 5, 7, 14, 30,",
    ),
    Bad(
        "log-retention-never",
        ("logRetentionDays=0",),
        f"{P}:logRetentionDays",
        "0",
        "must be a retention CloudWatch Logs accepts",
    ),
    # unknown key (a typo)
    Bad("typo-key", ("nodeMaxCont=3",), f"{P}:nodeMaxCont", "'3'", "unknown key (did you mean nodeMaxCount?)"),
    # imageUri, dataSource, dataMd5, quantities
    Bad(
        "image-no-registry",
        ("imageUri=trainer:latest",),
        f"{P}:imageUri",
        "'trainer:latest'",
        "must be empty (build images/",
    ),
    Bad(
        "image-short-digest",
        ("imageUri=123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:abc",),
        f"{P}:imageUri",
        "'123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:abc'",
        "registry/repo[:tag][@sha256:<digest>]",
    ),
    Bad(
        "data-plain-http",
        ("dataSource=http://example.com/cifar-10-python.tar.gz",),
        f"{P}:dataSource",
        "'http://example.com/cifar-10-python.tar.gz'",
        "must be an https:// or s3:// URL",
    ),
    Bad(
        "data-ftp",
        ("dataSource=ftp://example.com/cifar.tar.gz",),
        f"{P}:dataSource",
        "'ftp://example.com/cifar.tar.gz'",
        "must be an https:// or s3:// URL",
    ),
    Bad(
        "data-url-without-path",
        ("dataSource=s3://bucket",),
        f"{P}:dataSource",
        "'s3://bucket'",
        "must be an https:// or s3:// URL",
    ),
    Bad(
        "data-synthetic-zero",
        ("dataSource=synthetic:0",),
        f"{P}:dataSource",
        "'synthetic:0'",
        "'synthetic:<images per class>'",
    ),
    Bad(
        "data-synthetic-too-many",
        ("dataSource=synthetic:5001",),
        f"{P}:dataSource",
        "'synthetic:5001'",
        "'synthetic:<images per class>'",
    ),
    Bad(
        "md5-uppercase",
        ("dataMd5=" + CIFAR10_MD5.upper(),),
        f"{P}:dataMd5",
        repr(CIFAR10_MD5.upper()),
        "must be empty or 32 lowercase hex digits",
    ),
    Bad("md5-short", ("dataMd5=1234",), f"{P}:dataMd5", "'1234'", "must be empty or 32 lowercase hex digits"),
    Bad("cpu-word", ("workerCpu=15cores",), f"{P}:workerCpu", "'15cores'", "must be a CPU quantity above zero"),
    Bad(
        "memory-gb", ("workerMemory=24GB",), f"{P}:workerMemory", "'24GB'", "must be a memory quantity of at least 1Gi"
    ),
    Bad("memory-bytes", ("workerMemory=24",), f"{P}:workerMemory", "'24'", "24 without a unit is 24 bytes"),
    Bad("memory-millis", ("workerMemory=500m",), f"{P}:workerMemory", "'500m'", "the unit m is thousandths"),
    Bad("memory-small", ("workerMemory=24Mi",), f"{P}:workerMemory", "'24Mi'", "24Mi is 24 MiB"),
    Bad("cpu-zero", ("workerCpu=0",), f"{P}:workerCpu", "'0'", "must be a CPU quantity above zero"),
    # target existing (issue 10) and the storage keys
    Bad("target-unknown", ("target=gke",), f"{P}:target", "'gke'", "must be one of eks, existing"),
    Bad("region-empty-on-eks", ("aws:region=",), "aws:region", "''", "must be set to an AWS region"),
    Bad("kubeconfig-empty", ("kubeconfig=",), f"{P}:kubeconfig", "''", "must be the path of a kubeconfig file"),
    Bad(
        "kube-context-blank",
        ("kubeContext= ",),
        f"{P}:kubeContext",
        "' '",
        "must be empty (the current context) or a context name",
    ),
    Bad(
        "access-mode-unknown",
        ("storageAccessMode=RWO",),
        f"{P}:storageAccessMode",
        "'RWO'",
        "must be one of ReadWriteMany, ReadWriteOnce",
    ),
    Bad(
        "rwo-on-eks",
        ("storageAccessMode=ReadWriteOnce", "workersPerNode=2"),
        f"{P}:storageAccessMode",
        "'ReadWriteOnce'",
        "must be ReadWriteMany with target eks",
    ),
    Bad("workers-per-node-zero", ("workersPerNode=0",), f"{P}:workersPerNode", "0", "must be between 1 and 100"),
    Bad(
        "workers-above-nodes-times-per-node",
        ("workersPerNode=2", "workers=5", "maxWorkers=9", "nodeMaxCount=4"),
        f"{P}:maxWorkers",
        "9",
        "must be <= nodeMaxCount (4) x workersPerNode (2)",
    ),
    Bad(
        "existing-rwo-workers-spread",
        ("target=existing", "imageUri=docker.io/library/trainer:1", "storageAccessMode=ReadWriteOnce"),
        f"{P}:workersPerNode",
        "1",
        "must be >= maxWorkers (2) with storageAccessMode ReadWriteOnce",
    ),
    Bad("existing-without-image", ("target=existing",), f"{P}:imageUri", "''", "must be set with target existing"),
    Bad(
        "existing-latest-image",
        ("target=existing", "imageUri=docker.io/library/trainer:latest"),
        f"{P}:imageUri",
        "'docker.io/library/trainer:latest'",
        "must name a tag other than latest, or a digest, with target existing",
    ),
    Bad(
        "existing-untagged-image",
        ("target=existing", "imageUri=localhost:5000/trainer"),
        f"{P}:imageUri",
        "'localhost:5000/trainer'",
        "must name a tag other than latest",
    ),
    Bad(
        "existing-s3-data",
        ("target=existing", "imageUri=docker.io/library/trainer:1", "dataSource=s3://bucket/cifar.tar.gz"),
        f"{P}:dataSource",
        "'s3://bucket/cifar.tar.gz'",
        "must not be an s3:// URL with target existing",
    ),
    # GPU stacks (infra/aws/gpu_instances.py, moto's EC2 instance data): whole NVIDIA GPUs only
    Bad(
        "gpu-fractional",
        ("nodeInstanceType=g6f.xlarge",),
        f"{P}:nodeInstanceType",
        "'g6f.xlarge'",
        "is a GPU type that is not an x86-64 type with whole NVIDIA GPUs",
    ),
    Bad(
        "gpu-unknown-type",
        ("nodeInstanceType=p2.xlarge",),
        f"{P}:nodeInstanceType",
        "'p2.xlarge'",
        "is a GPU type that is not an x86-64 type with whole NVIDIA GPUs",
    ),
    # GPUs the nodes cannot train on (infra/aws/nvidia_gpus.py): G7 needs driver 595, the AMI has 580;
    # Volta has no kernels in the CUDA 13 torch
    Bad(
        "gpu-g7-driver",
        ("nodeInstanceType=g7.2xlarge",),
        f"{P}:nodeInstanceType",
        "'g7.2xlarge'",
        "need NVIDIA driver 595 or later; the EKS NVIDIA AMI the nodes boot ships 580: pick g7e",
    ),
    Bad(
        "gpu-volta-p3dn",
        ("nodeInstanceType=p3dn.24xlarge",),
        f"{P}:nodeInstanceType",
        "'p3dn.24xlarge'",
        "has Volta GPUs (V100, compute capability 7.0), for which PyPI's CUDA 13 torch has no kernels",
    ),
    Bad(
        "gpu-volta-p3",
        ("nodeInstanceType=p3.2xlarge",),
        f"{P}:nodeInstanceType",
        "'p3.2xlarge'",
        "has Volta GPUs (V100, compute capability 7.0)",
    ),
    Bad(
        "system-nodes-gpu",
        ("systemNodeInstanceType=g6.xlarge",),
        f"{P}:systemNodeInstanceType",
        "'g6.xlarge'",
        "must be a CPU instance type",
    ),
    Bad(
        "system-nodes-graviton",
        ("systemNodeInstanceType=m6g.large",),
        f"{P}:systemNodeInstanceType",
        "'m6g.large'",
        "must be an x86-64 instance type",
    ),
    Bad("system-count-zero", ("systemNodeCount=0",), f"{P}:systemNodeCount", "0", "must be between 1 and 10"),
    Bad("variant-unknown", ("imageVariant=rocm",), f"{P}:imageVariant", "'rocm'", "must be one of , cpu, cuda"),
    Bad(
        "variant-cuda-on-cpu-nodes",
        ("imageVariant=cuda",),
        f"{P}:imageVariant",
        "'cuda'",
        "must be cpu or empty: nodeInstanceType c5.4xlarge has no GPUs",
    ),
    Bad(
        "variant-cpu-on-gpu-nodes",
        ("nodeInstanceType=g6.xlarge", "workerCpu=3", "workerMemory=12Gi", "imageVariant=cpu"),
        f"{P}:imageVariant",
        "'cpu'",
        "must be cuda or empty: nodeInstanceType g6.xlarge has NVIDIA GPUs",
    ),
    Bad(
        "variant-undeclared-image-on-gpu",
        (
            "nodeInstanceType=g6.xlarge",
            "workerCpu=3",
            "workerMemory=12Gi",
            "imageUri=123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v1",
        ),
        f"{P}:imageVariant",
        "''",
        "must be cuda when imageUri is given on a GPU stack",
    ),
    Bad(
        "gpu-worker-memory-above-node",
        ("nodeInstanceType=g6.xlarge", "workerCpu=3"),
        f"{P}:workerMemory",
        "'24Gi'",
        "must be at most 13944Mi for 1 worker per node: one g6.xlarge node gives pods 13944Mi of its 16384 MiB",
    ),
    Bad(
        "gpu-worker-shm-too-small",
        ("nodeInstanceType=g6.xlarge", "workerCpu=3", "workerMemory=3Gi"),
        f"{P}:workerMemory",
        "'3Gi'",
        "must be at least 4096Mi on GPU nodes",
    ),
    Bad(
        "gpu-worker-cpu-above-node",
        ("nodeInstanceType=g6.xlarge", "workerMemory=12Gi"),
        f"{P}:workerCpu",
        "'15'",
        "must be at most 3690m for 1 worker per node: one g6.xlarge node gives pods 3690m of its 4 vCPUs",
    ),
    # Every worker fits its node (issue 26; infra/config/node_fit.py): dev's c5.4xlarge gives pods 15710m and 27227Mi.
    Bad(
        "cpu-worker-above-node",
        ("workerCpu=64",),
        f"{P}:workerCpu",
        "'64'",
        "must be at most 15710m for 1 worker per node: one c5.4xlarge node gives pods 15710m of its 16 vCPUs "
        "(the kubelet keeps 110m, the node's DaemonSets request 180m)",
    ),
    Bad("cpu-worker-40-digits", ("workerCpu=" + "9" * 40,), f"{P}:workerCpu", repr("9" * 40), "must be at most 15710m"),
    Bad(
        "cpu-worker-memory-above-node",
        ("workerMemory=27332Mi",),
        f"{P}:workerMemory",
        "'27332Mi'",
        "must be at most 27227Mi for 1 worker per node",
    ),
    Bad(
        "workers-per-node-do-not-fit",
        ("workersPerNode=2",),
        f"{P}:workerCpu",
        "'15'",
        "must be at most 7855m for 2 workers per node",
    ),
    Bad(
        "side-jobs-above-system-node",
        ("nodeInstanceType=g6.xlarge", "workerCpu=3", "workerMemory=12Gi", "systemNodeInstanceType=c5.large"),
        f"{P}:systemNodeInstanceType",
        "'c5.large'",
        "must leave the data-prep, test and export Jobs 500m and 4096Mi on one of the 2 c5.large system nodes",
    ),
    # References and keys that mean nothing on eks
    Bad(
        "image-not-a-reference",
        ("imageUri=../../etc/passwd",),
        f"{P}:imageUri",
        "'../../etc/passwd'",
        "(distribution reference grammar: invalid reference format)",
    ),
    Bad(
        "image-uppercase-repository",
        ("imageUri=registry.example/Trainer:1",),
        f"{P}:imageUri",
        "'registry.example/Trainer:1'",
        "(distribution reference grammar: repository name must be lowercase)",
    ),
    Bad(
        "kubeconfig-on-eks",
        ("kubeconfig=~/.kube/other",),
        f"{P}:kubeconfig",
        "'~/.kube/other'",
        "must not be set with target eks",
    ),
    Bad(
        "kube-context-on-eks",
        ("kubeContext=kind-elastic-training",),
        f"{P}:kubeContext",
        "'kind-elastic-training'",
        "must not be set with target eks",
    ),
]
# The same failures through the real command line, one per kind of rule.
IN_A_SUBPROCESS = {
    "int-not-a-number",
    "workers-above-nodes",
    "cidr-ipv6",
    "region-typo",
    "typo-key",
    "existing-rwo-workers-spread",
}


def argv(row: Bad, out) -> list[str]:
    args = ["dev", "--out", str(out)]
    for override in row.overrides:
        args += ["-c", override]
    return args


def assert_one_clear_line(row: Bad, stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{stderr}"
    assert lines[0].startswith(f"error: config {row.key}={row.shown} is invalid: "), lines[0]
    assert row.rule in lines[0], lines[0]


def test_the_table_covers_the_issue():
    assert len(TABLE) >= 25 and len({row.id for row in TABLE}) == len(TABLE)
    keys = {row.key for row in TABLE}
    for needed in (
        "nodeMaxCount",
        "capacityType",
        "nodeInstanceTypes",
        "workerGraceSeconds",
        "maxRestarts",
        "minWorkers",
        "workers",
        "maxWorkers",
        "runId",
        "namespace",
        "apiAllowedCidrs",
        "nodeInstanceType",
        "kubernetesVersion",
        "imageUri",
        "dataSource",
        "dataMd5",
        "workerCpu",
        "workerMemory",
        "logRetentionDays",
        "target",
        "kubeconfig",
        "kubeContext",
        "storageAccessMode",
        "workersPerNode",
    ):
        assert f"{P}:{needed}" in keys, needed
    assert "aws:region" in keys
    assert IN_A_SUBPROCESS <= {row.id for row in TABLE}


@pytest.mark.parametrize("row", [row for row in TABLE if row.id not in IN_A_SUBPROCESS], ids=lambda row: row.id)
def test_bad_value_in_process(row, tmp_path, capsys, monkeypatch):
    registered = []
    # Nothing may reach the Pulumi program: a call here means resources would be registered.
    monkeypatch.setattr(infra.cli.synth, "run_program", lambda settings: registered.append(settings) or ([], {}))
    out = tmp_path / "out"
    status = infra.cli.synth.main(argv(row, out))
    captured = capsys.readouterr()
    assert status == 2
    assert_one_clear_line(row, captured.err)
    assert captured.out == ""
    assert registered == []
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("row", [row for row in TABLE if row.id in IN_A_SUBPROCESS], ids=lambda row: row.id)
def test_bad_value_through_the_command(row, tmp_path):
    require_tool(PYTHON)
    out = tmp_path / "out"
    result = subprocess.run(
        [str(PYTHON), "-m", "infra.cli", "synth", *argv(row, out)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result
    assert_one_clear_line(row, result.stderr)
    assert result.stdout == ""
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "typo, meant",
    [
        ("nodeMaxCont", "nodeMaxCount"),
        ("minWorker", "minWorkers"),
        ("retaindata", "retainData"),
        ("imageURI", "imageUri"),
    ],
)
def test_a_typo_is_reported_with_did_you_mean(typo, meant, tmp_path, capsys):
    assert infra.cli.synth.main(["dev", "--out", str(tmp_path / "out"), "-c", f"{typo}=3"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"error: config {P}:{typo}='3' is invalid: unknown key (did you mean {meant}?)"


def test_an_unknown_key_far_from_any_lists_the_known_keys(tmp_path, capsys):
    assert infra.cli.synth.main(["dev", "--out", str(tmp_path / "out"), "-c", "colour=blue"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"error: config {P}:colour='blue' is invalid: unknown key (known keys: target, kubeconfig, kubeContext, availabilityZoneCount, "
    )


def test_first_problem_wins_and_is_the_only_line(tmp_path, capsys):
    """Several bad values: the first in key order is reported, still on one line."""
    assert (
        infra.cli.synth.main(["dev", "--out", str(tmp_path / "out"), "-c", "nodeMaxCount=zero", "-c", "runId=Bad_Id"])
        == 2
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: config {P}:nodeMaxCount='zero' is invalid")


def test_good_overrides_still_pass_the_rules(tmp_path, capsys, monkeypatch):
    """The rules refuse the table, not the values people use. A day on which every allowed
    Kubernetes version is still offered by EKS (1.31's extended support ends 2026-11-26)."""
    monkeypatch.setattr(infra.cli.synth, "run_program", lambda settings: ([], {}))
    monkeypatch.setattr(infra.cli.synth, "load_settings", partial(load_settings, today=date(2026, 11, 25)))
    good = [
        "nodeInstanceType=g5.12xlarge",
        "nodeInstanceType=m5.4xlarge",
        "dataSource=s3://my-bucket/cifar.tar.gz",
        "dataSource=synthetic:500",
        "dataMd5=",
        "workerCpu=500m",
        "workerMemory=1.5Gi",
        "runId=" + "r" * 40,
        'apiAllowedCidrs=["203.0.113.0/24","198.51.100.7/32"]',
        "kubernetesVersion=" + versions.SUPPORTED_KUBERNETES_VERSIONS[0],
        "imageUri=123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "a" * 64,
        "aws:region=eu-central-1",
        "logRetentionDays=3653",
        "systemNodeInstanceType=m5.xlarge",
        "systemNodeCount=10",
        "imageVariant=cpu",
    ]
    for override in good:
        out = tmp_path / "out"
        assert infra.cli.synth.main(["dev", "--out", str(out), "-c", override]) == 0, (
            override,
            capsys.readouterr().err,
        )
        assert "error" not in capsys.readouterr().err


def test_reserved_namespaces_include_the_archived_controllers():
    assert "elastic-job" in RESERVED_NAMESPACES and "kube-system" in RESERVED_NAMESPACES


# Values in a stack file that the Pulumi CLI itself refuses (tests/pulumi_cli_model.py): synth refuses
# them too, although PyYAML alone would have read `yes` as a boolean and the JSON text as a list.
IN_A_STACK_FILE = [
    ("retainData: yes", f"{P}:retainData", "'yes'", "must be true or false"),
    (
        "apiAllowedCidrs: '[\"203.0.113.0/24\"]'",
        f"{P}:apiAllowedCidrs",
        """'["203.0.113.0/24"]'""",
        "must be a YAML list in the stack file",
    ),
    (
        "clusterAdminArns: arn:aws:iam::123456789012:role/admin",
        f"{P}:clusterAdminArns",
        "'arn:aws:iam::123456789012:role/admin'",
        "must be a YAML list in the stack file",
    ),
    ("runId: 2026-01-01", f"{P}:runId", "'2026-01-01'", "must be quoted: unquoted, YAML reads it as a date"),
]


@pytest.mark.parametrize(
    "line, key, shown, rule", IN_A_STACK_FILE, ids=[row[0].split(":")[0] for row in IN_A_STACK_FILE]
)
def test_a_stack_file_value_the_pulumi_cli_refuses(line, key, shown, rule, tmp_path, capsys, monkeypatch):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    # the value in place of the stack's own, if it has one: a key twice is refused on its own account
    kept = [
        text
        for text in (REPO / "stacks" / "Pulumi.dev.yaml").read_text().splitlines()
        if not text.strip().startswith(f"{key}:")
    ]
    (stacks / "Pulumi.dev.yaml").write_text("\n".join(kept) + f"\n  {P}:{line}\n")
    monkeypatch.setattr(
        infra.cli.synth, "read_stack_file", lambda stack, stacks_dir=None: read_stack_file(stack, stacks)
    )
    monkeypatch.setattr(infra.cli.synth, "run_program", lambda settings: pytest.fail("the program ran"))
    out = tmp_path / "out"
    assert infra.cli.synth.main(["dev", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert_one_clear_line(Bad(line, (), key, shown, rule), captured.err)
    assert captured.out == "" and not out.exists()
