"""Where this worker sits in a torchrun job, and the process group that connects the workers.

torchrun (and, on the cluster, the TorchElastic agent in every worker pod) tells each worker
its place through environment variables. Started without torchrun, e.g. `python -m jobs.training.train`
on a laptop, the worker is alone: rank 0 of 1, and no process group is created.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class WorkerPlace:
    rank: int
    world_size: int
    local_rank: int
    restart_count: int  # how many times torchrun restarted this worker group
    launched_by_torchrun: bool

    @classmethod
    def alone(cls) -> WorkerPlace:
        return cls(rank=0, world_size=1, local_rank=0, restart_count=0, launched_by_torchrun=False)

    @classmethod
    def from_environment(cls) -> WorkerPlace:
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            return cls.alone()
        return cls(
            rank=int(os.environ["RANK"]),
            world_size=int(os.environ["WORLD_SIZE"]),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
            launched_by_torchrun=True,
        )

    @property
    def is_leader(self) -> bool:
        """Rank 0 writes the shared files (checkpoint, model, history) and logs progress."""
        return self.rank == 0


def join_process_group(place: WorkerPlace, device: torch.device, timeout_seconds: float) -> None:
    """Connect to the other workers: gloo on CPU, NCCL on GPUs, with a short timeout.

    When a peer dies, a survivor blocked in a collective only fails (and lets its torchrun
    agent restart the group from the last checkpoint) after this timeout. The default of 30
    minutes would stall an elastic job for half an hour, so we keep it to seconds.

    The group is deliberately never destroyed. Tearing down a gloo group joins gloo's threads
    while holding the GIL, and a gloo thread still releasing the last collective's tensors
    waits for the GIL: the worker hangs for ever, and its agent with it (seen 3 times in about
    40 two-worker runs on a busy 2-core machine; pytorch/pytorch issues 56297 and 190489).
    Workers end with os._exit instead (jobs.cli.run), which releases everything at once.
    """
    if not place.launched_by_torchrun:
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend,
        timeout=timedelta(seconds=timeout_seconds),
        device_id=device if device.type == "cuda" else None,
    )
    # A second, CPU-only group for the few integers the workers agree on at every step (see
    # jobs.elastic.step_vote): on its own gloo connections it never waits for, or is ordered among,
    # the gradient all-reduces that DistributedDataParallel issues on the main group, and on GPU
    # stacks reading its result never waits for the GPU.
    global _control_group
    _control_group = dist.new_group(backend="gloo")


_control_group = None


def _is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def sum_over_workers(values: torch.Tensor) -> torch.Tensor:
    """Element-wise sum of `values` across all workers (the tensor itself when alone)."""
    if _is_distributed():
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def maxima_over_workers(values: Sequence[int], device: torch.device) -> list[int]:
    """The element-wise maximum of integers over all workers, in one collective (a minimum is
    the maximum of the negated value)."""
    both = torch.tensor(list(values), dtype=torch.int64, device=device)
    if _is_distributed():
        dist.all_reduce(both, op=dist.ReduceOp.MAX)
    return [int(value) for value in both.tolist()]


# What gloo says when another worker's process went away in the middle of a collective: a plain
# RuntimeError naming its transport and the peer ("[.../gloo/transport/tcp/pair.cc:553] Connection closed by
# peer [127.0.0.1]:9633", "... Read error ... Connection reset by peer"). Not a timeout (a peer that is slow, or
# a collective it never entered: a bug whose traceback says which), not a store error, not gloo's enforce
# failures ("Is there a distributed collective mismatch in your code?"): those keep their tracebacks.
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer")
_NOT_A_PEER = ("mismatch", "enforce fail")


def lost_a_peer(error: BaseException) -> bool:
    """Whether `error` is a collective that failed because another worker's process went away (torchrun then
    re-forms the group from the last checkpoint), not a bug in this process."""
    if not _is_distributed() or not isinstance(error, RuntimeError):
        return False
    text = str(error)
    return any(mark in text for mark in _PEER_GONE) and not any(mark in text.lower() for mark in _NOT_A_PEER)


def control_group():
    """The CPU-only gloo group of join_process_group (None when alone)."""
    return _control_group


def wait_for_all_workers_on_cpu() -> None:
    """A barrier on the CPU control group: never waits behind queued GPU work."""
    if _is_distributed():
        dist.barrier(group=_control_group)


def wait_for_all_workers() -> None:
    if _is_distributed():
        dist.barrier()
