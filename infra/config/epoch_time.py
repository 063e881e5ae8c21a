"""Epochs that cannot finish inside jobTimeoutMinutes at the rate measured for the stack's GPU, arithmetic
and batch (infra/aws/training_rates.py): a warning, as for availabilityZoneCount (the rate is read to
about 20 %, docs/gpu.md, so it informs and does not refuse).

The time is a lower bound: every GPU of maxWorkers nodes trains at the rate one GPU reached alone (a GPU
of a DistributedDataParallel group does the same work plus the gradients' all-reduce, so it is no faster),
and the node's launch, the image pull and the rendezvous are not counted. Nothing is said where no rate
was measured (any CPU type, another GPU, batch or arithmetic), nor for a trainingCommand or a
dataPrepCommand of the user's own (what an epoch is, and how long, is theirs).
"""

from __future__ import annotations

import math
from typing import Any

from infra.aws import gpu_instances, nvidia_gpus, training_rates
from infra.config.keys import PROJECT, SYNTHETIC_DEFAULT_PER_CLASS

# CIFAR-10: "There are 50000 training images and 10000 test images" (https://www.cs.toronto.edu/~kriz/cifar.html);
# a generated set has its count per class in each of the 10 classes (jobs/data/cifar.py write_synthetic).
CIFAR10_TRAINING_IMAGES = 50_000
CLASSES = 10


def training_images(data_source: str) -> int:
    """Images in one epoch of the CIFAR-10 job for a dataSource."""
    if data_source.startswith("synthetic"):
        return CLASSES * int(data_source.partition(":")[2] or SYNTHETIC_DEFAULT_PER_CLASS)
    return CIFAR10_TRAINING_IMAGES


def arithmetic(precision: str, gpu: str) -> str:
    """What `--precision` resolves to on this GPU (jobs/training/runtime.py resolve_precision): auto is
    bf16 from compute capability 8.0, TF32 below."""
    if precision != "auto":
        return precision
    return "bf16" if nvidia_gpus.NVIDIA_GPUS[gpu].compute_capability >= (8, 0) else "tf32"


def epochs_warning(v: dict[str, Any]) -> str | None:
    """One line when epochs x the measured epoch time (plus the time to the first step) passes
    jobTimeoutMinutes, with both numbers and what to change; None otherwise or without a rate."""
    if v["training_command"] or v["data_prep_command"]:
        return None
    instance = gpu_instances.nvidia_instance(v["node_instance_type"])
    if instance is None or instance.gpu not in nvidia_gpus.NVIDIA_GPUS:
        return None
    done_as = arithmetic(v["precision"], instance.gpu)
    rate = training_rates.measured(instance.gpu, done_as, v["batch_size"])
    if rate is None:
        return None
    gpus = v["max_workers"] * instance.gpus
    images = training_images(v["data_source"])
    epoch_seconds = images / (rate.images_per_second * gpus)
    seconds = rate.first_step_seconds + v["epochs"] * epoch_seconds
    deadline = v["job_timeout_minutes"] * 60
    if seconds <= deadline:
        return None
    fitting = math.floor((deadline - rate.first_step_seconds) / epoch_seconds)
    return (
        f"config {PROJECT}:epochs={v['epochs']} cannot finish inside jobTimeoutMinutes={v['job_timeout_minutes']} "
        f"({deadline} s) at the measured rate: {v['epochs']} epochs of {images} images at {rate.images_per_second:g} "
        f"images/s per {instance.gpu} GPU ({done_as}, batch {v['batch_size']}; {rate.source}) on {gpus} GPUs "
        f"(maxWorkers {v['max_workers']} x {instance.gpus}) take at least {seconds:.0f} s, {rate.first_step_seconds:g} s "
        f"of it to the first step; set jobTimeoutMinutes to at least {math.ceil(seconds / 60)}"
        + (f" or epochs to at most {fitting}" if fitting >= 1 else "")
    )
