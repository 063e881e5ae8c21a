"""jobs.data.sampling: what "the same samples" means when the world size changes mid-epoch.

Pure functions, computed on every worker alone; the torchrun runs in test_preemption.py check that
the workers really train on these images."""

from __future__ import annotations

import random

import pytest
import torch

from jobs.data import sampling


def walk(num_images: int, batch_size: int, world_sizes: list[int], changes: list[int]) -> list[list[list[int]]]:
    """Walk one epoch from position 0, switching to the next world size after each number of
    steps in `changes`; returns every step's shares (positions), rank by rank."""
    steps, position, sizes = [], 0, list(world_sizes)
    countdown = list(changes)
    while position < num_images:
        world = sizes[0]
        shares = [sampling.next_step(position, num_images, world, batch_size, rank) for rank in range(world)]
        assert len({(s.start, s.stop) for s in shares}) == 1  # every rank computes the same step
        steps.append([list(range(s.share_start, s.share_stop)) for s in shares])
        position = shares[0].stop
        if countdown:
            countdown[0] -= 1
            if countdown[0] == 0 and len(sizes) > 1:
                countdown.pop(0)
                sizes.pop(0)
    return steps


@pytest.mark.parametrize("num_images, batch_size", [(103, 8), (120, 5), (7, 3), (64, 64)])
def test_any_sequence_of_world_sizes_trains_every_position_once_in_order(num_images, batch_size):
    rng = random.Random(num_images)
    for _ in range(50):
        world_sizes = [rng.randint(1, 5) for _ in range(4)]
        changes = [rng.randint(1, 4) for _ in range(3)]
        steps = walk(num_images, batch_size, world_sizes, changes)
        flat = [position for step in steps for share in step for position in share]
        assert flat == list(range(num_images)), (world_sizes, changes)


def test_full_steps_give_every_rank_exactly_one_batch_and_the_last_step_near_equal_shares():
    steps = walk(103, 8, [3], [])
    assert [[len(share) for share in step] for step in steps] == [[8, 8, 8]] * 4 + [[3, 2, 2]]
    assert steps[0] == [list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]  # contiguous, in rank order
    assert sampling.steps_in_epoch(0, 103, 3, 8) == 5 and sampling.steps_in_epoch(96, 103, 3, 8) == 1


def test_a_rank_is_left_without_images_only_when_fewer_images_than_workers_are_left():
    # 2 workers stopped 2 images before the end; 3 resume: one of them has nothing to train on.
    shares = [sampling.next_step(118, 120, 3, 5, rank) for rank in range(3)]
    assert [s.share_size for s in shares] == [1, 1, 0] and shares[2].share_start == shares[2].share_stop == 120
    for left in range(3, 16):  # 3 images or more for 3 workers: nobody idles
        assert all(sampling.next_step(120 - left, 120, 3, 5, rank).share_size > 0 for rank in range(3))


def test_the_epoch_order_depends_on_seed_and_epoch_only():
    first = sampling.epoch_order(1000, seed=7, epoch=2)
    assert sorted(first.tolist()) == list(range(1000))
    assert torch.equal(first, sampling.epoch_order(1000, seed=7, epoch=2))
    assert not torch.equal(first, sampling.epoch_order(1000, seed=7, epoch=3))
    assert not torch.equal(first, sampling.epoch_order(1000, seed=8, epoch=2))
    # the formula jobs.training.train used before this module: a run's order did not change with it
    assert torch.equal(first, torch.randperm(1000, generator=torch.Generator().manual_seed(7 * 100_003 + 2)))


@pytest.mark.parametrize("position", [-1, 120, 500])
def test_a_position_outside_the_epoch_is_a_bug(position):
    with pytest.raises(ValueError, match=f"position {position} is outside the epoch's 0..119"):
        sampling.next_step(position, 120, 2, 5, 0)
