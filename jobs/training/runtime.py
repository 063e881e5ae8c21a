"""Which hardware this process may use and how: the device, how many CPU threads, the numeric precision."""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from jobs import cli

log = logging.getLogger(__name__)


def device_for(local_rank: int = 0) -> torch.device:
    """The GPU torchrun assigned to this worker when CUDA is present, else the CPU; makes no CUDA
    context (DeviceWarmUp does, in the background)."""
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def choose_device(local_rank: int = 0) -> torch.device:
    """device_for, made this thread's current device."""
    device = device_for(local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


class DeviceWarmUp:
    """What a worker needs before its first step and that does not depend on its data, done in two
    threads while the main thread reads and checks the data: the GPU's CUDA context through torch
    (its first allocation; jobs.training.cuda_context may have made the context already) and, under
    torchrun, the import of torch._dynamo, which DistributedDataParallel imports on its first
    forward (3 s of CPU on a small machine). The two run side by side: CUDA's initialisation waits
    in the driver, which releases the GIL, as hashing the data (hashlib) and copying it do."""

    def __init__(self, device: torch.device, import_dynamo: bool):
        self.device = device
        self.seconds: dict[str, float] = {}
        self._errors: list[BaseException] = []
        jobs: dict[str, Callable[[], object]] = {"CUDA": self._cuda} if device.type == "cuda" else {}
        if import_dynamo:
            jobs["torch._dynamo"] = lambda: importlib.import_module("torch._dynamo")
        self._threads = [threading.Thread(target=self._timed, args=(name, job), name=f"warm-up {name}", daemon=True)
                         for name, job in jobs.items()]  # fmt: skip
        for thread in self._threads:
            thread.start()

    def _cuda(self) -> None:
        torch.empty(1, device=self.device)

    def _timed(self, name: str, job) -> None:
        started = time.perf_counter()
        try:
            job()
        except BaseException as error:  # re-raised in the main thread by wait()
            self._errors.append(error)
        self.seconds[name] = time.perf_counter() - started

    def wait(self) -> None:
        """Wait for it, then make the device this (main) thread's current one: a CUDA device is
        current per host thread, so the warm-up thread's choice does not carry over."""
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)

    def summary(self) -> str:
        return ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.seconds.items()) or "nothing"


def _cgroup_cpu_limit() -> float | None:
    """The container's CPU limit (Kubernetes `resources.limits.cpu`), or None when unlimited."""
    v2 = Path("/sys/fs/cgroup/cpu.max")  # "150000 100000" or "max 100000"
    v1_quota, v1_period = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    try:
        if v2.exists():
            quota, period = v2.read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        if v1_quota.exists():
            microseconds = int(v1_quota.read_text())
            return None if microseconds <= 0 else microseconds / int(v1_period.read_text())
    except (OSError, ValueError):
        pass
    return None


def configure_cpu_threads() -> int:
    """Use as many threads as the CPUs this container may really use.

    torch defaults to one thread per CPU of the *node*, but a pod limited to 15 of 16 CPUs
    that runs 16 threads gets throttled by the kernel every scheduling period. An explicit
    OMP_NUM_THREADS (torchrun sets 1 when it starts several workers per node) wins.
    """
    if "OMP_NUM_THREADS" in os.environ:
        return torch.get_num_threads()
    usable = len(os.sched_getaffinity(0))
    limit = _cgroup_cpu_limit()
    if limit is not None:
        usable = max(1, min(usable, math.floor(limit)))
    torch.set_num_threads(usable)
    return usable


# --- numeric precision --------------------------------------------------------------------------

PRECISIONS = ("auto", "fp32", "tf32", "bf16")
# The per-worker batch a CUDA device trains at when --batch-size is not given. At 128 this CNN
# leaves an H200 waiting on kernel launches (issue 40: 22,806 images/s at batch 128 against
# 111,519 at 512 with bf16 autocast, the model alone); docs/gpu.md has what this batch measured.
GPU_BATCH_SIZE = 1024
CPU_BATCH_SIZE = 128  # the workshop's batch, and every run's before issue 40


@dataclass(frozen=True)
class Precision:
    """How a worker does its arithmetic, resolved from --precision for its device."""

    name: str  # fp32 | tf32 | bf16
    channels_last: bool  # activations and weights in NHWC: the layout cuDNN's tensor-core kernels read

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.name == "bf16" else None

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The forward pass runs under this: bf16 autocast, or nothing."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=self.autocast_dtype)


def cuda_supports_bf16(device: torch.device) -> bool:
    """bf16 arithmetic in the GPU's own units: compute capability 8.0 (Ampere) and later. torch's
    is_bf16_supported() also says yes for older GPUs that only emulate it (slowly), so ask the
    capability."""
    return torch.cuda.get_device_capability(device)[0] >= 8


def resolve_precision(requested: str, device: torch.device) -> Precision:
    """--precision for this device. auto: bf16 autocast where the GPU has bf16 units, TF32 on an
    older GPU, fp32 on the CPU. tf32 and bf16 are refused on the CPU (one line): TF32 is a mode of
    NVIDIA's matrix units, and bf16 autocast on a CPU without bf16 units runs slower than fp32."""
    if requested not in PRECISIONS:
        raise cli.UsageError(f"--precision {requested}: must be one of {', '.join(PRECISIONS)}")
    if device.type != "cuda":
        if requested in ("tf32", "bf16"):
            raise cli.UsageError(
                f"--precision {requested} needs a CUDA GPU and this worker has none (it trains on the "
                "CPU): use --precision auto or fp32"
            )
        return Precision("fp32", channels_last=False)
    name = requested
    if requested == "auto":
        name = "bf16" if cuda_supports_bf16(device) else "tf32"
    elif requested == "bf16" and not cuda_supports_bf16(device):
        raise cli.UsageError(
            f"--precision bf16 needs a GPU of compute capability 8.0 or later; "
            f"{torch.cuda.get_device_name(device)} is {'.'.join(map(str, torch.cuda.get_device_capability(device)))}: "
            "use --precision auto, tf32 or fp32"
        )
    # channels_last pays where cuDNN runs the convolutions on tensor cores in half precision
    # (issue 40, H200, batch 512: bf16 111,519 images/s, bf16 + channels_last 118,431).
    return Precision(name, channels_last=name == "bf16")


def configure_precision(precision: Precision, device: torch.device, cudnn_benchmark: bool = False) -> None:
    """Set torch's process-wide switches for `precision` on a CUDA device (nothing on the CPU).

    fp32 is strict: cuDNN's convolutions default to TF32 on Ampere and later
    (torch.backends.cudnn.allow_tf32 is True by default), so fp32 turns that off too. bf16 keeps
    TF32 for what autocast leaves in float32. cudnn_benchmark: cuDNN times its convolution
    algorithms once per input shape and keeps the fastest (every step but an epoch's last has the
    same shape); without it, cuDNN's heuristics choose.
    """
    if device.type != "cuda":
        return
    tf32 = precision.name != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = cudnn_benchmark


def default_batch_size(device: torch.device) -> int:
    return GPU_BATCH_SIZE if device.type == "cuda" else CPU_BATCH_SIZE
