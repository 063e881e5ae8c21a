"""Which hardware this process may use: the device, and how many CPU threads."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import torch

log = logging.getLogger(__name__)


def choose_device(local_rank: int = 0) -> torch.device:
    """The GPU torchrun assigned to this worker when CUDA is present, else the CPU."""
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def _cgroup_cpu_limit() -> float | None:
    """The container's CPU limit (Kubernetes `resources.limits.cpu`), or None when unlimited."""
    v2 = Path("/sys/fs/cgroup/cpu.max")  # "150000 100000" or "max 100000"
    v1_quota, v1_period = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    try:
        if v2.exists():
            quota, period = v2.read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        if v1_quota.exists():
            quota = int(v1_quota.read_text())
            return None if quota <= 0 else quota / int(v1_period.read_text())
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
