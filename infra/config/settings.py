"""Stack configuration: every key, its type, default, description and rule, validated once.

`load_settings()` turns the raw stack config (what `pulumi config` holds) into a frozen
`Settings` before any resource is registered. A bad value raises `ConfigError`, whose text is
one line naming the key, the value and what is allowed; the program and `synth` print that
line and stop, with no traceback.

`CONFIG_KEYS` is the single list of project keys: `Pulumi.yaml`'s config schema and the
docs/configuration.md's table are checked against it by the tests.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Mapping

from infra.aws import gpu_instances, instance_catalog, instance_shapes, regions, zones
from infra.config import capacity
from infra.config.errors import ConfigError, Written
from infra.config.provider_keys import check_aws_keys
from infra.config.keys import CONFIG_KEYS, CPU, CUDA, EKS, EXISTING, KEYS_BY_NAME, PROJECT
from infra.config.relations import check_existing, check_relations, kubernetes_support


@dataclass(frozen=True)
class Settings:
    """Validated, typed stack settings: what components receive instead of raw config."""

    project: str
    stack: str
    region: str  # "" for target existing without aws:region: nothing there talks to AWS
    target: str
    kubeconfig: str
    kube_context: str
    availability_zone_count: int
    kubernetes_version: str
    node_instance_type: str
    node_instance_types: tuple[str, ...]
    capacity_type: str
    node_max_count: int
    system_node_instance_type: str
    system_node_count: int
    node_disk_gib: int
    api_allowed_cidrs: tuple[str, ...]
    cluster_admin_arns: tuple[str, ...]
    log_retention_days: int
    namespace: str
    storage_class_name: str
    storage_access_mode: str
    persistent_volume_name: str
    pvc_name: str
    retain_data: bool
    image_uri: str
    image_variant: str
    data_source: str
    data_md5: str
    run_id: str
    workers: int
    workers_per_node: int
    min_workers: int
    max_workers: int
    max_restarts: int
    worker_grace_seconds: int
    checkpoint_every_seconds: int
    epochs: int
    batch_size: int
    precision: str
    min_accuracy: float
    worker_cpu: str
    worker_memory: str
    job_timeout_minutes: int
    max_run_cost_usd: float | None
    training_command: tuple[str, ...]
    image_context: str
    data_prep_command: tuple[str, ...]
    test_command: tuple[str, ...]
    gate_metric: str
    min_gate: float | None
    warnings: tuple[str, ...] = ()


def load_settings(raw: Mapping[str, str], stack: str, today: date | None = None) -> Settings:
    """Validate `raw` (full keys such as "elastic-training:workers" -> string) into Settings.

    Raises ConfigError on the first problem, in CONFIG_KEYS order, then relations. `today` (UTC,
    default: the real date) decides the Kubernetes version's EKS support phase.
    """
    _reject_unknown_keys(raw)
    check_aws_keys(raw)
    values: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        full = f"{PROJECT}:{key.name}"
        if full not in raw:
            values[key.field] = key.default_value
            continue
        text = raw[full]
        try:
            value = key.parse_text(text)
        except ValueError as err:
            raise ConfigError(full, text, str(err)) from None
        problem = key.rule(value) if key.rule else None
        if problem:
            # A decimal key's value as the user wrote it (70, not the float's 70.0).
            raise ConfigError(full, Written(text.strip()) if isinstance(value, float) else value, problem)
        values[key.field] = value

    region = raw.get("aws:region", "")
    # target existing creates nothing in AWS and calls no AWS API, so it needs no region; one that
    # is set anyway is still checked (a typo should not wait until someone switches to eks).
    if not region and values["target"] == EKS:
        raise ConfigError(
            "aws:region",
            region,
            "must be set to an AWS region of the commercial aws partition "
            "such as us-west-2 (pulumi config set aws:region us-west-2)",
        )
    # Regions of the commercial `aws` partition only, as botocore's partition data lists them.
    problem = regions.region_problem(region) if region else None
    if problem:
        raise ConfigError("aws:region", region, problem)

    warnings = check_relations(values)
    if values["target"] == EKS:
        warnings += _zone_count_warning(region, values["availability_zone_count"])
    if values["target"] == EXISTING:
        check_existing(values)
    if values["target"] == EKS:
        support_warning = kubernetes_support(
            values["kubernetes_version"], today if today is not None else datetime.now(timezone.utc).date()
        )
        if support_warning:
            warnings.append(support_warning)
    if values["target"] == EKS and "0.0.0.0/0" in values["api_allowed_cidrs"]:
        warnings.append(
            f"config {PROJECT}:apiAllowedCidrs includes 0.0.0.0/0: the Kubernetes API endpoint is reachable "
            "from the whole internet (still authenticated by IAM); list your own ranges to close it"
        )
    for field in (
        "api_allowed_cidrs",
        "cluster_admin_arns",
        "node_instance_types",
        "training_command",
        "data_prep_command",
        "test_command",
    ):
        values[field] = tuple(values[field])
    return Settings(project=PROJECT, stack=stack, region=region, warnings=tuple(warnings), **values)


# The config namespaces a stack of this project can mean: the project's own, the providers the program
# uses (pyproject.toml's infra extra: pulumi-aws, pulumi-kubernetes, pulumi-eks, pulumi-docker-build; the
# namespace is the provider's package name) and Pulumi's own `pulumi:` settings. Any other is a typo
# (`elastic_training:workers`) that every layer would ignore.
NAMESPACES = (PROJECT, "aws", "kubernetes", "eks", "docker-build", "pulumi")


def _zone_count_warning(region: str, count: int) -> list[str]:
    """A warning when the zones known offline (the price table's, less those EKS refuses) are fewer than
    availabilityZoneCount: `pulumi up` then fails when it picks the zones, after synth said nothing."""
    known = sorted(instance_catalog.zone_ids(region) - zones.EKS_REFUSED_ZONE_IDS)
    if not known or len(known) >= count:
        return []
    return [
        f"config {PROJECT}:availabilityZoneCount={count} but the zones known in {region} that EKS accepts are "
        f"{len(known)} ({', '.join(known)}; infra/aws/data, less the zone IDs EKS refuses): `pulumi up` fails if the "
        f"account has fewer usable zones; `elastic-training preflight` counts them, or set availabilityZoneCount "
        f"to {len(known)}"
    ]


def _reject_unknown_keys(raw: Mapping[str, str]) -> None:
    prefix = f"{PROJECT}:"
    for full in sorted(raw):
        namespace, _, name = full.partition(":")
        if namespace not in NAMESPACES:
            close = difflib.get_close_matches(namespace, NAMESPACES, n=1, cutoff=0.6)
            hint = (
                f"did you mean {close[0]}:{name}?"
                if close
                else f"namespaces this program reads: {', '.join(NAMESPACES)}"
            )
            raise ConfigError(full, raw[full], f"unknown config namespace '{namespace}' ({hint})")
        if full.startswith(prefix) and full[len(prefix) :] not in KEYS_BY_NAME:
            name = full[len(prefix) :]
            close = difflib.get_close_matches(name, KEYS_BY_NAME, n=1)
            hint = f"did you mean {close[0]}?" if close else f"known keys: {', '.join(KEYS_BY_NAME)}"
            raise ConfigError(full, raw[full], f"unknown key ({hint})")


def image_variant(settings: Settings) -> str:
    """The torch build the image holds or is built with: cuda on NVIDIA nodes, else cpu (an empty
    imageVariant follows the nodes; a set one was checked to match them)."""
    return CUDA if gpu_instances.nvidia_instance(settings.node_instance_type) else CPU


def gpus_per_node(settings: Settings) -> int:
    """GPUs of one training node (0 on CPU stacks): each worker pod takes them all."""
    instance = gpu_instances.nvidia_instance(settings.node_instance_type)
    return instance.gpus if instance else 0


def is_gpu_stack(settings: Settings) -> bool:
    return gpus_per_node(settings) > 0


def efa_interfaces_per_node(settings: Settings) -> int:
    """EFA interfaces each worker requests (infra/specs/efa.py): all its node's, on an eks GPU stack
    whose instance type has EFA; 0 elsewhere (an `existing` cluster's nodes are not ours to equip)."""
    if getattr(settings, "target", "eks") != "eks":
        return 0
    found = instance_shapes.shape(settings.node_instance_type)  # the same rule as infra/specs/efa.py efa_interfaces
    return found.efa_interfaces if found and is_gpu_stack(settings) else 0


def data_md5_for(settings: Settings) -> str:
    """The checksum data-prep verifies: generated data has none; a mirror of the official
    tarball (https or s3) has the official one, which is the default."""
    return "" if settings.data_source.startswith("synthetic") else settings.data_md5


def worker_instance_types(settings: Settings) -> tuple[str, ...]:
    """The instance types the worker pool launches (infra/config/capacity.py)."""
    return capacity.worker_instance_types(settings.node_instance_type, settings.node_instance_types)
