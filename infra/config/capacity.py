"""Worker capacity settings: which instance types the worker pool draws from, and the rules that make
a Spot pool safe (docs/design-notes.md, "Worker capacity"; docs/elastic-capacity.md).

- `nodeInstanceTypes` empty: the pool uses every type the price catalog carries (infra/aws/
  instance_catalog.py) of exactly `nodeInstanceType`'s shape (infra/aws/instance_shapes.py: vCPUs,
  memory, GPUs and GPU model, architectures).
  Listed: each must be of that shape (the workers' requests, /dev/shm and --nproc_per_node are
  sized from `nodeInstanceType`, so a type of another shape would run them differently).
- Spot needs at least two types: EC2 reclaims Spot capacity per type and zone, and a pool of one
  type has nowhere else to go (the issue's "several types of one shape").
- The workers' grace period must fit in the 2-minute Spot notice, after the time the notice takes
  to reach Karpenter and the pod delete to reach the kubelet (NOTICE_DELIVERY_SECONDS).
- maxRestarts: each preemption costs every surviving worker's torchrun one restart (a failed
  worker group; a node joining is a membership change that costs none: torch
  distributed/elastic/agent/server/api.py `_invoke_run`), so a Spot run must be allowed one per
  SPOT_SIZING_MINUTES of its deadline.
"""

from __future__ import annotations

import math
from typing import Any

from infra.aws import gpu_instances, instance_catalog, instance_shapes
from infra.config.errors import ConfigError
from infra.config.keys import PROJECT

ON_DEMAND, SPOT = "on-demand", "spot"
CAPACITY_TYPES = (ON_DEMAND, SPOT)

# EC2 gives a Spot instance a two-minute warning before it interrupts it (Karpenter docs v1.14,
# concepts/disruption.md, "Interruption": "Spot interruptions have a __2 minute notice__").
SPOT_NOTICE_SECONDS = 120
# Our budget, not a measured figure: the warning's trip through EventBridge and SQS to Karpenter,
# the NodeClaim delete and the pod delete reaching the kubelet. Only a real cluster can measure it
# (Karpenter's interruption controller exports it as a histogram, MessageLatency).
NOTICE_DELIVERY_SECONDS = 30
# torchrun's own shutdown on SIGTERM (its 30 s wait for the workers, torch api.py `_shutdown`) plus
# the agent's exit (infra/specs/workloads.py TORCHRUN_SHUTDOWN_SECONDS + 15): less would SIGKILL a
# worker that is still saving.
MIN_WORKER_GRACE_SECONDS = 45
MAX_SPOT_WORKER_GRACE_SECONDS = SPOT_NOTICE_SECONDS - NOTICE_DELIVERY_SECONDS
# The rate a Spot run is sized to survive: one preemption every 5 minutes of its deadline, the
# rate issue 23 sets its goodput target at.
SPOT_SIZING_MINUTES = 5


def _same_shape(a: str, b: str) -> bool:
    shape_a, shape_b = instance_shapes.shape(a), instance_shapes.shape(b)
    return shape_a is not None and shape_a == shape_b


def _shape_text(instance_type: str) -> str:
    shape = instance_shapes.shape(instance_type)
    if shape is None:
        return "not an instance type EC2 offers for Linux"
    gpus = f", {shape.gpus} x {shape.gpu}" if shape.gpus else ""
    return f"{shape.vcpus} vCPUs, {shape.memory_mib / 1024:g} GiB{gpus}"


def worker_instance_types(node_instance_type: str, listed: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The pool's types: the listed ones, or every type the price catalog carries of nodeInstanceType's
    shape (nodeInstanceType alone when the catalog carries none other). Graviton and unknown-GPU types
    never qualify (the rule of nodeInstanceType itself)."""
    if listed:
        return tuple(sorted(set(listed)))
    same = [
        t
        for t in instance_catalog.carried()
        if _same_shape(t, node_instance_type)
        and not (gpu_instances.is_gpu_family(t) and gpu_instances.nvidia_instance(t) is None)
    ]
    return tuple(sorted(set(same) | {node_instance_type}))


def check_capacity(v: dict[str, Any]) -> None:
    p = PROJECT
    node_type = v["node_instance_type"]
    listed = v["node_instance_types"]
    if listed and node_type not in listed:
        raise ConfigError(
            f"{p}:nodeInstanceTypes",
            listed,
            f"must include nodeInstanceType ({node_type}), whose shape the workers are sized for",
        )
    for other in listed:
        if other != node_type and not _same_shape(other, node_type):
            raise ConfigError(
                f"{p}:nodeInstanceTypes",
                listed,
                f"{other} ({_shape_text(other)}) is not of nodeInstanceType {node_type}'s shape "
                f"({_shape_text(node_type)}): every type of the pool must have the same vCPUs, "
                "memory, GPUs and GPU model",
            )
    if v["capacity_type"] != SPOT:
        return
    types = worker_instance_types(node_type, listed)
    if len(types) < 2:
        raise ConfigError(
            f"{p}:capacityType",
            SPOT,
            f"needs at least two instance types of one shape, and the pool has only {types[0]}: list "
            f"more in nodeInstanceTypes ({_shape_text(node_type)} each), so that a reclaimed type "
            "can be replaced by another",
        )
    grace = v["worker_grace_seconds"]
    if grace > MAX_SPOT_WORKER_GRACE_SECONDS:
        raise ConfigError(
            f"{p}:workerGraceSeconds",
            grace,
            f"must be <= {MAX_SPOT_WORKER_GRACE_SECONDS} with capacityType spot: the {SPOT_NOTICE_SECONDS} s "
            f"Spot notice less {NOTICE_DELIVERY_SECONDS} s for it to reach the worker",
        )
    needed = math.ceil(v["job_timeout_minutes"] / SPOT_SIZING_MINUTES)
    if v["max_restarts"] < needed:
        raise ConfigError(
            f"{p}:maxRestarts",
            v["max_restarts"],
            f"must be >= {needed} with capacityType spot: each preemption costs every surviving worker "
            f"one restart, and a Spot run is sized for one every {SPOT_SIZING_MINUTES} minutes of its "
            f"{v['job_timeout_minutes']}-minute deadline (jobTimeoutMinutes)",
        )
