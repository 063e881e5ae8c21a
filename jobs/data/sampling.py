"""Which images each worker trains on at each step: one global order per epoch, whatever the world size.

Every epoch has one order of all N training images, drawn from the run seed and the epoch
number alone (never from the number of workers). Training walks along that order with a
cursor, `position`: the images before it are done. A step at world size W takes the next W x B
images (B = batch size per worker) and splits them into W contiguous shares, rank r taking the
r-th. The last step of an epoch takes what is left, in near-equal shares.

So "the same samples" has one meaning whatever happens to the workers: an epoch trains on
order[0:N], each image once, in this order, and a checkpoint only has to remember the epoch and
the position. A run that lost a worker at position p and went on with fewer (or more) workers
trains on order[p:] next, exactly as the uninterrupted run would have; only how the images are
grouped into steps after p differs, because a step holds W x B of them. At an unchanged world
size the steps are the same ones too.

Nothing here touches torch.distributed: every worker computes the same plan on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def order_seed(seed: int, epoch: int) -> int:
    # The formula jobs.training.train always used, so a run's order did not change with this module.
    return seed * 100_003 + epoch


def epoch_order(num_images: int, seed: int, epoch: int) -> torch.Tensor:
    """The epoch's order of image indices (int64, on the CPU): the same on every worker and at every world size."""
    return torch.randperm(num_images, generator=torch.Generator().manual_seed(order_seed(seed, epoch)))


@dataclass(frozen=True)
class Step:
    """One step at one world size: positions [start, stop) of the epoch's order, and this rank's part of them."""

    start: int
    stop: int
    share_start: int  # this rank's positions: [share_start, share_stop)
    share_stop: int

    @property
    def share_size(self) -> int:
        return self.share_stop - self.share_start

    @property
    def size(self) -> int:
        return self.stop - self.start


def next_step(position: int, num_images: int, world_size: int, batch_size: int, rank: int) -> Step:
    """The step that starts at `position`: W x B images, or all that are left of the epoch.

    The shares are contiguous and differ by at most one image: for a full step every rank gets
    exactly B. A rank gets nothing only when fewer images than workers are left, which happens
    only after the world grew mid-epoch; jobs.training.train then lets it take the step with a
    zero-weight sample (DistributedDataParallel needs every rank in every step)."""
    if not 0 <= position < num_images:
        raise ValueError(f"position {position} is outside the epoch's 0..{num_images - 1}")
    stop = min(position + world_size * batch_size, num_images)
    base, extra = divmod(stop - position, world_size)
    share_start = position + rank * base + min(rank, extra)
    share_stop = share_start + base + (1 if rank < extra else 0)
    return Step(position, stop, share_start, share_stop)


def steps_in_epoch(position: int, num_images: int, world_size: int, batch_size: int) -> int:
    """How many steps remain from `position` to the end of the epoch at this world size."""
    return -(-(num_images - position) // (world_size * batch_size))
